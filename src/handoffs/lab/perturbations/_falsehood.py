"""Falsehoods: schema-valid values that differ from the truth, generated from the
contract (:class:`Mutate`) or declared for a named case (:class:`Falsehood`), each
re-validated with ``jsonschema``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
from jsonschema import Draft202012Validator

from handoffs._errors import ExperimentError
from handoffs._json import dumps
from handoffs._neighbours import neighbours
from handoffs.contracts import Contract, FieldKind, FieldSpec
from handoffs.lab._sources import draw
from handoffs.lab._values import wire_value
from handoffs.lab.perturbations._base import (
    CaseContext,
    Perturbation,
    Variant,
    _names,
    _split_target,
    _state_of,
    _strategies_field,
    declare_perturbation,
)

__all__ = ["Falsehood", "Mutate"]


def _field_schema(contract: Contract[Any, Any], name: str) -> dict[str, Any]:
    schema = contract.json_schema()
    return {"$schema": schema["$schema"],
            **schema["properties"]["decision_state"]["properties"][name]}


def _member_schema(contract: Contract[Any, Any], name: str) -> dict[str, Any]:
    schema = contract.json_schema()
    return {"$schema": schema["$schema"], **schema["properties"][name]}


def _boundary_values(spec: FieldSpec, thresholds: Sequence[float]) -> list[float]:
    lo = spec.minimum if spec.minimum is not None else 0.0
    hi = spec.maximum if spec.maximum is not None else 0.0
    values = [lo, hi]
    for t in thresholds:
        if spec.kind is FieldKind.INT:
            values += neighbours(t, integer=True)
        else:
            below, _, above = neighbours(t, integer=False)
            values += [t, below, above]
    return [v for v in values if lo <= v <= hi]


def _numeric_pool(contract: Contract[Any, Any], spec: FieldSpec, samples: int,
                  seed: int) -> list[Any]:
    from hypothesis import strategies as st

    thresholds = [t for f, t in contract.policy.thresholds() if f == spec.name]
    lo = spec.minimum if spec.minimum is not None else 0.0
    hi = spec.maximum if spec.maximum is not None else 0.0
    bounds = _boundary_values(spec, thresholds)
    if spec.kind is FieldKind.INT:
        drawn = draw(st.integers(math.ceil(lo), math.floor(hi)), samples, seed=seed)
        points: list[Any] = [int(v) for v in bounds] + drawn
    elif spec.kind is FieldKind.FLOAT:
        drawn = draw(st.floats(lo, hi, allow_nan=False, allow_infinity=False), samples,
                     seed=seed)
        points = [float(v) for v in bounds] + drawn
    else:
        ends = st.one_of(st.sampled_from(bounds), st.floats(lo, hi, allow_nan=False))
        drawn = draw(st.tuples(ends, ends), samples, seed=seed)
        cells = sorted(set(bounds))
        points = [{"lo": a, "hi": b} for a, b in itertools.pairwise(cells)]
        points += [{"lo": min(a, b), "hi": max(a, b)} for a, b in drawn]
    unique: list[Any] = []
    seen: set[str] = set()
    for value in points:
        key = dumps(value)
        if key not in seen:
            seen.add(key)
            unique.append(value)
    return unique


def _falsify(message: Mapping[str, Any], state: Mapping[str, Any], ctx: CaseContext,
             name: str, value: Any, *, label: str) -> Variant:
    """``message`` with decision field ``name`` sent as ``value``, classified by the
    reference policy on the truth with that one field falsified.
    """
    view = dict(ctx.truth)
    view[name] = ctx.contract.field_map[name].read(value)
    new_state = dict(state)
    new_state[name] = value
    return Variant.patched(message, "decision_state", new_state, label=label,
                           falsehood=(name, state[name], value), falsified=ctx.decide(view))


@declare_perturbation(
    kind="falsehood", subject=True, id="mutate",
    description=lambda p: "Schema-valid falsehoods: each decision field (and the enum members "
                          f"{', '.join(p.members)}) set to a valid value that differs from the "
                          "truth.")
@attrs.frozen
class Mutate(Perturbation):
    """Schema-valid falsehoods: for every decision field, values that differ from the
    truth (every other value of a finite domain; boundary values and Hypothesis draws
    for numbers; for an optional field, ``null`` when a value is true and every value
    when it is absent: presence flips are falsehoods too), and every other value of the
    top-level enum ``members``.

    Each candidate value is re-validated with ``jsonschema`` against the contract's
    schema (``schema_rejected`` counts refusals: a generator bug if not 0). Each
    falsehood is classified by the reference policy: ``no_effect``,
    ``changes_action`` or ``catastrophic`` (trusting it breaks a hard constraint).
    Id ``mutate``.
    """

    fields: tuple[str, ...] | None = attrs.field(default=None,
                                                 converter=attrs.converters.optional(tuple))
    members: tuple[str, ...] = attrs.field(default=("proposed_action", "uncertainty"),
                                           converter=_names)
    samples: int = 8
    pools: Mapping[str, tuple[Any, ...]] | None = attrs.field(default=None, eq=False,
                                                              repr=False, kw_only=True)
    schema_rejected: int = attrs.field(default=0, kw_only=True)
    strategies: tuple[str, ...] | None = _strategies_field()

    def prepare(self, contract: Contract[Any, Any], *, seed: int) -> Perturbation:
        """Generate and validate the candidate pools."""
        names = self.fields if self.fields is not None else tuple(s.name for s in contract.fields)
        pools: dict[str, tuple[Any, ...]] = {}
        rejected = 0
        for name in names:
            spec = contract.field_map.get(name)
            if spec is None:
                raise ExperimentError(f"mutate: {name} is not a decision field of "
                                      f"{contract.id}")
            if spec.domain() is not None:
                candidates = [wire_value(v) for v in spec.values() or ()]
            else:  # an optional field's null: a present value flipped to absent
                candidates = ([None] if spec.optional else []) + _numeric_pool(
                    contract, spec, self.samples, seed)
            validator = Draft202012Validator(_field_schema(contract, name))
            valid = [v for v in candidates if validator.is_valid(v)]
            rejected += len(candidates) - len(valid)
            pools[f"decision_state.{name}"] = tuple(valid)
        schema = contract.json_schema()
        for member in self.members:
            enum_values = schema["properties"].get(member, {}).get("enum")
            if enum_values is None:
                raise ExperimentError(f"mutate: {member} is not an enum member of the receipt")
            validator = Draft202012Validator(_member_schema(contract, member))
            valid = [v for v in enum_values if validator.is_valid(v)]
            rejected += len(enum_values) - len(valid)
            pools[member] = tuple(valid)
        return attrs.evolve(self, pools=pools, schema_rejected=rejected)

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """Every falsehood for this case."""
        if self.pools is None:
            raise ExperimentError("mutate was not prepared for a contract")
        state = _state_of(message)
        for target, pool in self.pools.items():
            parent, name = _split_target(target)
            if parent:
                if state is None or name not in state:
                    continue
                truth = state[name]
                for value in pool:
                    if not (value == truth and type(value) is type(truth)):
                        yield _falsify(message, state, ctx, name, value,
                                       label=f"{name}={dumps(value)}")
            elif name in message:
                truth = message[name]
                for value in pool:
                    if value != truth:
                        yield Variant.patched(message, name, value,
                                              label=f"{name}={dumps(value)}",
                                              falsehood=(name, truth, value),
                                              falsified=ctx.reference)


@declare_perturbation(
    kind="falsehood", subject=True, target="{field}",
    id=lambda p: f"inject:{p.case_id}:{p.field}={dumps(p.value)}",
    description=lambda p: f"In case {p.case_id}, send {p.field} = {dumps(p.value)}.")
@attrs.frozen
class Falsehood(Perturbation):
    """A declared schema-valid falsehood: in case ``case_id``, decision field ``field``
    is sent as ``value`` (the essay's error injection). Id
    ``inject:<case_id>:<field>=<value>``.
    """

    case_id: str
    field: str
    value: Any
    strategies: tuple[str, ...] | None = _strategies_field()

    def prepare(self, contract: Contract[Any, Any], *, seed: int) -> Perturbation:
        """Check that the value is schema-valid for the field."""
        if self.field not in contract.field_map:
            raise ExperimentError(f"injection: {self.field} is not a decision field of "
                                  f"{contract.id}")
        if not Draft202012Validator(_field_schema(contract, self.field)).is_valid(self.value):
            raise ExperimentError(f"injection: {self.value!r} is not schema-valid for "
                                  f"{self.field}; a falsehood must pass the schema")
        return self

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """The altered message, in the named case only."""
        state = _state_of(message)
        if ctx.case_id == self.case_id and state is not None and self.field in state:
            yield _falsify(message, state, ctx, self.field, self.value, label=self.field)
