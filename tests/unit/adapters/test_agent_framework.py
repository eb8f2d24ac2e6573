"""Microsoft Agent Framework: evidence agent → case owner through the gate middleware, in
MAF's own ``Agent``, ``AgentMiddleware`` and ``ResponseStream``, streaming and not; the
only stand-in is the chat client (the remote model provider)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("agent_framework")

from agent_framework import (
    Agent,
    AgentResponse,
)

from adapter_world import (
    EXPIRED,
    GRANT_UNTIL,
    OVERRULED_CASE,
    OVERRULED_PROPOSAL,
    VALID_UNTIL,
    Replayer,
    World,
    content_for,
    make_sender,
    overruled_content,
    reference_action,
    tamper,
    with_governance,
)
from handoffs.adapters.agent_framework import (
    ADMITTED,
    ReceiptGate,
    content_format,
    refusal_of,
)
from handoffs.contracts import Sender
from handoffs.receivers import StrictContractReceiver
from worlds.agent_framework_topology import Topology, collect, impostor, owner_model

assert GRANT_UNTIL > VALID_UNTIL  # an expired receipt is refused as such, not its grant



@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
def test_an_admitted_receipt_hands_the_model_its_brief(
        signer: Sender[Any, Any], receiver: StrictContractReceiver, stream: bool) -> None:
    topology = Topology(content_for("conflict-02"), signer=signer, receiver=receiver)
    sent: list[bytes] = []
    text, decided = topology.hand_off("conflict-02", stream=stream,
                                      transport=lambda message: sent.append(message) or message)
    assert text == decided.text == reference_action("conflict-02") == "ESCALATE"
    assert refusal_of(decided) is None
    (request,) = topology.owner_model.requests
    handed = request[-1].text
    assert "proof" not in handed
    assert "grant" not in handed
    brief = json.loads(handed)
    assert (brief["handoff"], brief["refused_by"]) == ("accepted", None)
    assert brief["decision"]["verdict"] == "ACCEPT"
    assert brief["decision"]["receiver"] == receiver.name
    assert brief["receipt"]["contract"] == signer.contract.id
    assert brief["receipt"]["id"] == brief["decision"]["receipt_id"]
    assert brief["receipt"]["id"].startswith("urn:uuid:")
    assert brief["receipt"]["digest"] == "sha256:" + hashlib.sha256(sent[0]).hexdigest()
    content = brief["content"]
    assert (content["case_id"], content["authority"]) == ("conflict-02", "ADVISE")
    assert content["decision_state"] == content_for("conflict-02")["decision_state"]


def test_the_evidence_model_is_asked_for_the_strict_content_schema(
        signer: Sender[Any, Any], receiver: StrictContractReceiver) -> None:
    schema = content_format(signer)
    assert not {"grant", "proof", "authority", "valid_until"} & set(schema["properties"])
    assert schema["additionalProperties"] is False
    topology = Topology(content_for("routine-01"), signer=signer, receiver=receiver)
    assert topology.hand_off("routine-01")[0] == "RELEASE"


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
@pytest.mark.parametrize(("attack", "code"), [
    ("tampered", "bad-signature"),
    ("replayed", "replayed"),
    ("wrong-audience", "wrong-audience"),
    ("expired", "receipt-expired"),
    ("impostor-key", "unknown-key"),
])
def test_a_refused_receipt_is_a_routed_result_and_the_model_never_runs(
        *, world: World, signer: Sender[Any, Any],
        make_receiver: Callable[..., StrictContractReceiver], replayer: Replayer,
        attack: str, code: str, stream: bool) -> None:
    receiver = make_receiver(at=EXPIRED) if attack == "expired" else make_receiver()
    transport: Callable[[bytes], bytes] | None = None
    if attack == "tampered":
        transport = tamper
    elif attack == "replayed":
        transport = replayer
        first = Topology(content_for("routine-01"), signer=signer, receiver=receiver)
        assert first.hand_off("routine-01", transport=transport)[0] == "RELEASE"
    elif attack == "wrong-audience":
        signer = make_sender(world, receiver="case-owner-2")
    elif attack == "impostor-key":
        signer = impostor(world)
    topology = Topology(content_for("routine-01"), signer=signer, receiver=receiver)
    text, decided = topology.hand_off("routine-01", stream=stream, transport=transport)
    refusal = refusal_of(decided)
    assert refusal is not None
    assert refusal["reasons"][0]["code"] == code
    assert (refusal["verdict"], refusal["action"]) == ("REJECT", "ESCALATE")
    assert text.startswith(f"handoff refused by the gate: {code} @ ")
    assert topology.owner_model.requests == []  # the case owner's model never ran


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
def test_model_written_governance_is_refused_by_the_sender(
        signer: Sender[Any, Any], receiver: StrictContractReceiver, stream: bool) -> None:
    topology = Topology(with_governance(content_for("routine-01")), signer=signer,
                        receiver=receiver)
    text, decided = topology.hand_off("routine-01", stream=stream)
    refusal = refusal_of(decided)
    assert refusal is not None
    assert refusal["receiver"] == "sender"
    assert refusal["reasons"][0]["code"] == "untrusted-governance"
    assert text.startswith("handoff refused by the sender: untrusted-governance")
    assert topology.owner_model.requests == []


def test_content_outside_the_schema_is_refused_by_the_sender(
        signer: Sender[Any, Any], receiver: StrictContractReceiver) -> None:
    bad = {**content_for("identity-01"), "proposed_action": "PAY_TWICE"}
    topology = Topology(bad, signer=signer, receiver=receiver)
    _, decided = topology.hand_off("identity-01")
    refusal = refusal_of(decided)
    assert refusal is not None
    assert refusal["reasons"][0]["json_path"] == "$.proposed_action"
    assert topology.owner_model.requests == []


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
def test_a_run_without_a_receipt_is_refused(receiver: StrictContractReceiver,
                                            stream: bool) -> None:
    model = owner_model()
    owner = Agent(client=model, name="case-owner", middleware=[ReceiptGate(receiver=receiver)])

    async def go() -> AgentResponse[Any]:
        if stream:
            return (await collect(owner.run("Release payment 1842 now.", stream=True)))[1]
        return await owner.run("Release payment 1842 now.")
    refusal = refusal_of(asyncio.run(go()))
    assert refusal is not None
    assert refusal["reasons"][0]["code"] == "no-receipt"
    assert model.requests == []


def test_two_handoffs_in_one_session_and_a_conversation_after(
        signer: Sender[Any, Any], receiver: StrictContractReceiver) -> None:
    topology = Topology(content_for("routine-01"), content_for("identity-01"), signer=signer,
                        receiver=receiver)
    session = topology.owner.create_session()
    first = topology.hand_off("routine-01", session=session)
    admitted = session.state[ADMITTED]
    second = topology.hand_off("identity-01", session=session, stream=True)
    assert (first[0], second[0]) == ("RELEASE", "HOLD")
    assert session.state[ADMITTED] != admitted  # the second receipt was gated afresh
    topology.owner_model.reply = lambda messages: f"{len(messages)} messages"
    follow_up = asyncio.run(topology.owner.run("Why hold?", session=session))
    assert refusal_of(follow_up) is None
    (last,) = topology.owner_model.requests[-1][-1:]
    assert last.text == "Why hold?"
    history = " ".join(m.text for m in topology.owner_model.requests[-1])
    assert "proof" not in history  # the session holds briefs, never the signed receipts


def test_non_ascii_content_crosses_intact(signer: Sender[Any, Any],
                                          receiver: StrictContractReceiver) -> None:
    content = {**content_for("routine-01"), "notes": "Zahlung geprüft — Kundin bestätigt ✓"}
    topology = Topology(content, signer=signer, receiver=receiver)
    assert topology.hand_off("routine-01", stream=True)[0] == "RELEASE"
    (request,) = topology.owner_model.requests
    assert json.loads(request[-1].text)["content"]["notes"] == content["notes"]


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
@pytest.mark.parametrize("mode", ["refuse", "continue"])
def test_the_ruling_not_the_proposal_reaches_the_outcome(
        signer: Sender[Any, Any], receiver: StrictContractReceiver, mode: str,
        stream: bool) -> None:
    """The gate admits the receipt and decides HOLD, not the proposed RELEASE; the
    stand-in model answers the proposal it reads. By default the run's result is the
    refusal (decided-otherwise); continued, the model reads the ruling."""
    topology = Topology(overruled_content(), signer=signer, receiver=receiver,
                        on_overruled=mode)
    text, decided = topology.hand_off(OVERRULED_CASE, stream=stream)
    assert text != OVERRULED_PROPOSAL
    if mode == "refuse":
        refusal = refusal_of(decided)
        assert refusal is not None
        assert refusal["reasons"][0]["code"] == "decided-otherwise"
        assert (refusal["verdict"], refusal["action"]) == ("ACCEPT", "HOLD")
        assert text.startswith("handoff refused by the gate: decided-otherwise")
        assert topology.owner_model.requests == []
    else:
        assert (text, refusal_of(decided)) == ("HOLD", None)
        brief = json.loads(topology.owner_model.requests[0][-1].text)
        assert brief["ruling"] == {"action": "HOLD", "proposed_action": "RELEASE",
                                   "overruled": True}
