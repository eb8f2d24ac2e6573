"""Decision fields: the decisive facts a contract's state carries.

A decision state is a frozen attrs class. Each attribute is declared with
:func:`decision_field`, which records its description (exported into the JSON
Schema), its bounds, and the value a receiver would assume if the field went
missing (the lab's removal perturbation uses it to make an unsafe benign default
visible, as the essay does).

Supported value types: ``bool``, a ``str``-valued :class:`enum.Enum`, bounded
``int``, bounded ``float`` and :class:`Interval` (a certified numeric range), each
optionally ``T | None``: an *optional* field, whose ``None`` means the fact is known
not to apply (a borrower who was never delinquent has no "months since the last
delinquency"). ``None`` is a value like any other, carried as JSON ``null``; it is not
a missing field (which means "unknown").
"""

from __future__ import annotations

import contextlib
import enum
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, Final

import attrs
import cattrs

from handoffs._errors import ContractDefinitionError, InvalidArgument

__all__ = ["MISSING", "FieldKind", "FieldSpec", "Interval", "decision_field", "state_fields"]

_META_KEY: Final = "handoffs.decision_field"


class _Missing(enum.Enum):
    MISSING = "MISSING"

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing.MISSING
"""Sentinel: no value is assumed for a missing field (the receiver must fail closed)."""


@attrs.frozen
class Interval:
    """A closed numeric interval ``[lo, hi]``, e.g. a certified failure probability.

    A receiver's threshold test is *determined* by an interval only when the whole
    interval lies on one side of the threshold; an interval that straddles it leaves
    the decision open.
    """

    lo: float = attrs.field()
    hi: float = attrs.field()

    @lo.validator
    def _check(self, _: attrs.Attribute[float], lo: float) -> None:
        if isinstance(lo, bool) or isinstance(self.hi, bool):
            raise InvalidArgument("interval bounds must be numbers, not booleans")
        if not (math.isfinite(lo) and math.isfinite(self.hi)):
            raise InvalidArgument("interval bounds must be finite")
        if lo > self.hi:
            raise InvalidArgument(f"interval lower bound {lo} exceeds upper bound {self.hi}")

    @classmethod
    def point(cls, value: float) -> Interval:
        """The degenerate interval ``[value, value]``."""
        return cls(value, value)

    @property
    def width(self) -> float:
        """``hi - lo``."""
        return self.hi - self.lo

    def __str__(self) -> str:
        return f"[{self.lo}, {self.hi}]"


class FieldKind(enum.Enum):
    """The value type of a decision field."""

    BOOL = "boolean"
    ENUM = "enum"
    INT = "integer"
    FLOAT = "number"
    INTERVAL = "interval"


@attrs.frozen
class FieldSpec:
    """Everything the library knows about one decision field.

    Attributes:
        name: attribute name, equal to the JSON property name.
        kind: value type.
        description: what the fact means (exported as the schema ``description``).
        if_missing: the value a receiver assumes when the field is absent, or
            ``MISSING`` when it must fail closed instead.
        minimum / maximum: inclusive bounds for numbers and interval ends.
        enum_type: the Enum class for ``FieldKind.ENUM`` fields.
        optional: the field is declared ``T | None``: ``None`` (JSON ``null``) is a
            legitimate value meaning "known not to apply", distinct from a missing
            member (unknown).
    """

    name: str
    kind: FieldKind
    description: str
    if_missing: Any = MISSING
    minimum: float | None = None
    maximum: float | None = None
    enum_type: type[enum.Enum] | None = None
    optional: bool = False

    @property
    def fails_closed(self) -> bool:
        """Whether a receiver must fail closed when the field is absent (no
        ``if_missing`` value is assumed for it).
        """
        return self.if_missing is MISSING

    def domain(self) -> tuple[Any, ...] | None:
        """Every present value of a finite field (bool, enum), or ``None`` for numbers.

        An optional field's ``None`` is not listed: :meth:`values` adds it.
        """
        if self.kind is FieldKind.BOOL:
            return (False, True)
        if self.kind is FieldKind.ENUM:
            return tuple(self.enum_type or ())
        return None

    def values(self) -> tuple[Any, ...] | None:
        """Every value of a finite field, ``None`` first for an optional one; ``None``
        for numbers.
        """
        domain = self.domain()
        if domain is None:
            return None
        return (None, *domain) if self.optional else domain

    def contains(self, value: Any) -> bool:
        """True when ``value`` is a well-typed, in-bounds value for this field (``None``
        for an optional field).
        """
        if value is None or self.kind is FieldKind.BOOL:
            return self.optional if value is None else isinstance(value, bool)
        if self.kind is FieldKind.ENUM:
            return isinstance(value, self.enum_type)  # type: ignore[arg-type]
        if self.kind is FieldKind.INTERVAL:
            return isinstance(value, Interval) and self._in_bounds(value.lo) and self._in_bounds(
                value.hi
            )
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.kind is FieldKind.INT and not isinstance(value, int):
            return False
        return self._in_bounds(value)

    def read(self, value: Any) -> Any:
        """The field's typed value from its JSON form: an enum member from its value, an
        :class:`Interval` from a ``{"lo", "hi"}`` object, any other value as it is
        (``null`` is valid for an optional field: known not to apply). Values are read
        strictly: a boolean field takes only a JSON boolean, ``1`` is not ``true``.

        Raises:
            InvalidArgument: the value is not one of this field's (also a ValueError).
        """
        typed: Any = value
        if value is None:
            pass
        elif self.kind is FieldKind.ENUM and isinstance(value, str):
            with contextlib.suppress(ValueError):  # else refused below, as any other value
                typed = self.enum_type(value)  # type: ignore[misc]
        elif self.kind is FieldKind.INTERVAL:
            if not isinstance(value, Mapping) or set(value) != {"lo", "hi"}:
                raise InvalidArgument(f"{self.name}: an interval is an object with exactly "
                                      "'lo' and 'hi'")
            typed = Interval(value["lo"], value["hi"])
        if not self.contains(typed):
            raise InvalidArgument(f"{self.name}: {value!r} is not a valid {self.kind.value}")
        return typed

    def _in_bounds(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.minimum is not None and value < self.minimum:
            return False
        return not (self.maximum is not None and value > self.maximum)


def decision_field(
    description: str,
    *,
    if_missing: Any = MISSING,
    minimum: float | None = None,
    maximum: float | None = None,
) -> Any:
    """Declare one decisive fact of a contract's decision state.

    Annotate the attribute with its type: ``bool``, a ``str`` Enum, ``int``, ``float``
    or :class:`Interval`, or one of them ``| None`` for a fact that may be known not to
    apply (an *optional* field: ``None``, JSON ``null``, is a legitimate value; the
    member stays required, so a message that leaves it out is missing it). Conditions
    test absence with :class:`~handoffs.contracts.policy.Absent`; every other condition
    on an absent value is false::

        months_since_delinquency: int | None = decision_field(
            "Months since the last delinquency; null: never delinquent.",
            minimum=0, maximum=600)

    Args:
        description: what the fact means; required, and exported to the schema.
        if_missing: the value a receiver assumes if the field is missing from the
            message. Leave it ``MISSING`` (the default) to make a receiver fail closed
            instead. Declaring a benign default is allowed, and the lab measures its
            cost; ``None`` (an optional field only) assumes it does not apply.
        minimum: inclusive lower bound (numbers and intervals; required for them).
        maximum: inclusive upper bound (numbers and intervals; required for them).

    Returns:
        an ``attrs.field`` carrying the declaration in its metadata.
    """
    if not description.strip():
        raise ContractDefinitionError("a decision field needs a description", code="no-description")
    return attrs.field(
        metadata={
            _META_KEY: {
                "description": description,
                "if_missing": if_missing,
                "minimum": minimum,
                "maximum": maximum,
            }
        }
    )


def _optional_of(annotation: Any) -> tuple[Any, bool]:
    """``(T, True)`` for ``T | None`` (``Optional[T]``), else ``(annotation, False)``."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        members = typing.get_args(annotation)
        rest = tuple(m for m in members if m is not type(None))
        if len(rest) == 1 and len(members) == 2:
            return rest[0], True
    return annotation, False


def _kind_of(name: str, annotation: Any) -> tuple[FieldKind, type[enum.Enum] | None]:
    if annotation is bool:
        return FieldKind.BOOL, None
    if annotation is int:
        return FieldKind.INT, None
    if annotation is float:
        return FieldKind.FLOAT, None
    if annotation is Interval:
        return FieldKind.INTERVAL, None
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        if not all(isinstance(member.value, str) for member in annotation):
            raise ContractDefinitionError(
                f"enum {annotation.__name__} must have string values", json_path=f"$.{name}"
            )
        return FieldKind.ENUM, annotation
    raise ContractDefinitionError(
        f"unsupported decision field type {annotation!r}; use bool, a str Enum, int, float "
        "or Interval, or one of them | None (optional: None means known not to apply)",
        json_path=f"$.{name}",
    )


def state_fields(state: type[Any]) -> tuple[FieldSpec, ...]:
    """Read the decision fields of a frozen attrs state class, in declaration order.

    Raises:
        ContractDefinitionError: if the class is not a frozen attrs class, or a field
            lacks a :func:`decision_field` declaration, a bound or a known type.
    """
    if not attrs.has(state):
        raise ContractDefinitionError(f"{state!r} is not an attrs class")
    if state.__setattr__ is object.__setattr__:
        raise ContractDefinitionError(f"{state.__name__} must be frozen (use @attrs.frozen)")
    hints = typing.get_type_hints(state)
    specs: list[FieldSpec] = []
    for attribute in attrs.fields(state):
        meta: Mapping[str, Any] | None = attribute.metadata.get(_META_KEY)
        if meta is None:
            raise ContractDefinitionError(
                f"{state.__name__}.{attribute.name} is not declared with decision_field()",
                json_path=f"$.{attribute.name}",
            )
        annotation, optional = _optional_of(hints[attribute.name])
        kind, enum_type = _kind_of(attribute.name, annotation)
        numeric = kind in (FieldKind.INT, FieldKind.FLOAT, FieldKind.INTERVAL)
        if numeric and (meta["minimum"] is None or meta["maximum"] is None):
            raise ContractDefinitionError(
                f"numeric field {attribute.name} needs both minimum and maximum",
                json_path=f"$.{attribute.name}",
            )
        spec = FieldSpec(
            name=attribute.name,
            kind=kind,
            description=meta["description"],
            if_missing=meta["if_missing"],
            minimum=meta["minimum"],
            maximum=meta["maximum"],
            enum_type=enum_type,
            optional=optional,
        )
        if spec.if_missing is not MISSING and not spec.contains(spec.if_missing):
            raise ContractDefinitionError(
                f"if_missing value {spec.if_missing!r} is not a valid {kind.value}",
                json_path=f"$.{attribute.name}",
            )
        specs.append(spec)
    if not specs:
        raise ContractDefinitionError(f"{state.__name__} declares no decision fields")
    return tuple(specs)


def _structure_interval(value: Any, _: type[Any]) -> Interval:
    return Interval(value["lo"], value["hi"])


def _make_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True)
    converter.register_structure_hook(Interval, _structure_interval)
    converter.register_unstructure_hook(Interval, lambda i: {"lo": i.lo, "hi": i.hi})
    converter.register_unstructure_hook(enum.Enum, lambda e: e.value)
    return converter


_converter: Final = _make_converter()
"""States and receipts to and from their JSON form (enums as values, intervals as
``{"lo", "hi"}``); unknown keys are refused."""
