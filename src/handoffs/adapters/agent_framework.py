"""Microsoft Agent Framework: a structured sending run, signed in code, and a gate middleware.

* **sender** — run the sending agent with ``options={"response_format":
  content_format(signer)}``: its structured output (``response.value``) is the
  contract's strict content schema, the semantic part only. :func:`hand_off` signs it
  (governance from the signer's configuration; content that sets a governance member is
  refused, ``untrusted-governance``), carries it and runs the receiving agent on it.
* **receiver** — :class:`ReceiptGate` is the receiving agent's ``AgentMiddleware``: it
  gates the receipt before the model is called, streaming or not. On ACCEPT the model
  gets the *brief*, the handover's :meth:`~handoffs.adapters.Handover.to_text` (the
  gate's decision, the receipt's content and governance, and a reference to the verified
  receipt; no grant, no proof), in place of the signed receipt. On refusal the model
  never runs and the run's result is a refusal response (an ``AgentResponse``, or a
  ``ResponseStream`` of it when ``stream=True``) whose :func:`refusal_of` is the gate's
  decision: routed, not raised. A session that admitted a receipt may go on talking; a
  new receipt in it is gated afresh::

      evidence = Agent(client=model, name="evidence")
      case_owner = Agent(client=model, name="case-owner",
                         middleware=[ReceiptGate(receiver=receiver)])
      drafted = await evidence.run(dossier,
                                   options={"response_format": content_format(sender)})
      decided = await hand_off(drafted, case_owner, signer=sender, case=case)
      if refusal_of(decided) is not None: ...  # route to a human, an escalation agent

MAF's ``HandoffBuilder`` tools take no arguments, so a receipt cannot ride on them; and
raising ``MiddlewareTermination`` makes ``run()`` return ``None``: the gate sets the
result instead. Needs the ``agent-framework`` extra (``agent-framework-core``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Final, Literal, overload

from handoffs import HandoffsError
from handoffs.adapters._handover import (
    REFUSE,
    Case,
    Handover,
    ReceiptSigner,
    Transport,
    admit,
    case_in,
    content_schema,
    overruled_mode,
    receipt_text,
    refusal_text,
    refused,
    require,
    sign_content,
)
from handoffs.receivers import Receiver

require("agent_framework", extra="agent-framework",
        feature="the Microsoft Agent Framework adapter")

from agent_framework import (  # noqa: E402
    AgentContext,
    AgentMiddleware,
    AgentResponse,
    AgentResponseUpdate,
    AgentSession,
    Content,
    Message,
    ResponseStream,
    SupportsAgentRun,
)

__all__ = [
    "ADMITTED",
    "RECEIPT",
    "REFUSAL",
    "ReceiptGate",
    "content_format",
    "hand_off",
    "refusal_of",
]

RECEIPT: Final = "handoffs_receipt"
"""``Message.additional_properties`` key marking the message that carries a receipt."""
REFUSAL: Final = "handoffs_refusal"
"""``AgentResponse.additional_properties`` key of a refusal: the decision as JSON."""
ADMITTED: Final = "handoffs_admitted"
"""``AgentSession.state`` key: the id of the receipt the session admitted."""
ADAPTER: Final = "agent-framework"


def content_format(signer: ReceiptSigner) -> dict[str, Any]:
    """The sending agent's ``response_format``: the contract's strict content schema (no
    governance, grant or proof).
    """
    return content_schema(signer.contract)


def refusal_of(response: AgentResponse[Any] | None) -> dict[str, Any] | None:
    """The refused decision of a gated run (JSON, with its reasons), ``None`` when the
    receiving agent ran.
    """
    if response is None or not response.additional_properties:
        return None
    decision = response.additional_properties.get(REFUSAL)
    return dict(decision) if isinstance(decision, Mapping) else None


def _refusal_response(handover: Handover, agent_name: str | None) -> AgentResponse[Any]:
    text = refusal_text(handover)
    return AgentResponse(
        messages=[Message(role="assistant", contents=[text], author_name=agent_name)],
        additional_properties={REFUSAL: handover.routed.to_json()})


def _refusal_stream(response: AgentResponse[Any]
                    ) -> ResponseStream[AgentResponseUpdate, AgentResponse[Any]]:
    async def updates() -> AsyncIterator[AgentResponseUpdate]:
        for message in response.messages:
            yield AgentResponseUpdate(contents=list(message.contents), role=message.role,
                                      author_name=message.author_name,
                                      additional_properties=response.additional_properties)

    def final(_: Any) -> AgentResponse[Any]:
        return response

    return ResponseStream(updates(), finalizer=final)


def _carrier(messages: list[Message], session: AgentSession | None
             ) -> tuple[int | None, str | None]:
    """The index of the message to gate and its receipt text: the marked receipt; else,
    outside a session that admitted one, the last message (a run without a receipt is
    refused, ``no-receipt``).
    """
    for index in range(len(messages) - 1, -1, -1):
        if (messages[index].additional_properties or {}).get(RECEIPT):
            return index, messages[index].text
    if session is not None and session.state.get(ADMITTED):
        return None, None
    if not messages:
        return None, None
    return len(messages) - 1, receipt_text(messages[-1].text)


class ReceiptGate(AgentMiddleware):
    """The receiving agent's gate (an ``AgentMiddleware``): decides the receipt before the
    model is called, for ``run()`` and ``run(stream=True)`` alike.

    Args:
        receiver: the receiving side's receiver contract behind its gate.
        on_handover: called with every :class:`~handoffs.adapters.Handover` it decides.
        on_overruled: when the gate admits the receipt but decides another action than
            the proposal (or escalates): ``"refuse"`` (default) sets the refusal
            response with the reason ``decided-otherwise``; ``"continue"`` runs the
            model on an accepted ruling, the brief's decision the gate's action and the
            proposal as ``overruled_proposal``.
    """

    def __init__(self, *, receiver: Receiver,
                 on_handover: Callable[[Handover], None] | None = None,
                 on_overruled: str = REFUSE) -> None:
        self.receiver = receiver
        self.on_handover = on_handover
        self.on_overruled = overruled_mode(on_overruled)

    async def process(self, context: AgentContext,
                      call_next: Callable[[], Awaitable[None]]) -> None:
        """Gate, then call the model on the brief; or set the refusal as the result."""
        index, text = _carrier(context.messages, context.session)
        if index is None and context.messages:
            await call_next()  # a later turn of a session that admitted a receipt
            return
        handover = admit(text, receiver=self.receiver, overruled=self.on_overruled,
                         adapter=ADAPTER)
        if self.on_handover is not None:
            self.on_handover(handover)
        if index is None or not handover.accepted or handover.receipt is None:
            response = _refusal_response(handover, context.agent.name)
            context.result = _refusal_stream(response) if context.stream else response
            return
        context.messages[index] = Message(role="user", contents=[handover.to_text()])
        if context.session is not None:
            context.session.state[ADMITTED] = handover.decision.receipt_id
        await call_next()


def _content(drafted: AgentResponse[Any]) -> Any:
    return drafted.value if drafted.value is not None else drafted.text


@overload
def hand_off(drafted: AgentResponse[Any], to: SupportsAgentRun, *, signer: ReceiptSigner,
             case: Case | Any, stream: Literal[False] = ..., transport: Transport | None = None,
             session: AgentSession | None = None) -> Awaitable[AgentResponse[Any]]: ...


@overload
def hand_off(drafted: AgentResponse[Any], to: SupportsAgentRun, *, signer: ReceiptSigner,
             case: Case | Any, stream: Literal[True], transport: Transport | None = None,
             session: AgentSession | None = None
             ) -> ResponseStream[AgentResponseUpdate, AgentResponse[Any]]: ...


def hand_off(
    drafted: AgentResponse[Any],
    to: SupportsAgentRun,
    *,
    signer: ReceiptSigner,
    case: Case | Any,
    stream: bool = False,
    transport: Transport | None = None,
    session: AgentSession | None = None,
) -> Awaitable[AgentResponse[Any]] | ResponseStream[AgentResponseUpdate, AgentResponse[Any]]:
    """Sign the sending agent's structured output for ``case``, carry it, and run ``to``
    on it (gated by ``to``'s :class:`ReceiptGate`); like ``Agent.run``, an awaitable
    response, or a ``ResponseStream`` when ``stream=True``.

    Never raises on what the model wrote: content the sender refuses to sign (a
    governance member, a schema violation) gives a refusal response without running
    ``to`` (see :func:`refusal_of`). ``case`` is a :class:`~handoffs.adapters.Case` or
    any context :func:`~handoffs.adapters.case_of` reads; one that names no case is the
    sender's refusal ``no-case``.
    """
    try:
        message = sign_content(_content(drafted), signer=signer, case=case_in(case))
    except HandoffsError as exc:
        response = _refusal_response(refused(signer.contract, exc, adapter=ADAPTER), to.name)
        if stream:
            return _refusal_stream(response)

        async def ready() -> AgentResponse[Any]:
            return response

        return ready()
    if transport is not None:
        message = transport(message)
    carried = Message(role="user", contents=[Content.from_text(message.decode("utf-8", "replace"))],
                      additional_properties={RECEIPT: True})
    if stream:
        return to.run(carried, stream=True, session=session)
    return to.run(carried, stream=False, session=session)
