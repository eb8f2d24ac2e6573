"""Building chains: start one, add a signed hop, approve the proposal."""

from __future__ import annotations

import uuid
from datetime import datetime

import attrs

from handoffs._errors import InvalidArgument, ReceiptValidationError
from handoffs.contracts import Authority
from handoffs.integrity import SigningKey, sign
from handoffs.receivers.chains._contract import (
    _CONTRACT_NAME,
    _CONTRACT_VERSION,
    _MAX_WIRE_HOPS,
    HOP_PROOF_PURPOSE,
    HopRole,
)
from handoffs.receivers.chains._format import DerivedFrom, HandoffChain, Hop
from handoffs.receivers.chains._schema import _schema_violations, _typed_violations

__all__ = ["add_hop", "approve", "start_chain"]


def start_chain(*, case_id: str, id: str | None = None) -> HandoffChain:
    """Return an empty chain for ``case_id`` (add hops with :func:`add_hop`).

    Raises:
        ValueError: ``InvalidArgument`` (also a TypeError), ``case_id`` or ``id`` is not
            a valid identifier.

    """
    return HandoffChain(id=id or f"urn:uuid:{uuid.uuid4()}", case_id=case_id)


def _aware(value: object, name: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument(f"{name} must be a timezone-aware datetime, got {value!r}")
    return value


def _validated(chain: HandoffChain) -> HandoffChain:
    doc = chain.to_json()
    violations = _schema_violations(doc) or _typed_violations(doc)
    if violations:
        raise ReceiptValidationError(
            violations, contract=_CONTRACT_NAME, version=_CONTRACT_VERSION
        )
    return chain


def add_hop(
    chain: HandoffChain,
    key: SigningKey,
    *,
    role: HopRole | str,
    receiver: str,
    authority: Authority | str,
    valid_until: datetime,
    transformation: str,
    created: datetime,
    action: str | None = None,
    sender: str | None = None,
    expires: datetime | None = None,
    proof_id: str | None = None,
) -> HandoffChain:
    """Return a new chain with one more hop, signed by ``key``.

    The hop's ``derived_from`` pins the digest of the current last hop (with its
    proofs and approvals), and its ``chain_id`` and ``case_id`` are the chain's, so
    the proof covers the envelope too. ``sender`` defaults to the last hop's ``receiver``
    (principal alignment), and must be given for the first hop; it has to be the key
    ring's controller of ``key``, or receivers will refuse the hop. ``created`` and
    ``expires`` go into the hop's proof, and ``proof_id`` is its ``id`` (a fresh
    ``urn:uuid`` by default; give one to sign the same bytes again).

    Raises:
        ValueError: ``InvalidArgument`` (also a TypeError), a missing ``sender`` on hop 0,
            a wrong type or a naive datetime; an unknown role or authority, a DECIDE or
            proposer hop without an action, an invalid identifier or an over-long
            transformation.
        ReceiptValidationError: the signed chain would not satisfy the schema.

    """
    if not isinstance(chain, HandoffChain):
        raise InvalidArgument(f"chain must be a HandoffChain, got {type(chain).__name__}")
    if not isinstance(key, SigningKey):
        raise InvalidArgument(f"key must be a SigningKey, got {type(key).__name__}")
    _aware(valid_until, "valid_until")
    _aware(created, "created")
    if expires is not None:
        _aware(expires, "expires")
    if len(chain.hops) >= _MAX_WIRE_HOPS:
        raise InvalidArgument(f"a chain holds at most {_MAX_WIRE_HOPS} hops")
    parent = chain.hops[-1] if chain.hops else None
    if sender is None:
        if parent is None:
            raise InvalidArgument("the first hop needs sender=")
        sender = parent.receiver
    unsigned = Hop(
        chain_id=chain.id,
        hop=len(chain.hops),
        case_id=chain.case_id,
        role=role,
        sender=sender,
        receiver=receiver,
        authority=authority,
        valid_until=valid_until,
        derived_from=None if parent is None else DerivedFrom(parent.digest),
        transformation=transformation,
        action=action,
    )
    signed = sign(
        unsigned.to_json(),
        key,
        purpose=HOP_PROOF_PURPOSE,
        created=created,
        expires=expires,
        proof_id=proof_id or f"urn:uuid:{uuid.uuid4()}",
    )
    hop = attrs.evolve(unsigned, proof=signed["proof"])
    return _validated(attrs.evolve(chain, hops=(*chain.hops, hop)))


def approve(
    chain: HandoffChain,
    approver_key: SigningKey,
    *,
    created: datetime,
    expires: datetime | None = None,
) -> HandoffChain:
    """Return a new chain whose last hop, the proposal, carries an approval.

    The approval is a proof by ``approver_key`` chained (``previousProof``) to the
    proposer's proof, so it covers the exact proposal and the proposer's signature.
    Approve before adding the next hop: that hop's digest then covers the approval.

    Raises:
        ValueError: ``InvalidArgument`` (also a TypeError), a wrong type or a naive
            datetime; the chain does not end with a proposer hop, or the proposal's proof
            has no ``id`` to chain to.

    """
    if not isinstance(chain, HandoffChain):
        raise InvalidArgument(f"chain must be a HandoffChain, got {type(chain).__name__}")
    if not isinstance(approver_key, SigningKey):
        raise InvalidArgument(
            f"approver_key must be a SigningKey, got {type(approver_key).__name__}"
        )
    _aware(created, "created")
    if expires is not None:
        _aware(expires, "expires")
    if not chain.hops or chain.hops[-1].role is not HopRole.PROPOSER:
        raise InvalidArgument(
            "only a proposal (a proposer hop) at the end of the chain is approved"
        )
    proposal = chain.hops[-1]
    proofs = proposal.proofs
    primary_id = proofs[0].get("id") if proofs else None
    if not isinstance(primary_id, str):
        raise InvalidArgument("the proposal's proof has no id to chain an approval to")
    signed = sign(
        proposal.to_json(),
        approver_key,
        purpose=HOP_PROOF_PURPOSE,
        created=created,
        expires=expires,
        proof_id=f"urn:uuid:{uuid.uuid4()}",
        previous_proof=primary_id,
    )
    approved = attrs.evolve(proposal, proof=signed["proof"])
    return _validated(attrs.evolve(chain, hops=(*chain.hops[:-1], approved)))
