"""Google ADK: evidence agent → case owner through the gate, in ADK's own ``LlmAgent``,
``SequentialAgent``, ``Runner`` and ``InMemorySessionService``, run with ``run_async``,
``run`` (sync) and SSE streaming; the only stand-in is the model (a ``BaseLlm``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("google.adk")


from adapter_world import (
    EXPIRED,
    OVERRULED_CASE,
    OVERRULED_PROPOSAL,
    VALID_UNTIL,
    Replayer,
    World,
    case_ref,
    content_for,
    make_sender,
    overruled_content,
    reference_action,
    tamper,
    with_governance,
)
from handoffs.adapters.google_adk import (
    BRIEF_KEY,
    RECEIPT_KEY,
    REFUSAL_KEY,
)
from handoffs.contracts import Sender
from handoffs.receivers import StrictContractReceiver
from worlds.google_adk_agents import (
    MODES,
    Run,
    brief_of,
    evidence_agent,
    impostor,
    notifier,
    owner_agent,
    requests_of,
    sequence,
)


@pytest.mark.parametrize("mode", MODES)
def test_an_admitted_receipt_hands_the_owner_its_brief(
        signer: Sender[Any, Any], receiver: StrictContractReceiver, mode: str) -> None:
    sent: list[bytes] = []
    evidence = evidence_agent(content_for("conflict-02"), signer=signer,
                              transport=lambda message: sent.append(message) or message)
    owner = owner_agent(receiver)
    run = Run(sequence(evidence, owner, notifier()), "conflict-02", mode=mode)
    assert run.said("case_owner") == [reference_action("conflict-02")] == ["ESCALATE"]
    assert run.said("notifier") == ["payment team notified"]
    if mode == "stream":
        assert "".join(run.partial("case_owner")) == "ESCALATE"
    (request,) = requests_of(owner)
    assert "proof" not in str(request.config.system_instruction)
    assert "grant" not in str(request.config.system_instruction)
    brief = brief_of(request)
    assert (brief["handoff"], brief["refused_by"]) == ("accepted", None)
    assert brief["decision"]["verdict"] == "ACCEPT"
    assert brief["decision"]["receiver"] == receiver.name
    assert brief["receipt"]["contract"] == signer.contract.id
    assert brief["receipt"]["id"] == brief["decision"]["receipt_id"]
    assert brief["receipt"]["digest"] == "sha256:" + hashlib.sha256(sent[0]).hexdigest()
    content = brief["content"]
    assert (content["case_id"], content["authority"]) == ("conflict-02", "ADVISE")
    assert content["decision_state"] == content_for("conflict-02")["decision_state"]
    assert run.state[RECEIPT_KEY] is None  # consumed by the gate
    assert json.loads(run.state[BRIEF_KEY]) == brief


def test_the_model_is_offered_the_strict_content_schema(signer: Sender[Any, Any],
                                                        receiver: StrictContractReceiver) -> None:
    evidence = evidence_agent(content_for("routine-01"), signer=signer)
    Run(sequence(evidence, owner_agent(receiver)), "routine-01")
    (request,) = requests_of(evidence)
    (tool,) = request.config.tools or []
    (declaration,) = tool.function_declarations or []
    assert declaration.name == "hand_off"
    schema = declaration.parameters_json_schema
    assert isinstance(schema, dict)
    assert schema["properties"] == signer.contract.content_schema()["properties"]
    assert not {"grant", "proof", "authority"} & set(schema["properties"])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("attack", "code"), [
    ("tampered", "bad-signature"),
    ("replayed", "replayed"),
    ("wrong-audience", "wrong-audience"),
    ("expired", "receipt-expired"),
    ("impostor-key", "unknown-key"),
])
def test_a_refusal_skips_the_owner_escalates_and_halts_the_pipeline(
        *, world: World, signer: Sender[Any, Any],
        make_receiver: Callable[..., StrictContractReceiver], replayer: Replayer,
        attack: str, code: str, mode: str) -> None:
    receiver = make_receiver(at=EXPIRED) if attack == "expired" else make_receiver()
    transport: Callable[[bytes], bytes] | None = None
    if attack == "tampered":
        transport = tamper
    elif attack == "replayed":
        transport = replayer
        first = Run(sequence(evidence_agent(content_for("routine-01"), signer=signer,
                                            transport=replayer), owner_agent(receiver)),
                    "routine-01")
        assert first.said("case_owner") == ["RELEASE"]
    elif attack == "wrong-audience":
        signer = make_sender(world, receiver="case-owner-2")
    elif attack == "impostor-key":
        signer = impostor(world)
    owner, after = owner_agent(receiver), notifier()
    run = Run(sequence(evidence_agent(content_for("routine-01"), signer=signer,
                                      transport=transport), owner, after),
              "routine-01", mode=mode)
    (refusal_text,) = run.said("case_owner")
    assert refusal_text.startswith(f"handoff refused by the gate: {code} @ ")
    escalations = [e for e in run.events if e.author == "case_owner" and e.actions.escalate]
    assert len(escalations) == 1
    refusal = run.state[REFUSAL_KEY]
    assert refusal["agent"] == "case_owner"
    assert refusal["decision"]["reasons"][0]["code"] == code
    assert refusal["decision"]["action"] == "ESCALATE"
    assert requests_of(owner) == []  # the case owner's model never ran
    assert requests_of(after) == []  # nor did anything after it
    assert run.said("notifier") == ["skipped: the handoff to case_owner was refused"]


def test_without_the_plugin_adk_runs_on_after_a_refusal(
        signer: Sender[Any, Any], receiver: StrictContractReceiver) -> None:
    """The framework behaviour :class:`HaltOnRefusal` exists for: SequentialAgent ignores
    escalate (fails if ADK starts honouring it, and the plugin can go)."""
    after = notifier()
    run = Run(sequence(evidence_agent(content_for("routine-01"), signer=signer,
                                      transport=tamper), owner_agent(receiver), after),
              "routine-01", halt=False)
    assert run.said("case_owner")[0].startswith("handoff refused by the gate: bad-signature")
    assert run.said("notifier") == ["payment team notified"]


@pytest.mark.parametrize("mode", MODES)
def test_model_written_governance_is_sent_back_and_corrected(
        signer: Sender[Any, Any], receiver: StrictContractReceiver, mode: str) -> None:
    honest = content_for("routine-01")
    evidence, owner = evidence_agent(with_governance(honest), honest, signer=signer), \
        owner_agent(receiver)
    run = Run(sequence(evidence, owner), "routine-01", mode=mode)
    assert run.said("case_owner") == ["RELEASE"]
    _, second = requests_of(evidence)
    (answer,) = [part.function_response for content in second.contents
                 for part in content.parts or () if part.function_response]
    assert answer.response is not None
    assert answer.response["handoff"] == "refused"
    assert answer.response["reason"].startswith(
        "handoff refused by the sender: untrusted-governance @ $.authority")
    brief = brief_of(requests_of(owner)[0])["content"]
    assert (brief["authority"], brief["valid_until"]) == (
        "ADVISE", VALID_UNTIL.strftime("%Y-%m-%dT%H:%M:%SZ"))


def test_a_sender_that_never_signs_reaches_no_owner(
        signer: Sender[Any, Any], receiver: StrictContractReceiver) -> None:
    bad = {**content_for("identity-01"), "proposed_action": "PAY_TWICE"}
    owner, after = owner_agent(receiver), notifier()
    run = Run(sequence(evidence_agent(bad, "I cannot hand this case on.", signer=signer),
                       owner, after), "identity-01")
    (refusal_text,) = run.said("case_owner")
    assert refusal_text.startswith("handoff refused by the gate: no-receipt")
    assert requests_of(owner) == requests_of(after) == []


@pytest.mark.parametrize("mode", ["async", "stream"])
def test_a_transfer_to_agent_handoff(signer: Sender[Any, Any],
                                     make_receiver: Callable[..., StrictContractReceiver],
                                     mode: str) -> None:
    owner = owner_agent(make_receiver())
    root = evidence_agent(content_for("value-01"), signer=signer, to="case_owner",
                          sub_agents=[owner])
    run = Run(root, "value-01", mode=mode)
    assert run.said("case_owner") == [reference_action("value-01")]
    refused_owner = owner_agent(make_receiver(at=EXPIRED))
    root = evidence_agent(content_for("value-01"), signer=signer, to="case_owner",
                          sub_agents=[refused_owner])
    refused = Run(root, "value-01", mode=mode)
    assert refused.said("case_owner")[0].startswith("handoff refused by the gate: "
                                                    "receipt-expired")
    assert requests_of(refused_owner) == []


def test_two_handoffs_in_one_run(signer: Sender[Any, Any],
                                 receiver: StrictContractReceiver) -> None:
    first_owner, second_owner = owner_agent(receiver), owner_agent(receiver, "second_owner")
    run = Run(sequence(
        evidence_agent(content_for("routine-01"), signer=signer),
        first_owner,
        evidence_agent(content_for("identity-01"), signer=signer, name="second_evidence",
                       case=lambda _state: case_ref("identity-01")),
        second_owner), "routine-01")
    assert run.said("case_owner") == ["RELEASE"]
    assert run.said("second_owner") == ["HOLD"]
    first, second = brief_of(requests_of(first_owner)[0]), brief_of(requests_of(second_owner)[0])
    assert first["receipt"]["id"] != second["receipt"]["id"]
    assert (first["content"]["case_id"], second["content"]["case_id"]) == (
        "routine-01", "identity-01")


def test_non_ascii_content_crosses_intact(signer: Sender[Any, Any],
                                          receiver: StrictContractReceiver) -> None:
    content = {**content_for("routine-01"), "notes": "Zahlung geprüft — Kundin bestätigt ✓"}
    owner = owner_agent(receiver)
    run = Run(sequence(evidence_agent(content, signer=signer), owner), "routine-01",
              mode="stream")
    assert run.said("case_owner") == ["RELEASE"]
    assert brief_of(requests_of(owner)[0])["content"]["notes"] == content["notes"]


def test_a_session_without_a_case_signs_nothing(signer: Sender[Any, Any],
                                                receiver: StrictContractReceiver) -> None:
    evidence, owner = evidence_agent(content_for("routine-01"), "No case, no handoff.",
                                     signer=signer), owner_agent(receiver)
    run = Run(sequence(evidence, owner), "routine-01", state={})
    _, second = requests_of(evidence)
    (answer,) = [part.function_response for content in second.contents
                 for part in content.parts or () if part.function_response]
    assert answer.response is not None
    assert answer.response["decision"]["receiver"] == "sender"
    assert "names no case" in answer.response["reason"]
    assert answer.response["decision"]["reasons"][0]["code"] == "no-case"
    assert run.said("case_owner")[0].startswith("handoff refused by the gate: no-receipt")
    assert requests_of(owner) == []


@pytest.mark.parametrize("mode", ["refuse", "continue"])
def test_the_ruling_not_the_proposal_reaches_the_outcome(
        signer: Sender[Any, Any], receiver: StrictContractReceiver, mode: str) -> None:
    """The gate admits the receipt and decides HOLD, not the proposed RELEASE; the
    stand-in model answers the proposal it reads. By default the owner is skipped with
    decided-otherwise (and the pipeline halts); continued, it reads the ruling."""
    owner, after = owner_agent(receiver, on_overruled=mode), notifier()
    run = Run(sequence(evidence_agent(overruled_content(), signer=signer), owner, after),
              OVERRULED_CASE)
    (said,) = run.said("case_owner")
    assert said != OVERRULED_PROPOSAL
    if mode == "refuse":
        assert said.startswith("handoff refused by the gate: decided-otherwise")
        assert run.state[REFUSAL_KEY]["decision"]["reasons"][0]["code"] == "decided-otherwise"
        assert requests_of(owner) == requests_of(after) == []
    else:
        assert said == "HOLD"
        assert brief_of(requests_of(owner)[0])["ruling"]["overruled"] is True
