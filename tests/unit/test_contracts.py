"""Contract definitions: what is refused, the payment contract as the essay states it,
and policy evaluation in three-valued logic."""

from __future__ import annotations

import enum
import itertools
from datetime import timedelta
from typing import Any

import attrs
import pytest

from handoffs.contracts import (
    Contract,
    ContractDefinitionError,
    HardConstraint,
    Interval,
    LossMatrix,
    decision_field,
)
from handoffs.contracts._fields import MISSING
from handoffs.contracts._policy import Always
from handoffs.contracts.policy import (
    AllOf,
    AnyOf,
    Is,
    Not,
    Over,
    Policy,
    Predicate,
    Rule,
    Under,
)
from handoffs.examples.payment import (
    DECISION_FIELDS,
    PAYMENT_RELEASE,
    PaymentAction,
    PaymentState,
    synthetic_cases,
)

# --------------------------------------------------------------- a small contract


class Go(enum.Enum):
    CONTINUE = "CONTINUE"
    STOP = "STOP"


@attrs.frozen
class PumpState:
    failure_probability: Interval = decision_field(
        "Certified probability that the pump fails in the next window.", minimum=0.0, maximum=1.0
    )
    running: bool = decision_field("The pump is running.")


def _loss(stop_cost: float = 2, failure_cost: float = 40) -> LossMatrix[Go]:
    return LossMatrix({
        (Go.CONTINUE, Go.CONTINUE): 0, (Go.STOP, Go.STOP): 0,
        (Go.STOP, Go.CONTINUE): stop_cost, (Go.CONTINUE, Go.STOP): failure_cost,
    })


def pump_contract(**changes: Any) -> Contract[PumpState, Go]:
    fields: dict[str, Any] = {
        "name": "pump-contracts",
        "version": "1.0.0",
        "description": "A maintenance specialist hands a pump to the controller.",
        "actions": Go,
        "state": PumpState,
        # The essay's pump: stop when p exceeds 2/h; with h = 40 the threshold is 0.05.
        "policy": Policy(rules=(Rule("failure-likely", Over("failure_probability", 0.05),
                                     Go.STOP),), default=Go.CONTINUE),
        "loss": _loss(),
        "fail_closed_action": Go.STOP,
        "counterfactual_trigger": "Recompute if the failure estimate or its cost changes.",
    }
    fields.update(changes)
    return Contract(**fields)


def test_small_contract_is_valid() -> None:
    contract = pump_contract()
    assert contract.id == "pump-contracts/1.0.0"
    assert [spec.name for spec in contract.fields] == ["failure_probability", "running"]


# ------------------------------------------------------------ definition errors


@attrs.frozen
class RunningState:
    running: bool = decision_field("The pump is running.")


def test_a_view_holds_every_field_of_the_state_by_name() -> None:
    state = PumpState(Interval(0.01, 0.2), running=True)
    assert pump_contract().view(state) == {"failure_probability": Interval(0.01, 0.2),
                                           "running": True}
    # One field: its value, not the value's parts (a one-name reader returns the value).
    one = pump_contract(state=RunningState, policy=Policy(
        rules=(Rule("stopped", Is("running", False), Go.STOP),), default=Go.CONTINUE))
    assert one.view(RunningState(running=False)) == {"running": False}
    assert one.decide(RunningState(running=False)) is Go.STOP


def test_incomplete_loss_matrix_is_refused() -> None:
    entries = dict(_loss().entries)
    del entries[(Go.CONTINUE, Go.STOP)]
    with pytest.raises(ContractDefinitionError, match=r"no entry for \(CONTINUE, STOP\)") as info:
        pump_contract(loss=LossMatrix(entries))
    assert info.value.code == "incomplete-loss-matrix"


def test_nonzero_diagonal_is_refused() -> None:
    with pytest.raises(ContractDefinitionError, match="correct action STOP must be 0") as info:
        pump_contract(loss=_loss().with_entries({(Go.STOP, Go.STOP): 1}))
    assert info.value.code == "nonzero-diagonal"


def test_loss_matrix_naming_foreign_actions_is_refused() -> None:
    with pytest.raises(ContractDefinitionError, match="unknown actions") as info:
        pump_contract(loss=_loss().with_entries({(PaymentAction.HOLD, PaymentAction.HOLD): 0}))
    assert info.value.code == "incomplete-loss-matrix"


def test_policy_reading_an_unknown_field_is_refused() -> None:
    policy = Policy(rules=(Rule("hot", Over("temperature", 90), Go.STOP),), default=Go.CONTINUE)
    with pytest.raises(ContractDefinitionError, match=r"unknown fields \['temperature'\]") as info:
        pump_contract(policy=policy)
    assert info.value.code == "policy-unknown-field"


@pytest.mark.parametrize("name", ["Pump", "pump_inspection", "pump--x", "-pump", "", "pümp"])
def test_bad_contract_names_are_refused(name: str) -> None:
    with pytest.raises(ContractDefinitionError, match="must be kebab-case") as info:
        pump_contract(name=name)
    assert info.value.code == "bad-contract-name"


@pytest.mark.parametrize("version", ["1", "1.0", "01.0.0", "1.0.0-rc.1", "v1.0.0", "1.0.0 "])
def test_bad_contract_versions_are_refused(version: str) -> None:
    with pytest.raises(ContractDefinitionError, match=r"must be MAJOR\.MINOR\.PATCH") as info:
        pump_contract(version=version)
    assert info.value.code == "bad-contract-version"


@pytest.mark.parametrize("description", ["", "   ", "\n"])
def test_a_decision_field_needs_a_description(description: str) -> None:
    with pytest.raises(ContractDefinitionError, match="needs a description") as info:
        decision_field(description)
    assert info.value.code == "no-description"


def _annotated(annotation: Any, **options: Any) -> type[Any]:
    namespace = {"__annotations__": {"value": annotation},
                 "value": decision_field("An odd field.", **options)}
    return attrs.frozen(type("Odd", (), namespace))


class IntCodes(enum.Enum):
    ONE = 1
    TWO = 2


@pytest.mark.parametrize("annotation", [str, list[int], bytes, IntCodes, str | None,
                                        int | float, int | float | None, IntCodes | None])
def test_unsupported_field_types_are_refused(annotation: Any) -> None:
    with pytest.raises(ContractDefinitionError, match=r"unsupported|string values") as info:
        pump_contract(state=_annotated(annotation))
    assert info.value.json_path == "$.value"


@pytest.mark.parametrize("bounds", [{}, {"minimum": 0}, {"maximum": 1}])
def test_numeric_fields_need_both_bounds(bounds: dict[str, float]) -> None:
    with pytest.raises(ContractDefinitionError, match="needs both minimum and maximum"):
        pump_contract(state=_annotated(float, **bounds))


def test_if_missing_must_be_a_valid_value() -> None:
    with pytest.raises(ContractDefinitionError, match="if_missing value 'yes'") as info:
        pump_contract(state=_annotated(bool, if_missing="yes"))
    assert info.value.json_path == "$.value"


def test_state_must_be_a_frozen_attrs_class_of_decision_fields() -> None:
    @attrs.define
    class Mutable:
        running: bool = decision_field("The pump is running.")

    @attrs.frozen
    class Undeclared:
        running: bool

    class Plain:
        running: bool

    with pytest.raises(ContractDefinitionError, match="must be frozen"):
        pump_contract(state=Mutable)
    with pytest.raises(ContractDefinitionError, match="not declared with decision_field"):
        pump_contract(state=Undeclared)
    with pytest.raises(ContractDefinitionError, match="is not an attrs class"):
        pump_contract(state=Plain)
    with pytest.raises(ContractDefinitionError, match="declares no decision fields"):
        pump_contract(state=attrs.frozen(type("Empty", (), {})))


def test_actions_must_be_a_string_enum_and_every_action_from_it() -> None:
    class Numbered(enum.Enum):
        A = 1

    with pytest.raises(ContractDefinitionError, match="string values") as info:
        pump_contract(actions=Numbered)
    assert info.value.code == "bad-actions"
    with pytest.raises(ContractDefinitionError, match="is not an action of Go") as info:
        pump_contract(fail_closed_action=PaymentAction.ESCALATE)
    assert info.value.code == "bad-actions"


def test_rule_names_must_be_unique() -> None:
    with pytest.raises(ContractDefinitionError, match="must be unique") as info:
        Policy(rules=(Rule("a", Always(), Go.STOP), Rule("a", Always(), Go.STOP)),
               default=Go.CONTINUE)
    assert info.value.code == "duplicate-rule"
    with pytest.raises(ContractDefinitionError, match="must be unique"):
        Policy(rules=(Rule("default", Always(), Go.STOP),), default=Go.CONTINUE)


# --------------------------------------------------- the essay's payment contract

# Transcribed from the essay's laboratory (decision-sufficiency-essay.txt, LOSS).
R, H, D, E = (PaymentAction.RELEASE, PaymentAction.HOLD, PaymentAction.REJECT_DUPLICATE,
              PaymentAction.ESCALATE)
ESSAY_LOSS = {
    (R, R): 0, (H, H): 0, (D, D): 0, (E, E): 0,
    (E, R): 2, (H, R): 4, (D, R): 15,
    (R, E): 120, (R, H): 100, (R, D): 80,
    (H, E): 8, (H, D): 25,
    (D, H): 35, (D, E): 30,
    (E, H): 5, (E, D): 6,
}


def essay_policy(state: dict[str, bool]) -> PaymentAction:  # noqa: PLR0911 - verbatim
    """The essay's reference policy, verbatim: ordering encodes precedence."""
    if not state["identity_verified"]:
        return H
    if not state["screening_clear"]:
        return H
    if state["duplicate_signal"]:
        return D
    if not state["policy_current"]:
        return E
    if state["evidence_conflict"]:
        return E
    if state["high_value"]:
        return E
    return R


def test_payment_contract_identity() -> None:
    assert PAYMENT_RELEASE.id == "payment-release/1.0.0"
    assert DECISION_FIELDS == ("identity_verified", "screening_clear", "duplicate_signal",
                               "policy_current", "evidence_conflict", "high_value")
    assert [a.value for a in PaymentAction] == ["RELEASE", "HOLD", "REJECT_DUPLICATE",
                                                "ESCALATE"]
    assert PAYMENT_RELEASE.fail_closed_action is E


def test_payment_precedence_is_the_essays() -> None:
    assert PAYMENT_RELEASE.policy.describe() == [
        {"rule": "identity-unverified", "when": "not identity_verified", "action": "HOLD"},
        {"rule": "screening-not-clear", "when": "not screening_clear", "action": "HOLD"},
        {"rule": "duplicate-signal", "when": "duplicate_signal", "action": "REJECT_DUPLICATE"},
        {"rule": "policy-stale", "when": "not policy_current", "action": "ESCALATE"},
        {"rule": "evidence-conflict", "when": "evidence_conflict", "action": "ESCALATE"},
        {"rule": "high-value", "when": "high_value", "action": "ESCALATE"},
        {"rule": "routine-release", "when": "otherwise", "action": "RELEASE"},
    ]


def test_payment_policy_decides_every_state_as_the_essay() -> None:
    for values in itertools.product((False, True), repeat=len(DECISION_FIELDS)):
        state = dict(zip(DECISION_FIELDS, values, strict=True))
        assert PAYMENT_RELEASE.decide(PaymentState(**state)) is essay_policy(state), state


def test_payment_loss_is_the_essays() -> None:
    assert dict(PAYMENT_RELEASE.loss.entries) == ESSAY_LOSS
    assert PAYMENT_RELEASE.loss(R, E) == 120  # the maximum synthetic loss
    assert max(ESSAY_LOSS.values()) == 120


def test_payment_hard_constraint_is_unsafe_release() -> None:
    assert PAYMENT_RELEASE.hard_violations(R, E) == ("unsafe-release",)
    assert PAYMENT_RELEASE.hard_violations(R, R) == ()
    assert PAYMENT_RELEASE.hard_violations(E, R) == ()


def test_synthetic_cases_are_the_essays_fixture() -> None:
    cases = list(synthetic_cases())
    assert len(cases) == 28
    decided = [PAYMENT_RELEASE.decide(case.state()) for case in cases]
    assert [decided.count(a) for a in (R, H, D, E)] == [4, 8, 4, 12]


def test_the_essays_injected_false_value_releases_a_stale_case() -> None:
    stale = PaymentState(identity_verified=True, screening_clear=True, duplicate_signal=False,
                         policy_current=False, evidence_conflict=False, high_value=False)
    flipped = attrs.evolve(stale, policy_current=True)
    reference = PAYMENT_RELEASE.decide(stale)
    chosen = PAYMENT_RELEASE.decide(flipped)
    assert (reference, chosen) == (E, R)
    assert PAYMENT_RELEASE.loss(chosen, reference) == 120


def test_benign_defaults_are_declared_on_payment_fields() -> None:
    defaults = {spec.name: spec.if_missing for spec in PAYMENT_RELEASE.fields}
    assert defaults == {"identity_verified": True, "screening_clear": True,
                        "duplicate_signal": False, "policy_current": True,
                        "evidence_conflict": False, "high_value": False}
    assert MISSING not in defaults.values()


# ---------------------------------------------------------- three-valued logic

ROUTINE = {name: name not in ("duplicate_signal", "evidence_conflict", "high_value")
           for name in DECISION_FIELDS}


def test_a_missing_field_before_the_deciding_rule_leaves_it_undetermined() -> None:
    view = {k: v for k, v in ROUTINE.items() if k != "policy_current"}
    outcome = PAYMENT_RELEASE.evaluate(view)
    assert (outcome.action, outcome.rule, outcome.determined) == (None, "policy-stale", False)


def test_a_missing_field_after_the_deciding_rule_does_not_matter() -> None:
    view = {**ROUTINE, "duplicate_signal": True}
    del view["high_value"], view["evidence_conflict"]
    outcome = PAYMENT_RELEASE.evaluate(view)
    assert (outcome.action, outcome.rule, outcome.determined) == (D, "duplicate-signal", True)


def test_full_view_reaches_the_default() -> None:
    outcome = PAYMENT_RELEASE.evaluate(ROUTINE)
    assert (outcome.action, outcome.rule, outcome.determined) == (R, "routine-release", True)


def test_the_empty_view_is_undetermined_at_the_first_rule() -> None:
    outcome = PAYMENT_RELEASE.evaluate({})
    assert (outcome.action, outcome.rule, outcome.determined) == (None, "identity-unverified",
                                                                  False)


def test_evaluate_refuses_what_is_neither_state_nor_mapping_as_documented() -> None:
    from handoffs._errors import InvalidArgument

    with pytest.raises(InvalidArgument) as caught:
        PAYMENT_RELEASE.evaluate(42)  # type: ignore[arg-type]
    assert str(caught.value) == ("evaluate takes a PaymentState or a mapping of field values, "
                                 "got int @ $")
    assert isinstance(caught.value, TypeError)
    assert "InvalidArgument" in (PAYMENT_RELEASE.evaluate.__doc__ or "")


@pytest.mark.parametrize(
    ("interval", "over", "under"),
    [
        (Interval(0.06, 0.08), True, False),     # wholly over
        (Interval(0.01, 0.04), False, True),     # wholly under
        (Interval(0.03, 0.08), None, None),      # straddles: unknown
        (Interval(0.05, 0.07), None, False),     # touches from above: 0.05 is not > 0.05
        (Interval(0.02, 0.05), False, None),     # touches from below
        (Interval.point(0.05), False, False),    # exactly on the threshold
    ],
)
def test_interval_conditions_are_three_valued(
    interval: Interval, over: bool | None, under: bool | None
) -> None:
    view = {"failure_probability": interval}
    assert Over("failure_probability", 0.05).evaluate(view) is over
    assert Under("failure_probability", 0.05).evaluate(view) is under


@pytest.mark.parametrize(
    ("interval", "over", "under"),
    [
        (Interval(0.05, 0.07), True, None),
        (Interval(0.02, 0.05), None, True),
        (Interval(0.06, 0.08), True, False),
        (Interval(0.03, 0.08), None, None),
        (Interval.point(0.05), True, True),
    ],
)
def test_inclusive_interval_conditions(
    interval: Interval, over: bool | None, under: bool | None
) -> None:
    view = {"failure_probability": interval}
    assert Over("failure_probability", 0.05, inclusive=True).evaluate(view) is over
    assert Under("failure_probability", 0.05, inclusive=True).evaluate(view) is under


def test_the_pump_decides_only_when_the_interval_is_on_one_side() -> None:
    contract = pump_contract()
    running = {"running": True}
    stop = contract.evaluate({**running, "failure_probability": Interval(0.06, 0.08)})
    go = contract.evaluate({**running, "failure_probability": Interval(0.01, 0.03)})
    open_ = contract.evaluate({**running, "failure_probability": Interval(0.03, 0.08)})
    assert (stop.action, go.action, open_.action) == (Go.STOP, Go.CONTINUE, None)
    assert not open_.determined
    assert open_.rule == "failure-likely"


def test_the_essays_loss_change_moves_the_threshold() -> None:
    # h = 20 puts the threshold at 0.1: an estimate of 0.08 now continues.
    relaxed = pump_contract(policy=Policy(
        rules=(Rule("failure-likely", Over("failure_probability", 0.1), Go.STOP),),
        default=Go.CONTINUE,
    ))
    view = {"failure_probability": Interval.point(0.08), "running": True}
    assert pump_contract().evaluate(view).action is Go.STOP
    assert relaxed.evaluate(view).action is Go.CONTINUE


def test_plain_numbers_compare_as_points() -> None:
    assert Over("x", 1).evaluate({"x": 2}) is True
    assert Over("x", 1).evaluate({"x": 1}) is False
    assert Under("x", 1).evaluate({"x": 0.5}) is True
    assert Over("x", 1).evaluate({}) is None


T, F, U = Always(), Not(Always()), Is("absent", True)


@pytest.mark.parametrize(
    ("condition", "truth"),
    [
        (AllOf((T, T)), True), (AllOf((T, U)), None), (AllOf((F, U)), False),
        (AnyOf((F, F)), False), (AnyOf((F, U)), None), (AnyOf((T, U)), True),
        (Not(U), None), (Not(F), True), (T & U, None), (F | U, None), (~T, False),
    ],
)
def test_kleene_connectives(condition: Any, truth: bool | None) -> None:
    assert condition.evaluate({}) is truth


def test_predicate_is_unknown_until_its_fields_are_present() -> None:
    both = Predicate(lambda v: v["a"] and v["b"], fields={"a", "b"}, description="a and b")
    assert both.evaluate({"a": True}) is None
    assert both.evaluate({"a": True, "b": True}) is True
    assert both.reads() == frozenset({"a", "b"})


def test_policy_metadata_for_reports() -> None:
    policy = Policy(
        rules=(Rule("hot", AllOf((Over("t", 90), Under("p", 2, inclusive=True))), Go.STOP),),
        default=Go.CONTINUE,
    )
    assert policy.reads() == frozenset({"t", "p"})
    assert policy.thresholds() == (("t", 90), ("p", 2))
    assert policy.describe()[0] == {"rule": "hot", "when": "(t > 90) and (p <= 2)",
                                    "action": "STOP"}


def test_hard_constraint_allows_listed_references() -> None:
    rule = HardConstraint("no-blind-continue", chosen=Go.CONTINUE,
                          allowed_references={Go.CONTINUE})
    assert rule.violated(Go.CONTINUE, Go.STOP)
    assert not rule.violated(Go.STOP, Go.CONTINUE)
    assert rule.to_json() == {"name": "no-blind-continue", "chosen": "CONTINUE",
                              "allowed_references": ["CONTINUE"], "description": ""}


def test_a_context_dependency_takes_on_missing_as_a_word() -> None:
    from handoffs._errors import InvalidArgument
    from handoffs.contracts import EvidenceFresh, RoleHeld

    held = RoleHeld("case-owner", on_missing="ESCALATE")
    assert held.to_json() == {"kind": "role-held", "role": "case-owner",
                              "on_missing": "ESCALATE"}
    assert RoleHeld("case-owner").to_json()["on_missing"] == "REJECT"
    with pytest.raises(InvalidArgument, match="on_missing must be 'REJECT' or 'ESCALATE', "
                                              "got 'IGNORE'"):
        EvidenceFresh("screening", max_age=timedelta(hours=1), on_missing="IGNORE")
