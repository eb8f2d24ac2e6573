"""Receiver contracts reproduce the essay's receive_* decisions, and never raise."""

from __future__ import annotations

import enum
import hashlib
import json
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from handoffs.contracts import Authority, Governance, Receipt
from handoffs.contracts._encoders import compose
from handoffs.examples import payment
from handoffs.receivers import (
    Admitted,
    AdvisoryActionReceiver,
    AuthoritativeActuator,
    Decision,
    FullRecordReceiver,
    FunctionReceiver,
    GovernanceChecker,
    Receiver,
    ScoreReceiver,
    Step,
    StrictContractReceiver,
    Verdict,
)
from handoffs.receivers._gate import Ruling
from worlds.gate import CASES, CONTRACT, NOW, T0, WORLD, codes, raw

A = payment.PaymentAction

# --------------------------------------------------------------------------------------
# The essay's lab receivers, verbatim (decision-sufficiency-essay.txt, Part III), as the
# oracle. Only the Action enum is replaced by its string values.

DECISION_FIELDS = payment.DECISION_FIELDS


def policy(state: dict[str, bool]) -> str:  # noqa: PLR0911 - the essay's, verbatim
    if not state["identity_verified"]:
        return "HOLD"
    if not state["screening_clear"]:
        return "HOLD"
    if state["duplicate_signal"]:
        return "REJECT_DUPLICATE"
    if not state["policy_current"]:
        return "ESCALATE"
    if state["evidence_conflict"]:
        return "ESCALATE"
    if state["high_value"]:
        return "ESCALATE"
    return "RELEASE"


def governance_valid(message: dict[str, Any]) -> bool:
    return all(message.get(field) not in (None, "", [], ()) for field in Governance.FIELDS)


def receive_full(message: dict[str, Any]) -> str:
    state = {field: bool(message[field]) for field in DECISION_FIELDS}
    return policy(state)


def receive_contract(message: dict[str, Any]) -> str:
    if not governance_valid(message):
        return "ESCALATE"
    if message.get("authority") == "DECIDE" and "action" in message:
        return str(message["action"])
    state = message.get("decision_state")
    if not isinstance(state, dict) or any(field not in state for field in DECISION_FIELDS):
        return "ESCALATE"
    return policy({field: bool(state[field]) for field in DECISION_FIELDS})


def receive_score(message: dict[str, Any]) -> str:
    score = int(message["risk_score"])
    return "RELEASE" if score < 20 else "ESCALATE"


def receive_action_advisory(message: dict[str, Any]) -> str:
    return "ESCALATE"


def receive_action_authoritative(message: dict[str, Any]) -> str:
    if not governance_valid(message) or message.get("authority") != "DECIDE":
        return "ESCALATE"
    return str(message["action"])


# --------------------------------------------------------------------------------------
# The essay's five message forms, built by the library's encoders and governance stamp.


def stamp(case: payment.PaymentCase, authority: Authority = Authority.ADVISE) -> Any:
    return payment.GOVERNANCE.stamp(case_id=case.case_id, evidence_refs=case.evidence_refs,
                                    authority=authority)


def full_record(case: payment.PaymentCase) -> dict[str, Any]:
    return compose(payment.FullRecordEncoder().encode(case), stamp(case))


def decision_contract(case: payment.PaymentCase) -> dict[str, Any]:
    return Receipt.build(CONTRACT, payment.decision_contract_encoder().encode(case),
                         stamp(case)).to_json()


def risk_score(case: payment.PaymentCase) -> dict[str, Any]:
    return compose(payment.RiskScoreEncoder().encode(case), stamp(case))


def action_only(case: payment.PaymentCase, authority: Authority) -> dict[str, Any]:
    return compose(payment.ActionOnlyEncoder().encode(case), stamp(case, authority))


def lab_gate() -> Any:
    return WORLD.unsafe_gate(replay=None)


STRATEGIES = {
    "full_record": (full_record, receive_full, lambda: FullRecordReceiver(CONTRACT), 1.0),
    "decision_contract": (decision_contract, receive_contract,
                          lambda: StrictContractReceiver(lab_gate()), 1.0),
    "risk_score": (risk_score, receive_score,
                   lambda: ScoreReceiver(CONTRACT, below=A.RELEASE, at_or_above=A.ESCALATE),
                   16 / 28),
    "action_only_advisory": (lambda c: action_only(c, Authority.ADVISE), receive_action_advisory,
                             lambda: AdvisoryActionReceiver(CONTRACT), 12 / 28),
    "action_only_authoritative": (lambda c: action_only(c, Authority.DECIDE),
                                  receive_action_authoritative,
                                  lambda: AuthoritativeActuator(GovernanceChecker(CONTRACT)), 1.0),
}


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_receivers_reproduce_the_essay_decisions(strategy: str) -> None:
    encode, oracle, build, agreement = STRATEGIES[strategy]
    receiver = build()
    agreed = 0
    for case in CASES.values():
        message = encode(case)
        decision = receiver.receive(message)
        assert decision.action == oracle(message), case.case_id
        assert decision.action == receiver.receive(raw(message)).action  # bytes alike
        agreed += decision.action == CONTRACT.decide(case.state()).value
    assert agreed / len(CASES) == pytest.approx(agreement)  # the essay's table


@pytest.mark.parametrize("field", Governance.FIELDS)
def test_missing_governance_fails_closed_like_the_essay(field: str) -> None:
    strict, actuator = StrictContractReceiver(lab_gate()), AuthoritativeActuator(
        GovernanceChecker(CONTRACT))
    for case in CASES.values():
        message = decision_contract(case)
        del message[field]
        decision = strict.receive(message)
        assert decision.action == receive_contract(message) == "ESCALATE"
        assert (decision.verdict, decision.step, codes(decision)) == (
            Verdict.REJECT, Step.PARSE, ["missing-field"])
        order = action_only(case, Authority.DECIDE)
        order[field] = [] if field == "evidence_refs" else ""
        executed = actuator.receive(order)
        assert executed.action == receive_action_authoritative(order) == "ESCALATE"
        assert codes(executed) == ["missing-field"]


def test_the_essay_injected_error_is_believed_without_readback() -> None:
    message = decision_contract(CASES["policy-01"])
    message["decision_state"]["policy_current"] = True
    assert receive_contract(message) == "RELEASE"
    assert StrictContractReceiver(lab_gate()).receive(message).action == "RELEASE"
    read_back = StrictContractReceiver(WORLD.unsafe_gate(replay=None, readback=1.0))
    caught = read_back.receive(message)
    assert (caught.verdict, caught.action, codes(caught)) == (
        Verdict.REJECT, "ESCALATE", ["readback-mismatch"])


def test_strict_receiver_does_not_execute_an_action_only_decide() -> None:
    # Deliberately stricter than the essay's receive_contract, which executes it.
    message = action_only(CASES["value-01"], Authority.DECIDE)
    assert receive_contract(message) == "ESCALATE"  # value-01's action happens to be ESCALATE
    decision = StrictContractReceiver(lab_gate()).receive(action_only(
        CASES["routine-01"], Authority.DECIDE))
    assert (decision.verdict, decision.action, decision.step) == (
        Verdict.REJECT, "ESCALATE", Step.PARSE)


# ------------------------------------------------------------ actuator with proofs


def test_actuator_executes_a_granted_decide() -> None:
    actuator = AuthoritativeActuator(WORLD.gate())
    doc = WORLD.signed("duplicate-02", authority="DECIDE")
    decision = actuator.receive(raw(doc))
    assert (decision.verdict, decision.action, decision.authority) == (
        Verdict.ACCEPT, "REJECT_DUPLICATE", "DECIDE")
    assert decision.record == {"executed": True}


def test_actuator_refuses_advice_and_ungranted_decisions() -> None:
    actuator = AuthoritativeActuator(WORLD.gate())
    advice = actuator.receive(raw(WORLD.signed("routine-01")))
    assert (advice.verdict, advice.action, advice.step, codes(advice)) == (
        Verdict.ESCALATE, "ESCALATE", Step.POLICY, ["authority-not-decide"])
    claimed = actuator.receive(raw(WORLD.signed(
        "routine-01", authority="DECIDE", grant_authority=(Authority.ADVISE,))))
    assert (claimed.verdict, claimed.step, codes(claimed)) == (
        Verdict.REJECT, Step.PROOFS, ["authority-not-granted"])


def test_actuator_checks_the_action_member() -> None:
    actuator = AuthoritativeActuator(GovernanceChecker(CONTRACT))
    order = action_only(CASES["routine-01"], Authority.DECIDE)
    assert actuator.receive(order | {"action": "PAY_TWICE"}).reasons[0].code == "invalid-action"
    conflicting = actuator.receive(order | {"proposed_action": "HOLD"})
    assert (conflicting.verdict, codes(conflicting)) == (Verdict.REJECT, ["conflicting-action"])
    assert actuator.receive(order | {"authority": "MAYBE"}).reasons[0].code == "schema-invalid"


# --------------------------------------------------------------- score, full, advisory


@pytest.mark.parametrize(
    ("score", "verdict", "action", "code"),
    [
        (19, Verdict.ACCEPT, "RELEASE", None),
        (20, Verdict.ACCEPT, "ESCALATE", None),
        (19.5, Verdict.ACCEPT, "RELEASE", None),
        (True, Verdict.REJECT, "ESCALATE", "invalid-field"),
        ("10", Verdict.REJECT, "ESCALATE", "invalid-field"),
        (None, Verdict.REJECT, "ESCALATE", "missing-field"),
    ],
)
def test_score_receiver(score: Any, verdict: Verdict, action: str, code: str | None) -> None:
    receiver = ScoreReceiver(CONTRACT, below=A.RELEASE, at_or_above=A.ESCALATE)
    message = risk_score(CASES["routine-01"])
    if score is None:
        del message["risk_score"]
    else:
        message["risk_score"] = score
    decision = receiver.receive(message)
    assert (decision.verdict, decision.action) == (verdict, action)
    assert codes(decision) == ([] if code is None else [code])


def test_score_receiver_actions_must_belong_to_the_contract() -> None:
    class Other(enum.Enum):
        GO = "GO"

    with pytest.raises(TypeError, match="not an action"):
        ScoreReceiver(CONTRACT, below=Other.GO, at_or_above=A.ESCALATE)


def test_full_record_decides_on_partial_records_only_when_determined() -> None:
    receiver = FullRecordReceiver(CONTRACT)
    record = full_record(CASES["identity-01"])
    del record["high_value"]  # irrelevant: identity unverified holds first
    assert receiver.receive(record).action == "HOLD"
    record = full_record(CASES["routine-01"])
    del record["policy_current"]
    decision = receiver.receive(record)
    assert (decision.verdict, decision.action, codes(decision)) == (
        Verdict.ESCALATE, "ESCALATE", ["undetermined", "missing-field"])
    record = full_record(CASES["routine-01"]) | {"screening_clear": "yes"}
    assert codes(receiver.receive(record)) == ["invalid-field"]


def test_advisory_receiver_refuses_the_unsupported_verdict() -> None:
    decision = AdvisoryActionReceiver(CONTRACT).receive(action_only(CASES["routine-01"],
                                                                    Authority.ADVISE))
    assert (decision.verdict, decision.action, decision.step, codes(decision)) == (
        Verdict.ESCALATE, "ESCALATE", Step.POLICY, ["unsupported-verdict"])
    assert decision.record == {"proposed": "RELEASE"}


def test_governance_checker_audience_and_expiry() -> None:
    order = action_only(CASES["routine-01"], Authority.DECIDE)
    checker = GovernanceChecker(CONTRACT, identity="case-owner", clock=lambda: NOW)
    actuator = AuthoritativeActuator(checker)
    assert actuator.receive(order).action == "RELEASE"
    assert not actuator.deterministic
    wrong = AuthoritativeActuator(GovernanceChecker(CONTRACT, identity="payments"))
    assert (wrong.receive(order).step, codes(wrong.receive(order))) == (
        Step.PROOFS, ["wrong-audience"])
    late = AuthoritativeActuator(GovernanceChecker(CONTRACT, clock=lambda: T0 + timedelta(
        days=400)))
    assert codes(late.receive(order)) == ["receipt-expired"]
    assert codes(actuator.receive(order | {"valid_until": "soon"})) == ["bad-time"]
    with pytest.raises(ValueError, match="contract"):
        FullRecordReceiver(CONTRACT, governance=GovernanceChecker(_other_contract()))


def _other_contract() -> Any:
    import attrs

    return attrs.evolve(CONTRACT, version="9.9.9")


# ------------------------------------------------------------------ function receiver


def _model(admitted: Admitted) -> Any:
    state = admitted.document["decision_state"]
    return A.HOLD if not state["identity_verified"] else "ESCALATE"


def _function_receiver(fn: Any = _model, **options: Any) -> FunctionReceiver:
    settings: dict[str, Any] = {
        "gate": WORLD.gate(replay=None), "name": "llm-case-owner",
        "prompt": "You are the case owner. Answer with one action.",
        "model_route": "provider/model-x@2026-05-01", "tools": ("policy_lookup",),
    }
    settings.update(options)
    return FunctionReceiver(fn, **settings)


def test_function_receiver_records_its_declaration_in_every_decision() -> None:
    receiver = _function_receiver()
    expected = {
        "prompt_sha256": hashlib.sha256(
            b"You are the case owner. Answer with one action.").hexdigest(),
        "model_route": "provider/model-x@2026-05-01",
        "tools": ["policy_lookup"],
    }
    held = receiver.receive(raw(WORLD.signed("identity-01")))
    assert (held.verdict, held.action, held.record) == (Verdict.ACCEPT, "HOLD", expected)
    refused = receiver.receive(b"{not json")
    assert (refused.verdict, refused.record) == (Verdict.REJECT, expected)


def test_function_receiver_fails_closed_on_bad_answers() -> None:
    doc = raw(WORLD.signed("routine-01"))
    invalid = _function_receiver(lambda _: "WIRE_FUNDS").receive(doc)
    assert (invalid.verdict, invalid.action, codes(invalid)) == (
        Verdict.REJECT, "ESCALATE", ["invalid-action"])
    crashed = _function_receiver(lambda _: 1 / 0).receive(doc)
    assert (crashed.verdict, codes(crashed)) == (Verdict.ESCALATE, ["receiver-error"])
    refusal = _function_receiver(lambda _: Ruling(action="RELEASE", verdict=Verdict.ESCALATE))
    assert refusal.receive(doc).action == "ESCALATE"  # a refusal always fails closed
    ruling = _function_receiver(lambda _: Ruling(action="RELEASE", record={"tokens": 12}))
    assert ruling.receive(doc).record["tokens"] == 12


def test_function_receiver_determinism_needs_a_deterministic_gate() -> None:
    assert _function_receiver(deterministic=True).deterministic
    assert not _function_receiver(deterministic=True, gate=WORLD.gate()).deterministic
    assert not _function_receiver().deterministic
    with pytest.raises(ValueError, match="prompt"):
        _function_receiver(prompt="")
    with pytest.raises(TypeError, match="tools"):
        _function_receiver(tools="search")


# ----------------------------------------------------------------- one interface


def _receivers() -> list[Any]:
    return [build() for _, _, build, _ in STRATEGIES.values()] + [
        AuthoritativeActuator(WORLD.gate()), _function_receiver()]


def test_every_receiver_implements_the_protocol() -> None:
    for receiver in _receivers():
        assert isinstance(receiver, Receiver)
        assert isinstance(receiver.name, str)
        assert isinstance(receiver.deterministic, bool)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.text(max_size=20)
    | st.floats(allow_nan=True),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                  max_size=4),
    max_leaves=12,
)


@given(message=st.binary(max_size=200) | _json | _json.map(json.dumps))  # NaN text included
def test_no_receiver_raises_on_garbage(message: Any) -> None:
    for receiver in _receivers():
        decision = receiver.receive(message)
        assert isinstance(decision, Decision)
        assert decision.verdict is not Verdict.ACCEPT or receiver.name in {
            "full-record", "score", "advisory-action"} or isinstance(message, dict)


@given(state=st.fixed_dictionaries({name: st.booleans() for name in DECISION_FIELDS}))
def test_full_record_and_contract_agree_on_every_state(state: dict[str, bool]) -> None:
    case = payment.PaymentCase(**{**_base_case(), **state})
    expected = policy(state)
    assert FullRecordReceiver(CONTRACT).receive(full_record(case)).action == expected
    message = decision_contract(case)
    assert StrictContractReceiver(WORLD.unsafe_gate(replay=None)).receive(
        message).action == receive_contract(message) == expected


def _base_case() -> dict[str, Any]:
    case = CASES["routine-01"]
    return {"case_id": case.case_id, "amount": case.amount, "counterparty": case.counterparty,
            "history": case.history, "evidence_refs": case.evidence_refs}


# ---------------------------------------------------------------------- errors page


def _reason_codes() -> set[str]:
    """Every literal reason code in src/: ``code=...`` arguments, ``code = ...`` class
    attributes and the first argument of ``Reason(...)``.
    """
    import ast
    from pathlib import Path

    found: set[str] = set()
    for path in (Path(__file__).parents[2] / "src" / "handoffs").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                found.update(kw.value.value for kw in node.keywords
                             if kw.arg == "code" and isinstance(kw.value, ast.Constant))
                name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                if name == "Reason" and node.args and isinstance(node.args[0], ast.Constant):
                    found.add(node.args[0].value)
            elif (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                  and [getattr(t, "id", None) for t in node.targets] == ["code"]):
                found.add(node.value.value)
    return found


def test_the_errors_page_lists_every_reason_code() -> None:
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "reference" / "errors.md").read_text(
        encoding="utf-8")
    codes_in_src = _reason_codes() | {"domain-mismatch", "challenge-mismatch"}
    assert len(codes_in_src) > 100
    assert sorted(c for c in codes_in_src if f"`{c}`" not in page) == []
