"""The cryptosuite registry, both W3C suites' published vectors, and Signers.

``tests/vectors/ecdsa-jcs-2019.json`` holds the W3C ``ecdsa-jcs-2019`` P-256 vectors
verbatim (w3c/vc-di-ecdsa, see its ``source`` member and ``tests/vectors/README.md``);
``tests/vectors/eddsa-jcs-2022.json`` the EdDSA ones.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from handoffs._errors import KeyRingError, ProofError
from handoffs.contracts import Authority, EvidenceRef, Governance, Receipt
from handoffs.contracts._signing import issue_grant, sign_receipt
from handoffs.examples import payment
from handoffs.integrity import KeyRing, SigningKey, sign, verify
from handoffs.integrity._signer import CallableSigner, P256SigningKey, Signer
from handoffs.integrity._suites import (
    ECDSA_JCS_2019,
    EDDSA_JCS_2022,
    Cryptosuite,
    cryptosuite,
    decode_multikey,
    registered_cryptosuites,
)
from handoffs.integrity._w3c import create_proof, verify_proof
from handoffs.receivers import (
    Gate,
    InMemoryEvidenceResolver,
    InMemoryPolicyService,
    ResolvedEvidence,
    Verdict,
)
from handoffs.receivers._gate import Ruling

VECTORS = Path(__file__).parents[1] / "vectors"
ECDSA = json.loads((VECTORS / "ecdsa-jcs-2019.json").read_text())
RAW = ECDSA["raw_files"]
EDDSA = json.loads((VECTORS / "eddsa-jcs-2022.json").read_text())
T0 = datetime(2026, 6, 1, 12, tzinfo=UTC)


def _text(name: str) -> str:
    return str(RAW[name]).strip()


# --------------------------------------------------------------------- the registry


def test_the_registry_holds_both_suites_each_a_cryptosuite() -> None:
    assert registered_cryptosuites() == ("eddsa-jcs-2022", "ecdsa-jcs-2019")
    for name in registered_cryptosuites():
        suite = cryptosuite(name)
        assert isinstance(suite, Cryptosuite)
        assert suite.name == name
    assert cryptosuite("ecdsa-jcs-2019") is ECDSA_JCS_2019


@pytest.mark.parametrize("name", ["ecdsa-rdfc-2019", "EdDSA", "", None, 1])
def test_an_unregistered_suite_is_refused(name: object) -> None:
    with pytest.raises(ProofError) as info:
        cryptosuite(name)
    assert info.value.code == "wrong-cryptosuite"


# ------------------------------------------------------------- W3C ecdsa-jcs-2019


def _ecdsa_document() -> tuple[dict[str, Any], dict[str, Any]]:
    unsigned = json.loads(RAW["unsigned.json"])
    options = json.loads(RAW["proofConfigJCSECDSAP256.json"])
    return unsigned, options


def test_ecdsa_vector_intermediates_are_byte_exact() -> None:
    unsigned, options = _ecdsa_document()
    suite = ECDSA_JCS_2019
    assert suite.canonicalise(unsigned).decode() == _text("canonDocJCSECDSAP256.txt")
    assert suite.canonicalise(options).decode() == _text("proofCanonJCSECDSAP256.txt")
    doc_hash = suite.hash(suite.canonicalise(unsigned))
    proof_hash = suite.hash(suite.canonicalise(options))
    assert doc_hash.hex() == _text("docHashJCSECDSAP256.txt")
    assert proof_hash.hex() == _text("proofHashJCSECDSAP256.txt")
    assert (proof_hash + doc_hash).hex() == _text("combinedHashJCSECDSAP256.txt")


def test_ecdsa_vector_is_reproduced_and_verifies() -> None:
    unsigned, options = _ecdsa_document()
    pair = json.loads(RAW["p256KeyPair.json"])
    key = P256SigningKey.from_multibase(pair["secretKeyMultibase"])
    assert key.public_key_multibase == pair["publicKeyMultibase"]
    proof = create_proof(unsigned, options, key)
    # RFC 6979 deterministic ECDSA reproduces the published signature byte for byte.
    assert proof["proofValue"] == _text("sigBTC58JCSECDSAP256.txt")
    signed = json.loads(RAW["signedJCSECDSAP256.json"])
    assert {**unsigned, "proof": proof} == signed
    suite, raw = decode_multikey(pair["publicKeyMultibase"])
    assert suite is ECDSA_JCS_2019
    verify_proof(signed, signed["proof"], raw)
    tampered = copy.deepcopy(signed)
    tampered["name"] = "Alumni Credential!"
    with pytest.raises(ProofError) as info:
        verify_proof(tampered, tampered["proof"], raw)
    assert info.value.code == "bad-signature"


def test_eddsa_vectors_still_verify_through_the_registry() -> None:
    for vector in EDDSA["vectors"]:
        secured = vector["secured_document"]
        method = secured["proof"]["verificationMethod"].split("#", 1)[1]
        suite, raw = decode_multikey(method)
        assert suite is EDDSA_JCS_2022
        verify_proof(secured, secured["proof"], raw)


# ---------------------------------------------------------- keys pick the suite


def _ring(*keys: Signer, public: dict[str, str] | None = None) -> KeyRing:
    ring = KeyRing()
    for key in keys:
        multibase = (public or {}).get(key.verification_method) or key.public_key_multibase
        ring = ring.enrol(multibase, controller="agent", not_before=T0 - timedelta(days=1),
                          purposes=["assertionMethod"])
    return ring


def test_a_p256_key_in_the_ring_verifies_its_proofs() -> None:
    key = P256SigningKey.generate()
    secured = sign({"type": "Note", "text": "x"}, key, created=T0)
    assert secured["proof"]["cryptosuite"] == "ecdsa-jcs-2019"
    (verified,) = verify(secured, _ring(key), purpose="assertionMethod", now=T0)
    assert verified.key_entry.suite is ECDSA_JCS_2019


def test_a_proof_may_not_name_another_suite_than_its_key_s() -> None:
    key = P256SigningKey.generate()
    secured = sign({"type": "Note"}, key, created=T0)
    secured["proof"]["cryptosuite"] = "eddsa-jcs-2022"  # the message tries to choose
    with pytest.raises(ProofError) as info:
        verify(secured, _ring(key), purpose="assertionMethod", now=T0)
    assert (info.value.code, info.value.json_path) == ("wrong-cryptosuite",
                                                       "$.proof.cryptosuite")


def test_a_p256_point_off_the_curve_is_refused_at_enrolment() -> None:
    key = P256SigningKey.generate()
    suite, raw = decode_multikey(key.public_key_multibase)
    with pytest.raises(KeyRingError) as info:
        suite.check_public_key(raw[:1] + b"\xff" * 32, json_path="$")  # x >= p
    assert info.value.code == "not-on-curve"


# ------------------------------------------------------------- KMS-style signers


class FakeKms:
    """**A test double** standing in for a remote KMS/HSM: it holds private keys by id
    and signs bytes on request, as ``kms.sign(KeyId, Message)`` would over the network.
    Nothing else of a KMS (IAM, audit, rotation) is modelled. P-256 signatures come
    back DER-encoded, as cloud KMS APIs return them.
    """

    def __init__(self) -> None:
        self.ed25519 = SigningKey.generate()
        self.p256 = ec.generate_private_key(ec.SECP256R1())
        self.calls: list[str] = []

    def signer(self, key_id: str) -> Callable[[bytes], bytes]:
        def sign_remotely(message: bytes) -> bytes:
            self.calls.append(key_id)
            if key_id == "ed25519":
                return self.ed25519.sign(message)
            return self.p256.sign(message, ec.ECDSA(hashes.SHA256()))
        return sign_remotely

    def public_key_multibase(self, key_id: str) -> str:
        if key_id == "ed25519":
            return self.ed25519.public_key_multibase
        return P256SigningKey(self.p256).public_key_multibase


def test_receipts_signed_through_a_kms_signer_are_admitted_by_the_gate() -> None:
    kms = FakeKms()
    sender = CallableSigner(public_key_multibase=kms.public_key_multibase("ed25519"),
                            sign_bytes=kms.signer("ed25519"))
    service = CallableSigner(public_key_multibase=kms.public_key_multibase("p256"),
                             sign_bytes=kms.signer("p256"), der=True)
    assert (sender.cryptosuite, service.cryptosuite) == ("eddsa-jcs-2022", "ecdsa-jcs-2019")
    since = T0 - timedelta(days=30)
    ring = (KeyRing()
            .enrol(service.public_key_multibase, controller="policy-service",
                   roles=["policy-service"], not_before=since,
                   purposes=["capabilityDelegation"])
            .enrol(sender.public_key_multibase, controller="evidence-specialist",
                   not_before=since))
    case = next(iter(payment.synthetic_cases(1)))
    governance = Governance(
        case_id=case.case_id, sender="evidence-specialist", receiver="case-owner",
        authority=Authority.ADVISE, policy_version="PAY-7.4",
        valid_until=T0 + timedelta(hours=1),
        evidence_refs=tuple(EvidenceRef(uri) for uri in case.evidence_refs))
    unsigned = Receipt.build(payment.PAYMENT_RELEASE,
                             payment.decision_contract_encoder().encode(case), governance)
    grant = issue_grant(service, issuer="policy-service", subject="evidence-specialist",
                        audience="case-owner", contract=payment.PAYMENT_RELEASE,
                        case_id=case.case_id, policy_version="PAY-7.4",
                        authority=[Authority.ADVISE], valid_until=T0 + timedelta(hours=2),
                        created=T0)
    receipt = sign_receipt(unsigned, sender, grant=grant, created=T0)
    assert kms.calls == ["p256", "ed25519"]  # both proofs were made remotely
    doc = receipt.to_json()
    assert doc["grant"]["proof"]["cryptosuite"] == "ecdsa-jcs-2019"
    def gate() -> Gate:
        return Gate(
            identity="case-owner", trust=ring, registry=payment.PAYMENT_RELEASE,
            roles={"case-owner"}, policy_service=InMemoryPolicyService({"PAY-7.4": True}),
            evidence=InMemoryEvidenceResolver({uri: ResolvedEvidence(
                content=b"record", observed_at=T0 - timedelta(hours=1))
                for uri in case.evidence_refs}),
            clock=lambda: T0 + timedelta(minutes=1))

    decision = gate().decide(doc, rule=_accept, receiver="test")
    assert decision.verdict is Verdict.ACCEPT, decision.reasons
    assert decision.sender == "evidence-specialist"
    # Bytes changed after the KMS signed them are refused: in the grant (which the
    # sender's proof covers too, checked first), and in the grant re-signed by the
    # sender over the change (the P-256 grant proof then fails).
    doc["grant"]["roles"] = ["proposer"]
    refused = gate().decide(doc, rule=_accept, receiver="test")
    assert [r.code for r in refused.reasons] == ["bad-signature"]
    resigned = sign({k: v for k, v in doc.items() if k != "proof"}, sender, created=T0)
    refused = gate().decide(resigned, rule=_accept, receiver="test")
    assert [(r.code, r.json_path) for r in refused.reasons] == [
        ("grant-invalid", "$.grant.proof.proofValue")]


def _accept(admitted: Any) -> Ruling:
    return Ruling(action=str(admitted.document["proposed_action"]))


@pytest.mark.parametrize(("returned", "der"), [("text", False), (b"\x00" * 63, False),
                                               (b"\x30\x01", True)])
def test_a_signer_that_returns_no_signature_is_a_typed_error(returned: Any, der: bool) -> None:
    kms = FakeKms()
    key_id = "p256" if der else "ed25519"
    signer = CallableSigner(public_key_multibase=kms.public_key_multibase(key_id),
                            sign_bytes=lambda _: returned, der=der)
    with pytest.raises(KeyRingError) as info:
        sign({"type": "Note"}, signer, created=T0)
    assert info.value.code == "bad-signer"


def test_a_signer_of_one_suite_cannot_sign_a_proof_of_another() -> None:
    unsigned, options = _ecdsa_document()
    with pytest.raises(ProofError) as info:
        create_proof(unsigned, {**options, "cryptosuite": "eddsa-jcs-2022"},
                     P256SigningKey.generate())
    assert info.value.code == "wrong-cryptosuite"
    with pytest.raises(ProofError) as info:
        create_proof(unsigned, options, SigningKey.generate())
    assert info.value.code == "wrong-cryptosuite"


class _FailingSigner:
    """A user's own :class:`Signer` whose signing call fails (a KMS outage, say)."""

    cryptosuite = "eddsa-jcs-2022"
    verification_method = "did:example:kms#key-1"

    def sign(self, data: bytes) -> bytes:
        raise ConnectionError("the KMS did not answer")


def test_a_signer_that_raises_is_a_typed_bad_signer() -> None:
    kms = FakeKms()

    def outage(_: bytes) -> bytes:
        raise TimeoutError("kms timed out")

    remote = CallableSigner(public_key_multibase=kms.public_key_multibase("ed25519"),
                            sign_bytes=outage)
    for signer in (remote, _FailingSigner()):
        with pytest.raises(KeyRingError) as info:
            sign({"type": "Note"}, signer, created=T0)
        assert info.value.code == "bad-signer"
        assert isinstance(info.value.__cause__, TimeoutError | ConnectionError)
