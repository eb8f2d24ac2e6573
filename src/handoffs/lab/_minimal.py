"""Counterfactual triggers and minimal sufficient messages.

Two oracles, kept apart (lab anchors §5):

- **R(S), region sufficiency** against the contract's reference policy: every state
  that agrees with the case on the fields in S (within their coarsened values)
  gets the same reference action. No receiver calls. It is decided by the policy's
  three-valued evaluation where that is conclusive, else by enumerating the free
  fields over finite domains and over the policy's threshold cells (exact for the
  declarative conditions; a policy with opaque predicates is checked only on its
  finite fields and otherwise treated conservatively). A policy with arithmetic
  comparisons (``Field("p") * Field("h") > 2``) is decided on boxes: the constraints
  as intervals, free numeric fields over their whole range, evaluated in interval
  semantics and bisected on number fields until determined (sound: a box is called
  sufficient only when every state in it is proved to get the action; an exhausted
  budget answers ``False``).
- **T(S), the instance test** on a receiver: given the message cut down to S, the
  receiver accepts and chooses the reference action. One receiver call.

:func:`minimal_message` finds a minimum-cardinality region-sufficient field set
(searching by increasing size within a budget, else deletion to a subset-minimal
one) and then the coarsest representation of each field: merged enum values, or the
widest interval between the policy's thresholds. :func:`counterfactual_triggers`
lists the single feasible changes that flip the reference action; minimal
sufficient sets and triggers are hitting-set duals, and for decision lists the
minimal set equals the set of trigger fields. :func:`exhaustive_minimum` checks the
search on small contracts.

An optional field's ``None`` (known not to apply) is one more value: a free optional
field ranges over ``None`` and its values, a message may carry ``None`` exactly, and
a presence flip (a value to ``None``, or back) is a counterfactual trigger. T(S), the
search on a receiver, is :mod:`handoffs.lab._search`.
"""

from __future__ import annotations

import collections
import itertools
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

from handoffs._neighbours import neighbours
from handoffs.contracts import Contract, FieldKind, FieldSpec, Interval
from handoffs.lab._values import wire_value

__all__ = [
    "Constraint",
    "FieldRepresentation",
    "MinimalMessage",
    "Reference",
    "Trigger",
    "counterfactual_triggers",
    "exhaustive_minimum",
    "minimal_message",
    "region_sufficient",
]

_ENUMERATION_LIMIT: Final = 50_000
_BOX_LIMIT: Final = 128
_DECIDE_CACHE_LIMIT: Final = 65_536


def _key(value: Any) -> Hashable:
    if isinstance(value, Interval):
        return ("interval", value.lo, value.hi)
    return (type(value).__name__, value)


class Reference:
    """The contract's reference policy as a memoised function of complete views.

    A view maps every decision field to a typed value; an undetermined outcome
    (possible with intervals) maps to the contract's fail-closed action.
    """

    def __init__(self, contract: Contract[Any, Any]) -> None:
        self.contract = contract
        self.names = tuple(spec.name for spec in contract.fields)
        self.specs = contract.fields
        self.predicates = contract.policy.has_predicates()
        self.arithmetic = contract.policy.has_arithmetic()
        self.thresholds: dict[str, tuple[float, ...]] = {}
        for name, t in contract.policy.thresholds():
            self.thresholds[name] = tuple(sorted({*self.thresholds.get(name, ()), t}))
        self._cache: dict[Hashable, str] = {}

    def __call__(self, view: Mapping[str, Any]) -> str:
        """The reference action value for a complete typed view."""
        key = tuple(_key(view[n]) for n in self.names)
        found = self._cache.get(key)
        if found is not None:
            return found
        outcome = self.contract.policy.evaluate(view)
        action = (outcome.action or self.contract.fail_closed_action).value
        if len(self._cache) >= _DECIDE_CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = action
        return str(action)

    def cut_points(self, name: str, view: Mapping[str, Any]) -> tuple[float, ...]:
        """The values of ``name`` where the policy may change its answer when the other
        fields keep their values in ``view``: the static thresholds, plus the cuts of
        arithmetic comparisons (``p * h > 2`` cuts ``h`` at ``2 / p`` for either end
        of an interval ``p``).
        """
        static = self.thresholds.get(name, ())
        if not self.arithmetic:
            return static
        found = {t for rule in self.contract.policy.rules
                 for field, t in rule.when.cuts(view) if field == name}
        return tuple(sorted({*static, *found}))

    def representatives(self, spec: FieldSpec, within: Interval | None = None) -> list[Any]:
        """Values of ``spec`` that cover every threshold cell (optionally inside
        ``within``); an optional field's ``None`` first when ``within`` is not given.
        """
        absent: list[Any] = [None] if spec.optional and within is None else []
        return absent + self._present(spec, within)

    def _present(self, spec: FieldSpec, within: Interval | None) -> list[Any]:
        domain = spec.domain()
        if domain is not None:
            return list(domain)
        lo = float(spec.minimum if spec.minimum is not None else 0.0)
        hi = float(spec.maximum if spec.maximum is not None else 0.0)
        if within is not None:
            lo, hi = max(lo, within.lo), min(hi, within.hi)
        points: set[float] = {lo, hi}
        for t in self.thresholds.get(spec.name, ()):
            points.update(_near(spec, t))
        ordered = sorted(p for p in points if lo <= p <= hi)
        if spec.kind is FieldKind.INT:
            return sorted({int(p) for p in ordered if math.ceil(lo) <= int(p) <= math.floor(hi)})
        ordered = sorted({*ordered, *((a + b) / 2 for a, b in itertools.pairwise(ordered))})
        if spec.kind is FieldKind.FLOAT:
            return ordered
        # Intervals: points, and spans between neighbouring representatives.
        spans = [Interval(p, p) for p in ordered]
        spans += [Interval(a, b) for a, b in itertools.combinations(ordered, 2)]
        return spans


def _reference(of: Contract[Any, Any] | Reference) -> Reference:
    return of if isinstance(of, Reference) else Reference(of)


@attrs.frozen
class Constraint:
    """What a (coarsened) message says about one field: an exact value, a set of
    possible values (merged enum values), or an interval of possible values.
    """

    exact: Any = None
    values: tuple[Any, ...] | None = None
    interval: Interval | None = None

    def kleene(self, spec: FieldSpec, predicates: bool) -> tuple[bool, Any]:
        """``(True, value)`` when the constraint can sit in a three-valued view."""
        if self.values is None and self.interval is None:
            return True, self.exact
        if self.interval is not None and not predicates:
            return True, self.interval
        return False, None

    def candidates(self, spec: FieldSpec, reference: Reference) -> list[Any]:
        """The values to enumerate for this field."""
        if self.values is not None:
            return list(self.values)
        if self.interval is not None:
            inside = reference.representatives(spec, self.interval)
            if spec.kind is FieldKind.INTERVAL:
                # Every sub-interval is a state the message admits; testing the message's
                # own interval alone would read a straddled threshold as the fail-closed
                # action and call an interval sufficient for that action's region.
                return inside
            lo, hi = self.interval.lo, self.interval.hi
            extra = [int(lo), int(hi)] if spec.kind is FieldKind.INT else [lo, hi]
            return sorted({*inside, *extra})
        return [self.exact]


def region_sufficient(reference: Reference, constraints: Mapping[str, Constraint],
                      action: str, *, limit: int = _ENUMERATION_LIMIT) -> bool:
    """R(S): whether every state consistent with ``constraints`` gets ``action``.

    Fields absent from ``constraints`` are free. Conservative: when the answer
    cannot be established within ``limit`` enumerated states, it is ``False``.
    """
    if reference.arithmetic and not reference.predicates:
        return _box_sufficient(reference, constraints, action, limit=min(limit, _BOX_LIMIT))
    if reference.arithmetic:
        # Opaque predicates beside arithmetic: the threshold grid misses the expression's
        # cuts and a predicate cannot read a box, so only a complete exact state decides.
        exact = {n: c.exact for n, c in constraints.items()
                 if c.values is None and c.interval is None}
        return len(exact) == len(reference.names) and reference(exact) == action
    return _enumerated_sufficient(reference, constraints, action, limit=limit)


def _enumerated_sufficient(reference: Reference, constraints: Mapping[str, Constraint],
                           action: str, *, limit: int) -> bool:
    view: dict[str, Any] = {}
    for name, constraint in constraints.items():
        fits, value = constraint.kleene(reference.contract.field_map[name], reference.predicates)
        if not fits:
            break
        view[name] = value
    else:
        if not reference.predicates or len(view) == len(reference.names):
            outcome = reference.contract.policy.evaluate(view)
            if outcome.determined:
                return bool(outcome.action is not None and outcome.action.value == action)
    axes: list[list[Any]] = []
    size = 1
    for spec in reference.specs:
        given = constraints.get(spec.name)
        if given is None:
            if reference.predicates and spec.domain() is None:
                return False  # an opaque predicate may split any numeric cell
            values = reference.representatives(spec)
        else:
            values = given.candidates(spec, reference)
        size *= len(values)
        if size > limit:
            return False
        axes.append(values)
    names = reference.names
    for combination in itertools.product(*axes):
        if reference(dict(zip(names, combination, strict=True))) != action:
            return False
    return True


_IN_BOX: Final[Any] = object()
"""On a free optional number field's finite axis: present, anywhere in the box."""


def _span(spec: FieldSpec) -> Interval:
    return Interval(float(spec.minimum or 0.0), float(spec.maximum or 0.0))


def _split(box: Mapping[str, Any], names: Sequence[str],
           specs: Mapping[str, FieldSpec]) -> list[dict[str, Any]] | None:
    """``box`` bisected on its relatively widest number field, or ``None`` when every
    number field is a point.
    """
    best, widest = None, 0.0
    for name in names:
        value = box[name]
        if isinstance(value, Interval) and value.hi > value.lo:
            span = _span(specs[name]).width or 1.0
            if value.width / span > widest:
                best, widest = name, value.width / span
    if best is None:
        return None
    value = box[best]
    lo, hi = value.lo, value.hi
    if specs[best].kind is FieldKind.INT:
        mid = math.floor((lo + hi) / 2)
        parts = [(lo, mid), (mid + 1, hi)]
    else:
        mid = lo / 2 + hi / 2
        parts = [(lo, mid), (mid, hi)] if lo < mid < hi else [(lo, lo), (hi, hi)]
    out = []
    for a, b in parts:
        point: Any = (int(a) if specs[best].kind is FieldKind.INT else float(a)) if a == b \
            else Interval(a, b)
        out.append({**box, best: point})
    return out


def _box_of(reference: Reference, constraints: Mapping[str, Constraint]
            ) -> tuple[list[tuple[str, list[Any]]], dict[str, Any], list[str], bool]:
    """(finite axes, the box of number and interval fields, the number fields, whether
    every interval field is an exact value).
    """
    finite: list[tuple[str, list[Any]]] = []
    box: dict[str, Any] = {}
    numbers: list[str] = []
    exact_intervals = True
    for spec in reference.specs:
        given = constraints.get(spec.name)
        domain = spec.values()
        if domain is not None:
            values = list(domain) if given is None else (
                list(given.values) if given.values is not None else [given.exact])
            finite.append((spec.name, values))
            continue
        if given is None and spec.optional:  # free: absent, or anywhere in the box
            finite.append((spec.name, [None, _IN_BOX]))
        if given is not None and given.values is None and given.interval is None \
                and given.exact is None:  # carried as absent
            box[spec.name] = None
            continue
        if given is None or given.interval is not None:
            value: Any = _span(spec) if given is None else given.interval
            exact_intervals = exact_intervals and spec.kind is not FieldKind.INTERVAL
        else:
            value = given.exact
        if spec.kind is not FieldKind.INTERVAL:
            numbers.append(spec.name)
            if isinstance(value, Interval) and value.lo == value.hi:
                value = int(value.lo) if spec.kind is FieldKind.INT else float(value.lo)
        box[spec.name] = value
    return finite, box, numbers, exact_intervals


def _corner_disagrees(contract: Contract[Any, Any], view: Mapping[str, Any],
                      numbers: Sequence[str], action: str) -> bool:
    """Whether a corner of the box (number fields at an end, interval fields as they
    are: every corner is a state the box holds) gets another reference action.
    """
    wide = [n for n in numbers if isinstance(view[n], Interval) and view[n].hi > view[n].lo]
    if len(wide) > 4:
        return False
    kinds = {n: contract.field_map[n].kind for n in wide}
    fail_closed = str(contract.fail_closed_action.value)
    for ends in itertools.product((0, 1), repeat=len(wide)):
        corner = dict(view)
        for name, end in zip(wide, ends, strict=True):
            value = view[name].hi if end else view[name].lo
            corner[name] = int(value) if kinds[name] is FieldKind.INT else float(value)
        outcome = contract.policy.evaluate(corner)
        got = str(outcome.action.value) if outcome.action is not None else fail_closed
        if got != action:
            return True
    return False


def _box_sufficient(reference: Reference, constraints: Mapping[str, Constraint], action: str,
                    *, limit: int) -> bool:
    """R(S) for policies with arithmetic: evaluate boxes in interval semantics.

    Finite fields are enumerated; number fields are intervals (free ones over their
    range), bisected while the policy is undetermined on the box; interval fields are
    the message's interval (every sub-interval is a state it admits, and the policy's
    answer on the enclosing interval holds for each of them when it is determined).
    """
    contract = reference.contract
    finite, box, numbers, exact_intervals = _box_of(reference, constraints)
    fail_closed = str(contract.fail_closed_action.value)
    budget = limit
    names = [name for name, _ in finite]
    specs = contract.field_map
    for combination in itertools.product(*(values for _, values in finite)):
        fixed = {name: value for name, value in zip(names, combination, strict=True)
                 if value is not _IN_BOX}
        start = {name: fixed.pop(name) if name in fixed else value
                 for name, value in box.items()}  # an optional number drawn absent
        queue = collections.deque([start])  # breadth first: coarse counterexamples first
        while queue:
            current = queue.popleft()
            budget -= 1
            if budget < 0:
                return False
            outcome = contract.policy.evaluate({**fixed, **current})
            if outcome.determined:
                if outcome.action is None or str(outcome.action.value) != action:
                    return False
                continue
            if _corner_disagrees(contract, {**fixed, **current}, numbers, action):
                return False
            halves = _split(current, numbers, specs)
            if halves is None:
                # One state (every interval field is the message's exact interval): it is
                # undetermined, so its reference is the fail-closed action.
                if exact_intervals and fail_closed == action:
                    continue
                return False
            queue.extend(halves)
    return True


# ----------------------------------------------------------------------- triggers


@attrs.frozen
class Trigger:
    """A single feasible change of a decisive field that flips the reference action.

    Attributes:
        field: the decision field.
        from_: its true value (wire form).
        to: the changed value (wire form).
        threshold: the numeric threshold crossed, or ``None`` for finite fields.
        action: the reference action after the change.
    """

    field: str
    from_: Any
    to: Any
    threshold: float | None
    action: str

    def to_json(self) -> dict[str, Any]:
        """The report's trigger object."""
        return {"field": self.field, "from": self.from_, "to": self.to,
                "threshold": self.threshold, "action": self.action}


def _near(spec: FieldSpec, t: float) -> list[float]:
    return list(neighbours(t, integer=spec.kind is FieldKind.INT))


def _in_bounds(spec: FieldSpec, value: float) -> bool:
    return not ((spec.minimum is not None and value < spec.minimum)
                or (spec.maximum is not None and value > spec.maximum))


def _cell_values(reference: Reference, spec: FieldSpec) -> list[Any]:
    """A value of every threshold cell of a number field (for an absent field's flips)."""
    values = reference.representatives(spec, _span(spec))
    if spec.kind is FieldKind.INTERVAL:
        return [v for v in values if v.lo == v.hi]
    return values


def counterfactual_triggers(contract: Contract[Any, Any] | Reference, truth: Mapping[str, Any]
                            ) -> tuple[Trigger, ...]:
    """Every single feasible change of one field that flips the reference action.

    Finite fields try every other value; numeric fields try the nearest values on
    each side of each policy threshold (the threshold crossing), keeping the one
    nearest the true value per threshold.

    Args:
        contract: the contract whose reference policy decides (the lab passes its
            memoised :class:`~handoffs.lab._minimal.Reference`).
        truth: a complete typed view (every decision field).
    """
    reference = _reference(contract)
    action = reference(truth)
    found: list[Trigger] = []
    for spec in reference.specs:
        true_value = truth[spec.name]
        domain: Sequence[Any] | None = spec.values()
        if domain is None and spec.optional:  # presence flips: to absent, or to a value
            domain = [None] if true_value is not None else _cell_values(reference, spec)
        if domain is not None:
            for value in domain:
                if value == true_value:
                    continue
                flipped = reference({**truth, spec.name: value})
                if flipped != action:
                    found.append(Trigger(spec.name, wire_value(true_value), wire_value(value),
                                         None, flipped))
            if spec.domain() is not None or true_value is None:
                continue
        centre = (true_value.lo + true_value.hi) / 2 if isinstance(true_value, Interval) \
            else float(true_value)
        for t in reference.cut_points(spec.name, truth):
            options = sorted((v for v in _near(spec, t) if _in_bounds(spec, v)),
                             key=lambda v: abs(v - centre))
            for v in options:
                changed: Any = Interval.point(v) if spec.kind is FieldKind.INTERVAL else (
                    int(v) if spec.kind is FieldKind.INT else float(v))
                if changed == true_value:
                    continue
                flipped = reference({**truth, spec.name: changed})
                if flipped != action:
                    found.append(Trigger(spec.name, wire_value(true_value), wire_value(changed),
                                         t, flipped))
                    break
    return tuple(found)


# ---------------------------------------------------------------- minimal message


@attrs.frozen
class FieldRepresentation:
    """One field of a minimal message with its coarsest sufficient representation."""

    field: str
    representation: str
    value: Any = None
    values: tuple[Any, ...] = ()
    interval: Interval | None = None

    def to_json(self) -> dict[str, Any]:
        """The report's field object."""
        out: dict[str, Any] = {"field": self.field, "representation": self.representation}
        if self.representation == "exact":
            out["value"] = wire_value(self.value)
        elif self.representation == "values":
            out["values"] = [wire_value(v) for v in self.values]
        elif self.interval is not None:
            out["interval"] = {"lo": self.interval.lo, "hi": self.interval.hi}
        return out


@attrs.frozen
class MinimalMessage:
    """A region-sufficient minimal message for one decision state.

    Attributes:
        action: the reference action it fixes.
        fields: the field names, in contract order.
        message: each field's coarsest representation.
        guarantee: ``minimum`` (no smaller sufficient set exists) or
            ``subset-minimal`` (the search budget ran out; no field can be dropped).
        alternatives: other sufficient sets of the same size.
        region_checks: R(S) evaluations spent.
    """

    action: str
    fields: tuple[str, ...]
    message: tuple[FieldRepresentation, ...]
    guarantee: str
    alternatives: int
    region_checks: int


def _exact(truth: Mapping[str, Any], fields: Iterable[str]) -> dict[str, Constraint]:
    return {name: Constraint(exact=truth[name]) for name in fields}


def minimal_message(contract: Contract[Any, Any] | Reference, truth: Mapping[str, Any], *,
                    budget: int = 4096) -> MinimalMessage:
    """The smallest region-sufficient field set for ``truth``, coarsest values first.

    Searches sets by increasing size while at most ``budget`` region checks are
    spent (``guarantee="minimum"``); past the budget it falls back to deletion
    (``"subset-minimal"``). Then each chosen field is coarsened greedily: enum
    values merged while the region stays sufficient, numbers widened to the
    widest interval between thresholds.

    Args:
        contract: the contract whose reference policy decides (the lab passes its
            memoised :class:`~handoffs.lab._minimal.Reference`).
        truth: a complete typed view (every decision field).
        budget: region checks to spend on the minimum search.
    """
    reference = _reference(contract)
    action = reference(truth)
    names = reference.names
    checks = 0
    chosen: tuple[str, ...] | None = None
    alternatives = 0
    guarantee = "minimum"
    for size in range(len(names) + 1):
        combos = list(itertools.combinations(names, size))
        if checks + len(combos) > budget:
            break
        hits = []
        for combo in combos:
            checks += 1
            if region_sufficient(reference, _exact(truth, combo), action):
                hits.append(combo)
        if hits:
            chosen, alternatives = hits[0], len(hits) - 1
            break
    if chosen is None:
        guarantee = "subset-minimal"
        kept = list(names)
        for name in names:
            trial = [n for n in kept if n != name]
            checks += 1
            if region_sufficient(reference, _exact(truth, trial), action):
                kept = trial
        chosen = tuple(kept)
    constraints = _exact(truth, chosen)
    representation: list[FieldRepresentation] = []
    for name in chosen:
        spec = reference.contract.field_map[name]
        coarse, spent = _coarsen(reference, spec, truth[name], constraints, action)
        checks += spent
        constraints[name] = coarse
        if coarse.values is not None:
            representation.append(FieldRepresentation(name, "values", values=coarse.values))
        elif coarse.interval is not None:
            representation.append(FieldRepresentation(name, "interval", interval=coarse.interval))
        else:
            representation.append(FieldRepresentation(name, "exact", value=truth[name]))
    return MinimalMessage(action, chosen, tuple(representation), guarantee, alternatives, checks)


def _coarsen(reference: Reference, spec: FieldSpec, value: Any,
             constraints: dict[str, Constraint], action: str) -> tuple[Constraint, int]:
    checks = 0
    domain = spec.values()
    if value is None and domain is None:
        return Constraint(exact=None), 0  # absent is carried as it is
    if domain is not None:
        if spec.kind is not FieldKind.ENUM:
            return Constraint(exact=value), 0
        merged = [value]
        for other in domain:
            if other == value:
                continue
            trial = Constraint(values=(*merged, other))
            checks += 1
            if region_sufficient(reference, {**constraints, spec.name: trial}, action):
                merged.append(other)
        if len(merged) == 1:
            return Constraint(exact=value), checks
        order = {v: i for i, v in enumerate(domain)}
        return Constraint(values=tuple(sorted(merged, key=order.__getitem__))), checks
    truth = value if isinstance(value, Interval) else Interval.point(float(value))
    lows, highs = _edges(reference, spec, truth, _box_view(reference, constraints, spec.name))
    lo, hi = truth.lo, truth.hi
    for candidate in lows:  # widest first
        checks += 1
        trial = Constraint(interval=Interval(candidate, hi))
        if region_sufficient(reference, {**constraints, spec.name: trial}, action):
            lo = candidate
            break
    for candidate in highs:
        checks += 1
        trial = Constraint(interval=Interval(lo, candidate))
        if region_sufficient(reference, {**constraints, spec.name: trial}, action):
            hi = candidate
            break
    if (lo, hi) == (truth.lo, truth.hi):
        # Not widened: the message carries the value itself (for an interval-valued
        # field, exactly the certified interval, not "some interval inside it").
        return Constraint(exact=value), checks
    return Constraint(interval=Interval(lo, hi)), checks


def _box_view(reference: Reference, constraints: Mapping[str, Constraint],
              name: str) -> dict[str, Any]:
    """The other number and interval fields as the message constrains them (free ones
    over their range), for the cut points of ``name``.
    """
    if not reference.arithmetic:
        return {}
    view: dict[str, Any] = {}
    for spec in reference.specs:
        if spec.name == name or spec.domain() is not None:
            continue
        given = constraints.get(spec.name)
        view[spec.name] = _span(spec) if given is None else (
            given.interval if given.interval is not None else given.exact)
    return view


def _edges(reference: Reference, spec: FieldSpec, truth: Interval,
           view: Mapping[str, Any]) -> tuple[list[float], list[float]]:
    lo_bound = float(spec.minimum if spec.minimum is not None else truth.lo)
    hi_bound = float(spec.maximum if spec.maximum is not None else truth.hi)
    points = {lo_bound, hi_bound}
    for t in reference.cut_points(spec.name, view):
        points.update(v for v in _near(spec, t) if lo_bound <= v <= hi_bound)
    lows = sorted(p for p in points if p <= truth.lo)
    highs = sorted((p for p in points if p >= truth.hi), reverse=True)
    return lows, highs


def exhaustive_minimum(reference: Reference, truth: Mapping[str, Any]
                       ) -> tuple[int, tuple[tuple[str, ...], ...]]:
    """Exhaustive search: the minimum size of a region-sufficient set (exact values)
    and every sufficient set of that size. Exponential; for small contracts.
    """
    action = reference(truth)
    names = reference.names
    for size in range(len(names) + 1):
        hits = tuple(combo for combo in itertools.combinations(names, size)
                     if region_sufficient(reference, _exact(truth, combo), action))
        if hits:
            return size, hits
    return len(names), (names,)  # pragma: no cover - the full set is always sufficient
