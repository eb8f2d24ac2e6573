"""A name that left its face since 0.1.0 says where it lives now (issue #29 item 7).

``from handoffs.contracts import Field`` raises :class:`~handoffs.errors.MovedName`
(an ``ImportError``) naming :mod:`handoffs.contracts.policy`; a name that was replaced
names its replacement. The migration page's table is the same table.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from handoffs._moved import MOVED
from handoffs.errors import HandoffsError, MovedName

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "migration.md"
ENTRIES = sorted((face, name) for face, names in MOVED.items() for name in names)


def test_field_names_its_new_place() -> None:
    with pytest.raises(ImportError, match=r"from handoffs\.contracts\.policy import Field"):
        from handoffs.contracts import Field
    with pytest.raises(MovedName) as info:
        from handoffs.contracts import Field  # noqa: F401
    assert (info.value.name, info.value.face, info.value.place, info.value.code) == (
        "Field", "handoffs.contracts", "handoffs.contracts.policy", "moved-name")
    assert isinstance(info.value, HandoffsError)


@pytest.mark.parametrize(("face", "name"), ENTRIES, ids=[f"{f}.{n}" for f, n in ENTRIES])
def test_each_moved_name_raises_with_its_place(face: str, name: str) -> None:
    module = importlib.import_module(face)
    assert name not in module.__all__
    with pytest.raises(MovedName) as info:
        getattr(module, name)
    place = MOVED[face][name]
    assert place in str(info.value)
    if place.startswith("handoffs") and " " not in place:
        new = importlib.import_module(place)
        assert name in new.__all__, f"{name} is not public in {place}"
        assert f"from {place} import {name}" in str(info.value)


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    module = importlib.import_module("handoffs.contracts")
    assert not hasattr(module, "NoSuchThing")
    with pytest.raises(ImportError, match="cannot import name"):
        from handoffs.contracts import NoSuchThing  # type: ignore[attr-defined]  # noqa: F401


def _page_rows() -> set[tuple[str, str, str]]:
    rows = re.findall(r"^\| `([\w.]+)` \| `(\w+)` \| (.+?) \|$", PAGE.read_text(encoding="utf-8"),
                      re.MULTILINE)
    return {(face, name, place.replace("`", "")) for face, name, place in rows}


def test_the_migration_page_is_the_table() -> None:
    assert _page_rows() == {(face, name, MOVED[face][name]) for face, name in ENTRIES}
