"""Trusted keys from where agents publish them: a pinned JWK Set (RFC 7517) or a pinned
A2A agent card, loaded into a key ring explicitly (nothing is fetched)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from handoffs.contracts import Authority, EvidenceRef, Governance, Receipt
from handoffs.contracts._signing import issue_grant, sign_receipt
from handoffs.examples import payment
from handoffs.integrity import (
    KeyRing,
    KeyRingError,
    P256SigningKey,
    SigningKey,
)
from handoffs.integrity._suites import ECDSA_JCS_2019
from handoffs.receivers import (
    Gate,
    InMemoryEvidenceResolver,
    InMemoryPolicyService,
    ResolvedEvidence,
    Verdict,
)
from handoffs.receivers._gate import Ruling

SINCE = datetime(2026, 1, 1, tzinfo=UTC)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def okp(key: SigningKey, kid: str, **extra: Any) -> dict[str, Any]:
    return {"kty": "OKP", "crv": "Ed25519", "x": b64url(key.public_key_bytes),
            "kid": kid, "use": "sig", "alg": "EdDSA", **extra}


def ec_jwk(kid: str, key: ec.EllipticCurvePrivateKey | None = None,
           curve: ec.EllipticCurve | None = None, name: str = "P-256") -> dict[str, Any]:
    private = key if key is not None else ec.generate_private_key(curve or ec.SECP256R1())
    numbers = private.public_key().public_numbers()
    size = (private.curve.key_size + 7) // 8
    return {"kty": "EC", "crv": name, "kid": kid, "x": b64url(numbers.x.to_bytes(size, "big")),
            "y": b64url(numbers.y.to_bytes(size, "big"))}


def p256(kid: str, key: P256SigningKey | None = None) -> dict[str, Any]:
    return ec_jwk(kid, None if key is None else key.private_key)


KEY, OTHER = SigningKey.generate(), SigningKey.generate()


def direct(*keys: SigningKey) -> KeyRing:
    ring = KeyRing()
    for key in keys:
        ring = ring.enrol(key.public_key_multibase, controller="route-planner",
                          not_before=SINCE, roles=["proposer"])
    return ring


@pytest.mark.parametrize("form", ["dict", "text", "bytes", "path"])
def test_a_pinned_jwks_gives_the_ring_enrolment_gives(form: str, tmp_path: Path) -> None:
    jwks = {"keys": [okp(KEY, "k1"), okp(OTHER, "k2")]}
    source: Any = {"dict": jwks, "text": json.dumps(jwks), "bytes": json.dumps(jwks).encode(),
                   "path": tmp_path / "jwks.json"}[form]
    if form == "path":
        source.write_text(json.dumps(jwks))
    ring = KeyRing.from_jwks(source, controller="route-planner", not_before=SINCE,
                              roles=["proposer"])
    assert ring == direct(KEY, OTHER)


def test_kids_pin_part_of_a_mixed_set() -> None:
    jwks = {"keys": [ec_jwk("ec-384", curve=ec.SECP384R1(), name="P-384"), okp(KEY, "k1")]}
    ring = KeyRing.from_jwks(jwks, controller="route-planner", not_before=SINCE,
                              roles=["proposer"], kids=["k1"])
    assert ring == direct(KEY)
    with pytest.raises(KeyRingError, match="expected OKP/Ed25519 or EC/P-256") as caught:
        KeyRing.from_jwks(jwks, controller="route-planner", not_before=SINCE)
    assert (caught.value.code, caught.value.json_path) == ("unsupported-key-type",
                                                           "$.keys[0].crv")


def test_a_p256_key_is_enrolled_as_an_ecdsa_jcs_2019_key() -> None:
    key = P256SigningKey.generate()
    jwks = {"keys": [okp(KEY, "k1"), {**p256("ec-1", key), "alg": "ES256", "use": "sig"}]}
    ring = KeyRing.from_jwks(jwks, controller="route-planner", not_before=SINCE,
                              roles=["proposer"])
    assert ring == direct(KEY).enrol(key.public_key_multibase, controller="route-planner",
                                     not_before=SINCE, roles=["proposer"])
    assert ring.lookup(key.verification_method).suite is ECDSA_JCS_2019


T0 = datetime(2026, 6, 1, 12, tzinfo=UTC)


def test_a_grant_signed_by_a_pinned_p256_key_is_admitted_by_the_gate() -> None:
    """The policy service publishes a P-256 key in its JWK Set, the sender an Ed25519
    key in its own; the receiver pins both, and the gate admits a receipt whose grant
    the P-256 key signed (``ecdsa-jcs-2019``), and refuses it once the grant changes."""
    service, sender = P256SigningKey.generate(), SigningKey.generate()
    ring = KeyRing.from_jwks({"keys": [p256("svc-1", service)]}, controller="policy-service",
                              roles=["policy-service"], purposes=["capabilityDelegation"],
                              not_before=SINCE)
    ring = KeyRing.from_jwks({"keys": [okp(sender, "ev-1")]},
                              controller="evidence-specialist", not_before=SINCE, ring=ring)
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
    doc = sign_receipt(unsigned, sender, grant=grant, created=T0).to_json()
    assert doc["grant"]["proof"]["cryptosuite"] == "ecdsa-jcs-2019"

    def decide(document: dict[str, Any]) -> Any:
        gate = Gate(
            identity="case-owner", trust=ring, registry=payment.PAYMENT_RELEASE,
            roles={"case-owner"}, policy_service=InMemoryPolicyService({"PAY-7.4": True}),
            evidence=InMemoryEvidenceResolver({uri: ResolvedEvidence(
                content=b"record", observed_at=T0 - timedelta(hours=1))
                for uri in case.evidence_refs}),
            clock=lambda: T0 + timedelta(minutes=1))
        return gate.decide(document, rule=lambda admitted: Ruling(
            action=str(admitted.document["proposed_action"])), receiver="test")

    decision = decide(doc)
    assert decision.verdict is Verdict.ACCEPT, decision.reasons
    assert decision.sender == "evidence-specialist"
    doc["grant"]["roles"] = ["proposer"]
    assert [r.code for r in decide(doc).reasons] == ["bad-signature"]


def _off_curve() -> dict[str, Any]:
    jwk = p256("ec-1")
    jwk["y"] = b64url((int.from_bytes(base64.urlsafe_b64decode(jwk["y"] + "=="), "big") ^ 1)
                      .to_bytes(32, "big"))
    return jwk


@pytest.mark.parametrize(("jwks", "code", "path"), [
    ([], "bad-jwks", "$"),
    ({"keys": {}}, "bad-jwks", "$.keys"),
    ({"keys": []}, "no-keys", "$"),
    ({"keys": ["k"]}, "bad-jwk", "$.keys[0]"),
    ({"keys": [{"crv": "Ed25519", "x": "AA"}]}, "bad-jwk", "$.keys[0].kty"),
    ({"keys": [{"kty": "OKP", "crv": "Ed25519"}]}, "bad-jwk", "$.keys[0].x"),
    ({"keys": [okp(KEY, "k1", x="AAAA")]}, "bad-jwk", "$.keys[0].x"),
    ({"keys": [okp(KEY, "k1", x=b64url(KEY.public_key_bytes) + "=")]}, "bad-jwk",
     "$.keys[0].x"),
    ({"keys": [okp(KEY, "k1", d="secret")]}, "private-key-in-jwks", "$.keys[0].d"),
    ({"keys": [okp(KEY, "k1", use="enc")]}, "not-a-signing-key", "$.keys[0].use"),
    ({"keys": [okp(KEY, "k1", key_ops=["sign"])]}, "not-a-signing-key",
     "$.keys[0].key_ops"),
    ({"keys": [okp(KEY, "k1", alg="ES256")]}, "bad-jwk", "$.keys[0].alg"),
    ({"keys": [{"kty": "RSA", "n": "AQAB", "e": "AQAB"}]}, "unsupported-key-type",
     "$.keys[0].kty"),
    ({"keys": [{"kty": "OKP", "crv": "X25519", "x": "AA"}]}, "unsupported-key-type",
     "$.keys[0].crv"),
    ({"keys": [_off_curve()]}, "not-on-curve", "$.keys[0]"),
    ({"keys": [{**p256("ec-1"), "alg": "ES384"}]}, "bad-jwk", "$.keys[0].alg"),
    ({"keys": [{**p256("ec-1"), "y": "AAAA"}]}, "bad-jwk", "$.keys[0].y"),
    ({"keys": [{"kty": "EC", "crv": "P-256", "x": b64url(bytes(32))}]}, "bad-jwk",
     "$.keys[0].y"),
    ({"keys": [okp(KEY, "k1"), ec_jwk("ec-384", curve=ec.SECP384R1(), name="P-384")]},
     "unsupported-key-type", "$.keys[1].crv"),
    ({"keys": [ec_jwk("k256", curve=ec.SECP256K1(), name="secp256k1")]},
     "unsupported-key-type", "$.keys[0].crv"),
    ({"keys": [ec_jwk("k256", curve=ec.SECP256K1())]}, "not-on-curve", "$.keys[0]"),
    ({"keys": [okp(KEY, "k1"), okp(KEY, "k1-again")]}, "duplicate-key", "$.keys[1]"),
    ({"keys": [okp(KEY, "k1", x=b64url(bytes(32)))]}, "weak-key", "$.keys[0]"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_a_bad_document_is_a_typed_error_at_its_path(jwks: Any, code: str, path: str) -> None:
    with pytest.raises(KeyRingError) as caught:
        KeyRing.from_jwks(jwks, controller="route-planner", not_before=SINCE)
    assert (caught.value.code, caught.value.json_path) == (code, path)


def test_unknown_kids_and_unreadable_files_are_typed(tmp_path: Path) -> None:
    with pytest.raises(KeyRingError, match="no key with kid 'k9'"):
        KeyRing.from_jwks({"keys": [okp(KEY, "k1")]}, controller="c", not_before=SINCE,
                           kids=["k9"])
    with pytest.raises(KeyRingError) as caught:
        KeyRing.from_jwks(tmp_path / "absent.json", controller="c", not_before=SINCE)
    assert caught.value.code == "bad-jwks"
    with pytest.raises(KeyRingError) as caught:
        KeyRing.from_jwks(b'{"keys": [', controller="c", not_before=SINCE)
    assert caught.value.code == "bad-jwks"


# ------------------------------------------------------------ A2A agent cards

a2a = pytest.importorskip("a2a")


def _card() -> Any:
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface

    return AgentCard(name="route-planner", description="Plans routes.", version="1.0.0",
                     supported_interfaces=[AgentInterface(
                         protocol_binding="JSONRPC", url="http://127.0.0.1:1/",
                         protocol_version="1.0")],
                     capabilities=AgentCapabilities(), default_input_modes=["text/plain"],
                     default_output_modes=["text/plain"])


def signed_card_object(key: SigningKey | P256SigningKey, kid: str, *more: tuple[Any, str]
                       ) -> Any:
    """An AgentCard signed with the a2a-sdk's own card signer (one signature per key)."""
    from a2a.utils.signing import create_agent_card_signer

    card = _card()
    for signer_key, signer_kid in ((key, kid), *more):
        private = load_pem_private_key(signer_key.to_pem(), password=None)
        alg = "ES256" if isinstance(signer_key, P256SigningKey) else "EdDSA"
        card = create_agent_card_signer(private, {
            "kid": signer_kid, "alg": alg, "jku": "https://planner.example/jwks.json",
            "typ": "JOSE"})(card)
    return card


def signed_card(key: SigningKey | P256SigningKey, kid: str, *more: tuple[Any, str]
                ) -> dict[str, Any]:
    """The signed card as the agent serves it (JSON)."""
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(signed_card_object(key, kid, *more))


def refusal(card: Any, **pin: Any) -> tuple[str, str]:
    with pytest.raises(KeyRingError) as caught:
        KeyRing.from_agent_card(card, not_before=SINCE, **pin)
    return caught.value.code, caught.value.json_path


def test_a_card_verified_against_the_pinned_jwks_enrols_the_keys_that_signed_it() -> None:
    card = signed_card(KEY, "k1")
    jwks = {"keys": [okp(OTHER, "k2"), okp(KEY, "k1")]}
    ring = KeyRing.from_agent_card(card, jwks=jwks, not_before=SINCE, roles=["proposer"])
    assert ring == direct(KEY)  # controller: the verified card's name; only its key
    one = KeyRing.from_agent_card(card, key=okp(KEY, "k1"), not_before=SINCE,
                                  roles=["proposer"])
    assert one == ring


def test_a2a_sdks_agent_card_object_is_accepted_and_both_suites_verify() -> None:
    ec_key = P256SigningKey.generate()
    card = signed_card_object(KEY, "k1", (ec_key, "ec-1"))
    jwks = {"keys": [okp(KEY, "k1"), p256("ec-1", ec_key)]}
    ring = KeyRing.from_agent_card(card, jwks=jwks, not_before=SINCE,
                                   controller="planner-7")
    assert ring.lookup(KEY.verification_method).controller == "planner-7"
    assert ring.lookup(ec_key.verification_method).suite is ECDSA_JCS_2019


def test_the_sdks_verifier_agrees_with_the_pinned_keys() -> None:
    from a2a.types import AgentCard
    from a2a.utils.signing import create_signature_verifier
    from google.protobuf.json_format import ParseDict
    from jwt import PyJWK

    card = signed_card(KEY, "k1")
    jwks = {"keys": [okp(KEY, "k1")]}
    KeyRing.from_agent_card(card, jwks=jwks, not_before=SINCE)
    pinned = {jwk["kid"]: PyJWK(jwk) for jwk in jwks["keys"]}
    verify = create_signature_verifier(lambda kid, _jku: pinned[kid], ["EdDSA"])
    verify(ParseDict(card, AgentCard()))  # raises unless a signature verifies


def test_a_card_changed_after_signing_or_with_junk_signatures_enrols_nothing() -> None:
    card = signed_card(KEY, "k1")
    jwks = {"keys": [okp(KEY, "k1")]}
    renamed = {**card, "name": "evil-agent"}
    assert refusal(renamed, jwks=jwks) == ("bad-card-signature", "$.signatures[0].signature")
    junk = {**card, "signatures": [{**card["signatures"][0], "signature": b64url(b"x" * 64)}]}
    assert refusal(junk, jwks=jwks) == ("bad-card-signature", "$.signatures[0].signature")
    # Signed by another key than the pinned one of that kid.
    assert refusal(card, jwks={"keys": [okp(OTHER, "k1")]}) == (
        "bad-card-signature", "$.signatures[0].signature")
    # Every signature must verify, not just one.
    two = signed_card(KEY, "k1", (OTHER, "k2"))
    assert refusal(two, jwks=jwks) == ("unknown-kid", "$.signatures[1].protected.kid")


def test_a_key_on_the_cards_own_word_is_never_enrolled() -> None:
    for member, value in (("jwk", okp(KEY, "k1")), ("x5u", "https://x.example/c.pem"),
                          ("x5c", ["MII..."])):
        header = b64url(json.dumps({"alg": "EdDSA", "kid": "k1", member: value}).encode())
        card = {"name": "route-planner",
                "signatures": [{"protected": header, "signature": b64url(b"x" * 64)}]}
        assert refusal(card, jwks={"keys": [okp(KEY, "k1")]}) == (
            "embedded-key", f"$.signatures[0].protected.{member}")


def test_nothing_pinned_unknown_kids_and_foreign_algorithms_are_refused() -> None:
    card = signed_card(KEY, "k1")
    assert refusal(card) == ("no-pinned-key", "$")
    assert refusal(card, jwks={"keys": [okp(OTHER, "k2")]}) == (
        "unknown-kid", "$.signatures[0].protected.kid")
    assert refusal(card, key=okp(KEY, "k9")) == ("unknown-kid",
                                                 "$.signatures[0].protected.kid")
    for alg in ("HS256", "none", "ES256"):
        header = b64url(json.dumps({"alg": alg, "kid": "k1"}).encode())
        forged = {**card, "signatures": [{"protected": header, "signature": ""}]}
        assert refusal(forged, jwks={"keys": [okp(KEY, "k1")]}) == (
            "wrong-algorithm", "$.signatures[0].protected.alg")


def test_bad_cards_are_typed_at_their_path() -> None:
    jwks = {"keys": [okp(KEY, "k1")]}
    no_kid = b64url(json.dumps({"alg": "EdDSA"}).encode())
    for bad, path in [({"name": "n"}, "$.signatures"),
                      ({"name": "n", "signatures": [{"protected": "%%", "signature": ""}]},
                       "$.signatures[0].protected"),
                      ({"name": "n", "signatures": [{"protected": b64url(b"[]"),
                                                     "signature": ""}]},
                       "$.signatures[0].protected"),
                      ({"name": "n", "signatures": [{"protected": no_kid, "signature": ""}]},
                       "$.signatures[0].protected"),
                      ({"name": "n", "signatures": ["x"]}, "$.signatures[0]")]:
        assert refusal(bad, jwks=jwks) == ("bad-agent-card", path)


def test_a_pinned_p256_key_of_an_unsupported_curve_is_typed() -> None:
    card = signed_card(KEY, "k1")
    bad = ec_jwk("k1", curve=ec.SECP384R1(), name="P-384")
    assert refusal(card, jwks={"keys": [bad]}) == ("unsupported-key-type", "$.keys[0].crv")
