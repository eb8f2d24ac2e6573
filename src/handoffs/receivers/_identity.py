"""Identity composition: the receiver contract for multi-hop, signed handoff chains.

A *handoff chain* (contract ``handoff-chain/2.0.0``) carries a case across agents.
Every hop is its own signed document: the agent that changes the content emits a new
hop whose ``derived_from`` pins the digest of the hop it received, proofs included
(signing anchors §6, "stable receipt + new signed transformation"). An approval is not
a hop: it is a Data Integrity proof *chained* (``previousProof``) to the proposer's
proof on the proposal hop, so it covers the exact proposal and the proposer's
signature.

**The envelope is signed end to end.** Every hop carries the envelope's ``id`` as its
``chain_id`` and the envelope's ``case_id``, under its own proof (and under every
approval, which signs the same hop). So each signer commits to the one chain it
extends, not only to its parent: a changed envelope ``id`` or ``case_id``
(``chain-id-mismatch``, ``case-mismatch``), a hop taken from another chain
(``chain-id-mismatch``, ``chain-broken``), and reordered, dropped or inserted hops
(``hop-order``, ``chain-broken``, ``wrong-audience``) are refused at step (2). The
alternative, one proof by the last hop over the whole envelope, was not chosen: it
would let the last signer re-wrap earlier hops, signed for one chain, into a new
chain of its own, so an investigator's signed statement could be spent twice. The
``id`` is therefore a signed, replay-safe identifier, which version 1.0.0's was not;
1.0.0 chains are refused (``unknown-contract``), since nothing in them binds the id.

**Replay.** The receiver claims the chain in its :class:`~handoffs.receivers.ReplayStore`
(the gate's store: in memory by default, SQLite or PostgreSQL across processes) once
step (2) has passed, until the chain's earliest expiry; the second time it is refused
as ``replayed``, and a store that cannot answer fails closed
(``replay-store-unavailable``). The claim is ``handoff-chain:<id>/<hops>``: the signed
id and the number of hops, because a chain grows as it travels and each extension is
a new message to a new receiver (several receivers may share one store), while a
chain re-sent as is, to anyone, is the same claim. The prefix keeps chain claims apart
from receipt ids (``urn:uuid:…``) in a store shared with a receipt gate.

:class:`IdentityCompositionReceiver` admits a chain only when, in this order (the
stages of the one admission pipeline, :mod:`handoffs.receivers._pipeline`; the step
numbers match :class:`~handoffs.receivers.Step` and the docs; the clock is read first,
for step 2):

(1) parse: limits, strict JSON, the contract the message names, hop count, the
    closed JSON Schema and the typed model;
(2) proofs: every proof verifies against the pinned key ring; each hop's signer *is*
    its ``sender`` and held the claimed role when it signed, and every approval was
    signed by a key holding ``approver`` — all according to the key ring, never the
    message text; then the lineage (hop numbers and role order, digests, the envelope's
    ``id`` and case as every hop signed them, principal alignment, audience), the
    chain's validity (earliest expiry) and replay (the chain claimed in the store);
(5) policy: authority only narrows (DECIDE needs an approval over the exact proposal),
    validity never extends, separation of duties, required roles. A chain that is
    sound but lacks a required approval is escalated, not rejected.

The receiver never raises on a message: every failure is a :class:`Decision` with
typed, stable reason codes (an unexpected one, a bug, is ``receiver-error``).
"""

from __future__ import annotations

import copy
import enum
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

import attrs

from handoffs._errors import (
    HandoffsError,
    InvalidArgument,
    MalformedJSON,
    ProofError,
    ReceiptValidationError,
    UnknownContract,
    Violation,
)
from handoffs._json import (
    DEFAULT_LIMITS,
    JSONLimits,
    canonical_bytes,
    check_value,
    digest,
    load_object,
    loads,
)
from handoffs._time import expired
from handoffs.contracts._contract import Authority
from handoffs.contracts._keys import KeyRing, SigningKey
from handoffs.contracts._proofs import VerifiedProof, sign, verify
from handoffs.contracts._receipt import format_time, parse_time
from handoffs.contracts._schema import (
    _DIGEST_PATTERN,
    _IDENT_PATTERN,
    _TIME_PATTERN,
    DIALECT,
    _describe,
    _proof_schema,
)
from handoffs.receivers._decision import Decision, Reason, Step, Verdict
from handoffs.receivers._pipeline import Pipeline, Refusal, Run, Stage
from handoffs.receivers._replay import (
    MemoryReplayStore,
    ReplayedReceipt,
    ReplayStore,
    ReplayStoreError,
)

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

__all__ = [
    "HANDOFF_CHAIN_CONTRACT",
    "HANDOFF_CHAIN_SCHEMA_ID",
    "HOP_PROOF_PURPOSE",
    "DerivedFrom",
    "HandoffChain",
    "Hop",
    "HopRole",
    "IdentityCompositionReceiver",
    "SeparationOfDuties",
    "add_hop",
    "approve",
    "handoff_chain_schema",
    "start_chain",
]

_CONTRACT_NAME: Final = "handoff-chain"
_CONTRACT_VERSION: Final = "2.0.0"
_RETIRED: Final = {
    f"{_CONTRACT_NAME}/1.0.0": "its envelope id is not signed, so it cannot be protected "
                               "against replay; re-issue the chain under",
}
HANDOFF_CHAIN_CONTRACT: Final = f"{_CONTRACT_NAME}/{_CONTRACT_VERSION}"
"""The ``contract`` member of a handoff chain and of each of its hops."""
HANDOFF_CHAIN_SCHEMA_ID: Final = f"urn:handoffs:schema:{_CONTRACT_NAME}:{_CONTRACT_VERSION}"
"""The stable ``$id`` of the handoff-chain JSON Schema."""
HOP_PROOF_PURPOSE: Final = "assertionMethod"
"""The ``proofPurpose`` of every hop proof, approvals included."""

_MAX_WIRE_HOPS: Final = 32  # the schema's bound; a receiver's max_hops is at most this
_MAX_HOP_PROOFS: Final = 8
_MAX_TRANSFORMATION: Final = 500
_IDENT: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}")
_DIGEST: Final = re.compile(r"sha256:[0-9a-f]{64}")
_CHAIN_ID: Final = re.compile(r"urn:uuid:[0-9a-f-]{36}")
_CHAIN_ID_PATTERN: Final = "^urn:uuid:[0-9a-f-]{36}$"


class HopRole(enum.Enum):
    """The role a hop's signer claims; the key ring decides whether it holds it.

    Along a chain the roles appear in this order: any number of investigators, then
    at most one proposer, one approver and one executor hop.
    """

    INVESTIGATOR = "investigator"
    PROPOSER = "proposer"
    APPROVER = "approver"
    EXECUTOR = "executor"

    @property
    def rank(self) -> int:
        """Position in the chain's role order (investigator first)."""
        return _RANK[self]


_RANK: Final = {role: index for index, role in enumerate(HopRole)}


# --------------------------------------------------------------------- typed model


def _check_ident(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not _IDENT.fullmatch(value):
        raise InvalidArgument(f"{attribute.name} {value!r} is not a valid identifier")


def _check_optional_ident(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        _check_ident(instance, attribute, value)


def _check_aware(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument(f"{attribute.name} must be a timezone-aware datetime, got {value!r}")


def _check_hop_index(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _MAX_WIRE_HOPS:
        raise InvalidArgument(f"hop must be an integer in [0, {_MAX_WIRE_HOPS}), got {value!r}")


def _check_transformation(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not 1 <= len(value) <= _MAX_TRANSFORMATION:
        raise InvalidArgument(
            f"transformation must be a string of 1 to {_MAX_TRANSFORMATION} characters"
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
        contract: always ``HANDOFF_CHAIN_CONTRACT``; binds the hop to its format.
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
    role: HopRole = attrs.field(converter=HopRole)
    sender: str = attrs.field(validator=_check_ident)
    receiver: str = attrs.field(validator=_check_ident)
    authority: Authority = attrs.field(converter=Authority)
    valid_until: datetime = attrs.field(validator=_check_aware)
    derived_from: DerivedFrom | None
    transformation: str = attrs.field(validator=_check_transformation)
    action: str | None = attrs.field(default=None, validator=_check_optional_ident)
    proof: Any = None

    def __attrs_post_init__(self) -> None:
        if self.action is None and (
            self.authority is Authority.DECIDE or self.role is HopRole.PROPOSER
        ):
            raise InvalidArgument("a DECIDE hop and a proposer hop must name an action")

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
    :func:`start_chain`, :func:`add_hop` and :func:`approve`; read them with
    :meth:`from_json`.

    Attributes:
        contract: always ``HANDOFF_CHAIN_CONTRACT``.
        id: unique chain id (``urn:uuid:...``), signed by every hop as ``chain_id``.
        case_id: the case the chain is about.
        hops: the hops, hop 0 first.

    """

    contract: str = attrs.field(default=HANDOFF_CHAIN_CONTRACT, validator=_check_contract)
    id: str = attrs.field(validator=_check_chain_id)
    case_id: str = attrs.field(validator=_check_ident)
    hops: tuple[Hop, ...] = attrs.field(default=(), converter=_hops)

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


def _check_contract_member(doc: Mapping[str, Any]) -> None:
    named = doc.get("contract")
    if not isinstance(named, str):
        raise UnknownContract(
            "the message names no contract", code="no-contract", json_path="$.contract"
        )
    if named != HANDOFF_CHAIN_CONTRACT:
        retired = _RETIRED.get(named)
        why = f" ({retired} {HANDOFF_CHAIN_CONTRACT!r})" if retired else ""
        raise UnknownContract(
            f"unknown contract {named!r}; this reads {HANDOFF_CHAIN_CONTRACT!r} only{why}",
            json_path="$.contract",
        )


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


# ------------------------------------------------------------------------- schema


def handoff_chain_schema() -> dict[str, Any]:
    """Generate the Draft 2020-12 JSON Schema of ``handoff-chain/2.0.0`` messages.

    Closed (``additionalProperties: false``) at every level, a ``description`` on
    every property, and the stable ``$id`` ``HANDOFF_CHAIN_SCHEMA_ID``. The
    checked-in copy is ``schemas/handoff-chain/2.0.0.json`` (``1.0.0.json`` stays as
    the record of the retired version).
    """
    ident = {"type": "string", "pattern": _IDENT_PATTERN, "maxLength": 128}
    chain_id = {"type": "string", "pattern": _CHAIN_ID_PATTERN, "maxLength": 45}
    time = {"type": "string", "pattern": _TIME_PATTERN}
    hop: dict[str, Any] = {
        "type": "object",
        "description": "One signed transformation: who sent what to whom, under which "
                       "authority and until when, derived from which parent hop.",
        "additionalProperties": False,
        "required": [
            "contract", "chain_id", "hop", "case_id", "role", "sender", "receiver",
            "authority", "valid_until", "derived_from", "transformation", "proof",
        ],
        "properties": {
            "contract": {"const": HANDOFF_CHAIN_CONTRACT,
                         "description": "Binds the signed hop to this contract version."},
            "chain_id": {**chain_id, "description": "The envelope id of the chain this hop "
                                                    "was signed for: every hop signs it, so "
                                                    "the envelope id cannot be changed and "
                                                    "a hop cannot move to another chain."},
            "hop": {"type": "integer", "minimum": 0, "maximum": _MAX_WIRE_HOPS - 1,
                    "description": "Position of the hop in the chain, from 0."},
            "case_id": {**ident, "description": "The case the chain is about; equal on "
                                                "every hop and on the envelope."},
            "role": {"enum": [role.value for role in HopRole],
                     "description": "Role the signer claims. The receiver checks it against "
                                    "the key ring at signing time, never trusts it."},
            "sender": {**ident, "description": "Identity of the signer; must equal the key "
                                               "ring's controller of the signing key."},
            "receiver": {**ident, "description": "The one agent this hop is addressed to; "
                                                 "the sender of the next hop."},
            "authority": {"enum": [a.value for a in Authority],
                          "description": "ADVISE: the receiver decides. DECIDE: execute the "
                                         "action; allowed only under an approval of the exact "
                                         "proposal."},
            "action": {**ident, "description": "The action proposed or decided. Required on "
                                               "a proposer hop and on a DECIDE hop."},
            "valid_until": {**time, "description": "After this instant (UTC) the hop must not "
                                                   "be acted on; never later than the "
                                                   "parent's."},
            "derived_from": {
                "description": "The parent hop, pinned by the SHA-256 of its RFC 8785 form "
                               "with its proofs; null only on hop 0.",
                "anyOf": [
                    {"type": "null"},
                    {"type": "object", "additionalProperties": False, "required": ["digest"],
                     "properties": {"digest": {
                         "type": "string", "pattern": _DIGEST_PATTERN,
                         "description": "sha256 of the canonical parent hop."}}},
                ],
            },
            "transformation": {"type": "string", "minLength": 1,
                               "maxLength": _MAX_TRANSFORMATION,
                               "description": "What this hop changed, in a short sentence. "
                                              "Untrusted text: it never sets role, authority "
                                              "or validity."},
            "proof": {
                "description": "The sender's Data Integrity proof, then any approvals "
                               "chained to it with previousProof.",
                "anyOf": [{"$ref": "#/$defs/proof"},
                          {"type": "array", "items": {"$ref": "#/$defs/proof"},
                           "minItems": 1, "maxItems": _MAX_HOP_PROOFS}],
            },
        },
        "allOf": [
            {"if": {"required": ["authority"], "properties": {"authority": {"const": "DECIDE"}}},
             "then": {"required": ["action"]}},
            {"if": {"required": ["role"], "properties": {"role": {"const": "proposer"}}},
             "then": {"required": ["action"]}},
        ],
    }
    return {
        "$schema": DIALECT,
        "$id": HANDOFF_CHAIN_SCHEMA_ID,
        "title": f"{_CONTRACT_NAME} {_CONTRACT_VERSION} multi-hop handoff",
        "description": "A case handed across agents: every hop is a signed transformation "
                       "derived from the previous one; approvals are proofs chained to the "
                       "proposal.",
        "type": "object",
        "additionalProperties": False,
        "required": ["contract", "id", "case_id", "hops"],
        "properties": {
            "contract": {"const": HANDOFF_CHAIN_CONTRACT,
                         "description": "Contract name and version this message follows."},
            "id": {**chain_id, "description": "Unique chain identifier, signed by every hop "
                                              "as its chain_id; receivers claim it (with "
                                              "the number of hops) against replay."},
            "case_id": {**ident, "description": "The case the chain is about; signed by "
                                                "every hop as its case_id."},
            "hops": {"type": "array", "minItems": 1, "maxItems": _MAX_WIRE_HOPS,
                     "items": {"$ref": "#/$defs/hop"},
                     "description": "The hops in order, hop 0 first."},
        },
        "$defs": {"hop": hop, "proof": _proof_schema()},
    }


_validator_cache: list[Draft202012Validator] = []


def _validator() -> Draft202012Validator:
    if not _validator_cache:  # python-jsonschema, imported on the first chain
        from jsonschema import Draft202012Validator

        _validator_cache.append(Draft202012Validator(handoff_chain_schema()))
    return _validator_cache[0]


def _schema_violations(doc: Any) -> list[Violation]:
    from jsonschema.exceptions import relevance

    errors = sorted(_validator().iter_errors(doc), key=relevance)
    return [
        Violation(
            json_path=error.json_path,
            schema_path="/".join(str(p) for p in error.absolute_schema_path),
            message=_describe(error),
            validator=str(error.validator),
        )
        for error in errors
    ]


def _typed_violations(doc: Mapping[str, Any]) -> list[Violation]:
    """Checks the schema's ECMA patterns cannot make exact (e.g. a trailing newline)."""
    found: list[Violation] = []

    def need(ok: bool, path: str, message: str) -> None:
        if not ok:
            found.append(Violation(path, "", message, "typed"))

    need(bool(_CHAIN_ID.fullmatch(doc["id"])), "$.id", f"not a urn:uuid: {doc['id']!r}")
    need(bool(_IDENT.fullmatch(doc["case_id"])), "$.case_id", "not a valid identifier")
    for k, raw in enumerate(doc["hops"]):
        base = f"$.hops[{k}]"
        for name in ("case_id", "sender", "receiver", "action"):
            if name in raw:
                need(bool(_IDENT.fullmatch(raw[name])), f"{base}.{name}",
                     f"not a valid identifier: {raw[name]!r}")
        try:
            parse_time(raw["valid_until"], json_path=f"{base}.valid_until")
        except MalformedJSON as exc:
            found.append(Violation(exc.json_path, "", exc.message, "typed"))
        parent = raw["derived_from"]
        if parent is not None:
            need(bool(_DIGEST.fullmatch(parent["digest"])), f"{base}.derived_from.digest",
                 f"not a sha256 digest: {parent['digest']!r}")
    return found


# ------------------------------------------------------------------------ builders


def start_chain(*, case_id: str, id: str | None = None) -> HandoffChain:
    """Return an empty chain for ``case_id`` (add hops with :func:`add_hop`).

    Raises:
        ValueError: ``InvalidArgument`` (also a TypeError), ``case_id`` or ``id`` is not a valid
            identifier.

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
        ValueError: ``InvalidArgument`` (also a TypeError), a missing ``sender`` on hop 0, a wrong
            type or a naive
            datetime; an unknown role or authority, a DECIDE or proposer hop without an
            action, an invalid identifier or an over-long transformation.
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
        ValueError: ``InvalidArgument`` (also a TypeError), a wrong type or a naive datetime; the
            chain does not end
            with a proposer hop, or the proposal's proof has no ``id`` to chain to.

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


# ------------------------------------------------------------- separation of duties

_DEFAULT_DISTINCT: Final = (
    (HopRole.PROPOSER, HopRole.APPROVER),
    (HopRole.PROPOSER, HopRole.EXECUTOR),
    (HopRole.APPROVER, HopRole.EXECUTOR),
    (HopRole.INVESTIGATOR, HopRole.APPROVER),
)


def _role_pairs(value: Iterable[Iterable[HopRole | str]]) -> frozenset[frozenset[HopRole]]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidArgument(f"distinct must be pairs of roles, got {value!r}")
    pairs: set[frozenset[HopRole]] = set()
    for item in value:
        if isinstance(item, str) or not isinstance(item, Iterable):
            raise InvalidArgument(f"each entry of distinct is a pair of roles, got {item!r}")
        roles = [HopRole(role) for role in item]
        if len(roles) != 2 or roles[0] is roles[1]:
            raise InvalidArgument(
                f"a separation-of-duties pair names two different roles: {item!r}"
            )
        pairs.add(frozenset(roles))
    if not pairs:
        raise InvalidArgument(
            "an empty separation-of-duties policy would allow any identity to hold every "
            "role; name the pairs that must differ (fail closed)"
        )
    return frozenset(pairs)


def _pair_key(pair: frozenset[HopRole]) -> tuple[int, ...]:
    return tuple(sorted(role.rank for role in pair))


@attrs.frozen(kw_only=True)
class SeparationOfDuties:
    """Pairs of roles that one identity may not both hold within a chain.

    Deny by default: proposer ≠ approver, proposer ≠ executor, approver ≠ executor and
    no investigator approves. A contract relaxes it explicitly with :meth:`allowing`;
    an empty policy is refused. Identities are the key ring's controllers, so one
    agent with two keys is still one identity. The receiving agent counts as the
    executor when the chain's final hop is DECIDE.

    Attributes:
        distinct: the role pairs (order-free) whose holders must differ.

    """

    distinct: frozenset[frozenset[HopRole]] = attrs.field(
        default=_DEFAULT_DISTINCT, converter=_role_pairs
    )

    def allowing(self, *pairs: tuple[HopRole | str, HopRole | str]) -> SeparationOfDuties:
        """Return a policy that lets one identity hold both roles of each given pair.

        Raises:
            ValueError: ``InvalidArgument`` (also a TypeError), a pair is not in this policy, or
                nothing would remain.

        """
        if not pairs:
            return self
        drop = _role_pairs(pairs)
        unknown = drop - self.distinct
        if unknown:
            names = sorted(sorted(role.value for role in pair) for pair in unknown)
            raise InvalidArgument(f"not in this policy: {names}")
        return SeparationOfDuties(distinct=self.distinct - drop)

    def violations(
        self, holders: Mapping[HopRole, Iterable[str]]
    ) -> tuple[tuple[HopRole, HopRole, str], ...]:
        """``(role, role, identity)`` for every identity holding both roles of a pair."""
        found: list[tuple[HopRole, HopRole, str]] = []
        for pair in sorted(self.distinct, key=_pair_key):
            first, second = sorted(pair, key=lambda role: role.rank)
            both = set(holders.get(first, ())) & set(holders.get(second, ()))
            found.extend((first, second, identity) for identity in sorted(both))
        return tuple(found)

    def to_json(self) -> list[list[str]]:
        """The pairs as sorted lists of role names, in a stable order."""
        return [
            [role.value for role in sorted(pair, key=lambda role: role.rank)]
            for pair in sorted(self.distinct, key=_pair_key)
        ]


# ------------------------------------------------------------------------ receiver

_DEFAULT_REQUIRED: Final = frozenset({HopRole.PROPOSER, HopRole.APPROVER})


def _required_roles(value: Iterable[HopRole | str]) -> frozenset[HopRole]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidArgument(f"required_roles must be a set of roles, got {value!r}")
    return frozenset(HopRole(role) for role in value)


def _check_keyring(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, KeyRing):
        raise InvalidArgument(f"keyring must be a KeyRing, got {type(value).__name__}")
    if len(value) == 0:
        raise ProofError(
            "the key ring is empty; nothing can verify (fail closed)", code="empty-trust-store"
        )


def _check_clock(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not callable(value):
        raise InvalidArgument(
            f"clock must be a callable returning an aware datetime, got {value!r}"
        )


def _check_max_hops(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_WIRE_HOPS:
        raise InvalidArgument(
            f"max_hops must be an integer in [1, {_MAX_WIRE_HOPS}], got {value!r}"
        )


def _check_sod(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, SeparationOfDuties):
        raise InvalidArgument(
            f"separation_of_duties must be a SeparationOfDuties, got {type(value).__name__}"
        )


def _check_limits(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, JSONLimits):
        raise InvalidArgument(f"limits must be JSONLimits, got {type(value).__name__}")


def _check_replay(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, ReplayStore):
        raise InvalidArgument(
            f"replay must implement ReplayStore or be None, got {type(value).__name__}"
        )


def _replay_claim(chain: HandoffChain) -> str:
    """The id under which a receiver claims ``chain`` in its replay store.

    ``handoff-chain:<id>/<number of hops>``: the signed envelope id, and the length,
    because each extension of a chain is a new message to a new receiver. The prefix
    keeps it apart from receipt ids in a store shared with a gate.
    """
    return f"{_CONTRACT_NAME}:{chain.id}/{len(chain.hops)}"


@attrs.frozen
class _Verified:
    """One hop with its verified proofs: ``primary`` signed it, ``approvals`` chain to it."""

    index: int
    hop: Hop
    raw: Mapping[str, Any]
    primary: VerifiedProof
    approvals: tuple[VerifiedProof, ...]

    @property
    def path(self) -> str:
        return f"$.hops[{self.index}]"

    def proof_path(self, position: int) -> str:
        return f"{self.path}.proof" if isinstance(self.hop.proof, Mapping) else (
            f"{self.path}.proof[{position}]"
        )


@attrs.frozen(kw_only=True)
class IdentityCompositionReceiver:
    """The identity-composition receiver contract for ``handoff-chain/2.0.0``.

    It decides whether a multi-hop chain may be acted on, from the key ring alone:
    the chain is intact and ordered, every signer held its role when it signed,
    authority only narrowed, validity is the earliest expiry, and separation of
    duties holds. ACCEPT returns the final hop's action; REJECT and ESCALATE return
    ``fail_closed_action``. It never raises on a message.

    Attributes:
        keyring: the pinned trust store (must not be empty).
        identity: who this receiver is; the final hop must be addressed to it.
        clock: returns the current aware datetime, read once per message.
        separation_of_duties: which roles one identity may not combine.
        required_roles: roles the chain must contain. ``approver`` means an approval
            proof over the proposal; without one the chain is escalated.
        max_hops: the longest chain accepted (at most 32, the schema's bound).
        fail_closed_action: the action reported with REJECT and ESCALATE.
        limits: size and depth limits for raw input.
        replay: the replay store, as a :class:`~handoffs.receivers.Gate`'s (default: a
            fresh :class:`~handoffs.receivers.MemoryReplayStore`; share a SQLite or
            PostgreSQL store across processes); ``None`` disables replay protection
            (deterministic replays in the lab). A chain is claimed as
            ``handoff-chain:<id>/<number of hops>`` once step (2) has passed, until
            its earliest expiry.

    """

    keyring: KeyRing = attrs.field(validator=_check_keyring)
    identity: str = attrs.field(validator=_check_ident)
    clock: Callable[[], datetime] = attrs.field(validator=_check_clock)
    separation_of_duties: SeparationOfDuties = attrs.field(
        factory=SeparationOfDuties, validator=_check_sod
    )
    required_roles: frozenset[HopRole] = attrs.field(
        default=_DEFAULT_REQUIRED, converter=_required_roles
    )
    max_hops: int = attrs.field(default=8, validator=_check_max_hops)
    fail_closed_action: str | None = attrs.field(default=None, validator=_check_optional_ident)
    limits: JSONLimits = attrs.field(default=DEFAULT_LIMITS, validator=_check_limits)
    replay: ReplayStore | None = attrs.field(factory=MemoryReplayStore, validator=_check_replay)

    @property
    def name(self) -> str:
        """Stable name of the receiver contract: ``"identity-composition"``."""
        return "identity-composition"

    @property
    def deterministic(self) -> bool:
        """True without a replay store: the same message at the same clock reading then
        gets the same decision.
        """
        return self.replay is None

    def receive(self, message: bytes | str | Mapping[str, Any]) -> Decision:
        """Decide one handoff chain (raw bytes/text or a parsed JSON object)."""
        return _PIPELINE.run(self, _Run(message, self.name, self.fail_closed_action))

    # ---------------------------------------------------------------- stages

    def _clock(self, run: _Run, _: object = None) -> None:
        # (2) the clock, read once per message (before the message is read).
        now = self.clock()
        if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
            raise Refusal(Verdict.REJECT, [
                Reason("bad-clock", f"the clock returned {now!r}, not an aware datetime",
                       Step.PROOFS)
            ])
        run.now = now

    def _parse(self, run: _Run, _: object = None) -> None:
        # (1) limits and strict JSON; a parsed object is re-read under the same limits.
        message = run.message
        if isinstance(message, bytes | bytearray | memoryview | str):
            doc = loads(message, limits=self.limits)
        elif isinstance(message, Mapping):
            check_value(message, limits=self.limits)
            doc = loads(canonical_bytes(message), limits=self.limits)
        else:
            raise MalformedJSON(
                f"a message is bytes, text or a JSON object, got {type(message).__name__}",
                code="not-an-object",
            )
        if not isinstance(doc, Mapping):
            raise MalformedJSON("a handoff chain must be a JSON object", code="not-an-object")
        # (1) the contract the message names: unknown versions are never guessed.
        _check_contract_member(doc)
        run.contract = HANDOFF_CHAIN_CONTRACT
        run.receipt_id = doc.get("id") if isinstance(doc.get("id"), str) else None
        # (1) chain length, before the schema so that the reason is specific.
        hops = doc.get("hops")
        if isinstance(hops, list) and not hops:
            raise Refusal(Verdict.REJECT, [
                Reason("chain-empty", "the chain has no hops", Step.PARSE, "$.hops")
            ])
        if isinstance(hops, list) and len(hops) > self.max_hops:
            raise Refusal(Verdict.REJECT, [
                Reason("chain-too-long",
                       f"{len(hops)} hops exceed this receiver's limit of {self.max_hops}",
                       Step.PARSE, "$.hops")
            ])
        # (1) closed schema, then the typed model's exact checks.
        violations = _schema_violations(doc) or _typed_violations(doc)
        if violations:
            raise Refusal(Verdict.REJECT, [
                Reason("schema-invalid", v.message, Step.PARSE, v.json_path)
                for v in violations[:20]
            ])
        run.raw, run.chain = doc, _structure(doc)

    def _proofs(self, run: _Run, _: object = None) -> None:
        # (2) every proof of every hop against the pinned key ring.
        raw, chain, now = run.raw, run.chain, run.now
        reasons: list[Reason] = []
        results: list[tuple[VerifiedProof, ...]] = []
        for k, raw_hop in enumerate(raw["hops"]):
            try:
                results.append(verify(raw_hop, self.keyring, purpose=HOP_PROOF_PURPOSE, now=now))
            except HandoffsError as exc:
                reasons.append(_reason(exc, Step.PROOFS, base=f"$.hops[{k}]"))
        if reasons:
            raise Refusal(Verdict.REJECT, reasons)
        verified = [
            _Verified(k, hop, raw["hops"][k], proofs[0], proofs[1:])
            for k, (hop, proofs) in enumerate(zip(chain.hops, results, strict=True))
        ]
        # (2) the signer is the sender and held the claimed role when it signed.
        for item in verified:
            hop, primary = item.hop, item.primary
            if primary.controller != hop.sender:
                reasons.append(Reason(
                    "sender-mismatch",
                    f"hop {item.index} names sender {hop.sender!r}, but the key ring says its "
                    f"key belongs to {primary.controller!r}",
                    Step.PROOFS, f"{item.path}.sender"))
            if hop.role.value not in primary.roles:
                reasons.append(Reason(
                    "role-not-held",
                    f"{primary.controller!r} claims role {hop.role.value!r} on hop "
                    f"{item.index}, but its key held {sorted(primary.roles)} when it signed "
                    f"({format_time(primary.created)})",
                    Step.PROOFS, f"{item.path}.role"))
            for position, approval in enumerate(item.approvals, start=1):
                if HopRole.APPROVER.value not in approval.roles:
                    reasons.append(Reason(
                        "role-not-held",
                        f"{approval.controller!r} co-signed hop {item.index} as an approval, "
                        f"but its key held {sorted(approval.roles)} when it signed",
                        Step.PROOFS, f"{item.proof_path(position)}.verificationMethod"))
        if reasons:
            raise Refusal(Verdict.REJECT, reasons)
        run.verified = verified

    def _lineage(self, run: _Run, _: object = None) -> None:
        chain, verified = run.chain, run.verified
        # (2) lineage: numbering and role order, case, digests, alignment, audience.
        reasons: list[Reason] = []
        seen: set[HopRole] = set()
        for item in verified:
            reasons.extend(_hop_lineage(item, chain, seen))
            if item.index:
                reasons.extend(_link_lineage(verified[item.index - 1], item))
            elif item.hop.derived_from is not None:
                reasons.append(Reason(
                    "chain-broken", "the first hop derives from a hop that is not in the chain",
                    Step.PROOFS, f"{item.path}.derived_from"))
        last = verified[-1]
        if last.hop.receiver != self.identity:
            reasons.append(Reason(
                "wrong-audience",
                f"the chain is addressed to {last.hop.receiver!r}, not to {self.identity!r}",
                Step.PROOFS, f"{last.path}.receiver"))
        if reasons:
            raise Refusal(Verdict.REJECT, reasons)

    def _validity(self, run: _Run, _: object = None) -> None:
        # (2) validity: the earliest expiry in the chain, hop or proof.
        verified, now = run.verified, run.now
        candidates: list[tuple[datetime, str]] = []
        for item in verified:
            candidates.append((item.hop.valid_until, f"{item.path}.valid_until"))
            for position, proof in enumerate((item.primary, *item.approvals)):
                if proof.expires is not None:
                    candidates.append((proof.expires, f"{item.proof_path(position)}.expires"))
        earliest, where = min(candidates, key=lambda pair: pair[0])
        if expired(earliest, now):
            raise Refusal(Verdict.REJECT, [Reason(
                "chain-expired",
                f"the chain expired at {format_time(earliest)} (now {format_time(now)})",
                Step.PROOFS, where)])
        run.validity = earliest

    def _replay(self, run: _Run, _: object = None) -> None:
        # (2) replay: claim the signed id (and length) until the earliest expiry.
        if self.replay is None:
            return
        claim = _replay_claim(run.chain)
        try:
            first = self.replay.first_seen(claim, expires=run.validity, now=run.now)
        except Exception as exc:  # any store failure fails closed, with the gate's code
            raise Refusal(Verdict.REJECT, [Reason(
                ReplayStoreError.code, f"the replay store could not answer: {exc}",
                Step.PROOFS)]) from exc
        if first is not True:
            raise Refusal(Verdict.REJECT, [Reason(
                ReplayedReceipt.code, f"chain {claim} was seen before", Step.PROOFS, "$.id",
            )])

    def _policy(self, run: _Run, _: object = None) -> None:
        # (5) policy: approvals, attenuation, separation of duties, required roles.
        verified, validity = run.verified, run.validity
        reasons, approved = _approvals(verified)
        reasons.extend(_attenuation(verified, approved))
        holders = self._holders(verified)
        for first, second, identity in self.separation_of_duties.violations(holders):
            # Point at the later of the two places where the identity acts.
            where = max(holders[first][identity], holders[second][identity], key=_path_order)
            reasons.append(Reason(
                "separation-of-duties",
                f"{identity!r} acts as both {first.value} and {second.value}", Step.POLICY,
                where))
        escalations: list[Reason] = []
        for role in sorted(self.required_roles, key=lambda r: r.rank):
            if role is HopRole.APPROVER and not approved:
                escalations.append(Reason(
                    "approval-missing",
                    "no approver's proof covers the proposal; refer it for approval",
                    Step.POLICY, "$.hops"))
            elif role is not HopRole.APPROVER and not holders[role]:
                reasons.append(Reason(
                    "role-missing", f"the chain has no {role.value}", Step.POLICY, "$.hops"))

        final = verified[-1]
        record = {
            "hops": len(verified),
            "effective_valid_until": format_time(validity),
            "roles": {role.value: sorted(holders[role]) for role in HopRole},
            "approved_action": next((item.hop.action for item in approved.values()), None),
            "chain_digest": digest(final.raw),
        }
        run.sender = final.hop.sender
        if reasons:
            raise Refusal(Verdict.REJECT, reasons, record=record)
        run.authority = final.hop.authority.value
        verdict = Verdict.ESCALATE if escalations else Verdict.ACCEPT
        run.settle(verdict,
                   final.hop.action if verdict is Verdict.ACCEPT else self.fail_closed_action,
                   tuple(escalations), record)

    def _holders(self, verified: Sequence[_Verified]) -> dict[HopRole, dict[str, str]]:
        """Role → identity → where it first acts so, from verified signers only."""
        holders: dict[HopRole, dict[str, str]] = {role: {} for role in HopRole}
        for item in verified:
            holders[item.hop.role].setdefault(item.primary.controller, f"{item.path}.sender")
            for position, approval in enumerate(item.approvals, start=1):
                holders[HopRole.APPROVER].setdefault(
                    approval.controller, f"{item.proof_path(position)}.verificationMethod")
        if verified[-1].hop.authority is Authority.DECIDE:
            holders[HopRole.EXECUTOR].setdefault(self.identity, f"{verified[-1].path}.receiver")
        return holders


class _Run(Run):
    """Per-message state of a chain decision, filled in stage by stage."""

    __slots__ = ("chain", "message", "now", "raw", "validity", "verified")
    # Each is set by the stage named beside it before a later stage reads it.
    now: datetime  # clock
    raw: Mapping[str, Any]  # parse
    chain: HandoffChain  # parse
    verified: list[_Verified]  # proofs and signers
    validity: datetime  # validity

    def __init__(self, message: bytes | str | Mapping[str, Any], receiver: str,
                 fail_closed: str | None) -> None:
        super().__init__(receiver, fail_closed)
        self.message = message

_PIPELINE: Final[Pipeline[IdentityCompositionReceiver, _Run]] = Pipeline((
    Stage(Step.PROOFS, "clock", IdentityCompositionReceiver._clock),
    Stage(Step.PARSE, "parse", IdentityCompositionReceiver._parse),
    Stage(Step.PROOFS, "proofs and signers", IdentityCompositionReceiver._proofs),
    Stage(Step.PROOFS, "lineage, envelope and audience", IdentityCompositionReceiver._lineage),
    Stage(Step.PROOFS, "validity", IdentityCompositionReceiver._validity),
    Stage(Step.PROOFS, "replay", IdentityCompositionReceiver._replay),
    Stage(Step.POLICY, "policy", IdentityCompositionReceiver._policy),
), crash="receiver-error", crash_step=Step.PARSE)
"""The chain receiver's stages, run in order by the one engine."""


def _path_order(path: str) -> tuple[int, ...]:
    """Sort key for JSON paths by the hop and proof indices they name."""
    return tuple(int(number) for number in re.findall(r"\[(\d+)\]", path))


def _reason(exc: HandoffsError, step: Step, *, base: str = "$") -> Reason:
    """A typed reason from a library error, its JSON path anchored under ``base``."""
    return Reason(exc.code, exc.message, step, base + exc.json_path.removeprefix("$"))


def _hop_lineage(item: _Verified, chain: HandoffChain, seen: set[HopRole]) -> list[Reason]:
    """Checks on one hop alone: its number, case, role repetition, approval dates."""
    reasons: list[Reason] = []
    hop, k = item.hop, item.index
    if hop.hop != k:
        reasons.append(Reason(
            "hop-order", f"hop number {hop.hop} at position {k}", Step.PROOFS, f"{item.path}.hop"))
    reasons.extend(_envelope_lineage(item, chain))
    if hop.role in seen and hop.role is not HopRole.INVESTIGATOR:
        reasons.append(Reason(
            "hop-order", f"a second {hop.role.value} hop at position {k}", Step.PROOFS,
            f"{item.path}.role"))
    seen.add(hop.role)
    reasons.extend(
        Reason("hop-order", f"the approval on hop {k} is dated before the proposal",
               Step.PROOFS, f"{item.proof_path(position)}.created")
        for position, approval in enumerate(item.approvals, start=1)
        if approval.created < item.primary.created
    )
    return reasons


def _envelope_lineage(item: _Verified, chain: HandoffChain) -> list[Reason]:
    """The envelope's ``id`` and ``case_id`` are the ones this hop signed."""
    reasons: list[Reason] = []
    hop, k = item.hop, item.index
    if hop.chain_id != chain.id:
        reasons.append(Reason(
            "chain-id-mismatch",
            f"hop {k} was signed for chain {hop.chain_id!r}, the envelope says {chain.id!r}",
            Step.PROOFS, f"{item.path}.chain_id"))
    if hop.case_id != chain.case_id:
        reasons.append(Reason(
            "case-mismatch",
            f"hop {k} is about case {hop.case_id!r}, the chain about {chain.case_id!r}",
            Step.PROOFS, f"{item.path}.case_id"))
    return reasons


def _link_lineage(parent: _Verified, item: _Verified) -> list[Reason]:
    """Checks on the link from ``parent`` to ``item``: order, digest, alignment."""
    reasons: list[Reason] = []
    hop, k = item.hop, item.index
    if hop.role.rank < parent.hop.role.rank:
        reasons.append(Reason(
            "hop-order",
            f"a {hop.role.value} hop follows a {parent.hop.role.value} hop at position {k}",
            Step.PROOFS, f"{item.path}.role"))
    latest = max(p.created for p in (parent.primary, *parent.approvals))
    if item.primary.created < latest:
        reasons.append(Reason(
            "hop-order", f"hop {k} is dated before its parent's proofs", Step.PROOFS,
            f"{item.proof_path(0)}.created"))
    expected = digest(parent.raw)
    if hop.derived_from is None or hop.derived_from.digest != expected:
        got = None if hop.derived_from is None else hop.derived_from.digest
        reasons.append(Reason(
            "chain-broken",
            f"hop {k} derives from {got!r}, but hop {k - 1} has digest {expected!r}",
            Step.PROOFS, f"{item.path}.derived_from"))
    if parent.hop.receiver != hop.sender:
        reasons.append(Reason(
            "chain-misaligned",
            f"hop {k - 1} is addressed to {parent.hop.receiver!r}, but hop {k} is sent by "
            f"{hop.sender!r}", Step.PROOFS, f"{item.path}.sender"))
    return reasons


def _approvals(verified: Sequence[_Verified]) -> tuple[list[Reason], dict[int, _Verified]]:
    """Approvals that chain to the proposer's proof on the proposal hop, and misfits."""
    reasons: list[Reason] = []
    approved: dict[int, _Verified] = {}
    for item in verified:
        for position, approval in enumerate(item.approvals, start=1):
            where = f"{item.proof_path(position)}.previousProof"
            if item.hop.role is not HopRole.PROPOSER:
                reasons.append(Reason(
                    "approval-not-exact",
                    f"hop {item.index} is a {item.hop.role.value} hop; only the proposal can "
                    "be approved", Step.POLICY, where))
            elif item.primary.proof_id is None or approval.previous_proof != (
                item.primary.proof_id,
            ):
                reasons.append(Reason(
                    "approval-not-exact",
                    f"the approval on hop {item.index} does not chain to the proposer's proof, "
                    "so it does not cover the exact proposal", Step.POLICY, where))
            else:
                approved[item.index] = item
    return reasons, approved


def _attenuation(
    verified: Sequence[_Verified], approved: Mapping[int, _Verified]
) -> list[Reason]:
    """Authority only narrows, DECIDE only over the approved action, validity never grows."""
    reasons: list[Reason] = []
    ceiling = Authority.ADVISE
    approved_action: str | None = None
    for item in verified:
        hop = item.hop
        held = hop.authority
        if hop.authority is Authority.DECIDE and ceiling is Authority.ADVISE:
            # Every DECIDE that no approval covers is reported; none widens the next.
            held = Authority.ADVISE
            reasons.append(Reason(
                "authority-widened",
                f"hop {item.index} claims DECIDE, but no approval of the proposal grants it at "
                "this point of the chain", Step.POLICY, f"{item.path}.authority"))
        elif hop.authority is Authority.DECIDE and hop.action != approved_action:
            reasons.append(Reason(
                "approval-not-exact",
                f"hop {item.index} decides {hop.action!r}, but the approval covers "
                f"{approved_action!r}", Step.POLICY, f"{item.path}.action"))
        if item.index in approved:
            ceiling, approved_action = Authority.DECIDE, hop.action
        else:
            ceiling = held
        parent = verified[item.index - 1].hop if item.index else None
        if parent is not None and hop.valid_until > parent.valid_until:
            reasons.append(Reason(
                "validity-extended",
                f"hop {item.index} is valid until {format_time(hop.valid_until)}, later than "
                f"its parent ({format_time(parent.valid_until)})",
                Step.POLICY, f"{item.path}.valid_until"))
    return reasons
