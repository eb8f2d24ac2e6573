"""The Ed25519 weak-key check, on libsodium.

Two Ed25519 verifiers may disagree on keys that cannot bind a signature to one signer:
libsodium (which the gate verifies with) refuses small-order and non-canonical public
keys, while OpenSSL's (``cryptography``) ref10-style verify accepts them. A key is
therefore checked once, at enrolment, with libsodium's
``crypto_core_ed25519_is_valid_point``: a canonically encoded point of the prime-order
subgroup, not of small order. A signature with a small-order ``R`` is refused by
libsodium's verify itself (``bad-signature``); ``tests/unit/test_ed25519_libraries.py``
documents every difference between the two libraries.
"""

from __future__ import annotations

from nacl.bindings import crypto_core_ed25519_is_valid_point

from handoffs._errors import KeyRingError, WeakKey

__all__ = ["check_public_key"]


def check_public_key(public_key: bytes, *, json_path: str = "$") -> None:
    """Refuse an Ed25519 public key that cannot bind a signature to a single signer.

    The key must be 32 bytes that libsodium reads as a canonically encoded point of
    the prime-order subgroup: not off the curve, not of small order (in any encoding),
    not a non-canonical spelling, and free of any small-order component (as every
    honestly generated key is). Returns nothing; raises on failure.

    Raises:
        KeyRingError: ``bad-key-length`` (not 32 bytes).
        WeakKey: ``weak-key`` (any other failure: the message says which points are
            refused).
    """
    if not isinstance(public_key, bytes | bytearray) or len(public_key) != 32:
        size = len(public_key) if isinstance(public_key, bytes | bytearray) else "no"
        raise KeyRingError(
            f"an Ed25519 public key is 32 bytes, got {size} bytes",
            code="bad-key-length",
            json_path=json_path,
        )
    if not crypto_core_ed25519_is_valid_point(bytes(public_key)):
        raise WeakKey(
            f"the public key {bytes(public_key).hex()} is not a canonically encoded "
            "edwards25519 point of prime order (it is off the curve, of small order, "
            "non-canonical or has a small-order component); no signature made with it "
            "would bind one signer",
            json_path=json_path,
        )
