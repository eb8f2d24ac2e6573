"""The sender: configured once, it turns decision content into signed receipt bytes.

Agent code (deterministic or a model) writes only the *content* of a receipt. The
:class:`Sender` adds everything else from its configuration — the governance stamp
from its :class:`~handoffs.contracts.GovernanceService`, the authority grant from its
:class:`GrantSource`, the receipt id and the sender's proof — so that no text can set
authority, audience or validity, and no call repeats governance data.

:func:`~handoffs.contracts.issue_grant` and :meth:`~handoffs.contracts.Receipt.sign`
are the low-level layer underneath.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import attrs

from handoffs._errors import InvalidArgument
from handoffs._time import utc_now
from handoffs.contracts._contract import Authority, Contract
from handoffs.contracts._encoders import GovernanceService
from handoffs.contracts._receipt import DecisionContent, EvidenceRef, Governance, Receipt
from handoffs.contracts._signing import issue_grant, sign_receipt
from handoffs.integrity import KeyRing, Signer

__all__ = ["GrantIssuer", "GrantSource", "Sender"]

S = TypeVar("S")
A = TypeVar("A", bound=enum.Enum)


@runtime_checkable
class GrantSource(Protocol):
    """Where a sender gets the signed authority grant for one receipt.

    :class:`GrantIssuer` signs grants locally with the policy service's key; a
    remote policy service is another implementation of this protocol.
    """

    def grant(
        self, governance: Governance, *, contract: Contract[Any, Any], now: datetime
    ) -> Mapping[str, Any]:
        """The signed grant document covering ``governance`` under ``contract``."""
        ...


def _signer(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, Signer):
        raise InvalidArgument(
            f"{attribute.name} must be a Signer (SigningKey, P256SigningKey, CallableSigner "
            f"or your own), got {type(value).__name__}")


def _public_key(signer: Signer, what: str) -> str:
    multibase = getattr(signer, "public_key_multibase", None)
    if not isinstance(multibase, str):
        raise InvalidArgument(f"the {what} ({type(signer).__name__}) has no "
                              "public_key_multibase: enrol its public key yourself")
    return multibase


def _roles(value: Iterable[str]) -> frozenset[str]:
    if isinstance(value, str):
        raise InvalidArgument("roles must be an iterable of role names, not one string")
    return frozenset(value)


@attrs.frozen(kw_only=True)
class GrantIssuer:
    """The deterministic policy service, signing grants with its own key.

    Each grant covers exactly one receipt's governance stamp: its sender (subject),
    receiver (audience), case, contract, policy version, the one authority the stamp
    claims, and the stamp's validity.

    Attributes:
        key: the policy service's :class:`~handoffs.integrity.Signer` of any registered
            suite (an Ed25519 or P-256 key in memory, or a KMS through
            :class:`~handoffs.integrity.CallableSigner`); its key-ring entry holds the
            ``policy-service`` role and the ``capabilityDelegation`` purpose.
        issuer: the policy service's identity, as the key ring names its controller.
        roles: roles the grant says the subject holds for the case.
    """

    key: Signer = attrs.field(validator=_signer)
    issuer: str = attrs.field(validator=attrs.validators.instance_of(str))
    roles: frozenset[str] = attrs.field(default=frozenset(), converter=_roles)

    def grant(
        self, governance: Governance, *, contract: Contract[Any, Any], now: datetime
    ) -> dict[str, Any]:
        """Issue and sign the grant for ``governance`` (see
        :class:`~handoffs.contracts._sender.GrantSource`).
        """
        return issue_grant(
            self.key,
            issuer=self.issuer,
            subject=governance.sender,
            audience=governance.receiver,
            contract=contract,
            case_id=governance.case_id,
            policy_version=governance.policy_version,
            authority=[governance.authority],
            valid_until=governance.valid_until,
            created=now,
            roles=self.roles,
        )


def _optional_grants(_: object, __: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, GrantSource):
        raise InvalidArgument(f"grants must be a GrantSource (e.g. GrantIssuer) or None, "
                        f"got {type(value).__name__}")


def _callable(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not callable(value):
        raise InvalidArgument(f"{attribute.name} must be callable, got {type(value).__name__}")


@attrs.frozen(kw_only=True)
class Sender(Generic[S, A]):
    """The sending agent's signer for one contract, configured once.

    Example::

        sender = Sender(
            contract=MY_CONTRACT,
            key=sender_key,
            governance=GovernanceService(sender="evidence-specialist",
                                         receiver="case-owner", policy_version="PAY-7.4",
                                         valid_for=timedelta(hours=1)),
            grants=GrantIssuer(key=service_key, issuer="policy-service"),
        )
        message = sender.sign(content, case_id="case-1842", evidence_refs=[...])

    ``content`` is what an encoder or a model wrote — the members of
    :meth:`~handoffs.contracts.Contract.content_schema` (``proposed_action``,
    ``decision_state``, ``uncertainty``, ``counterfactual_trigger``, ``notes``) as a
    mapping, or :class:`~handoffs.contracts.DecisionContent`. Any governance or
    envelope member in it raises :class:`~handoffs.contracts.UntrustedGovernance`: governance
    only ever comes from ``governance``.

    Attributes:
        contract: the contract version every receipt follows.
        key: the sending agent's :class:`~handoffs.integrity.Signer` (its key-ring
            entry names the governance service's ``sender`` as controller): an Ed25519
            or P-256 key in memory, or a KMS through
            :class:`~handoffs.integrity.CallableSigner`. Its suite must be one
            :attr:`~handoffs.contracts.Contract.cryptosuites` admits, else signing
            fails with ``suite-not-admitted``.
        governance: stamps sender, receiver, policy version, authority and validity.
        grants: issues the authority grant for each receipt; ``None`` sends receipts
            without a grant (a gate refuses them unless told not to require one).
        clock: the signing time, injectable; defaults to the system clock (UTC).
    """

    contract: Contract[S, A] = attrs.field(validator=attrs.validators.instance_of(Contract))
    key: Signer = attrs.field(validator=_signer)
    governance: GovernanceService = attrs.field(
        validator=attrs.validators.instance_of(GovernanceService))
    grants: GrantSource | None = attrs.field(validator=_optional_grants)
    clock: Callable[[], datetime] = attrs.field(default=utc_now, validator=_callable)

    def receipt(
        self,
        content: DecisionContent[S, A] | Mapping[str, Any],
        *,
        case_id: str,
        evidence_refs: Sequence[EvidenceRef | str],
        authority: Authority = Authority.ADVISE,
        id: str | None = None,
    ) -> Receipt[S, A]:
        """The signed receipt for ``content`` in one case.

        Args:
            content: the decision content (see the class docstring).
            case_id: the case the decision is about.
            evidence_refs: references to the authoritative evidence.
            authority: what the receipt asks of the receiver; ``DECIDE`` only when the
                governance service lets this sender decide.
            id: the receipt id (default: a fresh ``urn:uuid``).

        Raises:
            UntrustedGovernance: the content names a governance or envelope member,
                or ``DECIDE`` is asked of a sender not authorised to decide.
            ReceiptValidationError: the receipt does not satisfy the contract.
        """
        now = self.clock()
        governance = self.governance.stamp(case_id=case_id, evidence_refs=evidence_refs,
                                           authority=authority, now=now)
        unsigned = Receipt.build(self.contract, content, governance, id=id)
        grant = (None if self.grants is None
                 else self.grants.grant(governance, contract=self.contract, now=now))
        return sign_receipt(unsigned, self.key, grant=grant, created=now, contract=self.contract)

    def sign(
        self,
        content: DecisionContent[S, A] | Mapping[str, Any],
        *,
        case_id: str,
        evidence_refs: Sequence[EvidenceRef | str],
        authority: Authority = Authority.ADVISE,
        id: str | None = None,
    ) -> bytes:
        """The signed receipt for ``content`` as canonical bytes, ready to send.

        Takes the arguments of :meth:`receipt` and raises what it raises.
        """
        return self.receipt(content, case_id=case_id, evidence_refs=evidence_refs,
                            authority=authority, id=id).to_bytes()

    def key_ring(self, *, not_before: datetime) -> KeyRing:
        """The public half of this sender: a key ring holding its key (controller: the
        governance service's ``sender``) and, when :attr:`grants` is a
        :class:`GrantIssuer`, the issuer's key (role ``policy-service``, purpose
        ``capabilityDelegation``), each valid from ``not_before``.

        For a receiver in the same program (an example, a test, a lab). A receiver
        elsewhere pins the keys it was given out of band: the trust file
        ``handoffs keys new --trust`` writes, or its own
        :meth:`~handoffs.integrity.KeyRing.enrol` calls.

        Raises:
            ValueError: ``InvalidArgument`` (also a TypeError), ``not_before`` has no time zone, or
                :attr:`grants` is a
                remote grant source (its key is not here to enrol), or a signer has no
                ``public_key_multibase``.
        """
        if not isinstance(not_before, datetime) or not_before.utcoffset() is None:
            raise InvalidArgument(f"not_before must be a timezone-aware datetime, got "
                                  f"{not_before!r}")
        ring = KeyRing().enrol(_public_key(self.key, "sender's key"),
                               controller=self.governance.sender, not_before=not_before)
        if self.grants is None:
            return ring
        if not isinstance(self.grants, GrantIssuer):
            raise InvalidArgument(f"the grant source ({type(self.grants).__name__}) holds no "
                                  f"key here: enrol the policy service's key yourself")
        return ring.enrol(_public_key(self.grants.key, "grant issuer's key"),
                          controller=self.grants.issuer,
                          roles={"policy-service"}, purposes={"capabilityDelegation"},
                          not_before=not_before)
