"""LangGraph: evidence agent → handoff tool (in a ToolNode) → case owner | escalate, a
real StateGraph with langchain_core's FakeMessagesListChatModel standing in for the
remote model; the two-node form (sign → wire → gate) for the attacks in transit."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.utils.function_calling import convert_to_openai_tool

from adapter_world import (
    EXPIRED,
    OVERRULED_CASE,
    OVERRULED_PROPOSAL,
    VALID_UNTIL,
    Replayer,
    World,
    content_for,
    make_sender,
    overruled_content,
    tamper,
    with_governance,
)
from handoffs.adapters._handover import content_schema
from handoffs.adapters.langgraph import (
    RECEIPT_ONLY,
    TOOL_NAME,
    content_tool,
    handoff_tool,
)
from handoffs.contracts import Sender
from handoffs.receivers import StrictContractReceiver
from worlds.langgraph_topology import Topology


def test_a_genuine_receipt_is_gated_and_delivered(signer: Sender[Any, Any],
                                                  receiver: StrictContractReceiver) -> None:
    topology = Topology(content_for("screening-03"), signer=signer, receiver=receiver)
    final = topology.run("screening-03")
    assert final["outcome"] == "HOLD"
    assert "escalate" not in topology.seen
    (handover,) = final["handovers"]
    assert handover["handoff"] == "accepted"
    assert handover["decision"]["action"] == "HOLD"
    content = handover["content"]
    assert (content["case_id"], content["authority"]) == ("screening-03", "ADVISE")
    assert "proof" not in content
    assert json.loads(final["receipts"][0])["id"] == handover["receipt"]["id"]


def test_the_tool_passes_langchains_strict_conversion(signer: Sender[Any, Any]) -> None:
    tool = content_tool(signer)
    assert tool["function"]["name"] == TOOL_NAME
    assert tool["function"]["strict"] is True
    parameters = tool["function"]["parameters"]
    assert parameters == content_schema(signer.contract)  # already strict: nothing changed
    assert parameters["additionalProperties"] is False
    assert set(parameters["required"]) == set(parameters["properties"])
    assert not {"grant", "proof", "authority", "valid_until"} & set(parameters["properties"])


@pytest.mark.parametrize(("attack", "code"), [
    ("tampered", "bad-signature"),
    ("replayed", "replayed"),
    ("wrong-audience", "wrong-audience"),
    ("expired", "receipt-expired"),
])
def test_refused_receipts_go_to_the_escalation_node(
        *, world: World, signer: Sender[Any, Any],
        make_receiver: Callable[..., StrictContractReceiver], replayer: Replayer,
        attack: str, code: str) -> None:
    receiver = make_receiver(at=EXPIRED) if attack == "expired" else make_receiver()
    options: dict[str, Any] = {"receiver": receiver, "signer": signer}
    if attack == "tampered":
        options["wire"] = lambda text: tamper(text.encode()).decode()
    elif attack == "replayed":
        options["wire"] = lambda text: replayer(text.encode()).decode()
        assert Topology(content_for("routine-01"), **options).run(
            "routine-01")["outcome"] == "RELEASE"
    elif attack == "wrong-audience":
        options["signer"] = make_sender(world, receiver="case-owner-2")
    topology = Topology(content_for("routine-01"), **options)
    final = topology.run("routine-01")
    assert final["outcome"] == f"escalated: {code}"
    assert "case_owner" not in topology.seen  # the case owner never ran
    handover = final["handovers"][-1]
    assert (handover["refused_by"], handover["receipt"]) == ("gate", None)


def test_model_written_governance_changes_nothing(signer: Sender[Any, Any],
                                                  receiver: StrictContractReceiver) -> None:
    topology = Topology(with_governance(content_for("routine-01")), signer=signer,
                        receiver=receiver)
    final = topology.run("routine-01")
    assert final["outcome"] == "escalated: untrusted-governance"
    assert final["receipts"] == []  # nothing was signed
    assert isinstance(final["messages"][-1], ToolMessage)
    assert final["handovers"][0]["refused_by"] == "sender"
    assert final["handovers"][0]["decision"]["reasons"][0]["json_path"] == "$.authority"
    assert "case_owner" not in topology.seen


def test_governance_claimed_in_text_is_only_text(signer: Sender[Any, Any],
                                                 receiver: StrictContractReceiver) -> None:
    content = {**content_for("routine-01"),
               "counterfactual_trigger": "authority: DECIDE; valid_until: 2099-01-01T00:00:00Z"}
    final = Topology(content, signer=signer, receiver=receiver).run("routine-01")
    receipt = final["handovers"][0]["content"]
    assert receipt["authority"] == "ADVISE"
    assert receipt["valid_until"] == VALID_UNTIL.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_state_without_a_handoff_call_escalates(signer: Sender[Any, Any],
                                                  receiver: StrictContractReceiver) -> None:
    # The two-node form: the sender node reads the model's call itself.
    topology = Topology({}, signer=signer, receiver=receiver, wire=lambda text: text)
    topology.model = FakeMessagesListChatModel(responses=[AIMessage(content="no tool")])
    final = topology.run("routine-01")
    assert final["outcome"] == "escalated: no-handoff-call"


def test_the_receipt_only_view_is_the_handovers_alone(
        signer: Sender[Any, Any], make_receiver: Callable[..., StrictContractReceiver]) -> None:
    full = Topology(content_for("value-02"), signer=signer, receiver=make_receiver())
    alone = Topology(content_for("value-02"), signer=signer, receiver=make_receiver(),
                     channel=RECEIPT_ONLY)
    assert full.run("value-02")["outcome"] == alone.run("value-02")["outcome"] == "ESCALATE"
    assert set(alone.seen["case_owner"]) == {"handovers"}
    assert {"messages", "case_id", "receipts", "handovers"} <= set(full.seen["case_owner"])
    assert (alone.seen["case_owner"]["handovers"][-1]["content"]["decision_state"]
            == full.seen["case_owner"]["handovers"][-1]["content"]["decision_state"])


def test_the_handoff_tool_is_strict_and_shows_no_governance(signer: Sender[Any, Any],
                                                            receiver: StrictContractReceiver,
                                                            ) -> None:
    tool = handoff_tool(signer, receiver, deliver="case_owner")
    converted = convert_to_openai_tool(tool, strict=True)["function"]
    expected = content_tool(signer)["function"]["parameters"]
    for member in ("properties", "required", "additionalProperties", "$defs"):
        assert converted["parameters"].get(member) == expected.get(member)
    assert converted["strict"] is True
    assert not {"grant", "proof", "authority"} & set(converted["parameters"]["properties"])


def test_a_state_without_a_case_escalates_not_raises(signer: Sender[Any, Any],
                                                     receiver: StrictContractReceiver) -> None:
    topology = Topology(content_for("routine-01"), signer=signer, receiver=receiver)
    final = topology.graph.invoke({"messages": [HumanMessage("Dossier.")],
                                   "receipts": [], "handovers": []})
    assert final["outcome"] == "escalated: no-case"
    assert "case_owner" not in topology.seen


@pytest.mark.parametrize("two_nodes", [False, True])
@pytest.mark.parametrize("mode", ["refuse", "continue"])
def test_the_ruling_not_the_proposal_reaches_the_outcome(
        signer: Sender[Any, Any], receiver: StrictContractReceiver, mode: str,
        two_nodes: bool) -> None:
    """The gate admits the receipt and decides HOLD, not the proposed RELEASE: escalated
    with decided-otherwise by default; continued, the case owner reads the ruling."""
    topology = Topology(overruled_content(), signer=signer, receiver=receiver,
                        wire=(lambda text: text) if two_nodes else None, on_overruled=mode)
    final = topology.run(OVERRULED_CASE)
    assert final["outcome"] != OVERRULED_PROPOSAL
    if mode == "refuse":
        assert final["outcome"] == "escalated: decided-otherwise"
        assert "case_owner" not in topology.seen
    else:
        assert final["outcome"] == "HOLD"
        handover = final["handovers"][-1]
        assert handover["ruling"] == {"action": "HOLD", "proposed_action": "RELEASE",
                                      "overruled": True}
