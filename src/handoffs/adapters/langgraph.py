"""LangGraph: a handoff tool that returns ``Command``, with a ``ToolMessage`` answering
the model's call.

LangGraph's own idiom for a handoff is a tool that returns ``Command(goto=<agent>,
update={"messages": [ToolMessage(...)]})``: the tool call is answered, so the history a
chat model reads downstream stays valid (OpenAI answers 400 to an assistant tool call
left without its tool message). :func:`handoff_tool` is that tool, with the gate in it:
its parameters are the contract's strict content schema (the model never sees
``grant`` or ``proof`` and cannot fill governance); when the model calls it, the
signer stamps governance and signs, the gate decides, and the tool returns
``Command(goto=deliver)`` on ACCEPT, ``Command(goto=escalate)`` otherwise — each with a
``ToolMessage`` whose content is the :class:`~handoffs.adapters.Handover` (the gate's
decision with its reasons and, when accepted, the receipt's content and a reference
to the verified receipt, not its grant and proof). Run it in a ``ToolNode``::

    tools = ToolNode([handoff_tool(sender, receiver, deliver="case_owner")])
    builder.add_node("tools", tools, destinations=("case_owner", "escalate"))
    builder.add_node("case_owner", case_owner, input_schema=ReceiptView)

The graph's state carries two append-only channels (:class:`ReceiptChannels`):
``receipts``, the signed receipts as sent, and ``handovers``, the handover per pass.
For a graph that carries the signed bytes over a hop of its own (a queue, another
process), the same handoff comes in two nodes: :func:`sender_node` signs, and
:func:`gate_node` gates the last receipt; the gate node (or the sender node, when it
refuses) answers the model's open tool call with the same ``ToolMessage``.

The channel arms: the receiving node reads the whole state (:data:`FULL_MESSAGES`) or,
added with ``input_schema=ReceiptView`` (:data:`RECEIPT_ONLY`), the handovers alone.

Needs the ``langgraph`` extra.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final

from handoffs._errors import HandoffsError, MalformedJSON
from handoffs.adapters._handover import (
    REFUSE,
    Case,
    Handover,
    ReceiptSigner,
    Transport,
    admit,
    case_in,
    case_of,
    content_schema,
    hand_over,
    overruled_mode,
    refused,
    require,
    sign_content,
)
from handoffs.receivers import Receiver

require("langgraph", extra="langgraph", feature="the LangGraph adapter")

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage  # noqa: E402
from langchain_core.tools import BaseTool, StructuredTool  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402
from langgraph.prebuilt import ToolRuntime  # noqa: E402
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
    "handoff_tool",
    "sender_node",
]

TOOL_NAME: Final = "hand_off"
"""The default name of the sending model's handoff tool."""
FULL_MESSAGES: Final = "full_messages"
"""Channel arm: the receiving node reads the whole graph state, messages included."""
RECEIPT_ONLY: Final = "receipt_only"
"""Channel arm: the receiving node is added with ``input_schema=ReceiptView``."""
ADAPTER: Final = "langgraph"


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


def _description(signer: ReceiptSigner) -> str:
    return (f"Hand the case on: {signer.contract.description} Fill only the decision "
            "content; governance is stamped by the system.")


def content_tool(signer: ReceiptSigner, *, name: str = TOOL_NAME) -> dict[str, Any]:
    """The sending model's handoff tool in OpenAI form, strict, from the content schema.

    It passes through LangChain's own strict conversion (``convert_to_openai_tool(...,
    strict=True)``); bind it with ``model.bind_tools([tool], strict=True)``. (The
    tool that also gates is :func:`handoff_tool`; this is its schema alone.)
    """
    return convert_to_openai_tool({
        "name": name, "description": _description(signer),
        "parameters": content_schema(signer.contract),
    }, strict=True)


def _routed(handover: Handover, *, call_id: str | None, tool_name: str, deliver: str,
            escalate: str, receipts: bool = False, graph: str | None = None,
            ) -> Command[str]:
    """The command of one handover: where to go, the handover appended, the model's
    tool call answered (when there is one), the signed receipt appended (``receipts``).
    """
    update: dict[str, Any] = {"handovers": [handover.to_json()]}
    if call_id is not None:
        update["messages"] = [ToolMessage(
            content=handover.to_text(), name=tool_name, tool_call_id=call_id,
            status="success" if handover.accepted else "error")]
    if receipts and handover.message is not None:
        update["receipts"] = [handover.message.decode()]
    return Command(goto=deliver if handover.accepted else escalate, update=update,
                   graph=graph)


def handoff_tool(
    signer: ReceiptSigner,
    receiver: Receiver,
    *,
    deliver: str,
    escalate: str = "escalate",
    name: str = TOOL_NAME,
    case: Callable[[Any], Case] = case_of,
    transport: Transport | None = None,
    parent: bool = False,
    on_overruled: str = REFUSE,
) -> BaseTool:
    """The handoff as LangGraph's idiom has it: a tool that returns ``Command``.

    Its parameters are the contract's strict content schema (bind it with
    ``model.bind_tools([tool], strict=True)``); run it in a ``ToolNode`` added with
    ``destinations=(deliver, escalate)``. A call signs the content (governance from
    ``signer``, the case from the graph state — default: its ``case_id`` and
    ``evidence_refs``), carries it with ``transport`` and gates it, then returns
    ``Command(goto=deliver)`` on ACCEPT and ``Command(goto=escalate)`` otherwise, with a
    ``ToolMessage`` answering the call (its content the handover), the handover
    appended to ``handovers`` and the signed receipt to ``receipts``. It never raises:
    content the sender refuses and a state that names no case go to ``escalate``.

    Args:
        signer: stamps governance and signs (a :class:`handoffs.contracts.Sender`).
        receiver: the receiving side's receiver contract behind its gate.
        deliver: the node that gets an accepted handoff (the case owner).
        escalate: the node that gets every refused handoff, with the reasons.
        name: the tool's name (what the model calls).
        case: the case of a call, from the graph state.
        transport: carries the signed bytes to the gate (default: in process).
        parent: the tool runs in an agent's subgraph and ``deliver``/``escalate`` are
            nodes of the parent graph (``Command.PARENT``).
        on_overruled: when the gate admits the receipt but decides another action than
            the proposal (or escalates): ``"refuse"`` (default) goes to ``escalate`` with
            the reason ``decided-otherwise``; ``"continue"`` goes to ``deliver`` with an
            accepted ruling, the handover's decision the gate's action and the proposal
            as ``overruled_proposal``.
    """
    overruled = overruled_mode(on_overruled)

    def hand_off(runtime: ToolRuntime, **content: Any) -> Command[str]:
        try:
            found = case_in(runtime.state, case)
        except HandoffsError as exc:
            handover = refused(signer.contract, exc, adapter=ADAPTER)
        else:
            handover = hand_over(content, signer=signer, receiver=receiver, case=found,
                                 transport=transport, overruled=overruled, adapter=ADAPTER)
        return _routed(handover, call_id=runtime.tool_call_id, tool_name=name,
                       deliver=deliver, escalate=escalate, receipts=True,
                       graph=Command.PARENT if parent else None)

    schema = {**content_schema(signer.contract), "title": name}
    return StructuredTool(name=name, description=_description(signer), args_schema=schema,
                          func=hand_off)


def _messages(state: Mapping[str, Any]) -> list[BaseMessage]:
    return list(state.get("messages", ()))


def _tool_arguments(state: Mapping[str, Any], name: str) -> Any:
    for message in reversed(_messages(state)):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call["name"] == name:
                    return call["args"]
            break
    raise MalformedJSON(f"the last model message calls no {name!r} tool",
                        code="no-handoff-call", json_path="$.messages")


def _open_call(state: Mapping[str, Any], name: str) -> str | None:
    """The id of the last model message's ``name`` call that no tool message answers."""
    messages = _messages(state)
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return next((call["id"] for call in message.tool_calls
                         if call["name"] == name and call.get("id")
                         and call["id"] not in answered), None)
    return None


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
    wrote, a value outside the contract, a state that names no case — goes to
    ``escalate`` with the reasons, and the model's tool call is answered with them.
    """

    def sign(state: Mapping[str, Any]) -> Command[str]:
        try:
            message = sign_content(_tool_arguments(state, tool_name), signer=signer,
                                   case=case_in(state, case))
        except HandoffsError as exc:
            return _routed(refused(signer.contract, exc, adapter=ADAPTER),
                           call_id=_open_call(state, tool_name), tool_name=tool_name,
                           deliver=escalate, escalate=escalate)
        return Command(goto=goto, update={"receipts": [message.decode()]})

    return sign


def gate_node(
    receiver: Receiver,
    *,
    deliver: str,
    escalate: str = "escalate",
    tool_name: str = TOOL_NAME,
    on_overruled: str = REFUSE,
) -> Callable[[Mapping[str, Any]], Command[str]]:
    """The node that gates the last receipt before ``deliver`` runs.

    ACCEPT of the proposal goes to ``deliver``; a refused or escalated receipt, one whose
    proposal the gate overrules (``decided-otherwise``, unless ``on_overruled`` is
    ``"continue"``), and a state with no receipt (``no-receipt``) go to ``escalate``.
    Either way the handover, with the gate's reasons, is appended to ``handovers`` and
    answers the model's open ``tool_name`` call.
    """
    overruled = overruled_mode(on_overruled)

    def gate(state: Mapping[str, Any]) -> Command[str]:
        receipts = state.get("receipts") or [""]
        return _routed(admit(receipts[-1], receiver=receiver, overruled=overruled,
                             adapter=ADAPTER),
                       call_id=_open_call(state, tool_name), tool_name=tool_name,
                       deliver=deliver, escalate=escalate)

    return gate
