"""Signers: whatever signs a proof's ``hashData``, in memory or in a KMS/HSM.

A :class:`Signer` names its cryptosuite and verification method and signs bytes. The
in-memory keys (:class:`~handoffs.integrity.SigningKey` for Ed25519,
:class:`P256SigningKey`) are implementations; a key held in a cloud KMS or an HSM is
another, through :class:`CallableSigner`: the private key never enters this process,
only the bytes to sign leave it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Protocol, runtime_checkable

import attrs
from cryptography.hazmat.primitives.asymmetric import ec

from handoffs._errors import KeyRingError
from handoffs.integrity._keys import SigningKey, load_pem_private_key, pkcs8_pem
from handoffs.integrity._suites import (
    _ECDSA_SHA256,
    _P256,
    ECDSA_JCS_2019,
    decode_multikey,
    encode_multikey,
    low_s,
    p256_signature,
)

__all__ = [
    "CallableSigner",
    "P256SigningKey",
    "Signer",
    "load_signing_key",
    "multikey_verification_method",
]

_P256_PRIV_HEADER: Final = b"\x86\x26"


@runtime_checkable
class Signer(Protocol):
    """What signs a proof: its suite, its verification method, and a signature of bytes."""

    @property
    def cryptosuite(self) -> str:
        """The name of the cryptosuite its signatures belong to."""
        ...

    @property
    def verification_method(self) -> str:
        """The key id its proofs name (a verifier's key ring maps it to the key)."""
        ...

    def sign(self, data: bytes) -> bytes:
        """The suite's signature of ``data`` (64 bytes for both registered suites)."""
        ...


def multikey_verification_method(public_key_multibase: str) -> str:
    """The ``did:key`` verification method id of a Multikey of any registered suite."""
    decode_multikey(public_key_multibase)
    return f"did:key:{public_key_multibase}#{public_key_multibase}"


def _callable(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not callable(value):
        raise KeyRingError(f"{attribute.name} must be callable", code="bad-signer")


@attrs.frozen(kw_only=True)
class CallableSigner:
    """A :class:`Signer` whose private key lives elsewhere (a KMS, an HSM, a signing
    service): ``sign_bytes`` receives the bytes to sign and returns the signature.

    Attributes:
        public_key_multibase: the key's Multikey (it selects the cryptosuite).
        sign_bytes: signs bytes remotely; for P-256, the raw ``r ‖ s`` or (with
            ``der=True``) the DER signature most KMS APIs return.
        der: the callable returns DER (P-256 only).
        verification_method: the key id proofs name (default: its ``did:key``).
    """

    public_key_multibase: str
    sign_bytes: Callable[[bytes], bytes] = attrs.field(validator=_callable)
    der: bool = False
    verification_method: str = attrs.field()
    _suite: str = attrs.field(init=False, repr=False, eq=False)

    @verification_method.default
    def _did_key(self) -> str:
        return multikey_verification_method(self.public_key_multibase)

    def __attrs_post_init__(self) -> None:
        suite, raw = decode_multikey(self.public_key_multibase, json_path="$.public_key_multibase")
        suite.check_public_key(raw, json_path="$.public_key_multibase")
        if self.der and suite is not ECDSA_JCS_2019:
            raise KeyRingError("der=True is for P-256 signers", code="bad-signer")
        object.__setattr__(self, "_suite", suite.name)

    @property
    def cryptosuite(self) -> str:
        """The suite the key's Multikey header names."""
        return self._suite

    def sign(self, data: bytes) -> bytes:
        """The remote signature of ``data``, as the suite spells it.

        Raises:
            KeyRingError: ``bad-signer`` when the callable raises or returns anything
                but the signature's bytes.
        """
        try:
            signature = self.sign_bytes(data)
        except Exception as exc:  # the remote signer's failure, typed
            raise KeyRingError(f"the signer failed: {type(exc).__name__}: {exc}",
                               code="bad-signer") from exc
        if not isinstance(signature, bytes):
            raise KeyRingError(f"the signer returned {type(signature).__name__}, not bytes",
                               code="bad-signer")
        if self.der:
            try:
                signature = p256_signature(signature)
            except ValueError as exc:
                raise KeyRingError(f"the signer's DER signature is malformed: {exc}",
                                   code="bad-signer") from exc
        if len(signature) != 64:
            raise KeyRingError(f"the signer returned {len(signature)} bytes, not 64",
                               code="bad-signer")
        # KMSs sign high-S half the time; the suite's verifiers here (and @noble/curves')
        # refuse high-S, so the signature leaves in its low-S form, (r, n - s).
        return low_s(signature) if self._suite == ECDSA_JCS_2019.name else signature


@attrs.frozen(repr=False, eq=False)
class P256SigningKey:
    """An in-memory P-256 key for ``ecdsa-jcs-2019`` proofs (deterministic ECDSA,
    RFC 6979, so a signature is reproducible). The repr shows only the public key.
    """

    private_key: ec.EllipticCurvePrivateKey = attrs.field()

    @private_key.validator
    def _p256(self, _: attrs.Attribute[Any], value: object) -> None:
        if not (isinstance(value, ec.EllipticCurvePrivateKey)
                and isinstance(value.curve, ec.SECP256R1)):
            raise KeyRingError(f"a P256SigningKey wraps a P-256 private key, got "
                               f"{type(value).__name__}", code="not-p256")

    @classmethod
    def generate(cls) -> P256SigningKey:
        """A new random key."""
        return cls(ec.generate_private_key(_P256))

    @classmethod
    def from_pem(cls, data: bytes, passphrase: bytes | None = None) -> P256SigningKey:
        """Load a PKCS#8 PEM P-256 private key, decrypting it with ``passphrase``.

        Raises:
            KeyRingError: the codes of :meth:`SigningKey.from_pem
                <handoffs.integrity.SigningKey.from_pem>`, ``not-p256`` for another key.
        """
        return cls(load_pem_private_key(data, passphrase))

    def to_pem(self, passphrase: bytes | None = None) -> bytes:
        """Serialise as PKCS#8 PEM; encrypted (best available scheme) with a passphrase.

        Raises:
            KeyRingError: ``bad-passphrase`` for an empty or non-bytes passphrase.
        """
        return pkcs8_pem(self.private_key, passphrase)

    @classmethod
    def from_multibase(cls, secret_key_multibase: str) -> P256SigningKey:
        """The key of a Multikey ``secretKeyMultibase`` (header ``0x8626``).

        Raises:
            KeyRingError: ``invalid-multibase`` or ``wrong-key-type``.
        """
        from handoffs.integrity._base58 import _b58decode_or_none

        data = (_b58decode_or_none(secret_key_multibase[1:])
                if isinstance(secret_key_multibase, str)
                and secret_key_multibase.startswith("z") else None)
        if data is None:
            raise KeyRingError("not a base58btc Multikey", code="invalid-multibase")
        if len(data) != 34 or data[:2] != _P256_PRIV_HEADER:
            raise KeyRingError("a P-256 secretKeyMultibase is 0x8626 and 32 bytes",
                               code="wrong-key-type")
        return cls(ec.derive_private_key(int.from_bytes(data[2:], "big"), _P256))

    @property
    def public_key_multibase(self) -> str:
        """The Multikey ``publicKeyMultibase``: ``z`` + base58btc(``0x8024`` ‖ point)."""
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        point = self.private_key.public_key().public_bytes(
            Encoding.X962, PublicFormat.CompressedPoint)
        return encode_multikey(ECDSA_JCS_2019, point)

    @property
    def verification_method(self) -> str:
        """The ``did:key`` verification method id."""
        return multikey_verification_method(self.public_key_multibase)

    @property
    def cryptosuite(self) -> str:
        """``ecdsa-jcs-2019``."""
        return ECDSA_JCS_2019.name

    def sign(self, data: bytes) -> bytes:
        """The 64-byte ``r ‖ s`` ECDSA P-256/SHA-256 signature of ``data`` (RFC 6979),
        always low-S (``s ≤ n/2``: the form every verifier accepts).
        """
        der = self.private_key.sign(
            data, ec.ECDSA(_ECDSA_SHA256.algorithm, deterministic_signing=True))
        return low_s(p256_signature(der))

    def __repr__(self) -> str:
        return f"P256SigningKey(public_key_multibase={self.public_key_multibase!r})"


def load_signing_key(data: bytes, passphrase: bytes | None = None
                     ) -> SigningKey | P256SigningKey:
    """The in-memory signer of a PKCS#8 PEM private key: a :class:`SigningKey` for
    Ed25519, a :class:`P256SigningKey` for P-256 (the key picks its suite).

    Raises:
        KeyRingError: the codes of :meth:`SigningKey.from_pem
            <handoffs.integrity.SigningKey.from_pem>`; ``unsupported-key`` for a key of
            no registered suite.
    """
    key = load_pem_private_key(data, passphrase)
    if isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1):
        return P256SigningKey(key)
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if isinstance(key, Ed25519PrivateKey):
        return SigningKey(key)
    raise KeyRingError(f"a {type(key).__name__} signs no registered cryptosuite (Ed25519 for "
                       "eddsa-jcs-2022, P-256 for ecdsa-jcs-2019)", code="unsupported-key")
