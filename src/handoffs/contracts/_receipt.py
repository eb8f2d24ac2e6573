"""Decision receipts: the typed wire object, its governance stamp and its JSON form."""

from __future__ import annotations

import enum
import re
import unicodedata
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Final, Generic, TypeVar

import attrs
import cattrs

from handoffs._audience import AnyAudience
from handoffs._errors import (
    HandoffsError,
    InvalidArgument,
    MalformedJSON,
    ReceiptValidationError,
    UntrustedGovernance,
    Violation,
)
from handoffs._json import DEFAULT_LIMITS, JSONLimits, canonical_bytes, load_object
from handoffs._members import ENVELOPE_MEMBERS, GOVERNANCE_FIELDS, PROTECTED_MEMBERS
from handoffs._schemas import IDENT
from handoffs._time import format_time, parse_time
from handoffs.contracts._contract import Authority, Contract, Uncertainty
from handoffs.contracts._fields import _converter
from handoffs.integrity import KeyRing, Signer

if TYPE_CHECKING:
    from handoffs.contracts._registry import Registry
    from handoffs.contracts._signing import VerifiedReceipt

__all__ = [
    "IDENTIFIER_RULE",
    "DecisionContent",
    "EvidenceRef",
    "Governance",
    "Receipt",
    "case_id_from",
    "content_members",
    "format_time",
    "parse_time",
    "payload_bytes",
]

A = TypeVar("A", bound=enum.Enum)
S = TypeVar("S")

_IDENT: Final = IDENT
IDENTIFIER_RULE: Final = (
    "1 to 128 ASCII characters: a letter or digit first, then letters, digits and "
    "'.', '_', ':', '/', '@', '-' (no spaces)")
"""The rule every identifier of a receipt follows (``case_id``, ``sender``,
``receiver``, ``policy_version``): the JSON Schema pattern
``^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$`` in words."""
_NOT_IDENT: Final = re.compile(r"[^A-Za-z0-9._:/@-]+")


def _ident(_: Any, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not _IDENT.fullmatch(value):
        hint = (f"; handoffs.contracts.Governance.case_id_from({value!r}) makes one"
                if attribute.name == "case_id" and isinstance(value, str) else "")
        raise InvalidArgument(
            f"{attribute.name} {value!r} is not a valid identifier: {IDENTIFIER_RULE}{hint}",
            code=f"invalid-{attribute.name.replace('_', '-')}",
            json_path=f"$.{attribute.name}")


def case_id_from(text: str) -> str:
    """A valid ``case_id`` made from ``text`` (an order number, a ticket title).

    Text that already follows the identifier rule comes back unchanged. Otherwise
    letters lose their accents (NFKD, then ASCII), every run of other characters
    becomes one ``-``, leading separators go, and the result is cut to 128 characters:
    ``Governance.case_id_from("order 1842") == "order-1842"``,
    ``Governance.case_id_from("Bestellung Nr. 1842 – Müller") == "Bestellung-Nr.-1842-Muller"``.
    The mapping is deterministic but not one-to-one (``"order 1842"`` and
    ``"order-1842"`` give the same id): keep your own ids distinct before mapping them.

    Raises:
        ValueError: ``InvalidArgument`` (also a TypeError), ``text`` is not a string,
            or has no ASCII letter or digit to keep.
    """
    if not isinstance(text, str):
        raise InvalidArgument(f"case_id_from takes text, got {type(text).__name__}")
    if _IDENT.fullmatch(text):
        return text
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    slug = _NOT_IDENT.sub("-", ascii_text).lstrip("._:/@-")[:128].rstrip("-")
    if not slug:
        raise InvalidArgument(f"{text!r} has no ASCII letter or digit to make a case_id from",
                              code="invalid-case-id")
    return slug


def _aware(_: Any, attribute: attrs.Attribute[datetime], value: datetime) -> None:
    if value.tzinfo is None:
        raise InvalidArgument(f"{attribute.name} must be timezone-aware")


@attrs.frozen
class EvidenceRef:
    """A pointer to authoritative evidence, optionally pinned by a content digest.

    On the wire a bare reference is its URI string; a pinned one is
    ``{"uri": ..., "digest": "sha256:<hex>"}``.
    """

    uri: str
    digest: str | None = None

    def to_json(self) -> str | dict[str, str]:
        """Wire form."""
        return self.uri if self.digest is None else {"uri": self.uri, "digest": self.digest}

    @classmethod
    def from_json(cls, value: str | Mapping[str, str]) -> EvidenceRef:
        """Read the wire form (already schema-validated)."""
        if isinstance(value, str):
            return cls(value)
        return cls(value["uri"], value.get("digest"))


def _refs(value: Any) -> tuple[EvidenceRef, ...]:
    return tuple([v if isinstance(v, EvidenceRef) else EvidenceRef(v) if type(v) is str
                  else EvidenceRef.from_json(v) for v in value])


@attrs.frozen
class Governance:
    """The governance stamp: issued by a trusted deterministic service, never by a model.

    Untrusted text cannot reach these fields: encoders return
    :class:`DecisionContent`, which has none of them.
    """

    case_id_from = staticmethod(case_id_from)

    FIELDS: ClassVar[tuple[str, ...]] = GOVERNANCE_FIELDS
    """The receipt's top-level members only the trusted governance service may set:
    ``case_id``, ``sender``, ``receiver``, ``authority``, ``policy_version``,
    ``valid_until``, ``evidence_refs`` (a gate's governance check requires them)."""

    case_id: str = attrs.field(validator=_ident)
    sender: str = attrs.field(validator=_ident)
    receiver: str = attrs.field(validator=_ident)
    authority: Authority
    policy_version: str = attrs.field(validator=_ident)
    valid_until: datetime = attrs.field(validator=_aware)
    evidence_refs: tuple[EvidenceRef, ...] = attrs.field(converter=_refs)

    def to_json(self) -> dict[str, Any]:
        """Wire form of the governance members."""
        return {
            "case_id": self.case_id,
            "sender": self.sender,
            "receiver": self.receiver,
            "authority": self.authority.value,
            "policy_version": self.policy_version,
            "valid_until": format_time(self.valid_until),
            "evidence_refs": [ref.to_json() for ref in self.evidence_refs],
        }


@attrs.frozen
class DecisionContent(Generic[S, A]):
    """What an encoder writes: the proposal and the decisive state, nothing that
    governs authority, audience or validity.
    """

    proposed_action: A
    decision_state: S
    uncertainty: Uncertainty = Uncertainty.RESOLVED
    counterfactual_trigger: str | None = None
    notes: str | None = None


@attrs.frozen
class Receipt(Generic[S, A]):
    """A decision receipt under one contract version.

    Python attribute names equal the JSON member names. ``grant`` and ``proof`` are
    kept as the JSON they arrived as (they are verified, not interpreted, here).
    """

    contract: str
    id: str
    case_id: str
    sender: str
    receiver: str
    authority: Authority
    proposed_action: A
    decision_state: S
    evidence_refs: tuple[EvidenceRef, ...] = attrs.field(converter=_refs)
    policy_version: str
    valid_until: datetime = attrs.field(validator=_aware)
    uncertainty: Uncertainty
    counterfactual_trigger: str
    notes: str | None = None
    grant: Mapping[str, Any] | None = None
    proof: Any = None

    @classmethod
    def build(
        cls,
        contract: Contract[S, A],
        content: DecisionContent[S, A] | Mapping[str, Any],
        governance: Governance,
        *,
        id: str | None = None,
    ) -> Receipt[S, A]:
        """Assemble an unsigned receipt from encoder content and a governance stamp.

        This is the one way to build an unsigned receipt; :class:`~handoffs.contracts.Sender`
        builds and signs in one call and is what agent code normally uses.

        Args:
            contract: the contract version the receipt follows.
            content: what the encoder (or a model) wrote, as :class:`DecisionContent` or
                as the JSON content members (``proposed_action``, ``decision_state``,
                ``uncertainty``, ``counterfactual_trigger``, ``notes``). In a mapping,
                enum members and the state object are accepted for their JSON values, and
                ``None`` for ``counterfactual_trigger`` (the contract's) and ``notes``
                (none).
            governance: the stamp issued by the trusted governance service.
            id: the receipt id (default: a fresh ``urn:uuid``).

        Raises:
            UntrustedGovernance: the content names a governance or envelope member.
            ReceiptValidationError: the result does not satisfy the contract, every
                violation with its JSON path.
        """
        doc: dict[str, Any] = {"contract": contract.id, "id": id or f"urn:uuid:{uuid.uuid4()}"}
        doc.update(content_members(contract, content))
        doc.update(governance.to_json())
        return structure(contract, doc)

    @property
    def governance(self) -> Governance:
        """The governance stamp this receipt carries."""
        return Governance(
            case_id=self.case_id,
            sender=self.sender,
            receiver=self.receiver,
            authority=self.authority,
            policy_version=self.policy_version,
            valid_until=self.valid_until,
            evidence_refs=self.evidence_refs,
        )

    def to_json(self) -> dict[str, Any]:
        """Wire form: a JSON object (optional members omitted when unset)."""
        doc: dict[str, Any] = {"contract": self.contract, "id": self.id}
        doc.update(self.governance.to_json())
        doc["proposed_action"] = self.proposed_action.value
        doc["decision_state"] = _converter.unstructure(self.decision_state)
        doc["uncertainty"] = self.uncertainty.value
        doc["counterfactual_trigger"] = self.counterfactual_trigger
        if self.notes is not None:
            doc["notes"] = self.notes
        if self.grant is not None:
            doc["grant"] = self.grant
        if self.proof is not None:
            doc["proof"] = self.proof
        return doc

    def to_bytes(self) -> bytes:
        """Canonical (RFC 8785) UTF-8 bytes of :meth:`to_json`."""
        return canonical_bytes(self.to_json())

    def sign(
        self,
        key: Signer,
        *,
        grant: Mapping[str, Any] | None,
        created: datetime,
        expires: datetime | None = None,
        contract: Contract[S, A] | None = None,
    ) -> Receipt[S, A]:
        """Attach ``grant`` and the sender's proof over the whole receipt.

        Any earlier proof is replaced: a receipt carries exactly one sender proof. A grant
        must cover the receipt as a gate checks it (subject, audience, case, contract,
        policy version, authority, validity), so that nothing is signed that every gate
        would refuse; who issued it is the gate's to check against its key ring.
        With ``contract`` (the version the receipt names), a key whose suite that
        version's schema refuses is refused before anything is signed;
        :class:`~handoffs.contracts.Sender` and ``handoffs sign`` always pass it.

        Raises:
            ProofError: the grant is malformed (``grant-invalid``) or does not cover the
                receipt (``grant-mismatch``, ``authority-not-granted``,
                ``validity-exceeds-grant``), with the receipt member's JSON path;
                ``suite-not-admitted`` (``$.proof.cryptosuite``) for a key of a suite
                ``contract`` does not admit.
            ValueError: ``InvalidArgument`` (also a TypeError), ``contract`` is not the
                version the receipt names.
        """
        from handoffs.contracts._signing import sign_receipt  # it builds on this module

        if contract is not None and (not isinstance(contract, Contract)
                                     or contract.id != self.contract):
            raise InvalidArgument(f"contract must be the Contract {self.contract} the "
                                  f"receipt names, got {contract!r:.80}")
        return sign_receipt(self, key, grant=grant, created=created, expires=expires,
                            contract=contract)

    @staticmethod
    def verify(
        document: Mapping[str, Any],
        keyring: KeyRing,
        *,
        now: datetime,
        registry: Registry | Contract[Any, Any] | Iterable[Contract[Any, Any]],
        audience: str | AnyAudience,
        require_grant: bool = True,
        max_proof_age: timedelta | None = None,
    ) -> VerifiedReceipt:
        """Verify a signed receipt, fail closed, in a fixed order.

        Order: contract version named (unknown → ``UnknownContract``) → the sender's proof
        (profile, key ring, key not revoked, key validity at signing, signature; exactly
        one) → schema → signer is the sender → the grant's proof (issuer holds
        ``policy-service``) → the grant binds sender, receiver, case, contract, policy
        version, authority and validity → audience → expiry → freshness of the proof →
        the grant's policy pin: its ``policy_fingerprint`` must be the contract's
        (``policy-mismatch``; none: ``policy-fingerprint-missing``), as a gate checks.
        Without a grant (``require_grant=False``) nothing pins the policy: the result's
        ``policy_checked`` is ``False`` ("policy not checked").

        Args:
            document: the parsed receipt.
            keyring: the pinned trust store.
            now: the verification instant (aware).
            audience: the receiver the receipt must be addressed to, or
                :data:`~handoffs.contracts.ANY_AUDIENCE` to choose, explicitly, not to check it.
            registry: the contract versions to verify under.
            require_grant: refuse a receipt without an authority grant.
            max_proof_age: how old the sender's proof may be (``proof-stale`` from that
                age on); ``None``: the contract's
                :attr:`~handoffs.contracts.Contract.max_proof_age`.

        ``registry`` holds the contract versions to accept: a
        :class:`~handoffs.contracts.Registry`, one contract or an iterable of contracts.
        It is required: no contract is trusted by default.

        Raises:
            UnknownContract, ReceiptValidationError, ProofError: with a specific code.
            MalformedJSON: the document is not JSON data, or exceeds the default limits.
            ValueError: ``InvalidArgument`` (also a TypeError), ``audience`` is neither a
                receiver name nor ``ANY_AUDIENCE``.
        """
        return _signing.verify_receipt(document, keyring, now=now, registry=registry,
                                       audience=audience, require_grant=require_grant,
                                       max_proof_age=max_proof_age)

    @staticmethod
    def from_json(
        data: bytes | str | Mapping[str, Any],
        *,
        registry: Any,
        limits: JSONLimits = DEFAULT_LIMITS,
    ) -> Receipt[Any, Any]:
        """Load a receipt strictly, under the contract version it names.

        Args:
            data: raw bytes/text (parsed with limits) or an already parsed object.
            registry: the contract versions to accept: a
                :class:`~handoffs.contracts.Registry`, one contract or an iterable of
                contracts (required; nothing is trusted by default).
            limits: size and depth bounds for raw input.

        Raises:
            MalformedJSON: bad bytes (duplicate keys, NaN, huge integers, too deep...).
            UnknownContract: the named contract or version is unknown.
            ReceiptValidationError: every schema violation, best first, with paths.
        """
        from handoffs.contracts._registry import Registry

        doc = load_object(data, what="a receipt", limits=limits)
        contract = Registry.coerce(registry).for_document(doc)
        return structure(contract, doc)


def content_members(
    contract: Contract[Any, Any], content: DecisionContent[Any, Any] | Mapping[str, Any]
) -> dict[str, Any]:
    """The JSON content members of ``content`` (see :meth:`Receipt.build`), unvalidated.

    Raises:
        UntrustedGovernance: a mapping names a governance or envelope member.
        ReceiptValidationError: ``content`` is neither a mapping nor
            :class:`DecisionContent`, or a mapping has a non-string key.
    """
    if isinstance(content, DecisionContent):
        members: dict[str, Any] = {
            "proposed_action": content.proposed_action,
            "decision_state": content.decision_state,
            "uncertainty": content.uncertainty,
            "counterfactual_trigger": content.counterfactual_trigger,
            "notes": content.notes,
        }
    elif isinstance(content, Mapping):
        bad = [key for key in content if not isinstance(key, str)]
        if bad:
            raise ReceiptValidationError(
                [Violation("$", "", f"content member names must be strings, got {bad[0]!r}",
                           "type")], contract=contract.name, version=contract.version)
        clash = sorted(PROTECTED_MEMBERS.intersection(content))
        if clash:
            raise UntrustedGovernance(
                f"content may not set {', '.join(clash)}: governance comes only from the "
                "governance service", json_path=f"$.{clash[0]}",
            )
        members = dict(content)
    else:
        raise ReceiptValidationError(
            [Violation("$", "", "content must be a mapping of content members or "
                       f"DecisionContent, got {type(content).__name__}", "type")],
            contract=contract.name, version=contract.version)
    for name in ("proposed_action", "uncertainty"):
        if isinstance(members.get(name), enum.Enum):
            members[name] = members[name].value
    state = members.get("decision_state")
    if state is not None and attrs.has(type(state)):
        members["decision_state"] = _converter.unstructure(state)
    if members.get("counterfactual_trigger") is None:
        members["counterfactual_trigger"] = contract.counterfactual_trigger
    if "notes" in members and members["notes"] is None:
        del members["notes"]
    return members


def payload_bytes(message: Mapping[str, Any]) -> int:
    """Size in bytes of a message's canonical payload, envelope members excluded.

    This is the essay's message-cost measure; proofs and identifiers are a constant
    overhead per message and reported apart.
    """
    return len(canonical_bytes({k: v for k, v in message.items() if k not in ENVELOPE_MEMBERS}))


def structure(contract: Contract[S, A], doc: Mapping[str, Any]) -> Receipt[S, A]:
    """Validate ``doc`` against ``contract``'s schema and build the typed receipt.

    Raises:
        ReceiptValidationError: every violation with its JSON path, best first.
    """
    _schema.validate_checked(contract, doc)
    return structure_valid(contract, doc)


E = TypeVar("E", bound=enum.Enum)


def enum_member(kind: type[E], value: Any) -> E:
    """``kind(value)``, looking the value up directly when it is a hashable member value."""
    try:
        found = kind._value2member_map_.get(value)
    except TypeError:  # an unhashable value: let the enum refuse it
        found = None
    return found if found is not None else kind(value)  # type: ignore[return-value]


def structure_valid(contract: Contract[S, A], doc: Mapping[str, Any]) -> Receipt[S, A]:
    """:func:`structure` for a document already valid under ``contract``'s schema
    (the typed checks still run).

    Raises:
        ReceiptValidationError: a value the schema admits but the typed model refuses.
    """
    try:
        state = contract.load_state(doc["decision_state"])
    except cattrs.BaseValidationError as exc:
        # The schema admits it but the typed model refuses it (an interval with lo > hi).
        raise ReceiptValidationError(
            [_typed_violation(line) for line in cattrs.transform_error(
                exc, path="$.decision_state", format_exception=_format_typed)],
            contract=contract.name, version=contract.version,
        ) from exc
    try:
        # Positionally, in field order (cheaper than keywords on the accept path).
        return Receipt(
            doc["contract"], doc["id"], doc["case_id"], doc["sender"], doc["receiver"],
            enum_member(Authority, doc["authority"]),
            enum_member(contract.actions, doc["proposed_action"]),
            state,
            doc["evidence_refs"],  # the wire forms: Receipt's converter reads them once
            doc["policy_version"],
            parse_time(doc["valid_until"], json_path="$.valid_until"),
            enum_member(Uncertainty, doc["uncertainty"]),
            doc["counterfactual_trigger"],
            doc.get("notes"),
            doc.get("grant"),
            doc.get("proof"),
        )
    except MalformedJSON as exc:
        raise ReceiptValidationError(
            [Violation(exc.json_path, "", exc.message, "format")],
            contract=contract.name, version=contract.version,
        ) from exc
    except (ValueError, TypeError) as exc:
        # A typed check the schema cannot express (e.g. an identifier ending in a
        # newline, which Python's ``re.search`` lets a ``$``-anchored pattern accept).
        raise ReceiptValidationError(
            [Violation("$", "", f"value rejected by the typed model: {_why(exc)}", "typed")],
            contract=contract.name, version=contract.version,
        ) from exc


def _why(exc: BaseException) -> str:
    return exc.message if isinstance(exc, HandoffsError) else str(exc)


def _format_typed(exc: BaseException, _: type | None) -> str:
    return _why(exc) if isinstance(exc, ValueError | TypeError) else "invalid value"


def _typed_violation(line: str) -> Violation:
    message, _, path = line.rpartition(" @ ")
    return Violation(path or "$", "", message or line, "typed")


# Below what they need of this module: both build on it (an import cycle), and a gate
# calls into them once per message (an import inside the function costs ~1 µs each).
from handoffs.contracts import _schema, _signing  # noqa: E402
