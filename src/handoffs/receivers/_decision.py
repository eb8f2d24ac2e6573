"""The gate's typed result, and the one interface every receiver contract implements."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import attrs

__all__ = ["Decision", "Reason", "Receiver", "Step", "Verdict"]


class Step(enum.IntEnum):
    """The gate's steps, numbered as in the code comments and the docs."""

    PARSE = 1
    """(1) parse with limits and pick the contract version the message names."""
    PROOFS = 2
    """(2) verify proofs, authority grant, audience, validity window and replay."""
    CONTEXT = 3
    """(3) check the contract's declared receiver-context dependencies."""
    EVIDENCE = 4
    """(4) resolve evidence references, verify digests, optionally read claims back."""
    POLICY = 5
    """(5) apply the receiver's policy."""


class Verdict(enum.Enum):
    """How the receiver disposed of the message.

    ``ACCEPT``: admitted and decided. ``ESCALATE``: admitted, but the receiver
    refers the decision (a missing context dependency or an undetermined state, as
    the contract says). ``REJECT``: not admitted.
    """

    ACCEPT = "ACCEPT"
    ESCALATE = "ESCALATE"
    REJECT = "REJECT"


@attrs.frozen
class Reason:
    """One typed reason: a stable ``code``, a message, where, and the step that raised it."""

    code: str
    message: str
    step: Step
    json_path: str = "$"

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"code": self.code, "message": self.message, "step": int(self.step),
                "json_path": self.json_path}


@attrs.frozen
class Decision:
    """What a receiver decided about one message.

    Attributes:
        verdict: ACCEPT, ESCALATE or REJECT.
        action: the action value taken (a rejected or escalated message still maps to
            the contract's fail-closed action, so the caller always knows what to do).
        step: the gate step that decided.
        reasons: typed reasons, empty for a clean ACCEPT.
        receiver: name of the receiver contract that decided.
        contract: the contract id the message named, when known.
        receipt_id: the receipt id, when known.
        sender: the verified sender, when known.
        authority: the authority the receiver acted under, when known.
        counterfactual_trigger: the receipt's counterfactual trigger, when known.
        record: receiver-specific facts (e.g. a model receiver's frozen prompt digest,
            model route and tools), recorded with every decision.
        readback: the outcome of step (4)'s readback of decisive claims against the
            resolved evidence: ``"agree"``, ``"disagree"``, ``"no-claims"`` (read back,
            but no evidence made a claim about a decision field), or ``None`` when the
            message was not read back.
    """

    verdict: Verdict
    action: str | None
    step: Step
    reasons: tuple[Reason, ...] = ()
    receiver: str = ""
    contract: str | None = None
    receipt_id: str | None = None
    sender: str | None = None
    authority: str | None = None
    counterfactual_trigger: str | None = None
    record: Mapping[str, Any] = attrs.field(factory=dict)
    readback: str | None = None

    @property
    def admitted(self) -> bool:
        """True unless the message was rejected."""
        return self.verdict is not Verdict.REJECT

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (what ``handoffs gate`` prints)."""
        return {
            "verdict": self.verdict.value,
            "admitted": self.admitted,
            "action": self.action,
            "step": int(self.step),
            "reasons": [r.to_json() for r in self.reasons],
            "receiver": self.receiver,
            "contract": self.contract,
            "receipt_id": self.receipt_id,
            "sender": self.sender,
            "authority": self.authority,
            "counterfactual_trigger": self.counterfactual_trigger,
            "record": dict(self.record),
            "readback": self.readback,
        }


@runtime_checkable
class Receiver(Protocol):
    """A receiver contract: decides one message, never raises on bad input.

    ``deterministic`` receivers may be memoised by the lab (on a key it derives from
    what the receiver declares it reads, else on the canonical message); sampled ones
    (e.g. a language model at temperature > 0) are repeated per epoch.
    """

    @property
    def name(self) -> str:
        """Stable name of the receiver contract."""
        ...

    @property
    def deterministic(self) -> bool:
        """Whether the same message always yields the same decision."""
        ...

    def receive(self, message: bytes | str | Mapping[str, Any]) -> Decision:
        """Decide one message (raw bytes/text or a parsed JSON object)."""
        ...
