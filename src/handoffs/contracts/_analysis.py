"""Policy analysis of a contract with an SMT solver, and the search that stands in for
it when a policy holds an opaque predicate (internal; see ``analysis``).
"""

from __future__ import annotations

import enum
import itertools
import math
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any, Final

import attrs

from handoffs._errors import InvalidArgument, MissingExtra, PolicyError
from handoffs.contracts._contract import Contract
from handoffs.contracts._fields import FieldKind, FieldSpec, Interval
from handoffs.contracts._policy import (
    Arith,
    Compare,
    Condition,
    Const,
    Expr,
    Field,
    Predicate,
    _rational,
    arithmetic_conditions,
    walk_conditions,
)

__all__ = [
    "Analysis",
    "Boundary",
    "ConstraintReach",
    "Coverage",
    "CoverageTracker",
    "Cuts",
    "Equivalence",
    "MinimalSets",
    "Region",
    "Relevance",
    "Sufficiency",
    "analyse",
    "certify_message",
    "coverage",
    "equivalence",
    "geometry",
    "geometry_states",
    "realistic_states",
    "realistic_value",
    "sufficiency",
]

CERTIFIED: Final = "certified"
"""A result the solver proved (every state was considered)."""
SAMPLED: Final = "sampled"
"""A result found by search over opaque predicates: evidence, not a proof."""
DEFAULT_TIMEOUT_MS: Final = 5000
"""The solver's time limit per query; a query past it is ``unknown``."""
DEFAULT_DELTA_RATIO: Final = 1e-6
_DIGITS: Final = (6, 9, 12, 15, 17)

State = Mapping[str, Any]


def _z3() -> Any:
    try:
        import z3  # type: ignore[import-untyped]
    except ImportError as exc:  # pragma: no cover - z3-solver is in the lab extra
        raise MissingExtra("policy analysis", extra="lab", module="z3") from exc
    return z3


def _wire(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Interval):
        return {"lo": value.lo, "hi": value.hi}
    return value


def state_json(state: State | None) -> dict[str, Any] | None:
    """A state as JSON-ready data (enums as their values, intervals as ``lo``/``hi``)."""
    return None if state is None else {k: _wire(v) for k, v in state.items()}


def _pair_json(pair: tuple[State, State] | None) -> list[dict[str, Any] | None] | None:
    return None if pair is None else [state_json(pair[0]), state_json(pair[1])]


# ---------------------------------------------------------------------- results


@attrs.frozen
class Region:
    """Where one rule (or the default) decides: its guard and no earlier guard.

    Attributes:
        rule: the rule's name (or the policy's ``default_name``).
        action: the action it chooses.
        status: ``live`` (a witness state exists), ``dead`` (no state reaches it),
            or ``unknown`` (the solver ran out of time, or a sampled search found no
            witness: never read as dead).
        witness: a state the rule decides, when live.
        shadowed_by: for a dead rule, a minimal set of earlier rules whose guards
            cover it (empty when its own guard cannot hold).
        method: ``certified`` (solver) or ``sampled`` (search; opaque predicates).
    """

    rule: str
    action: str
    status: str
    witness: State | None = None
    shadowed_by: tuple[str, ...] = ()
    method: str = CERTIFIED

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"rule": self.rule, "action": self.action, "status": self.status,
                "witness": state_json(self.witness), "shadowed_by": list(self.shadowed_by),
                "method": self.method}


@attrs.frozen
class ConstraintReach:
    """Under which reference actions a hard constraint can apply.

    Attributes:
        constraint: the constraint's name.
        chosen: the action it forbids.
        applies_under: reference actions with a state where the constraint applies
            (with that state as witness).
        unreachable: reference actions under which it never applies.
        unknown: reference actions the solver could not decide in time.
        method: ``certified`` or ``sampled``.
    """

    constraint: str
    chosen: str
    applies_under: tuple[tuple[str, State], ...]
    unreachable: tuple[str, ...]
    unknown: tuple[str, ...]
    method: str = CERTIFIED

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"constraint": self.constraint, "chosen": self.chosen,
                "applies_under": [{"reference": a, "witness": state_json(w)}
                                  for a, w in self.applies_under],
                "unreachable": list(self.unreachable), "unknown": list(self.unknown),
                "method": self.method}


@attrs.frozen
class Boundary:
    """Two states at most ``delta`` apart on one axis that fall on different sides.

    Attributes:
        sides: the two sides' names: rules of the policy (a region boundary), or
            ``"<constraint>: applies"`` / ``"<constraint>: does not apply"``.
        actions: the actions on each side (for a constraint: the actions decided).
        axis: the field, or the expression (``fraud_probability * claim_amount``),
            along which the states differ.
        axis_kind: ``field`` or ``expression``.
        delta: the largest distance allowed between the two states on the axis.
        states: the pair of states, first on ``sides[0]``.
        cut: the axis value between the two states (the midpoint).
        method: ``certified`` or ``sampled``.
    """

    sides: tuple[str, str]
    actions: tuple[str, str]
    axis: str
    axis_kind: str
    delta: float
    states: tuple[State, State]
    cut: float
    method: str = CERTIFIED
    expr: Expr | None = attrs.field(default=None, eq=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"sides": list(self.sides), "actions": list(self.actions), "axis": self.axis,
                "axis_kind": self.axis_kind, "delta": self.delta, "cut": self.cut,
                "states": _pair_json(self.states), "method": self.method}


@attrs.frozen
class Relevance:
    """Whether one field can change the decision on its own.

    Attributes:
        field: the field.
        relevant: True, False, or None (unknown: time limit, or a sampled search that
            saw no change, which proves nothing).
        pair: two states equal except in ``field`` with different actions.
        method: ``certified`` or ``sampled``.
    """

    field: str
    relevant: bool | None
    pair: tuple[State, State] | None = None
    method: str = CERTIFIED

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"field": self.field, "relevant": self.relevant, "pair": _pair_json(self.pair),
                "method": self.method}


@attrs.frozen
class Sufficiency:
    """Whether a field set decides: no two states equal on it get different actions.

    Attributes:
        fields: the field set.
        status: ``sufficient`` (proved), ``insufficient`` (with ``counterexample``),
            or ``unknown`` (the solver ran out of time; never read as sufficient).
        counterexample: two states equal on ``fields`` that decide differently.
        at: the state the question was asked at (``None``: for every state).
    """

    fields: tuple[str, ...]
    status: str
    counterexample: tuple[State, State] | None = None
    at: State | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"fields": list(self.fields), "status": self.status,
                "counterexample": _pair_json(self.counterexample), "at": state_json(self.at)}


@attrs.frozen
class MinimalSets:
    """The smallest sufficient field sets, each certified minimal or not.

    Attributes:
        status: ``certified`` (every smaller set was proved insufficient and each set
            proved sufficient), ``unknown`` (a query timed out or the policy holds an
            opaque predicate; no set is claimed minimal), or ``none`` (not even every
            field suffices: the state is undetermined).
        sets: the minimum-cardinality sufficient sets found.
        broken_by_removal: for each set and each of its fields, the counterexample
            pair showing the set without that field is not sufficient.
    """

    status: str
    sets: tuple[tuple[str, ...], ...]
    broken_by_removal: tuple[tuple[tuple[str, ...], str, tuple[State, State]], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"status": self.status, "sets": [list(s) for s in self.sets],
                "broken_by_removal": [{"set": list(s), "without": f, "pair": _pair_json(p)}
                                      for s, f, p in self.broken_by_removal]}


@attrs.frozen
class Surface:
    """A cut that depends on other fields (``p * h > 500`` cuts ``p`` at ``500 / h``).

    Attributes:
        condition: the comparison, as written.
        depends_on: the other fields.
        band: the range of the cut over the other fields' bounds (clipped to this
            field's bounds), or ``None`` when it has no finite cut there.
    """

    condition: str
    depends_on: tuple[str, ...]
    band: tuple[float, float] | None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"condition": self.condition, "depends_on": list(self.depends_on),
                "band": None if self.band is None else list(self.band)}


@attrs.frozen
class Cuts:
    """Where a numeric field's decision can change.

    Attributes:
        field: the field.
        points: constant cut points (thresholds compared with this field alone).
        surfaces: cuts that depend on other fields.
        cells: the intervals between consecutive cut points (and the bounds); an
            interval inside one cell never straddles a constant cut.
        widest: the widest interval that can avoid every constant cut; with surfaces,
            an interval must also keep off the surface, which depends on the others.
    """

    field: str
    points: tuple[float, ...]
    surfaces: tuple[Surface, ...]
    cells: tuple[tuple[float, float], ...]
    widest: float

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"field": self.field, "points": list(self.points),
                "surfaces": [s.to_json() for s in self.surfaces],
                "cells": [list(c) for c in self.cells], "widest": self.widest}


@attrs.frozen
class Analysis:
    """Everything :func:`analyse` found about one contract's policy.

    Attributes:
        contract: the contract's id.
        method: ``certified`` (compiled to z3) or ``sampled`` (an opaque predicate).
        regions: one per rule, then the default.
        undetermined: a state whose decision is open (an interval straddling a cut,
            a divisor interval holding 0), decided by the fail-closed action; ``None``
            when there is none (or unknown).
        constraints: hard constraints' reachability.
        boundaries: boundary pairs, between regions and across constraints' cuts.
        relevance: per decision field.
        minimal_sets: the smallest sufficient field sets.
        cuts: per numeric field.
        context: the context dependencies: when one is unmet the receiver rejects or
            escalates, whatever the state.
        unknown: the queries the solver could not decide in the time limit.
        warnings: dead rules and other findings to show a user.
        timeout_ms: the per-query time limit used.
        seconds: CPU seconds the analysis took.
    """

    contract: str
    method: str
    regions: tuple[Region, ...]
    undetermined: State | None
    constraints: tuple[ConstraintReach, ...]
    boundaries: tuple[Boundary, ...]
    relevance: tuple[Relevance, ...]
    minimal_sets: MinimalSets
    cuts: tuple[Cuts, ...]
    context: tuple[dict[str, Any], ...]
    unknown: tuple[str, ...]
    warnings: tuple[str, ...]
    timeout_ms: int
    seconds: float = attrs.field(eq=False, default=0.0)

    @property
    def live(self) -> tuple[Region, ...]:
        """The live regions."""
        return tuple(r for r in self.regions if r.status == "live")

    @property
    def dead(self) -> tuple[Region, ...]:
        """The dead (shadowed) rules."""
        return tuple(r for r in self.regions if r.status == "dead")

    @property
    def relevant_fields(self) -> tuple[str, ...]:
        """The fields proved (or, when sampled, seen) to change the decision alone."""
        return tuple(r.field for r in self.relevance if r.relevant)

    def cover_states(self) -> tuple[State, ...]:
        """The states a test set needs: a witness of every live region, both states of
        every boundary pair, and a witness of every hard constraint's reach.
        """
        found: list[State] = [r.witness for r in self.regions if r.witness is not None]
        for boundary in self.boundaries:
            found.extend(boundary.states)
        for reach in self.constraints:
            found.extend(w for _, w in reach.applies_under)
        if self.undetermined is not None:
            found.append(self.undetermined)
        unique: dict[str, State] = {}
        for state in found:
            unique.setdefault(repr(sorted((state_json(state) or {}).items())), state)
        return tuple(unique.values())

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "contract": self.contract, "method": self.method, "timeout_ms": self.timeout_ms,
            "regions": [r.to_json() for r in self.regions],
            "dead_rules": [r.rule for r in self.dead],
            "undetermined": state_json(self.undetermined),
            "constraints": [c.to_json() for c in self.constraints],
            "boundaries": [b.to_json() for b in self.boundaries],
            "relevance": [r.to_json() for r in self.relevance],
            "minimal_sets": self.minimal_sets.to_json(),
            "cuts": [c.to_json() for c in self.cuts],
            "context": list(self.context),
            "unknown": list(self.unknown),
            "warnings": list(self.warnings),
        }


@attrs.frozen
class Equivalence:
    """Whether two versions of a contract decide alike on every state.

    Attributes:
        status: ``equivalent`` (proved), ``different`` (with a state), ``unknown``.
        state: a state where they differ.
        actions: ``(first's action, second's action)`` on that state.
        losses: the loss of each version's action under the other's reference:
            ``(first.loss(second's action, first's), second.loss(first's, second's))``,
            ``None`` where an action is not in a version's loss matrix.
        method: ``certified`` or ``sampled``.
    """

    status: str
    state: State | None = None
    actions: tuple[str, str] | None = None
    losses: tuple[float | None, float | None] | None = None
    method: str = CERTIFIED

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"status": self.status, "state": state_json(self.state),
                "actions": None if self.actions is None else list(self.actions),
                "losses": None if self.losses is None else list(self.losses),
                "method": self.method}


# ---------------------------------------------------------------------- helpers


def _conditions(contract: Contract[Any, Any]) -> list[Condition]:
    found = [rule.when for rule in contract.policy.rules]
    found += [h.when for h in contract.hard_constraints if h.when is not None]
    return found


def _opaque(condition: Condition) -> bool:
    return any(isinstance(c, Predicate) for c in walk_conditions(condition))


def _numeric(spec: FieldSpec) -> bool:
    return spec.kind in (FieldKind.INT, FieldKind.FLOAT, FieldKind.INTERVAL)


def _span(spec: FieldSpec) -> float:
    return float(spec.maximum or 0) - float(spec.minimum or 0)


@attrs.frozen
class _Axis:
    name: str
    kind: str  # "field" | "expression"
    expr: Expr
    reads: frozenset[str]
    delta: float
    cut: Fraction | None = None  # an expression's compared constant (0 for a difference)


def _field_delta(spec: FieldSpec, ratio: float) -> float:
    if spec.kind is FieldKind.INT:
        return 1.0
    return _tidy(max(_span(spec) * ratio, 1e-12))


def _tidy(delta: float) -> float:
    """δ as a short decimal (``1e-4``, not ``9.999999999999999e-05``)."""
    return float(f"{delta:.12g}")


_SLACK: Final = 1 + 1e-6  # float rounding of a state's value near its cut


def _axes(contract: Contract[Any, Any], conditions: Sequence[Condition],
          ratio: float) -> list[_Axis]:
    axes: dict[str, _Axis] = {}
    reads = frozenset().union(*(c.reads() for c in conditions)) if conditions else frozenset()
    for spec in contract.fields:
        if spec.name in reads and _numeric(spec):
            axes[spec.name] = _Axis(spec.name, "field", Field(spec.name),
                                    frozenset((spec.name,)), _field_delta(spec, ratio))
    ranges = {s.name: Interval(float(s.minimum or 0), float(s.maximum or 0))
              for s in contract.fields if _numeric(s)}
    for condition in conditions:
        for compare in arithmetic_conditions(condition):
            if len(compare.reads()) < 2:
                continue
            if isinstance(compare.right, Const):
                expr, cut = compare.left, compare.right.exact
            else:
                expr, cut = Arith("-", compare.left, compare.right), Fraction(0)
            text = expr.describe()
            if text in axes:
                continue
            found = expr.bounds(ranges)
            width = float(found[1] - found[0]) if found is not None else 1.0
            axes[text] = _Axis(text, "expression", expr, expr.reads(),
                               _tidy(max(width * ratio, 1e-12)), cut)
    return list(axes.values())


def _point(value: Any) -> Fraction:
    if isinstance(value, Interval):
        return (_rational(float(value.lo)) + _rational(float(value.hi))) / 2
    return _rational(float(value)) if isinstance(value, float) else Fraction(value)


def axis_value(expr: Expr, state: State) -> Fraction | None:
    """The value of an axis expression on a state (an interval's midpoint for a range)."""
    found = expr.bounds(state)
    if found is None:
        return None
    return (found[0] + found[1]) / 2


class _Solver:
    """One z3 solver with the time limit, counting undecided queries."""

    def __init__(self, z3: Any, timeout_ms: int, unknown: list[str]) -> None:
        self.z3 = z3
        self.solver = z3.Solver()
        self.solver.set("timeout", int(timeout_ms))
        self.unknown = unknown

    def add(self, *formulas: Any) -> None:
        self.solver.add(*formulas)

    def check(self, what: str, *formulas: Any) -> tuple[str, Any]:
        self.solver.push()
        try:
            self.solver.add(*formulas)
            result = self.solver.check()
            if result == self.z3.sat:
                return "sat", self.solver.model()
            if result == self.z3.unsat:
                return "unsat", None
            self.unknown.append(what)
            return "unknown", None
        finally:
            self.solver.pop()

    def core(self, what: str, assumptions: Sequence[Any]) -> tuple[str, list[Any]]:
        result = self.solver.check(*assumptions)
        if result == self.z3.unsat:
            return "unsat", list(self.solver.unsat_core())
        if result == self.z3.sat:
            return "sat", []
        self.unknown.append(what)
        return "unknown", []


def _round_state(contract: Contract[Any, Any], raw: Mapping[str, Any], digits: int) -> dict[
        str, Any]:
    state: dict[str, Any] = {}
    for spec in contract.fields:
        value = raw[spec.name]
        if spec.kind is FieldKind.FLOAT:
            value = _clip(spec, _decimal(value, digits))
        elif spec.kind is FieldKind.INTERVAL:
            lo, hi = (_clip(spec, _decimal(v, digits)) for v in value)
            value = Interval(min(lo, hi), max(lo, hi))
        state[spec.name] = value
    return state


def _decimal(exact: Fraction, digits: int) -> float:
    return float(f"{float(exact):.{digits}g}")


def _clip(spec: FieldSpec, value: float) -> float:
    return min(max(value, float(spec.minimum or 0)), float(spec.maximum or 0))


def _materialise(contract: Contract[Any, Any], raws: Sequence[Mapping[str, Any]],
                 check: Callable[[Sequence[State]], bool]) -> tuple[State, ...] | None:
    """Model values as float states that the library's own evaluator confirms: the
    shortest decimal rounding (6 to 17 digits) for which ``check`` holds.
    """
    for digits in _DIGITS:
        states = tuple(_round_state(contract, raw, digits) for raw in raws)
        if check(states):
            return states
    return None


# ---------------------------------------------------------------------- the analysis


class _Analyser:
    def __init__(self, contract: Contract[Any, Any], timeout_ms: int, delta_ratio: float,
                 minimal_budget: int) -> None:
        from handoffs.contracts import _smt

        self.z3 = _z3()
        self.smt = _smt
        self.contract = contract
        self.timeout_ms = timeout_ms
        self.unknown: list[str] = []
        self.minimal_budget = minimal_budget
        members: list[Any] = list(contract.actions.__members__.values())
        self.index: dict[str, int] = {a.value: i for i, a in enumerate(members)}
        self.pair = _smt.Pair(contract, self.index)
        self.da, self.db = self.pair.decide_a, self.pair.decide_b
        self.solver = _Solver(self.z3, timeout_ms, self.unknown)
        self.solver.add(*self.pair.a.domain, *self.pair.b.domain)
        self.names = [r.name for r in contract.policy.rules] + [contract.policy.default_name]
        self.actions = [r.action.value for r in contract.policy.rules] + [
            contract.policy.default.value]
        self.axes = _axes(contract, _conditions(contract), delta_ratio)

    # states ------------------------------------------------------------------------

    def raw(self, model: Any, side: Any) -> dict[str, Any]:
        return {name: side.value(model, name) for name in side.specs}

    def _in_region(self, name: str) -> Callable[[Sequence[State]], bool]:
        def check(states: Sequence[State]) -> bool:
            return self.decided(states[0]) == name

        return check

    def _reaches(self, action: Any, constraint: Any) -> Callable[[Sequence[State]], bool]:
        def check(states: Sequence[State]) -> bool:
            return bool(self.contract.decide(self.contract.state(**states[0])) == action
                        and self.contract.hard_violations(constraint.chosen, action,
                                                          truth=states[0]))

        return check

    def _across(self, name: str, other: str, axis: _Axis) -> Callable[[Sequence[State]], bool]:
        def check(states: Sequence[State]) -> bool:
            return (self.decided(states[0]) == name and self.decided(states[1]) == other
                    and self._near(axis, states))

        return check

    def decided(self, state: State) -> str | None:
        outcome = self.contract.evaluate(state)
        return outcome.rule if outcome.determined else None

    # regions -----------------------------------------------------------------------

    def regions(self) -> list[Region]:
        found: list[Region] = []
        for i, name in enumerate(self.names):
            status, model = self.solver.check(f"region {name}", self.da.regions[i])
            if status == "sat":
                states = _materialise(self.contract, [self.raw(model, self.pair.a)],
                                      self._in_region(name))
                found.append(Region(name, self.actions[i], "live",
                                    states[0] if states else None))
            elif status == "unsat":
                found.append(Region(name, self.actions[i], "dead",
                                    shadowed_by=self.shadows(i)))
            else:
                found.append(Region(name, self.actions[i], "unknown"))
        return found

    def shadows(self, i: int) -> tuple[str, ...]:
        z3 = self.z3
        if i >= len(self.contract.policy.rules):
            true = z3.BoolVal(True)
        else:
            true, _ = self.da.condition(self.contract.policy.rules[i].when)
        markers = [z3.Bool(f"shadow.{j}") for j in range(i)]
        self.solver.solver.push()
        try:
            self.solver.add(true)
            for marker, false in zip(markers, self.da.guards_false[:i], strict=False):
                self.solver.add(z3.Implies(marker, false))
            status, core = self.solver.core(f"shadows of {self.names[i]}", markers)
            if status != "unsat":
                return ()
            chosen = [m for m in markers if any(m.eq(c) for c in core)]
            for marker in list(chosen):  # deletion: a minimal covering set
                rest = [m for m in chosen if not m.eq(marker)]
                if self.solver.core("shadow minimisation", rest)[0] == "unsat":
                    chosen = rest
        finally:
            self.solver.solver.pop()
        return tuple(self.names[markers.index(m)] for m in chosen)

    def undetermined(self) -> State | None:
        status, model = self.solver.check("undetermined states", self.da.open)
        if status != "sat":
            return None
        states = _materialise(self.contract, [self.raw(model, self.pair.a)],
                              lambda s: not self.contract.evaluate(s[0]).determined)
        return states[0] if states else None

    # hard constraints --------------------------------------------------------------

    def constraints(self) -> list[ConstraintReach]:
        found: list[ConstraintReach] = []
        for constraint in self.contract.hard_constraints:
            if constraint.when is None:
                applies = self.z3.BoolVal(True)
            else:
                _, false = self.da.condition(constraint.when)
                applies = self.z3.Not(false)
            reach: list[tuple[str, State]] = []
            never: list[str] = []
            open_: list[str] = []
            for action in self.contract.actions:
                if action in constraint.allowed_references:
                    continue
                target = self.z3.IntVal(self.index[action.value])
                status, model = self.solver.check(
                    f"constraint {constraint.name} under {action.value}",
                    self.da.action == target, applies)
                if status == "sat":
                    states = _materialise(self.contract, [self.raw(model, self.pair.a)],
                                          self._reaches(action, constraint))
                    if states:
                        reach.append((action.value, states[0]))
                    else:
                        open_.append(action.value)
                elif status == "unsat":
                    never.append(action.value)
                else:
                    open_.append(action.value)
            found.append(ConstraintReach(constraint.name, constraint.chosen.value,
                                         tuple(reach), tuple(never), tuple(open_)))
        return found

    # boundaries --------------------------------------------------------------------

    def close(self, axis: _Axis) -> list[Any]:
        z3 = self.z3
        others = [s.name for s in self.contract.fields if s.name not in axis.reads]
        formulas = self.pair.a.equal(self.pair.b, others)
        delta = self.smt._real(axis.delta)
        a_lo, a_hi, a_ok = self.da.expression(axis.expr)
        b_lo, b_hi, b_ok = self.db.expression(axis.expr)
        formulas += [a_ok, b_ok, a_lo - b_lo <= delta, b_lo - a_lo <= delta,
                     a_hi - b_hi <= delta, b_hi - a_hi <= delta]
        if axis.kind == "field":
            formulas.append(z3.Not(z3.And(*self.pair.a.equal(self.pair.b, [axis.name]))))
        if axis.cut is not None:  # both states at the expression's cut, within delta
            cut = self.smt._real(axis.cut)
            for lo, hi in ((a_lo, a_hi), (b_lo, b_hi)):
                formulas += [lo - cut <= delta, cut - hi <= delta]
        return formulas

    def _near(self, axis: _Axis, states: Sequence[State]) -> bool:
        values = [axis_value(axis.expr, s) for s in states]
        if any(v is None for v in values):
            return False
        if abs(float(values[0] - values[1])) > axis.delta * 1.01:  # type: ignore[operator]
            return False
        if axis.cut is None:
            return True
        return all(_at_cut(axis.expr, float(axis.cut), axis.delta, s) for s in states)

    def _cut(self, axis: _Axis, states: Sequence[State]) -> float:
        if axis.cut is not None:  # an expression's compared constant
            return float(axis.cut)
        values = [axis_value(axis.expr, s) for s in states]
        return float(sum(v for v in values if v is not None) / 2)

    def boundaries(self) -> list[Boundary]:
        z3 = self.z3
        found: list[Boundary] = []
        paired: set[tuple[str, int, int]] = set()
        rules = self.contract.policy.rules
        live_any = z3.Or(*self.db.regions)
        for i, name in enumerate(self.names):
            guard_reads = frozenset().union(*(r.when.reads() for r in rules[: i + 1]))
            for axis in self.axes:
                if not axis.reads & guard_reads:
                    continue
                close = self.close(axis)
                excluded = [j for j in range(len(self.names)) if (axis.name, min(i, j),
                                                                  max(i, j)) in paired]
                for _ in range(len(self.names)):
                    status, model = self.solver.check(
                        f"boundary of {name} along {axis.name}", self.da.regions[i], live_any,
                        self.da.action != self.db.action, *close,
                        *(z3.Not(self.db.regions[j]) for j in excluded))
                    if status != "sat":
                        break
                    j = next(k for k, region in enumerate(self.db.regions)
                             if z3.is_true(model.eval(region, model_completion=True)))
                    excluded.append(j)
                    paired.add((axis.name, min(i, j), max(i, j)))
                    other = self.names[j]
                    states = _materialise(
                        self.contract, [self.raw(model, self.pair.a),
                                        self.raw(model, self.pair.b)],
                        self._across(name, other, axis))
                    if states is None:
                        continue
                    found.append(Boundary((name, other), (self.actions[i], self.actions[j]),
                                          axis.name, axis.kind, axis.delta,
                                          (states[0], states[1]), self._cut(axis, states),
                                          expr=axis.expr))
        for constraint in self.contract.hard_constraints:
            if constraint.when is None:
                continue
            true, _ = self.da.condition(constraint.when)
            _, false_b = self.db.condition(constraint.when)
            for axis in self.axes:
                if not axis.reads & constraint.when.reads():
                    continue
                status, model = self.solver.check(
                    f"boundary of {constraint.name} along {axis.name}", true, false_b,
                    *self.close(axis))
                if status != "sat":
                    continue
                when = constraint.when

                def sides(s: Sequence[State], c: Condition = when, x: _Axis = axis) -> bool:
                    return (c.evaluate(s[0]) is True and c.evaluate(s[1]) is False
                            and self._near(x, s))

                states = _materialise(self.contract, [self.raw(model, self.pair.a),
                                                      self.raw(model, self.pair.b)], sides)
                if states is None:
                    continue
                acts = tuple(self.contract.decide(self.contract.state(**s)).value
                             for s in states)
                found.append(Boundary((f"{constraint.name}: applies",
                                       f"{constraint.name}: does not apply"),
                                      (acts[0], acts[1]), axis.name, axis.kind, axis.delta,
                                      (states[0], states[1]), self._cut(axis, states),
                                      expr=axis.expr))
        return found

    # relevance and sufficiency -----------------------------------------------------

    def relevance(self) -> list[Relevance]:
        reads = self.contract.policy.reads()
        found: list[Relevance] = []
        for spec in self.contract.fields:
            if spec.name not in reads:
                found.append(Relevance(spec.name, False))
                continue
            others = [s.name for s in self.contract.fields if s.name != spec.name]
            status, model = self.solver.check(
                f"relevance of {spec.name}", self.da.action != self.db.action,
                *self.pair.a.equal(self.pair.b, others))
            if status == "sat":
                found.append(Relevance(spec.name, True, self._pair(model)))
            else:
                found.append(Relevance(spec.name, False if status == "unsat" else None))
        return found

    def _pair(self, model: Any) -> tuple[State, State] | None:
        raws = [self.raw(model, self.pair.a), self.raw(model, self.pair.b)]

        def differ(states: Sequence[State]) -> bool:
            actions = [self.contract.decide(self.contract.state(**s)) for s in states]
            return bool(actions[0] != actions[1])

        states = _materialise(self.contract, raws, differ)
        return None if states is None else (states[0], states[1])

    def pin(self, at: State) -> list[Any]:
        formulas: list[Any] = []
        for spec in self.contract.fields:
            terms = self.pair.a.vars[spec.name]
            value = at[spec.name]
            if spec.kind is FieldKind.BOOL:
                formulas.append(terms[0] == self.z3.BoolVal(bool(value)))
            elif spec.kind is FieldKind.ENUM:
                formulas.append(terms[0] == list(spec.domain() or ()).index(value))
            elif spec.kind is FieldKind.INT:
                formulas.append(terms[0] == int(value))
            elif spec.kind is FieldKind.INTERVAL:
                formulas += [terms[0] == self.smt._real(float(value.lo)),
                             terms[1] == self.smt._real(float(value.hi))]
            else:
                formulas.append(terms[0] == self.smt._real(float(value)))
        return formulas

    def sufficiency(self, fields: Sequence[str], at: State | None = None) -> Sufficiency:
        pinned = self.pin(at) if at is not None else []
        status, model = self.solver.check(
            f"sufficiency of {sorted(fields)}", self.da.action != self.db.action,
            *pinned, *self.pair.a.equal(self.pair.b, list(fields)))
        key = tuple(sorted(fields, key=list(self.contract.field_map).index))
        if status == "sat":
            return Sufficiency(key, "insufficient", self._pair(model), at)
        return Sufficiency(key, "sufficient" if status == "unsat" else "unknown", None, at)

    def global_minimal(self, relevance: Sequence[Relevance]) -> MinimalSets:
        """The minimum sufficient set over every state: on a product of field domains
        it is unique and equals the relevant fields (an irrelevant field can always be
        reset, and two sufficient sets' intersection is sufficient). One query proves
        it sufficient; each field's relevance pair shows its removal breaks it.
        """
        if any(r.relevant is None for r in relevance):
            return MinimalSets("unknown", ())
        chosen = tuple(r.field for r in relevance if r.relevant)
        result = self.sufficiency(chosen)
        if result.status != "sufficient":
            return MinimalSets("unknown", ())
        broken = tuple((chosen, r.field, r.pair) for r in relevance
                       if r.relevant and r.pair is not None)
        return MinimalSets(CERTIFIED, (chosen,), broken)

    def minimal_sets(self, candidates: Sequence[str], at: State | None = None) -> MinimalSets:
        checked: dict[frozenset[str], Sufficiency] = {}
        undecided = False
        budget = self.minimal_budget
        for size in range(len(candidates) + 1):
            found: list[tuple[str, ...]] = []
            for combo in itertools.combinations(candidates, size):
                if budget <= 0:
                    return MinimalSets("unknown", ())
                budget -= 1
                result = self.sufficiency(combo, at)
                checked[frozenset(combo)] = result
                if result.status == "sufficient":
                    found.append(result.fields)
                elif result.status == "unknown":
                    undecided = True
            if found:
                if undecided:
                    return MinimalSets("unknown", tuple(found))
                broken = tuple(
                    (s, f, pair) for s in found for f in s
                    if (pair := checked[frozenset(s) - {f}].counterexample) is not None)
                return MinimalSets(CERTIFIED, tuple(found), broken)
        return MinimalSets("unknown" if undecided else "none", ())


def _surface_cuts(compare: Compare, name: str, bounds: Mapping[str, Interval]) -> list[float]:
    """The cut of ``name`` at every corner of the other fields' bounds; where a corner
    has none (``p = 0`` in ``p * h = 500``), just inside it, so that a cut that runs
    off to infinity there reaches the field's bound.
    """
    if not compare.invertible(name):
        return []
    difference = Arith("-", compare.left, compare.right)
    others = sorted(compare.reads() - {name})
    found: list[float] = []
    for corner in itertools.product(*((0, 1) for _ in others)):
        point: dict[str, Fraction] = {}
        inside: dict[str, Fraction] = {}
        for other, end in zip(others, corner, strict=True):
            lo, hi = (_rational(float(v)) for v in (bounds[other].lo, bounds[other].hi))
            nudge = (hi - lo) / 10**9
            point[other] = hi if end else lo
            inside[other] = hi - nudge if end else lo + nudge
        for view in (point, inside):
            value = difference.solve(name, Fraction(0), view)
            if value is not None:
                try:
                    found.append(float(value))
                except OverflowError:
                    found.append(math.inf if value > 0 else -math.inf)
                break
    return found


def _cuts(contract: Contract[Any, Any]) -> list[Cuts]:
    conditions = _conditions(contract)
    found: list[Cuts] = []
    bounds = {s.name: Interval(float(s.minimum or 0), float(s.maximum or 0))
              for s in contract.fields if _numeric(s)}
    for spec in contract.fields:
        if not _numeric(spec):
            continue
        lo, hi = float(spec.minimum or 0), float(spec.maximum or 0)
        points: set[float] = set()
        surfaces: list[Surface] = []
        for condition in conditions:
            for name, t in condition.thresholds():
                if name == spec.name and lo < t < hi:
                    points.add(float(t))
            for compare in arithmetic_conditions(condition):
                if spec.name not in compare.reads() or len(compare.reads()) < 2:
                    continue
                cuts = _surface_cuts(compare, spec.name, bounds)
                band = None
                if cuts:
                    b_lo, b_hi = max(min(cuts), lo), min(max(cuts), hi)
                    band = (b_lo, b_hi) if b_lo <= b_hi else None
                surface = Surface(compare.describe(),
                                  tuple(sorted(compare.reads() - {spec.name})), band)
                if surface not in surfaces:
                    surfaces.append(surface)
        ordered = sorted(points)
        edges = [lo, *ordered, hi]
        cells = tuple(itertools.pairwise(edges))
        if not points and not surfaces and spec.name not in contract.policy.reads():
            continue
        found.append(Cuts(spec.name, tuple(ordered), tuple(surfaces), cells,
                          max((b - a for a, b in cells), default=0.0)))
    return found


def _check_options(timeout_ms: int, delta_ratio: float) -> None:
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 1:
        raise InvalidArgument(f"timeout_ms must be a positive integer, got {timeout_ms!r}")
    if not (isinstance(delta_ratio, float) and 0 < delta_ratio < 1):
        raise InvalidArgument(f"delta_ratio must be a float in (0, 1), got {delta_ratio!r}")


def _check_contract(contract: object) -> None:
    if not isinstance(contract, Contract):
        raise InvalidArgument(f"expected a handoffs Contract, got {type(contract).__name__}")


def analyse(contract: Contract[Any, Any], *, timeout_ms: int = DEFAULT_TIMEOUT_MS,
            delta_ratio: float = DEFAULT_DELTA_RATIO, minimal_budget: int = 4096,
            samples: int = 2000, seed: int = 0) -> Analysis:
    """Analyse a contract's policy: regions, dead rules, hard constraints' reach,
    boundaries, relevance, minimal sufficient sets and cuts.

    Args:
        contract: the contract.
        timeout_ms: the time limit of each solver query; a query that does not finish
            is reported as unknown (never as covered, dead or minimal).
        delta_ratio: boundary pairs are at most this fraction of an axis's range apart
            (1 for integer fields).
        minimal_budget: most sufficiency queries in the minimal-set search.
        samples: states drawn by the search when the policy holds an opaque predicate.
        seed: the search's seed.

    Raises:
        ValueError: ``InvalidArgument`` (also a TypeError), not a contract, or a bad
            option (before any work starts).
        MissingExtra: z3-solver is not installed (``pip install 'handoffs[lab]'``).
    """
    _check_contract(contract)
    _check_options(timeout_ms, delta_ratio)
    started = time.process_time()
    context = tuple({**dependency.to_json(),
                     "when_unmet": f"{dependency.on_missing.value} "
                                   f"({contract.fail_closed_action.value})"}
                    for dependency in contract.context)
    if any(_opaque(c) for c in _conditions(contract)):
        return sampled_analysis(contract, samples=samples, seed=seed, delta_ratio=delta_ratio,
                                timeout_ms=timeout_ms, context=context, started=started)
    analyser = _Analyser(contract, timeout_ms, delta_ratio, minimal_budget)
    regions = analyser.regions()
    relevance = analyser.relevance()
    minimal = analyser.global_minimal(relevance)
    result = Analysis(
        contract=contract.id, method=CERTIFIED, regions=tuple(regions),
        undetermined=analyser.undetermined(), constraints=tuple(analyser.constraints()),
        boundaries=tuple(analyser.boundaries()), relevance=tuple(relevance),
        minimal_sets=minimal, cuts=tuple(_cuts(contract)), context=context,
        unknown=(), warnings=(), timeout_ms=timeout_ms)
    return attrs.evolve(result, unknown=tuple(analyser.unknown),
                        warnings=tuple(warnings_of(result, analyser.unknown)),
                        seconds=time.process_time() - started)


def warnings_of(result: Analysis, unknown: Sequence[str]) -> list[str]:
    """The findings a user must see: dead rules, undecided queries, sampled results."""
    found: list[str] = []
    for region in result.dead:
        by = (f"shadowed by {', '.join(region.shadowed_by)}" if region.shadowed_by
              else "its condition can never hold")
        found.append(f"dead rule {region.rule!r} ({region.action}): {by}")
    if unknown:
        found.append(f"{len(unknown)} solver queries undecided within {result.timeout_ms} ms: "
                     + "; ".join(unknown[:5]))
    if result.method == SAMPLED:
        found.append("the policy holds an opaque predicate: results are sampled, not "
                     "certified")
    return found


def sufficiency(contract: Contract[Any, Any], fields: Iterable[str], *,
                at: State | Any | None = None,
                timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Sufficiency:
    """Whether ``fields`` suffice to decide: for every state (or, with ``at``, for the
    states equal to ``at`` on ``fields``) the policy's action is fixed by them.

    Raises:
        ValueError: ``InvalidArgument`` (also a TypeError), unknown fields, or a policy
            holding an opaque predicate (it cannot be certified; use the lab's sampled
            search).
    """
    _check_contract(contract)
    _check_options(timeout_ms, DEFAULT_DELTA_RATIO)
    names = list(fields)
    unknown = sorted(set(names) - set(contract.field_map))
    if unknown:
        raise InvalidArgument(f"{contract.id} has no decision fields {unknown}")
    if any(_opaque(rule.when) for rule in contract.policy.rules):
        raise InvalidArgument("the policy holds an opaque predicate: sufficiency cannot be "
                              "certified")
    view = None if at is None else (at if isinstance(at, Mapping) else contract.view(at))
    return _Analyser(contract, timeout_ms, DEFAULT_DELTA_RATIO, 0).sufficiency(names, view)


def minimal_sets(contract: Contract[Any, Any], *, at: State | Any | None = None,
                 timeout_ms: int = DEFAULT_TIMEOUT_MS, budget: int = 4096) -> MinimalSets:
    """The minimum-cardinality sufficient field sets (globally, or at the state ``at``),
    certified when every smaller set was proved insufficient.
    """
    _check_contract(contract)
    _check_options(timeout_ms, DEFAULT_DELTA_RATIO)
    if any(_opaque(rule.when) for rule in contract.policy.rules):
        return MinimalSets("unknown", ())
    view = None if at is None else (at if isinstance(at, Mapping) else contract.view(at))
    analyser = _Analyser(contract, timeout_ms, DEFAULT_DELTA_RATIO, budget)
    if view is None:
        return analyser.global_minimal(analyser.relevance())
    order = [s.name for s in contract.fields if s.name in contract.policy.reads()]
    return analyser.minimal_sets(order, view)


def equivalence(first: Contract[Any, Any], second: Contract[Any, Any], *,
                timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Equivalence:
    """Whether two contracts (two versions) decide alike on every state valid under both.

    Raises:
        ValueError: ``InvalidArgument`` (also a TypeError), the two contracts' decision
            fields differ in name or kind.
    """
    _check_contract(first)
    _check_contract(second)
    _check_options(timeout_ms, DEFAULT_DELTA_RATIO)
    kinds = [(s.name, s.kind) for s in first.fields]
    other = [(s.name, s.kind) for s in second.fields]
    if sorted(kinds, key=str) != sorted(other, key=str):
        raise InvalidArgument(f"{first.id} and {second.id} have different decision fields: "
                              f"{sorted(set(kinds) ^ set(other), key=str)}")
    if any(_opaque(rule.when) for c in (first, second) for rule in c.policy.rules):
        return sampled_equivalence(first, second)
    from handoffs.contracts import _smt

    z3 = _z3()
    values = sorted({a.value for a in first.actions} | {a.value for a in second.actions})
    index = {v: i for i, v in enumerate(values)}
    state = _smt.StateVars(first.fields, "s.")
    bounded = _smt.StateVars(second.fields, "s.")
    one = _smt.Decision(first, state, index)
    two = _smt.Decision(second, state, index)
    solver = _Solver(z3, timeout_ms, [])
    solver.add(*state.domain, *bounded.domain)
    status, model = solver.check("equivalence", one.action != two.action)
    if status != "sat":
        return Equivalence("equivalent" if status == "unsat" else "unknown")
    raw = {name: state.value(model, name) for name in state.specs}

    def differ(states: Sequence[State]) -> bool:
        return bool(_decide(first, states[0]).value != _decide(second, states[0]).value)

    states = _materialise(first, [raw], differ)
    if states is None:
        return Equivalence("unknown")
    a1, a2 = _decide(first, states[0]), _decide(second, states[0])
    return Equivalence("different", states[0], (a1.value, a2.value),
                       (_loss(first, a2.value, a1.value), _loss(second, a1.value, a2.value)))


def _decide(contract: Contract[Any, Any], state: State) -> Any:
    return contract.decide(contract.state(**state))


def _loss(contract: Contract[Any, Any], chosen: str, reference: str) -> float | None:
    actions = {a.value: a for a in contract.actions}
    if chosen not in actions or reference not in actions:
        return None
    return contract.loss(actions[chosen], actions[reference])


def draw_value(spec: FieldSpec, rng: random.Random) -> Any:
    """One realistic value of a field: uniform in its declared bounds, no subnormal
    floats, an interval narrower than a twentieth of the range, fair booleans.
    """
    domain = spec.domain()
    if domain is not None:
        return rng.choice(domain)
    lo, hi = float(spec.minimum or 0), float(spec.maximum or 0)
    if spec.kind is FieldKind.INT:
        return rng.randint(math.ceil(lo), math.floor(hi))
    value = _decimal(Fraction(rng.uniform(lo, hi)), 6)
    value = _clip(spec, value)
    if spec.kind is FieldKind.FLOAT:
        return value
    half = rng.uniform(0, (hi - lo) / 40)
    return Interval(_clip(spec, _decimal(Fraction(value - half), 6)),
                    _clip(spec, _decimal(Fraction(value + half), 6)))


# ---------------------------------------------------------------------- coverage


@attrs.frozen
class Coverage:
    """How much of a policy's geometry a set of cases covers.

    Attributes:
        regions_live: the live regions (rules, then the default).
        regions_witnessed: the live regions some case falls in.
        boundaries_found: every boundary the analysis found.
        boundaries_covered: the boundaries with a case within δ of the cut on each
            side.
        dead_rules: rules no state reaches.
        missed_regions / missed_boundaries: what the cases miss (boundaries as
            ``"<side> | <side> along <axis>"``).
        method: the analysis's method (``certified`` or ``sampled``).
        unknown: solver queries left undecided (their regions are not counted).
    """

    regions_live: tuple[str, ...]
    regions_witnessed: tuple[str, ...]
    boundaries_found: int
    boundaries_covered: int
    dead_rules: tuple[str, ...]
    missed_regions: tuple[str, ...]
    missed_boundaries: tuple[str, ...]
    method: str
    unknown: int

    @property
    def complete(self) -> bool:
        """Every live region witnessed and every boundary covered."""
        return not self.missed_regions and not self.missed_boundaries

    def line(self) -> str:
        """One line for a report: ``regions 6/6 witnessed, boundaries 14/14 covered``."""
        text = (f"regions {len(self.regions_witnessed)}/{len(self.regions_live)} witnessed, "
                f"boundaries {self.boundaries_covered}/{self.boundaries_found} covered")
        if self.dead_rules:
            text += f", dead rules: {', '.join(self.dead_rules)}"
        if self.method != CERTIFIED:
            text += f" ({self.method})"
        if self.unknown:
            text += f", {self.unknown} queries unknown"
        if not self.complete:
            missed = [*self.missed_regions, *self.missed_boundaries]
            text += f"; the cases miss {len(missed)}: {'; '.join(missed[:4])}"
        return text

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (the lab report's ``coverage`` section)."""
        return {"available": True, "method": self.method,
                "regions_live": len(self.regions_live),
                "regions_witnessed": len(self.regions_witnessed),
                "boundaries_found": self.boundaries_found,
                "boundaries_covered": self.boundaries_covered,
                "dead_rules": list(self.dead_rules),
                "missed_regions": list(self.missed_regions),
                "missed_boundaries": list(self.missed_boundaries),
                "unknown_queries": self.unknown, "complete": self.complete,
                "line": self.line()}


def _side(contract: Contract[Any, Any], boundary: Boundary, index: int,
          state: State) -> bool:
    label = boundary.sides[index]
    for constraint in contract.hard_constraints:
        if constraint.when is not None and label in (f"{constraint.name}: applies",
                                                     f"{constraint.name}: does not apply"):
            return constraint.when.evaluate(state) is label.endswith(": applies")
    outcome = contract.evaluate(state)
    return outcome.determined and outcome.rule == label


def _at_cut(expr: Expr, cut: float, delta: float, state: State) -> bool:
    """The expression's value on ``state`` (an interval for ranges) is within δ of
    ``cut``.
    """
    found = expr.bounds(state)
    return found is not None and (float(found[0]) - delta * _SLACK <= cut
                                  <= float(found[1]) + delta * _SLACK)


def _shifted(spec: FieldSpec, value: Any, step: float) -> Any:
    """``value`` moved by ``step``, as the decimal a user would write (15 digits)."""
    def move(x: float) -> float:
        return _clip(spec, float(f"{x + step:.15g}"))

    if spec.kind is FieldKind.INTERVAL:
        return Interval(move(value.lo), move(value.hi))
    if spec.kind is FieldKind.INT:
        return int(_clip(spec, value + step))
    return move(value)


class CoverageTracker:
    """Feeds case states one at a time and keeps only what coverage needs (a flag per
    region and per boundary side): memory does not grow with the number of cases.
    """

    def __init__(self, contract: Contract[Any, Any], analysis: Analysis) -> None:
        self.contract = contract
        self.analysis = analysis
        self.witnessed: set[str] = set()
        self.near: set[tuple[int, int]] = set()
        live = {r.rule for r in analysis.live}
        self.live = [r.rule for r in analysis.regions if r.rule in live]
        self.by_label: dict[str, list[tuple[int, int]]] = {}
        for number, boundary in enumerate(analysis.boundaries):
            for side in (0, 1):
                self.by_label.setdefault(boundary.sides[side], []).append((number, side))
        self.constraints = [(h.name, h.when) for h in contract.hard_constraints
                            if h.when is not None]

    def feed(self, state: State) -> None:
        """Count one case's true state: its region, and each boundary side it lies on
        within δ of the cut (only the boundaries whose side names its region or one of
        the hard constraints' sides are looked at).
        """
        try:
            outcome = self.contract.evaluate(state)
            labels = [outcome.rule] if outcome.determined else []
            for name, when in self.constraints:
                truth = when.evaluate(state)
                if truth is not None:
                    labels.append(f"{name}: applies" if truth else f"{name}: does not apply")
        except PolicyError:  # an opaque predicate's failure is not coverage
            return
        if outcome.determined:
            self.witnessed.add(outcome.rule)
        boundaries = self.analysis.boundaries
        for label in labels:
            for number, side in self.by_label.get(label, ()):
                if (number, side) in self.near:
                    continue
                try:
                    if self._at(boundaries[number], side, state):
                        self.near.add((number, side))
                except PolicyError:
                    continue

    def _at(self, boundary: Boundary, side: int, state: State) -> bool:
        if boundary.axis_kind == "expression":
            if boundary.expr is None:
                return False
            return _at_cut(boundary.expr, boundary.cut, boundary.delta, state)
        spec = self.contract.field_map[boundary.axis]
        other = 1 - side
        steps: tuple[float, ...] = (boundary.delta, -boundary.delta)
        if spec.kind is not FieldKind.INT:
            steps += (boundary.delta / 2, -boundary.delta / 2)
        for step in steps:
            moved = {**state, boundary.axis: _shifted(spec, state[boundary.axis], step)}
            if _side(self.contract, boundary, other, moved):
                return True
        return False

    def result(self) -> Coverage:
        """The coverage of the states fed so far."""
        found = self.analysis.boundaries
        covered = [i for i in range(len(found))
                   if (i, 0) in self.near and (i, 1) in self.near]
        missed = tuple(f"{b.sides[0]} | {b.sides[1]} along {b.axis}"
                       for i, b in enumerate(found) if i not in covered)
        return Coverage(
            regions_live=tuple(self.live),
            regions_witnessed=tuple(r for r in self.live if r in self.witnessed),
            boundaries_found=len(found), boundaries_covered=len(covered),
            dead_rules=tuple(r.rule for r in self.analysis.dead),
            missed_regions=tuple(r for r in self.live if r not in self.witnessed),
            missed_boundaries=missed, method=self.analysis.method,
            unknown=len(self.analysis.unknown))


def coverage(contract: Contract[Any, Any], analysis: Analysis,
             states: Iterable[State | Any]) -> Coverage:
    """The coverage of ``states`` (views or state objects) against ``analysis``."""
    tracker = CoverageTracker(contract, analysis)
    for state in states:
        tracker.feed(state if isinstance(state, Mapping) else contract.view(state))
    return tracker.result()


# ---------------------------------------------------------------------- case generation

_GEOMETRY: dict[int, tuple[Contract[Any, Any], Analysis | None, str]] = {}
GEOMETRY_TIMEOUT_MS: Final = 2000


def realistic_value(spec: FieldSpec) -> Any:
    """A Hypothesis strategy for realistic values of one field: numbers spread evenly
    over the declared bounds as six-digit decimals (no subnormal floats, no pile-up
    at 0), intervals no wider than a twentieth of the range and inside it, fair
    booleans and enums (Hypothesis alone leans to the first member). Hypothesis
    seeds a pseudo-random generator per value (``randoms(use_true_random=True)``),
    so draws are reproducible with the seed but not bent towards Hypothesis's
    favourite edge values.
    """
    from hypothesis import strategies as st

    return st.randoms(use_true_random=True).map(lambda rng: draw_value(spec, rng))


def realistic_states(contract: Contract[Any, Any]) -> Any:
    """A Hypothesis strategy for complete states with :func:`realistic_value` fields."""
    from hypothesis import strategies as st

    fields = {spec.name: realistic_value(spec) for spec in contract.fields}
    return st.fixed_dictionaries(fields).map(lambda values: contract.state(**values))


def geometry(contract: Contract[Any, Any]) -> tuple[Analysis | None, str]:
    """The contract's analysis for case generation and coverage (computed once per
    contract object), or ``None`` and the reason when it cannot run (z3 missing).
    """
    cached = _GEOMETRY.get(id(contract))
    if cached is not None and cached[0] is contract:
        return cached[1], cached[2]
    try:
        found: Analysis | None = analyse(contract, timeout_ms=GEOMETRY_TIMEOUT_MS)
        reason = ""
    except MissingExtra as exc:
        found, reason = None, str(exc)
    if len(_GEOMETRY) >= 64:
        _GEOMETRY.clear()
    _GEOMETRY[id(contract)] = (contract, found, reason)
    return found, reason


def geometry_states(contract: Contract[Any, Any]) -> tuple[Any, ...]:
    """The states a test set of ``contract`` needs first (as state objects): a witness
    of every live region, both sides of every boundary (per field and on products and
    sums), the hard constraints' witnesses and boundaries. Empty when the analysis
    cannot run.
    """
    found, _ = geometry(contract)
    if found is None:
        return ()
    return tuple(contract.state(**state) for state in found.cover_states())


def certify_message(contract: Contract[Any, Any], truth: State, fields: Sequence[str],
                    trigger_fields: Sequence[str], *,
                    timeout_ms: int = GEOMETRY_TIMEOUT_MS) -> dict[str, Any]:
    """Check a minimal message found by search at the true state ``truth``: the field
    set is sufficient there, removing any field breaks it, and the fields whose change
    alone flips the decision (the counterfactual triggers) are ``trigger_fields``.

    Returns a JSON-ready certificate with ``method`` ``certified``, ``sampled`` (the
    policy holds an opaque predicate: nothing is proved) or ``unknown`` (a query ran
    out of time, or z3 is missing), and ``sufficient``, ``minimal``,
    ``trigger_fields`` and ``triggers_agree`` where proved.
    """
    if any(_opaque(rule.when) for rule in contract.policy.rules):
        return {"method": SAMPLED, "reason": "the policy holds an opaque predicate"}
    try:
        analyser = _Analyser(contract, timeout_ms, DEFAULT_DELTA_RATIO, 0)
    except MissingExtra as exc:
        return {"method": "unknown", "reason": str(exc)}
    names = [s.name for s in contract.fields]
    whole = analyser.sufficiency(list(fields), truth).status
    removals = [analyser.sufficiency([f for f in fields if f != name], truth).status
                for name in fields]
    triggers = [name for name in names
                if name in contract.policy.reads()
                and analyser.sufficiency([n for n in names if n != name], truth).status
                == "insufficient"]
    undecided = "unknown" in (whole, *removals) or bool(analyser.unknown)
    if undecided:
        return {"method": "unknown", "reason": "; ".join(analyser.unknown[:3])}
    return {"method": CERTIFIED, "sufficient": whole == "sufficient",
            "minimal": all(r == "insufficient" for r in removals),
            "trigger_fields": triggers,
            "triggers_agree": set(triggers) == set(trigger_fields)}


# ---------------------------------------------------------------------- search
# Search for policies the solver cannot read (internal; see ``analysis``).
#
# An opaque :class:`~handoffs.contracts.policy.Predicate` is arbitrary Python: it cannot be
# compiled. The search draws realistic states (seeded), and where two states decide
# differently it changes one field at a time from the first towards the second and
# bisects a numeric field until the two sides are at most δ apart. Everything it
# reports is labelled ``sampled``: a region it did not reach is *unknown*, never dead;
# a field it never saw change the decision is *unknown*, never irrelevant; no field
# set is claimed minimal.

_PAIRS = 400
_BISECTIONS = 80


UNDETERMINED = "undetermined"


def _outcome(contract: Contract[Any, Any], state: State) -> tuple[str | None, str | None]:
    """``(deciding rule, reference action)``: ``"undetermined"`` and the fail-closed
    action when the policy cannot decide; ``(None, None)`` when a predicate raised.
    """
    try:
        outcome = contract.evaluate(state)
    except PolicyError:
        return None, None
    if not outcome.determined or outcome.action is None:
        return UNDETERMINED, contract.fail_closed_action.value
    return outcome.rule, outcome.action.value


def _between(spec: FieldSpec, a: Any, b: Any) -> Any:
    if spec.kind is FieldKind.INT:
        return (a + b) // 2
    if spec.kind is FieldKind.INTERVAL:
        return Interval(min((a.lo + b.lo) / 2, (a.hi + b.hi) / 2),
                        max((a.lo + b.lo) / 2, (a.hi + b.hi) / 2))
    return (a + b) / 2


def _gap(spec: FieldSpec, a: Any, b: Any) -> float:
    if spec.kind is FieldKind.INTERVAL:
        return float(max(abs(a.lo - b.lo), abs(a.hi - b.hi)))
    return float(abs(a - b))


def _draws(contract: Contract[Any, Any], samples: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)  # noqa: S311 - reproducible test states, not secrets
    return [{spec.name: draw_value(spec, rng) for spec in contract.fields}
            for _ in range(samples)]


def sampled_analysis(  # noqa: PLR0912, PLR0915 - one pass over the draws
        contract: Contract[Any, Any], *, samples: int, seed: int, delta_ratio: float,
        timeout_ms: int, context: tuple[dict[str, Any], ...], started: float) -> Analysis:
    """The analysis by search, every result labelled ``sampled``."""
    names = [r.name for r in contract.policy.rules] + [contract.policy.default_name]
    actions = [r.action.value for r in contract.policy.rules] + [contract.policy.default.value]
    states = _draws(contract, samples, seed)
    seen: dict[str, State] = {}
    undetermined: State | None = None
    labelled: list[tuple[State, str, str]] = []
    for state in states:
        rule, action = _outcome(contract, state)
        if rule is None or action is None:
            continue
        if rule == UNDETERMINED:
            undetermined = undetermined or state
        else:
            seen.setdefault(rule, state)
        labelled.append((state, rule, action))
    regions = tuple(Region(n, a, "live" if n in seen else "unknown", seen.get(n),
                           method=SAMPLED) for n, a in zip(names, actions, strict=True))
    boundaries: dict[tuple[str, str, str], Boundary] = {}
    flips: dict[str, tuple[State, State]] = {}
    for (s, _, act_s), (t, _, act_t) in itertools.pairwise(labelled[:_PAIRS]):
        if act_s == act_t:
            continue
        for spec in contract.fields:
            if s[spec.name] == t[spec.name]:
                continue
            moved = {**s, spec.name: t[spec.name]}
            _, act_m = _outcome(contract, moved)
            if act_m is None or act_m == act_s:
                continue
            flips.setdefault(spec.name, (s, moved))
            if not _numeric(spec):
                continue
            found = _bisect(contract, spec, s, moved, action=act_s, delta_ratio=delta_ratio)
            if found is None:
                continue
            low, high = found
            rule_l, _ = _outcome(contract, low)
            rule_h, act_h = _outcome(contract, high)
            if rule_l is None or rule_h is None or act_h is None:
                continue
            key = (min(rule_l, rule_h), max(rule_l, rule_h), spec.name)
            value_l, value_h = low[spec.name], high[spec.name]
            cut = (_mid(value_l) + _mid(value_h)) / 2
            boundaries.setdefault(key, Boundary(
                (rule_l, rule_h), (act_s, act_h), spec.name, "field",
                _field_delta(spec, delta_ratio), (low, high), cut, method=SAMPLED))
    relevance = tuple(
        Relevance(spec.name, False if spec.name not in contract.policy.reads()
                  else (True if spec.name in flips else None),
                  flips.get(spec.name), method=SAMPLED)
        for spec in contract.fields)
    constraints = []
    for constraint in contract.hard_constraints:
        reach: dict[str, State] = {}
        for truth, _, action in labelled:
            chosen = constraint.chosen
            reference = next(a for a in contract.actions if a.value == action)
            try:
                if constraint.violated(chosen, reference, truth=truth):
                    reach.setdefault(action, truth)
            except PolicyError:
                continue
        others = tuple(a.value for a in contract.actions if a.value not in reach
                       and a not in constraint.allowed_references)
        constraints.append(ConstraintReach(constraint.name, constraint.chosen.value,
                                           tuple(reach.items()), (), others, method=SAMPLED))
    result = Analysis(
        contract=contract.id, method=SAMPLED, regions=regions, undetermined=undetermined,
        constraints=tuple(constraints), boundaries=tuple(boundaries.values()),
        relevance=relevance, minimal_sets=MinimalSets("unknown", ()),
        cuts=tuple(_cuts(contract)), context=context, unknown=(), warnings=(),
        timeout_ms=timeout_ms)
    return attrs.evolve(result, warnings=tuple(warnings_of(result, ())),
                        seconds=time.process_time() - started)


def _mid(value: Any) -> float:
    if isinstance(value, Interval):
        return (value.lo + value.hi) / 2
    return float(value)


def _bisect(contract: Contract[Any, Any], spec: FieldSpec, s: Mapping[str, Any],
            t: Mapping[str, Any], *, action: str,
            delta_ratio: float) -> tuple[State, State] | None:
    """Two states differing in ``spec`` alone, at most δ apart, the first deciding
    ``action`` and the second not (bisection on the segment between ``s`` and ``t``).
    """
    delta = _field_delta(spec, delta_ratio)
    low: State = dict(s)
    high: State = dict(t)
    for _ in range(_BISECTIONS):
        if _gap(spec, low[spec.name], high[spec.name]) <= delta:
            return low, high
        middle = {**low, spec.name: _between(spec, low[spec.name], high[spec.name])}
        if middle[spec.name] in (low[spec.name], high[spec.name]):
            return low, high
        _, act = _outcome(contract, middle)
        if act == action:
            low = middle
        else:
            high = middle
    return None


def sampled_equivalence(first: Contract[Any, Any], second: Contract[Any, Any], *,
                        samples: int = 2000, seed: int = 0) -> Equivalence:
    """Equivalence by search: ``different`` with a state, or ``unknown`` (never
    ``equivalent``: a search that finds no difference proves nothing).
    """
    for state in _draws(first, samples, seed):
        if not all(spec.contains(state[spec.name]) for spec in second.fields):
            continue
        a1 = _outcome(first, state)[1]
        a2 = _outcome(second, state)[1]
        if a1 is not None and a2 is not None and a1 != a2:
            return Equivalence("different", state, (a1, a2),
                               (_loss(first, a2, a1), _loss(second, a1, a2)), method=SAMPLED)
    return Equivalence("unknown", method=SAMPLED)
