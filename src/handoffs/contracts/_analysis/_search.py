"""Search for policies the solver cannot read, and the state draws it shares with the
coverage tracker (internal; see ``analysis``).
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import attrs

from handoffs._cases import ABSENT_RATE
from handoffs._errors import PolicyError
from handoffs.contracts._analysis._geometry import _clip, _cuts, _decimal, _field_delta, _numeric
from handoffs.contracts._analysis._results import (
    SAMPLED,
    Analysis,
    Boundary,
    ConstraintReach,
    Equivalence,
    MinimalSets,
    Region,
    Relevance,
    State,
    warnings_of,
)
from handoffs.contracts._contract import Contract
from handoffs.contracts._fields import FieldKind, FieldSpec, Interval


def _decide(contract: Contract[Any, Any], state: State) -> Any:
    return contract.decide(contract.state(**state))


def _loss(contract: Contract[Any, Any], chosen: str, reference: str) -> float | None:
    actions = {a.value: a for a in contract.actions}
    if chosen not in actions or reference not in actions:
        return None
    return contract.loss(actions[chosen], actions[reference])


def draw_value(spec: FieldSpec, rng: random.Random) -> Any:
    """One realistic value of a field: uniform in its declared bounds, no subnormal
    floats, an interval narrower than a twentieth of the range, fair booleans; an
    optional field is ``None`` (known not to apply) in a quarter of draws
    (``ABSENT_RATE``).
    """
    if spec.optional and rng.random() < ABSENT_RATE:
        return None
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
            if not _numeric(spec) or s[spec.name] is None or moved[spec.name] is None:
                continue  # a presence flip has no segment to bisect
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
