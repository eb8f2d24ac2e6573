"""Data Integrity proofs (eddsa-jcs-2022): vectors, the receipt profile, attacks."""

from __future__ import annotations

import copy
import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from nacl.exceptions import BadSignatureError

from handoffs._errors import HandoffsError, InvalidArgument, MalformedJSON, ProofError
from handoffs._json import MAX_SAFE_INTEGER, canonical_bytes, loads
from handoffs._time import CLOCK_SKEW
from handoffs.integrity import KeyRing, SigningKey, VerifiedProof, sign, verify
from handoffs.integrity._base58 import b58decode, b58encode
from handoffs.integrity._w3c import (
    CRYPTOSUITE,
    PROOF_TYPE,
    _hash_data,
    _proof_config,
    create_proof,
    verify_proof,
)

VECTOR_FILE = json.loads((Path(__file__).parents[1] / "vectors" / "eddsa-jcs-2022.json")
                         .read_text())
VECTORS = {vector["id"]: vector for vector in VECTOR_FILE["vectors"]}
RAW = VECTOR_FILE["raw_files"]["files"]
VECTOR_KEY = SigningKey.from_multibase(VECTOR_FILE["key_pair"]["privateKeyMultibase"])
L = 2**252 + 27742317777372353535851937790883648493

CREATED = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
NOW = CREATED + timedelta(minutes=30)
PURPOSE = "assertionMethod"

PROPOSER = SigningKey.generate()
APPROVER = SigningKey.generate()
EXECUTOR = SigningKey.generate()
STRANGER = SigningKey.generate()  # valid did:key, never enrolled
RING = (
    KeyRing()
    .enrol(
        PROPOSER.public_key_multibase,
        controller="evidence-specialist",
        roles={"investigator", "proposer"},
        not_before=CREATED - timedelta(days=30),
    )
    .enrol(
        APPROVER.public_key_multibase,
        controller="case-owner",
        roles={"approver"},
        not_before=CREATED - timedelta(days=30),
        purposes={"assertionMethod", "capabilityDelegation"},
    )
    .enrol(
        EXECUTOR.public_key_multibase,
        controller="payments",
        roles={"executor"},
        not_before=CREATED - timedelta(days=30),
    )
)

RECEIPT: dict[str, Any] = {
    "type": "DecisionReceipt",
    "schema_version": "1.0",
    "id": "urn:uuid:6f0c5a8e-3f55-4d4e-9d55-0c8f0b8a1f11",
    "case_id": "case-1842",
    "sender": "spiffe://acme/agent/evidence-specialist",
    "receiver": "spiffe://acme/agent/case-owner",
    "authority": "ADVISE",
    "policy_version": "PAY-7.4",
    "issued_at": "2026-01-05T10:00:00Z",
    "valid_until": "2026-01-05T11:00:00Z",
    "evidence_refs": [{"uri": "evidence://case-1842/policy", "digest": {"sha256": "ab" * 32}}],
    "decision": {
        "proposed_action": "ESCALATE",
        "decision_state": {"policy_current": False, "amount_minor": 125000},
        "note": "Zahlung prüfen 😂",
    },
}


def signed(
    document: dict[str, Any] | None = None, key: SigningKey = PROPOSER, **options: Any
) -> dict[str, Any]:
    options.setdefault("created", CREATED)
    return sign(RECEIPT if document is None else document, key, **options)


def check(document: Any, **options: Any) -> tuple[VerifiedProof, ...]:
    options.setdefault("purpose", PURPOSE)
    options.setdefault("now", NOW)
    return verify(document, options.pop("keyring", RING), **options)


def fails(document: Any, code: str, json_path: str | None = None, **options: Any) -> ProofError:
    with pytest.raises(ProofError) as info:
        check(document, **options)
    assert info.value.code == code, str(info.value)
    if json_path is not None:
        assert info.value.json_path == json_path
    return info.value


def chain() -> dict[str, Any]:
    """Proposer signs, approver chains onto the proposal, executor onto the approval."""
    doc = signed(proof_id="urn:proof:proposal")
    doc = signed(doc, APPROVER, proof_id="urn:proof:approval", previous_proof="urn:proof:proposal")
    return signed(
        doc, EXECUTOR, proof_id="urn:proof:execution", previous_proof=["urn:proof:approval"]
    )


# ------------------------------------------------------------ published vectors


def split(vector: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    secured = vector["secured_document"]
    proof = secured["proof"]
    unsecured = {k: v for k, v in secured.items() if k != "proof"}
    options = {k: v for k, v in proof.items() if k != "proofValue"}
    return unsecured, options, proof


@pytest.mark.parametrize("vector", VECTORS.values(), ids=VECTORS.keys())
def test_vector_reproduces_byte_for_byte(vector: dict[str, Any]) -> None:
    unsecured, options, proof = split(vector)
    made = create_proof(unsecured, options, VECTOR_KEY, copy_context="@context" in proof)
    assert made["proofValue"] == proof["proofValue"]
    assert canonical_bytes(made) == canonical_bytes(proof)
    assert made == proof


@pytest.mark.parametrize("vector", VECTORS.values(), ids=VECTORS.keys())
def test_vector_intermediates(vector: dict[str, Any]) -> None:
    unsecured, options, proof = split(vector)
    config = _proof_config(unsecured, options, copy_context="@context" in proof)
    canonical_config = canonical_bytes(config)
    canonical_document = canonical_bytes(unsecured)
    hash_data = _hash_data(canonical_config, canonical_document)
    assert hash_data == (
        hashlib.sha256(canonical_config).digest() + hashlib.sha256(canonical_document).digest()
    )
    signature = VECTOR_KEY.sign(hash_data)
    assert b58decode(proof["proofValue"][1:]) == signature
    assert "z" + b58encode(signature) == proof["proofValue"]
    if "canonical_document" in vector:  # the W3C vector publishes every intermediate
        assert canonical_document.decode() == vector["canonical_document"]
        assert canonical_config.decode() == vector["canonical_proof_config"]
        assert hashlib.sha256(canonical_document).hexdigest() == vector["document_hash_hex"]
        assert hashlib.sha256(canonical_config).hexdigest() == vector["proof_config_hash_hex"]
        assert hash_data.hex() == vector["hash_data_hex"]
        assert signature.hex() == vector["signature_hex"]
        assert proof["proofValue"] == vector["proof_value"]


@pytest.mark.parametrize("vector", VECTORS.values(), ids=VECTORS.keys())
def test_vector_verifies(vector: dict[str, Any]) -> None:
    secured = vector["secured_document"]
    verify_proof(secured, secured["proof"], VECTOR_KEY.public_key_bytes)


def test_w3c_raw_files_match_the_vector() -> None:
    vector = VECTORS["w3c-rec-b3"]
    prefix = "TestVectors/eddsa-jcs-2022/"
    assert loads(RAW["TestVectors/unsigned.json"]) == vector["unsecured_document"]
    assert loads(RAW[prefix + "proofConfigJCS.json"]) == vector["proof_options"]
    assert loads(RAW[prefix + "signedJCS.json"]) == vector["secured_document"]
    assert RAW[prefix + "canonDocJCS.txt"] == vector["canonical_document"]
    assert RAW[prefix + "proofCanonJCS.txt"] == vector["canonical_proof_config"]
    assert RAW[prefix + "docHashJCS.txt"] == vector["document_hash_hex"]
    assert RAW[prefix + "proofHashJCS.txt"] == vector["proof_config_hash_hex"]
    assert RAW[prefix + "combinedHashJCS.txt"] == vector["hash_data_hex"]
    assert RAW[prefix + "sigHexJCS.txt"] == vector["signature_hex"]
    assert RAW[prefix + "sigBTC58JCS.txt"] == vector["proof_value"]
    key_pair = loads(RAW["TestVectors/keyPair.json"])
    assert key_pair == {
        "publicKeyMultibase": VECTOR_KEY.public_key_multibase,
        "privateKeyMultibase": VECTOR_FILE["key_pair"]["privateKeyMultibase"],
    }


def test_w3c_vector_proof_is_created_with_context_copied() -> None:
    vector = VECTORS["w3c-rec-b3"]
    options = {k: v for k, v in vector["proof_options"].items() if k != "@context"}
    made = create_proof(vector["unsecured_document"], options, VECTOR_KEY)
    assert made["@context"] == vector["unsecured_document"]["@context"]
    assert made["proofValue"] == vector["proof_value"]


def vector_secured() -> dict[str, Any]:
    return copy.deepcopy(VECTORS["w3c-rec-b3"]["secured_document"])


LOW_LEVEL_CASES: dict[str, tuple[Any, str, str]] = {
    "wrong-type": (("proof", "type", "Ed25519Signature2020"), "wrong-proof-type", "$.proof.type"),
    "wrong-cryptosuite": (
        ("proof", "cryptosuite", "eddsa-rdfc-2022"),
        "wrong-cryptosuite",
        "$.proof.cryptosuite",
    ),
    "proofValue-missing": (("proof", "proofValue", None), "proof-malformed", "$.proof.proofValue"),
    "proofValue-not-multibase": (
        ("proof", "proofValue", "u" + "A" * 86),
        "proof-malformed",
        "$.proof.proofValue",
    ),
    "proofValue-63-bytes": (
        ("proof", "proofValue", "z" + b58encode(b"\x01" * 63)),
        "proof-malformed",
        "$.proof.proofValue",
    ),
    "context-reordered": (
        ("@context", None, list(reversed(VECTORS["w3c-rec-b3"]["unsecured_document"]["@context"]))),
        "context-mismatch",
        "$.@context",
    ),
    "document-changed": (
        ("issuer", None, "https://evil.example"),
        "bad-signature",
        "$.proof.proofValue",
    ),
    "proof-created-changed": (
        ("proof", "created", "2023-02-24T23:36:39Z"),
        "bad-signature",
        "$.proof.proofValue",
    ),
}


@pytest.mark.parametrize(
    ("change", "code", "path"), LOW_LEVEL_CASES.values(), ids=LOW_LEVEL_CASES.keys()
)
def test_low_level_verify_rejects(
    change: tuple[str, str | None, Any], code: str, path: str
) -> None:
    secured = vector_secured()
    outer, inner, value = change
    if inner is None:
        secured[outer] = value
    elif value is None:
        del secured[outer][inner]
    else:
        secured[outer][inner] = value
    with pytest.raises(ProofError) as info:
        verify_proof(secured, secured["proof"], VECTOR_KEY.public_key_bytes)
    assert (info.value.code, info.value.json_path) == (code, path)


def test_low_level_verify_uses_the_proof_context_prefix() -> None:
    # The document may append contexts after signing; the proof's @context is hashed.
    secured = vector_secured()
    secured["@context"] = [*secured["@context"], "https://example.org/extra/v1"]
    verify_proof(secured, secured["proof"], VECTOR_KEY.public_key_bytes)


def test_low_level_verify_refuses_weak_keys_and_wrong_keys() -> None:
    secured = vector_secured()
    with pytest.raises(ProofError) as info:
        verify_proof(secured, secured["proof"], bytes(32))
    assert info.value.code == "bad-key"
    with pytest.raises(ProofError) as info:
        verify_proof(secured, secured["proof"], STRANGER.public_key_bytes)
    assert info.value.code == "bad-signature"
    assert isinstance(info.value.__cause__, BadSignatureError)


@pytest.mark.parametrize(
    ("options", "code", "path"),
    [
        ({"cryptosuite": "ecdsa-jcs-2019"}, "wrong-cryptosuite", "$.proof.cryptosuite"),
        ({"type": "Ed25519Signature2020"}, "wrong-proof-type", "$.proof.type"),
        ({"created": "yesterday"}, "proof-malformed", "$.proof.created"),
        ({"proofValue": "z1"}, "proof-malformed", "$.proof.proofValue"),
    ],
    ids=["wrong-cryptosuite", "wrong-type", "created-not-datetime", "proofValue-in-options"],
)
def test_create_proof_rejects(options: dict[str, Any], code: str, path: str) -> None:
    base = dict(VECTORS["w3c-rec-b3"]["proof_options"])
    with pytest.raises(ProofError) as info:
        create_proof(VECTORS["w3c-rec-b3"]["unsecured_document"], {**base, **options}, VECTOR_KEY)
    assert (info.value.code, info.value.json_path) == (code, path)


# --------------------------------------------------------------- sign / verify


def test_sign_then_verify() -> None:
    document = signed(expires=CREATED + timedelta(hours=1), proof_id="urn:proof:1")
    assert set(document) == {*RECEIPT, "proof"}
    proof = document["proof"]
    assert proof["type"] == PROOF_TYPE
    assert proof["cryptosuite"] == CRYPTOSUITE
    assert proof["created"] == "2026-01-05T10:00:00Z"
    assert proof["expires"] == "2026-01-05T11:00:00Z"
    assert proof["verificationMethod"] == PROPOSER.verification_method
    assert "@context" not in proof
    (result,) = check(document)
    assert result == VerifiedProof(
        proof_id="urn:proof:1",
        verification_method=PROPOSER.verification_method,
        controller="evidence-specialist",
        roles=frozenset({"investigator", "proposer"}),
        purpose=PURPOSE,
        created=CREATED,
        expires=CREATED + timedelta(hours=1),
        previous_proof=(),
        key_entry=RING.lookup(PROPOSER.verification_method),
    )
    with pytest.raises(AttributeError):
        result.controller = "mallory"  # type: ignore[misc]


def test_sign_does_not_touch_its_input() -> None:
    before = copy.deepcopy(RECEIPT)
    document = signed()
    assert before == RECEIPT
    document["decision"]["proposed_action"] = "PAY"
    assert RECEIPT["decision"]["proposed_action"] == "ESCALATE"


def test_signed_document_is_interoperable_with_the_low_level_verifier() -> None:
    document = signed()
    verify_proof(document, document["proof"], PROPOSER.public_key_bytes)


def test_verify_with_default_now() -> None:
    document = signed(created=datetime.now(UTC))
    assert check(document, now=None)[0].controller == "evidence-specialist"


# DI negative list (w3c-ccg data-integrity-test-suite-assertion, vc-di-eddsa-test-suite).
def set_proof(name: str, value: Any) -> dict[str, Any]:
    document = signed()
    if value is DELETE:
        del document["proof"][name]
    else:
        document["proof"][name] = value
    return document


DELETE = object()
P = "$.proof"
NEGATIVE: dict[str, tuple[dict[str, Any], str, str]] = {
    "type-wrong": (set_proof("type", "Ed25519Signature2020"), "wrong-proof-type", f"{P}.type"),
    "type-missing": (set_proof("type", DELETE), "wrong-proof-type", f"{P}.type"),
    "cryptosuite-rdfc": (
        set_proof("cryptosuite", "eddsa-rdfc-2022"),
        "wrong-cryptosuite",
        f"{P}.cryptosuite",
    ),
    "cryptosuite-none": (set_proof("cryptosuite", "none"), "wrong-cryptosuite", f"{P}.cryptosuite"),
    "cryptosuite-missing": (
        set_proof("cryptosuite", DELETE),
        "wrong-cryptosuite",
        f"{P}.cryptosuite",
    ),
    "purpose-wrong": (
        set_proof("proofPurpose", "authentication"),
        "wrong-purpose",
        f"{P}.proofPurpose",
    ),
    "purpose-missing": (set_proof("proofPurpose", DELETE), "wrong-purpose", f"{P}.proofPurpose"),
    "unknown-property": (set_proof("jws", "eyJ..."), "proof-malformed", f"{P}.jws"),
    "context-in-proof-only": (
        set_proof("@context", ["https://w3id.org/security/data-integrity/v2"]),
        "context-mismatch",
        f"{P}.@context",
    ),
    "context-in-proof-not-accepted": (
        set_proof("@context", ["https://example.org/terms/v1"]),
        "context-not-allowed",
        f"{P}.@context[0]",
    ),
    "verificationMethod-missing": (
        set_proof("verificationMethod", DELETE),
        "proof-malformed",
        f"{P}.verificationMethod",
    ),
    "verificationMethod-not-string": (
        set_proof("verificationMethod", {"id": "x"}),
        "proof-malformed",
        f"{P}.verificationMethod",
    ),
    "verificationMethod-empty": (
        set_proof("verificationMethod", ""),
        "proof-malformed",
        f"{P}.verificationMethod",
    ),
    "proofValue-missing": (set_proof("proofValue", DELETE), "proof-malformed", f"{P}.proofValue"),
    "proofValue-null": (set_proof("proofValue", None), "proof-malformed", f"{P}.proofValue"),
    "proofValue-not-string": (set_proof("proofValue", 12), "proof-malformed", f"{P}.proofValue"),
    "proofValue-no-multibase-prefix": (
        set_proof("proofValue", "3" * 87),
        "proof-malformed",
        f"{P}.proofValue",
    ),
    "proofValue-base58flickr-prefix": (
        set_proof("proofValue", "Z" + "3" * 87),
        "proof-malformed",
        f"{P}.proofValue",
    ),
    "proofValue-63-bytes": (
        set_proof("proofValue", "z" + b58encode(b"\x07" * 63)),
        "proof-malformed",
        f"{P}.proofValue",
    ),
    "proofValue-65-bytes": (
        set_proof("proofValue", "z" + b58encode(b"\x07" * 65)),
        "proof-malformed",
        f"{P}.proofValue",
    ),
    "proofValue-extra-leading-1": (
        set_proof("proofValue", "z1" + signed()["proof"]["proofValue"][1:]),
        "proof-malformed",
        f"{P}.proofValue",
    ),
    "proofValue-outside-alphabet": (
        set_proof("proofValue", "z" + "0" * 87),
        "proof-malformed",
        f"{P}.proofValue",
    ),
    "proofValue-huge": (
        set_proof("proofValue", "z" + "2" * 10_000),
        "proof-malformed",
        f"{P}.proofValue",
    ),
    "created-missing": (set_proof("created", DELETE), "proof-malformed", f"{P}.created"),
    "created-offset": (
        set_proof("created", "2026-01-05T10:00:00+00:00"),
        "proof-malformed",
        f"{P}.created",
    ),
    "created-date-only": (set_proof("created", "2026-01-05"), "proof-malformed", f"{P}.created"),
    "created-lowercase": (
        set_proof("created", "2026-01-05t10:00:00z"),
        "proof-malformed",
        f"{P}.created",
    ),
    "created-impossible": (
        set_proof("created", "2026-02-30T10:00:00Z"),
        "proof-malformed",
        f"{P}.created",
    ),
    "created-number": (set_proof("created", 1767607200), "proof-malformed", f"{P}.created"),
    "expires-bad": (set_proof("expires", "tomorrow"), "proof-malformed", f"{P}.expires"),
    "expires-before-created": (
        set_proof("expires", "2026-01-05T09:00:00Z"),
        "proof-malformed",
        f"{P}.expires",
    ),
    "id-not-string": (set_proof("id", 7), "proof-malformed", f"{P}.id"),
    "previousProof-empty": (
        set_proof("previousProof", []),
        "proof-malformed",
        f"{P}.previousProof",
    ),
    "previousProof-number": (
        set_proof("previousProof", 1),
        "proof-malformed",
        f"{P}.previousProof",
    ),
    "domain-not-string": (set_proof("domain", ["a", "b"]), "proof-malformed", f"{P}.domain"),
}


@pytest.mark.parametrize(("document", "code", "path"), NEGATIVE.values(), ids=NEGATIVE.keys())
def test_negative_data_integrity_cases(document: dict[str, Any], code: str, path: str) -> None:
    fails(document, code, path)


@pytest.mark.parametrize("member", ["verificationMethod", "proofValue", "created"])
def test_a_missing_member_is_named_missing_not_mistyped(member: str) -> None:
    error = fails(set_proof(member, DELETE), "proof-malformed", f"{P}.{member}")
    assert error.message == f"required proof property {member!r} is missing"


@pytest.mark.parametrize(
    ("proof", "code"),
    [
        (DELETE, "proof-missing"),
        (None, "proof-missing"),
        ([], "proof-missing"),
        ("z3abc", "proof-malformed"),
        ([7], "proof-malformed"),
    ],
    ids=["stripped", "null", "empty-set", "string", "set-of-number"],
)
def test_missing_or_malformed_proof(proof: Any, code: str) -> None:
    document = signed()
    if proof is DELETE:
        del document["proof"]
    else:
        document["proof"] = proof
    error = fails(document, code)
    assert error.json_path in {"$.proof", "$.proof[0]"}


def test_non_canonical_signature_s_plus_l_is_refused() -> None:
    # Ed25519 malleability: (R, S + L) verifies under lax verifiers; OpenSSL rejects it.
    document = signed()
    signature = b58decode(document["proof"]["proofValue"][1:])
    s = int.from_bytes(signature[32:], "little") + L
    document["proof"]["proofValue"] = "z" + b58encode(signature[:32] + s.to_bytes(32, "little"))
    fails(document, "bad-signature", "$.proof.proofValue")


DI_V2 = "https://w3id.org/security/data-integrity/v2"
VC_V2 = "https://www.w3.org/ns/credentials/v2"


@pytest.mark.parametrize("context", [DI_V2, [DI_V2], [VC_V2], [VC_V2, DI_V2]])
def test_an_accepted_context_is_signed_as_data_and_copied_into_the_proof(context: Any) -> None:
    document = signed({**RECEIPT, "@context": context})
    assert document["proof"]["@context"] == context  # the JCS suites' proof configuration
    assert check(document)[0].controller == "evidence-specialist"
    # The document's @context must start with the proof's (context-injection fix) ...
    fails({**document, "@context": [VC_V2, DI_V2][::-1] if context == [VC_V2, DI_V2]
           else "https://www.w3.org/ns/credentials/v2" if context != [VC_V2] else DI_V2},
          "context-mismatch", "$.proof.@context")
    # ... and what is not accepted is refused before any key is looked up.
    fails({**document, "@context": [*([context] if isinstance(context, str) else context),
                                     "https://example.org/terms/v1"]},
          "context-not-allowed")


@pytest.mark.parametrize(("context", "path"), [
    (["https://www.w3.org/ns/credentials/examples/v2"], "$.@context[0]"),
    ({"@vocab": "https://example.org/"}, "$.@context"),
    ([], "$.@context"),
    ([DI_V2, DI_V2], "$.@context[1]"),
])
def test_a_context_outside_the_accepted_values_is_refused(context: Any, path: str) -> None:
    fails({**signed(), "@context": context}, "context-not-allowed", path)
    with pytest.raises(ProofError) as info:
        signed({**RECEIPT, "@context": context})
    assert (info.value.code, info.value.json_path) == ("context-not-allowed", path)
    with pytest.raises(ProofError) as info:
        signed(VECTORS["w3c-rec-b3"]["unsecured_document"])  # examples/v2 is not accepted
    assert info.value.code == "context-not-allowed"


def test_the_proofs_context_is_what_is_hashed_when_the_document_extends_it() -> None:
    # JCS suites' verify, step 4: the document may append contexts after signing; the
    # proof's @context replaces the document's in what is hashed.
    document = signed({**RECEIPT, "@context": [DI_V2]})
    extended = {**document, "@context": [DI_V2, VC_V2]}
    assert check(extended)[0].controller == "evidence-specialist"


def test_a_context_added_after_signing_breaks_the_signature() -> None:
    fails({**signed(), "@context": [DI_V2]}, "bad-signature", "$.proof.proofValue")


def test_not_an_object() -> None:
    with pytest.raises(MalformedJSON) as info:
        check([signed()])
    assert info.value.code == "not-an-object"


def test_empty_trust_store_fails_closed() -> None:
    fails(signed(), "empty-trust-store", "$", keyring=KeyRing())


@pytest.mark.parametrize(
    "options",
    [{"purpose": ""}, {"max_proofs": 0}, {"max_proofs": True}, {"now": datetime(2026, 1, 5)}],
    ids=["empty-purpose", "zero-max-proofs", "bool-max-proofs", "naive-now"],
)
def test_verify_rejects_bad_arguments(options: dict[str, Any]) -> None:
    with pytest.raises(TypeError):
        check(signed(), **options)


def test_a_proof_value_too_long_for_any_signature_is_refused_before_decoding() -> None:
    # Base58 decoding is quadratic in the length: the bound must stop a long value first.
    error = fails(set_proof("proofValue", "z" + "2" * 10_000), "proof-malformed",
                  f"{P}.proofValue")
    assert error.message == ("proofValue is 10001 characters; a 64-byte signature needs at "
                             "most 89")


def test_a_proof_that_expires_the_instant_it_is_created_is_malformed() -> None:
    document = set_proof("expires", "2026-01-05T10:00:00Z")  # == created
    error = fails(document, "proof-malformed", f"{P}.expires")
    assert error.message.startswith("expires (2026-01-05T10:00:00Z) must be later than created")


def test_a_proof_in_a_mapping_that_is_not_a_dict_verifies() -> None:
    from types import MappingProxyType

    document = signed()
    (proof,) = check({**document, "proof": MappingProxyType(document["proof"])})
    assert proof.controller == "evidence-specialist"


def test_verify_takes_only_a_key_ring() -> None:
    with pytest.raises(InvalidArgument, match="keyring must be a KeyRing, got dict"):
        check(signed(), keyring={})
    with pytest.raises(InvalidArgument, match="keyring must be a KeyRing, got list"):
        check(signed(), keyring=[PROPOSER.public_key_multibase])


def test_one_proof_allowed_is_enough_for_one_proof() -> None:
    (proof,) = check(signed(), max_proofs=1)
    assert proof.controller == "evidence-specialist"
    fails(chain(), "too-many-proofs", "$.proof", max_proofs=1)


# ----------------------------------------------------------------- key attacks


def test_swapped_key_signature_by_a_named_as_b() -> None:
    options = {
        "type": PROOF_TYPE,
        "cryptosuite": CRYPTOSUITE,
        "created": "2026-01-05T10:00:00Z",
        "verificationMethod": APPROVER.verification_method,
        "proofPurpose": PURPOSE,
    }
    forged = {**RECEIPT, "proof": create_proof(RECEIPT, options, PROPOSER)}
    error = fails(forged, "bad-signature", "$.proof.proofValue")
    assert isinstance(error.__cause__, BadSignatureError)


def test_valid_did_key_signature_from_an_unenrolled_key_is_unknown() -> None:
    document = signed(key=STRANGER)
    verify_proof(document, document["proof"], STRANGER.public_key_bytes)  # the crypto is fine
    error = fails(document, "unknown-key", "$.proof.verificationMethod")
    assert "never fetched" in error.message


def test_verification_method_rewritten_to_an_enrolled_key_fails() -> None:
    document = signed(key=STRANGER)
    document["proof"]["verificationMethod"] = PROPOSER.verification_method
    fails(document, "bad-signature")


def test_key_purpose_must_be_allowed_by_the_ring() -> None:
    grant = signed(purpose="capabilityDelegation")  # the proposer key is assertionMethod only
    fails(grant, "purpose-not-allowed", "$.proof.proofPurpose", purpose="capabilityDelegation")
    by_approver = signed(key=APPROVER, purpose="capabilityDelegation")
    assert check(by_approver, purpose="capabilityDelegation")[0].controller == "case-owner"


def test_key_rotation() -> None:
    old, new = SigningKey.generate(), SigningKey.generate()
    switch = CREATED + timedelta(days=1)
    ring = (
        KeyRing()
        .enrol(
            old.public_key_multibase,
            controller="case-owner",
            roles={"approver"},
            not_before=CREATED - timedelta(days=90),
            not_after=switch,
        )
        .enrol(
            new.public_key_multibase, controller="case-owner", roles={"approver"}, not_before=switch
        )
    )
    later = switch + timedelta(days=30)
    # Signed while the old key was valid: still verifiable after rotation.
    before = signed(key=old, created=switch - timedelta(seconds=1))
    assert check(before, keyring=ring, now=later)[0].controller == "case-owner"
    # Signed with the old key after its window closed: refused.
    after = signed(key=old, created=switch)
    fails(after, "key-not-valid", "$.proof.created", keyring=ring, now=later)
    # The new key is not valid before its window opens.
    early = signed(key=new, created=switch - timedelta(seconds=1))
    fails(early, "key-not-valid", "$.proof.created", keyring=ring, now=later)
    assert check(signed(key=new, created=switch), keyring=ring, now=later)[0].created == switch


# ---------------------------------------------------------------------- times


def test_expiry() -> None:
    document = signed(expires=NOW)
    check(document, now=NOW - timedelta(microseconds=1))  # valid until the very instant
    fails(document, "proof-expired", "$.proof.expires", now=NOW)  # expired at it


def test_created_in_the_future_beyond_the_skew() -> None:
    check(signed(created=NOW + CLOCK_SKEW))
    fails(
        signed(created=NOW + CLOCK_SKEW + timedelta(seconds=1)),
        "proof-not-yet-valid",
        "$.proof.created",
    )


def test_fractional_seconds_round_trip() -> None:
    when = CREATED + timedelta(microseconds=120000)
    document = signed(created=when)
    assert document["proof"]["created"] == "2026-01-05T10:00:00.12Z"
    assert check(document)[0].created == when


# ------------------------------------------------------------- domain/challenge


def test_domain_and_challenge_binding() -> None:
    document = signed(domain="receiver.acme", challenge="nonce-1")
    check(document, expected_domain="receiver.acme", expected_challenge="nonce-1")
    fails(
        document,
        "domain-mismatch",
        "$.proof.domain",
        expected_domain="other.acme",
        expected_challenge="nonce-1",
    )
    fails(
        document,
        "challenge-mismatch",
        "$.proof.challenge",
        expected_domain="receiver.acme",
        expected_challenge="x",
    )
    fails(document, "domain-mismatch", "$.proof.domain", expected_challenge="nonce-1")
    fails(signed(), "domain-mismatch", "$.proof.domain", expected_domain="receiver.acme")
    fails(signed(), "challenge-mismatch", "$.proof.challenge", expected_challenge="nonce-1")


# --------------------------------------------------------------- sets and chains


def test_proof_chain_verifies_in_order() -> None:
    document = chain()
    assert [proof["id"] for proof in document["proof"]] == [
        "urn:proof:proposal",
        "urn:proof:approval",
        "urn:proof:execution",
    ]
    assert document["proof"][1]["previousProof"] == "urn:proof:proposal"
    assert document["proof"][2]["previousProof"] == ["urn:proof:approval"]
    results = check(document)
    assert [r.controller for r in results] == ["evidence-specialist", "case-owner", "payments"]
    assert [r.previous_proof for r in results] == [
        (),
        ("urn:proof:proposal",),
        ("urn:proof:approval",),
    ]


def test_chained_proof_covers_the_previous_proof_value() -> None:
    document = chain()
    # Replace the proposal with another valid proposer signature (different created).
    other = signed(proof_id="urn:proof:proposal", created=CREATED + timedelta(seconds=1))
    document["proof"][0] = other["proof"]
    error = fails(document, "bad-signature", "$.proof[1].proofValue")
    assert "case-owner" not in error.message  # messages name keys, not registry identities


def test_chain_with_several_previous_proofs() -> None:
    document = signed(proof_id="urn:p:a")
    document = signed(document, APPROVER, proof_id="urn:p:b")
    document = signed(document, EXECUTOR, proof_id="urn:p:c", previous_proof=["urn:p:b", "urn:p:a"])
    results = check(document)
    assert results[2].previous_proof == ("urn:p:b", "urn:p:a")


def test_proof_set_without_chain() -> None:
    document = signed(proof_id="urn:p:a")
    document = signed(document, APPROVER)
    assert [r.proof_id for r in check(document)] == ["urn:p:a", None]
    # A co-signature can be stripped without breaking crypto: policy must require it.
    document["proof"] = document["proof"][:1]
    assert len(check(document)) == 1


def test_stripping_a_referenced_proof_breaks_the_chain() -> None:
    document = chain()
    del document["proof"][0]
    fails(document, "proof-chain-broken", "$.proof[0].previousProof")


def test_reordered_chain_is_broken() -> None:
    document = chain()
    document["proof"] = [document["proof"][1], document["proof"][0], document["proof"][2]]
    error = fails(document, "proof-chain-broken", "$.proof[0].previousProof")
    assert "a later proof" in error.message


def test_dangling_previous_proof() -> None:
    document = chain()
    document["proof"][1]["previousProof"] = "urn:proof:nowhere"
    error = fails(document, "proof-chain-broken", "$.proof[1].previousProof")
    assert "names no proof" in error.message


def test_cyclic_and_self_referencing_chains() -> None:
    document = chain()
    document["proof"][0]["previousProof"] = "urn:proof:approval"
    fails(document, "proof-chain-broken", "$.proof[0].previousProof")
    document = chain()
    document["proof"][1]["previousProof"] = "urn:proof:approval"
    error = fails(document, "proof-chain-broken", "$.proof[1].previousProof")
    assert "itself" in error.message


def test_duplicated_proofs() -> None:
    document = signed(proof_id="urn:p:a")
    twice = {**document, "proof": [document["proof"], copy.deepcopy(document["proof"])]}
    fails(twice, "proof-duplicated", "$.proof[1].id")
    no_id = signed()
    same_value = {**no_id, "proof": [no_id["proof"], {**no_id["proof"], "id": "urn:p:b"}]}
    fails(same_value, "proof-duplicated", "$.proof[1].proofValue")


def test_too_many_proofs() -> None:
    document = chain()
    fails(document, "too-many-proofs", "$.proof", max_proofs=2)
    assert len(check(document, max_proofs=3)) == 3


def test_sign_refuses_bad_chains_and_ids() -> None:
    document = signed(proof_id="urn:p:a")
    with pytest.raises(ProofError) as info:
        signed(document, APPROVER, previous_proof="urn:p:missing")
    assert info.value.code == "proof-chain-broken"
    with pytest.raises(ProofError) as info:
        signed(document, APPROVER, proof_id="urn:p:a")
    assert info.value.code == "proof-duplicated"
    with pytest.raises(ProofError) as info:
        signed(expires=CREATED)
    assert (info.value.code, info.value.json_path) == ("proof-malformed", "$.proof.expires")
    with pytest.raises(ProofError) as info:
        signed({**RECEIPT, "proof": "not a proof"})
    assert info.value.code == "proof-malformed"


@pytest.mark.parametrize(
    "options",
    [
        {"created": datetime(2026, 1, 5)},
        {"proof_id": ""},
        {"previous_proof": []},
        {"previous_proof": ["a", "a"]},
        {"purpose": ""},
        {"key": "not a key"},
    ],
    ids=[
        "naive-created",
        "empty-id",
        "empty-previous",
        "repeated-previous",
        "empty-purpose",
        "not-a-key",
    ],
)
def test_sign_rejects_bad_arguments(options: dict[str, Any]) -> None:
    with pytest.raises(TypeError):
        signed(**options)


def test_sign_rejects_non_json_values() -> None:
    with pytest.raises(MalformedJSON):
        signed({**RECEIPT, "amount": 2**60})


# ---------------------------------------------------------------- properties

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)
documents = st.dictionaries(
    st.text(max_size=8).filter(lambda k: k not in {"proof", "@context"}),
    json_values,
    min_size=1,
    max_size=6,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths(item, (*prefix, index))
    return found


def changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if value is None:
        return 0
    if isinstance(value, int):
        return value - 1 if value > 0 else value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, list):
        return [*value, None]
    key = "added"
    while key in value:
        key += "+"
    return {**value, key: 1}


def reordered(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: reordered(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reordered(item) for item in value]
    return value


@given(documents, st.data())
def test_any_single_change_to_a_signed_document_fails(
    document: dict[str, Any], data: st.DataObject
) -> None:
    secured = signed(document, proof_id="urn:p:1")
    path = data.draw(st.sampled_from(paths(secured)), label="path")
    operation = data.draw(st.sampled_from(["change", "delete"]), label="operation")
    tampered = copy.deepcopy(secured)
    *parents, last = path
    target = tampered
    for part in parents:
        target = target[part]
    if operation == "delete" and isinstance(target, dict):
        del target[last]
    else:
        target[last] = changed(target[last])
    with pytest.raises(ProofError):
        check(tampered)


@given(documents, st.integers(min_value=0, max_value=4), st.booleans())
def test_reordering_and_reindenting_keeps_the_signature(
    document: dict[str, Any], indent: int, ascii_only: bool
) -> None:
    secured = signed(document)
    text = json.dumps(reordered(secured), indent=indent, ensure_ascii=ascii_only)
    assert check(loads(text.encode()))[0].controller == "evidence-specialist"


@given(documents, st.data())
def test_flipping_any_byte_of_the_canonical_form_fails_or_is_equivalent(
    document: dict[str, Any], data: st.DataObject
) -> None:
    secured = signed(document)
    original = canonical_bytes(secured)
    index = data.draw(st.integers(min_value=0, max_value=len(original) - 1), label="index")
    byte = data.draw(st.integers(min_value=0, max_value=255).filter(lambda b: b != original[index]))
    flipped = original[:index] + bytes([byte]) + original[index + 1 :]
    try:
        parsed = loads(flipped)
    except MalformedJSON:
        return
    if isinstance(parsed, dict) and canonical_bytes(parsed) == original:
        check(parsed)  # a different spelling of the same document
    else:
        with pytest.raises(HandoffsError):
            check(parsed)


@given(documents)
def test_sign_verify_round_trip(document: dict[str, Any]) -> None:
    (result,) = check(signed(document))
    assert result.verification_method == PROPOSER.verification_method
