"""OpenAI Agents SDK: a handoff that signs what the model wrote and gates it first.

:func:`gated_handoff` builds a :class:`agents.Handoff` whose tool parameters are the
contract's strict content schema (the semantic part: a model never sees ``grant`` or
``proof`` and cannot fill governance). When the model calls it, ``on_invoke_handoff``
signs the content with the configured signer, carries it and runs the gate — all
before the receiving agent runs — and returns the receiving agent on ACCEPT, the
escalation agent otherwise. The SDK's simple ``handoff(agent, input_type=...)`` cannot
do this: it always returns the agent it was built with.

The handoff's tool output (what the next agent reads) is the :class:`~handoffs.adapters.Handover` as
JSON: the gate's decision with its reasons and, when accepted, the verified receipt.
What else the next agent sees is the *channel*: :data:`FULL_HISTORY` (the SDK's
default, the whole conversation) or :data:`RECEIPT_ONLY` (an ``input_filter`` that
replaces the history by the handover alone)::

    from handoffs.adapters.openai_agents import RECEIPT_ONLY, gated_handoff

    evidence_agent = Agent(name="evidence", handoffs=[gated_handoff(
        case_owner, signer=sender, receiver=StrictContractReceiver(gate),
        escalation=escalation_desk, channel=RECEIPT_ONLY)])

Needs the ``openai-agents`` extra.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Final

from handoffs._errors import InvalidArgument
from handoffs.adapters._handover import (
    Case,
    Handover,
    ReceiptSigner,
    Transport,
    case_of,
    content_schema,
    hand_over,
    require,
)
from handoffs.receivers import Receiver

require("agents", extra="openai-agents", feature="the OpenAI Agents SDK adapter")

from agents import Agent, Handoff, HandoffInputData, RunContextWrapper  # noqa: E402
from agents.exceptions import UserError  # noqa: E402
from agents.items import HandoffOutputItem  # noqa: E402
from agents.strict_schema import ensure_strict_json_schema  # noqa: E402

__all__ = [
    "CHANNELS",
    "FULL_HISTORY",
    "RECEIPT_ONLY",
    "gated_handoff",
    "receipt_only",
    "strict_content_schema",
]

FULL_HISTORY: Final = "full_history"
"""Channel arm: the receiving agent sees the whole conversation plus the handover."""
RECEIPT_ONLY: Final = "receipt_only"
"""Channel arm: the receiving agent sees the handover (decision and receipt) alone."""


def receipt_only(data: HandoffInputData) -> HandoffInputData:
    """The :data:`RECEIPT_ONLY` input filter: drop the history, keep the handover.

    The handover (the handoff's tool output) becomes the next agent's only input
    message; the tool call and its output are dropped with the rest, so the next
    model's input stays well formed.
    """
    handover = next((item for item in reversed(data.new_items)
                     if isinstance(item, HandoffOutputItem)), None)
    text = "" if handover is None else str(_output_of(handover.raw_item))
    return data.clone(input_history=({"role": "user", "content": text},),
                      pre_handoff_items=(), new_items=(), input_items=None)


def _output_of(item: Any) -> Any:
    return item.get("output", "") if isinstance(item, dict) else getattr(item, "output", "")


CHANNELS: Final = {FULL_HISTORY: None, RECEIPT_ONLY: receipt_only}
"""The channel arms by name, each an ``input_filter`` (``None``: the SDK's full history)."""


def strict_content_schema(signer: ReceiptSigner) -> dict[str, Any]:
    """The contract's content schema, passed through the SDK's strict-schema rules.

    Raises:
        ValueError: ``InvalidArgument`` (also a TypeError), the schema is not acceptable in strict
            mode (the SDK's reason).
    """
    try:
        return ensure_strict_json_schema(content_schema(signer.contract))
    except UserError as exc:
        raise InvalidArgument(f"the content schema of {signer.contract.id} fails the OpenAI "
                         f"strict-schema rules: {exc}") from exc


@dataclasses.dataclass
class _GatedHandoff(Handoff[Any, Agent[Any]]):
    """A Handoff whose tool output is the handover of the call that returned the agent."""

    pending: dict[int, tuple[Agent[Any], Handover]] = dataclasses.field(
        default_factory=dict, kw_only=True, repr=False)

    def get_transfer_message(self, agent: Any) -> str:
        entry = self.pending.pop(id(agent), None)
        return super().get_transfer_message(agent) if entry is None else entry[1].to_text()


def gated_handoff(
    agent: Agent[Any],
    *,
    signer: ReceiptSigner,
    receiver: Receiver,
    escalation: Agent[Any],
    channel: str = FULL_HISTORY,
    case: Callable[[Any], Case] = case_of,
    transport: Transport | None = None,
    on_handover: Callable[[RunContextWrapper[Any], Handover], None] | None = None,
    tool_name: str | None = None,
    tool_description: str | None = None,
) -> Handoff[Any, Agent[Any]]:
    """A handoff to ``agent`` that only a receipt the gate accepts gets through.

    Args:
        agent: the receiving agent (the case owner).
        signer: stamps governance and signs (a :class:`handoffs.contracts.Sender`).
        receiver: the receiving side's receiver contract behind its gate.
        escalation: the agent that gets every refused handoff, with the reasons.
        channel: :data:`FULL_HISTORY` or :data:`RECEIPT_ONLY` (see :data:`CHANNELS`).
        case: the case of a run, from the run's context object (default
            :func:`~handoffs.adapters.case_of`: its ``case_id`` and ``evidence_refs``).
        transport: carries the signed bytes to the gate (default: in process).
        on_handover: called with every :class:`~handoffs.adapters.Handover`, before the next agent
            runs.
        tool_name: the handoff tool's name (default ``transfer_to_<agent>``).
        tool_description: the tool's description (default: the contract's).

    Raises:
        ValueError: ``InvalidArgument`` (also a TypeError), unknown ``channel``, or a content
            schema the SDK's strict mode
            refuses.
    """
    if channel not in CHANNELS:
        raise InvalidArgument(f"unknown channel {channel!r}; expected one of {sorted(CHANNELS)}")
    schema = strict_content_schema(signer)
    handoff: _GatedHandoff

    async def invoke(ctx: RunContextWrapper[Any], arguments: str) -> Agent[Any]:
        handover = hand_over(arguments, signer=signer, receiver=receiver,
                             case=case(ctx.context), transport=transport)
        # A per-call clone keys this call's handover for its tool output.
        target = (agent if handover.accepted else escalation).clone()
        handoff.pending[id(target)] = (target, handover)
        if on_handover is not None:
            on_handover(ctx, handover)
        return target

    handoff = _GatedHandoff(
        tool_name=tool_name or Handoff.default_tool_name(agent),
        tool_description=tool_description or (
            f"Hand the case to {agent.name}: {signer.contract.description} Fill only the "
            "decision content; governance is stamped by the system."),
        input_json_schema=schema,
        on_invoke_handoff=invoke,
        agent_name=agent.name,
        input_filter=CHANNELS[channel],
        nest_handoff_history=False,
        strict_json_schema=True,
    )
    return handoff
