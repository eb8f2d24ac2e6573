"""Keys and the key ring as the contracts layer names them (they live in
:mod:`handoffs.integrity`); the names stay importable from here, where tests, docs and
earlier releases import them.
"""

from __future__ import annotations

from handoffs.integrity._base58 import b58decode, b58encode
from handoffs.integrity._edwards25519 import check_public_key
from handoffs.integrity._keyring import (
    DEFAULT_PURPOSES,
    KEY_RING_SCHEMA_VERSION,
    KeyEntry,
    KeyRing,
    revoked,
)
from handoffs.integrity._keys import (
    SigningKey,
    decode_public_key_multibase,
    decode_secret_key_multibase,
    did_key_verification_method,
    encode_public_key_multibase,
    encode_secret_key_multibase,
)

__all__ = [
    "DEFAULT_PURPOSES",
    "KEY_RING_SCHEMA_VERSION",
    "KeyEntry",
    "KeyRing",
    "SigningKey",
    "b58decode",
    "b58encode",
    "check_public_key",
    "decode_public_key_multibase",
    "decode_secret_key_multibase",
    "did_key_verification_method",
    "encode_public_key_multibase",
    "encode_secret_key_multibase",
    "revoked",
]
