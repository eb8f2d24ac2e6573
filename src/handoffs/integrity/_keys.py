"""Keys and their Multikey encodings: Ed25519 signing keys, ``did:key`` ids.

Keys travel as W3C Multikey strings: ``publicKeyMultibase = "z" + base58btc(0xed01 ‖
32-byte key)`` and ``secretKeyMultibase = "z" + base58btc(0x8026 ‖ 32-byte seed)``
(P-256 keys: :mod:`handoffs.integrity._suites` and :mod:`handoffs.integrity._signer`).
Decoders accept exactly those headers and lengths, and only the canonical spelling
(the decoded bytes must re-encode to the same string).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

import attrs
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
)

from handoffs._errors import KeyRingError
from handoffs._time import format_utc, parse_utc
from handoffs.integrity._base58 import _b58decode_or_none, b58encode
from handoffs.integrity._suites import EDDSA_JCS_2022, encode_multikey

__all__ = [
    "SigningKey",
    "decode_public_key_multibase",
    "decode_secret_key_multibase",
    "did_key_verification_method",
    "encode_public_key_multibase",
    "encode_secret_key_multibase",
    "load_pem_private_key",
    "pkcs8_pem",
]


_ED25519_PUB_HEADER: Final = b"\xed\x01"
_ED25519_PRIV_HEADER: Final = b"\x80\x26"
# base58 of 34 bytes is at most 47 characters; one more for the multibase "z".
_MULTIKEY_MAX_CHARS: Final = 48


def _decode_multikey(text: str, *, header: bytes, what: str, json_path: str) -> bytes:
    if not isinstance(text, str):
        raise KeyRingError(
            f"expected a {what} string, got {type(text).__name__}",
            code="invalid-multibase",
            json_path=json_path,
        )
    if len(text) > _MULTIKEY_MAX_CHARS or not text.startswith("z"):
        raise KeyRingError(
            f"{what} must be 'z' (base58btc multibase) followed by at most "
            f"{_MULTIKEY_MAX_CHARS - 1} characters, got {text[:64]!r}",
            code="invalid-multibase",
            json_path=json_path,
        )
    data = _b58decode_or_none(text[1:])
    if data is None:
        raise KeyRingError(
            f"{what} is not canonical base58btc: {text!r}",
            code="invalid-multibase",
            json_path=json_path,
        )
    if len(data) != 34 or data[:2] != header:
        raise KeyRingError(
            f"{what} must encode the multicodec header 0x{header.hex()} and 32 key bytes, "
            f"got {len(data)} bytes starting 0x{data[:2].hex()}",
            code="wrong-key-type",
            json_path=json_path,
        )
    return data[2:]


def encode_public_key_multibase(public_key: bytes) -> str:
    """Return the Multikey ``publicKeyMultibase`` of a raw 32-byte Ed25519 public key."""
    if len(public_key) != 32:
        raise KeyRingError(
            f"an Ed25519 public key is 32 bytes, got {len(public_key)}", code="bad-key-length"
        )
    return encode_multikey(EDDSA_JCS_2022, public_key)


def decode_public_key_multibase(text: str, *, json_path: str = "$") -> bytes:
    """Return the raw 32-byte Ed25519 public key of a Multikey ``publicKeyMultibase``.

    Only the ``z`` (base58btc) multibase and the ``0xed01`` (ed25519-pub) header are
    accepted. The point itself is not checked here; see ``check_public_key``.

    Raises:
        KeyRingError: ``invalid-multibase`` or ``wrong-key-type``.

    """
    return _decode_multikey(
        text, header=_ED25519_PUB_HEADER, what="publicKeyMultibase", json_path=json_path
    )


def encode_secret_key_multibase(seed: bytes) -> str:
    """Return the Multikey ``secretKeyMultibase`` of a 32-byte Ed25519 seed."""
    if len(seed) != 32:
        raise KeyRingError(f"an Ed25519 seed is 32 bytes, got {len(seed)}", code="bad-key-length")
    return "z" + b58encode(_ED25519_PRIV_HEADER + bytes(seed))


def decode_secret_key_multibase(text: str, *, json_path: str = "$") -> bytes:
    """Return the 32-byte Ed25519 seed of a Multikey ``secretKeyMultibase``.

    Raises:
        KeyRingError: ``invalid-multibase`` or ``wrong-key-type`` (header not ``0x8026``).

    """
    return _decode_multikey(
        text, header=_ED25519_PRIV_HEADER, what="secretKeyMultibase", json_path=json_path
    )


def did_key_verification_method(public_key_multibase: str) -> str:
    """Return the ``did:key`` verification method id of a key: ``did:key:<mb>#<mb>``."""
    decode_public_key_multibase(public_key_multibase)
    return f"did:key:{public_key_multibase}#{public_key_multibase}"


# ---------------------------------------------------------------------- times (RFC 3339)
# Read and written by handoffs._time, once for the library.
_parse_utc = parse_utc
_format_utc = format_utc


def _aware_utc(value: object, *, json_path: str) -> datetime:
    if type(value) is datetime and value.tzinfo is UTC:
        return value
    if not isinstance(value, datetime):
        raise KeyRingError(
            f"expected a datetime, got {type(value).__name__}",
            code="bad-time",
            json_path=json_path,
        )
    if value.tzinfo is None or value.utcoffset() is None:
        raise KeyRingError(
            f"expected a timezone-aware datetime, got naive {value.isoformat()}",
            code="naive-datetime",
            json_path=json_path,
        )
    return value.astimezone(UTC)


# ----------------------------------------------------------------------------- keys


def load_pem_private_key(data: bytes, passphrase: bytes | None) -> Any:
    """The private key of a PKCS#8 PEM (any algorithm ``cryptography`` reads), decrypted
    with ``passphrase`` if given; the caller checks its type.

    Raises:
        KeyRingError: ``passphrase-required``, ``unexpected-passphrase``,
            ``bad-passphrase``, ``bad-pem`` or ``not-ed25519`` (an algorithm
            ``cryptography`` does not support).
    """
    if not isinstance(data, bytes):
        raise KeyRingError(f"PEM data must be bytes, got {type(data).__name__}", code="bad-pem")
    if passphrase is not None and not isinstance(passphrase, bytes):
        raise KeyRingError(
            f"a passphrase must be bytes, got {type(passphrase).__name__}",
            code="bad-passphrase",
        )
    from cryptography.hazmat.primitives import serialization  # PEM only, on demand

    try:
        key = serialization.load_pem_private_key(data, password=passphrase)
    except TypeError as exc:
        if passphrase is None:
            raise KeyRingError(
                "the PEM key is encrypted; a passphrase is required",
                code="passphrase-required",
            ) from exc
        raise KeyRingError(
            "the PEM key is not encrypted, but a passphrase was given",
            code="unexpected-passphrase",
        ) from exc
    except ValueError as exc:
        if passphrase is not None and b"ENCRYPTED" in data:
            raise KeyRingError(
                "the passphrase does not decrypt the PEM key", code="bad-passphrase"
            ) from exc
        raise KeyRingError(f"not a readable PEM private key: {exc}", code="bad-pem") from exc
    except UnsupportedAlgorithm as exc:
        raise KeyRingError(
            f"the PEM key uses an unsupported algorithm: {exc}", code="not-ed25519"
        ) from exc
    return key


def _check_private_key(instance: object, attribute: object, value: Any) -> None:
    if not isinstance(value, Ed25519PrivateKey):
        raise KeyRingError(
            f"a SigningKey wraps an Ed25519 private key, got {type(value).__name__}",
            code="not-ed25519",
        )


@attrs.frozen(repr=False, eq=False)
class SigningKey:
    """An Ed25519 private key that signs proofs.

    Create one with :meth:`generate`, :meth:`from_pem` or :meth:`from_multibase`. The
    repr shows only the public key; the secret never appears in logs.
    """

    private_key: Ed25519PrivateKey = attrs.field(validator=_check_private_key)

    @classmethod
    def generate(cls) -> SigningKey:
        """Return a new random key from the operating system's CSPRNG."""
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_multibase(cls, secret_key_multibase: str) -> SigningKey:
        """Load a key from its Multikey ``secretKeyMultibase`` (``z`` + ``0x8026`` ‖ seed).

        Raises:
            KeyRingError: ``invalid-multibase`` or ``wrong-key-type``.

        """
        seed = decode_secret_key_multibase(secret_key_multibase)
        return cls(Ed25519PrivateKey.from_private_bytes(seed))

    @classmethod
    def from_pem(cls, data: bytes, passphrase: bytes | None = None) -> SigningKey:
        """Load a PKCS#8 PEM private key, decrypting it with ``passphrase`` if given.

        Raises:
            KeyRingError: ``passphrase-required`` (encrypted, none given),
                ``unexpected-passphrase`` (not encrypted, one given), ``bad-passphrase``,
                ``bad-pem`` (not a readable PEM private key) or ``not-ed25519``.

        """
        key = load_pem_private_key(data, passphrase)
        if not isinstance(key, Ed25519PrivateKey):
            raise KeyRingError(
                f"expected an Ed25519 private key, got {type(key).__name__}",
                code="not-ed25519",
            )
        return cls(key)

    def to_pem(self, passphrase: bytes | None = None) -> bytes:
        """Serialise as PKCS#8 PEM; encrypted (best available scheme) with a passphrase.

        Raises:
            KeyRingError: ``bad-passphrase`` for an empty or non-bytes passphrase.

        """
        return pkcs8_pem(self.private_key, passphrase)

    @property
    def public_key_bytes(self) -> bytes:
        """The raw 32-byte public key."""
        return self.private_key.public_key().public_bytes_raw()

    @property
    def public_key_multibase(self) -> str:
        """The Multikey ``publicKeyMultibase``: ``z`` + base58btc(``0xed01`` ‖ key)."""
        return encode_public_key_multibase(self.public_key_bytes)

    @property
    def verification_method(self) -> str:
        """The ``did:key`` verification method id: ``did:key:<mb>#<mb>``."""
        return did_key_verification_method(self.public_key_multibase)

    @property
    def cryptosuite(self) -> str:
        """``eddsa-jcs-2022``: a :class:`~handoffs.integrity.Signer` of that suite."""
        return EDDSA_JCS_2022.name

    def sign(self, data: bytes) -> bytes:
        """Return the 64-byte pure Ed25519 (RFC 8032) signature of ``data``."""
        return self.private_key.sign(data)

    def __repr__(self) -> str:
        return f"SigningKey(public_key_multibase={self.public_key_multibase!r})"


def pkcs8_pem(private_key: Any, passphrase: bytes | None) -> bytes:
    """A private key (of any suite) as PKCS#8 PEM, encrypted with the best available
    scheme when a passphrase is given (shared by the suites' ``to_pem``).

    Raises:
        KeyRingError: ``bad-passphrase`` for an empty or non-bytes passphrase.
    """
    from cryptography.hazmat.primitives import serialization  # PEM only, on demand

    encryption: serialization.KeySerializationEncryption
    if passphrase is None:
        encryption = serialization.NoEncryption()
    elif not isinstance(passphrase, bytes) or not passphrase:
        raise KeyRingError("a passphrase must be non-empty bytes", code="bad-passphrase")
    else:
        encryption = serialization.BestAvailableEncryption(passphrase)
    return bytes(private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption))
