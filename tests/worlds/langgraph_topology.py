"""A LangGraph StateGraph of the handover: evidence agent, handoff tool (or sign, wire
and gate nodes), case owner and escalation. Test modules import it from here rather than
from one another.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

pytest.importorskip("langgraph")
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
)
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command

from adapter_world import (
    answer_the_proposal,
    case_ref,
)
from handoffs.adapters.langgraph import (
    CHANNELS,
    FULL_MESSAGES,
    TOOL_NAME,
    ReceiptChannels,
    gate_node,
    handoff_tool,
    sender_node,
)
from handoffs.contracts import Sender
from handoffs.receivers import StrictContractReceiver

__all__ = [
    "CaseState",
    "Topology",
]


class CaseState(MessagesState, ReceiptChannels):
    case_id: str
    evidence_refs: list[str]
    outcome: str


class Topology:
    def __init__(self, arguments: Any, *, signer: Sender[Any, Any],
                 receiver: StrictContractReceiver, channel: str = FULL_MESSAGES,
                 wire: Callable[[str], str] | None = None,
                 on_overruled: str = "refuse") -> None:
        self.model = FakeMessagesListChatModel(responses=[AIMessage(
            content="", tool_calls=[{"name": TOOL_NAME, "args": arguments, "id": "call-1"}])])
        self.seen: dict[str, Mapping[str, Any]] = {}
        builder = StateGraph(CaseState)
        builder.add_node("evidence", self.evidence)
        if wire is None:  # the idiom: a handoff tool returning Command, in a ToolNode
            self.tool = handoff_tool(signer, receiver, deliver="case_owner",
                                     on_overruled=on_overruled)
            builder.add_node("tools", ToolNode([self.tool]),
                             destinations=("case_owner", "escalate"))
            builder.add_edge("evidence", "tools")
        else:  # the two-node form, with a hop of the graph's own between them
            builder.add_node("sign", sender_node(signer, goto="wire"),
                             destinations=("wire", "escalate"))
            builder.add_node("wire", lambda state: Command(
                goto="gate", update={"receipts": [wire(state["receipts"][-1])]}))
            builder.add_node("gate", gate_node(receiver, deliver="case_owner",
                                               on_overruled=on_overruled),
                             destinations=("case_owner", "escalate"))
            builder.add_edge("evidence", "sign")
        builder.add_node("case_owner", self.case_owner, input_schema=CHANNELS[channel])
        builder.add_node("escalate", self.escalate)
        builder.add_edge(START, "evidence")
        self.graph = builder.compile()

    def evidence(self, state: CaseState) -> dict[str, Any]:
        return {"messages": [self.model.invoke(state["messages"])]}

    def case_owner(self, state: Mapping[str, Any]) -> dict[str, Any]:
        self.seen["case_owner"] = dict(state)
        # The stand-in for the case owner's model answers the proposal it reads.
        return {"outcome": answer_the_proposal(state["handovers"][-1])}

    def escalate(self, state: Mapping[str, Any]) -> dict[str, Any]:
        self.seen["escalate"] = dict(state)
        reasons = state["handovers"][-1]["decision"]["reasons"]
        return {"outcome": "escalated: " + ",".join(r["code"] for r in reasons)}

    def run(self, case_id: str) -> dict[str, Any]:
        case = case_ref(case_id)
        return self.graph.invoke({
            "messages": [HumanMessage(f"Dossier of case {case_id}.")],
            "case_id": case.case_id, "evidence_refs": list(case.evidence_refs),
            "receipts": [], "handovers": []})
