"""The ``eddsa-jcs-2022`` cryptosuite algorithms exactly as the W3C Recommendation states them.

:func:`create_proof` and :func:`verify_proof` are ``#create-proof-eddsa-jcs-2022`` and
``#verify-proof-eddsa-jcs-2022``, ``@context`` handling included; they reproduce the
published test vectors byte for byte. The hashing and ``proofValue`` decoding they share
with the plain-JSON profile (:mod:`handoffs.integrity._proofs`, the safe recipe) live
here once.

.. warning::
   These functions check one signature and nothing else: no key ring, no key validity
   window, no purpose, no expiry, no chain. Use :func:`handoffs.integrity.verify` unless
   you are implementing a different profile.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping
from typing import Any, Final

from handoffs._errors import InvalidArgument, KeyRingError, ProofError
from handoffs._json import canonical_bytes
from handoffs.integrity._base58 import _b58decode_or_none, b58encode
from handoffs.integrity._signer import Signer
from handoffs.integrity._suites import (
    EDDSA_JCS_2022,
    Cryptosuite,
    cryptosuite,
    registered_cryptosuites,
)

__all__ = ["CRYPTOSUITE", "PROOF_TYPE", "create_proof", "verify_proof"]

#: The only accepted proof ``type``.
PROOF_TYPE: Final = "DataIntegrityProof"
#: The only accepted ``cryptosuite``.
CRYPTOSUITE: Final = "eddsa-jcs-2022"
# Longest base58 spelling of 64 bytes is 88 characters; plus the multibase "z".
_PROOF_VALUE_MAX_CHARS: Final = 89
# XMLSCHEMA11-2 dateTime lexical form (the cryptosuite's check on ``created``).
_XSD_DATETIME: Final = re.compile(
    r"-?\d{4,}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})?", re.ASCII
)


def _proof_config(
    document: Mapping[str, Any], options: Mapping[str, Any], *, copy_context: bool = True
) -> dict[str, Any]:
    """Proof configuration: the options plus the document's ``@context`` (steps 1-2)."""
    config = copy.deepcopy(dict(options))
    config.pop("proofValue", None)
    if copy_context and "@context" in document:
        config["@context"] = copy.deepcopy(document["@context"])
    return config


def _hash_data(canonical_config: bytes, canonical_document: bytes) -> bytes:
    """``SHA-256(canonicalProofConfig) ‖ SHA-256(canonicalDocument)`` (64 bytes)."""
    return hashlib.sha256(canonical_config).digest() + hashlib.sha256(canonical_document).digest()


def _without_proof(document: Mapping[str, Any]) -> dict[str, Any]:
    unsecured = dict(document)  # a C-level copy, then one deletion
    unsecured.pop("proof", None)
    return unsecured


def _check_suite(config: Mapping[str, Any], *, path: str) -> Cryptosuite:
    if config.get("type") != PROOF_TYPE:
        raise ProofError(
            f"expected proof type {PROOF_TYPE!r}, got {config.get('type')!r}",
            code="wrong-proof-type",
            json_path=f"{path}.type",
        )
    return cryptosuite(config.get("cryptosuite"), json_path=f"{path}.cryptosuite")


def _signature_bytes(proof_value: object, *, path: str) -> bytes:
    """Decode ``proofValue``: ``z`` + canonical base58btc of exactly 64 bytes."""
    if not isinstance(proof_value, str):
        raise ProofError(
            f"proofValue must be a string, got {type(proof_value).__name__}",
            code="proof-malformed",
            json_path=f"{path}.proofValue",
        )
    if not proof_value.startswith("z"):
        raise ProofError(
            f"proofValue must be multibase base58btc (prefix 'z'), got {proof_value[:16]!r}",
            code="proof-malformed",
            json_path=f"{path}.proofValue",
        )
    if len(proof_value) > _PROOF_VALUE_MAX_CHARS:
        raise ProofError(
            f"proofValue is {len(proof_value)} characters; a 64-byte signature needs at most "
            f"{_PROOF_VALUE_MAX_CHARS}",
            code="proof-malformed",
            json_path=f"{path}.proofValue",
        )
    signature = _b58decode_or_none(proof_value[1:])
    if signature is None:
        raise ProofError(
            "proofValue is not canonical base58btc", code="proof-malformed",
            json_path=f"{path}.proofValue",
        )
    if len(signature) != 64:
        raise ProofError(
            f"proofValue must decode to a 64-byte signature, got {len(signature)} bytes",
            code="proof-malformed",
            json_path=f"{path}.proofValue",
        )
    return signature


def create_proof(
    document: Mapping[str, Any],
    options: Mapping[str, Any],
    key: Signer,
    *,
    copy_context: bool = True,
) -> dict[str, Any]:
    """Create an ``eddsa-jcs-2022`` proof of ``document`` (W3C Create Proof algorithm).

    ``options`` are the proof options (``type``, ``cryptosuite``, ``created``,
    ``verificationMethod``, ``proofPurpose``, ...). If ``document`` has ``@context``,
    it is copied into the proof (step 2, which the Recommendation "strongly advises";
    ``copy_context=False`` skips it, as pre-2025 producers did). Any ``proof`` member
    of ``document`` is ignored: the unsecured document is signed. Returns the proof,
    ``proofValue`` included; the document is not modified.

    .. warning:: Low-level. Prefer :func:`handoffs.integrity.sign`, which enforces the
       receipt profile.

    Raises:
        ProofError: ``wrong-proof-type``, ``wrong-cryptosuite`` or ``proof-malformed``
            (``created`` not an XML Schema dateTime, ``proofValue`` in the options).
        MalformedJSON: the document or options cannot be canonicalised.

    """
    if "proofValue" in options:
        raise ProofError(
            "proof options must not contain proofValue",
            code="proof-malformed",
            json_path="$.proof.proofValue",
        )
    config = _proof_config(document, options, copy_context=copy_context)
    suite = _check_suite(config, path="$.proof")
    if not isinstance(key, Signer):
        raise InvalidArgument(f"key must be a Signer (a SigningKey, say), got {type(key).__name__}")
    created = config.get("created")
    if created is not None and not (isinstance(created, str) and _XSD_DATETIME.fullmatch(created)):
        raise ProofError(
            f"created must be an XML Schema dateTime, got {created!r}",
            code="proof-malformed",
            json_path="$.proof.created",
        )
    message = _hash_data(canonical_bytes(config), canonical_bytes(_without_proof(document)))
    config["proofValue"] = "z" + b58encode(suite.sign(key, message))
    return config


def verify_proof(
    document: Mapping[str, Any], proof: Mapping[str, Any], public_key_bytes: bytes
) -> None:
    """Verify one ``eddsa-jcs-2022`` proof (W3C Verify Proof algorithm); raise on failure.

    ``document`` is the secured document (its ``proof`` member, if any, is removed
    before hashing) and ``proof`` the proof to check. If the proof has ``@context``, the
    document's ``@context`` must start with it, in order, and the proof's ``@context``
    replaces the document's for hashing (spec step 4). The public key is checked
    with ``check_public_key`` first.

    .. warning:: Low-level. It checks the signature only; use
       :func:`handoffs.integrity.verify` for the key ring, validity windows, purposes,
       expiry and proof chains.

    Raises:
        ProofError: ``wrong-proof-type``, ``wrong-cryptosuite``, ``proof-malformed``,
            ``context-mismatch``, ``bad-key`` or ``bad-signature``.

    """
    if not isinstance(proof, Mapping):
        raise ProofError(
            f"a proof is a JSON object, got {type(proof).__name__}",
            code="proof-malformed",
            json_path="$.proof",
        )
    named = proof.get("cryptosuite")
    try:
        (cryptosuite(named) if named in registered_cryptosuites() else EDDSA_JCS_2022
         ).check_public_key(bytes(public_key_bytes), json_path="$")
    except KeyRingError as exc:
        raise ProofError(
            f"unusable public key: {exc.message}", code="bad-key", json_path="$.proof"
        ) from exc
    suite = _check_suite(proof, path="$.proof")
    signature = _signature_bytes(proof.get("proofValue"), path="$.proof")
    unsecured = _without_proof(document)
    if "@context" in proof:
        _check_context_prefix(document, proof["@context"])
        unsecured["@context"] = proof["@context"]
    config = {key: value for key, value in proof.items() if key != "proofValue"}
    message = _hash_data(canonical_bytes(config), canonical_bytes(unsecured))
    suite.verify(bytes(public_key_bytes), signature, message, json_path="$.proof.proofValue",
                 who="the given key")


def _check_context_prefix(document: Mapping[str, Any], proof_context: object) -> None:
    def as_list(value: object) -> list[Any]:
        return list(value) if isinstance(value, list) else [value]

    expected = as_list(proof_context)
    actual = as_list(document.get("@context")) if "@context" in document else []
    if actual[: len(expected)] != expected:
        raise ProofError(
            "the document's @context does not start with the proof's @context",
            code="context-mismatch",
            json_path="$.@context",
        )
