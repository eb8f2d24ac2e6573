"""Ed25519 verification on libsodium (PyNaCl).

libsodium verifies in about half the CPU time of OpenSSL's Ed25519 (``cryptography``)
on this library's receipts. The two differ on inputs that cannot bind a signature to
one signer (see :mod:`handoffs.integrity._edwards25519`): weak keys are refused at
enrolment, and libsodium's verify refuses a small-order ``R`` that OpenSSL would
accept. ``cryptography`` keeps generating keys, reading PEM and signing.
"""

from __future__ import annotations

from typing import Final

from nacl.bindings import crypto_sign_open
from nacl.exceptions import BadSignatureError

from handoffs._errors import ProofError

__all__ = ["SIGNATURE_BYTES", "verify_ed25519"]

SIGNATURE_BYTES: Final = 64


def verify_ed25519(public_key: bytes, signature: bytes, message: bytes, *, json_path: str,
                   who: str) -> None:
    """Verify a 64-byte Ed25519 ``signature`` of ``message`` under a 32-byte
    ``public_key`` that :func:`~handoffs.integrity._edwards25519.check_public_key`
    accepted (at enrolment); return nothing or raise.

    Raises:
        ProofError: ``bad-signature`` when it does not verify (a small-order ``R``
            included, which OpenSSL would accept); ``json_path`` names the
            ``proofValue``.
    """
    try:
        crypto_sign_open(signature + message, public_key)
    except BadSignatureError as exc:
        raise ProofError(f"the signature does not verify under {who}",
                         code="bad-signature", json_path=json_path) from exc
