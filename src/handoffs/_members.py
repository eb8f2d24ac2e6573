"""Shared internal (not public): a receipt's top-level members, by who may set them.

The governance service stamps the governance members, an encoder writes the content,
and the signing layer adds the envelope; content may never set a protected member.
Used by the contracts (building and composing receipts; ``GOVERNANCE_FIELDS`` is public
as :attr:`handoffs.contracts.Governance.FIELDS`), the receivers (what a model receiver
is shown), the lab (the message plans) and the adapters (what a handover may carry).
"""

from __future__ import annotations

from typing import Final

__all__ = ["CONTENT_FIELDS", "ENVELOPE_MEMBERS", "GOVERNANCE_FIELDS", "PROTECTED_MEMBERS"]

GOVERNANCE_FIELDS: Final = (
    "case_id",
    "sender",
    "receiver",
    "authority",
    "policy_version",
    "valid_until",
    "evidence_refs",
)
"""Top-level receipt members only the trusted governance service may set."""

CONTENT_FIELDS: Final = (
    "proposed_action",
    "decision_state",
    "uncertainty",
    "counterfactual_trigger",
    "notes",
)
"""Top-level receipt members an encoder (possibly a language model) writes."""

ENVELOPE_MEMBERS: Final = ("contract", "id", "grant", "proof")
"""Members that identify, authorise and secure a message rather than carry its payload."""

PROTECTED_MEMBERS: Final = frozenset(GOVERNANCE_FIELDS) | frozenset(ENVELOPE_MEMBERS)
"""Members content may never set: governance comes from the service, the envelope from
the signing layer."""
