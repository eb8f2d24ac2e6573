"""The API reference's machinery: attrs classes get the constructor signature attrs
wrote, and docstring roles render as plain code (``mkdocs build --strict`` runs in CI)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

griffe = pytest.importorskip("griffe")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import griffe_attrs  # noqa: E402 - tools/ is not a package
import mkdocs_hooks  # noqa: E402

PACKAGE: Any = griffe.load(
    "handoffs", search_paths=[str(ROOT / "src")],
    extensions=griffe.load_extensions(griffe_attrs.AttrsSignatures),
)


def _init(path: str) -> list[tuple[str, str, str | None]]:
    init = PACKAGE[path].members["__init__"]
    return [(p.name, p.kind.value, None if p.default is None else str(p.default))
            for p in init.parameters]


def test_an_attrs_class_shows_the_init_attrs_wrote() -> None:
    assert _init("contracts._sender.Sender") == [
        ("self", "positional or keyword", None),
        ("contract", "keyword-only", None),
        ("key", "keyword-only", None),
        ("governance", "keyword-only", None),
        ("grants", "keyword-only", None),
        ("clock", "keyword-only", "utc_now"),
    ]
    params = {p[0]: p for p in _init("contracts._encoders.GovernanceService")}
    assert params["valid_for"] == ("valid_for", "keyword-only", "None")
    assert params["may_decide"] == ("may_decide", "keyword-only", "False")
    annotations = {p.name: str(p.annotation)
                   for p in PACKAGE["contracts._contract.Contract"].members["__init__"].parameters}
    assert annotations["policy"] == "Policy[A]"


def test_a_written_init_and_a_plain_class_are_left_alone() -> None:
    # UnknownContract is an exception, not an attrs class: no synthetic __init__.
    assert "__init__" not in PACKAGE["_errors.UnknownContract"].members
    # ReceiptValidationError writes its own __init__, which stays as written.
    init = PACKAGE["_errors.ReceiptValidationError"].members["__init__"]
    assert init.lineno is not None


def test_long_or_unreadable_defaults_are_elided() -> None:
    assert griffe_attrs._written(object()) == "..."
    assert griffe_attrs._written("x" * 50) == "..."
    assert griffe_attrs._written(2000) == "2000"
    assert griffe_attrs._written(len) == "len"


def test_docstring_roles_render_as_plain_code() -> None:
    html = (":class:<code>~handoffs.contracts.Sender</code>, :func:<code>sign</code>, "
            "<code>a.b</code>")
    assert mkdocs_hooks.on_page_content(html) == (
        "<code>Sender</code>, <code>sign</code>, <code>a.b</code>")
