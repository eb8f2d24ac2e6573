"""Pydantic AI: a strict content output with ``ModelRetry``, and a gate capability.

Pydantic AI has no handoff primitive; agents hand off in code ("programmatic
hand-off"). The adapter gives both ends of that code:

* **sender** — :func:`content_output` is the sending agent's ``output_type``: a strict
  tool output whose schema is the contract's content schema. Register
  :func:`content_validator` with ``agent.output_validator``: content that sets a
  governance member or breaks the schema is answered with ``ModelRetry`` naming the
  member, so the model corrects itself before anything is signed.
* **receiver** — :class:`ReceiptGate` is a capability of the receiving agent: its
  ``before_run`` gates the run's prompt (the signed receipt) before the model is
  called and raises :class:`HandoffRefused` (with the gate's decision) on refusal.

:func:`hand_off` joins them: sign the sending agent's output, carry it, run the
receiving agent on it — with the sender's messages (:data:`FULL_HISTORY`) or on the
receipt alone (:data:`RECEIPT_ONLY`)::

    evidence = Agent(model, output_type=content_output(sender), deps_type=CaseFile)
    evidence.output_validator(content_validator(sender))
    case_owner = Agent(model, capabilities=[ReceiptGate(receiver=receiver)])
    drafted = await evidence.run(dossier, deps=case_file)
    decided = await hand_off(drafted, case_owner, signer=sender, case=case_file)

Needs the ``pydantic-ai`` extra (``pydantic-ai-slim`` is enough).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from handoffs._errors import HandoffsError, InvalidArgument
from handoffs.adapters._handover import (
    PROTECTED_CONTENT,
    Case,
    Handover,
    ReceiptSigner,
    Transport,
    admit,
    content_schema,
    refused,
    require,
    sign_content,
)
from handoffs.receivers import Receiver

require("pydantic_ai", extra="pydantic-ai", feature="the Pydantic AI adapter")

import jsonschema  # noqa: E402
from pydantic_ai import Agent, ModelRetry, RunContext, StructuredDict, ToolOutput  # noqa: E402
from pydantic_ai.capabilities import AbstractCapability  # noqa: E402
from pydantic_ai.run import AgentRunResult  # noqa: E402

__all__ = [
    "CHANNELS",
    "FULL_HISTORY",
    "RECEIPT_ONLY",
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
        first = decision.reasons[0] if decision.reasons else None
        super().__init__(
            f"the {handover.refused_by or 'gate'} refused the handoff ("
            + ", ".join(r.code for r in decision.reasons) + f"); action {decision.action}",
            code=first.code if first else self.code,
            json_path=first.json_path if first else "$",
        )


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


@dataclasses.dataclass
class ReceiptGate(AbstractCapability[Any]):
    """The receiving agent's gate: ``before_run`` decides the run's prompt (the signed
    receipt as text) and raises :class:`HandoffRefused` unless the gate accepts it.

    Attributes:
        receiver: the receiving side's receiver contract behind its gate.
    """

    receiver: Receiver = dataclasses.field(kw_only=True)

    async def before_run(self, ctx: RunContext[Any]) -> None:
        """Gate the prompt before the model is called."""
        prompt = ctx.prompt if isinstance(ctx.prompt, str) else ""
        handover = admit(prompt, receiver=self.receiver)
        if not handover.accepted:
            raise HandoffRefused(handover)


async def hand_off(
    drafted: AgentRunResult[Any],
    to: Agent[Any, Any],
    *,
    signer: ReceiptSigner,
    case: Case,
    channel: str = FULL_HISTORY,
    transport: Transport | None = None,
    deps: Any = None,
) -> AgentRunResult[Any]:
    """Sign the sending agent's output, carry it, and run the receiving agent on it.

    Raises:
        HandoffRefused: the sender refused the content, or ``to``'s
            :class:`ReceiptGate` refused the receipt (the receiving model never ran).
        ValueError: ``InvalidArgument`` (also a TypeError), unknown ``channel``.
    """
    if channel not in CHANNELS:
        raise InvalidArgument(f"unknown channel {channel!r}; expected one of {list(CHANNELS)}")
    try:
        message = sign_content(drafted.output, signer=signer, case=case)
    except HandoffsError as exc:
        raise HandoffRefused(refused(signer.contract, exc)) from exc
    if transport is not None:
        message = transport(message)
    history = drafted.all_messages() if channel == FULL_HISTORY else None
    return await to.run(message.decode(), message_history=history, deps=deps)
