"""The Draft 2020-12 JSON Schema of ``handoff-chain/2.0.0`` and validation against it.

A handoff chain is not a :class:`~handoffs.contracts.Contract` (it has no decision
state), so :meth:`Contract.json_schema() <handoffs.contracts.Contract.json_schema>`
cannot build its schema; it is written here from the same pieces that builder uses
(the dialect, the identifier, time and digest patterns, the proof ``$def`` and the
violation wording).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from handoffs._errors import MalformedJSON, Violation
from handoffs._schemas import (
    DIALECT,
    DIGEST_PATTERN,
    IDENT_PATTERN,
    TIME_PATTERN,
    describe,
    proof_schema,
)
from handoffs._time import parse_time
from handoffs.contracts import Authority
from handoffs.receivers.chains._contract import (
    _CHAIN_ID,
    _CHAIN_ID_PATTERN,
    _CONTRACT_NAME,
    _CONTRACT_VERSION,
    _DIGEST,
    _IDENT,
    _MAX_HOP_PROOFS,
    _MAX_TRANSFORMATION,
    _MAX_WIRE_HOPS,
    HANDOFF_CHAIN_CONTRACT,
    HANDOFF_CHAIN_SCHEMA_ID,
    HopRole,
)

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

__all__ = ["handoff_chain_schema"]


def handoff_chain_schema() -> dict[str, Any]:
    """Generate the Draft 2020-12 JSON Schema of ``handoff-chain/2.0.0`` messages.

    Closed (``additionalProperties: false``) at every level, a ``description`` on
    every property, and the stable ``$id`` :data:`HANDOFF_CHAIN_SCHEMA_ID`. The
    checked-in copy is ``schemas/handoff-chain/2.0.0.json`` (``1.0.0.json`` stays as
    the record of the retired version).
    """
    ident = {"type": "string", "pattern": IDENT_PATTERN, "maxLength": 128}
    chain_id = {"type": "string", "pattern": _CHAIN_ID_PATTERN, "maxLength": 45}
    time = {"type": "string", "pattern": TIME_PATTERN}
    hop: dict[str, Any] = {
        "type": "object",
        "description": "One signed transformation: who sent what to whom, under which "
                       "authority and until when, derived from which parent hop.",
        "additionalProperties": False,
        "required": [
            "contract", "chain_id", "hop", "case_id", "role", "sender", "receiver",
            "authority", "valid_until", "derived_from", "transformation", "proof",
        ],
        "properties": {
            "contract": {"const": HANDOFF_CHAIN_CONTRACT,
                         "description": "Binds the signed hop to this contract version."},
            "chain_id": {**chain_id, "description": "The envelope id of the chain this hop "
                                                    "was signed for: every hop signs it, so "
                                                    "the envelope id cannot be changed and "
                                                    "a hop cannot move to another chain."},
            "hop": {"type": "integer", "minimum": 0, "maximum": _MAX_WIRE_HOPS - 1,
                    "description": "Position of the hop in the chain, from 0."},
            "case_id": {**ident, "description": "The case the chain is about; equal on "
                                                "every hop and on the envelope."},
            "role": {"enum": [role.value for role in HopRole],
                     "description": "Role the signer claims. The receiver checks it against "
                                    "the key ring at signing time, never trusts it."},
            "sender": {**ident, "description": "Identity of the signer; must equal the key "
                                               "ring's controller of the signing key."},
            "receiver": {**ident, "description": "The one agent this hop is addressed to; "
                                                 "the sender of the next hop."},
            "authority": {"enum": [a.value for a in Authority],
                          "description": "ADVISE: the receiver decides. DECIDE: execute the "
                                         "action; allowed only under an approval of the exact "
                                         "proposal."},
            "action": {**ident, "description": "The action proposed or decided. Required on "
                                               "a proposer hop and on a DECIDE hop."},
            "valid_until": {**time, "description": "After this instant (UTC) the hop must not "
                                                   "be acted on; never later than the "
                                                   "parent's."},
            "derived_from": {
                "description": "The parent hop, pinned by the SHA-256 of its RFC 8785 form "
                               "with its proofs; null only on hop 0.",
                "anyOf": [
                    {"type": "null"},
                    {"type": "object", "additionalProperties": False, "required": ["digest"],
                     "properties": {"digest": {
                         "type": "string", "pattern": DIGEST_PATTERN,
                         "description": "sha256 of the canonical parent hop."}}},
                ],
            },
            "transformation": {"type": "string", "minLength": 1,
                               "maxLength": _MAX_TRANSFORMATION,
                               "description": "What this hop changed, in a short sentence. "
                                              "Untrusted text: it never sets role, authority "
                                              "or validity."},
            "proof": {
                "description": "The sender's Data Integrity proof, then any approvals "
                               "chained to it with previousProof.",
                "anyOf": [{"$ref": "#/$defs/proof"},
                          {"type": "array", "items": {"$ref": "#/$defs/proof"},
                           "minItems": 1, "maxItems": _MAX_HOP_PROOFS}],
            },
        },
        "allOf": [
            {"if": {"required": ["authority"], "properties": {"authority": {"const": "DECIDE"}}},
             "then": {"required": ["action"]}},
            {"if": {"required": ["role"], "properties": {"role": {"const": "proposer"}}},
             "then": {"required": ["action"]}},
        ],
    }
    return {
        "$schema": DIALECT,
        "$id": HANDOFF_CHAIN_SCHEMA_ID,
        "title": f"{_CONTRACT_NAME} {_CONTRACT_VERSION} multi-hop handoff",
        "description": "A case handed across agents: every hop is a signed transformation "
                       "derived from the previous one; approvals are proofs chained to the "
                       "proposal.",
        "type": "object",
        "additionalProperties": False,
        "required": ["contract", "id", "case_id", "hops"],
        "properties": {
            "contract": {"const": HANDOFF_CHAIN_CONTRACT,
                         "description": "Contract name and version this message follows."},
            "id": {**chain_id, "description": "Unique chain identifier, signed by every hop "
                                              "as its chain_id; receivers claim it (with "
                                              "the number of hops) against replay."},
            "case_id": {**ident, "description": "The case the chain is about; signed by "
                                                "every hop as its case_id."},
            "hops": {"type": "array", "minItems": 1, "maxItems": _MAX_WIRE_HOPS,
                     "items": {"$ref": "#/$defs/hop"},
                     "description": "The hops in order, hop 0 first."},
        },
        "$defs": {"hop": hop, "proof": proof_schema()},
    }


_validator_cache: list[Draft202012Validator] = []


def _validator() -> Draft202012Validator:
    if not _validator_cache:  # python-jsonschema, imported on the first chain
        from jsonschema import Draft202012Validator

        _validator_cache.append(Draft202012Validator(handoff_chain_schema()))
    return _validator_cache[0]


def _schema_violations(doc: Any) -> list[Violation]:
    from jsonschema.exceptions import relevance

    errors = sorted(_validator().iter_errors(doc), key=relevance)
    return [
        Violation(
            json_path=error.json_path,
            schema_path="/".join(str(p) for p in error.absolute_schema_path),
            message=describe(error),
            validator=str(error.validator),
        )
        for error in errors
    ]


def _typed_violations(doc: Mapping[str, Any]) -> list[Violation]:
    """Checks the schema's ECMA patterns cannot make exact (e.g. a trailing newline)."""
    found: list[Violation] = []

    def need(ok: bool, path: str, message: str) -> None:
        if not ok:
            found.append(Violation(path, "", message, "typed"))

    need(bool(_CHAIN_ID.fullmatch(doc["id"])), "$.id", f"not a urn:uuid: {doc['id']!r}")
    need(bool(_IDENT.fullmatch(doc["case_id"])), "$.case_id", "not a valid identifier")
    for k, raw in enumerate(doc["hops"]):
        base = f"$.hops[{k}]"
        for name in ("case_id", "sender", "receiver", "action"):
            if name in raw:
                need(bool(_IDENT.fullmatch(raw[name])), f"{base}.{name}",
                     f"not a valid identifier: {raw[name]!r}")
        try:
            parse_time(raw["valid_until"], json_path=f"{base}.valid_until")
        except MalformedJSON as exc:
            found.append(Violation(exc.json_path, "", exc.message, "typed"))
        parent = raw["derived_from"]
        if parent is not None:
            need(bool(_DIGEST.fullmatch(parent["digest"])), f"{base}.derived_from.digest",
                 f"not a sha256 digest: {parent['digest']!r}")
    return found
