"""Pydantic AI: a strict content output with ``ModelRetry``, and a gate capability.

Pydantic AI has no handoff primitive; agents hand off in code ("programmatic
hand-off"). The adapter gives both ends of that code:

* **sender** — :func:`content_output` is the sending agent's ``output_type``: a strict
  tool output whose schema is the contract's content schema. Register
  :func:`content_validator` with ``agent.output_validator``: content that sets a
  governance member or breaks the schema is answered with ``ModelRetry`` naming the
  member, so the model corrects itself before anything is signed.
* **receiver** — :class:`ReceiptGate` is a capability of the receiving agent: its
  ``before_run`` gates the run's prompt (the signed receipt: the prompt text, or the
  first text item of a multi-part prompt) before the model is called and raises
  :class:`HandoffRefused` (with the gate's decision) on refusal. The model is shown
  the :class:`~handoffs.adapters.Handover` in the receipt's place — its content and a
  reference to the verified receipt, not its grant and proof. A later turn of the same
  conversation (a run whose history holds a receipt this gate admitted) is not a new
  handoff and runs, unless its prompt is itself a JSON object (a receipt: gated).

:func:`hand_off` joins them: sign the sending agent's output, carry it, run the
receiving agent on it — with the sender's messages (:data:`FULL_HISTORY`; the sender's
system prompt is replaced by the receiving agent's own) or on the receipt alone
(:data:`RECEIPT_ONLY`)::

    evidence = Agent(model, output_type=content_output(sender), deps_type=CaseFile)
    evidence.output_validator(content_validator(sender))
    case_owner = Agent(model, capabilities=[ReceiptGate(receiver=receiver)])
    drafted = await evidence.run(dossier, deps=case_file)
    decided = await hand_off(drafted, case_owner, signer=sender, case=case_file)

Needs the ``pydantic-ai`` extra (``pydantic-ai-slim`` is enough).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from handoffs._errors import HandoffsError, InvalidArgument, MalformedJSON
from handoffs._json import loads
from handoffs.adapters._handover import (
    PROTECTED_CONTENT,
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
    refused,
    require,
    sign_content,
)
from handoffs.receivers import Receiver

require("pydantic_ai", extra="pydantic-ai", feature="the Pydantic AI adapter")

import jsonschema  # noqa: E402
from pydantic_ai import Agent, ModelRetry, RunContext, StructuredDict, ToolOutput  # noqa: E402
from pydantic_ai.capabilities import AbstractCapability, WrapRunHandler  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    BinaryContent,
    ModelMessage,
    ModelRequest,
    SystemPromptPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext  # noqa: E402
from pydantic_ai.run import AgentRunResult  # noqa: E402

__all__ = [
    "CHANNELS",
    "FULL_HISTORY",
    "ON_REFUSAL",
    "RAISE",
    "RECEIPT_ONLY",
    "RESULT",
    "HandoffRefusal",
    "HandoffRefused",
    "ReceiptGate",
    "content_output",
    "content_validator",
    "hand_off",
]

FULL_HISTORY: Final = "full_history"
"""Channel arm: the receiving agent runs with the sending agent's messages."""
RECEIPT_ONLY: Final = "receipt_only"
"""Channel arm: the receiving agent runs on the signed receipt alone."""
CHANNELS: Final = (FULL_HISTORY, RECEIPT_ONLY)
"""The channel arms by name."""
ADAPTER: Final = "pydantic-ai"
RESULT: Final = "result"
"""``on_refusal`` default: a refused run returns a result whose ``output`` is a
:class:`HandoffRefusal`."""
RAISE: Final = "raise"
"""``on_refusal``: a refused run raises :class:`HandoffRefused`."""
ON_REFUSAL: Final = (RESULT, RAISE)
"""The values of ``on_refusal``."""


class HandoffRefused(HandoffsError, PermissionError):
    """The gate (or the sender) refused a handoff; the receiving agent did not run.

    Attributes:
        handover: the refused :class:`~handoffs.adapters.Handover`, with the decision
            and its reasons.
    """

    code = "handoff-refused"

    def __init__(self, handover: Handover) -> None:
        self.handover = handover
        decision = handover.decision
        reasons = handover.reasons
        first = reasons[0] if reasons else None
        super().__init__(
            f"the {handover.refused_by or 'gate'} refused the handoff ("
            + ", ".join(r.code for r in reasons) + f"); action {decision.action}",
            code=first.code if first else self.code,
            json_path=first.json_path if first else "$",
        )


@attrs.frozen
class HandoffRefusal:
    """The output of a run whose handoff was refused (``on_refusal="result"``): the
    receiving model never ran. Declare it beside the agent's own output
    (``Agent[Deps, str | HandoffRefusal]``) and route on ``isinstance``.

    Attributes:
        handover: the refused :class:`~handoffs.adapters.Handover`.
    """

    handover: Handover

    @property
    def code(self) -> str:
        """The first reason's code (``decided-otherwise``, ``bad-signature``, ...)."""
        reasons = self.handover.reasons
        return reasons[0].code if reasons else HandoffRefused.code

    @property
    def action(self) -> str | None:
        """The gate's action (the ruling, or the contract's fail-closed action)."""
        return self.handover.decision.action

    def to_json(self) -> dict[str, Any]:
        """The refused handover as JSON (:meth:`~handoffs.adapters.Handover.to_json`)."""
        return self.handover.to_json()


def _refusal_mode(value: str) -> str:
    if value not in ON_REFUSAL:
        raise InvalidArgument(f"unknown on_refusal {value!r}; expected one of "
                              f"{list(ON_REFUSAL)}")
    return value


def content_output(signer: ReceiptSigner, *, name: str = "hand_off") -> ToolOutput[Any]:
    """The sending agent's ``output_type``: a strict tool whose parameters are the
    contract's content schema (no governance, grant or proof).
    """
    contract = signer.contract
    return ToolOutput(
        StructuredDict(content_schema(contract), name=name,
                       description=f"Hand the case on: {contract.description} Fill only the "
                                   "decision content; governance is stamped by the system."),
        name=name, strict=True)


def content_validator(signer: ReceiptSigner) -> Any:
    """An output validator for the sending agent: ``ModelRetry`` on content that sets a
    governance member (``untrusted-governance``) or breaks the content schema, naming
    where; valid content is returned unchanged.
    """
    validator = jsonschema.Draft202012Validator(content_schema(signer.contract))

    def validate(output: Mapping[str, Any]) -> Mapping[str, Any]:
        clash = sorted(PROTECTED_CONTENT.intersection(output))
        if clash:
            raise ModelRetry(f"untrusted-governance @ $.{clash[0]}: governance is stamped by "
                             f"the system; remove {', '.join(clash)}")
        error = next(iter(sorted(validator.iter_errors(dict(output)), key=str)), None)
        if error is not None:
            raise ModelRetry(f"schema-invalid @ {error.json_path}: {error.message}")
        return output

    return validate


def _texts(prompt: Any) -> list[str]:
    """The text items of a prompt: the prompt itself, or of a multi-part prompt its
    ``str`` items and JSON binary items, in order.
    """
    if isinstance(prompt, str):
        return [prompt]
    if not isinstance(prompt, Sequence):
        return []
    texts = []
    for item in prompt:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, BinaryContent) and item.media_type == "application/json":
            texts.append(item.data.decode("utf-8", "replace"))
    return texts


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _is_object(text: str) -> bool:
    try:
        return isinstance(loads(text), Mapping)
    except MalformedJSON:
        return False


@dataclasses.dataclass
class ReceiptGate(AbstractCapability[Any]):
    """The receiving agent's gate: ``wrap_run`` decides the run's prompt (the signed
    receipt as text, or the first text item of a multi-part prompt) before the run
    starts. Unless the gate accepts it, the run ends without calling the model: its
    result's ``output`` is a :class:`HandoffRefusal` (``on_refusal="result"``, the
    default), or it raises :class:`HandoffRefused` (``on_refusal="raise"``). On
    acceptance the model is shown the handover (content and a reference to the
    receipt) in the receipt's place.

    A run whose message history holds a receipt this gate admitted continues that
    conversation: it runs without a new receipt, unless its prompt is a JSON object
    (a new handoff, gated).

    Attributes:
        receiver: the receiving side's receiver contract behind its gate.
        on_overruled: when the gate admits the receipt but decides another action than
            the proposal (or escalates): ``"refuse"`` (default) refuses the run with the
            reason ``decided-otherwise``; ``"continue"`` runs the model on an accepted
            ruling, the handover's decision the gate's action and the proposal as
            ``overruled_proposal``.
        on_refusal: ``"result"`` (default) or ``"raise"``.
    """

    receiver: Receiver = dataclasses.field(kw_only=True)
    on_overruled: str = dataclasses.field(default=REFUSE, kw_only=True)
    on_refusal: str = dataclasses.field(default=RESULT, kw_only=True)
    _admitted: dict[str, Handover] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        overruled_mode(self.on_overruled)
        _refusal_mode(self.on_refusal)

    def _admitted_in(self, messages: Sequence[ModelMessage]) -> bool:
        return any(_digest(text) in self._admitted
                   for message in messages if isinstance(message, ModelRequest)
                   for part in message.parts if isinstance(part, UserPromptPart)
                   for text in _texts(part.content))

    async def wrap_run(self, ctx: RunContext[Any], *,
                       handler: WrapRunHandler) -> AgentRunResult[Any]:
        """Gate the prompt before the run starts; a refusal ends it (a result or an
        exception, as ``on_refusal`` says) without calling the model.
        """
        texts = _texts(ctx.prompt)
        if self._admitted_in(ctx.messages) and not any(_is_object(t) for t in texts):
            return await handler()  # a later turn of a conversation this gate admitted
        handover = admit(receipt_text(texts[0]) if texts else None, receiver=self.receiver,
                         overruled=self.on_overruled, adapter=ADAPTER)
        if not handover.accepted:
            if self.on_refusal == RAISE:
                raise HandoffRefused(handover)
            return AgentRunResult(HandoffRefusal(handover))
        self._admitted[_digest(texts[0])] = handover
        return await handler()

    async def before_model_request(self, ctx: RunContext[Any],
                                   request_context: ModelRequestContext,
                                   ) -> ModelRequestContext:
        """Show the model the handover where the admitted receipt was (the history
        keeps the signed receipt).
        """
        return dataclasses.replace(request_context, messages=[
            self._shown(message) for message in request_context.messages])

    def _shown(self, message: ModelMessage) -> ModelMessage:
        if not isinstance(message, ModelRequest):
            return message
        parts = [self._part_shown(part) if isinstance(part, UserPromptPart) else part
                 for part in message.parts]
        return dataclasses.replace(message, parts=parts)

    def _part_shown(self, part: UserPromptPart) -> UserPromptPart:
        def shown(item: Any) -> Any:
            for text in _texts([item]):
                if handover := self._admitted.get(_digest(text)):
                    return handover.to_text()
            return item
        content = part.content
        return dataclasses.replace(part, content=shown(content) if isinstance(content, str)
                                   else [shown(item) for item in content])


def _without_system_prompts(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    kept: list[ModelMessage] = []
    for message in messages:
        if not isinstance(message, ModelRequest):
            kept.append(message)
            continue
        parts = [p for p in message.parts if not isinstance(p, SystemPromptPart)]
        if parts:
            kept.append(dataclasses.replace(message, parts=parts))
    return kept


async def hand_off(
    drafted: AgentRunResult[Any],
    to: Agent[Any, Any],
    *,
    signer: ReceiptSigner,
    case: Case | Any,
    channel: str = FULL_HISTORY,
    transport: Transport | None = None,
    deps: Any = None,
    on_refusal: str = RESULT,
) -> AgentRunResult[Any]:
    """Sign the sending agent's output, carry it, and run the receiving agent on it.

    ``case`` is a :class:`~handoffs.adapters.Case` or any context
    :func:`~handoffs.adapters.case_of` reads; one that names no case is the sender's
    refusal ``no-case``.

    A refusal — by the sender (content it will not sign) or by ``to``'s
    :class:`ReceiptGate` — is a result whose ``output`` is a :class:`HandoffRefusal`
    (the receiving model never ran); with ``on_refusal="raise"`` the sender's refusal
    raises :class:`HandoffRefused` (the gate's follows its own ``on_refusal``).

    Raises:
        HandoffRefused: ``on_refusal="raise"`` and the sender refused the content.
        ValueError: ``InvalidArgument`` (also a TypeError), unknown ``channel`` or
            ``on_refusal``.
    """
    if channel not in CHANNELS:
        raise InvalidArgument(f"unknown channel {channel!r}; expected one of {list(CHANNELS)}")
    _refusal_mode(on_refusal)
    try:
        message = sign_content(drafted.output, signer=signer, case=case_in(case))
    except HandoffsError as exc:
        handover = refused(signer.contract, exc, adapter=ADAPTER)
        if on_refusal == RAISE:
            raise HandoffRefused(handover) from exc
        return AgentRunResult(HandoffRefusal(handover))
    if transport is not None:
        message = transport(message)
    if channel == RECEIPT_ONLY:
        return await to.run(message.decode(), deps=deps)
    # The sender's system prompt is the sender's: the receiving agent gets its own.
    history = _without_system_prompts(drafted.all_messages())
    own = await to.system_prompt_parts(deps=deps)
    if own:
        history.insert(0, ModelRequest(parts=list(own)))
    return await to.run(message.decode(), message_history=history, deps=deps)
