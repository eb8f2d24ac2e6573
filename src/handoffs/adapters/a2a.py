"""A2A: decision receipts carried in A2A messages, gated before the receiving agent runs.

The sender puts the signed receipt into an A2A message as one part with the media
type :data:`RECEIPT_MEDIA_TYPE` and names the extension :data:`RECEIPT_EXTENSION_URI`
(which the receiving agent's card declares with :func:`receipt_extension`). The
receiving side wraps its agent in a :class:`GatedAgentExecutor`: the gate decides the
receipt before the agent runs, and a refusal rejects the task
(``TASK_STATE_REJECTED``) with the gate's reasons in the status message, as text and
as the decision JSON.

Two carriages exist, and both keep the signature whole:

- :attr:`Carriage.RAW` (the default) sends the receipt bytes as sent;
- :attr:`Carriage.DATA` sends it as a data part, a protobuf ``Value`` in which **every
  number is a double**: ``"hop": 0`` arrives as ``0.0``. The gate accepts integral
  floats where the schema says integer, and canonical JSON writes ``0.0`` as ``0``, so
  the proofs verify over the same bytes.

The lab compares the channel arms an A2A deployment chooses between:
:func:`data_part_channel` (the receipt as a data part) and
:func:`text_summary_channel` (a free-text summary, as many agents hand over today).

Needs the ``a2a`` extra (``pip install 'handoffs[a2a]'``).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import attrs

from handoffs._errors import HandoffsError
from handoffs._json import dumps, loads
from handoffs.adapters._handover import (
    REFUSE,
    Handover,
    admit,
    no_receipt,
    overruled_mode,
    require,
    traced,
)
from handoffs.receivers import Decision, Receiver

require("a2a.server", extra="a2a", feature="the A2A adapter")

from a2a.helpers.proto_helpers import (  # noqa: E402
    get_data_parts,
    new_data_part,
    new_task_from_user_message,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext  # noqa: E402
from a2a.server.events import EventQueue  # noqa: E402
from a2a.server.tasks import TaskUpdater  # noqa: E402
from a2a.types import AgentExtension, Message, Part, Role, Task, TaskState  # noqa: E402

__all__ = [
    "DECISION_MEDIA_TYPE",
    "RECEIPT_EXTENSION_URI",
    "RECEIPT_MEDIA_TYPE",
    "Carriage",
    "GatedAgentExecutor",
    "NoReceipt",
    "data_part_channel",
    "decision_of",
    "receipt_extension",
    "receipt_message",
    "receipt_of",
    "text_summary_channel",
]

RECEIPT_EXTENSION_URI: Final = "urn:handoffs:a2a:decision-receipt:v1"
"""The A2A extension a message names when one of its parts is a decision receipt."""

RECEIPT_MEDIA_TYPE: Final = "application/vnd.handoffs.receipt+json"
"""Media type of the part that carries the signed receipt."""

DECISION_MEDIA_TYPE: Final = "application/vnd.handoffs.decision+json"
"""Media type of the data part that carries the gate's decision in a refusal."""

ADAPTER: Final = "a2a"


class NoReceipt(HandoffsError, LookupError):
    """An A2A message carries no decision receipt part, or more than one."""


class Carriage(enum.Enum):
    """How the receipt travels inside the A2A message."""

    RAW = "raw"
    """The receipt bytes as sent, in a raw part: byte for byte."""
    DATA = "data"
    """The parsed receipt in a data part (a protobuf ``Value``: numbers become doubles)."""


def receipt_extension(*, required: bool = True) -> AgentExtension:
    """The extension entry a receiving agent's card declares under its capabilities."""
    return AgentExtension(
        uri=RECEIPT_EXTENSION_URI,
        description="Handoffs carry one signed decision receipt; the gate decides it "
                    "before this agent runs.",
        required=required,
    )


def _part(message: bytes, carriage: Carriage) -> Part:
    if carriage is Carriage.RAW:
        return Part(raw=message, media_type=RECEIPT_MEDIA_TYPE)
    return new_data_part(dict(loads(message)), media_type=RECEIPT_MEDIA_TYPE)


def receipt_message(
    message: bytes,
    *,
    carriage: Carriage = Carriage.RAW,
    message_id: str,
    role: Role = Role.ROLE_USER,
    context_id: str = "",
    task_id: str = "",
    summary: str | None = None,
) -> Message:
    """An A2A message carrying the signed receipt ``message`` (bytes as signed).

    ``summary`` adds a free-text part for human readers; the gate never reads it.
    """
    parts = [_part(message, carriage)]
    if summary is not None:
        parts.append(Part(text=summary, media_type="text/plain"))
    return Message(message_id=message_id, role=role, context_id=context_id, task_id=task_id,
                   parts=parts, extensions=[RECEIPT_EXTENSION_URI])


def receipt_of(message: Message) -> bytes | dict[str, Any]:
    """The one receipt an A2A message carries: raw bytes, or the data part's mapping.

    Raises:
        NoReceipt: no part has :data:`RECEIPT_MEDIA_TYPE`, or several do.
    """
    found = [part for part in message.parts if part.media_type == RECEIPT_MEDIA_TYPE]
    if len(found) != 1:
        what = "no decision receipt part" if not found else f"{len(found)} receipt parts"
        raise NoReceipt(f"the message carries {what} (media type {RECEIPT_MEDIA_TYPE})",
                        code="no-receipt", json_path="$.parts")
    part = found[0]
    if part.HasField("raw"):
        return bytes(part.raw)
    if part.HasField("data"):
        (value,) = get_data_parts([part])
        if isinstance(value, dict):
            return value
    raise NoReceipt("the receipt part is neither raw bytes nor a JSON object",
                    code="no-receipt", json_path="$.parts")


def _decide(receiver: Receiver, message: Message | None, overruled: str) -> Handover:
    if message is None:
        return traced(Handover(decision=no_receipt(receiver, "the request carries no message")),
                      adapter=ADAPTER)
    try:
        receipt = receipt_of(message)
    except NoReceipt as exc:
        return traced(Handover(decision=no_receipt(receiver, str(exc), exc.json_path)),
                      adapter=ADAPTER)
    return admit(receipt, receiver=receiver, overruled=overruled, adapter=ADAPTER)


def _refusal(decision: Decision, *, context_id: str, task_id: str) -> Message:
    reasons = "; ".join(f"{r.code}: {r.message}" for r in decision.reasons) or "refused"
    text = (f"handoffs gate: {decision.verdict.value} at step {decision.step.name.lower()} "
            f"({reasons})")
    return Message(
        message_id=f"refusal-{task_id}", role=Role.ROLE_AGENT, context_id=context_id,
        task_id=task_id,
        parts=[Part(text=text, media_type="text/plain"),
               new_data_part(decision.to_json(), media_type=DECISION_MEDIA_TYPE)],
    )


OnAdmitted = Callable[[Decision, RequestContext, TaskUpdater], Awaitable[None]]
"""The receiving agent: called with the admitted decision; it completes the task."""


class GatedAgentExecutor(AgentExecutor):
    """An A2A agent executor whose agent runs only on a receipt the gate admits.

    Each request becomes a task (enqueued first, as the v2 request handler expects).
    The receiver decides the message's receipt part in a worker thread (the gate's
    stores and resolvers may block); an accepted decision of the proposal goes to
    ``on_admitted``, which does the agent's work and completes the task. Anything else
    rejects the task (``TASK_STATE_REJECTED``) with the reasons, and the agent never
    runs — also a receipt the gate admitted but decided otherwise than proposed, or
    escalated (reason ``decided-otherwise``), unless ``on_overruled="continue"``: then
    an accepted ruling goes to ``on_admitted``, whose decision's ``action`` is the
    gate's (and its ``record`` says ``agrees_with_proposal: false``).
    """

    def __init__(self, receiver: Receiver, on_admitted: OnAdmitted, *,
                 on_overruled: str = REFUSE) -> None:
        self.receiver = receiver
        self.on_admitted = on_admitted
        self.on_overruled = overruled_mode(on_overruled)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Gate the request's receipt, then run the agent or reject the task."""
        task = context.current_task
        if task is None:
            if context.message is None:
                return
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        handover = await asyncio.to_thread(_decide, self.receiver, context.message,
                                           self.on_overruled)
        if not handover.accepted:
            await updater.reject(_refusal(handover.routed, context_id=task.context_id,
                                          task_id=task.id))
            return
        await self.on_admitted(handover.decision, context, updater)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Cancel the task (the gate itself holds nothing to release)."""
        task = context.current_task
        if task is not None:
            await TaskUpdater(event_queue, task.id, task.context_id).cancel()


def decision_of(task: Task) -> dict[str, Any] | None:
    """The gate's decision JSON from a rejected task's status message, if any."""
    if task.status.state != TaskState.TASK_STATE_REJECTED:
        return None
    for part in task.status.message.parts:
        if part.media_type == DECISION_MEDIA_TYPE and part.HasField("data"):
            (value,) = get_data_parts([part])
            return value if isinstance(value, dict) else None
    return None


@attrs.frozen
class _Channel:
    """A receiver behind an A2A channel arm: each message crosses the channel first."""

    name: str
    receiver: Receiver
    cross: Callable[[bytes], bytes | str | Mapping[str, Any]]

    @property
    def deterministic(self) -> bool:
        return self.receiver.deterministic

    @property
    def record(self) -> Mapping[str, Any]:
        inner: Mapping[str, Any] = getattr(self.receiver, "record", None) or {}
        return {**inner, "channel": self.name}

    def receive(self, message: bytes | str | Mapping[str, Any]) -> Decision:
        if isinstance(message, bytes):
            raw = message
        elif isinstance(message, str):
            raw = message.encode("utf-8", "surrogatepass")
        else:
            raw = dumps(message).encode()
        return self.receiver.receive(self.cross(raw))


def data_part_channel(receiver: Receiver) -> Receiver:
    """``receiver`` behind a real A2A data part: each message is put into a protobuf
    ``Value`` part and read back (every number becomes a double) before it is decided.

    A message that is not a JSON object cannot be a data part; it crosses unchanged
    as raw bytes, and the gate refuses it as it would anywhere.
    """

    def cross(raw: bytes) -> bytes | str | Mapping[str, Any]:
        try:
            part = _part(raw, Carriage.DATA)
        except (HandoffsError, TypeError, ValueError):
            part = Part(raw=raw, media_type=RECEIPT_MEDIA_TYPE)
        return receipt_of(Message(message_id="lab", parts=[part]))

    return _Channel(f"a2a-data-part/{receiver.name}", receiver, cross)


def text_summary_channel(receiver: Receiver, summarise: Callable[[bytes], str]) -> Receiver:
    """``receiver`` behind a free-text A2A handoff: only ``summarise(message)`` crosses,
    as a text part, and the receiving side reads that text (there is no receipt).
    """

    def cross(raw: bytes) -> str:
        message = Message(message_id="lab", parts=[Part(text=summarise(raw),
                                                        media_type="text/plain")])
        return "\n".join(part.text for part in message.parts if part.HasField("text"))

    return _Channel(f"a2a-text-summary/{receiver.name}", receiver, cross)
