"""The typed model of a handoff chain (:class:`HandoffChain` of :class:`Hop` s), its
strict reading from JSON and its building: start one, add a signed hop, approve the
proposal.
"""

from __future__ import annotations

import contextlib
import copy
import enum
import uuid
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any, TypeVar

import attrs

from handoffs._errors import InvalidArgument, ReceiptValidationError
from handoffs._json import DEFAULT_LIMITS, JSONLimits, canonical_bytes, digest, load_object
from handoffs._time import format_time, parse_time
from handoffs.contracts import Authority
from handoffs.integrity import SigningKey, sign
from handoffs.receivers.chains._contract import (
    _CHAIN_ID,
    _CONTRACT_NAME,
    _CONTRACT_VERSION,
    _DIGEST,
    _IDENT,
    _MAX_TRANSFORMATION,
    _MAX_WIRE_HOPS,
    HANDOFF_CHAIN_CONTRACT,
    HOP_PROOF_PURPOSE,
    HopRole,
    _check_contract_member,
)
from handoffs.receivers.chains._schema import (
    _schema_violations,
    _typed_violations,
    handoff_chain_schema,
)

__all__ = ["DerivedFrom", "HandoffChain", "Hop"]


def _check_ident(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not _IDENT.fullmatch(value):
        raise InvalidArgument(f"{attribute.name} {value!r} is not a valid identifier",
                              code="bad-identifier", json_path=f"$.{attribute.name}")


def _check_optional_ident(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        _check_ident(instance, attribute, value)


def _check_aware(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument(f"{attribute.name} must be a timezone-aware datetime, got {value!r}",
                              code="naive-datetime", json_path=f"$.{attribute.name}")


def _check_hop_index(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _MAX_WIRE_HOPS:
        raise InvalidArgument(f"hop must be an integer in [0, {_MAX_WIRE_HOPS}), got {value!r}",
                              json_path="$.hop")


def _check_transformation(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not 1 <= len(value) <= _MAX_TRANSFORMATION:
        raise InvalidArgument(
            f"transformation must be a string of 1 to {_MAX_TRANSFORMATION} characters",
            code="bad-transformation", json_path="$.transformation",
        )


def _check_contract(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value != HANDOFF_CHAIN_CONTRACT:
        raise InvalidArgument(f"contract must be {HANDOFF_CHAIN_CONTRACT!r}, got {value!r}")


def _check_digest(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not _DIGEST.fullmatch(value):
        raise InvalidArgument(
            f"digest must be 'sha256:' and 64 lower-case hex digits, got {value!r}"
        )


def _check_chain_id(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not _CHAIN_ID.fullmatch(value):
        raise InvalidArgument(f"id must be a urn:uuid, got {value!r}")


def _hop_role(value: object) -> HopRole:
    return _enum(HopRole, value, "role")


def _authority(value: object) -> Authority:
    return _enum(Authority, value, "authority")


@attrs.frozen
class DerivedFrom:
    """The parent a hop was derived from, pinned by digest.

    ``digest`` is the digest of the parent hop exactly as received
    (RFC 8785 canonical form, its proofs included).
    """

    digest: str = attrs.field(validator=_check_digest)

    def to_json(self) -> dict[str, str]:
        """Wire form."""
        return {"digest": self.digest}


@attrs.frozen(kw_only=True)
class Hop:
    """One signed transformation in a handoff chain.

    Python attribute names equal the JSON member names. ``proof`` is kept as the JSON
    it arrived as (an object, or a proof set whose later members are approvals); it
    is verified by the receiver, not interpreted here.

    Attributes:
        contract: always ``handoff-chain/2.0.0``; binds the hop to its format.
        chain_id: the envelope ``id`` of the chain this hop was signed for.
        hop: the hop's position in the chain, from 0.
        case_id: the case the chain is about.
        role: the role the signer claims (checked against the key ring).
        sender: the signer's identity (must equal the key ring's controller).
        receiver: the one agent this hop is addressed to.
        authority: ADVISE (the receiver decides) or DECIDE (execute the action).
        valid_until: after this instant the hop must not be acted on.
        derived_from: the parent hop's digest; ``None`` only for hop 0.
        transformation: short, untrusted text saying what this hop changed.
        action: the action proposed or decided, if any.
        proof: the hop's Data Integrity proof(s), ``None`` while unsigned.

    """

    contract: str = attrs.field(default=HANDOFF_CHAIN_CONTRACT, validator=_check_contract)
    chain_id: str = attrs.field(validator=_check_chain_id)
    hop: int = attrs.field(validator=_check_hop_index)
    case_id: str = attrs.field(validator=_check_ident)
    role: HopRole = attrs.field(converter=_hop_role)
    sender: str = attrs.field(validator=_check_ident)
    receiver: str = attrs.field(validator=_check_ident)
    authority: Authority = attrs.field(converter=_authority)
    valid_until: datetime = attrs.field(validator=_check_aware)
    derived_from: DerivedFrom | None
    transformation: str = attrs.field(validator=_check_transformation)
    action: str | None = attrs.field(default=None, validator=_check_optional_ident)
    proof: Any = None

    def __attrs_post_init__(self) -> None:
        if self.action is None and (
            self.authority is Authority.DECIDE or self.role is HopRole.PROPOSER
        ):
            raise InvalidArgument("a DECIDE hop and a proposer hop must name an action",
                                  code="action-missing", json_path="$.action")

    @property
    def proofs(self) -> tuple[Mapping[str, Any], ...]:
        """The hop's proofs as a sequence (empty while unsigned)."""
        if self.proof is None:
            return ()
        if isinstance(self.proof, Mapping):
            return (self.proof,)
        return tuple(self.proof)

    @property
    def digest(self) -> str:
        """``sha256:<hex>`` of the canonical hop, proofs included (what a child pins)."""
        return digest(self.to_json())

    def to_json(self) -> dict[str, Any]:
        """Wire form (``action`` and ``proof`` omitted when unset)."""
        doc: dict[str, Any] = {
            "contract": self.contract,
            "chain_id": self.chain_id,
            "hop": self.hop,
            "case_id": self.case_id,
            "role": self.role.value,
            "sender": self.sender,
            "receiver": self.receiver,
            "authority": self.authority.value,
        }
        if self.action is not None:
            doc["action"] = self.action
        doc["valid_until"] = format_time(self.valid_until)
        doc["derived_from"] = None if self.derived_from is None else self.derived_from.to_json()
        doc["transformation"] = self.transformation
        if self.proof is not None:
            doc["proof"] = self.proof
        return doc


def _hops(value: Iterable[Hop]) -> tuple[Hop, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class HandoffChain:
    """A handoff chain: an envelope around the ordered, signed hops of one case.

    The envelope (``contract``, ``id``, ``case_id``) is signed through its hops: each
    hop repeats ``contract``, ``case_id`` and the envelope ``id`` (as ``chain_id``)
    under its own proof, and the receiver refuses an envelope that differs from what
    its hops signed. Build chains with
    :meth:`start`, :meth:`add_hop` and :meth:`approve` (each returns a new chain);
    read them with :meth:`from_json`.

    Attributes:
        contract: always ``handoff-chain/2.0.0``.
        id: unique chain id (``urn:uuid:...``), signed by every hop as ``chain_id``.
        case_id: the case the chain is about.
        hops: the hops, hop 0 first.

    """

    contract: str = attrs.field(default=HANDOFF_CHAIN_CONTRACT, validator=_check_contract)
    id: str = attrs.field(validator=_check_chain_id)
    case_id: str = attrs.field(validator=_check_ident)
    hops: tuple[Hop, ...] = attrs.field(default=(), converter=_hops)


    @classmethod
    def start(cls, *, case_id: str, id: str | None = None) -> HandoffChain:
        """Return an empty chain for ``case_id`` (add hops with :meth:`add_hop`).

        Raises:
            ValueError: ``InvalidArgument`` (also a TypeError), ``case_id`` or ``id`` is not
                a valid identifier.

        """
        return cls(id=id or f"urn:uuid:{uuid.uuid4()}", case_id=case_id)

    def add_hop(
        self,
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
        chain = self
        at = f"$.hops[{len(chain.hops)}]"
        if not isinstance(key, SigningKey):
            raise InvalidArgument(f"key must be a SigningKey, got {type(key).__name__}",
                                  json_path=f"{at}.proof")
        _aware(valid_until, "valid_until", at)
        _aware(created, "created", f"{at}.proof")
        if expires is not None:
            _aware(expires, "expires", f"{at}.proof")
        if len(chain.hops) >= _MAX_WIRE_HOPS:
            raise InvalidArgument(f"a chain holds at most {_MAX_WIRE_HOPS} hops",
                                  code="chain-too-long", json_path="$.hops")
        parent = chain.hops[-1] if chain.hops else None
        if sender is None:
            if parent is None:
                raise InvalidArgument("the first hop needs sender=", code="sender-missing",
                                      json_path=f"{at}.sender")
            sender = parent.receiver
        with _anchored(at):
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
        self,
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
        chain = self
        at = f"$.hops[{max(len(chain.hops) - 1, 0)}]"
        if not isinstance(approver_key, SigningKey):
            raise InvalidArgument(
                f"approver_key must be a SigningKey, got {type(approver_key).__name__}",
                json_path=f"{at}.proof",
            )
        _aware(created, "created", f"{at}.proof")
        if expires is not None:
            _aware(expires, "expires", f"{at}.proof")
        if not chain.hops or chain.hops[-1].role is not HopRole.PROPOSER:
            raise InvalidArgument(
                "only a proposal (a proposer hop) at the end of the chain is approved",
                code="not-a-proposal", json_path=f"{at}.role" if chain.hops else "$.hops",
            )
        proposal = chain.hops[-1]
        proofs = proposal.proofs
        primary_id = proofs[0].get("id") if proofs else None
        if not isinstance(primary_id, str):
            raise InvalidArgument("the proposal's proof has no id to chain an approval to",
                                  code="proof-id-missing", json_path=f"{at}.proof.id")
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

    @staticmethod
    def json_schema() -> dict[str, Any]:
        """The Draft 2020-12 JSON Schema of handoff chains, closed at every level; its
        ``$id`` is stable, and ``properties.contract.const`` names the contract and
        version (``handoff-chain/2.0.0``). The checked-in copy is
        ``schemas/handoff-chain/2.0.0.json``.
        """
        return handoff_chain_schema()
    def to_json(self) -> dict[str, Any]:
        """Wire form."""
        return {
            "contract": self.contract,
            "id": self.id,
            "case_id": self.case_id,
            "hops": [hop.to_json() for hop in self.hops],
        }

    def to_bytes(self) -> bytes:
        """Canonical (RFC 8785) UTF-8 bytes of :meth:`to_json`."""
        return canonical_bytes(self.to_json())

    @classmethod
    def from_json(
        cls, data: bytes | str | Mapping[str, Any], *, limits: JSONLimits = DEFAULT_LIMITS
    ) -> HandoffChain:
        """Load a chain strictly: limits, strict JSON, contract, schema, typed model.

        Proofs are *not* verified here; :class:`IdentityCompositionReceiver` does that.

        Raises:
            MalformedJSON: bad bytes (duplicate keys, NaN, huge integers, too deep...).
            UnknownContract: the message names another contract or version.
            ReceiptValidationError: every violation with its JSON path, best first,
                e.g. ``"required field 'receiver' missing @ $.hops[1]"``.

        """
        doc = load_object(data, what="a handoff chain", limits=limits)
        _check_contract_member(doc)
        violations = _schema_violations(doc) or _typed_violations(doc)
        if violations:
            raise ReceiptValidationError(
                violations, contract=_CONTRACT_NAME, version=_CONTRACT_VERSION
            )
        return _structure(doc)


def _aware(value: object, name: str, at: str = "$") -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument(f"{name} must be a timezone-aware datetime, got {value!r}",
                              code="naive-datetime", json_path=f"{at}.{name}")
    return value


_E = TypeVar("_E", bound=enum.Enum)


def _enum(kind: type[_E], value: object, name: str) -> _E:
    """``kind(value)``, or a typed error naming the member and the allowed values."""
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(repr(member.value) for member in kind)
        raise InvalidArgument(f"{name} must be one of {allowed}, got {value!r}",
                              code=f"unknown-{name}", json_path=f"$.{name}") from None


@contextlib.contextmanager
def _anchored(at: str) -> Iterator[None]:
    """Re-anchor a hop's argument errors (``$.receiver``) at the hop (``$.hops[2].receiver``)."""
    try:
        yield
    except InvalidArgument as exc:
        raise InvalidArgument(exc.message, code=exc.code,
                              json_path=at + exc.json_path.removeprefix("$")) from None


def _validated(chain: HandoffChain) -> HandoffChain:
    doc = chain.to_json()
    violations = _schema_violations(doc) or _typed_violations(doc)
    if violations:
        raise ReceiptValidationError(
            violations, contract=_CONTRACT_NAME, version=_CONTRACT_VERSION
        )
    return chain


def _integer(value: Any) -> Any:
    """An integral float as the integer it stands for: JSON Schema counts ``1.0`` as an
    integer and RFC 8785 writes it as ``1`` (so the signature covers it either way), and
    an A2A data part (a protobuf ``Value``) delivers every integer as a float.
    """
    return int(value) if type(value) is float and value.is_integer() else value


def _structure(doc: Mapping[str, Any]) -> HandoffChain:
    """Build the typed chain from a schema-valid, typed-valid document."""
    hops = [
        Hop(
            contract=raw["contract"],
            chain_id=raw["chain_id"],
            hop=_integer(raw["hop"]),
            case_id=raw["case_id"],
            role=raw["role"],
            sender=raw["sender"],
            receiver=raw["receiver"],
            authority=raw["authority"],
            valid_until=parse_time(raw["valid_until"]),
            derived_from=(
                None if raw["derived_from"] is None else DerivedFrom(raw["derived_from"]["digest"])
            ),
            transformation=raw["transformation"],
            action=raw.get("action"),
            proof=copy.deepcopy(raw.get("proof")),
        )
        for raw in doc["hops"]
    ]
    return HandoffChain(contract=doc["contract"], id=doc["id"], case_id=doc["case_id"], hops=hops)
