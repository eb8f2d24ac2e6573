"""libsodium (PyNaCl, what the gate verifies with) against OpenSSL (``cryptography``).

The two Ed25519 verifiers are run on the same inputs: the W3C ``eddsa-jcs-2022``
vectors, a weak-key and weak-signature set built here, and random signatures (valid
ones, and each with one bit flipped). Every input on which they disagree must fall in
one of the documented difference classes, and for every input either library refuses
the library's own path must refuse too, with a typed reason:

=====================  ===========  ==========  ======================================
class                  OpenSSL      libsodium   this library
=====================  ===========  ==========  ======================================
small-order key        accepts      refuses     ``weak-key`` at enrolment
non-canonical key      loads it     refuses     ``weak-key`` at enrolment
small-order ``R``      accepts      refuses     ``bad-signature`` (libsodium verifies)
=====================  ===========  ==========  ======================================

(On C2SP/CCTV's 914 edge vectors OpenSSL 3 refuses exactly the ``non_canonical_R``
and ``low_order_residue`` ones, as libsodium does: see the signing anchors.)
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from nacl.bindings import crypto_core_ed25519_is_valid_point, crypto_sign_open
from nacl.exceptions import BadSignatureError

from edwards25519 import (
    SMALL_ORDER_ENCODINGS,
    L,
    P,
    decode_point,
    has_small_order_component,
    is_small_order,
)
from handoffs._errors import KeyRingError, ProofError, WeakKey
from handoffs._json import canonical_bytes
from handoffs.integrity._base58 import b58decode
from handoffs.integrity._eddsa import verify_ed25519
from handoffs.integrity._edwards25519 import check_public_key
from handoffs.integrity._keys import decode_public_key_multibase

VECTORS = json.loads((Path(__file__).parents[1] / "vectors" / "eddsa-jcs-2022.json").read_text())


def openssl(public_key: bytes, signature: bytes, message: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def sodium(public_key: bytes, signature: bytes, message: bytes) -> bool:
    try:
        crypto_sign_open(signature + message, public_key)
    except (BadSignatureError, ValueError):
        return False
    return True


def ours(public_key: bytes, signature: bytes, message: bytes) -> str | None:
    """This library's refusal code (key check at enrolment, then the verify), or None."""
    try:
        check_public_key(public_key)
        verify_ed25519(public_key, signature, message, json_path="$.proof.proofValue",
                       who="the key")
    except (KeyRingError, ProofError) as exc:
        return exc.code
    return None


# ----------------------------------------------------------------------- the inputs


def _secret_scalar(seed: bytes) -> tuple[int, bytes]:
    digest = hashlib.sha512(seed).digest()
    scalar = bytearray(digest[:32])
    scalar[0] &= 248
    scalar[31] &= 127
    scalar[31] |= 64
    public = Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes_raw()
    return int.from_bytes(scalar, "little"), public


def _challenge(r: bytes, public: bytes, message: bytes) -> int:
    return int.from_bytes(hashlib.sha512(r + public + message).digest(), "little") % L


def vector_cases() -> list[tuple[str, bytes, bytes, bytes]]:
    cases = []
    for vector in VECTORS["vectors"]:
        secured = vector["secured_document"]
        proof = secured["proof"]
        method = proof["verificationMethod"].split("#", 1)[1]
        public = decode_public_key_multibase(method)
        config = {k: v for k, v in proof.items() if k != "proofValue"}
        document = {k: v for k, v in secured.items() if k != "proof"}
        if "@context" in proof:
            document["@context"] = proof["@context"]
        message = (hashlib.sha256(canonical_bytes(config)).digest()
                   + hashlib.sha256(canonical_bytes(document)).digest())
        cases.append((f"w3c:{vector['id']}", public, b58decode(proof["proofValue"][1:]),
                      message))
    return cases


def weak_cases() -> list[tuple[str, bytes, bytes, bytes]]:
    """Small-order and non-canonical keys with signatures OpenSSL accepts where it can,
    and a small-order ``R`` under an honest key.
    """
    cases = []
    identity = (1).to_bytes(32, "little")
    # A = identity, R = identity, S = 0: [0]B = R + [k]A for every message.
    for message in (b"", b"receipt"):
        cases.append(("small-order key, identity forgery", identity, identity + bytes(32),
                      message))
    # Every spelling of every small-order point as the key, with the same forgery shape.
    for encoded in sorted(SMALL_ORDER_ENCODINGS):
        cases.append(("small-order key", encoded, identity + bytes(32), b"m"))
    # Non-canonical keys (y + p for the small y on the curve) with an honest-looking
    # signature made for the point they decode to: OpenSSL reduces y, libsodium refuses.
    for y in range(2, 19):
        raw = (y + P).to_bytes(32, "little")
        if decode_point(raw) is not None:
            cases.append(("non-canonical key", raw, bytes(64), b"m"))
    # A small-order R (the identity) under an honest key: S = k·a makes
    # [S]B = R + [k]A hold exactly, which OpenSSL's cofactorless check accepts.
    rng = random.Random(20)  # noqa: S311 - reproducible test inputs, not secrets
    for _ in range(4):
        seed = rng.randbytes(32)
        a, public = _secret_scalar(seed)
        message = rng.randbytes(40)
        k = _challenge(identity, public, message)
        s = (k * a) % L
        cases.append(("small-order R", public, identity + s.to_bytes(32, "little"), message))
    return cases


def random_cases() -> list[tuple[str, bytes, bytes, bytes]]:
    rng = random.Random(2026)  # noqa: S311 - reproducible test inputs, not secrets
    cases = []
    for index in range(64):
        key = Ed25519PrivateKey.from_private_bytes(rng.randbytes(32))
        public = key.public_key().public_bytes_raw()
        message = rng.randbytes(rng.randrange(0, 200))
        signature = key.sign(message)
        cases.append(("random valid", public, signature, message))
        flipped = bytearray(signature)
        flipped[rng.randrange(64)] ^= 1 << rng.randrange(8)
        cases.append(("random, one bit flipped", public, bytes(flipped), message))
        cases.append(("random bytes", public, rng.randbytes(64), message))
        # S >= L (S + L): a malleable spelling both refuse.
        s = int.from_bytes(signature[32:], "little") + L
        if s < 1 << 256 and index % 4 == 0:
            cases.append(("S not reduced", public, signature[:32] + s.to_bytes(32, "little"),
                          message))
    return cases


CASES = vector_cases() + weak_cases() + random_cases()
DOCUMENTED = {
    "small-order key": "weak-key",
    "small-order key, identity forgery": "weak-key",
    "non-canonical key": "weak-key",
    "small-order R": "bad-signature",
}


@pytest.mark.parametrize(("label", "public", "signature", "message"), CASES,
                         ids=[f"{i}-{c[0]}" for i, c in enumerate(CASES)])
def test_the_libraries_differ_only_in_documented_classes(
        label: str, public: bytes, signature: bytes, message: bytes) -> None:
    by_openssl = openssl(public, signature, message)
    by_sodium = sodium(public, signature, message)
    code = ours(public, signature, message)
    if by_openssl != by_sodium:
        assert label in DOCUMENTED, (label, by_openssl, by_sodium)
        assert (by_openssl, by_sodium) == (True, False)
    if label in DOCUMENTED:
        assert code == DOCUMENTED[label]
    elif by_openssl and by_sodium:
        assert code is None
    else:
        assert code == "bad-signature"


def test_every_documented_class_is_a_real_difference() -> None:
    """Each class but one holds an input OpenSSL accepts and libsodium refuses (so the
    refusal up front is needed, not decorative). The exception: no signature under a
    non-canonical key that is not of small order can be made without its secret
    scalar, unknown for every such key; OpenSSL loads the key (it reduces ``y``) where
    libsodium refuses every signature under it, so it is refused at enrolment too.
    """
    found: dict[str, int] = {}
    for label, public, signature, message in CASES:
        if openssl(public, signature, message) and not sodium(public, signature, message):
            found[label] = found.get(label, 0) + 1
    assert set(found) == set(DOCUMENTED) - {"non-canonical key"}
    for label, public, _, _ in CASES:
        if label == "non-canonical key":
            Ed25519PublicKey.from_public_bytes(public)  # OpenSSL takes it


def test_the_w3c_vectors_verify_under_both() -> None:
    assert [c[0] for c in CASES if c[0].startswith("w3c:")] == [
        f"w3c:{v['id']}" for v in VECTORS["vectors"]]
    for _, public, signature, message in CASES[:len(VECTORS["vectors"])]:
        assert openssl(public, signature, message)
        assert sodium(public, signature, message)


def test_the_oracle_s_small_order_table_is_libsodium_s_blocklist_with_both_signs() -> None:
    # libsodium's ge25519_has_small_order: 7 encodings, the sign bit ignored; and
    # crypto_core_ed25519_is_valid_point (the enrolment check) refuses every one.
    assert len(SMALL_ORDER_ENCODINGS) == 14
    assert {bytes([*e[:31], e[31] & 0x7F]) for e in SMALL_ORDER_ENCODINGS} == {
        bytes.fromhex(h) for h in (
            "0100000000000000000000000000000000000000000000000000000000000000",
            "0000000000000000000000000000000000000000000000000000000000000000",
            "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
            "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
            "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
            "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
            "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        )}
    assert not any(crypto_core_ed25519_is_valid_point(e) for e in SMALL_ORDER_ENCODINGS)


def test_the_enrolment_check_is_the_oracle_s_on_every_kind_of_point() -> None:
    """libsodium's check accepts exactly the canonical prime-order points the exact
    arithmetic finds, over every small ``y`` and its non-canonical spelling."""
    rng = random.Random(29)  # noqa: S311 - reproducible test inputs, not secrets
    candidates = [y.to_bytes(32, "little") for y in range(64)]
    candidates += [(y + P).to_bytes(32, "little") for y in range(19)]
    candidates += [rng.randbytes(32) for _ in range(400)]
    candidates += [Ed25519PrivateKey.generate().public_key().public_bytes_raw()
                   for _ in range(40)]
    for raw in candidates:
        decoded = decode_point(raw)
        number = int.from_bytes(raw, "little")
        canonical = (number & ((1 << 255) - 1)) < P and not (
            decoded is not None and decoded[0][0] == 0 and number >> 255)
        expected = (decoded is not None and canonical and not is_small_order(decoded[0])
                    and not has_small_order_component(decoded[0]))
        assert crypto_core_ed25519_is_valid_point(raw) == expected, raw.hex()
        refused = None
        try:
            check_public_key(raw)
        except WeakKey as exc:
            refused = exc.code
        assert refused == (None if expected else "weak-key")


def test_a_weak_key_is_a_typed_refusal() -> None:
    with pytest.raises(WeakKey, match="of small order") as info:
        check_public_key((1).to_bytes(32, "little"))


    assert info.value.code == "weak-key"
