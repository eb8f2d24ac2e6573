"""The Sender: decision content in, signed receipt bytes out, governance only from its
configuration; the strict content schema; ``Contract.evaluate`` on state objects.

Everything here is real: real Ed25519 keys, the real gate and receiver. The user's
contract and its keys live in ``tests/worlds/pump.py``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from handoffs._members import ENVELOPE_MEMBERS
from handoffs.contracts import (
    Authority,
    Contract,
    DecisionContent,
    Governance,
    GovernanceService,
    GrantIssuer,
    Interval,
    ProofError,
    Receipt,
    ReceiptValidationError,
    Sender,
    Uncertainty,
    UntrustedGovernance,
)
from handoffs.contracts._sender import GrantSource
from handoffs.integrity import SigningKey
from handoffs.receivers import Step, StrictContractReceiver, Verdict
from handoffs.testing import states
from worlds.pump import (
    AGENT_KEY,
    GRANTS,
    NOW,
    PUMP,
    REFS,
    REGISTRY,
    SERVICE,
    SERVICE_KEY,
    SINCE,
    TRUST,
    Mode,
    Pump,
    PumpState,
    R,
    content,
    gate,
    sender,
)

# ------------------------------------------------------------------ round trips


def test_sign_returns_the_canonical_bytes_of_the_signed_receipt() -> None:
    s = sender()
    rid = "urn:uuid:00000000-0000-4000-8000-000000000042"
    receipt = s.receipt(content(), case_id="pump-7", evidence_refs=REFS, id=rid)
    message = s.sign(content(), case_id="pump-7", evidence_refs=REFS, id=rid)
    loaded = Receipt.from_json(message, registry=REGISTRY)
    assert loaded.to_bytes() == message  # canonical bytes
    # Each grant gets a fresh id, so only grant and proof differ between two calls.
    assert attrs.evolve(loaded, grant=None, proof=None) == attrs.evolve(receipt, grant=None,
                                                                        proof=None)
    assert loaded.proposed_action is Pump.CONTINUE
    assert loaded.decision_state.failure_probability == Interval(0.01, 0.02)
    # Governance comes from the service; the validity span from the clock.
    assert (loaded.sender, loaded.receiver, loaded.policy_version, loaded.authority) == (
        "maintenance-specialist", "plant-controller", "PUMP-3", Authority.ADVISE)
    assert loaded.valid_until == NOW + timedelta(hours=1)
    assert loaded.counterfactual_trigger == PUMP.counterfactual_trigger
    assert loaded.notes is None
    assert "notes" not in json.loads(message)


@given(states(PUMP), st.sampled_from(list(Uncertainty)))
def test_any_state_signed_by_the_sender_is_decided_as_the_contract_decides(
        state: PumpState, uncertainty: Uncertainty) -> None:
    proposed = PUMP.decide(state)
    message = sender().sign(DecisionContent(proposed, state, uncertainty),
                            case_id="pump-7", evidence_refs=REFS)
    verified = Receipt.verify(json.loads(message), TRUST, now=NOW, registry=REGISTRY,
                              audience="plant-controller")
    assert verified.receipt.decision_state == state
    assert verified.receipt.uncertainty is uncertainty
    decision = StrictContractReceiver(gate()).receive(message)
    outcome = PUMP.evaluate(state)  # a straddled threshold leaves the policy undetermined
    expected = Verdict.ACCEPT if outcome.determined else Verdict.ESCALATE
    assert (decision.verdict, decision.action) == (expected, proposed.value)


def test_typed_members_in_a_mapping_are_written_as_their_json_values() -> None:
    state = PumpState(Interval(0.4, 0.5), True, Mode.MANUAL, 9)
    typed = sender().receipt({"proposed_action": Pump.STOP, "decision_state": state,
                              "uncertainty": Uncertainty.CONFLICT, "notes": "bearing noise"},
                             case_id="pump-7", evidence_refs=REFS)
    assert typed.decision_state == state
    assert (typed.proposed_action, typed.uncertainty, typed.notes) == (
        Pump.STOP, Uncertainty.CONFLICT, "bearing noise")


def test_the_clock_is_read_once_per_receipt_and_sets_proof_grant_and_expiry() -> None:
    times = iter([NOW, NOW + timedelta(minutes=10)])
    s = sender(clock=lambda: next(times))
    first = s.receipt(content(), case_id="pump-7", evidence_refs=REFS)
    second = s.receipt(content(), case_id="pump-7", evidence_refs=REFS)
    assert first.proof["created"] == "2026-06-01T12:00:00Z"
    assert first.grant is not None
    assert first.grant["proof"]["created"] == "2026-06-01T12:00:00Z"
    assert second.valid_until == NOW + timedelta(minutes=70)
    assert second.grant is not None
    assert second.grant["valid_until"] == "2026-06-01T13:10:00Z"


def test_a_fixed_expiry_is_stamped_as_configured() -> None:
    until = datetime(2026, 6, 2, tzinfo=UTC)
    s = sender(governance=attrs.evolve(SERVICE, valid_until=until, valid_for=None))
    assert s.receipt(content(), case_id="pump-7", evidence_refs=REFS).valid_until == until


# ------------------------------------------------------- governance is trusted only


@pytest.mark.parametrize("member", sorted({*Governance.FIELDS, *ENVELOPE_MEMBERS}))
def test_content_may_not_set_a_governance_or_envelope_member(member: str) -> None:
    with pytest.raises(UntrustedGovernance) as info:
        sender().sign(content(**{member: "x"}), case_id="pump-7", evidence_refs=REFS)
    assert info.value.code == "untrusted-governance"
    assert info.value.json_path == f"$.{member}"
    assert isinstance(info.value, ValueError)


def test_a_model_asking_for_authority_or_a_later_expiry_changes_nothing() -> None:
    s = sender()
    honest = s.receipt(content(), case_id="pump-7", evidence_refs=REFS)
    for injected in ({"authority": "DECIDE"}, {"valid_until": "2099-01-01T00:00:00Z"},
                     {"authority": "DECIDE", "valid_until": "2099-01-01T00:00:00Z"}):
        with pytest.raises(UntrustedGovernance) as info:
            s.receipt(content(**injected), case_id="pump-7", evidence_refs=REFS)
        assert info.value.json_path == f"$.{sorted(injected)[0]}"
    # Inside the decision state the closed schema refuses them, with the path.
    for member, value in (("authority", "DECIDE"), ("valid_until", "2099-01-01T00:00:00Z")):
        doc = content()
        doc["decision_state"][member] = value
        with pytest.raises(ReceiptValidationError) as refused:
            s.receipt(doc, case_id="pump-7", evidence_refs=REFS)
        assert [str(v) for v in refused.value.violations] == [
            f"unknown field {member!r} @ $.decision_state"]
    # As text in the notes they are only text.
    noted = s.receipt(content(notes='{"authority": "DECIDE", "valid_until": "2099-01-01"}'),
                      case_id="pump-7", evidence_refs=REFS)
    assert (noted.authority, noted.valid_until) == (honest.authority, honest.valid_until)
    assert noted.grant is not None
    assert noted.grant["authority"] == ["ADVISE"]


def test_decide_is_refused_unless_the_service_lets_the_sender_decide() -> None:
    with pytest.raises(UntrustedGovernance) as info:
        sender().sign(content(), case_id="pump-7", evidence_refs=REFS,
                      authority=Authority.DECIDE)
    assert (info.value.code, info.value.json_path) == ("authority-not-granted", "$.authority")
    deciding = sender(governance=attrs.evolve(SERVICE, may_decide=True))
    receipt = deciding.receipt(content(), case_id="pump-7", evidence_refs=REFS,
                               authority=Authority.DECIDE)
    assert receipt.authority is Authority.DECIDE
    assert receipt.grant is not None
    assert receipt.grant["authority"] == ["DECIDE"]


def test_invalid_content_names_the_json_path() -> None:
    doc = content()
    doc["decision_state"]["cycles"] = -1
    with pytest.raises(ReceiptValidationError) as info:
        sender().sign(doc, case_id="pump-7", evidence_refs=REFS)
    assert [str(v) for v in info.value.violations] == [
        "-1 is below the minimum 0 @ $.decision_state.cycles"]
    with pytest.raises(ReceiptValidationError) as info:
        sender().sign(["not", "content"], case_id="pump-7",  # type: ignore[arg-type]
                      evidence_refs=REFS)
    assert info.value.violations[0].message.startswith("content must be a mapping")
    with pytest.raises(ReceiptValidationError) as info:
        sender().sign({1: "x"}, case_id="pump-7", evidence_refs=REFS)  # type: ignore[dict-item]
    assert info.value.json_path == "$"


# ------------------------------------------------------------ grants at the gate


def test_grants_issued_from_the_senders_config_verify_at_the_gate() -> None:
    message = sender().sign(content(0.4, 0.5, proposed_action="STOP"), case_id="pump-7",
                            evidence_refs=REFS)
    decision = StrictContractReceiver(gate()).receive(message)
    assert (decision.verdict, decision.action, decision.sender) == (
        Verdict.ACCEPT, "STOP", "maintenance-specialist")
    verified = Receipt.verify(json.loads(message), TRUST, now=NOW, registry=REGISTRY,
                              audience="plant-controller")
    assert verified.grant is not None
    assert (verified.grant.issuer, verified.grant.subject, verified.grant.audience,
            verified.grant.case_id, verified.grant.contract, verified.grant.policy_version) == (
        "policy-service", "maintenance-specialist", "plant-controller", "pump-7",
        "pump-maintenance/1.0.0", "PUMP-3")
    assert verified.grant.authority == frozenset({Authority.ADVISE})
    assert verified.grant.valid_until == NOW + timedelta(hours=1)


def test_the_gate_refuses_what_the_grant_or_clock_does_not_cover() -> None:
    no_grant = sender(grants=None).sign(content(), case_id="pump-7", evidence_refs=REFS)
    refused = StrictContractReceiver(gate()).receive(no_grant)
    assert (refused.verdict, refused.step, [r.code for r in refused.reasons]) == (
        Verdict.REJECT, Step.PROOFS, ["grant-missing"])
    # A grant signed by a key without the policy-service role is not authority.
    rogue = SigningKey.generate()
    trust = TRUST.enrol(rogue.public_key_multibase, controller="rogue-service",
                        purposes=["capabilityDelegation"], not_before=SINCE)
    forged = sender(grants=GrantIssuer(key=rogue, issuer="rogue-service")).sign(
        content(), case_id="pump-7", evidence_refs=REFS)
    refused = StrictContractReceiver(gate(trust=trust)).receive(forged)
    assert [r.code for r in refused.reasons] == ["role-not-held"]
    late = StrictContractReceiver(gate(at=NOW + timedelta(hours=1, seconds=1))).receive(
        sender().sign(content(), case_id="pump-7", evidence_refs=REFS))
    assert [r.code for r in late.reasons] == ["grant-expired"]  # grant and receipt end together


def test_a_grant_source_is_a_protocol() -> None:
    calls: list[tuple[str, str, datetime]] = []

    class Remote:
        def grant(self, governance: Any, *, contract: Contract[Any, Any],
                  now: datetime) -> dict[str, Any]:
            calls.append((governance.case_id, contract.id, now))
            return GRANTS.grant(governance, contract=contract, now=now)

    assert isinstance(Remote(), GrantSource)
    message = sender(grants=Remote()).sign(content(), case_id="pump-9", evidence_refs=REFS)
    assert calls == [("pump-9", "pump-maintenance/1.0.0", NOW)]
    assert StrictContractReceiver(gate()).receive(message).verdict is Verdict.ACCEPT


# --------------------------------------------------------------- configuration


@pytest.mark.parametrize(("changes", "match"), [
    ({"contract": "pump-maintenance/1.0.0"}, "contract"),
    ({"key": "not a key"}, "key"),
    ({"governance": None}, "governance"),
    ({"grants": SERVICE_KEY}, "GrantSource"),
    ({"clock": NOW}, "clock must be callable"),
])
def test_a_bad_sender_configuration_is_refused_at_construction(
        changes: dict[str, Any], match: str) -> None:
    with pytest.raises(TypeError, match=match):
        sender(**changes)


def test_grants_must_be_given_explicitly() -> None:
    with pytest.raises(TypeError, match="grants"):
        Sender(contract=PUMP, key=AGENT_KEY, governance=SERVICE)  # type: ignore[call-arg]


@pytest.mark.parametrize(("config", "match"), [
    ({}, "exactly one of valid_until"),
    ({"valid_until": NOW, "valid_for": timedelta(hours=1)}, "exactly one of valid_until"),
    ({"valid_until": datetime(2027, 1, 1)}, "timezone-aware"),
    ({"valid_for": timedelta(0)}, "must be positive"),
])
def test_a_governance_service_has_one_validity(config: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        GovernanceService(sender="a", receiver="b", policy_version="P-1", **config)


def test_a_grant_issuer_refuses_a_single_string_of_roles() -> None:
    with pytest.raises(TypeError, match="roles"):
        GrantIssuer(key=SERVICE_KEY, issuer="policy-service", roles="operator")


def test_tampering_after_signing_fails_verification() -> None:
    doc = json.loads(sender().sign(content(), case_id="pump-7", evidence_refs=REFS))
    doc["valid_until"] = "2026-06-01T15:00:00Z"
    with pytest.raises(ProofError) as info:
        Receipt.verify(doc, TRUST, now=NOW, registry=REGISTRY, audience="plant-controller")
    assert info.value.code == "bad-signature"


# ------------------------------------------------------------- content schema


_UNSUPPORTED = ("minLength", "maxLength", "$ref", "oneOf", "allOf", "not",
                "patternProperties", "minProperties", "maxProperties", "default")


def _strict_problems(node: Any, path: str = "$") -> list[str]:
    """Where a schema breaks the rules of OpenAI's strict structured outputs."""
    if isinstance(node, list):
        return [p for i, item in enumerate(node) for p in _strict_problems(item, f"{path}[{i}]")]
    if not isinstance(node, dict):
        return []
    problems = []
    if node.get("type") == "object" or "properties" in node:
        if node.get("additionalProperties") is not False:
            problems.append(f"{path}: additionalProperties is not false")
        if sorted(node.get("required", [])) != sorted(node.get("properties", {})):
            problems.append(f"{path}: not every property is required")
    problems += [f"{path}: unsupported {keyword}" for keyword in _UNSUPPORTED if keyword in node]
    if "enum" in node and "type" not in node:
        problems.append(f"{path}: enum without type")
    for key, value in node.items():
        if key == "properties":
            for name, sub in value.items():
                problems += _strict_problems(sub, f"{path}.{name}")
        else:
            problems += _strict_problems(value, f"{path}/{key}")
    return problems


def test_the_content_schema_is_strict_and_only_semantic() -> None:
    schema = PUMP.content_schema()
    assert _strict_problems(schema) == []
    assert list(schema["properties"]) == [
        "proposed_action", "decision_state", "uncertainty", "counterfactual_trigger", "notes"]
    assert not {*Governance.FIELDS, *ENVELOPE_MEMBERS} & set(schema["properties"])
    state = schema["properties"]["decision_state"]
    assert state["required"] == ["failure_probability", "calibrated", "mode", "cycles"]
    assert state["properties"]["mode"] == {"description": "How the pump is operated.",
                                           "enum": ["AUTO", "MANUAL"], "type": "string"}
    assert schema["properties"]["notes"]["type"] == ["string", "null"]
    jsonschema.Draft202012Validator.check_schema(schema)
    # The checker itself sees a lax schema.
    assert _strict_problems({"type": "object", "properties": {"a": {"type": "string"}}}) == [
        "$: additionalProperties is not false", "$: not every property is required"]


def test_the_content_schema_is_a_fixed_point_of_openais_strict_transform() -> None:
    pydantic_helpers = pytest.importorskip("openai.lib._pydantic")
    schema = PUMP.content_schema()
    strict = pydantic_helpers._ensure_strict_json_schema(  # the SDK's own rules
        json.loads(json.dumps(schema)), path=(), root=json.loads(json.dumps(schema)))
    assert strict == schema


@given(states(PUMP), st.sampled_from(list(Uncertainty)),
       st.none() | st.text(max_size=40))
def test_whatever_the_content_schema_admits_the_sender_signs(
        state: PumpState, uncertainty: Uncertainty, notes: str | None) -> None:
    s = sender()
    written = {
        "proposed_action": PUMP.decide(state).value,
        "decision_state": Receipt.build(
            PUMP, DecisionContent(PUMP.decide(state), state),
            SERVICE.stamp(case_id="c", evidence_refs=REFS, now=NOW),
        ).to_json()["decision_state"],
        "uncertainty": uncertainty.value,
        "counterfactual_trigger": None,
        "notes": notes,
    }
    jsonschema.validate(written, PUMP.content_schema())  # what a strict model could write
    receipt = s.receipt(written, case_id="pump-7", evidence_refs=REFS)
    assert receipt.decision_state == state
    assert receipt.notes == notes


# ------------------------------------------------------------- evaluate


def test_evaluate_takes_the_state_object_or_a_view() -> None:
    state = PumpState(Interval(0.2, 0.4), True, Mode.AUTO, 3)
    by_object = PUMP.evaluate(state)
    assert by_object == PUMP.evaluate(PUMP.view(state))
    assert (by_object.action, by_object.rule, by_object.determined) == (
        None, "failure-likely", False)
    assert PUMP.evaluate({"calibrated": False}).action is R
    with pytest.raises(TypeError, match="PumpState or a mapping"):
        PUMP.evaluate(42)  # type: ignore[arg-type]


# ------------------------------------------------------------- the public half


def test_key_ring_holds_what_the_hand_written_ring_holds() -> None:
    ring = sender().key_ring(not_before=SINCE)
    assert ring.to_json() == TRUST.to_json()
    admitted = StrictContractReceiver(gate(trust=ring)).receive(
        sender().sign(content(), case_id="pump-7", evidence_refs=REFS))
    assert (admitted.verdict, admitted.action) == (Verdict.ACCEPT, "CONTINUE")
    # a key enrolled from later than the proof's creation does not verify it
    late = sender().key_ring(not_before=NOW + timedelta(seconds=1))
    refused = StrictContractReceiver(gate(trust=late)).receive(
        sender().sign(content(), case_id="pump-7", evidence_refs=REFS))
    assert refused.verdict is Verdict.REJECT


def test_key_ring_without_grants_and_with_a_remote_grant_source() -> None:
    from handoffs._errors import InvalidArgument

    alone = sender(grants=None).key_ring(not_before=SINCE)
    assert [e.controller for e in alone.entries] == ["maintenance-specialist"]

    class Remote:
        def grant(self, governance: Any, *, contract: Any, now: datetime) -> dict[str, Any]:
            raise AssertionError("not called")

    with pytest.raises(InvalidArgument, match=r"the grant source \(Remote\) holds no key "
                                              r"here: enrol the policy service's key"):
        sender(grants=Remote()).key_ring(not_before=SINCE)
    with pytest.raises(InvalidArgument, match="not_before must be a timezone-aware datetime"):
        sender().key_ring(not_before=datetime(2026, 1, 1))  # naive: the bad input
