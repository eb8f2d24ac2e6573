"""Coarsening: merge enum values, round numbers, widen intervals, shorten evidence
references.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from handoffs._errors import ExperimentError
from handoffs.contracts import Contract, FieldKind
from handoffs.contracts.analysis import (
    MergeValues,
    RoundValue,
    SymbolicForm,
    WidenValue,
)
from handoffs.lab.perturbations._base import (
    NOT_APPLICABLE,
    UNCHANGED,
    Perturbation,
    _clamp,
    _positive,
    _spec_of,
    _strategies_field,
    _values,
    declare_perturbation,
)

__all__ = ["MergeEnumValues", "RoundNumeric", "ShortenEvidenceRefs", "WidenInterval"]


@declare_perturbation(
    kind="coarsening", subject=True, target="{target_}", member="{target_}",
    id=lambda p: f"merge-enum-values:{p.target_}:{'+'.join(map(str, p.values))}->{p.into}",
    description=lambda p: f"Send {', '.join(map(str, p.values))} of {p.target_} as {p.into}.")
@attrs.frozen
class MergeEnumValues(Perturbation):
    """Merge enum values: any of ``values`` is sent as ``into``.

    ``target`` is a decision field (``decision_state.<field>``) or a top-level enum
    member such as ``uncertainty`` (merging CONFLICT into RESOLVED launders a
    conflict into smooth prose). Id ``merge-enum-values:<target>:<a>+<b>-><into>``.
    """

    target_: str = attrs.field(alias="target")
    values: tuple[Any, ...] = attrs.field(converter=_values)
    into: Any
    strategies: tuple[str, ...] | None = _strategies_field()

    def change(self, value: Any) -> Any:
        """``into`` for a merged value (an absent optional field stays absent: ``null``
        is never merged).
        """
        if value is None:
            return UNCHANGED
        return self.into if value in self.values and value != self.into else UNCHANGED

    def symbolic(self, contract: Contract[Any, Any]) -> SymbolicForm | None:
        """A decision field's values merged; a top-level member's merge touches only
        what admission reads.
        """
        if not self.target_.startswith("decision_state."):
            return SymbolicForm(admission=True)
        field = self.target_.removeprefix("decision_state.")
        spec = contract.field_map.get(field)
        if spec is None or spec.kind is not FieldKind.ENUM:
            return None
        return SymbolicForm(changes=(MergeValues(field, self.values, self.into),))


@declare_perturbation(
    kind="coarsening", subject=True, id="round-numeric:{field}:{step:g}", target="{field}",
    member="decision_state.{field}", description="Round {field} to a multiple of {step:g}.")
@attrs.frozen
class RoundNumeric(Perturbation):
    """Round a numeric decision field to a multiple of ``step`` (within its bounds).

    Id ``round-numeric:<field>:<step>``.
    """

    field: str
    step: float = attrs.field(validator=_positive("round step"))
    minimum: float | None = attrs.field(default=None, kw_only=True)
    maximum: float | None = attrs.field(default=None, kw_only=True)
    integer: bool = attrs.field(default=False, kw_only=True)
    strategies: tuple[str, ...] | None = _strategies_field()

    def prepare(self, contract: Contract[Any, Any], *, seed: int) -> Perturbation:
        """Take the field's bounds and integer-ness from the contract."""
        spec = _spec_of(contract, self.field, (FieldKind.INT, FieldKind.FLOAT),
                        f"round-numeric: {self.field} is not a numeric field")
        return attrs.evolve(self, minimum=spec.minimum, maximum=spec.maximum,
                            integer=spec.kind is FieldKind.INT)

    def change(self, value: Any) -> Any:
        """The value rounded; an absent optional field (``null``: known not to apply) is
        sent as it is, never read as a number.
        """
        if value is None:
            return UNCHANGED
        if isinstance(value, bool) or not isinstance(value, int | float):
            return NOT_APPLICABLE
        rounded: float = _clamp(round(value / self.step) * self.step, self.minimum, self.maximum)
        new_value: int | float = round(rounded) if self.integer else float(rounded)
        if self.integer:
            new_value = int(_clamp(new_value, self.minimum, self.maximum))
        return UNCHANGED if new_value == value else new_value

    def symbolic(self, contract: Contract[Any, Any]) -> SymbolicForm | None:
        """The field rounded on the step's grid (the bounds taken from ``contract``)."""
        spec = contract.field_map.get(self.field)
        if spec is None or spec.kind not in (FieldKind.INT, FieldKind.FLOAT):
            return None
        if spec.kind is FieldKind.INT and float(self.step) != int(self.step):
            return None  # a fractional step on an integer field rounds twice
        return SymbolicForm(changes=(RoundValue(self.field, self.step, spec.minimum,
                                                spec.maximum),))


@declare_perturbation(
    kind="coarsening", subject=True, id="widen-interval:{field}:{width:g}", target="{field}",
    member="decision_state.{field}", description="Widen interval {field} by {width:g}.")
@attrs.frozen
class WidenInterval(Perturbation):
    """Widen an interval field by ``width`` (half on each side, within its bounds).

    Id ``widen-interval:<field>:<width>``.
    """

    field: str
    width: float = attrs.field(validator=_positive("widen width"))
    minimum: float | None = attrs.field(default=None, kw_only=True)
    maximum: float | None = attrs.field(default=None, kw_only=True)
    strategies: tuple[str, ...] | None = _strategies_field()

    def prepare(self, contract: Contract[Any, Any], *, seed: int) -> Perturbation:
        """Take the field's bounds from the contract."""
        spec = _spec_of(contract, self.field, (FieldKind.INTERVAL,),
                        f"widen-interval: {self.field} is not an interval field")
        return attrs.evolve(self, minimum=spec.minimum, maximum=spec.maximum)

    def change(self, value: Any) -> Any:
        """The interval widened; an absent optional field is sent as it is."""
        if value is None:
            return UNCHANGED
        if not isinstance(value, Mapping):
            return NOT_APPLICABLE
        try:
            lo = _clamp(float(value["lo"]) - self.width / 2, self.minimum, self.maximum)
            hi = _clamp(float(value["hi"]) + self.width / 2, self.minimum, self.maximum)
        except (KeyError, TypeError, ValueError):
            return NOT_APPLICABLE
        return {"lo": lo, "hi": hi}

    def symbolic(self, contract: Contract[Any, Any]) -> SymbolicForm | None:
        """The interval widened (the bounds taken from ``contract``)."""
        spec = contract.field_map.get(self.field)
        if spec is None or spec.kind is not FieldKind.INTERVAL:
            return None
        return SymbolicForm(changes=(WidenValue(self.field, self.width, spec.minimum,
                                                spec.maximum),))


def _shorten_uri(uri: str, depth: int | None) -> str:
    if depth is None:
        return uri
    scheme, sep, rest = uri.partition(":")
    if not sep:
        return uri
    slashes = len(rest) - len(rest.lstrip("/"))
    parts = rest[slashes:].split("/")
    return f"{scheme}:{rest[:slashes]}{'/'.join(parts[:depth])}"


def _shorten_id(p: ShortenEvidenceRefs) -> str:
    parts = [f"keep={p.keep}" if p.keep else "", f"depth={p.depth}" if p.depth else ""]
    return "shorten-evidence-refs:" + ",".join(part for part in parts if part)


def _shorten_description(p: ShortenEvidenceRefs) -> str:
    what = [f"keep the first {p.keep}"] if p.keep else []
    if p.depth:
        what.append(f"cut URIs to {p.depth} path segment(s) and drop digests")
    return "Shorten evidence references: " + "; ".join(what) + "."


@declare_perturbation(kind="coarsening", subject=True, id=_shorten_id, target="evidence_refs",
                      member="evidence_refs", description=_shorten_description)
@attrs.frozen
class ShortenEvidenceRefs(Perturbation):
    """Shorten evidence references: keep the first ``keep``, cut each URI to ``depth``
    path segments, and drop content digests.

    Id ``shorten-evidence-refs:keep=<k>`` and/or ``depth=<d>``.
    """

    keep: int | None = None
    depth: int | None = None
    strategies: tuple[str, ...] | None = _strategies_field()

    def __attrs_post_init__(self) -> None:
        if self.keep is None and self.depth is None:
            raise ExperimentError("shorten-evidence-refs needs keep or depth")
        if (self.keep is not None and self.keep < 1) or (self.depth is not None
                                                         and self.depth < 1):
            raise ExperimentError("keep and depth must be >= 1 (a receipt needs a reference)")

    def change(self, value: Any) -> Any:
        """The shortened references."""
        if not isinstance(value, list | tuple):
            return NOT_APPLICABLE
        kept = list(value[: self.keep] if self.keep else value)
        if self.depth:
            kept = [_shorten_uri(r["uri"] if isinstance(r, Mapping) else str(r), self.depth)
                    for r in kept]
        return kept

    def symbolic(self, contract: Contract[Any, Any]) -> SymbolicForm | None:
        """Admission only: the decision state is unchanged."""
        return SymbolicForm(admission=True)
