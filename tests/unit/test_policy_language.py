"""The policy language cannot fail open (issue 8): three-valued predicates, exact
interval arithmetic over fields, and hard constraints on the true state."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ph_pump as pump
from handoffs import HandoffsError
from handoffs.contracts import ContractDefinitionError, HardConstraint, Interval
from handoffs.contracts._policy import Always, Compare
from handoffs.contracts.policy import (
    AllOf,
    AnyOf,
    Field,
    Is,
    Not,
    Over,
    Policy,
    PolicyError,
    Predicate,
    Rule,
)
from handoffs.receivers import Step, Verdict

A = pump.Act
P, H = Field("failure_probability"), Field("consequence")


def _predicate(result: Any) -> Predicate:
    return Predicate(lambda view: result, fields={"x"}, description="returns a value")


# ------------------------------------------------------------- three-valued predicates


@pytest.mark.parametrize("result", [True, False, None])
def test_a_predicate_returns_true_false_or_none(result: bool | None) -> None:
    assert _predicate(result).evaluate({"x": 1}) is result


@pytest.mark.parametrize("result", [0, 1, "", "yes", [], 0.0, Fraction(1)],
                         ids=repr)
def test_any_other_return_value_is_a_typed_error(result: Any) -> None:
    with pytest.raises(PolicyError, match="expected True, False or None") as caught:
        _predicate(result).evaluate({"x": 1})
    assert caught.value.code == "predicate-result"
    assert isinstance(caught.value, HandoffsError)
    assert isinstance(caught.value, ValueError)


def test_a_predicate_that_raises_is_a_typed_error() -> None:
    broken = Predicate(lambda view: view["y"] > 1, fields={"x"}, description="reads y")
    with pytest.raises(PolicyError, match="raised KeyError") as caught:
        broken.evaluate({"x": 1})
    assert caught.value.code == "predicate-raised"
    assert isinstance(caught.value.__cause__, KeyError)


U = _predicate(None)


@pytest.mark.parametrize(
    ("condition", "truth"),
    [
        (Not(U), None), (AllOf((Always(), U)), None), (AllOf((Not(Always()), U)), False),
        (AnyOf((Always(), U)), True), (AnyOf((Not(Always()), U)), None),
    ],
)
def test_undetermined_predicates_propagate_in_kleene_logic(condition: Any,
                                                           truth: bool | None) -> None:
    assert condition.evaluate({"x": 1}) is truth


def test_an_undetermined_rule_makes_the_decision_undetermined_not_false() -> None:
    policy = Policy(rules=(Rule("stop", U, A.STOP),), default=A.CONTINUE)
    outcome = policy.evaluate({"x": 1})
    assert (outcome.action, outcome.rule, outcome.determined) == (None, "stop", False)


# ------------------------------------------------------------------- the p·h pump


@pytest.mark.parametrize("contract", [pump.EXPRESSION, pump.PREDICATE],
                         ids=["expression", "predicate"])
def test_the_straddling_pump_is_undetermined_and_the_gate_fails_closed(contract: Any) -> None:
    # p ∈ [0, 0.08], h = 60: p·h reaches 4.8 > 2, so CONTINUE must not be accepted.
    outcome = contract.evaluate(contract.view(pump.STRADDLING))
    assert (outcome.action, outcome.rule, outcome.determined) == (None, "stop", False)
    assert contract.decide(pump.STRADDLING) is A.STOP  # the fail-closed action
    decision = pump.controller(contract).receive(pump.receipt_json(contract, pump.STRADDLING))
    assert (decision.verdict, decision.action) == (Verdict.ESCALATE, "STOP")
    assert [(r.code, r.step) for r in decision.reasons] == [("undetermined", Step.POLICY)]
    assert decision.record["rule"] == "stop"


@pytest.mark.parametrize(("p", "h", "action"), [
    (Interval(0.04, 0.05), 60.0, "STOP"),        # p·h ∈ [2.4, 3]
    (Interval(0.02, 0.03), 60.0, "REDUCE_LOAD"),  # [1.2, 1.8]
    (Interval(0.01, 0.015), 60.0, "CONTINUE"),   # [0.6, 0.9]
    (Interval(0.04, 0.05), 10.0, "CONTINUE"),    # [0.4, 0.5]
])
def test_a_determined_pump_is_decided_by_the_gate(p: Interval, h: float, action: str) -> None:
    state = pump.PumpState(p, h, True)
    for contract in (pump.EXPRESSION, pump.PREDICATE):
        decision = pump.controller(contract).receive(pump.receipt_json(contract, state))
        assert (decision.verdict, decision.action) == (Verdict.ACCEPT, action)


def test_a_broken_predicate_fails_closed_at_the_gate_with_its_code() -> None:
    def truthy(view: Any) -> Any:
        return 1  # a truthy non-bool: must not be read as True (nor 0 as False)

    broken = pump.contract(lambda t: Predicate(truthy, fields={"consequence"},
                                               description="truthy"))
    state = pump.PumpState(Interval(0.01, 0.02), 10.0, True)
    receipt = pump.receipt_json(pump.EXPRESSION, state)  # a valid receipt of the same id
    decision = pump.controller(broken).receive(receipt)
    assert (decision.verdict, decision.action) == (Verdict.REJECT, "STOP")
    assert [(r.code, r.step) for r in decision.reasons] == [("predicate-result", Step.POLICY)]


# -------------------------------------------------------------------- arithmetic


def test_arithmetic_reads_intervals_and_numbers_with_interval_semantics() -> None:
    risk = P * H > 2
    assert isinstance(risk, Compare)
    assert risk.describe() == "failure_probability * consequence > 2"
    assert risk.reads() == frozenset({"failure_probability", "consequence"})
    assert risk.evaluate({"failure_probability": Interval(0, 0.08), "consequence": 60}) is None
    assert risk.evaluate({"failure_probability": Interval(0.04, 0.05), "consequence": 60})
    assert risk.evaluate({"failure_probability": Interval(0, 0.03), "consequence": 60}) is False
    assert risk.evaluate({"failure_probability": Interval(0, 0.03)}) is None  # h absent


@pytest.mark.parametrize(("condition", "truth"), [
    (P * 40 > 2, False),   # 0.05 × 40 is exactly 2: not over (binary floats would say over)
    (P * 40 >= 2, True),
    (P * 40 < 2, False),
    (P * 40 <= 2, True),   # reflected: the same condition
    (P + 0.1 > 0.15, False),  # 0.05 + 0.1 is exactly 0.15
    (P - 0.05 >= 0, True),
    (1 - P > 0.95, False),
    (P / 2 > 0.025, False),
    (0.1 / P > 2, False),
    (-P < 0, True),
])
def test_arithmetic_is_exact_on_the_decimals_the_json_carries(condition: Compare,
                                                               truth: bool) -> None:
    assert condition.evaluate({"failure_probability": 0.05}) is truth


@pytest.mark.parametrize("divisor", [Interval(0, 1), Interval(-1, 1), Interval.point(0), 0])
def test_division_by_an_interval_that_holds_zero_is_undetermined(divisor: Any) -> None:
    assert (Field("x") / Field("y") > 1).evaluate({"x": 1, "y": divisor}) is None
    assert (Field("x") / Field("y") > 1).evaluate({"x": 1, "y": Interval(0.25, 0.5)}) is True


def test_describe_keeps_precedence() -> None:
    assert (2 - Field("a") / (Field("b") + 1) <= Field("c") * 3).describe() == \
        "2 - a / (b + 1) <= c * 3"
    assert ((Field("a") - Field("b")) - (Field("c") - 1) > 0).describe() == \
        "a - b - (c - 1) > 0"


@pytest.mark.parametrize("value", [True, "2", None, float("nan"), float("inf")], ids=repr)
def test_a_bad_operand_is_refused_when_the_expression_is_built(value: Any) -> None:
    with pytest.raises(ContractDefinitionError) as caught:
        _ = Field("p") * value
    assert caught.value.code == "bad-expression"


def test_a_field_that_is_not_a_number_is_a_typed_error_at_evaluation() -> None:
    with pytest.raises(PolicyError, match="needs a number or an interval") as caught:
        (Field("flag") + 1 > 0).evaluate({"flag": True})
    assert (caught.value.code, caught.value.json_path) == ("not-a-number", "$.flag")


def test_a_contract_refuses_arithmetic_on_non_numeric_fields() -> None:
    with pytest.raises(ContractDefinitionError, match="non-numeric fields") as caught:
        pump.contract(lambda t: Field("calibrated") * Field("consequence") > t)
    assert caught.value.code == "policy-not-numeric"


def test_arithmetic_cuts_and_static_thresholds() -> None:
    risk = P * H > 2
    assert (P * 40 > 2).thresholds() == (("failure_probability", 0.05),)
    assert risk.thresholds() == ()  # depends on h
    view = {"failure_probability": Interval(0.04, 0.05), "consequence": 60}
    assert set(risk.cuts(view)) == {("consequence", 50.0), ("consequence", 40.0),
                                    ("failure_probability", 2 / 60)}
    # a field read twice has no solvable cut; another field's is still solved
    twice = P * (1 - P) * H > 2
    assert {name for name, _ in twice.cuts(view)} == {"consequence"}


finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@st.composite
def interval_and_point(draw: st.DrawFn) -> tuple[Interval, float]:
    a, b = sorted((draw(finite), draw(finite)))
    x = draw(st.floats(a, b, allow_nan=False)) if a < b else a
    return Interval(a, b), x


@given(interval_and_point(), interval_and_point(), st.sampled_from(["+", "-", "*", "/"]))
def test_interval_arithmetic_is_sound(left: tuple[Interval, float],
                                      right: tuple[Interval, float], op: str) -> None:
    """For any points inside the operand intervals, the point result lies in the result."""
    (a, x), (b, y) = left, right
    expr = {"+": Field("a") + Field("b"), "-": Field("a") - Field("b"),
            "*": Field("a") * Field("b"), "/": Field("a") / Field("b")}[op]
    enclosure = expr.bounds({"a": a, "b": b})
    point = expr.bounds({"a": x, "b": y})
    if enclosure is None:  # only a divisor interval holding 0 is unbounded
        assert op == "/"
        assert b.lo <= 0 <= b.hi
        return
    assert point is not None
    assert point[0] == point[1]
    assert enclosure[0] <= point[0] <= enclosure[1]


@given(interval_and_point(), interval_and_point(), finite,
       st.sampled_from([">", ">=", "<", "<="]))
def test_a_determined_comparison_holds_for_every_point(left: tuple[Interval, float],
                                                       right: tuple[Interval, float],
                                                       t: float, op: str) -> None:
    (a, x), (b, y) = left, right
    condition = Compare(Field("a") * Field("b") - Field("a"), op, Field("t"))
    truth = condition.evaluate({"a": a, "b": b, "t": t})
    if truth is not None:
        assert condition.evaluate({"a": x, "b": y, "t": t}) is truth


# ------------------------------------------------- hard constraints on the true state


def test_a_hard_constraint_can_name_a_condition_on_the_true_state() -> None:
    contract = pump.EXPRESSION
    likely = pump.PumpState(Interval(0.35, 0.4), 1.0, True)
    unlikely = pump.PumpState(Interval(0.1, 0.2), 1.0, True)
    straddling = pump.PumpState(Interval(0.25, 0.35), 1.0, True)
    names = contract.hard_violations
    assert names(A.CONTINUE, A.CONTINUE, truth=likely) == ("no-continue-when-likely",)
    assert names(A.CONTINUE, A.CONTINUE, truth=unlikely) == ()
    # undetermined on the true state: the constraint errs on the side of counting
    assert names(A.CONTINUE, A.CONTINUE, truth=straddling) == ("no-continue-when-likely",)
    assert names(A.CONTINUE, A.STOP, truth=likely) == ("unsafe-continue",
                                                        "no-continue-when-likely")
    assert names(A.STOP, A.CONTINUE, truth=likely) == ()
    assert names(A.CONTINUE, A.CONTINUE, truth=contract.view(likely)) == (
        "no-continue-when-likely",)
    described = {h["name"]: h for h in contract.describe()["hard_constraints"]}
    assert described["no-continue-when-likely"]["when"] == "failure_probability > 0.3"
    assert "when" not in described["unsafe-continue"]


def test_a_state_conditioned_constraint_needs_the_truth() -> None:
    constraint = HardConstraint("never", chosen=A.CONTINUE, when=Over("x", 1))
    with pytest.raises(PolicyError) as caught:
        constraint.violated(A.CONTINUE, A.CONTINUE)
    assert caught.value.code == "truth-required"
    assert not constraint.violated(A.STOP, A.CONTINUE)  # another action: no truth needed


def test_a_constraint_condition_must_read_declared_fields() -> None:
    from handoffs.contracts import Contract

    base = pump.EXPRESSION
    bad = HardConstraint("never", chosen=A.CONTINUE, when=Is("vibration", True))
    with pytest.raises(ContractDefinitionError, match="reads unknown fields") as caught:
        Contract(name=base.name, version=base.version, description=base.description,
                 actions=base.actions, state=base.state, policy=base.policy, loss=base.loss,
                 fail_closed_action=base.fail_closed_action,
                 counterfactual_trigger=base.counterfactual_trigger, hard_constraints=(bad,))
    assert caught.value.code == "policy-unknown-field"


# ------------------------------------------------------------------------- diffs


def test_contract_diffs_compare_expressions_by_structure_and_exact_value() -> None:
    from handoffs.contracts._diff import FindingCode
    from handoffs.contracts.versions import diff

    same = pump.contract(lambda t: float(t) < pump.RISK, version="1.0.1")  # 2 and 2.0
    assert [f.code for f in diff(pump.EXPRESSION, same).findings] == []
    moved = pump.contract(lambda t: t * 1.5 < pump.RISK, version="2.0.0")
    assert [(f.code, f.json_path) for f in diff(pump.EXPRESSION, moved).findings] == [
        (FindingCode.POLICY_RULE_CHANGED, "$.policy.rules.stop"),
        (FindingCode.POLICY_RULE_CHANGED, "$.policy.rules.reduce-load"),
    ]
    opaque = diff(pump.EXPRESSION, pump.PREDICATE).findings  # same text, not the same rule
    assert {f.code for f in opaque} == {FindingCode.POLICY_RULE_CHANGED}
