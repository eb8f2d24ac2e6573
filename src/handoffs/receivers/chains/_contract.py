"""The handoff-chain contract's vocabulary: its name and version, the roles a hop may
claim, the wire bounds and identifier patterns, and the check of the ``contract``
member every message names.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Final

from handoffs._errors import UnknownContract
from handoffs._schemas import DIGEST, IDENT, URN_UUID, URN_UUID_PATTERN

__all__ = ["HANDOFF_CHAIN_CONTRACT", "HANDOFF_CHAIN_SCHEMA_ID", "HOP_PROOF_PURPOSE", "HopRole"]


_CONTRACT_NAME: Final = "handoff-chain"
_CONTRACT_VERSION: Final = "2.0.0"
_RETIRED: Final = {
    f"{_CONTRACT_NAME}/1.0.0": "its envelope id is not signed, so it cannot be protected "
                               "against replay; re-issue the chain under",
}
HANDOFF_CHAIN_CONTRACT: Final = f"{_CONTRACT_NAME}/{_CONTRACT_VERSION}"
"""The ``contract`` member of a handoff chain and of each of its hops."""
HANDOFF_CHAIN_SCHEMA_ID: Final = f"urn:handoffs:schema:{_CONTRACT_NAME}:{_CONTRACT_VERSION}"
"""The stable ``$id`` of the handoff-chain JSON Schema."""
HOP_PROOF_PURPOSE: Final = "assertionMethod"
"""The ``proofPurpose`` of every hop proof, approvals included."""

_MAX_WIRE_HOPS: Final = 32  # the schema's bound; a receiver's max_hops is at most this
_MAX_HOP_PROOFS: Final = 8
_MAX_TRANSFORMATION: Final = 500
_IDENT: Final = IDENT
_DIGEST: Final = DIGEST
_CHAIN_ID: Final = URN_UUID
_CHAIN_ID_PATTERN: Final = URN_UUID_PATTERN


class HopRole(enum.Enum):
    """The role a hop's signer claims; the key ring decides whether it holds it.

    Along a chain the roles appear in this order: any number of investigators, then
    at most one proposer, one approver and one executor hop.
    """

    INVESTIGATOR = "investigator"
    PROPOSER = "proposer"
    APPROVER = "approver"
    EXECUTOR = "executor"

    @property
    def rank(self) -> int:
        """Position in the chain's role order (investigator first)."""
        return _RANK[self]


_RANK: Final = {role: index for index, role in enumerate(HopRole)}


def _check_contract_member(doc: Mapping[str, Any]) -> None:
    named = doc.get("contract")
    if not isinstance(named, str):
        raise UnknownContract(
            "the message names no contract", code="no-contract", json_path="$.contract"
        )
    if named != HANDOFF_CHAIN_CONTRACT:
        retired = _RETIRED.get(named)
        why = f" ({retired} {HANDOFF_CHAIN_CONTRACT!r})" if retired else ""
        raise UnknownContract(
            f"unknown contract {named!r}; this reads {HANDOFF_CHAIN_CONTRACT!r} only{why}",
            json_path="$.contract",
        )
