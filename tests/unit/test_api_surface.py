"""The public surface: each face's ``__all__``, small, each name public in one place.

The faces by audience (issue #21): a namespace over ~40 names wants splitting. The cap
on the faces' total (150) is retired (issue #29): it pushed the extension seams users
implement and the errors they catch onto private paths. A name outside an ``__all__``
is not public (see docs/reference/compatibility.md). Every error is also listed in
``handoffs.errors``; a name that moved raises an ImportError naming its new place.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import handoffs

# The library's faces: every public module but the adapters (one per framework, each
# with its own extra), the examples and the command line.
LIBRARY = ["handoffs", *sorted(
    info.name for info in pkgutil.walk_packages(handoffs.__path__, "handoffs.")
    if not any(part.startswith("_") for part in info.name.split("."))
    and info.name.split(".")[1] not in ("adapters", "examples", "cli")
)]

PER_NAMESPACE = 40


def _faces() -> dict[str, list[str]]:
    faces = {}
    for name in LIBRARY:
        module = importlib.import_module(name)
        faces[name] = list(getattr(module, "__all__", ()))
    return faces


def test_the_faces_are_small() -> None:
    faces = _faces()
    over = {name: len(names) for name, names in faces.items() if len(names) > PER_NAMESPACE}
    assert over == {}


def test_the_faces_are_the_expected_ones() -> None:
    assert {"handoffs", "handoffs.contracts", "handoffs.contracts.policy",
            "handoffs.contracts.versions", "handoffs.integrity", "handoffs.receivers",
            "handoffs.receivers.models", "handoffs.receivers.chains", "handoffs.lab",
            "handoffs.lab.perturbations", "handoffs.lab.reports", "handoffs.testing",
            "handoffs.service", "handoffs.errors"} <= set(LIBRARY)


def test_every_public_name_resolves() -> None:
    for name, names in _faces().items():
        module = importlib.import_module(name)
        missing = [n for n in names if not hasattr(module, n)]
        assert missing == [], name


def test_one_name_per_concept_across_the_faces() -> None:
    """No public name is exported by two faces (one way to import each thing), but for
    ``handoffs.errors``, which lists every error: a face may re-export the same class."""
    seen: dict[str, str] = {}
    faces = _faces()
    errors = set(faces.pop("handoffs.errors"))
    for face, names in faces.items():
        for name in names:
            if name == "__version__" or name in errors:
                continue
            assert name not in seen, f"{name} is public in {seen.get(name)} and {face}"
            seen[name] = face
    assert "HandoffsError" in errors


@pytest.mark.parametrize("face", LIBRARY)
def test_each_name_is_declared_once(face: str) -> None:
    """A face imports (or defines) its names and lists them in ``__all__``: no lazy table
    beside them, no module ``__getattr__`` that resolves names nothing declares."""
    module = importlib.import_module(face)
    assert not hasattr(module, "_LAZY")
    assert not hasattr(module, "_NOT_PUBLIC")
    hook = vars(module).get("__getattr__")
    # the one module hook allowed: a name that left the face raises, naming its place
    assert hook is None or set(hook.moved).isdisjoint(module.__all__)
    source = module.__file__
    assert source is not None
    tree = ast.parse(Path(source).read_text(encoding="utf-8"))
    declared = {alias.asname or alias.name for node in tree.body
                if isinstance(node, ast.ImportFrom) for alias in node.names}
    declared |= {node.name for node in tree.body
                 if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)}
    declared |= {target.id for node in tree.body if isinstance(node, ast.Assign | ast.AnnAssign)
                 for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                 if isinstance(target, ast.Name)}
    assert set(module.__all__) <= declared


def test_the_root_imports_no_part() -> None:
    assert handoffs.__all__ == ["HandoffsError", "MissingExtra", "__version__"]
