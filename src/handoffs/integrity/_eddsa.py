"""Ed25519 verification on libsodium (PyNaCl), with the weak inputs refused first.

libsodium verifies in about half the CPU time of OpenSSL's Ed25519 (``cryptography``)
on this library's receipts. The two differ on inputs that cannot bind a signature to
one signer (see :mod:`handoffs.integrity._edwards25519`); :func:`verify_ed25519`
refuses those before verifying, so either library would give the same answer on
whatever it lets through. ``cryptography`` keeps generating keys, reading PEM and
signing.
"""

from __future__ import annotations

from typing import Final

from nacl.bindings import crypto_sign_open
from nacl.exceptions import BadSignatureError

from handoffs._errors import ProofError
from handoffs.integrity._edwards25519 import SMALL_ORDER_ENCODINGS

__all__ = ["SIGNATURE_BYTES", "verify_ed25519"]

SIGNATURE_BYTES: Final = 64


def verify_ed25519(public_key: bytes, signature: bytes, message: bytes, *, json_path: str,
                   who: str) -> None:
    """Verify a 64-byte Ed25519 ``signature`` of ``message`` under a 32-byte
    ``public_key`` that :func:`~handoffs.integrity._edwards25519.check_public_key`
    accepted (at enrolment); return nothing or raise.

    Raises:
        ProofError: ``weak-signature`` when ``R`` is a small-order point (OpenSSL would
            accept such a signature where libsodium refuses it), ``bad-signature``
            when it does not verify; ``json_path`` names the ``proofValue``.
    """
    if signature[:32] in SMALL_ORDER_ENCODINGS:
        raise ProofError(
            f"the signature under {who} has a small-order R; it binds no signer",
            code="weak-signature", json_path=json_path)
    try:
        crypto_sign_open(signature + message, public_key)
    except BadSignatureError as exc:
        raise ProofError(f"the signature does not verify under {who}",
                         code="bad-signature", json_path=json_path) from exc
