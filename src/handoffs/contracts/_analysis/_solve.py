"""Policy analysis of a contract with an SMT solver: the analyser and the queries
(``analyse``, ``sufficiency``, ``minimal_sets``, ``equivalence``) that hand over to the
sampled search when a policy holds an opaque predicate (internal; see ``analysis``).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

from handoffs._errors import InvalidArgument
from handoffs._solver import fresh_context, z3_module
from handoffs.contracts._analysis._geometry import (
    _at_cut,
    _axes,
    _Axis,
    _conditions,
    _cuts,
    _materialise,
    _opaque,
    _Solver,
    axis_value,
)
from handoffs.contracts._analysis._prune import Pruner
from handoffs.contracts._analysis._results import (
    CERTIFIED,
    DEFAULT_DELTA_RATIO,
    DEFAULT_TIMEOUT_MS,
    Analysis,
    Boundary,
    ConstraintReach,
    Equivalence,
    MinimalSets,
    Region,
    Relevance,
    State,
    Sufficiency,
    warnings_of,
)
from handoffs.contracts._analysis._search import (
    _decide,
    _loss,
    sampled_analysis,
    sampled_equivalence,
)
from handoffs.contracts._contract import Contract
from handoffs.contracts._policy import (
    Condition,
)

_SUFFICIENCY: Final = {"sat": "insufficient", "unsat": "sufficient"}
"""A sufficiency query's status (two states agree on the fields yet decide apart: sat)."""


class _Analyser:
    def __init__(self, contract: Contract[Any, Any], timeout_ms: int, delta_ratio: float,
                 minimal_budget: int) -> None:
        from handoffs.contracts import _smt

        self.z3 = z3_module()
        self.smt = _smt
        self.contract = contract
        self.timeout_ms = timeout_ms
        self.unknown: list[str] = []
        self.adjacent: set[tuple[str, int, int]] = set()
        """(axis, i, j), i < j: the solver found a pair of states across regions i and
        j along the axis (a boundary, when the pair rounds to floats the evaluator
        confirms)."""
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
            hit = {str(c) for c in core}  # by name: comparing z3 terms builds terms
            chosen = [j for j, m in enumerate(markers) if str(m) in hit]
            for j in list(chosen):  # deletion: a minimal covering set
                rest = [k for k in chosen if k != j]
                if self.solver.core("shadow minimisation",
                                    [markers[k] for k in rest])[0] == "unsat":
                    chosen = rest
        finally:
            self.solver.solver.pop()
        return tuple(self.names[j] for j in chosen)

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

    def _along(self, i: int, axis: _Axis, assumed: Sequence[Any], *,
               candidates: Sequence[int], chosen: Mapping[int, Any]) -> list[Boundary]:
        """The boundaries of region ``i`` along ``axis`` with the ``candidates`` (the
        other regions are assumed away), one check per boundary found and one more to
        prove there is no other.
        """
        z3 = self.z3
        name = self.names[i]
        found: list[Boundary] = []
        left = list(candidates)
        away = [z3.Not(literal) for j, literal in chosen.items() if j not in left]
        while left:
            status, model = self.solver.assuming(f"boundary of {name} along {axis.name}",
                                                 [*assumed, *away])
            if status != "sat":
                break
            j = next(k for k in left
                     if z3.is_true(model.eval(self.db.regions[k], model_completion=True)))
            left.remove(j)
            away.append(z3.Not(chosen[j]))
            self.adjacent.add((axis.name, min(i, j), max(i, j)))
            other = self.names[j]
            states = _materialise(
                self.contract, [self.raw(model, self.pair.a), self.raw(model, self.pair.b)],
                self._across(name, other, axis))
            if states is None:
                continue
            found.append(Boundary((name, other), (self.actions[i], self.actions[j]),
                                  axis.name, axis.kind, axis.delta, (states[0], states[1]),
                                  self._cut(axis, states), expr=axis.expr))
        return found

    def boundaries(self, regions: Sequence[Region]) -> list[Boundary]:
        """The boundaries between the regions of different actions along each axis, and
        those of the hard constraints' conditions.
        """
        return self._region_boundaries(regions) + self._constraint_boundaries()

    def _region_boundaries(self, regions: Sequence[Region]) -> list[Boundary]:
        """The boundaries between regions of different actions.

        A pair of regions is asked about only where it can be a boundary: both live
        (not proved dead), different actions, and their interval boxes meet along the
        axis (:mod:`._prune`). One incremental solver answers every query: each
        region (of either state) and each axis's closeness sit once behind an
        indicator literal, and a query is a set of assumptions (this region, this
        axis, not the regions that are no candidate or already paired), so what the
        solver learned stays for the next query instead of a push, a check and a pop
        per query.
        """
        z3 = self.z3
        found: list[Boundary] = []
        rules = self.contract.policy.rules
        pruner = Pruner(self.contract)
        live = [j for j, r in enumerate(regions) if r.status != "dead"]
        chosen = {j: z3.Bool(f"boundary.b.{j}") for j in live}  # b lies in region j
        decides: dict[int, Any] = {}  # a lies in region i
        close: dict[str, Any] = {}  # the pair is close along the axis
        self.solver.solver.push()
        try:
            for j in live:
                self.solver.add(z3.Implies(chosen[j], self.db.regions[j]))
            self.solver.add(z3.Or(*chosen.values()))
            for i in live:
                guard_reads = frozenset().union(*(r.when.reads() for r in rules[: i + 1]))
                for axis in self.axes:
                    if not axis.reads & guard_reads:
                        continue
                    candidates = [j for j in live if self.actions[j] != self.actions[i]
                                  and (axis.name, min(i, j), max(i, j)) not in self.adjacent
                                  and pruner.meets(i, j, axis)]
                    if not candidates:
                        continue
                    if i not in decides:
                        decides[i] = z3.Bool(f"boundary.a.{i}")
                        self.solver.add(z3.Implies(decides[i], self.da.regions[i]))
                    if axis.name not in close:
                        close[axis.name] = z3.Bool(f"boundary.close.{len(close)}")
                        self.solver.add(z3.Implies(close[axis.name],
                                                   z3.And(*self.close(axis))))
                    found += self._along(i, axis, [decides[i], close[axis.name]],
                                         candidates=candidates, chosen=chosen)
        finally:
            self.solver.solver.pop()
        return found

    def _constraint_boundaries(self) -> list[Boundary]:
        """The boundaries of the hard constraints' conditions (applies | does not)."""
        found: list[Boundary] = []
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
            formulas += self.pair.a.pin(spec.name, at[spec.name])
        return formulas

    def _query(self, fields: Sequence[str], at: State | None) -> tuple[str, Any]:
        """Can two states equal on ``fields`` (and at ``at``, if given) decide
        differently? The solver's status and model.
        """
        pinned = self.pin(at) if at is not None else []
        return self.solver.check(
            f"sufficiency of {sorted(fields)}", self.da.action != self.db.action,
            *pinned, *self.pair.a.equal(self.pair.b, list(fields)))

    def sufficiency(self, fields: Sequence[str], at: State | None = None) -> Sufficiency:
        status, model = self._query(fields, at)
        key = tuple(sorted(fields, key=list(self.contract.field_map).index))
        pair = self._pair(model) if status == "sat" else None
        return Sufficiency(key, _SUFFICIENCY.get(status, "unknown"), pair, at)

    def sufficiency_status(self, fields: Sequence[str], at: State | None = None) -> str:
        """:meth:`sufficiency`'s status alone (no counterexample pair is built)."""
        return _SUFFICIENCY.get(self._query(fields, at)[0], "unknown")

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
    with fresh_context():  # the same states in any process
        analyser = _Analyser(contract, timeout_ms, delta_ratio, minimal_budget)
        regions = analyser.regions()
        relevance = analyser.relevance()
        minimal = analyser.global_minimal(relevance)
        result = Analysis(
            contract=contract.id, method=CERTIFIED, regions=tuple(regions),
            undetermined=analyser.undetermined(), constraints=tuple(analyser.constraints()),
            boundaries=tuple(analyser.boundaries(regions)), relevance=tuple(relevance),
            minimal_sets=minimal, cuts=tuple(_cuts(contract)), context=context,
            unknown=(), warnings=(), timeout_ms=timeout_ms)
    return attrs.evolve(result, unknown=tuple(analyser.unknown),
                        warnings=tuple(warnings_of(result, analyser.unknown)),
                        seconds=time.process_time() - started)




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
    with fresh_context():  # the same counterexample in any process
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
    with fresh_context():  # the same pairs (broken_by_removal) in any process
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

    values = sorted({a.value for a in first.actions} | {a.value for a in second.actions})
    index = {v: i for i, v in enumerate(values)}
    with fresh_context():  # the same differing state in any process
        state = _smt.StateVars(first.fields, "s.")
        bounded = _smt.StateVars(second.fields, "s.")
        one = _smt.Decision(first, state, index)
        two = _smt.Decision(second, state, index)
        solver = _Solver(z3_module(), timeout_ms, [])
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


