"""handoffs.testing: strategies for any contract, and assert_sufficient."""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from typing import Any

import attrs
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from handoffs._cases import GeneratedCase
from handoffs.contracts import (
    Contract,
    GovernanceService,
    HardConstraint,
    Interval,
    LossMatrix,
    Receipt,
    Registry,
    decision_field,
)
from handoffs.contracts.policy import Is, Over, Policy, Rule
from handoffs.examples import payment as pay
from handoffs.examples.payment_lab import payment_experiment, strict_receiver
from handoffs.lab import assert_sufficient
from handoffs.lab._reference import ReferenceReceiver
from handoffs.receivers import Decision, Receiver, Step, Verdict
from handoffs.testing import (
    cases,
    evidence_refs,
    falsehoods,
    governances,
    identifiers,
    receipts,
    states,
)

# --------------------------------------------------------------- a numeric contract


class Pump(enum.Enum):
    CONTINUE = "CONTINUE"
    STOP = "STOP"


class Loop(enum.Enum):
    ORDINARY = "ORDINARY"
    SAFETY = "SAFETY"
    BACKUP = "BACKUP"


@attrs.frozen
class PumpState:
    failure: Interval = decision_field(
        "Certified failure probability in the next window.", minimum=0.0, maximum=1.0)
    loop: Loop = decision_field("Which loop the pump feeds.")
    alarms: int = decision_field("Alarms in the last hour.", minimum=0, maximum=50)
    load: float = decision_field("Load factor.", minimum=0.0, maximum=2.0)


PUMP = Contract(
    name="pump-inspection",
    version="1.0.0",
    description="Continue the pump or stop it for inspection.",
    actions=Pump,
    state=PumpState,
    policy=Policy(
        rules=(
            Rule("safety-loop", Is("loop", Loop.SAFETY) & Over("failure", 0.05), Pump.STOP),
            Rule("any-loop", Over("failure", 0.2), Pump.STOP),
            Rule("alarms", Over("alarms", 3), Pump.STOP),
            Rule("overload", Over("load", 1.5), Pump.STOP),
        ),
        default=Pump.CONTINUE,
    ),
    loss=LossMatrix({
        (Pump.CONTINUE, Pump.CONTINUE): 0, (Pump.STOP, Pump.STOP): 0,
        (Pump.STOP, Pump.CONTINUE): 2, (Pump.CONTINUE, Pump.STOP): 40,
    }),
    hard_constraints=(HardConstraint("unsafe-continue", chosen=Pump.CONTINUE,
                                     allowed_references=frozenset({Pump.CONTINUE})),),
    fail_closed_action=Pump.STOP,
    counterfactual_trigger="Recompute when the failure estimate or the loop changes.",
)
PUMP_REGISTRY = Registry.of(PUMP)


@attrs.frozen
class AlwaysContinue:
    """A receiver that never stops: agreement on routine cases only."""

    name: str = "always-continue"
    deterministic: bool = True

    def receive(self, message: bytes | str | Mapping[str, Any]) -> Decision:
        return Decision(verdict=Verdict.ACCEPT, action="CONTINUE", step=Step.POLICY,
                        receiver=self.name)


def state_validator(contract: Contract[Any, Any]) -> Draft202012Validator:
    return Draft202012Validator(contract.json_schema()["properties"]["decision_state"])


def wire_state(state: PumpState) -> dict[str, Any]:
    return {"failure": {"lo": state.failure.lo, "hi": state.failure.hi},
            "loop": state.loop.value, "alarms": state.alarms, "load": state.load}


# --------------------------------------------------------------------- strategies


@given(states(PUMP))
def test_states_are_in_the_domain(state: PumpState) -> None:
    for spec in PUMP.fields:
        assert spec.contains(getattr(state, spec.name)), spec.name


def test_states_reach_the_values_just_across_each_threshold() -> None:
    # Boundary weighting: a uniform draw would practically never hit these.
    just_over = math.nextafter(0.2, 1.0)
    found = find(states(PUMP), lambda s: s.failure.lo == just_over)
    assert PUMP.decide(found) is Pump.STOP
    found = find(states(PUMP), lambda s: s.failure.hi == 0.2 and s.loop is Loop.ORDINARY
                 and s.alarms <= 3 and s.load <= 1.5)
    assert PUMP.decide(found) is Pump.CONTINUE
    assert find(states(PUMP), lambda s: s.alarms == 4).alarms == 4


@given(receipts(PUMP))
def test_receipts_round_trip_json_and_bytes(receipt: Receipt[Any, Any]) -> None:
    assert Receipt.from_json(receipt.to_json(), registry=PUMP_REGISTRY) == receipt
    assert Receipt.from_json(receipt.to_bytes(), registry=PUMP_REGISTRY) == receipt


@given(receipts(pay.PAYMENT_RELEASE))
def test_payment_receipts_round_trip_with_the_examples_contract(
        receipt: Receipt[Any, Any]) -> None:
    assert Receipt.from_json(receipt.to_bytes(), registry=pay.PAYMENT_RELEASE) == receipt
    assert receipt.proposed_action == pay.PAYMENT_RELEASE.decide(receipt.decision_state)


@given(receipts(pay.PAYMENT_RELEASE, governance=pay.GOVERNANCE))
def test_receipts_stamped_by_a_service(receipt: Receipt[Any, Any]) -> None:
    assert (receipt.sender, receipt.receiver) == ("evidence-specialist", "case-owner")
    assert receipt.policy_version == "PAY-7.4"


def test_a_fixed_governance_stamp_is_used_as_is() -> None:
    stamp = pay.GOVERNANCE.stamp(case_id="case-7", evidence_refs=["evidence://x/1"])

    @given(receipts(pay.PAYMENT_RELEASE, governance=stamp, honest=False))
    def check(receipt: Receipt[Any, Any]) -> None:
        assert receipt.governance == stamp

    check()


def test_a_service_without_decide_rights_never_stamps_decide() -> None:
    service = attrs.evolve(pay.GOVERNANCE, may_decide=False)

    @given(receipts(pay.PAYMENT_RELEASE, governance=service))
    def check(receipt: Receipt[Any, Any]) -> None:
        assert receipt.authority.value == "ADVISE"

    check()


def test_receipts_reject_a_bad_governance_argument() -> None:
    with pytest.raises(TypeError, match="governance must be"):
        receipts(PUMP, governance="case-owner")  # type: ignore[arg-type]


@given(identifiers(), evidence_refs(), governances())
def test_value_strategies_are_schema_shaped(ident: str, refs: tuple[Any, ...],
                                            stamp: Any) -> None:
    assert ident[0].isalnum()
    assert len(ident) <= 128
    assert 1 <= len(refs) <= 4
    assert stamp.evidence_refs


@pytest.mark.parametrize("max_size", [0, 129])
def test_identifiers_check_their_bound(max_size: int) -> None:
    with pytest.raises(ValueError, match="max_size"):
        identifiers(max_size=max_size)


# --------------------------------------------------------------------- falsehoods


TRUE_PUMP = PumpState(failure=Interval(0.01, 0.04), loop=Loop.SAFETY, alarms=1, load=0.5)
SAFETY_HIGH = attrs.evolve(TRUE_PUMP, failure=Interval(0.06, 0.08))


@settings(max_examples=100)
@given(falsehoods(PUMP, TRUE_PUMP, max_changed=2))
def test_falsehoods_are_schema_valid_and_false(false_state: PumpState) -> None:
    assert false_state != TRUE_PUMP
    changed = [s.name for s in PUMP.fields
               if getattr(false_state, s.name) != getattr(TRUE_PUMP, s.name)]
    assert 1 <= len(changed) <= 2
    assert state_validator(PUMP).is_valid(wire_state(false_state))


def test_boolean_falsehoods_are_exactly_the_flips() -> None:
    truth = next(iter(pay.synthetic_cases())).state()
    seen: set[tuple[str, bool]] = set()

    @settings(max_examples=100)
    @given(falsehoods(pay.PAYMENT_RELEASE, truth))
    def collect(false_state: pay.PaymentState) -> None:
        diff = [(f, getattr(false_state, f)) for f in pay.DECISION_FIELDS
                if getattr(false_state, f) != getattr(truth, f)]
        assert len(diff) == 1
        seen.add(diff[0])

    collect()
    assert seen == {(f, not getattr(truth, f)) for f in pay.DECISION_FIELDS}


def test_enum_falsehoods_are_the_other_members() -> None:
    @given(falsehoods(PUMP, TRUE_PUMP, fields=["loop"]))
    def check(false_state: PumpState) -> None:
        assert false_state.loop in (Loop.ORDINARY, Loop.BACKUP)

    check()


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"fields": ["nope"]}, ValueError, "no decision fields"),
        ({"max_changed": 0}, ValueError, "max_changed"),
    ],
)
def test_falsehoods_check_their_arguments(options: dict[str, Any], error: type[Exception],
                                          match: str) -> None:
    with pytest.raises(error, match=match):
        falsehoods(PUMP, TRUE_PUMP, **options)


def test_falsehoods_need_a_state_of_the_contract() -> None:
    with pytest.raises(TypeError, match="PumpState"):
        falsehoods(PUMP, next(iter(pay.synthetic_cases())).state())


# -------------------------------------------------------------------------- cases


@given(cases(PUMP))
def test_cases_of_a_contract_are_generated_cases(case: GeneratedCase) -> None:
    assert isinstance(case.state, PumpState)
    assert case.case_id
    assert case.evidence_refs


@given(cases(payment_experiment()))
def test_cases_of_an_experiment_come_from_its_source(case: pay.PaymentCase) -> None:
    assert isinstance(case, pay.PaymentCase)


# -------------------------------------------------------------- assert_sufficient


def test_the_strict_receiver_is_sufficient_on_the_essay_cases() -> None:
    assert isinstance(strict_receiver(), Receiver)
    assert_sufficient(pay.PAYMENT_RELEASE, strict_receiver(), pay.synthetic_cases(),
                      governance=pay.GOVERNANCE)


@settings(max_examples=20)
@given(st.lists(cases(PUMP), min_size=1, max_size=8))
def test_the_reference_receiver_is_sufficient_on_any_cases(
        drawn: list[GeneratedCase]) -> None:
    assert_sufficient(PUMP, ReferenceReceiver(PUMP, defaults=False), drawn)


def test_plain_states_are_accepted_as_cases() -> None:
    assert_sufficient(PUMP, ReferenceReceiver(PUMP, defaults=False), [TRUE_PUMP])


def test_an_insufficient_receiver_fails_with_a_table() -> None:
    routine = attrs.evolve(TRUE_PUMP, loop=Loop.ORDINARY)
    with pytest.raises(AssertionError) as caught:
        assert_sufficient(PUMP, AlwaysContinue(), [routine, SAFETY_HIGH,
                                                   attrs.evolve(routine, alarms=9)])
    text = str(caught.value)
    lines = text.splitlines()
    assert lines[0] == (
        "always-continue is not sufficient for pump-inspection/1.0.0 on 3 cases: "
        "agreement 0.3333 (ε = 0), mean regret 26.67 (δ = 0), hard violations 2 (allowed 0)"
    )
    header = next(line for line in lines if line.startswith("case "))
    assert header.split() == ["case", "reference", "chosen", "verdict", "regret", "hard",
                              "violations", "reasons", "decision", "state"]
    failing = [line for line in lines if line.startswith("case-0")]
    assert [line.split()[:6] for line in failing] == [
        ["case-000002", "STOP", "CONTINUE", "ACCEPT", "40", "unsafe-continue"],
        ["case-000003", "STOP", "CONTINUE", "ACCEPT", "40", "unsafe-continue"],
    ]
    assert failing[0].endswith("failure=[0.06, 0.08] loop=SAFETY alarms=1 load=0.5")
    assert "  - always-continue under none: 2 hard violation(s) in the cases, 0 allowed" in lines


def test_tolerances_let_a_bounded_failure_pass() -> None:
    routine = attrs.evolve(TRUE_PUMP, loop=Loop.ORDINARY)
    assert_sufficient(PUMP, AlwaysContinue(), [routine, routine, SAFETY_HIGH], epsilon=0.34,
                      delta=14, hard_violations=1)
    with pytest.raises(AssertionError, match="hard violations 1 \\(allowed 0\\)"):
        assert_sufficient(PUMP, AlwaysContinue(), [routine, routine, SAFETY_HIGH],
                          epsilon=0.34, delta=14)


def test_the_table_is_bounded() -> None:
    stop = SAFETY_HIGH
    with pytest.raises(AssertionError, match="and 3 more failing cases") as caught:
        assert_sufficient(PUMP, AlwaysContinue(), [stop] * 5, max_rows=2)
    assert str(caught.value).count("case-0") == 2


def test_assert_sufficient_with_a_custom_governance_service() -> None:
    service = GovernanceService(sender="pump-monitor", receiver="plant-operator",
                                policy_version="PUMP-1", valid_until=pay.GOVERNANCE.valid_until)
    assert_sufficient(PUMP, ReferenceReceiver(PUMP, defaults=False), [TRUE_PUMP],
                      governance=service)


def test_assert_sufficient_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="at least one case"):
        assert_sufficient(PUMP, AlwaysContinue(), [])
    with pytest.raises(TypeError, match="Receiver"):
        assert_sufficient(PUMP, object(), [TRUE_PUMP])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tolerance"):
        assert_sufficient(PUMP, AlwaysContinue(), [TRUE_PUMP], epsilon=-1)
