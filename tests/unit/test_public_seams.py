"""Every type a user meets is importable from a public module (issue #29).

A type in a public signature (a parameter, a return, an attribute of a public class)
or named under a public docstring's ``Raises:`` is one a user implements, catches or
holds: each is reachable from a public module's ``__all__``. And no documentation page
imports, links or documents a private path (a module or attribute whose name starts
with ``_``).
"""

from __future__ import annotations

import collections.abc
import importlib
import inspect
import pkgutil
import re
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

import handoffs

ROOT = Path(__file__).resolve().parents[2]

# Every public module: no part of its dotted name starts with ``_``. The command line
# is a program, not an import surface.
PUBLIC = ["handoffs", *sorted(
    info.name for info in pkgutil.walk_packages(handoffs.__path__, "handoffs.")
    if not any(part.startswith("_") for part in info.name.split("."))
    and not info.name.startswith("handoffs.cli")
)]

# Every module of the library, private ones too: the names an annotation written under
# ``TYPE_CHECKING`` refers to are looked up here.
EVERY = [info.name for info in pkgutil.walk_packages(handoffs.__path__, "handoffs.")
         if not info.name.startswith("handoffs.cli")]


def _import(name: str) -> types.ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:  # an adapter whose framework (an extra) is not installed
        return None


def _faces() -> dict[str, types.ModuleType]:
    return {name: module for name in PUBLIC if (module := _import(name)) is not None}


def _reachable() -> set[int]:
    return {id(getattr(module, name)) for module in _faces().values()
            for name in getattr(module, "__all__", ())}


def _namespace() -> dict[str, Any]:
    names: dict[str, Any] = {}
    for name in EVERY:
        module = _import(name)
        if module is None:
            continue
        for attr, value in vars(module).items():
            if isinstance(value, type) and value.__module__.startswith("handoffs"):
                names.setdefault(attr, value)
    return names


def _hints(obj: Any, globalns: dict[str, Any]) -> dict[str, Any]:
    try:
        # the module's own names first; a name imported only under TYPE_CHECKING is
        # looked up among every class of the library
        return typing.get_type_hints(obj, globalns={**_NAMESPACE, **globalns})
    except (NameError, TypeError, AttributeError):
        return {}


def _classes(hint: Any) -> Iterator[type]:
    if isinstance(hint, type) and not isinstance(hint, types.GenericAlias):
        yield hint
    origin = typing.get_origin(hint)
    if isinstance(origin, type) and origin.__module__.startswith("handoffs"):
        yield origin
    for arg in typing.get_args(hint):
        if isinstance(arg, list):  # Callable[[A, B], C]
            for item in arg:
                yield from _classes(item)
        else:
            yield from _classes(arg)


_RAISES = re.compile(r"^\s*Raises:\s*$")
_RAISED = re.compile(r"^\s+(?::\w+:`~?)?([A-Z][\w.]*)`?:")


def _raised(doc: str | None) -> Iterator[str]:
    if not doc:
        return
    lines = inspect.cleandoc(doc).splitlines()
    inside = False
    for line in lines:
        if _RAISES.match(line):
            inside = True
            continue
        if inside:
            if line and not line[0].isspace():
                inside = False
                continue
            if (match := _RAISED.match(line)) and len(line) - len(line.lstrip()) <= 4:
                yield match.group(1).rpartition(".")[2]


def _callable(value: Any) -> Any:
    if isinstance(value, staticmethod | classmethod):
        return value.__func__
    if isinstance(value, property):
        return value.fget
    return value


def _members(obj: Any) -> Iterator[tuple[str, Any]]:
    """The callables a user reaches from a public name: itself, a class's constructor
    and its public methods and properties."""
    if inspect.isclass(obj):
        yield "", obj
        init = obj.__dict__.get("__init__")
        if init is not None:
            yield ".__init__", init
        for attr, value in vars(obj).items():
            if attr.startswith("_") and attr not in ("__call__", "__iter__", "__enter__"):
                continue
            if inspect.isfunction(function := _callable(value)):
                yield f".{attr}", function
    elif callable(obj):
        yield "", obj


_NAMESPACE: dict[str, Any] = {}


def _check_class(member: type, where: str, globalns: dict[str, Any],
                 check: Callable[[str, type], None]) -> None:
    if attrs.has(member):
        hints = _hints(member, globalns)
        for field in attrs.fields(member):
            if not field.name.startswith("_"):
                for cls in _classes(hints.get(field.name)):
                    check(f"{where}.{field.name}", cls)
    for base in member.__mro__[1:]:
        if not base.__name__.startswith("_"):
            check(f"{where} (base)", base)


def _unreachable() -> dict[str, set[str]]:
    _NAMESPACE.update(_namespace())
    reachable = _reachable()
    missing: dict[str, set[str]] = {}

    def check(where: str, cls: type) -> None:
        if cls.__module__.startswith("handoffs") and id(cls) not in reachable:
            missing.setdefault(f"{cls.__module__}.{cls.__qualname__}", set()).add(where)

    for face, module in _faces().items():
        for name in getattr(module, "__all__", ()):
            for suffix, member in _members(getattr(module, name)):
                where = f"{face}.{name}{suffix}"
                globalns = vars(importlib.import_module(getattr(member, "__module__", face)))
                if inspect.isclass(member):
                    _check_class(member, where, globalns, check)
                else:
                    for hint in _hints(member, globalns).values():
                        for cls in _classes(hint):
                            check(where, cls)
                for raised in _raised(getattr(member, "__doc__", None)):
                    value = globalns.get(raised, _NAMESPACE.get(raised))
                    if isinstance(value, type):
                        check(f"{where} (raises)", value)
    return missing


def test_every_type_in_a_public_signature_is_public() -> None:
    """A protocol a user implements, an error a user catches and a value a user holds
    can each be imported from a public module."""
    missing = _unreachable()
    assert {name: sorted(where)[:3] for name, where in missing.items()} == {}


def test_the_errors_module_holds_every_error() -> None:
    """``handoffs.errors`` lists every public error class (attrs' and sigstore's
    shape): catch any of them without knowing which part raised it. An adapter's
    error stays with its framework (an extra), in the adapter's module."""
    errors = importlib.import_module("handoffs.errors")
    listed = {id(getattr(errors, name)) for name in errors.__all__}
    for face, module in _faces().items():
        if face.startswith("handoffs.adapters."):
            continue
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            if isinstance(value, type) and issubclass(value, BaseException):
                assert id(value) in listed, f"{face}.{name} is not in handoffs.errors"
    for name in errors.__all__:
        value = getattr(errors, name)
        assert isinstance(value, type), name
        assert issubclass(value, BaseException) or attrs.has(value), name


def _pages() -> list[Path]:
    # The design notes are history (the changelog's old narrative): the private paths
    # they name are marked there as not API.
    history = {ROOT / "docs" / "explanation" / "design-notes.md"}
    return sorted({*ROOT.joinpath("docs").rglob("*.md"), ROOT / "README.md"} - history)


_PRIVATE = re.compile(r"\bhandoffs(?:\.\w+)*?\._(?!_)\w+")


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_names_a_private_path(page: Path) -> None:
    """A page imports, documents and links only public modules (a private path is not
    part of the API and may move in any release)."""
    text = page.read_text(encoding="utf-8")
    found = sorted({m.group(0) for m in _PRIVATE.finditer(text)})
    assert found == []


def test_the_page_check_sees_a_private_path() -> None:
    assert _PRIVATE.search("from handoffs.contracts._schema import write_schema")
    assert _PRIVATE.search(".. autoclass:: handoffs.receivers._replay.ReplayStore")
    assert not _PRIVATE.search("from handoffs.contracts import Contract")
    assert not _PRIVATE.search("handoffs.__version__ and handoffs.__file__")


def test_the_signature_walk_sees_nested_types() -> None:
    hint = collections.abc.Callable[[int], list[handoffs.HandoffsError]] | None
    assert handoffs.HandoffsError in set(_classes(hint))
    assert list(_raised("""Do.\n\nRaises:\n    ProofError: when.\n    KeyError: no.\n""")) == [
        "ProofError", "KeyError"]
