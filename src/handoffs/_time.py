"""One rule for "expired at instant *t*", shared by everything that expires.

Receipts (``valid_until``), authority grants (``valid_until``), proofs (``expires``),
keys (``not_after`` for signing, ``revoked_at`` for verifying), handoff chains (their
earliest expiry) and proof freshness (``created`` + ``max_proof_age``) all name the
*first instant at which the thing is no longer valid*. So a thing valid until ``u`` is
valid at every ``t < u`` and expired at every ``t >= u``, including ``t == u``
exactly. Every check in the library goes through :func:`expired`; the exact-instant
tests in ``tests/test_instants.py`` pin it for each kind.
"""

from __future__ import annotations

from datetime import datetime, timedelta

__all__ = ["expired", "stale"]


def expired(until: datetime, now: datetime) -> bool:
    """Whether something valid until ``until`` is expired at ``now`` (``until <= now``)."""
    return until <= now


def stale(created: datetime, max_age: timedelta, now: datetime) -> bool:
    """Whether a proof made at ``created`` is too old at ``now``: its freshness expires
    at ``created + max_age`` under the one rule of :func:`expired` (computed as a
    difference, so ``timedelta.max`` cannot overflow).
    """
    return now - created >= max_age
