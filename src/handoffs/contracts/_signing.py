"""Signed receipts: the governance service's authority grant and the sender's proof.

Two Data Integrity proofs secure a receipt:

* the **authority grant**, issued by the deterministic policy service (a key holding
  the ``policy-service`` role, proof purpose ``capabilityDelegation``): it names the
  sender (subject), the one receiver (audience), the case, the contract version, the
  policy version, the authorities the sender may claim and the latest validity;
* the **sender's proof** (purpose ``assertionMethod``) over the whole receipt, grant
  included.

:func:`verify_receipt` checks both and everything they bind, failing closed with a
specific :class:`~handoffs.ProofError` code. Untrusted text cannot widen authority
or extend validity: those are only ever compared against the signed grant.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Final

import attrs

from handoffs._audience import AUDIENCE_TYPES, AnyAudience, check_addressed
from handoffs._errors import InvalidArgument, MalformedJSON, ProofError
from handoffs._json import ParsedObject, parse_object
from handoffs._time import expired, format_time, parse_time, stale
from handoffs.contracts._contract import Authority, Contract
from handoffs.contracts._fingerprint import policy_fingerprint as fingerprint_of
from handoffs.contracts._receipt import Receipt, enum_member, structure
from handoffs.contracts._registry import Registry
from handoffs.integrity import KeyRing, Signer, VerifiedProof, sign, verify

__all__ = [
    "GRANT_PURPOSE",
    "POLICY_SERVICE_ROLE",
    "RECEIPT_PURPOSE",
    "AuthorityGrant",
    "VerifiedReceipt",
    "issue_grant",
    "sign_receipt",
    "verify_receipt",
]

GRANT_PURPOSE: Final = "capabilityDelegation"
"""Proof purpose of an authority grant."""
RECEIPT_PURPOSE: Final = "assertionMethod"
"""Proof purpose of a sender's receipt proof."""
POLICY_SERVICE_ROLE: Final = "policy-service"
"""The key-ring role a grant issuer's key must hold."""
_NO_AGE: Final = timedelta(0)

# The grant's members that are non-empty strings, in the order they are checked.
_GRANT_TEXT: Final = ("id", "issuer", "subject", "audience", "contract", "case_id",
                      "policy_version", "valid_until")
_GRANT_KEYS: Final = frozenset({
    "type", "id", "issuer", "subject", "audience", "contract", "case_id", "policy_version",
    "authority", "roles", "valid_until", "proof", "policy_fingerprint",
})


@attrs.frozen(kw_only=True)
class AuthorityGrant:
    """What the policy service allows one sender to claim towards one receiver.

    Attributes:
        id: grant identifier (``urn:uuid:...``).
        issuer: identity of the policy service.
        subject: the sender the grant is for.
        audience: the one receiver the sender may address.
        contract: contract id (``name/version``) the grant covers.
        case_id: the case the grant covers.
        policy_version: the policy version in force.
        authority: authorities the sender may claim (``ADVISE``, ``DECIDE``).
        roles: roles the subject holds for this case.
        valid_until: no receipt under this grant may be valid later.
        policy_fingerprint: the fingerprint of the contract the policy service governs
            (:meth:`~handoffs.contracts.Contract.policy_fingerprint`); a
            gate refuses a grant naming another fingerprint than its own contract's
            (``policy-mismatch``), or none (``policy-fingerprint-missing``).
    """

    id: str
    issuer: str
    subject: str
    audience: str
    contract: str
    case_id: str
    policy_version: str
    authority: frozenset[Authority]
    roles: frozenset[str] = frozenset()
    valid_until: datetime
    policy_fingerprint: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Unsigned wire form."""
        out = {
            "type": "AuthorityGrant",
            "id": self.id,
            "issuer": self.issuer,
            "subject": self.subject,
            "audience": self.audience,
            "contract": self.contract,
            "case_id": self.case_id,
            "policy_version": self.policy_version,
            "authority": sorted(a.value for a in self.authority),
            "roles": sorted(self.roles),
            "valid_until": format_time(self.valid_until),
        }
        if self.policy_fingerprint is not None:
            out["policy_fingerprint"] = self.policy_fingerprint
        return out

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> AuthorityGrant:
        """Read a grant document strictly (its proof is verified separately).

        Raises:
            ProofError: ``grant-invalid`` naming the offending member.
        """
        if not isinstance(doc, Mapping):
            raise ProofError("the grant must be an object", code="grant-invalid",
                             json_path="$.grant")
        if not _GRANT_KEYS.issuperset(doc):
            unknown = sorted(set(doc) - _GRANT_KEYS)
            raise ProofError(f"unknown grant member {unknown[0]!r}", code="grant-invalid",
                             json_path=f"$.grant.{unknown[0]}")
        if doc.get("type") != "AuthorityGrant":
            raise ProofError("grant type must be 'AuthorityGrant'", code="grant-invalid",
                             json_path="$.grant.type")
        for name in _GRANT_TEXT:
            value = doc.get(name)
            if not isinstance(value, str) or not value:
                raise ProofError(f"grant member {name!r} must be a non-empty string",
                                 code="grant-invalid", json_path=f"$.grant.{name}")
        try:
            authority = frozenset([enum_member(Authority, a) for a in doc.get("authority", ())])
            roles = frozenset(map(str, doc.get("roles", ())))
            valid_until = parse_time(doc["valid_until"], json_path="$.grant.valid_until")
        except (ValueError, TypeError) as exc:
            raise ProofError(f"malformed grant: {exc}", code="grant-invalid",
                             json_path="$.grant") from exc
        if not authority:
            raise ProofError("the grant allows no authority", code="grant-invalid",
                             json_path="$.grant.authority")
        pinned = doc.get("policy_fingerprint")
        if pinned is not None and not isinstance(pinned, str):
            raise ProofError("grant member 'policy_fingerprint' must be a string",
                             code="grant-invalid", json_path="$.grant.policy_fingerprint")
        # The members just checked, read again by name (no dict of them per grant).
        return cls(id=doc["id"], issuer=doc["issuer"], subject=doc["subject"],
                   audience=doc["audience"], contract=doc["contract"], case_id=doc["case_id"],
                   policy_version=doc["policy_version"], authority=authority, roles=roles,
                   valid_until=valid_until, policy_fingerprint=pinned)


def issue_grant(
    key: Signer,
    *,
    issuer: str,
    subject: str,
    audience: str,
    contract: Contract[Any, Any] | str,
    case_id: str,
    policy_version: str,
    authority: Iterable[Authority],
    valid_until: datetime,
    created: datetime,
    roles: Iterable[str] = (),
    grant_id: str | None = None,
    policy_fingerprint: str | None = None,
) -> dict[str, Any]:
    """Issue a signed authority grant (what the policy service does, deterministically).

    The grant names the fingerprint of the contract the service governs:
    ``policy_fingerprint`` if given, else the contract's fingerprint when ``contract`` is a
    :class:`~handoffs.contracts.Contract`. A contract given by id alone, with no
    fingerprint, makes a grant every gate refuses (``policy-fingerprint-missing``).

    Returns:
        the grant document with its ``capabilityDelegation`` proof.
    """
    grant = AuthorityGrant(
        id=grant_id or f"urn:uuid:{uuid.uuid4()}",
        issuer=issuer,
        subject=subject,
        audience=audience,
        contract=contract if isinstance(contract, str) else contract.id,
        case_id=case_id,
        policy_version=policy_version,
        authority=frozenset(authority),
        roles=frozenset(roles),
        valid_until=valid_until,
        policy_fingerprint=(policy_fingerprint if policy_fingerprint is not None
                            or isinstance(contract, str) else fingerprint_of(contract)),
    )
    return sign(grant.to_json(), key, purpose=GRANT_PURPOSE, created=created)


def sign_receipt(
    receipt: Receipt[Any, Any],
    key: Signer,
    *,
    grant: Mapping[str, Any] | None,
    created: datetime,
    expires: datetime | None = None,
    contract: Contract[Any, Any] | None = None,
) -> Receipt[Any, Any]:
    """What :meth:`Receipt.sign <handoffs.contracts.Receipt.sign>` does (see there)."""
    if contract is not None:
        check_admitted(contract, key)
    if grant is not None:
        _check_covers(AuthorityGrant.from_json(grant), receipt, receipt.contract)
    unsigned = attrs.evolve(receipt, grant=grant, proof=None)
    signed = sign(unsigned.to_json(), key, purpose=RECEIPT_PURPOSE, created=created,
                  expires=expires)
    return attrs.evolve(unsigned, proof=signed["proof"])


def check_admitted(contract: Contract[Any, Any], key: Signer) -> None:
    """Refuse to sign under ``contract`` with a key of a suite its schema refuses.

    Raises:
        ValueError: ``InvalidArgument`` (also a TypeError), ``key`` is not a
            :class:`~handoffs.integrity.Signer`.
        ProofError: ``suite-not-admitted``, at ``$.proof.cryptosuite``.
    """
    if not isinstance(key, Signer):
        raise InvalidArgument(f"key must be a Signer (a SigningKey, say), got "
                              f"{type(key).__name__}")
    suite = key.cryptosuite
    if suite not in contract.cryptosuites:
        raise ProofError(
            f"the key signs {suite!r} proofs; {contract.id}'s schema admits only "
            f"{', '.join(contract.cryptosuites)}: every gate would refuse the receipt",
            code="suite-not-admitted", json_path="$.proof.cryptosuite")


@attrs.frozen(kw_only=True)
class VerifiedReceipt:
    """A receipt whose proofs and grant all verified.

    Attributes:
        receipt: the typed receipt (pass this on, never the raw message).
        signer: the sender's verified proof (identity and roles from the key ring).
        grant: the verified authority grant, or ``None`` when none was required.
        grant_proof: the grant's verified proof, or ``None``.
        policy_checked: the grant's ``policy_fingerprint`` was compared with the
            contract's and matched. ``False`` when no grant
            came with the receipt (none was required): nothing pins the policy then,
            and a caller saying "valid" must add "policy not checked".
    """

    receipt: Receipt[Any, Any]
    signer: VerifiedProof
    grant: AuthorityGrant | None
    grant_proof: VerifiedProof | None
    policy_checked: bool = False


def _check_policy_pin(grant: AuthorityGrant, contract: Contract[Any, Any]) -> None:
    """Check that the receipt was granted under the very policy the receiver holds for
    ``contract``. The authority grant is signed by the policy service, so untrusted
    content cannot set its ``policy_fingerprint``.

    Raises:
        ProofError: ``policy-fingerprint-missing`` when the grant names no fingerprint;
            ``policy-mismatch`` when it names another than the contract's.
    """
    pinned = grant.policy_fingerprint
    if pinned is None:
        raise ProofError(
            f"the authority grant names no policy fingerprint, so nothing says it was "
            f"issued under this receiver's policy for {contract.id}",
            code="policy-fingerprint-missing", json_path="$.grant")
    own = fingerprint_of(contract)
    if pinned != own:
        raise ProofError(
            f"the grant was issued under policy {pinned}; this receiver's {contract.id} "
            f"is {own}: the same version decides under different rules",
            code="policy-mismatch", json_path="$.grant.policy_fingerprint")


def _mismatch(name: str, got: object, expected: object, path: str) -> ProofError:
    return ProofError(f"grant {name} is {got!r}, the receipt says {expected!r}",
                      code="grant-mismatch", json_path=path)


def verify_receipt(
    document: Mapping[str, Any],
    keyring: KeyRing,
    *,
    now: datetime,
    registry: Registry | Contract[Any, Any] | Iterable[Contract[Any, Any]],
    audience: str | AnyAudience,
    require_grant: bool = True,
    max_proof_age: timedelta | None = None,
) -> VerifiedReceipt:
    """What :meth:`Receipt.verify <handoffs.contracts.Receipt.verify>` does (see there)."""
    if type(document) is not ParsedObject and not isinstance(document, Mapping):
        raise MalformedJSON(
            f"a signed receipt is a JSON object, got {type(document).__name__}",
            code="not-an-object")
    if not isinstance(audience, AUDIENCE_TYPES) or not audience:
        raise InvalidArgument(
            f"audience must name the receiver, or be ANY_AUDIENCE, got {audience!r}")
    if max_proof_age is not None and (
        not isinstance(max_proof_age, timedelta) or max_proof_age <= _NO_AGE
    ):
        raise InvalidArgument(
            f"max_proof_age must be a positive timedelta or None, got {max_proof_age!r}")
    # The document is checked as JSON data (limits, lone surrogates, non-JSON values)
    # once: what that walk learned (plain or not) travels with it as a ParsedObject,
    # to the proofs' canonicalisation. One the gate parsed was checked by its parser
    # (under the gate's limits), and carries the schema it passed at step (1).
    parsed = document if type(document) is ParsedObject else parse_object(
        document, what="a signed receipt")
    contract = Registry.coerce(registry).for_document(parsed)
    max_age = contract.max_proof_age if max_proof_age is None else max_proof_age
    proofs = verify(parsed, keyring, purpose=RECEIPT_PURPOSE, now=now, max_proofs=8)
    if len(proofs) != 1:
        raise ProofError(f"a receipt carries exactly one sender proof, found {len(proofs)}",
                         code="proof-duplicated", json_path="$.proof")
    signer = proofs[0]
    receipt = structure(contract, parsed)
    if signer.controller != receipt.sender:
        raise ProofError(
            f"signed by {signer.controller!r}, but the receipt names sender {receipt.sender!r}",
            code="sender-mismatch", json_path="$.sender",
        )
    grant: AuthorityGrant | None = None
    grant_proof: VerifiedProof | None = None
    if receipt.grant is None:
        if require_grant:
            raise ProofError("the receipt carries no authority grant", code="grant-missing",
                             json_path="$.grant")
    else:
        grant, grant_proof = _verify_grant(receipt, contract, keyring, now,
                                           parsed.member(receipt.grant))
    check_addressed(receipt.receiver, receipt.valid_until, audience, now)
    if stale(signer.created, max_age, now):
        raise ProofError(
            f"the proof was created at {format_time(signer.created)}, {now - signer.created} "
            f"before now ({format_time(now)}); at most {max_age} is accepted",
            code="proof-stale", json_path="$.proof.created")
    if grant is not None:
        _check_policy_pin(grant, contract)
    # No grant (none required): no pin to compare, and policy_checked says so.
    return VerifiedReceipt(receipt=receipt, signer=signer, grant=grant,
                           grant_proof=grant_proof, policy_checked=grant is not None)


def _grant_refusal(exc: ProofError) -> ProofError:
    """A refusal of the grant's proof, as the receipt's refusal (``grant-invalid``)."""
    return ProofError(f"authority grant: {exc.message}", code="grant-invalid",
                      json_path="$.grant" + exc.json_path[1:])


def _verify_grant(
    receipt: Receipt[Any, Any], contract: Contract[Any, Any], keyring: KeyRing, now: datetime,
    doc: Mapping[str, Any],
) -> tuple[AuthorityGrant, VerifiedProof]:
    """The receipt's grant ``doc`` (a part of the parsed receipt, as parsed) verified."""
    try:
        proofs = verify(doc, keyring, purpose=GRANT_PURPOSE, now=now, max_proofs=8)
    except ProofError as exc:
        raise _grant_refusal(exc) from exc
    if len(proofs) != 1:
        raise ProofError("a grant carries exactly one proof", code="grant-invalid",
                         json_path="$.grant.proof")
    issuer_proof = proofs[0]
    if POLICY_SERVICE_ROLE not in issuer_proof.roles:
        raise ProofError(
            f"grant signed by {issuer_proof.controller!r}, which does not hold the "
            f"{POLICY_SERVICE_ROLE!r} role", code="role-not-held", json_path="$.grant.proof",
        )
    grant = AuthorityGrant.from_json(doc)
    if grant.issuer != issuer_proof.controller:
        raise _mismatch("issuer", grant.issuer, issuer_proof.controller, "$.grant.issuer")
    _check_covers(grant, receipt, contract.id)
    if expired(grant.valid_until, now):
        raise ProofError("the authority grant has expired", code="grant-expired",
                         json_path="$.grant.valid_until")
    return grant, issuer_proof


def _check_covers(grant: AuthorityGrant, receipt: Receipt[Any, Any], contract_id: str) -> None:
    """The grant binds the receipt's sender, receiver, case, contract, policy version,
    authority and validity (what :func:`sign_receipt` and a gate both check).
    """
    checks = (
        ("subject", grant.subject, receipt.sender, "$.sender"),
        ("audience", grant.audience, receipt.receiver, "$.receiver"),
        ("case_id", grant.case_id, receipt.case_id, "$.case_id"),
        ("contract", grant.contract, contract_id, "$.contract"),
        ("policy_version", grant.policy_version, receipt.policy_version, "$.policy_version"),
    )
    for name, got, expected, path in checks:
        if got != expected:
            raise _mismatch(name, got, expected, path)
    if receipt.authority not in grant.authority:
        raise ProofError(
            f"authority {receipt.authority.value} is not granted to {receipt.sender!r}",
            code="authority-not-granted", json_path="$.authority",
        )
    if receipt.valid_until > grant.valid_until:
        raise ProofError(
            f"valid_until {format_time(receipt.valid_until)} exceeds the grant's "
            f"{format_time(grant.valid_until)}", code="validity-exceeds-grant",
            json_path="$.valid_until",
        )
