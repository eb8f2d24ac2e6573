"""Cryptosuites: what a Data Integrity proof's ``cryptosuite`` names, in one registry.

A :class:`Cryptosuite` canonicalises (RFC 8785 JCS for both suites here), hashes
(SHA-256), signs through a :class:`~handoffs.integrity.Signer`, verifies, and checks a
public key before it is enrolled. The proof layer asks the registry
(:func:`cryptosuite`) and nothing else; a key's Multikey header names its suite, so a
key verifies proofs of its own suite only (no algorithm confusion: the message never
chooses the algorithm).

Registered:

- ``eddsa-jcs-2022`` (W3C Data Integrity EdDSA Cryptosuites v1.0): Ed25519, verified
  on libsodium with the weak inputs refused first (:mod:`handoffs.integrity._eddsa`);
- ``ecdsa-jcs-2019`` (W3C Data Integrity ECDSA Cryptosuites v1.0) with P-256: ECDSA
  with SHA-256 over ``hashData`` through ``cryptography``, the signature as the
  64-byte ``r ‖ s``; keys held in cloud KMSs and HSMs are mostly P-256.

Both sign ``hashData = SHA-256(JCS(proofConfig)) ‖ SHA-256(JCS(document))``; the
published W3C test vectors of both reproduce byte for byte
(``tests/unit/test_cryptosuites.py``).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol, runtime_checkable

import attrs
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)

from handoffs._errors import HandoffsError, KeyRingError, ProofError
from handoffs._json import canonical_bytes
from handoffs.integrity._base58 import _b58decode_or_none, b58encode
from handoffs.integrity._eddsa import verify_ed25519
from handoffs.integrity._edwards25519 import check_public_key as check_ed25519_key

__all__ = [
    "ECDSA_JCS_2019",
    "EDDSA_JCS_2022",
    "Cryptosuite",
    "cryptosuite",
    "decode_multikey",
    "encode_multikey",
    "low_s",
    "registered_cryptosuites",
]


@runtime_checkable
class Cryptosuite(Protocol):
    """A Data Integrity cryptosuite as the proof layer uses it."""

    @property
    def name(self) -> str:
        """The ``cryptosuite`` value of its proofs."""
        ...

    @property
    def public_key_header(self) -> bytes:
        """The multicodec header of its ``publicKeyMultibase`` keys."""
        ...

    def canonicalise(self, value: Any) -> bytes:
        """The canonical bytes of a JSON value (what is hashed)."""
        ...

    def hash(self, data: bytes) -> bytes:
        """The digest of canonical bytes."""
        ...

    def sign(self, signer: Any, data: bytes) -> bytes:
        """``signer``'s signature of ``data`` (a :class:`~handoffs.integrity.Signer` of
        this suite; ``ProofError`` ``wrong-cryptosuite`` for another suite's).
        """
        ...

    def verify(self, public_key: bytes, signature: bytes, data: bytes, *, json_path: str,
               who: str) -> None:
        """Verify ``signature`` of ``data``; return nothing or raise ``ProofError``."""
        ...

    def check_public_key(self, public_key: bytes, *, json_path: str) -> None:
        """Refuse a key that cannot bind a signature to one signer (``KeyRingError``)."""
        ...


def _sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


@attrs.frozen
class _Suite:
    """A registered cryptosuite: its name, key header and operations."""

    name: str
    public_key_header: bytes
    public_key_size: int
    verify: Callable[..., None]
    """Verify ``signature`` of ``data`` under ``public_key`` (keywords ``json_path`` and
    ``who``); return nothing or raise ``ProofError``. The suite's function itself, not a
    method around it: one call per proof."""
    _check: Callable[..., None] = attrs.field(alias="check")

    def canonicalise(self, value: Any) -> bytes:
        """RFC 8785 (JCS) canonical bytes."""
        return canonical_bytes(value)

    def hash(self, data: bytes) -> bytes:
        """SHA-256."""
        return _sha256(data)

    def sign(self, signer: Any, data: bytes) -> bytes:
        """``signer``'s signature of ``data``, refused for a signer of another suite.

        Raises:
            ProofError: ``wrong-cryptosuite``.
            KeyRingError: ``bad-signer`` when the signer fails (a KMS call that raises,
                say) or returns anything but bytes.
        """
        if signer.cryptosuite != self.name:
            raise ProofError(f"the signer's key belongs to {signer.cryptosuite!r}, the proof "
                             f"names {self.name!r}", code="wrong-cryptosuite",
                             json_path="$.proof.cryptosuite")
        try:
            signature = signer.sign(data)
        except HandoffsError:
            raise
        except Exception as exc:  # a user's signer: any failure becomes one typed error
            raise KeyRingError(f"the signer ({type(signer).__name__}) failed: "
                               f"{type(exc).__name__}: {exc}", code="bad-signer") from exc
        if not isinstance(signature, bytes | bytearray):
            raise KeyRingError(f"the signer returned {type(signature).__name__}, not bytes",
                               code="bad-signer")
        return bytes(signature)

    def check_public_key(self, public_key: bytes, *, json_path: str) -> None:
        """Refuse an unusable or weak key (``KeyRingError`` and its ``WeakKey``)."""
        self._check(public_key, json_path=json_path)


# ------------------------------------------------------------------- ecdsa P-256

_P256: Final = ec.SECP256R1()
_ECDSA_SHA256: Final = ec.ECDSA(hashes.SHA256())


def _check_p256_key(public_key: bytes, *, json_path: str) -> None:
    if len(public_key) != 33 or public_key[0] not in (2, 3):
        raise KeyRingError(
            f"a P-256 Multikey holds a 33-byte compressed point, got {len(public_key)} bytes",
            code="bad-key-length", json_path=json_path)
    try:
        ec.EllipticCurvePublicKey.from_encoded_point(_P256, public_key)
    except ValueError as exc:
        raise KeyRingError("the public key is not a point on P-256", code="not-on-curve",
                           json_path=json_path) from exc


# The group order n of P-256: for a valid (r, s), (r, n - s) verifies too; only the
# low-S form (s <= n/2) is accepted, so a proof has one spelling (no malleability).
_P256_ORDER: Final = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
_P256_HALF_ORDER: Final = _P256_ORDER // 2


def low_s(signature: bytes) -> bytes:
    """The low-S form of a 64-byte P-256 ``r ‖ s`` signature: ``(r, n - s)`` when
    ``s > n/2``, else the signature itself (both verify; verifiers here accept only this).
    """
    s = int.from_bytes(signature[32:], "big")
    if s <= _P256_HALF_ORDER:
        return signature
    return signature[:32] + (_P256_ORDER - s).to_bytes(32, "big")


@functools.lru_cache(maxsize=1024)
def _p256_key(public_key: bytes) -> ec.EllipticCurvePublicKey:
    """The loaded P-256 key of a compressed point, once per key: decompressing and
    checking the point costs as much as a verify (``ValueError`` off the curve).
    """
    return ec.EllipticCurvePublicKey.from_encoded_point(_P256, public_key)


def _verify_p256(public_key: bytes, signature: bytes, data: bytes, *, json_path: str,
                 who: str) -> None:
    r = int.from_bytes(signature[:32], "big")
    s = int.from_bytes(signature[32:], "big")
    if s > _P256_HALF_ORDER:
        raise ProofError(
            f"the ECDSA signature is high-S (s > n/2): its low-S twin is the one accepted "
            f"form, so this spelling is refused whether or not it verifies under {who}",
            code="weak-signature", json_path=json_path)
    try:
        _p256_key(public_key).verify(encode_dss_signature(r, s), data, _ECDSA_SHA256)
    except (InvalidSignature, ValueError) as exc:
        raise ProofError(f"the signature does not verify under {who}", code="bad-signature",
                         json_path=json_path) from exc


def p256_signature(der: bytes) -> bytes:
    """A DER ECDSA signature as the suite's 64-byte ``r ‖ s``."""
    r, s = decode_dss_signature(der)
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


# ---------------------------------------------------------------------- registry

EDDSA_JCS_2022: Final[Cryptosuite] = _Suite(
    "eddsa-jcs-2022", b"\xed\x01", 32, verify=verify_ed25519, check=check_ed25519_key)
"""Ed25519 over JCS (W3C Data Integrity EdDSA Cryptosuites v1.0)."""
ECDSA_JCS_2019: Final[Cryptosuite] = _Suite(
    "ecdsa-jcs-2019", b"\x80\x24", 33, verify=_verify_p256, check=_check_p256_key)
"""ECDSA P-256 with SHA-256 over JCS (W3C Data Integrity ECDSA Cryptosuites v1.0)."""

_REGISTRY: Final[Mapping[str, Cryptosuite]] = {
    suite.name: suite for suite in (EDDSA_JCS_2022, ECDSA_JCS_2019)}
_BY_HEADER: Final[Mapping[bytes, Cryptosuite]] = {
    suite.public_key_header: suite for suite in _REGISTRY.values()}
# base58 of a 2-byte header and a 33-byte key is at most 49 characters; plus "z".
_MULTIKEY_MAX_CHARS: Final = 50


def registered_cryptosuites() -> tuple[str, ...]:
    """The names of the registered cryptosuites, in registration order."""
    return tuple(_REGISTRY)


def cryptosuite(name: object, *, json_path: str = "$.proof.cryptosuite") -> Cryptosuite:
    """The registered suite ``name`` names.

    Raises:
        ProofError: ``wrong-cryptosuite`` for any other value.
    """
    suite = _REGISTRY.get(name) if type(name) is str else None
    if suite is None:
        raise ProofError(f"expected a cryptosuite among {list(_REGISTRY)}, got {name!r}",
                         code="wrong-cryptosuite", json_path=json_path)
    return suite


def encode_multikey(suite: Cryptosuite, public_key: bytes) -> str:
    """The Multikey ``publicKeyMultibase`` of a raw public key of ``suite``:
    ``z`` + base58btc(the suite's header ‖ key); :func:`decode_multikey` reads it back.

    Raises:
        KeyRingError: ``bad-key-length`` for a key of another length than the suite's.
    """
    if len(public_key) != _size(suite):
        raise KeyRingError(f"a {suite.name} public key is {_size(suite)} bytes, got "
                           f"{len(public_key)}", code="bad-key-length")
    return "z" + b58encode(suite.public_key_header + bytes(public_key))


def decode_multikey(text: object, *, json_path: str = "$") -> tuple[Cryptosuite, bytes]:
    """The suite and raw public key of a Multikey ``publicKeyMultibase`` of any
    registered suite (the point itself is checked by the suite's ``check_public_key``).

    Raises:
        KeyRingError: ``invalid-multibase`` or ``wrong-key-type``.
    """
    if not isinstance(text, str):
        raise KeyRingError(f"expected a publicKeyMultibase string, got {type(text).__name__}",
                           code="invalid-multibase", json_path=json_path)
    if len(text) > _MULTIKEY_MAX_CHARS or not text.startswith("z"):
        raise KeyRingError(
            f"publicKeyMultibase must be 'z' (base58btc multibase) followed by at most "
            f"{_MULTIKEY_MAX_CHARS - 1} characters, got {text[:64]!r}",
            code="invalid-multibase", json_path=json_path)
    data = _b58decode_or_none(text[1:])
    if data is None:
        raise KeyRingError(f"publicKeyMultibase is not canonical base58btc: {text!r}",
                           code="invalid-multibase", json_path=json_path)
    suite = _BY_HEADER.get(data[:2])
    if suite is None or len(data) != 2 + _size(suite):
        raise KeyRingError(
            f"publicKeyMultibase must encode a registered key header "
            f"({', '.join('0x' + h.hex() for h in _BY_HEADER)}) and its key bytes, got "
            f"{len(data)} bytes starting 0x{data[:2].hex()}",
            code="wrong-key-type", json_path=json_path)
    return suite, data[2:]


def _size(suite: Cryptosuite) -> int:
    return int(getattr(suite, "public_key_size", 32))
