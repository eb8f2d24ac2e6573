"""The policy analysis at scale (issue 30, item 4): the boundary queries pruned by
interval boxes and asked of one incremental solver per rule give the answers of the
analysis before them, and every box holds its region (brute force)."""

from __future__ import annotations

import enum
import importlib.util
import json
import random
from fractions import Fraction
from pathlib import Path
from typing import Any

import attrs
import pytest

from handoffs.contracts import Contract, Interval, LossMatrix, decision_field
from handoffs.contracts._analysis._geometry import _axes, _conditions
from handoffs.contracts._analysis._prune import Box, Pruner
from handoffs.contracts._analysis._results import DEFAULT_DELTA_RATIO, DEFAULT_TIMEOUT_MS
from handoffs.contracts._analysis._solve import _Analyser
from handoffs.contracts._fields import FieldKind
from handoffs.contracts._policy import Compare, Const, _rational
from handoffs.contracts.policy import (
    AnyOf,
    Field,
    Is,
    Not,
    Over,
    Policy,
    Rule,
    Under,
)

ROOT = Path(__file__).resolve().parents[2]
ANSWERS = json.loads((ROOT / "tests" / "data" / "analysis_answers.json").read_text())
"""The regions (status, shadowing rules) and the region pairs proved adjacent along each
axis by the analysis before the pruning (one push/check/pop per query, at commit
04dc714), for generated contracts ``fields x rules x seed``."""


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("analysis_benchmark",
                                                  ROOT / "benchmarks" / "analysis.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generated_contract


GENERATED = _generator()
SMALL = [key for key in ANSWERS["contracts"] if int(key.split("x")[1]) <= 24]


def _generated(key: str) -> Contract[Any, Any]:
    fields, rules, seed = (int(n) for n in key.split("x"))
    return GENERATED(fields, rules, seed=seed)  # type: ignore[no-any-return]


def _analysed(contract: Contract[Any, Any]) -> tuple[_Analyser, list[Any], list[Any]]:
    analyser = _Analyser(contract, DEFAULT_TIMEOUT_MS, DEFAULT_DELTA_RATIO, 0)
    regions = analyser.regions()
    return analyser, regions, analyser.boundaries(regions)


def _minimal_cover(analyser: _Analyser, number: int, names: tuple[str, ...]) -> bool:
    """The earlier rules ``names`` cover rule ``number``'s guard, and no fewer do."""
    z3 = analyser.z3
    rules = analyser.contract.policy.rules
    true = (analyser.da.condition(rules[number].when)[0] if number < len(rules)
            else z3.BoolVal(True))
    falses = [analyser.da.guards_false[analyser.names.index(n)] for n in names]
    if analyser.solver.check("cover", true, *falses)[0] != "unsat":
        return False
    return all(analyser.solver.check("fewer", true, *(f for f in falses if f is not drop))[0]
               == "sat" for drop in falses)


@pytest.mark.parametrize("key", SMALL)
def test_regions_dead_rules_and_adjacent_pairs_are_those_of_the_analysis_before(
        key: str) -> None:
    before = ANSWERS["contracts"][key]
    analyser, regions, boundaries = _analysed(_generated(key))
    assert not analyser.unknown
    assert [[r.rule, r.status] for r in regions] == [r[:2] for r in before["regions"]]
    for number, (region, (_, _, shadows)) in enumerate(zip(regions, before["regions"],
                                                           strict=True)):
        if list(region.shadowed_by) != shadows:  # a dead rule may have two minimal sets
            assert _minimal_cover(analyser, number, region.shadowed_by)
    dead = [n for n, r in enumerate(regions) if r.shadowed_by]
    if dead:  # the check above can tell a minimal cover from one that is not
        assert _minimal_cover(analyser, dead[0], regions[dead[0]].shadowed_by)
        assert not _minimal_cover(analyser, dead[0], (*regions[dead[0]].shadowed_by,
                                                      *analyser.names[:dead[0]]))
    adjacent = sorted([axis, analyser.names[i], analyser.names[j]]
                      for axis, i, j in analyser.adjacent)
    assert adjacent == before["adjacent"]
    # every boundary is a proved-adjacent pair (the rest did not round to floats the
    # evaluator confirms, as before), and the found ones before were too
    order = {name: n for n, name in enumerate(analyser.names)}
    pairs = {(a, x, y) for a, x, y in map(tuple, before["adjacent"])}
    for sides, _, axis in [[b.sides, b.actions, b.axis] for b in boundaries] + before[
            "boundaries"]:
        if ":" in sides[0]:  # a hard constraint's boundary: not a region pair
            continue
        first, second = sorted(sides, key=order.__getitem__)
        assert (axis, first, second) in pairs
    assert len(boundaries) >= 0.9 * len(before["boundaries"])


def test_a_pair_the_boxes_rule_out_is_one_the_solver_refutes() -> None:
    """Brute force: every (region, region, axis) the pruning skips, asked of the solver
    as the analysis before asked it (both regions, the axis's closeness, different
    actions), is unsat.
    """
    contract = _generated("5x12x3")
    analyser = _Analyser(contract, DEFAULT_TIMEOUT_MS, DEFAULT_DELTA_RATIO, 0)
    pruner = Pruner(contract)
    skipped = 0
    for axis in _axes(contract, _conditions(contract), DEFAULT_DELTA_RATIO):
        close = analyser.close(axis)
        for i in range(len(analyser.names)):
            for j in range(i + 1, len(analyser.names)):
                if pruner.meets(i, j, axis):
                    continue
                skipped += 1
                status, _ = analyser.solver.check(
                    "pruned", analyser.da.regions[i], analyser.db.regions[j],
                    analyser.da.action != analyser.db.action, *close)
                assert status == "unsat", (axis.name, i, j)
    assert skipped > 100


class Act(enum.Enum):
    A = "A"
    B = "B"
    C = "C"


class Tier(enum.Enum):
    LOW = "LOW"
    HIGH = "HIGH"


@attrs.frozen
class Mixed:
    x: float = decision_field("x", minimum=0, maximum=10)
    y: float = decision_field("y", minimum=-5, maximum=5)
    n: int = decision_field("n", minimum=0, maximum=20)
    r: Interval = decision_field("r", minimum=0, maximum=1)
    flag: bool = decision_field("flag")
    tier: Tier = decision_field("tier")


MIXED: Contract[Mixed, Act] = Contract(
    name="mixed", version="1.0.0", description="every kind of guard the boxes narrow",
    actions=Act, state=Mixed,
    policy=Policy(rules=(
        Rule("ranged-high", Over("r", 0.6), Act.A),
        Rule("either", AnyOf((Under("x", 2.5, inclusive=True), Is("flag", True))), Act.B),
        Rule("not-low", Not(Is("tier", Tier.LOW)) & Under("r", 0.3), Act.A),
        Rule("ratio", Field("x") / Field("y") > 3, Act.C),
        Rule("product", Field("x") * Field("y") < -12, Act.B),
        Rule("const-left", Compare(Const(7), "<", Field("n") + Field("x")), Act.A),
        Rule("ranged-sum", Field("r") + Field("x") >= 9.5, Act.B),
        Rule("shadowed", Under("x", 2), Act.C),
    ), default=Act.C),
    loss=LossMatrix({(a, b): 0.0 if a is b else 1.0 for a in Act for b in Act}),
    fail_closed_action=Act.C, counterfactual_trigger="any change")


def _inside(box: Box, state: dict[str, Any]) -> bool:
    for (name, end), (lo, hi) in box.spans.items():
        value = state[name]
        point = (value.hi if end else value.lo) if isinstance(value, Interval) else value
        exact = _rational(point) if isinstance(point, float) else Fraction(point)
        if not lo <= exact <= hi:
            return False
    return all(state[name] in values for name, values in box.sets.items())


def _value(spec: Any, rng: random.Random, marks: list[float]) -> Any:
    if spec.kind is FieldKind.BOOL:
        return rng.random() < 0.5
    if spec.kind is FieldKind.ENUM:
        return rng.choice(list(spec.domain()))
    lo, hi = float(spec.minimum), float(spec.maximum)

    def one() -> float:
        usable = [m for m in marks if lo <= m <= hi]
        if usable and rng.random() < 0.3:  # on a threshold: where boxes' ends are
            return rng.choice(usable)
        return round(rng.uniform(lo, hi), rng.choice((0, 1, 3, 9)))

    if spec.kind is FieldKind.INT:
        return round(one())
    if spec.kind is FieldKind.INTERVAL:
        a, b = one(), one()
        return Interval(min(a, b), max(a, b))
    return one()


@pytest.mark.parametrize("contract", [MIXED, _generated("6x20x6"), _generated("8x24x8")],
                         ids=["mixed", "6x20x6", "8x24x8"])
def test_every_state_lies_in_the_box_of_the_region_that_decides_it(
        contract: Contract[Any, Any]) -> None:
    pruner = Pruner(contract)
    names = [r.name for r in contract.policy.rules] + [contract.policy.default_name]
    marks = sorted({float(t) for c in _conditions(contract) for _, t in c.thresholds()}
                   | {0.0, 0.3, 0.6, 2.0, 2.5, -4.0})
    rng = random.Random(30)  # noqa: S311 - reproducible draws, not a secret
    seen: set[str] = set()
    for _ in range(3000):
        state = {spec.name: _value(spec, rng, marks) for spec in contract.fields}
        outcome = contract.evaluate(state)
        if not outcome.determined:
            continue
        seen.add(outcome.rule)
        box = pruner.boxes[names.index(outcome.rule)]
        assert box is not None
        assert _inside(box, state), (outcome.rule, state)
    assert len(seen) >= 4


def test_the_mixed_boxes_narrow_each_kind_of_guard() -> None:
    pruner = Pruner(MIXED)
    ranged, either, not_low = pruner.boxes[0], pruner.boxes[1], pruner.boxes[2]
    assert ranged is not None
    assert either is not None
    assert not_low is not None
    assert ranged.spans[("r", 0)][0] == Fraction(3, 5)  # r over 0.6: its low end
    assert either.spans[("r", 1)][1] == Fraction(3, 5)  # not so: its high end
    assert not_low.sets["tier"] == {Tier.HIGH}
    assert not_low.spans[("r", 1)][1] == Fraction(3, 10)
    assert not_low.sets["flag"] == {False}
    assert not_low.spans[("x", 0)][0] == Fraction(5, 2)
    assert pruner.boxes[7] is None  # x < 2 after x <= 2.5 was false: no state left
