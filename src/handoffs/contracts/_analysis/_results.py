"""The answers of the policy analysis: regions, boundaries, relevance, sufficiency, minimal
sets, surfaces, cuts, equivalence, and the warnings a user must see (internal; see
``analysis``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from handoffs.contracts._fields import Interval
from handoffs.contracts._policy import (
    Expr,
)

CERTIFIED: Final = "certified"
"""A result the solver proved (every state was considered)."""
SAMPLED: Final = "sampled"
"""A result found by search over opaque predicates: evidence, not a proof."""
DEFAULT_TIMEOUT_MS: Final = 5000
"""The solver's time limit per query; a query past it is ``unknown``."""
DEFAULT_DELTA_RATIO: Final = 1e-6
_DIGITS: Final = (6, 9, 12, 15, 17)

State = Mapping[str, Any]


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


