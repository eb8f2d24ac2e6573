"""Decision-field values between their Python and JSON forms, and a case's JSON form.

:func:`wire_value` writes a typed decision-field value as JSON (enums by value,
intervals as ``{"lo", "hi"}`` objects; :meth:`~handoffs.contracts.FieldSpec.read` reads
one back against its field's declaration); :func:`jsonable` writes a whole case (attrs
classes, dataclasses, mappings, enums, intervals, datetimes) for the case-set digest.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

import attrs

from handoffs.contracts import Interval

__all__ = ["jsonable", "wire_value"]


def wire_value(value: Any) -> Any:
    """A decision-field value in its JSON form (enums by value, intervals as objects)."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Interval):
        return {"lo": value.lo, "hi": value.hi}
    return value


_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
_ATTRS_FIELDS: dict[type, tuple[str, ...]] = {}


def jsonable(value: Any) -> Any:  # noqa: PLR0911 - one return per JSON shape
    """JSON form of a case for the case-set digest (attrs, dataclasses, mappings)."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    names = _ATTRS_FIELDS.get(kind)
    if names is not None:
        return {name: jsonable(getattr(value, name)) for name in names}
    if kind is list or kind is tuple:
        if _SCALARS.issuperset(map(type, value)):
            return list(value)
        return [jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Interval):
        return {"lo": value.lo, "hi": value.hi}
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if attrs.has(kind):
        names = _ATTRS_FIELDS[kind] = tuple(a.name for a in attrs.fields(kind))
        return {name: jsonable(getattr(value, name)) for name in names}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, frozenset | set):
        return sorted((jsonable(v) for v in value), key=repr)
    return value
