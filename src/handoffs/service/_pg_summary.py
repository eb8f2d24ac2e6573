"""Reading the PostgreSQL store: counts, the last rows, and the summary (the one summary
SQL of ``handoffs._logs``, in the PostgreSQL dialect).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from handoffs._logs import LogSummary, SummaryDialect, summarise
from handoffs.service._pg_connection import Connection
from handoffs.service._pg_log import stamp

if TYPE_CHECKING:
    import psycopg

__all__ = ["Reading"]


class Reading(Connection):
    """Counts, rows and the summary of the decision log."""

    def count(self) -> int:
        """Number of decision rows."""

        def query(conn: psycopg.Connection[Any]) -> int:
            row = conn.execute("SELECT count(*) FROM handoffs.decisions").fetchone()
            return int(row[0]) if row else 0

        return self._run(query, what="count decisions")

    def rows(self, *, limit: int = 100) -> list[dict[str, Any]]:
        """The last ``limit`` decision rows as dicts, newest first (without message bytes)."""

        def query(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
            cursor = conn.execute(
                "SELECT seq, decided_at, receipt_id, digest, contract, version, sender, "
                "receiver, step, verdict, action, proposed_action, authority, reasons, "
                "readback, counterfactual_trigger, message_bytes, pid FROM handoffs.decisions "
                "ORDER BY seq DESC LIMIT %s", (limit,),
            )
            names = [d.name for d in cursor.description or ()]
            result = [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]
            for item in result:
                item["decided_at"] = stamp(item["decided_at"])
            return result

        return self._run(query, what="read decisions")

    def summary(self) -> LogSummary:
        """The boundary metrics and totals over every decision in the log."""
        return self._run(_summarise, what="summarise decisions")


_POSTGRES: Final = SummaryDialect(
    prefix="handoffs.", any_code="r.code = ANY(%s::text[])", codes=list, stamp=stamp)


def _summarise(conn: psycopg.Connection[Any]) -> LogSummary:
    return summarise(conn, _POSTGRES)
