"""Boundary coverage of a set of states, the realistic-state strategies and the per-contract
geometry cache the lab and the testing helpers draw on (internal; see ``analysis``).
"""

from __future__ import annotations

import enum
import functools
import itertools
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

from handoffs._errors import MissingExtra, PolicyError
from handoffs._solver import fresh_context, main_context, z3_module
from handoffs.contracts._analysis._geometry import (
    _at_cut,
    _clip,
    _conditions,
    _materialise,
    _opaque,
    _point,
)
from handoffs.contracts._analysis._results import (
    CERTIFIED,
    DEFAULT_DELTA_RATIO,
    DEFAULT_TIMEOUT_MS,
    SAMPLED,
    Analysis,
    Boundary,
    State,
)
from handoffs.contracts._analysis._search import _decide, draw_value
from handoffs.contracts._analysis._solve import _Analyser, analyse
from handoffs.contracts._contract import Contract
from handoffs.contracts._fields import FieldKind, FieldSpec, Interval


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
        transitions_found: the enum-value transitions that can change the decision
            (``field: A->B``: a state with ``A`` decides otherwise with ``B``).
        transitions_covered: those with a case where the change does change it.
        missed_transitions: the transitions no case witnesses.
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
    transitions_found: int = 0
    transitions_covered: int = 0
    missed_transitions: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Every live region witnessed, every boundary and every enum-value transition
        covered.
        """
        return not (self.missed_regions or self.missed_boundaries or self.missed_transitions)

    def line(self) -> str:
        """One line for a report: ``regions 6/6 witnessed, boundaries 14/14 covered,
        transitions 6/6 covered``.
        """
        text = (f"regions {len(self.regions_witnessed)}/{len(self.regions_live)} witnessed, "
                f"boundaries {self.boundaries_covered}/{self.boundaries_found} covered")
        if self.transitions_found:
            text += (f", transitions {self.transitions_covered}/{self.transitions_found} "
                     "covered")
        if self.dead_rules:
            text += f", dead rules: {', '.join(self.dead_rules)}"
        if self.method != CERTIFIED:
            text += f" ({self.method})"
        if self.unknown:
            text += f", {self.unknown} queries unknown"
        if not self.complete:
            missed = [*self.missed_regions, *self.missed_boundaries,
                      *self.missed_transitions]
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
                "transitions_found": self.transitions_found,
                "transitions_covered": self.transitions_covered,
                "missed_transitions": list(self.missed_transitions),
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

    def __init__(self, contract: Contract[Any, Any], analysis: Analysis,
                 transitions: Sequence[Transition] = ()) -> None:
        self.contract = contract
        self.analysis = analysis
        self.transitions = tuple(transitions)
        self.moved: set[int] = set()
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
        self._transitions(state)
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

    def _transitions(self, state: State) -> None:
        decided = None
        for number, transition in enumerate(self.transitions):
            if number in self.moved or _wire(state.get(transition.field)) != transition.source:
                continue
            spec = self.contract.field_map[transition.field]
            target = next(v for v in spec.values() or () if _wire(v) == transition.target)
            try:
                if decided is None:
                    decided = _decide(self.contract, state)
                if _decide(self.contract, {**state, transition.field: target}) != decided:
                    self.moved.add(number)
            except (PolicyError, ValueError, TypeError):
                continue

    def _at(self, boundary: Boundary, side: int, state: State) -> bool:
        if boundary.axis_kind == "expression":
            if boundary.expr is None:
                return False
            return _at_cut(boundary.expr, boundary.cut, boundary.delta, state)
        spec = self.contract.field_map[boundary.axis]
        if state[boundary.axis] is None:  # absent: at no numeric boundary
            return False
        other = 1 - side
        steps: tuple[float, ...] = (boundary.delta, -boundary.delta)
        if spec.kind is not FieldKind.INT:
            steps += (boundary.delta / 2, -boundary.delta / 2)
        for step in steps:
            moved = {**state, boundary.axis: _shifted(spec, state[boundary.axis], step)}
            if _side(self.contract, boundary, other, moved):
                return True
        # The other side may be narrower than the steps along the axis here (a region
        # squeezed between two cuts): a state within δ of the cut is on the boundary
        # too when the other witness's value, just across the cut, puts it on the other
        # side. The analysis's own pair is covered by construction.
        if abs(float(_point(state[boundary.axis])) - boundary.cut) > boundary.delta:
            return False
        across = boundary.states[other][boundary.axis]
        return _side(self.contract, boundary, other, {**state, boundary.axis: across})

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
            unknown=len(self.analysis.unknown),
            transitions_found=len(self.transitions), transitions_covered=len(self.moved),
            missed_transitions=tuple(t.name for i, t in enumerate(self.transitions)
                                     if i not in self.moved))


def _wire(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


@attrs.frozen
class Transition:
    """An enum-value transition that can change the decision: ``state`` holds
    ``source`` in ``field`` and decides ``actions[0]``; with ``target`` it decides
    ``actions[1]``. For an optional enum field ``None`` (absent) is a value too, and
    the transitions to and from it count (a presence flip).
    """

    field: str
    source: Any
    target: Any
    state: State
    actions: tuple[str, str]

    @property
    def name(self) -> str:
        """``<field>: <source>-><target>`` (``null`` for an absent value)."""
        def shown(value: Any) -> str:
            return "null" if value is None else str(value)

        return f"{self.field}: {shown(self.source)}->{shown(self.target)}"


def transitions(contract: Contract[Any, Any], *,
                timeout_ms: int = DEFAULT_TIMEOUT_MS) -> tuple[Transition, ...]:
    """Every enum-value transition of a field the policy reads that changes the
    decision somewhere, each with a witness state (none for a policy holding an opaque
    predicate: the search does not look for them, and the coverage says ``sampled``).
    An optional enum field's ``None`` is one of its values here.
    """
    if any(_opaque(c) for c in _conditions(contract)):
        return ()
    with fresh_context():  # the same witnesses in any process
        return _find_transitions(contract, timeout_ms)


def _find_transitions(contract: Contract[Any, Any], timeout_ms: int
                      ) -> tuple[Transition, ...]:
    analyser = _Analyser(contract, timeout_ms, DEFAULT_DELTA_RATIO, 0)
    pair = analyser.pair
    reads = contract.policy.reads()
    found: list[Transition] = []
    for spec in contract.fields:
        if spec.kind is not FieldKind.ENUM or spec.name not in reads:
            continue
        others = [s.name for s in contract.fields if s.name != spec.name]
        domain = list(spec.values() or ())
        for source, target in itertools.permutations(domain, 2):
            status, model = analyser.solver.check(
                f"transition {spec.name}: {_wire(source)}->{_wire(target)}",
                *pair.a.pin(spec.name, source), *pair.b.pin(spec.name, target),
                *pair.a.equal(pair.b, others), analyser.da.action != analyser.db.action)
            if status != "sat":
                continue
            raw = analyser.raw(model, pair.a)

            def moves(states: Sequence[State], f: str = spec.name, t: Any = target) -> bool:
                return bool(_decide(contract, states[0])
                            != _decide(contract, {**states[0], f: t}))

            states = _materialise(contract, [raw], moves)
            if states is None:
                continue
            state = states[0]
            found.append(Transition(spec.name, _wire(source), _wire(target), state, (
                _decide(contract, state).value,
                _decide(contract, {**state, spec.name: target}).value)))
    return tuple(found)


def coverage(contract: Contract[Any, Any], analysis: Analysis,
             states: Iterable[State | Any]) -> Coverage:
    """The coverage of ``states`` (views or state objects) against ``analysis``."""
    tracker = CoverageTracker(contract, analysis, transitions(contract))
    for state in states:
        tracker.feed(state if isinstance(state, Mapping) else contract.view(state))
    return tracker.result()


# ---------------------------------------------------------------------- case generation

GEOMETRY_TIMEOUT_MS: Final = 2000


def _realistic_value(spec: FieldSpec) -> Any:
    from hypothesis import strategies as st

    return st.randoms(use_true_random=True).map(lambda rng: draw_value(spec, rng))


@attrs.frozen(eq=False)
class Geometry:
    """A contract's policy geometry for case generation and coverage: what
    :func:`~handoffs.contracts.analysis.geometry` returns (one per contract object).
    The analysis runs, under a short time limit, when :attr:`analysis` or
    :attr:`reason` is first read; the realistic draws need no analysis.

    Attributes:
        contract: the contract analysed.
    """

    contract: Contract[Any, Any]
    _solved: list[tuple[Analysis | None, str]] = attrs.field(factory=list, init=False,
                                                             repr=False)

    _moves: list[tuple[Transition, ...]] = attrs.field(factory=list, init=False, repr=False)
    _certifiers: list[tuple[tuple[int, Any, int], _Analyser]] = attrs.field(
        factory=list, init=False, repr=False)

    def _solve(self) -> tuple[Analysis | None, str]:
        if not self._solved:
            try:
                found: Analysis | None = analyse(self.contract,
                                                 timeout_ms=GEOMETRY_TIMEOUT_MS)
                reason = ""
            except MissingExtra as exc:
                found, reason = None, str(exc)
            self._solved.append((found, reason))
        return self._solved[0]

    @property
    def transitions(self) -> tuple[Transition, ...]:
        """The enum-value transitions that can change the decision (empty when the
        analysis cannot run).
        """
        if not self._moves:
            self._moves.append(() if self.analysis is None else transitions(
                self.contract, timeout_ms=GEOMETRY_TIMEOUT_MS))
        return self._moves[0]

    @property
    def analysis(self) -> Analysis | None:
        """The contract's :class:`~handoffs.contracts.analysis.Analysis`, or ``None``
        when it cannot run (z3, in the ``lab`` extra, missing).
        """
        return self._solve()[0]

    @property
    def reason(self) -> str:
        """Why :attr:`analysis` is ``None`` (empty otherwise)."""
        return self._solve()[1]

    def states(self) -> tuple[Any, ...]:
        """The states a test set of the contract needs first (as state objects): a
        witness of every live region, both sides of every boundary (per field and on
        products and sums), the hard constraints' witnesses and boundaries, and a
        witness of every enum-value transition that changes the decision. Empty when
        the analysis cannot run.
        """
        found = self.analysis
        if found is None:
            return ()
        states = list(found.cover_states())
        tracker = CoverageTracker(self.contract, found, self.transitions)
        for state in states:
            tracker._transitions(state)
        for number, transition in enumerate(self.transitions):
            if number not in tracker.moved:  # no state the geometry needs witnesses it
                tracker._transitions(transition.state)
                states.append(transition.state)
        return tuple(self.contract.state(**state) for state in states)

    def tracker(self) -> CoverageTracker | None:
        """A tracker to feed case states one at a time (its ``result()`` is their
        :class:`~handoffs.contracts.analysis.Coverage`), or ``None`` when the analysis cannot run.
        """
        found = self.analysis
        return None if found is None else CoverageTracker(self.contract, found,
                                                          self.transitions)

    def realistic_value(self, field: str) -> Any:
        """A Hypothesis strategy for realistic values of one field: numbers spread
        evenly over the declared bounds as six-digit decimals (no subnormal floats, no
        pile-up at 0), intervals no wider than a twentieth of the range and inside it,
        fair booleans and enums (Hypothesis alone leans to the first member).
        Hypothesis seeds a pseudo-random generator per value
        (``randoms(use_true_random=True)``), so draws are reproducible with the seed
        but not bent towards Hypothesis's favourite edge values.

        Raises:
            KeyError: the contract has no field ``field``.
        """
        return _realistic_value(self.contract.field_map[field])

    def realistic_states(self) -> Any:
        """A Hypothesis strategy for complete states with :meth:`realistic_value` fields."""
        from hypothesis import strategies as st

        contract = self.contract
        fields = {spec.name: _realistic_value(spec) for spec in contract.fields}
        return st.fixed_dictionaries(fields).map(lambda values: contract.state(**values))

    def certify_message(self, truth: State, fields: Sequence[str],
                        trigger_fields: Sequence[str], *,
                        timeout_ms: int = GEOMETRY_TIMEOUT_MS) -> dict[str, Any]:
        """Check a minimal message found by search at the true state ``truth``: the
        field set is sufficient there, removing any field breaks it, and the fields
        whose change alone flips the decision (the counterfactual triggers) are
        ``trigger_fields``.

        Returns a JSON-ready certificate with ``method`` ``certified``, ``sampled`` (the
        policy holds an opaque predicate: nothing is proved) or ``unknown`` (a query ran
        out of time, or z3 is missing), and ``sufficient``, ``minimal``,
        ``trigger_fields`` and ``triggers_agree`` where proved.
        """
        contract = self.contract
        if any(_opaque(rule.when) for rule in contract.policy.rules):
            return {"method": SAMPLED, "reason": "the policy holds an opaque predicate"}
        with main_context():  # its analyser's solver is shared
            try:
                analyser = self._certifier(timeout_ms)
            except MissingExtra as exc:
                return {"method": "unknown", "reason": str(exc)}
            analyser.unknown.clear()  # the queries that ran out of time, this call's
            status = functools.partial(analyser.sufficiency_status, at=truth)
            names = [s.name for s in contract.fields]
            whole = status(list(fields))
            removals = [status([f for f in fields if f != name]) for name in fields]
            triggers = [name for name in names if name in contract.policy.reads()
                        and status([n for n in names if n != name]) == "insufficient"]
            undecided = list(analyser.unknown)
        if undecided or "unknown" in (whole, *removals):
            return {"method": "unknown", "reason": "; ".join(undecided[:3])}
        return {"method": CERTIFIED, "sufficient": whole == "sufficient",
                "minimal": all(r == "insufficient" for r in removals),
                "trigger_fields": triggers,
                "triggers_agree": set(triggers) == set(trigger_fields)}

    def _certifier(self, timeout_ms: int) -> _Analyser:
        """The analyser :meth:`certify_message` asks, made once per process, time
        limit and z3 main context (its terms belong to the context they were made on;
        a forked child does not take over a solver its parent may have been asking).
        Only statuses are read from it, never a model: they are the same whatever it
        was asked before, so it need not start fresh.
        """
        z3 = z3_module()
        made = (os.getpid(), z3.main_ctx(), timeout_ms)  # a context equals only itself
        if self._certifiers and self._certifiers[0][0] == made:
            return self._certifiers[0][1]
        analyser = _Analyser(self.contract, timeout_ms, DEFAULT_DELTA_RATIO, 0)
        self._certifiers[:] = [(made, analyser)]
        return analyser


_GEOMETRY: dict[int, Geometry] = {}


def geometry(contract: Contract[Any, Any]) -> Geometry:
    """The contract's :class:`~handoffs.contracts.analysis.Geometry` for
    case generation and coverage (one per contract object, so its analysis runs
    once): the analysis, or ``None`` and the reason when it cannot run (z3 missing);
    the states a test set needs first, realistic draws, a coverage tracker and the
    check of a minimal message.
    """
    cached = _GEOMETRY.get(id(contract))
    if cached is not None and cached.contract is contract:
        return cached
    if len(_GEOMETRY) >= 64:
        _GEOMETRY.clear()
    result = _GEOMETRY[id(contract)] = Geometry(contract)
    return result
