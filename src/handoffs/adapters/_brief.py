"""What the next model reads after the gate accepted a receipt: the content, not the proofs.

The gate verified the receipt's grant and proof; the receiving model needs the decision
content and governance it acts on, and a reference (the receipt id, the contract, the
receiver that admitted it) to the verified receipt, which the application keeps. Handing
the model ~2 kB of grant and proof adds nothing it can check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from handoffs._json import dumps
from handoffs.receivers import Decision

__all__ = ["BRIEF_OMITS", "brief", "brief_text"]

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
