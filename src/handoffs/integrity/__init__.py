"""Integrity: keys, cryptosuites and signing, the part every other part builds on.

Nothing here knows contracts, receipts or receivers. The public face:

- **keys**: :class:`SigningKey` (Ed25519, in memory), :class:`P256SigningKey`, the
  trust store :class:`KeyRing` and its entries, filled by hand or from a
  pinned JWKS (:meth:`KeyRing.from_jwks`, :meth:`KeyRing.from_agent_card`);
- **suites**: ``eddsa-jcs-2022`` (Ed25519) and ``ecdsa-jcs-2019`` (P-256); a key's
  Multikey header picks its suite, so a message never chooses the algorithm;
- **signing**: the :class:`Signer` protocol and :class:`CallableSigner`, for a key
  that lives in a KMS or an HSM; :func:`load_signing_key` reads a PEM of either
  suite, and :func:`registered_cryptosuites` names the suites;
- **proofs**: :func:`sign` and :func:`verify`, W3C Data Integrity proofs over a
  plain-JSON document (the profile receipts, grants, handoff chains and release
  artefacts use), each proof that passed returned as a :class:`VerifiedProof`;
- **errors**: :class:`KeyRingError` (a malformed ring or key, or, with code
  ``unknown-key``, no trusted key for a verification method).

Receipts and authority grants, signed with these proofs, are :mod:`handoffs.contracts`.
"""

from __future__ import annotations

from handoffs._errors import KeyRingError
from handoffs._moved import moved_from
from handoffs.integrity._context import ACCEPTED_CONTEXTS
from handoffs.integrity._keyring import KeyEntry, KeyRing
from handoffs.integrity._keys import SigningKey
from handoffs.integrity._proofs import VerifiedProof, sign, verify
from handoffs.integrity._signer import (
    CallableSigner,
    P256SigningKey,
    Signer,
    load_signing_key,
)
from handoffs.integrity._suites import Cryptosuite, registered_cryptosuites

__all__ = [
    "ACCEPTED_CONTEXTS",
    "CallableSigner",
    "Cryptosuite",
    "KeyEntry",
    "KeyRing",
    "KeyRingError",
    "P256SigningKey",
    "Signer",
    "SigningKey",
    "VerifiedProof",
    "load_signing_key",
    "registered_cryptosuites",
    "sign",
    "verify",
]

# A name that left this face since 0.1.0 raises an ImportError naming its new place.
__getattr__ = moved_from(__name__)
