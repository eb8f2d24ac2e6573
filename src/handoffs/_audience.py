"""Shared internal (not public): whom a message is addressed to, and until when.

:func:`check_addressed` is the one place ``wrong-audience`` and ``receipt-expired`` are
raised, and :data:`ANY_AUDIENCE` the explicit choice not to check the audience. Used by
the contracts (``Receipt.verify``; ``ANY_AUDIENCE`` is public as
``handoffs.contracts.ANY_AUDIENCE``), the receivers (the gate under ``UnsafeNoProofs``)
and the lab (its unsigned message forms).
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from handoffs._errors import ProofError
from handoffs._time import expired, format_time

__all__ = ["ANY_AUDIENCE", "AUDIENCE_TYPES", "AnyAudience", "check_addressed"]


class AnyAudience:
    """The type of :data:`~handoffs.contracts.ANY_AUDIENCE` (a singleton)."""

    __slots__ = ()
    _instance: AnyAudience | None = None

    def __new__(cls) -> AnyAudience:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ANY_AUDIENCE"

    def __reduce__(self) -> str:
        return "ANY_AUDIENCE"


ANY_AUDIENCE: Final = AnyAudience()
AUDIENCE_TYPES: Final = (str, AnyAudience)  # a tuple: a union is built at every call
"""The explicit choice not to check a receipt's audience (``audience=ANY_AUDIENCE``):
for an auditor or a relay that verifies on someone else's behalf. A receiver always
names itself instead; there is no silent default.
"""


def check_addressed(receiver: str | None, valid_until: datetime | None,
                    audience: str | AnyAudience, now: datetime | None) -> None:
    """A message names ``receiver`` as its audience and is valid until ``valid_until``:
    it must be addressed to ``audience`` (unless :data:`ANY_AUDIENCE`) and not expired
    at ``now`` (unless ``now`` is ``None``). The one place ``wrong-audience`` and
    ``receipt-expired`` are raised: for verified receipts, for receipts under
    :class:`~handoffs.receivers.UnsafeNoProofs`, and for the lab's unsigned forms.

    Raises:
        ProofError: ``wrong-audience`` or ``receipt-expired``.
    """
    if audience is not ANY_AUDIENCE and receiver != audience:
        raise ProofError(f"addressed to {receiver!r}, this receiver is {audience!r}",
                         code="wrong-audience", json_path="$.receiver")
    if now is None or valid_until is None:
        return
    if expired(valid_until, now):
        raise ProofError(f"the message expired at {format_time(valid_until)}",
                         code="receipt-expired", json_path="$.valid_until")
