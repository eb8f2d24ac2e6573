"""Decision-field values between their Python and JSON forms, and a case's JSON form.

:func:`wire_value` writes a typed decision-field value as JSON (enums by value,
intervals as ``{"lo", "hi"}`` objects); :func:`typed_value` reads one back against its
field's declaration; :func:`jsonable` writes a whole case (attrs classes, dataclasses,
mappings, enums, intervals, datetimes) for the case-set digest.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

import attrs

from handoffs._errors import InvalidArgument
from handoffs.contracts import FieldKind, FieldSpec, Interval

__all__ = ["jsonable", "typed_value", "wire_value"]


def wire_value(value: Any) -> Any:
    """A decision-field value in its JSON form (enums by value, intervals as objects)."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Interval):
        return {"lo": value.lo, "hi": value.hi}
    return value


def typed_value(spec: FieldSpec, value: Any) -> Any:
    """Read one decision field's JSON value; raise ``ValueError`` when it is not valid
    (``null`` is valid for an optional field: known not to apply).
    """
    if value is None:
        typed: Any = None
    elif spec.kind is FieldKind.ENUM:
        assert spec.enum_type is not None  # noqa: S101 - guaranteed by state_fields
        typed = spec.enum_type(value)
    elif spec.kind is FieldKind.INTERVAL:
        if not isinstance(value, Mapping) or set(value) != {"lo", "hi"}:
            raise InvalidArgument(f"{spec.name}: an interval is an object with lo and hi")
        typed = Interval(value["lo"], value["hi"])
    else:
        typed = value
    if not spec.contains(typed):
        raise InvalidArgument(f"{spec.name}: {value!r} is not a valid {spec.kind.value}")
    return typed


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
