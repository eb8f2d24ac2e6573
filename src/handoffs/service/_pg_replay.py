"""The PostgreSQL store's replay store: claim a receipt id once across every replica,
look one up, and prune ids past their own validity by the server's clock.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from handoffs._logs import DecisionLogError, ReplayStoreError
from handoffs.service._pg_connection import Connection

if TYPE_CHECKING:
    import psycopg

__all__ = ["ReplayRows"]

_FIRST_SEEN: Final = """
INSERT INTO handoffs.seen (receipt_id, first_seen, expires, pid)
VALUES (%s, %s, %s, %s) ON CONFLICT (receipt_id) DO NOTHING
"""
_PRUNE: Final = "DELETE FROM handoffs.seen WHERE expires < now() - %s::interval"


class ReplayRows(Connection):
    """The ``seen`` table: the receipt ids claimed so far."""

    retain: timedelta
    prune_every: int

    def _maybe_prune(self, conn: psycopg.Connection[Any]) -> None:
        self._writes += 1
        if self._writes % self.prune_every == 0:
            conn.execute(_PRUNE, (self.retain,))

    def prune(self) -> int:
        """Prune now: forget ids whose own validity ended ``retain`` before the
        server's ``now()``. Returns how many were forgotten.
        """
        return self._run(lambda conn: conn.execute(_PRUNE, (self.retain,)).rowcount,
                         what="prune expired ids")

    def first_seen(self, receipt_id: str, *, expires: datetime, now: datetime) -> bool:
        """Atomically record ``receipt_id``; True the first time on any replica.

        Raises:
            ReplayStoreError: the server could not answer (fail closed).
        """

        def body(conn: psycopg.Connection[Any]) -> bool:
            self._maybe_prune(conn)
            cursor = conn.execute(_FIRST_SEEN, (receipt_id, now, expires, os.getpid()))
            return cursor.rowcount == 1

        try:
            return self._run(body, what="record a receipt id")
        except DecisionLogError as exc:
            raise ReplayStoreError(exc.message) from exc

    def seen(self, receipt_id: str) -> bool:
        """True if ``receipt_id`` was recorded before (claims nothing).

        Raises:
            ReplayStoreError: the server could not answer (fail closed).
        """
        try:
            return self._run(lambda conn: conn.execute(
                "SELECT 1 FROM handoffs.seen WHERE receipt_id = %s", (receipt_id,)
            ).fetchone() is not None, what="look up a receipt id")
        except DecisionLogError as exc:
            raise ReplayStoreError(exc.message) from exc
