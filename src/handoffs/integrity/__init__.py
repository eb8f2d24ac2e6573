"""Integrity: keys, cryptosuites and signing, the part every other part builds on.

Nothing here knows contracts, receipts or receivers. The public face:

- **keys**: :class:`SigningKey` (Ed25519, in memory), :class:`P256SigningKey`, the
  trust store :class:`KeyRing` and its :class:`KeyEntry`;
- **suites**: the :class:`Cryptosuite` protocol, :func:`cryptosuite` (the registry)
  and :func:`registered_cryptosuites`: ``eddsa-jcs-2022`` and ``ecdsa-jcs-2019``;
- **signing**: the :class:`Signer` protocol and :class:`CallableSigner`, for a key
  that lives in a KMS or an HSM.

Proofs over documents (``sign``, ``verify``) and receipts stay in
:mod:`handoffs.contracts`.
"""

from __future__ import annotations

from handoffs.integrity._keyring import KeyEntry, KeyRing
from handoffs.integrity._keys import SigningKey
from handoffs.integrity._signer import CallableSigner, P256SigningKey, Signer
from handoffs.integrity._suites import Cryptosuite, cryptosuite, registered_cryptosuites

__all__ = [
    "CallableSigner",
    "Cryptosuite",
    "KeyEntry",
    "KeyRing",
    "P256SigningKey",
    "Signer",
    "SigningKey",
    "cryptosuite",
    "registered_cryptosuites",
]
