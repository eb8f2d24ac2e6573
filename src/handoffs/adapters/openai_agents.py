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

from handoffs._errors import HandoffsError, InvalidArgument
from handoffs.adapters._handover import (
    REFUSE,
    SPAN_NAME,
    Case,
    Handover,
    ReceiptSigner,
    Transport,
    case_in,
    case_of,
    content_schema,
    hand_over,
    overruled_mode,
    refused,
    require,
    span_attributes,
)
from handoffs.receivers import Receiver

require("agents", extra="openai-agents", feature="the OpenAI Agents SDK adapter")

from agents import Agent, Handoff, HandoffInputData, RunContextWrapper  # noqa: E402
from agents.exceptions import UserError  # noqa: E402
from agents.items import HandoffOutputItem  # noqa: E402
from agents.strict_schema import ensure_strict_json_schema  # noqa: E402
from agents.tracing import custom_span  # noqa: E402

__all__ = [
    "CHANNELS",
    "FULL_HISTORY",
    "RECEIPT_ONLY",
    "gated_handoff",
    "strict_content_schema",
]

FULL_HISTORY: Final = "full_history"
"""Channel arm: the receiving agent sees the whole conversation plus the handover."""
RECEIPT_ONLY: Final = "receipt_only"
"""Channel arm: the receiving agent sees the handover (decision and receipt) alone."""


CHANNELS: Final = (FULL_HISTORY, RECEIPT_ONLY)
"""The channel arms by name."""
ADAPTER: Final = "openai-agents"


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


def _handover_output(data: HandoffInputData) -> HandoffOutputItem | None:
    return next((item for item in reversed(data.new_items)
                 if isinstance(item, HandoffOutputItem)), None)


def _answered(item: HandoffOutputItem, text: str) -> HandoffOutputItem:
    raw = item.raw_item
    # The SDK writes a handoff's output as a function_call_output dict.
    answer = {**raw, "output": text} if isinstance(raw, dict) else raw
    return dataclasses.replace(item, raw_item=answer)  # type: ignore[arg-type]


class _Deliveries:
    """The handover of each run's handoff call, from ``on_invoke_handoff`` (where the
    gate decides) to the ``input_filter`` (where it becomes the tool's answer). Keyed by
    the run's context wrapper, which the SDK passes to both; the entry keeps the
    wrapper alive, so its id cannot be reused while the entry waits.
    """

    def __init__(self) -> None:
        self._pending: dict[int, tuple[RunContextWrapper[Any], Handover]] = {}

    def put(self, ctx: RunContextWrapper[Any], handover: Handover) -> None:
        self._pending[id(ctx)] = (ctx, handover)

    def take(self, ctx: RunContextWrapper[Any] | None) -> Handover | None:
        entry = self._pending.pop(id(ctx), None)
        return entry[1] if entry is not None and entry[0] is ctx else None

    def filter(self, channel: str) -> Callable[[HandoffInputData], HandoffInputData]:
        """The ``input_filter`` of ``channel``: the handoff tool's output becomes the
        handover; :data:`RECEIPT_ONLY` also drops the rest of the history.
        """

        def deliver(data: HandoffInputData) -> HandoffInputData:
            handover = self.take(data.run_context)
            item = _handover_output(data)
            text = "" if handover is None else handover.to_text()
            if channel == RECEIPT_ONLY:
                # The call and its output go with the rest: the input stays well formed.
                return data.clone(input_history=({"role": "user", "content": text},),
                                  pre_handoff_items=(), new_items=(), input_items=None)
            if item is None or handover is None:
                return data
            return data.clone(new_items=tuple(
                _answered(each, text) if each is item else each for each in data.new_items))

        return deliver


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
    on_overruled: str = REFUSE,
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
        on_overruled: when the gate admits the receipt but decides another action
            than the proposal (or escalates): ``"refuse"`` (default) hands off to
            ``escalation`` with the reason ``decided-otherwise``; ``"continue"`` hands
            an accepted ruling to ``agent``, its handover carrying the gate's action as
            the decision and the proposal as ``overruled_proposal``.

    Raises:
        ValueError: ``InvalidArgument`` (also a TypeError), unknown ``channel``, or a content
            schema the SDK's strict mode
            refuses.
    """
    if channel not in CHANNELS:
        raise InvalidArgument(f"unknown channel {channel!r}; expected one of {list(CHANNELS)}")
    overruled = overruled_mode(on_overruled)
    schema = strict_content_schema(signer)
    deliveries = _Deliveries()

    async def invoke(ctx: RunContextWrapper[Any], arguments: str) -> Agent[Any]:
        # The SDK traces on its own: the decision is a custom span in the run's trace
        # (under the handoff span), besides the OpenTelemetry span every adapter emits.
        with custom_span(SPAN_NAME) as span:
            try:
                found = case_in(ctx.context, case)
            except HandoffsError as exc:  # no case (a run without context=): routed
                handover = refused(signer.contract, exc, adapter=ADAPTER)
            else:
                handover = hand_over(arguments, signer=signer, receiver=receiver, case=found,
                                     transport=transport, overruled=overruled,
                                     adapter=ADAPTER)
            span.span_data.data.update(span_attributes(handover, adapter=ADAPTER))
        deliveries.put(ctx, handover)
        if on_handover is not None:
            on_handover(ctx, handover)
        # The agents the user configured, never copies: result.last_agent is one of them.
        return agent if handover.accepted else escalation

    return Handoff(
        tool_name=tool_name or Handoff.default_tool_name(agent),
        tool_description=tool_description or (
            f"Hand the case to {agent.name}: {signer.contract.description} Fill only the "
            "decision content; governance is stamped by the system."),
        input_json_schema=schema,
        on_invoke_handoff=invoke,
        agent_name=agent.name,
        input_filter=deliveries.filter(channel),
        nest_handoff_history=False,
        strict_json_schema=True,
    )
