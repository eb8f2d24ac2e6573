"""Shared internal (not public): the reason-code groups one part emits and another counts.

* :data:`TRANSIENT_CODES`: the codes of a failed model call in :mod:`handoffs.receivers`
  (``ModelReceiver``); the lab (``lab._memo``, ``lab._minimal``) never memoises or
  caches a decision that carries one, since a retry may succeed.
* :data:`EXPIRED_CODES`: the gate's expiry refusals; the decision logs (the receivers'
  SQLite log, the service's PostgreSQL store) and the service's metrics count them as
  the essay's "expired messages".
"""

from __future__ import annotations

from typing import Final

__all__ = ["EXPIRED_CODES", "TRANSIENT_CODES"]

TRANSIENT_CODES: Final = frozenset({"model-error", "model-timeout", "budget-exceeded"})
"""Reason codes of failed calls: never memoised or cached (a retry may succeed)."""

EXPIRED_CODES: Final = ("receipt-expired", "proof-expired", "grant-expired")
"""Reason codes of a message refused as expired (receipt, proof or grant)."""
