"""Formatting shared by the renderings: numbers, wire values, tables.

A :class:`Table` is one section's rows as formatted cells; the Markdown and HTML
renderings lay the same tables out, each in its own way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

__all__ = ["COMPARISON", "DASH", "Table", "counts", "get", "num", "table", "wire"]

DASH: Final = "—"
COMPARISON: Final = {"<=": "≤", ">=": "≥", "<": "<", ">": ">"}




def num(value: Any, places: int = 4) -> str:
    """Numbers as the essay prints them: at most ``places`` decimals, no trailing zeros."""
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        text = f"{round(value, places):.{places}f}".rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text
    return str(value)


def wire(value: Any) -> str:
    """A JSON value (a field value in the report) in its compact wire form."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return num(value)
    if isinstance(value, Mapping) and set(value) == {"lo", "hi"}:
        return f"[{wire(value['lo'])}, {wire(value['hi'])}]"
    return json.dumps(value, sort_keys=True, separators=(",", ": "), ensure_ascii=False)


def counts(values: Mapping[str, Any]) -> str:
    """``{"no_effect": 3}`` as ``no effect 3``."""
    if not values:
        return DASH
    return ", ".join(f"{key.replace('_', ' ')} {num(value)}" for key, value in values.items())


@attrs.frozen
class Table:
    """One table of the rendering: a title, column headers and formatted cells."""

    key: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: tuple[bool, ...]
    note: str = ""
    collapsed: bool = False
    marks: tuple[str, ...] = ()
    """Per row, a status word (``pass``, ``fail``) that the HTML shows in colour."""
    details: tuple[str, ...] = ()
    """Per row, preformatted text (the message sent) that the HTML folds under it."""


def table(
    key: str,
    title: str,
    spec: Sequence[tuple[str, bool, Callable[[Any], str]]],
    items: Iterable[Any],
    *,
    note: str = "",
    empty: str = "None.",
    collapsed: bool = False,
    mark: Callable[[Any], str] | None = None,
    detail: Callable[[Any], str] | None = None,
) -> Table:
    """A table from ``(column, numeric, cell)`` specs over ``items``."""
    items = list(items)
    return Table(
        key=key,
        title=title,
        columns=tuple(name for name, _, _ in spec),
        rows=tuple(tuple(cell(item) for _, _, cell in spec) for item in items),
        numeric=tuple(numeric for _, numeric, _ in spec),
        # A note explains rows; without rows, say what is missing instead.
        note=note if items else empty,
        collapsed=collapsed,
        marks=tuple(mark(item) for item in items) if mark else (),
        details=tuple(detail(item) for item in items) if detail else (),
    )


def get(key: str, places: int = 4) -> Callable[[Mapping[str, Any]], str]:
    """A cell reading ``key`` as a number."""
    return lambda item: num(item.get(key), places)
