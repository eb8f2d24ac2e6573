"""Pydantic AI: a programmatic hand-off (evidence agent → case owner) through the gate,
with Pydantic AI's FunctionModel standing in for the remote model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    SystemPromptPart,
)
from pydantic_ai.models.function import FunctionModel

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
    tamper,
    with_governance,
)
from handoffs.adapters._handover import content_schema
from handoffs.adapters.pydantic_ai import (
    FULL_HISTORY,
    RECEIPT_ONLY,
    HandoffRefusal,
    HandoffRefused,
    ReceiptGate,
    content_output,
)
from handoffs.contracts import Sender
from handoffs.receivers import StrictContractReceiver
from worlds.pydantic_ai_topology import (
    OWNER_INSTRUCTIONS,
    OWNER_PROMPT,
    Owner,
    Topology,
    handover_of,
)


def test_a_genuine_receipt_is_gated_and_delivered(signer: Sender[Any, Any],
                                                  receiver: StrictContractReceiver) -> None:
    topology = Topology(content_for("conflict-02"), signer=signer, receiver=receiver)
    decided = topology.run("conflict-02")
    assert decided.output == "ESCALATE"
    handover = handover_of(topology.owner_model.seen[0][-1])
    receipt = handover["content"]
    assert (receipt["case_id"], receipt["authority"]) == ("conflict-02", "ADVISE")
    # The model is shown the content and a reference, not the grant and proof; the
    # run's history keeps the signed receipt.
    assert "proof" not in receipt
    assert handover["receipt"]["digest"].startswith("sha256:")
    kept = decided.all_messages()[-2].parts[-1].content
    assert json.loads(kept)["proof"]["proofPurpose"] == "assertionMethod"


def test_the_model_sees_only_the_strict_content_schema(signer: Sender[Any, Any],
                                                       receiver: StrictContractReceiver) -> None:
    topology = Topology(content_for("routine-01"), signer=signer, receiver=receiver)
    topology.run("routine-01")
    (tool,) = topology.evidence_model.tools
    assert (tool.name, tool.strict) == ("hand_off", True)
    assert tool.parameters_json_schema["properties"] == content_schema(
        signer.contract)["properties"]
    assert not {"grant", "proof", "authority"} & set(tool.parameters_json_schema["properties"])


@pytest.mark.parametrize(("attack", "code"), [
    ("tampered", "bad-signature"),
    ("replayed", "replayed"),
    ("wrong-audience", "wrong-audience"),
    ("expired", "receipt-expired"),
])
def test_the_gate_capability_refuses_before_the_model_runs(
        *, world: World, signer: Sender[Any, Any],
        make_receiver: Callable[..., StrictContractReceiver], replayer: Replayer,
        attack: str, code: str) -> None:
    receiver = make_receiver(at=EXPIRED) if attack == "expired" else make_receiver()
    transport: Callable[[bytes], bytes] | None = None
    if attack == "tampered":
        transport = tamper
    elif attack == "replayed":
        transport = replayer
        first = Topology(content_for("routine-01"), signer=signer, receiver=receiver)
        assert first.run("routine-01", transport=transport).output == "RELEASE"
    elif attack == "wrong-audience":
        signer = make_sender(world, receiver="case-owner-2")
    topology = Topology(content_for("routine-01"), signer=signer, receiver=receiver)
    with pytest.raises(HandoffRefused, match=code) as refused:
        topology.run("routine-01", transport=transport)
    assert isinstance(refused.value, PermissionError)
    handover = refused.value.handover
    assert (handover.refused_by, handover.decision.action) == ("gate", "ESCALATE")
    assert handover.decision.reasons[0].code == code
    assert topology.owner_model.seen == []  # the case owner's model never ran


def test_model_written_governance_is_retried_and_changes_nothing(
        signer: Sender[Any, Any], receiver: StrictContractReceiver) -> None:
    honest = content_for("routine-01")
    topology = Topology(with_governance(honest), honest, signer=signer, receiver=receiver)
    decided = topology.run("routine-01")
    (retry,) = topology.evidence_model.retries
    assert "untrusted-governance @ $.authority" in retry
    assert decided.output == "RELEASE"
    receipt = handover_of(topology.owner_model.seen[0][-1])["content"]
    assert receipt["authority"] == "ADVISE"
    assert receipt["valid_until"] == VALID_UNTIL.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_content_outside_the_schema_is_retried(signer: Sender[Any, Any],
                                               receiver: StrictContractReceiver) -> None:
    honest = content_for("identity-01")
    topology = Topology({**honest, "proposed_action": "PAY_TWICE"}, honest, signer=signer,
                        receiver=receiver)
    assert topology.run("identity-01").output == "HOLD"
    (retry,) = topology.evidence_model.retries
    assert retry.startswith("schema-invalid @ $.proposed_action")


def test_governance_is_refused_even_without_the_validator(
        signer: Sender[Any, Any], receiver: StrictContractReceiver) -> None:
    topology = Topology(with_governance(content_for("routine-01")), signer=signer,
                        receiver=receiver)
    topology.evidence = Agent(FunctionModel(topology.evidence_model),
                              output_type=content_output(signer))
    with pytest.raises(HandoffRefused, match="untrusted-governance") as refused:
        topology.run("routine-01")
    assert refused.value.handover.refused_by == "sender"
    assert refused.value.handover.message is None
    assert topology.owner_model.seen == []


def test_the_receipt_only_channel(signer: Sender[Any, Any],
                                  make_receiver: Callable[..., StrictContractReceiver]) -> None:
    full = Topology(content_for("value-01"), signer=signer, receiver=make_receiver())
    alone = Topology(content_for("value-01"), signer=signer, receiver=make_receiver())
    assert full.run("value-01").output == "ESCALATE"
    assert alone.run("value-01", channel=RECEIPT_ONLY).output == "ESCALATE"
    (alone_seen,), (full_seen,) = alone.owner_model.seen, full.owner_model.seen
    assert len(alone_seen) == 1  # one request: the receipt as the prompt
    assert len(full_seen) > 1  # the evidence agent's request and response came along
    assert any("Dossier of case value-01." in str(m) for m in full_seen)
    assert not any("Dossier" in str(m) for m in alone_seen)


def system_prompts(messages: list[ModelMessage]) -> list[str]:
    return [part.content for message in messages if isinstance(message, ModelRequest)
            for part in message.parts if isinstance(part, SystemPromptPart)]


@pytest.mark.parametrize("channel", [FULL_HISTORY, RECEIPT_ONLY])
def test_the_receiving_agent_keeps_its_own_system_prompt(
        channel: str, signer: Sender[Any, Any], receiver: StrictContractReceiver) -> None:
    """Regression (#23): under ``full_history`` the receiving agent lost its own
    ``system_prompt`` and saw the sender's."""
    topology = Topology(content_for("routine-01"), signer=signer, receiver=receiver)
    assert topology.run("routine-01", channel=channel).output == "RELEASE"
    (seen,) = topology.owner_model.seen
    assert system_prompts(seen) == [OWNER_PROMPT]
    assert topology.owner_model.instructions == [OWNER_INSTRUCTIONS]


def test_a_gated_agent_holds_a_conversation(signer: Sender[Any, Any],
                                            receiver: StrictContractReceiver) -> None:
    """Regression (#23): ``ReceiptGate`` refused any second user turn."""
    topology = Topology(content_for("routine-01"), signer=signer, receiver=receiver)
    first = topology.run("routine-01")

    async def later(prompt: Any, history: list[ModelMessage]) -> Any:
        return await topology.owner.run(prompt, message_history=history)

    second = asyncio.run(later("Why?", first.all_messages()))
    assert second.output == "later turn: Why?"
    third = asyncio.run(later("And then?", second.all_messages()))
    assert third.output == "later turn: And then?"
    # What the model is shown of the earlier turns: the handover, never the proofs.
    assert '"proof"' not in str(topology.owner_model.seen[-1])
    # A turn that does not continue an admitted conversation is a new handoff: gated.
    with pytest.raises(HandoffRefused, match="no-receipt"):
        asyncio.run(later("Why?", []))
    # A JSON object sent as a later turn is a receipt: gated (here, a replay).
    replay = first.all_messages()[-2].parts[-1].content
    with pytest.raises(HandoffRefused, match="replayed"):
        asyncio.run(later(replay, second.all_messages()))


@pytest.mark.parametrize("form", ["list", "with-image", "json-binary"])
def test_a_multi_part_prompt_is_gated_on_its_first_text(
        form: str, signer: Sender[Any, Any], make_receiver: Callable[..., StrictContractReceiver],
        ) -> None:
    """Regression (#23): ``ReceiptGate`` refused any prompt that was not a plain
    ``str``; a multi-part prompt carries the receipt as its first text item."""
    signed = signer.sign(content_for("duplicate-01"), case_id="duplicate-01",
                         evidence_refs=case_ref("duplicate-01").evidence_refs)
    prompt: list[Any] = {
        "list": [signed.decode(), "Please decide."],
        "with-image": [ImageUrl(url="https://example.invalid/scan.png"), signed.decode()],
        "json-binary": [BinaryContent(data=signed, media_type="application/json")],
    }[form]
    topology = Topology(signer=signer, receiver=make_receiver())
    assert asyncio.run(topology.owner.run(prompt)).output == "REJECT_DUPLICATE"
    tampered = [tamper(signed).decode(), "Please decide."]
    with pytest.raises(HandoffRefused, match="bad-signature"):
        asyncio.run(Topology(signer=signer, receiver=make_receiver()).owner.run(tampered))


@pytest.mark.parametrize("mode", ["refuse", "continue"])
def test_the_ruling_not_the_proposal_reaches_the_outcome(
        signer: Sender[Any, Any], receiver: StrictContractReceiver, mode: str) -> None:
    """Issue #28's case: the gate admits the receipt and decides HOLD, not the proposed
    RELEASE; the stand-in model answers the proposal it reads. By default the run's
    output is the refusal (decided-otherwise); continued, the model reads the ruling."""
    topology = Topology(overruled_content(), signer=signer, receiver=receiver,
                        on_refusal="result", on_overruled=mode)
    decided = topology.run(OVERRULED_CASE, on_refusal="result")
    assert decided.output != OVERRULED_PROPOSAL
    if mode == "refuse":
        assert isinstance(decided.output, HandoffRefusal)
        assert (decided.output.code, decided.output.action) == ("decided-otherwise", "HOLD")
        assert decided.output.to_json()["outcome"] == "decided-otherwise"
        assert topology.owner_model.seen == []
    else:
        assert decided.output == "HOLD"
        handover = handover_of(topology.owner_model.seen[0][-1])
        assert handover["ruling"]["overruled"] is True
        assert "proposed_action" not in handover["content"]


def test_refusals_are_results_by_default(signer: Sender[Any, Any],
                                         receiver: StrictContractReceiver) -> None:
    """The framework's idiom: a refused handoff is the run's output, not an exception
    (``on_refusal="raise"`` keeps the exception)."""
    owner = Owner()
    agent = Agent(FunctionModel(owner), capabilities=[ReceiptGate(receiver=receiver)])
    signed = signer.sign(content_for("routine-01"), case_id="routine-01",
                         evidence_refs=case_ref("routine-01").evidence_refs)
    result = asyncio.run(agent.run(tamper(signed).decode()))
    assert isinstance(result.output, HandoffRefusal)
    assert result.output.code == "bad-signature"
    assert result.output.handover.refused_by == "gate"
    assert owner.seen == []
    assert asyncio.run(agent.run(signed.decode())).output == "RELEASE"
    # The sender's refusal, through hand_off, is a result too.
    topology = Topology(with_governance(content_for("routine-01")), signer=signer,
                        receiver=receiver, on_refusal="result")
    topology.evidence = Agent(FunctionModel(topology.evidence_model),
                              output_type=content_output(signer))
    refused = topology.run("routine-01", on_refusal="result").output
    assert isinstance(refused, HandoffRefusal)
    assert (refused.code, refused.handover.refused_by) == ("untrusted-governance", "sender")
    with pytest.raises(ValueError, match="on_refusal"):
        ReceiptGate(receiver=receiver, on_refusal="ignore")
