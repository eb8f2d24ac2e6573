"""What the next model reads: after an ACCEPT, the content, not the proofs; after a
refusal, who refused and why.

The gate verified the receipt's grant and proof; the receiving model needs the decision
content and governance it acts on, and a reference (the receipt id, the contract, the
receiver that admitted it) to the verified receipt, which the application keeps. Handing
the model ~2 kB of grant and proof adds nothing it can check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from handoffs._json import dumps
from handoffs.adapters._handover import Handover
from handoffs.receivers import Decision

__all__ = ["BRIEF_OMITS", "brief", "brief_text", "refusal_text"]

BRIEF_OMITS: Final = frozenset({"grant", "proof", "id", "contract"})
"""Receipt members a brief leaves out (``id`` and ``contract`` move to its reference)."""


def brief(decision: Decision, receipt: Mapping[str, Any]) -> dict[str, Any]:
    """The brief of an admitted ``receipt``: ``{"receipt": reference, **content}``.

    The reference names the verified receipt (``id``, ``contract``) and who admitted it
    (``admitted_by``); the rest is the receipt without its grant and proof.
    """
    reference = {"id": decision.receipt_id or receipt.get("id"),
                 "contract": decision.contract or receipt.get("contract"),
                 "admitted_by": decision.receiver}
    return {"receipt": reference,
            **{key: value for key, value in receipt.items() if key not in BRIEF_OMITS}}


def brief_text(decision: Decision, receipt: Mapping[str, Any]) -> str:
    """:func:`brief` as compact JSON text (a prompt, a state value)."""
    return dumps(brief(decision, receipt))


def refusal_text(handover: Handover) -> str:
    """One line for a refused handover: who refused, each reason (code, JSON path and
    message) and the fail-closed action, e.g. ``handoff refused by the gate:
    bad-signature @ $.proof: ...; action ESCALATE``.
    """
    decision = handover.decision
    return (f"handoff refused by the {handover.refused_by}: "
            + "; ".join(f"{r.code} @ {r.json_path}: {r.message}" for r in decision.reasons)
            + f"; action {decision.action}")
