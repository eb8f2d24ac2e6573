"""Sender-side encoders: evidence in, message content out.

An encoder (deterministic code or a language model) writes only *content*. The
governance members come from a trusted, deterministic :class:`GovernanceService`;
:meth:`~handoffs.contracts.Receipt.build` and :func:`compose` refuse content that
tries to set them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import attrs

from handoffs._errors import InvalidArgument, UntrustedGovernance
from handoffs._members import PROTECTED_MEMBERS
from handoffs.contracts._contract import Authority, Contract, Uncertainty
from handoffs.contracts._fields import _converter
from handoffs.contracts._receipt import (
    EvidenceRef,
    Governance,
)

__all__ = [
    "Encoder",
    "GovernanceService",
    "ReceiptEncoder",
    "compose",
]

E = TypeVar("E")
E_contra = TypeVar("E_contra", contravariant=True)
S = TypeVar("S")
A = TypeVar("A", bound=enum.Enum)


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


def compose(content: Mapping[str, Any], governance: Governance) -> dict[str, Any]:
    """Merge encoder content with the governance stamp into one message that is not a
    receipt (the essay's baseline encodings: a score, an action alone, a full record).

    A receipt is built with :meth:`~handoffs.contracts.Receipt.build` (unsigned) or
    :class:`~handoffs.contracts.Sender` (signed).

    Raises:
        UntrustedGovernance: the content names a governance or envelope member.
    """
    clash = sorted(PROTECTED_MEMBERS.intersection(content))
    if clash:
        raise UntrustedGovernance(
            f"encoder content may not set {', '.join(clash)}", json_path=f"$.{clash[0]}"
        )
    message: dict[str, Any] = dict(content)
    message.update(governance.to_json())
    return message


def _validity(instance: GovernanceService, _: attrs.Attribute[Any], __: Any) -> None:
    until, span = instance.valid_until, instance.valid_for
    if (until is None) == (span is None):
        raise InvalidArgument("give the governance service exactly one of valid_until "
                         "(a fixed expiry) and valid_for (a span from the signing time)")
    if until is not None and until.tzinfo is None:
        raise InvalidArgument("valid_until must be timezone-aware")
    if span is not None and span <= timedelta(0):
        raise InvalidArgument(f"valid_for must be positive, got {span}")


@attrs.frozen(kw_only=True)
class GovernanceService:
    """The deterministic identity/policy service that stamps governance members.

    It is configured, not prompted: sender, receiver, policy version, validity and
    the authority a sender may claim come from here, so that no text in the evidence
    or from a model can change them.

    Attributes:
        sender: identity of the sending agent.
        receiver: identity of the one receiver (the audience).
        policy_version: the policy version in force.
        valid_until: a fixed expiry stamped on every receipt (reproducible runs, the
            lab), or ``None`` with ``valid_for``.
        valid_for: each receipt expires this long after it is stamped, or ``None``
            with ``valid_until``. Exactly one of the two is given.
        may_decide: whether this sender is authorised to claim ``DECIDE``.
    """

    sender: str
    receiver: str
    policy_version: str
    valid_until: datetime | None = attrs.field(default=None, validator=_validity)
    valid_for: timedelta | None = None
    may_decide: bool = False

    def expiry(self, now: datetime | None = None) -> datetime:
        """The ``valid_until`` a receipt stamped at ``now`` (default: UTC now) gets."""
        if self.valid_until is not None:
            return self.valid_until
        assert self.valid_for is not None  # noqa: S101 - the validator guarantees one
        moment = datetime.now(UTC) if now is None else now
        if moment.tzinfo is None:
            raise InvalidArgument("now must be timezone-aware")
        return moment + self.valid_for

    def stamp(
        self,
        *,
        case_id: str,
        evidence_refs: Sequence[EvidenceRef | str],
        authority: Authority = Authority.ADVISE,
        now: datetime | None = None,
    ) -> Governance:
        """Issue the governance members for one case, stamped at ``now`` (default: UTC
        now; it matters only with ``valid_for``).

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
            valid_until=self.expiry(now),
            evidence_refs=tuple(evidence_refs),
        )


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
