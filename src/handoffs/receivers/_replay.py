"""Replay protection: the store that remembers receipt ids, and the decision log.

Step (2) of the gate asks a :class:`ReplayStore` whether a receipt id was seen before;
a receipt is refused as ``replayed`` the second time. :class:`MemoryReplayStore`
holds ids in one process; :class:`~handoffs.receivers.SQLiteDecisionLog` and the
PostgreSQL store hold them across processes and restarts. A :class:`ReplayLog` is a
decision log that is also the replay store and writes the claim and the decision row
in one transaction.

An id may be forgotten once its receipt has expired (under the one rule of
:func:`handoffs._time.expired`: at its ``valid_until`` exactly), since the gate
refuses it as expired from then on anyway.
"""

from __future__ import annotations

import heapq
import threading
from datetime import datetime
from typing import Protocol, runtime_checkable

from handoffs._errors import InvalidArgument, ReplayedReceipt
from handoffs._logs import ReplayClaim, ReplayStoreError
from handoffs._time import expired
from handoffs.receivers._decision import Decision

__all__ = [
    "DecisionLog",
    "MemoryReplayStore",
    "ReplayLog",
    "ReplayStore",
    "ReplayedReceipt",
]


# --------------------------------------------------------------------- replay stores


@runtime_checkable
class ReplayStore(Protocol):
    """Remembers receipt ids until they expire (step 2's replay check)."""

    def first_seen(self, receipt_id: str, *, expires: datetime, now: datetime) -> bool:
        """Atomically record ``receipt_id``; True the first time, False for a replay.

        ``expires`` is the receipt's ``valid_until``: after it the receipt is refused
        as expired anyway, so the id may be forgotten.

        Raises:
            ReplayStoreError: the store cannot answer (the gate then fails closed).
        """
        ...


class MemoryReplayStore:
    """An in-process replay store with expiry (thread-safe).

    It forgets an id once its receipt has expired. When ``max_entries`` unexpired ids
    are held, a new id is refused with :class:`~handoffs.errors.ReplayStoreError` (fail
    closed) rather than forgetting one early. Use the SQLite store to hold across processes.
    """

    def __init__(self, *, max_entries: int = 1_000_000) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise InvalidArgument(f"max_entries must be a positive integer, got {max_entries!r}")
        self.max_entries = max_entries
        self._seen: dict[str, datetime] = {}
        self._expiry: list[tuple[datetime, str]] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._seen)

    def first_seen(self, receipt_id: str, *, expires: datetime, now: datetime) -> bool:
        """Atomically record ``receipt_id``; True the first time, False for a replay
        (the replay store protocol's ``first_seen``).

        Raises:
            ReplayStoreError: ``max_entries`` unexpired ids are held (fail closed).
        """
        with self._lock:
            if receipt_id in self._seen:
                return False
            expiry = self._expiry
            while expiry and expired(expiry[0][0], now):
                _, old = heapq.heappop(expiry)
                self._seen.pop(old, None)
            if len(self._seen) >= self.max_entries:
                raise ReplayStoreError(
                    f"the in-memory replay store holds {self.max_entries} unexpired ids"
                )
            self._seen[receipt_id] = expires
            heapq.heappush(expiry, (expires, receipt_id))
            return True


# ------------------------------------------------------------------------ decision log


@runtime_checkable
class DecisionLog(Protocol):
    """Where a gate appends one row per decision (see ``SQLiteDecisionLog``)."""

    def append(
        self,
        decision: Decision,
        *,
        digest: str | None,
        message_bytes: int,
        message: bytes | None,
        decided_at: datetime,
        proposed_action: str | None = None,
    ) -> None:
        """Record one decision durably, or raise (the gate then fails closed).

        ``proposed_action`` is the sender's proposal when the gate admitted the
        receipt (``None`` for a refusal): what ``handoffs log watch`` compares the
        decided action with.
        """
        ...


@runtime_checkable
class ReplayLog(ReplayStore, DecisionLog, Protocol):
    """A decision log that is also the replay store, with one transaction for both.

    When a gate's ``replay`` and ``log`` are the same object of this kind, the id of
    an admitted receipt is claimed by :meth:`record`, which writes the claim and the
    decision row in one transaction and finds a replay there (no read before it: one
    round trip per decision); a refusal is appended without a claim. A process killed
    in between leaves neither, so no genuine receipt id is ever "seen" without its
    decision. :meth:`seen` is for readers (audits, tests).
    """

    def seen(self, receipt_id: str) -> bool:
        """True if ``receipt_id`` was recorded before (a read; it claims nothing).

        Raises:
            ReplayStoreError: the store cannot answer (the gate then fails closed).
        """
        ...

    def record(
        self,
        decision: Decision,
        *,
        claim: ReplayClaim,
        digest: str | None,
        message_bytes: int,
        message: bytes | None,
        decided_at: datetime,
        proposed_action: str | None = None,
    ) -> bool:
        """Claim ``claim.receipt_id`` and append ``decision`` in one transaction.

        Returns False, writing nothing, when the id was already claimed (another
        process admitted the receipt first): the caller then records a replay.

        Raises:
            DecisionLogError: nothing was written (the gate then fails closed).
        """
        ...
