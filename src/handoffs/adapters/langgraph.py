"""LangGraph: a signing node and a gate node that routes with ``Command(goto=...)``.

The graph's state carries two append-only channels (:class:`ReceiptChannels`):
``receipts``, the signed receipts as sent, and ``handovers``, the gate's
:class:`~handoffs.adapters.Handover` per pass (decision, reasons and, when accepted, the
verified receipt). Three pieces put the gate between two agents:

* :func:`content_tool` — the tool the sending model calls, whose parameters are the
  contract's strict content schema (bind it with ``model.bind_tools([tool])``);
* :func:`sender_node` — reads that tool call, has the signer stamp governance and
  sign, and goes to the gate (or to the escalation node when the sender refuses);
* :func:`gate_node` — decides the last receipt before the receiving node runs and
  returns ``Command(goto=deliver)`` on ACCEPT, ``Command(goto=escalate)`` otherwise.

The channel arms: the receiving node reads the whole state (:data:`FULL_MESSAGES`) or,
added with ``input_schema=ReceiptView`` (:data:`RECEIPT_ONLY`), the handovers alone::

    builder.add_node("sign", sender_node(sender), destinations=("gate", "escalate"))
    builder.add_node("gate", gate_node(receiver, deliver="case_owner"),
                     destinations=("case_owner", "escalate"))
    builder.add_node("case_owner", case_owner, input_schema=ReceiptView)

Needs the ``langgraph`` extra.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final

from handoffs._errors import HandoffsError, MalformedJSON
from handoffs.adapters._handover import (
    Case,
    ReceiptSigner,
    admit,
    case_of,
    content_schema,
    refused,
    require,
    sign_content,
)
from handoffs.receivers import Receiver

require("langgraph", extra="langgraph", feature="the LangGraph adapter")

from langchain_core.messages import AIMessage, BaseMessage  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402
from langgraph.types import Command  # noqa: E402

# LangGraph's own state classes (MessagesState) are typing_extensions TypedDicts; a
# state schema may combine them with these only if the metaclasses agree.
from typing_extensions import TypedDict  # noqa: E402

__all__ = [
    "CHANNELS",
    "FULL_MESSAGES",
    "RECEIPT_ONLY",
    "TOOL_NAME",
    "ReceiptChannels",
    "ReceiptView",
    "content_tool",
    "gate_node",
    "sender_node",
]

TOOL_NAME: Final = "hand_off"
"""The default name of the sending model's handoff tool."""
FULL_MESSAGES: Final = "full_messages"
"""Channel arm: the receiving node reads the whole graph state, messages included."""
RECEIPT_ONLY: Final = "receipt_only"
"""Channel arm: the receiving node is added with ``input_schema=ReceiptView``."""


class ReceiptChannels(TypedDict):
    """State channels to add to a graph's state schema (``class State(MessagesState,
    ReceiptChannels)``); both are append-only.
    """

    receipts: Annotated[list[str], operator.add]
    """Signed receipts (JSON text) as the sender emitted them."""
    handovers: Annotated[list[dict[str, Any]], operator.add]
    """The gate's handover per pass (:meth:`~handoffs.adapters.Handover.to_json`)."""


class ReceiptView(TypedDict):
    """The receipt-only view of the state: the handovers, nothing else."""

    handovers: list[dict[str, Any]]


CHANNELS: Final = {FULL_MESSAGES: None, RECEIPT_ONLY: ReceiptView}
"""The channel arms by name, each the receiving node's ``input_schema`` (``None``: the
graph's whole state)."""


def content_tool(signer: ReceiptSigner, *, name: str = TOOL_NAME) -> dict[str, Any]:
    """The sending model's handoff tool in OpenAI form, strict, from the content schema.

    It passes through LangChain's own strict conversion (``convert_to_openai_tool(...,
    strict=True)``); bind it with ``model.bind_tools([tool], strict=True)``.
    """
    contract = signer.contract
    return convert_to_openai_tool({
        "name": name,
        "description": f"Hand the case on: {contract.description} Fill only the "
                       "decision content; governance is stamped by the system.",
        "parameters": content_schema(contract),
    }, strict=True)


def _tool_arguments(state: Mapping[str, Any], name: str) -> Any:
    messages: list[BaseMessage] = list(state.get("messages", ()))
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call["name"] == name:
                    return call["args"]
            break
    raise MalformedJSON(f"the last model message calls no {name!r} tool",
                        code="no-handoff-call", json_path="$.messages")


def sender_node(
    signer: ReceiptSigner,
    *,
    goto: str = "gate",
    escalate: str = "escalate",
    tool_name: str = TOOL_NAME,
    case: Callable[[Any], Case] = case_of,
) -> Callable[[Mapping[str, Any]], Command[str]]:
    """The node that signs what the sending model wrote in its ``tool_name`` call.

    Governance comes from ``signer``; the case from the state (default: its ``case_id``
    and ``evidence_refs``). Content the sender refuses — a governance member the model
    wrote, a value outside the contract — goes to ``escalate`` with the reasons.
    """

    def sign(state: Mapping[str, Any]) -> Command[str]:
        try:
            message = sign_content(_tool_arguments(state, tool_name), signer=signer,
                                   case=case(state))
        except HandoffsError as exc:
            return Command(goto=escalate,
                           update={"handovers": [refused(signer.contract, exc).to_json()]})
        return Command(goto=goto, update={"receipts": [message.decode()]})

    return sign


def gate_node(
    receiver: Receiver,
    *,
    deliver: str,
    escalate: str = "escalate",
) -> Callable[[Mapping[str, Any]], Command[str]]:
    """The node that gates the last receipt before ``deliver`` runs.

    ACCEPT goes to ``deliver``; a refused or escalated receipt (and a state with no
    receipt) goes to ``escalate``. Either way the handover, with the gate's reasons, is
    appended to ``handovers``.
    """

    def gate(state: Mapping[str, Any]) -> Command[str]:
        receipts = state.get("receipts") or [""]
        handover = admit(receipts[-1], receiver=receiver)
        return Command(goto=deliver if handover.accepted else escalate,
                       update={"handovers": [handover.to_json()]})

    return gate
