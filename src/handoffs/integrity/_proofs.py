"""W3C Data Integrity proofs with the registered JCS cryptosuites.

:func:`sign` and :func:`verify` are the safe recipe for the *plain-JSON receipt
profile*: no ``@context`` but the accepted ones (the DI v2 context, as data:
:mod:`handoffs.integrity._context`), only the standard proof properties, every proof in the
document verified in a fixed fail-closed order against a pinned :class:`KeyRing`.
Proof sets and ``previousProof`` chains are supported. The cryptosuite algorithms
exactly as the W3C Recommendation states them (``create_proof``, ``verify_proof``) are
:mod:`handoffs.integrity._w3c`, underneath.

The signature covers ``hashData = SHA-256(JCS(proofConfig)) ‖ SHA-256(JCS(document))``,
where ``proofConfig`` is the proof without ``proofValue``; ``proofValue`` is ``"z"`` +
base58btc of the 64-byte Ed25519 signature.

Proof chains (profile rule). A proof naming ``previousProof`` is signed over the
document whose ``proof`` is the list of the referenced proofs, in the order they appear
in the proof set (DI §4.3/§4.5, ``matchingProofs``). A proof *without*
``previousProof`` is signed over the document with no ``proof`` member at all: under JCS
an empty ``"proof": []`` would change the hash. Referenced proofs must appear earlier in
the set, so chains cannot be dangling, forward or cyclic. A previous proof does not bind
the proofs after it: requiring particular signers is the caller's policy.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, NamedTuple, cast

import attrs

from handoffs._errors import InvalidArgument, KeyRingError, MalformedJSON, ProofError, UnknownKey
from handoffs._json import ParsedObject, canonical_bytes, canonical_bytes_plain, check_value
from handoffs._time import CLOCK_SKEW, expired
from handoffs._time import format_utc as _format_utc
from handoffs._time import parse_utc as _parse_utc
from handoffs.integrity._base58 import b58encode
from handoffs.integrity._context import check_context, check_proof_context
from handoffs.integrity._keyring import KeyEntry, KeyRing
from handoffs.integrity._keys import _aware_utc
from handoffs.integrity._signer import Signer
from handoffs.integrity._suites import cryptosuite
from handoffs.integrity._w3c import (
    PROOF_TYPE,
    _check_suite,
    _hash_data,
    _signature_bytes,
    _without_proof,
)

__all__ = ["VerifiedProof", "sign", "verify"]

_REQUIRED: Final = ("type", "cryptosuite", "created", "verificationMethod", "proofPurpose")
_OPTIONAL: Final = ("id", "expires", "previousProof", "domain", "challenge", "nonce")
_PROFILE_KEYS: Final = frozenset((*_REQUIRED, *_OPTIONAL, "proofValue", "@context"))
_PRESENT: Final = (*_REQUIRED, "proofValue")
_TEXT_OPTIONS: Final = ("id", "domain", "challenge", "nonce")


# ----------------------------------------------------------------------- high level


@attrs.frozen(kw_only=True)
class VerifiedProof:
    """One proof that passed every check of ``verify``.

    Attributes:
        proof_id: the proof's ``id``, or ``None`` if it has none.
        verification_method: the key id the proof names.
        controller: the key ring's identity for that key (never taken from the message).
        roles: the roles the key ring grants that identity.
        purpose: the proof's ``proofPurpose``.
        created: when the proof says it was made (UTC).
        expires: when it stops being acceptable, or ``None``.
        previous_proof: ids of the proofs this one chains to (empty if none).
        key_entry: the key ring entry that verified it.

    """

    proof_id: str | None
    verification_method: str
    controller: str
    roles: frozenset[str]
    purpose: str
    created: datetime
    expires: datetime | None
    previous_proof: tuple[str, ...]
    key_entry: KeyEntry


class _Checked(NamedTuple):
    """A proof that passed the profile check, with its parsed fields (``options``: it
    holds a member beyond the six required ones, so the optional checks apply).
    """

    at: int
    path: str
    proof: Mapping[str, Any]
    vm: str
    signature: bytes
    created: datetime
    expires: datetime | None
    previous: tuple[str, ...]
    options: bool


def _proof_list(document: Mapping[str, Any]) -> list[Any]:
    if "proof" not in document or document["proof"] is None:
        raise ProofError("the document carries no proof", code="proof-missing", json_path="$.proof")
    proofs = document["proof"]
    if type(proofs) is dict or isinstance(proofs, Mapping):
        return [proofs]
    if isinstance(proofs, list):
        if not proofs:
            raise ProofError(
                "the document's proof set is empty", code="proof-missing", json_path="$.proof"
            )
        return proofs
    raise ProofError(
        f"proof must be an object or an array of objects, got {type(proofs).__name__}",
        code="proof-malformed",
        json_path="$.proof",
    )


def _string(proof: Mapping[str, Any], name: str, *, path: str) -> str:
    value = proof[name]
    if not isinstance(value, str) or not value:
        raise ProofError(
            f"{name} must be a non-empty string, got {value!r}",
            code="proof-malformed",
            json_path=f"{path}.{name}",
        )
    return value


def _time(proof: Mapping[str, Any], name: str, *, path: str) -> datetime:
    value = proof[name]
    when = _parse_utc(value)
    if when is None:
        raise ProofError(
            f"{name} must be an RFC 3339 UTC time like '2026-01-05T10:00:00Z', got {value!r}",
            code="proof-malformed",
            json_path=f"{path}.{name}",
        )
    return when


def _previous(proof: Mapping[str, Any], *, path: str) -> tuple[str, ...]:
    if "previousProof" not in proof:
        return ()
    value = proof["previousProof"]
    where = f"{path}.previousProof"
    ids = [value] if isinstance(value, str) else value
    if (
        not isinstance(ids, list)
        or not ids
        or not all(isinstance(item, str) and item for item in ids)
    ):
        raise ProofError(
            f"previousProof must be a proof id or a non-empty array of ids, got {value!r}",
            code="proof-malformed",
            json_path=where,
        )
    if len(set(ids)) != len(ids):
        raise ProofError(
            f"previousProof names a proof twice: {value!r}",
            code="proof-malformed",
            json_path=where,
        )
    return tuple(ids)


def _refuse_missing(proof: Mapping[str, Any], *, path: str) -> None:
    for name in _PRESENT:
        if proof.get(name) is None:
            raise ProofError(
                f"required proof property {name!r} is missing",
                code="proof-malformed",
                json_path=f"{path}.{name}",
            )


def _check_profile(proof: object, index: int, path: str, purpose: str) -> _Checked:
    """(2) Profile check of one proof: shape, exact constants, encodings."""
    if type(proof) is not dict and not isinstance(proof, Mapping):
        raise ProofError(
            f"a proof is a JSON object, got {type(proof).__name__}",
            code="proof-malformed",
            json_path=path,
        )
    _check_suite(proof, path=path)
    if proof.get("proofPurpose") != purpose:
        raise ProofError(
            f"expected proofPurpose {purpose!r}, got {proof.get('proofPurpose')!r}",
            code="wrong-purpose",
            json_path=f"{path}.proofPurpose",
        )
    if not _PROFILE_KEYS.issuperset(proof):
        for name in proof:
            if name not in _PROFILE_KEYS:
                raise ProofError(
                    f"unknown proof property {name!r}; the profile allows only the standard "
                    "ones",
                    code="proof-malformed",
                    json_path=f"{path}.{name}",
                )
    # type, cryptosuite and proofPurpose hold their exact values by now: of the members
    # every proof carries, only these three can still be missing.
    vm: Any = proof.get("verificationMethod")
    value = proof.get("proofValue")
    if vm is None or value is None or proof.get("created") is None:
        _refuse_missing(proof, path=path)
    if type(vm) is not str or not vm:
        _string(proof, "verificationMethod", path=path)
    signature = _signature_bytes(value, path=path)
    created = _time(proof, "created", path=path)
    if len(proof) == len(_PRESENT):  # the six members every proof carries, and no other
        return _Checked(index, path, proof, vm, signature, created, None, (), False)
    expires = _time(proof, "expires", path=path) if "expires" in proof else None
    if expires is not None and expires <= created:
        raise ProofError(
            f"expires ({proof['expires']}) must be later than created ({proof['created']})",
            code="proof-malformed",
            json_path=f"{path}.expires",
        )
    for name in _TEXT_OPTIONS:
        if name in proof:
            _string(proof, name, path=path)
    previous = _previous(proof, path=path)
    return _Checked(index, path, proof, vm, signature, created, expires, previous, True)


def _check_set(checked: Sequence[_Checked]) -> None:
    """(3) Duplicates and (4) chain structure across the proof set."""
    if len(checked) == 1 and not checked[0].previous:
        return  # one proof naming none: nothing to repeat, no chain to break
    ids: dict[str, int] = {}
    values: set[str] = set()
    for item in checked:
        proof_id = item.proof.get("id")
        if proof_id is not None:
            if proof_id in ids:
                raise ProofError(
                    f"proof id {proof_id!r} appears twice in the proof set",
                    code="proof-duplicated",
                    json_path=f"{item.path}.id",
                )
            ids[proof_id] = item.at
        value = item.proof["proofValue"]
        if value in values:
            raise ProofError(
                "the same proofValue appears twice in the proof set",
                code="proof-duplicated",
                json_path=f"{item.path}.proofValue",
            )
        values.add(value)
    for item in checked:
        for ref in item.previous:
            target = ids.get(ref)
            if target is None:
                reason = f"previousProof {ref!r} names no proof in the set"
            elif target >= item.at:
                what = "itself" if target == item.at else "a later proof"
                reason = (
                    f"previousProof {ref!r} names {what}; chained proofs may only name "
                    "earlier proofs (no cycles)"
                )
            else:
                continue
            raise ProofError(
                reason, code="proof-chain-broken", json_path=f"{item.path}.previousProof"
            )


def _input_document(
    document: Mapping[str, Any], proofs: Sequence[Mapping[str, Any]], previous: Sequence[str]
) -> dict[str, Any]:
    """The document a proof signs: no ``proof``, or exactly the matching previous proofs."""
    unsecured = _without_proof(document)
    if previous:
        wanted = set(previous)
        unsecured["proof"] = [
            proof for proof in proofs if isinstance(proof.get("id"), str) and proof["id"] in wanted
        ]
    return unsecured


def _check_expected(value: object, expected: str | None, name: str, *, path: str) -> None:
    if value == expected:
        return
    if expected is None:
        reason = f"the proof is bound to {name} {value!r}, but none was expected"
    elif value is None:
        reason = f"expected {name} {expected!r}, but the proof has none"
    else:
        reason = f"expected {name} {expected!r}, got {value!r}"
    raise ProofError(reason, code=f"{name}-mismatch", json_path=f"{path}.{name}")


def verify(
    document: Mapping[str, Any],
    keyring: KeyRing,
    *,
    purpose: str,
    now: datetime | None = None,
    max_proofs: int = 8,
    expected_domain: str | None = None,
    expected_challenge: str | None = None,
) -> tuple[VerifiedProof, ...]:
    """Verify every proof of a plain-JSON document; return them all or raise.

    The checks run in this order and the first failure raises (fail closed):

    0. arguments: a non-empty key ring (``empty-trust-store``), an aware ``now``;
    1. a proof is present (``proof-missing``), the document's ``@context``, if any, is
       one of the accepted values (``context-not-allowed``; see
       :data:`~handoffs.integrity.ACCEPTED_CONTEXTS`: data, never interpreted), at most
       ``max_proofs`` proofs (``too-many-proofs``);
    2. each proof's profile: exact ``type`` (``wrong-proof-type``) and ``cryptosuite``
       (``wrong-cryptosuite``), ``proofPurpose == purpose`` (``wrong-purpose``), no
       unknown properties, ``proofValue`` is ``z`` + canonical base58btc of 64 bytes,
       ``created``/``expires`` are RFC 3339 ``Z`` times (all ``proof-malformed``); a
       proof's ``@context`` is accepted and a prefix of the document's
       (``context-mismatch``), and replaces it in what is hashed, as the JCS suites say;
    3. no duplicate proof ``id`` or ``proofValue`` (``proof-duplicated``);
    4. every ``previousProof`` names an earlier proof (``proof-chain-broken``);
    5. per proof: the key is in the ring (``unknown-key``; never fetched), is not
       revoked at ``now`` (``key-revoked``, whatever ``created`` says), was valid at
       ``created`` (``key-not-valid``), may serve ``purpose`` (``purpose-not-allowed``),
       ``domain``/``challenge`` match what is expected (``domain-mismatch``,
       ``challenge-mismatch``; a bound proof needs an expected value), the signature
       verifies (``bad-signature``), ``now`` is before ``expires`` (``proof-expired``
       from that very instant on, the one expiry rule of ``handoffs._time``),
       ``created`` is at most five minutes (the clock skew) after ``now`` (``proof-not-yet-valid``).

    ``created`` is the signer's claim: a key rotated out of its window (``not_after``)
    can still back-date. Revocation (``revoked_at``) stops every proof of a key; a
    receiver also bounds the age of ``created`` (``max_proof_age`` of
    :meth:`~handoffs.contracts.Receipt.verify` and the gate) and keeps a replay store.

    Raises:
        ProofError: with the ``code`` above and the JSON path of the offending value.
        MalformedJSON: the document cannot be canonicalised.

    """
    # The document is checked as JSON data (limits, lone surrogates, non-JSON values);
    # the same walk says whether it takes the canonical fast path, which then covers
    # every part a proof canonicalises. A ParsedObject was checked by its parser, and
    # says so itself.
    if type(document) is ParsedObject:
        encode = canonical_bytes_plain if document.plain else canonical_bytes
    elif not isinstance(document, Mapping):
        raise MalformedJSON(
            f"a signed document is a JSON object, got {type(document).__name__}",
            code="not-an-object",
        )
    else:
        encode = canonical_bytes_plain if check_value(document) else canonical_bytes

    # (0) arguments, before any work.
    if not isinstance(keyring, KeyRing):
        raise InvalidArgument(f"keyring must be a KeyRing, got {type(keyring).__name__}")
    if not keyring.entries:
        raise ProofError(
            "the key ring is empty; nothing can verify (fail closed)",
            code="empty-trust-store",
        )
    if not isinstance(purpose, str) or not purpose:
        raise InvalidArgument(f"purpose must be a non-empty string, got {purpose!r}")
    if isinstance(max_proofs, bool) or not isinstance(max_proofs, int) or max_proofs < 1:
        raise InvalidArgument(f"max_proofs must be a positive integer, got {max_proofs!r}")
    try:
        now = datetime.now(UTC) if now is None else _aware_utc(now, json_path="$")
    except KeyRingError as exc:
        raise InvalidArgument(f"now must be a timezone-aware datetime: {exc.message}") from exc

    # (1) presence and size.
    proofs = _proof_list(document)
    if "@context" in document:  # the accepted values, as data (handoffs.integrity._context)
        check_context(document["@context"])
    if len(proofs) > max_proofs:
        raise ProofError(
            f"{len(proofs)} proofs exceed the limit of {max_proofs}",
            code="too-many-proofs",
            json_path="$.proof",
        )
    single = not isinstance(document["proof"], list)  # _proof_list took a Mapping or a list

    # (2) profile of every proof.
    checked = [
        _check_profile(proof, i, "$.proof" if single else f"$.proof[{i}]", purpose)
        for i, proof in enumerate(proofs)
    ]
    for item in checked:
        if item.options:  # a proof's @context, when present
            check_proof_context(document, item.proof, path=item.path)
    # (3) duplicates, (4) chain structure.
    _check_set(checked)

    # (5) keys, signatures and times, proof by proof.
    return tuple([
        _verify_one(item, document, proofs, keyring, purpose, now=now,
                    expected_domain=expected_domain, expected_challenge=expected_challenge,
                    encode=encode)
        for item in checked
    ])


def _verify_one(
    item: _Checked,
    document: Mapping[str, Any],
    proofs: Sequence[Mapping[str, Any]],
    keyring: KeyRing,
    purpose: str,
    *,
    now: datetime,
    expected_domain: str | None,
    expected_challenge: str | None,
    encode: Callable[[Any], bytes],
) -> VerifiedProof:
    proof, path, vm = item.proof, item.path, item.vm
    try:
        if (found := keyring.lookup(vm)).revoked(now):
            raise ProofError(
                f"key {vm!r} of {found.controller!r} was revoked at "
                f"{_format_utc(cast(datetime, found.revoked_at))}; none of its proofs "
                "verifies any more, whatever its created time", code="key-revoked",
                json_path=f"{path}.verificationMethod")
        # One lookup per verification method: the ring is asked again only to say why
        # the key was not valid at ``created``.
        entry = found if found.valid_at(item.created) else keyring.entry_valid_at(
            vm, item.created)
    except UnknownKey as exc:
        raise ProofError(
            f"verificationMethod {vm!r} is not in the key ring; keys are never fetched",
            code="unknown-key",
            json_path=f"{path}.verificationMethod",
        ) from exc
    except ProofError as exc:
        if exc.code == "key-revoked":
            raise
        raise ProofError(exc.message, code=exc.code, json_path=f"{path}.created") from exc
    suite = entry.suite
    if proof["cryptosuite"] != suite.name:
        raise ProofError(
            f"key {vm!r} is a {suite.name!r} key; the proof names "
            f"{proof['cryptosuite']!r} (the key, never the message, picks the algorithm)",
            code="wrong-cryptosuite",
            json_path=f"{path}.cryptosuite",
        )
    if purpose not in entry.purposes:
        raise ProofError(
            f"key {vm!r} of {entry.controller!r} may not serve {purpose!r} "
            f"(allowed: {sorted(entry.purposes)})",
            code="purpose-not-allowed",
            json_path=f"{path}.proofPurpose",
        )
    # Without optional members the proof binds no domain and no challenge.
    if item.options or expected_domain is not None or expected_challenge is not None:
        if proof.get("domain") != expected_domain:
            _check_expected(proof.get("domain"), expected_domain, "domain", path=path)
        if proof.get("challenge") != expected_challenge:
            _check_expected(proof.get("challenge"), expected_challenge, "challenge", path=path)

    config = dict(proof)  # the profile check found proofValue there
    del config["proofValue"]
    input_document = _input_document(document, proofs, item.previous)
    if item.options and "@context" in proof:  # the JCS suites' verify: the proof's
        input_document["@context"] = proof["@context"]  # @context, a prefix
    suite.verify(entry.public_key_bytes, item.signature,
                 _hash_data(encode(config), encode(input_document)),
                 json_path=f"{path}.proofValue", who=f"key {vm!r}")

    if item.expires is not None and expired(item.expires, now):
        raise ProofError(
            f"the proof expired at {proof['expires']} (now {_format_utc(now)})",
            code="proof-expired",
            json_path=f"{path}.expires",
        )
    if item.created > now + CLOCK_SKEW:
        raise ProofError(
            f"the proof claims creation at {proof['created']}, more than "
            f"{int(CLOCK_SKEW.total_seconds())} s after now ({_format_utc(now)})",
            code="proof-not-yet-valid",
            json_path=f"{path}.created",
        )
    return VerifiedProof(
        proof_id=proof.get("id") if item.options else None,
        verification_method=vm,
        controller=entry.controller,
        roles=entry.roles,
        purpose=purpose,
        created=item.created,
        expires=item.expires,
        previous_proof=item.previous,
        key_entry=entry,
    )


def _optional_text(value: object, name: str) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise InvalidArgument(f"{name} must be a non-empty string or None, got {value!r}")


def _sign_times(created: datetime, expires: datetime | None) -> tuple[datetime, datetime | None]:
    try:
        created = _aware_utc(created, json_path="$")
        expires = None if expires is None else _aware_utc(expires, json_path="$")
    except KeyRingError as exc:
        raise InvalidArgument(
            f"created and expires must be aware datetimes: {exc.message}") from exc
    if expires is not None and expires <= created:
        raise ProofError(
            f"expires ({_format_utc(expires)}) must be later than created ({_format_utc(created)})",
            code="proof-malformed",
            json_path="$.proof.expires",
        )
    return created, expires


def _sign_previous(previous_proof: str | Sequence[str] | None) -> tuple[str, ...]:
    if previous_proof is None:
        return ()
    previous = (previous_proof,) if isinstance(previous_proof, str) else tuple(previous_proof)
    if not previous or not all(isinstance(ref, str) and ref for ref in previous):
        raise InvalidArgument(
            f"previous_proof must be a proof id or a non-empty list of ids, got {previous_proof!r}"
        )
    if len(set(previous)) != len(previous):
        raise InvalidArgument(f"previous_proof names a proof twice: {previous_proof!r}")
    return previous


def _check_sign_set(
    existing: Sequence[Mapping[str, Any]], proof_id: str | None, previous: Sequence[str]
) -> None:
    existing_ids = [proof.get("id") for proof in existing]
    if proof_id is not None and proof_id in existing_ids:
        raise ProofError(
            f"proof id {proof_id!r} is already used in the proof set",
            code="proof-duplicated",
            json_path="$.proof",
        )
    for ref in previous:
        if existing_ids.count(ref) != 1:
            raise ProofError(
                f"previous_proof {ref!r} must name exactly one existing proof",
                code="proof-chain-broken",
                json_path="$.proof",
            )


def sign(
    document: Mapping[str, Any],
    key: Signer,
    *,
    purpose: str = "assertionMethod",
    created: datetime,
    expires: datetime | None = None,
    proof_id: str | None = None,
    previous_proof: str | Sequence[str] | None = None,
    domain: str | None = None,
    challenge: str | None = None,
) -> dict[str, Any]:
    """Return a new document with a proof of ``key``'s suite added (plain-JSON profile).

    The proof names ``key.verification_method`` (its ``did:key``); the verifier must
    have that key in its :class:`KeyRing`. Without existing proofs the result's
    ``proof`` is the new proof object; otherwise ``proof`` becomes a proof set (a list)
    with the new proof appended. With ``previous_proof`` the new proof is chained: it is
    signed over the document whose ``proof`` is exactly the named proofs, so it covers
    their ``proofValue``. The input document is not modified.

    Raises:
        ValueError: ``InvalidArgument`` (also a TypeError), for bad arguments (naive datetimes,
            empty strings, wrong types),
            before any work.
        ProofError: ``context-not-allowed`` (an ``@context`` outside the accepted
            values; an accepted one is copied into the proof, as the JCS suites say),
            ``proof-malformed`` (existing proofs are not objects, ``expires`` not after
            ``created``), ``proof-duplicated`` (``proof_id`` already used) or
            ``proof-chain-broken`` (``previous_proof`` names no existing proof).
        MalformedJSON: the document cannot be canonicalised (floats, huge integers).

    """
    # Arguments first, before any work.
    if not isinstance(key, Signer):
        raise InvalidArgument(f"key must be a Signer (a SigningKey, say), got {type(key).__name__}")
    suite = cryptosuite(key.cryptosuite, json_path="$.proof.cryptosuite")
    if not isinstance(purpose, str) or not purpose:
        raise InvalidArgument(f"purpose must be a non-empty string, got {purpose!r}")
    for value, name in ((proof_id, "proof_id"), (domain, "domain"), (challenge, "challenge")):
        _optional_text(value, name)
    created, expires = _sign_times(created, expires)
    previous = _sign_previous(previous_proof)
    if not isinstance(document, Mapping):
        raise MalformedJSON(
            f"a document is a JSON object, got {type(document).__name__}", code="not-an-object"
        )
    if "@context" in document:
        check_context(document["@context"])
    existing = _existing_proofs(document)
    _check_sign_set(existing, proof_id, previous)

    optional: dict[str, Any] = {
        "id": proof_id,
        "expires": None if expires is None else _format_utc(expires),
        "previousProof": (
            None
            if not previous
            else previous_proof
            if isinstance(previous_proof, str)
            else list(previous)
        ),
        "domain": domain,
        "challenge": challenge,
    }
    proof: dict[str, Any] = {
        # The JCS suites' create: the document's @context, when present, joins the proof.
        **({"@context": copy.deepcopy(document["@context"])} if "@context" in document else {}),
        "type": PROOF_TYPE,
        "cryptosuite": suite.name,
        "created": _format_utc(created),
        "verificationMethod": key.verification_method,
        "proofPurpose": purpose,
        **{name: value for name, value in optional.items() if value is not None},
    }
    input_document = copy.deepcopy(_input_document(document, existing, previous))
    message = _hash_data(canonical_bytes(proof), canonical_bytes(input_document))
    proof["proofValue"] = "z" + b58encode(suite.sign(key, message))

    secured = copy.deepcopy(_without_proof(document))
    secured["proof"] = [*copy.deepcopy(existing), proof] if existing else proof
    return secured


def _existing_proofs(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if "proof" not in document or document["proof"] is None:
        return []
    value = document["proof"]
    proofs = [value] if isinstance(value, Mapping) else value
    if not isinstance(proofs, list) or not all(isinstance(p, Mapping) for p in proofs):
        raise ProofError(
            "the existing proof must be an object or an array of objects",
            code="proof-malformed",
            json_path="$.proof",
        )
    return proofs
