"""The runtime gate: steps (1)-(5), context, evidence, readback, replay, configuration.

``World`` (keys, trust ring, signed receipts, evidence, gates) lives in
``tests/worlds/gate.py``, which the other receiver test modules import too.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from handoffs._audience import check_addressed
from handoffs._errors import ProofError, UnknownContract
from handoffs._json import JSONLimits
from handoffs._logs import ReplayStoreError
from handoffs._time import CLOCK_SKEW
from handoffs.contracts import DecisionContent, Interval, Receipt
from handoffs.examples import payment
from handoffs.integrity import KeyRing, SigningKey, sign
from handoffs.receivers import (
    Admitted,
    Decision,
    Gate,
    InMemoryEvidenceResolver,
    InMemoryPolicyService,
    MemoryReplayStore,
    ResolvedEvidence,
    Step,
    StrictContractReceiver,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
    Verdict,
)
from handoffs.receivers._gate import Ruling
from handoffs.receivers._services import EvidenceError, reads_back
from worlds.gate import (
    ALL_EVIDENCE,
    CASES,
    CONTRACT,
    NOW,
    RECEIVER,
    SENDER,
    T0,
    WORLD,
    codes,
    raw,
    strict,
)
from worlds.gate import ref as _ref

# ------------------------------------------------------------------ accepting path


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_signed_receipt_is_decided_by_the_contract_policy(case_id: str) -> None:
    decision = strict(WORLD.gate(readback=1.0)).receive(raw(WORLD.signed(case_id)))
    assert decision.verdict is Verdict.ACCEPT
    assert decision.action == CONTRACT.decide(CASES[case_id].state()).value
    assert decision.step is Step.POLICY
    assert decision.reasons == ()
    assert decision.readback == "agree"


def test_decision_carries_what_the_gate_verified() -> None:
    doc = WORLD.signed("value-02")
    decision = strict(WORLD.gate()).receive(raw(doc))
    assert decision.to_json() == {
        "verdict": "ACCEPT", "admitted": True, "action": "ESCALATE", "step": 5, "reasons": [],
        "receiver": "strict-contract", "contract": "payment-release/1.0.0",
        "receipt_id": doc["id"], "sender": SENDER, "authority": "ADVISE",
        "counterfactual_trigger": CONTRACT.counterfactual_trigger,
        "record": {"rule": "high-value", "proposed_action": "ESCALATE",
                   "agrees_with_proposal": True},
        "readback": None,
    }


def test_strict_receiver_recomputes_under_decide_too() -> None:
    doc = WORLD.signed("duplicate-01", authority="DECIDE",
                       mutate=lambda d: d.update(proposed_action="RELEASE"))
    decision = strict(WORLD.gate()).receive(raw(doc))
    assert (decision.verdict, decision.action) == (Verdict.ACCEPT, "REJECT_DUPLICATE")
    assert decision.record["agrees_with_proposal"] is False
    assert decision.authority == "DECIDE"


def test_bytes_text_and_mapping_inputs_decide_alike() -> None:
    gate = WORLD.gate(replay=None)
    doc = WORLD.signed("routine-01")
    decisions = {strict(gate).receive(m).action for m in (raw(doc), raw(doc).decode(), doc)}
    assert decisions == {"RELEASE"}


@given(state=st.fixed_dictionaries({name: st.booleans() for name in payment.DECISION_FIELDS}))
def test_any_signed_state_is_decided_as_the_policy_says(state: dict[str, bool]) -> None:
    registry = _no_context_registry()
    # The policy service governs the receiver's contract (no context dependencies).
    grant = WORLD.grant("routine-01", contract=registry.by_id(CONTRACT.id))
    doc = WORLD.signed("routine-01", state=state, grant=grant,
                       mutate=lambda d: d.update(
                           proposed_action=CONTRACT.decide(payment.PaymentState(**state)).value))
    decision = strict(WORLD.gate(evidence=None, registry=registry)).receive(raw(doc))
    assert decision.verdict is Verdict.ACCEPT
    assert decision.action == CONTRACT.decide(payment.PaymentState(**state)).value


def _no_context_registry() -> Any:
    from handoffs.contracts import Registry

    return Registry.of(attrs.evolve(CONTRACT, context=()))


# ------------------------------------------------------------------- configuration


def test_empty_trust_store_is_refused_at_construction() -> None:
    with pytest.raises(ProofError, match="empty") as info:
        Gate(identity=RECEIVER, trust=KeyRing(), registry=CONTRACT)
    assert info.value.code == "empty-trust-store"


def test_unsafe_no_proofs_warns() -> None:
    with pytest.warns(UnsafeConfigurationWarning, match="NOT checked"):
        gate = Gate(identity=RECEIVER, trust=UnsafeNoProofs(), registry=CONTRACT)
    assert gate.verifies_proofs is False


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"identity": ""}, ValueError, "identity"),
        ({"identity": " case-owner"}, ValueError, "identity"),
        ({"trust": {"keys": []}}, TypeError, "KeyRing"),
        ({"readback": 1.0, "evidence": None}, ValueError, "readback needs"),
        ({"roles": "case-owner"}, TypeError, "roles"),
        ({"clock": "now"}, TypeError, "callable"),
        ({"policy_service": object()}, TypeError, "PolicyService"),
        ({"evidence": object()}, TypeError, "EvidenceResolver"),
        ({"replay": object()}, TypeError, "ReplayStore"),
        ({"log": object()}, TypeError, "DecisionLog"),
        ({"registry": object()}, TypeError, "registry"),
    ],
)
def test_bad_configuration_is_refused_before_any_work(
    options: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        WORLD.gate(**options)


def test_empty_registry_is_refused() -> None:
    from handoffs.contracts import Registry

    with pytest.raises(UnknownContract, match="no contract"):
        WORLD.gate(registry=Registry())


def test_readback_fractions() -> None:
    assert reads_back(1.0, "anything")
    assert not reads_back(0.0, "anything")
    ids = [f"urn:uuid:{i:036d}" for i in range(2000)]
    picked = [reads_back(0.5, i) for i in ids]
    assert picked == [reads_back(0.5, i) for i in ids]  # deterministic per id
    assert 0.4 < sum(picked) / len(ids) < 0.6
    for bad in (1.5, -0.1, True, "1"):
        with pytest.raises(ValueError, match="fraction"):
            WORLD.gate(readback=bad)


def test_deterministic_only_without_replay_store() -> None:
    assert WORLD.gate(replay=None).deterministic
    assert not WORLD.gate().deterministic


# ------------------------------------------------------------- (3) context


@pytest.mark.parametrize(
    ("options", "fields", "verdict", "expected"),
    [
        ({"roles": set()}, {}, Verdict.REJECT, ["receiver-role-missing"]),
        ({"policy_service": None}, {}, Verdict.ESCALATE, ["policy-unresolvable"]),
        ({"policy_service": InMemoryPolicyService({"PAY-7.5": True})}, {}, Verdict.ESCALATE,
         ["policy-unresolvable"]),
        ({"policy_service": InMemoryPolicyService({"PAY-7.4": False})}, {}, Verdict.ESCALATE,
         ["policy-not-current"]),
        ({}, {"policy_version": "PAY-7.3"}, Verdict.ESCALATE, ["policy-version-mismatch"]),
        ({"evidence": None}, {}, Verdict.ESCALATE, ["evidence-unresolved"]),
        ({"clock": lambda: NOW + timedelta(hours=24), "max_proof_age": timedelta(days=2)},
         {"valid_until": T0 + timedelta(days=2)}, Verdict.ESCALATE, ["evidence-stale"]),
        ({}, {"evidence_refs": ("evidence://policy/1/identity",)}, Verdict.ESCALATE,
         ["evidence-missing"]),
        ({"roles": set(), "policy_service": None}, {}, Verdict.REJECT,
         ["policy-unresolvable", "receiver-role-missing"]),
    ],
)
def test_missing_context_rejects_or_escalates_as_the_contract_says(
    options: dict[str, Any], fields: dict[str, Any], verdict: Verdict, expected: list[str]
) -> None:
    grant_until = {"valid_until": T0 + timedelta(days=3)} if "valid_until" in fields else {}
    doc = WORLD.signed(
        "policy-01",
        grant=WORLD.grant("policy-01", policy_version=fields.get("policy_version", "PAY-7.4"),
                          **grant_until),
        **fields,
    )
    decision = strict(WORLD.gate(**options)).receive(raw(doc))
    assert (decision.verdict, decision.step, codes(decision)) == (verdict, Step.CONTEXT, expected)
    assert decision.action == "ESCALATE"  # the contract's fail-closed action
    assert decision.sender == SENDER  # proofs passed before the context failed


def test_policy_service_failure_is_unmet_context() -> None:
    class Broken:
        def resolve(self, version: str) -> bool | None:
            raise RuntimeError("policy service down")

    decision = strict(WORLD.gate(policy_service=Broken())).receive(raw(WORLD.signed()))
    assert (decision.verdict, codes(decision)) == (Verdict.ESCALATE, ["policy-unresolvable"])
    assert "policy service down" in decision.reasons[0].message


def test_only_a_true_answer_is_a_current_policy() -> None:
    class Answers:
        def __init__(self, answer: object) -> None:
            self.answer = answer

        def resolve(self, version: str) -> Any:
            return self.answer

    expected = [(None, ["policy-unresolvable"]), (False, ["policy-not-current"]),
                ("yes", ["policy-not-current"]), (1, ["policy-not-current"]), (True, [])]
    for answer, reasons in expected:
        gate = WORLD.gate(policy_service=Answers(answer))
        assert codes(strict(gate).receive(raw(WORLD.signed()))) == reasons, answer


def test_evidence_without_observation_time_is_not_fresh() -> None:
    evidence = dict(ALL_EVIDENCE)
    uri = "evidence://policy/1/screening"
    evidence[uri] = attrs.evolve(evidence[uri], observed_at=None)
    decision = strict(WORLD.gate(evidence=InMemoryEvidenceResolver(evidence))).receive(
        raw(WORLD.signed()))
    assert codes(decision) == ["evidence-stale"]
    assert decision.reasons[0].json_path == "$.evidence_refs[1]"


@pytest.mark.parametrize(("ahead", "stale"), [
    (CLOCK_SKEW, False),
    (CLOCK_SKEW + timedelta(microseconds=1), True),
])
def test_evidence_observed_in_the_future_beyond_the_skew_is_stale(
        ahead: timedelta, stale: bool) -> None:
    evidence = dict(ALL_EVIDENCE)
    uri = "evidence://policy/1/screening"
    evidence[uri] = attrs.evolve(evidence[uri], observed_at=NOW + ahead)
    decision = strict(WORLD.gate(evidence=InMemoryEvidenceResolver(evidence))).receive(
        raw(WORLD.signed()))
    if stale:
        assert (decision.verdict, decision.step, codes(decision)) == (
            Verdict.ESCALATE, Step.CONTEXT, ["evidence-stale"])
        assert decision.reasons[0].json_path == "$.evidence_refs[1]"
    else:
        assert decision.verdict is Verdict.ACCEPT


def _nested(levels: int) -> dict[str, Any]:
    """A receipt whose deepest member sits ``levels`` objects down from the top."""
    doc = WORLD.signed()
    inner: dict[str, Any] = {}
    doc["deep"] = inner
    for _ in range(levels - 2):
        inner["a"] = inner = {}
    return doc


@pytest.mark.parametrize(("levels", "too_deep"), [(8, False), (9, True)])
@pytest.mark.parametrize("form", ["bytes", "parsed"])
def test_a_mapping_one_level_deeper_than_the_limit_is_too_deep_as_bytes_are(
        levels: int, too_deep: bool, form: str) -> None:
    doc = _nested(levels)
    assert raw(doc).count(b"{") >= levels  # the receipt itself nests less deeply
    gate = WORLD.gate(limits=JSONLimits(max_depth=8))
    decision = strict(gate).receive(raw(doc) if form == "bytes" else doc)
    assert decision.verdict is Verdict.REJECT
    assert decision.step is Step.PARSE
    if too_deep:
        assert codes(decision) == ["too-deep"]
    else:
        assert "too-deep" not in codes(decision)  # parsed; the schema refuses "deep"


# ------------------------------------------------------------- (4) evidence


def _pinned(case_id: str, *, wrong: bool = False) -> tuple[Any, ...]:
    refs = []
    for uri in CASES[case_id].evidence_refs:
        digest = ALL_EVIDENCE[uri].digest
        refs.append({"uri": uri, "digest": ("sha256:" + "0" * 64) if wrong else digest})
    return tuple(refs)


def test_pinned_digests_are_verified() -> None:
    good = strict(WORLD.gate()).receive(raw(WORLD.signed(evidence_refs=_pinned("policy-01"))))
    assert good.verdict is Verdict.ACCEPT
    bad = strict(WORLD.gate()).receive(raw(WORLD.signed(
        evidence_refs=_pinned("policy-01", wrong=True))))
    assert (bad.verdict, bad.step, codes(bad)) == (
        Verdict.REJECT, Step.EVIDENCE, ["evidence-digest-mismatch"] * 3)
    assert bad.reasons[0].json_path == "$.evidence_refs[0].digest"


def test_unresolvable_evidence_escalates() -> None:
    evidence = {k: v for k, v in ALL_EVIDENCE.items() if k != "evidence://policy/1/identity"}
    decision = strict(WORLD.gate(evidence=InMemoryEvidenceResolver(evidence))).receive(
        raw(WORLD.signed()))
    assert (decision.verdict, decision.step, codes(decision)) == (
        Verdict.ESCALATE, Step.EVIDENCE, ["evidence-unresolved"])


def test_a_resolver_that_raises_is_wrapped() -> None:
    class Flaky:
        def resolve(self, ref: Any) -> ResolvedEvidence:
            if ref.uri.endswith("screening"):
                return ALL_EVIDENCE[ref.uri]
            raise ConnectionError("reset by peer")

    decision = strict(WORLD.gate(evidence=Flaky())).receive(raw(WORLD.signed()))
    assert codes(decision) == ["evidence-unresolved", "evidence-unresolved"]
    assert "ConnectionError: reset by peer" in decision.reasons[0].message


def test_readback_catches_the_schema_valid_falsehood() -> None:
    # The essay's injected error: a stale policy reported as current, signed by the
    # sender itself, so every proof verifies.
    lie = WORLD.signed("policy-01", state={"policy_current": True},
                       mutate=lambda d: d.update(proposed_action="RELEASE"))
    believed = strict(WORLD.gate()).receive(raw(lie))
    assert (believed.verdict, believed.action) == (Verdict.ACCEPT, "RELEASE")
    caught = strict(WORLD.gate(readback=1.0)).receive(raw(lie))
    assert (caught.verdict, caught.step, codes(caught)) == (
        Verdict.REJECT, Step.EVIDENCE, ["readback-mismatch"])
    assert caught.action == "ESCALATE"
    assert caught.readback == "disagree"
    assert caught.reasons[0].json_path == "$.decision_state.policy_current"


def test_readback_without_claims() -> None:
    evidence = {uri: attrs.evolve(ev, claims=None) for uri, ev in ALL_EVIDENCE.items()}
    decision = strict(WORLD.gate(evidence=InMemoryEvidenceResolver(evidence),
                                 readback=1.0)).receive(raw(WORLD.signed()))
    assert (decision.verdict, decision.readback) == (Verdict.ACCEPT, "no-claims")


def test_readback_compares_booleans_strictly() -> None:
    evidence = dict(ALL_EVIDENCE)
    uri = "evidence://policy/1/policy"
    evidence[uri] = attrs.evolve(evidence[uri], claims={"policy_current": 0})
    decision = strict(WORLD.gate(evidence=InMemoryEvidenceResolver(evidence),
                                 readback=1.0)).receive(raw(WORLD.signed()))
    assert codes(decision) == ["readback-mismatch"]


def test_resolved_evidence_is_validated() -> None:
    with pytest.raises(TypeError, match="bytes"):
        ResolvedEvidence(content="text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="aware"):
        ResolvedEvidence(content=b"", observed_at=datetime(2026, 1, 1))
    with pytest.raises(TypeError, match="claims"):
        ResolvedEvidence(content=b"", claims={1: True})  # type: ignore[dict-item]
    with pytest.raises(EvidenceError, match="no evidence"):
        InMemoryEvidenceResolver({}).resolve(payment.PAYMENT_RELEASE and _ref("evidence://x"))


# ------------------------------------------------------------------- (2) replay


def test_replay_is_rejected_and_expires_with_the_receipt() -> None:
    store = MemoryReplayStore()
    until = T0 + timedelta(hours=1)
    assert store.first_seen("a", expires=until, now=T0)
    assert not store.first_seen("a", expires=until, now=T0)
    assert store.first_seen("b", expires=until, now=until + timedelta(seconds=1))
    assert len(store) == 1  # "a" was forgotten once expired
    gate = WORLD.gate(replay=store)
    doc = WORLD.signed()
    assert strict(gate).receive(raw(doc)).verdict is Verdict.ACCEPT
    again = strict(gate).receive(raw(doc))
    assert (again.verdict, again.step, codes(again)) == (Verdict.REJECT, Step.PROOFS, ["replayed"])


def test_a_full_replay_store_fails_closed() -> None:
    store = MemoryReplayStore(max_entries=1)
    gate = WORLD.gate(replay=store)
    assert strict(gate).receive(raw(WORLD.signed())).admitted
    full = strict(gate).receive(raw(WORLD.signed()))
    assert (full.verdict, codes(full)) == (Verdict.REJECT, ["replay-store-unavailable"])
    with pytest.raises(ReplayStoreError):
        store.first_seen("x", expires=T0 + timedelta(hours=1), now=T0)
    with pytest.raises(ValueError, match="max_entries"):
        MemoryReplayStore(max_entries=0)


def test_a_forgery_does_not_burn_a_receipt_id() -> None:
    gate = WORLD.gate()
    doc = WORLD.signed()
    forged = json.loads(json.dumps(doc))
    forged["authority"] = "DECIDE"
    assert codes(strict(gate).receive(raw(forged))) == ["bad-signature"]
    assert strict(gate).receive(raw(doc)).verdict is Verdict.ACCEPT


# ------------------------------------------------------------- unsafe (unsigned)


def test_unsafe_gate_still_checks_structure_time_audience_and_replay() -> None:
    gate = WORLD.unsafe_gate()
    ok = strict(gate).receive(raw(WORLD.unsigned("routine-02")))
    assert (ok.verdict, ok.action, ok.sender) == (Verdict.ACCEPT, "RELEASE", SENDER)
    replayed = strict(gate).receive(raw(WORLD.unsigned("routine-02") | {"id": ok.receipt_id}))
    assert codes(replayed) == ["replayed"]
    wrong = strict(gate).receive(raw(WORLD.unsigned(receiver="someone-else")))
    assert (wrong.step, codes(wrong)) == (Step.PROOFS, ["wrong-audience"])
    late = strict(gate).receive(raw(WORLD.unsigned(valid_until=NOW - timedelta(seconds=1))))
    assert (late.step, codes(late)) == (Step.PROOFS, ["receipt-expired"])
    bad = strict(gate).receive(raw(WORLD.unsigned() | {"authority": "MAYBE"}))
    assert (bad.step, codes(bad)) == (Step.PARSE, ["schema-invalid"])


def test_without_a_clock_reading_or_an_expiry_only_the_audience_is_checked() -> None:
    assert check_addressed(RECEIVER, NOW - timedelta(days=1), RECEIVER, None) is None
    assert check_addressed(RECEIVER, None, RECEIVER, NOW) is None
    with pytest.raises(ProofError) as info:
        check_addressed(RECEIVER, NOW - timedelta(seconds=1), RECEIVER, NOW)
    assert info.value.code == "receipt-expired"


@pytest.mark.parametrize("named", [["payment-release"], {"id": "payment-release"}])
def test_a_contract_named_by_a_list_or_object_is_no_contract(named: Any) -> None:
    decision = strict(WORLD.gate()).receive(raw(WORLD.signed() | {"contract": named}))
    assert (decision.verdict, decision.step, codes(decision)) == (
        Verdict.REJECT, Step.PARSE, ["no-contract"])
    assert decision.reasons[0].json_path == "$.contract"


def test_proofs_are_checked_before_the_typed_model_of_a_signed_receipt() -> None:
    """A schema-valid state the typed model refuses (an interval with lo > hi), signed by
    a key no one trusts: the gate refuses the proof at step (2) and never builds the
    receipt from an unverified document.
    """
    import worlds.receipts as pump

    receipt = Receipt.build(pump.PUMP, DecisionContent(pump.Step.STOP, pump.PumpState(
        pump.Mode.AUTO, 3, 80.5, Interval(0.1, 0.2), True)),
        payment.GOVERNANCE.stamp(case_id="pump-1", evidence_refs=["evidence://pump/1"]))
    doc = receipt.to_json()
    doc["decision_state"]["failure_probability"] = {"lo": 0.5, "hi": 0.2}
    signed = sign(doc, SigningKey.generate(), purpose="assertionMethod", created=T0)
    gate = Gate(identity=RECEIVER, trust=WORLD.keyring, registry=pump.PUMP, clock=lambda: NOW)
    decision = strict(gate).receive(raw(signed))
    assert (decision.verdict, decision.step, codes(decision)) == (
        Verdict.REJECT, Step.PROOFS, ["unknown-key"])


# ------------------------------------------------------------ never raises


def test_exceptions_in_a_rule_become_internal_errors() -> None:
    def boom(admitted: Admitted) -> Ruling:
        raise ZeroDivisionError("division by zero")

    decision = WORLD.gate().decide(raw(WORLD.signed()), rule=boom, receiver="custom")
    assert (decision.verdict, decision.step, codes(decision)) == (
        Verdict.REJECT, Step.POLICY, ["internal-error"])
    assert decision.action == "ESCALATE"
    assert decision.receiver == "custom"


def test_a_naive_clock_is_a_typed_bad_clock() -> None:
    decision = strict(WORLD.gate(clock=lambda: datetime(2026, 6, 1))).receive(
        raw(WORLD.signed()))
    assert (decision.step, codes(decision)) == (Step.PROOFS, ["bad-clock"])


def test_a_failing_log_turns_the_decision_into_a_rejection() -> None:
    class FullDisk:
        def append(self, decision: Decision, **_: Any) -> None:
            raise OSError("No space left on device")

    decision = strict(WORLD.gate(log=FullDisk())).receive(raw(WORLD.signed("routine-01")))
    assert (decision.verdict, decision.action) == (Verdict.REJECT, "ESCALATE")
    assert codes(decision) == ["log-unavailable"]


def test_non_json_objects_fail_closed() -> None:
    doc = WORLD.unsigned()
    doc["notes"] = {1, 2}
    decision = strict(WORLD.unsafe_gate()).receive(doc)
    assert (decision.verdict, decision.step, codes(decision)) == (
        Verdict.REJECT, Step.PARSE, ["invalid-json"])
    assert strict(WORLD.gate()).receive(42).reasons[0].code == "not-an-object"  # type: ignore[arg-type]




def test_readback_compares_numbers_by_value() -> None:
    """Decisive numbers read back equal when their values are (the message's parsed int
    and the source's are different objects), and a different number is a mismatch.
    """
    import enum

    from handoffs.contracts import (
        Contract,
        GovernanceService,
        GrantIssuer,
        LossMatrix,
        Registry,
        Sender,
        decision_field,
    )
    from handoffs.contracts.policy import Is, Policy, Rule

    class Refund(enum.Enum):
        APPROVE = "APPROVE"
        ESCALATE = "ESCALATE"

    @attrs.frozen
    class RefundState:
        verified: bool = decision_field("The customer's identity was verified.")
        amount_cents: int = decision_field("The refund's amount.", minimum=0,
                                           maximum=10_000_000)

    a, e = Refund.APPROVE, Refund.ESCALATE
    refund = Contract(
        name="refund", version="1.0.0", description="Approve a refund or escalate it.",
        actions=Refund, state=RefundState, fail_closed_action=e,
        policy=Policy(rules=[Rule("unverified", Is("verified", False), e)], default=a),
        loss=LossMatrix({(a, a): 0, (e, e): 0, (a, e): 10, (e, a): 1}),
        counterfactual_trigger="Recompute when the identity check changes.",
    )
    agent, service = SigningKey.generate(), SigningKey.generate()
    sender = Sender(
        contract=refund, key=agent,
        governance=GovernanceService(sender="support-agent", receiver="refund-officer",
                                     policy_version="REF-1", valid_for=timedelta(hours=1)),
        grants=GrantIssuer(key=service, issuer="policy-service"), clock=lambda: T0)
    message = sender.sign({"proposed_action": "APPROVE", "uncertainty": "RESOLVED",
                           "decision_state": {"verified": True, "amount_cents": 1_250_000}},
                          case_id="refund-1042", evidence_refs=["crm://refunds/1042"])
    since = T0 - timedelta(days=1)
    trust = (KeyRing()
             .enrol(agent.public_key_multibase, controller="support-agent", not_before=since)
             .enrol(service.public_key_multibase, controller="policy-service",
                    roles=["policy-service"], purposes=["capabilityDelegation"],
                    not_before=since))

    def decide(claimed: int) -> Any:
        source = InMemoryEvidenceResolver({"crm://refunds/1042": ResolvedEvidence(
            content=b"refund 1042", claims={"amount_cents": claimed})})
        gate = Gate(identity="refund-officer", trust=trust, registry=Registry.of(refund),
                    evidence=source, readback=1.0, clock=lambda: T0)
        return StrictContractReceiver(gate).receive(message)

    agreed = decide(int("1250000"))
    assert (agreed.verdict, agreed.readback, codes(agreed)) == (Verdict.ACCEPT, "agree", [])
    disagreed = decide(1_250_001)
    assert (disagreed.verdict, codes(disagreed)) == (Verdict.REJECT, ["readback-mismatch"])
    assert disagreed.reasons[0].json_path == "$.decision_state.amount_cents"
