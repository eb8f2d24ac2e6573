"""Sender-side encoders: evidence in, message content out.

An encoder (deterministic code or a language model) writes only *content*. The
governance members come from a trusted, deterministic :class:`GovernanceService`
and are merged by :func:`compose`, which refuses content that tries to set them.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import attrs

from handoffs._errors import HandoffsError
from handoffs.contracts._contract import Authority, Contract, Uncertainty
from handoffs.contracts._receipt import (
    ENVELOPE_MEMBERS,
    GOVERNANCE_FIELDS,
    EvidenceRef,
    Governance,
    Receipt,
    _converter,
    structure,
)

__all__ = [
    "Encoder",
    "GovernanceService",
    "ReceiptEncoder",
    "UntrustedGovernance",
    "compose",
]

E = TypeVar("E")
E_contra = TypeVar("E_contra", contravariant=True)
S = TypeVar("S")
A = TypeVar("A", bound=enum.Enum)


_PROTECTED = frozenset(GOVERNANCE_FIELDS) | frozenset(ENVELOPE_MEMBERS)


class UntrustedGovernance(HandoffsError, ValueError):
    """Encoder content tried to set a governance or envelope member."""

    code = "untrusted-governance"


@runtime_checkable
class Encoder(Protocol[E_contra]):
    """Turns the sender's evidence into message content (never governance)."""

    @property
    def name(self) -> str:
        """Stable name of the encoding strategy (e.g. ``"decision_contract"``)."""
        ...

    def encode(self, evidence: E_contra) -> dict[str, Any]:
        """Content members of the message for one piece of evidence."""
        ...


def compose(
    content: Mapping[str, Any],
    governance: Governance,
    *,
    contract: Contract[Any, Any] | None = None,
    receipt_id: str | None = None,
) -> dict[str, Any]:
    """Merge encoder content with the governance stamp into one message.

    With ``contract``, the message also names the contract version and gets a receipt
    id, so that it is a receipt document ready to validate and sign.

    Raises:
        UntrustedGovernance: the content names a governance or envelope member.
    """
    clash = sorted(set(content) & _PROTECTED)
    if clash:
        raise UntrustedGovernance(
            f"encoder content may not set {', '.join(clash)}", json_path=f"$.{clash[0]}"
        )
    message: dict[str, Any] = {}
    if contract is not None:
        message["contract"] = contract.id
        message["id"] = receipt_id or f"urn:uuid:{uuid.uuid4()}"
    message.update(content)
    message.update(governance.to_json())
    return message


@attrs.frozen
class GovernanceService:
    """The deterministic identity/policy service that stamps governance members.

    It is configured, not prompted: sender, receiver, policy version, validity and
    the authority a sender may claim come from here, so that no text in the evidence
    or from a model can change them.

    Attributes:
        sender: identity of the sending agent.
        receiver: identity of the one receiver (the audience).
        policy_version: the policy version in force.
        valid_until: expiry stamped on every receipt.
        may_decide: whether this sender is authorised to claim ``DECIDE``.
    """

    sender: str
    receiver: str
    policy_version: str
    valid_until: datetime
    may_decide: bool = False

    def stamp(
        self,
        *,
        case_id: str,
        evidence_refs: Sequence[EvidenceRef | str],
        authority: Authority = Authority.ADVISE,
    ) -> Governance:
        """Issue the governance members for one case.

        Raises:
            UntrustedGovernance: ``DECIDE`` was asked for a sender not authorised to decide.
        """
        if authority is Authority.DECIDE and not self.may_decide:
            raise UntrustedGovernance(
                f"{self.sender} is not authorised to decide", code="authority-not-granted",
                json_path="$.authority",
            )
        return Governance(
            case_id=case_id,
            sender=self.sender,
            receiver=self.receiver,
            authority=authority,
            policy_version=self.policy_version,
            valid_until=self.valid_until,
            evidence_refs=tuple(evidence_refs),
        )

    def receipt(
        self,
        contract: Contract[S, A],
        content: Mapping[str, Any],
        *,
        case_id: str,
        evidence_refs: Sequence[EvidenceRef | str],
        authority: Authority = Authority.ADVISE,
        receipt_id: str | None = None,
    ) -> Receipt[S, A]:
        """Stamp ``content`` and return the validated, typed (unsigned) receipt."""
        governance = self.stamp(case_id=case_id, evidence_refs=evidence_refs,
                                authority=authority)
        return structure(contract, compose(content, governance, contract=contract,
                                           receipt_id=receipt_id))


def _resolved(_: object) -> Uncertainty:
    """Default uncertainty: resolved (module-level, so encoders pickle)."""
    return Uncertainty.RESOLVED


@attrs.frozen
class ReceiptEncoder(Generic[E, S, A]):
    """The decision-contract encoder for any contract.

    It carries the reference action, the decisive state, the uncertainty status and
    the contract's counterfactual trigger, nothing else.

    Attributes:
        contract: the contract whose receipts it writes.
        state_of: extracts the decisive state from the sender's evidence.
        uncertainty_of: classifies the evidence's uncertainty (default: resolved).
        name: strategy name.
    """

    contract: Contract[S, A]
    state_of: Callable[[E], S]
    uncertainty_of: Callable[[E], Uncertainty] = attrs.field(default=_resolved)
    name: str = "decision_contract"

    def encode(self, evidence: E) -> dict[str, Any]:
        """Content members: proposed action, decision state, uncertainty, trigger."""
        state = self.state_of(evidence)
        return {
            "proposed_action": self.contract.decide(state).value,
            "decision_state": _converter.unstructure(state),
            "uncertainty": self.uncertainty_of(evidence).value,
            "counterfactual_trigger": self.contract.counterfactual_trigger,
        }
