"""Shared internal (not public): what every decision log and replay store speaks.

The receivers' SQLite log (:class:`~handoffs.receivers.SQLiteDecisionLog`, with the
gate's replay step) and the service's stores (``handoffs.service``: the store it opens
and the PostgreSQL store of :mod:`handoffs.service.postgres`) implement one protocol:
a receipt id is claimed with its decision row (:class:`ReplayClaim`), ids are kept for
``retain`` past their own expiry and pruned every ``prune_every`` writes (checked by
:func:`check_retention`), and a log answers with one :class:`LogSummary`. Used by
``handoffs.receivers`` (``_gate``, ``_replay``, ``_log``, ``chains._receiver``) and
``handoffs.service`` (``_store``, ``postgres``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Final

import attrs

from handoffs._codes import EXPIRED_CODES
from handoffs._errors import DecisionLogError, InvalidArgument, ReplayStoreError

__all__ = ["DEFAULT_PRUNE_EVERY", "DEFAULT_RETAIN", "DecisionLogError", "LogSummary",
           "ReplayClaim", "ReplayStoreError", "SummaryDialect", "check_retention", "summarise"]

DEFAULT_RETAIN: Final = timedelta(hours=1)
"""How long a store keeps an id past its own ``valid_until`` by default."""
DEFAULT_PRUNE_EVERY: Final = 1024
"""How many writes a store makes between two prunes by default."""


@attrs.frozen(kw_only=True)
class ReplayClaim:
    """A receipt id to be recorded as seen together with its decision row.

    Attributes:
        receipt_id: the receipt's ``id``.
        expires: the receipt's ``valid_until``; the store keeps the id at least until
            then, by its own clock.
        claimed_at: the gate's clock when it checked the receipt (recorded, never
            used to prune).
    """

    receipt_id: str
    expires: datetime
    claimed_at: datetime


def check_retention(retain: timedelta, prune_every: int) -> None:
    """Reject bad retention options before any work starts."""
    if not isinstance(retain, timedelta) or retain < timedelta(0):
        raise InvalidArgument(f"retain must be a non-negative timedelta, got {retain!r}")
    if isinstance(prune_every, bool) or not isinstance(prune_every, int) or prune_every < 1:
        raise InvalidArgument(f"prune_every must be a positive integer, got {prune_every!r}")


@attrs.frozen(kw_only=True)
class LogSummary:
    """Counters over a decision log: the essay's boundary metrics and totals.

    Attributes:
        decisions: rows in the log.
        by_verdict: decisions per verdict.
        by_step: decisions per deciding step (``"1"`` … ``"5"``).
        by_reason: decisions carrying each reason code.
        by_receiver: decisions per receiver contract.
        missing_field_rejections: refused decisions with a ``missing-field`` reason.
        expired: decisions refused as expired (receipt, proof or grant).
        source_resolution_failures: decisions with ``evidence-unresolved``.
        replays: decisions refused as replays.
        readback_sampled: decisions whose claims were read back.
        readback_disagreements: of those, how many disagreed with the evidence.
        readback_disagreement_rate: disagreements / sampled, ``None`` if none sampled.
        counterfactual_triggers: admitted receipts per counterfactual trigger text.
        mean_message_bytes: mean size of the messages as received.
        first_decided_at / last_decided_at: the time span covered.
    """

    decisions: int
    by_verdict: Mapping[str, int]
    by_step: Mapping[str, int]
    by_reason: Mapping[str, int]
    by_receiver: Mapping[str, int]
    missing_field_rejections: int
    expired: int
    source_resolution_failures: int
    replays: int
    readback_sampled: int
    readback_disagreements: int
    readback_disagreement_rate: float | None
    counterfactual_triggers: Mapping[str, int]
    mean_message_bytes: float | None
    first_decided_at: str | None
    last_decided_at: str | None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (what ``handoffs log summary`` prints)."""
        return {name: (dict(value) if isinstance(value, Mapping) else value)
                for name, value in attrs.asdict(self, recurse=False).items()}


@attrs.frozen(kw_only=True)
class SummaryDialect:
    """How one SQL database spells the summary's queries (the queries are one text).

    Attributes:
        prefix: what precedes a table name (``""``, or ``"handoffs."`` for a schema).
        any_code: the condition "``r.code`` is one of the bound codes".
        codes: the bound value of a tuple of codes (a JSON array, or a list).
        stamp: a ``decided_at`` as the database returns it, as RFC 3339 text.
    """

    prefix: str
    any_code: str
    codes: Callable[[tuple[str, ...]], Any]
    stamp: Callable[[Any], str | None]


def summarise(conn: Any, dialect: SummaryDialect) -> LogSummary:
    """The :class:`LogSummary` of the decisions behind ``conn`` (a DB-API connection
    with ``execute``: :mod:`sqlite3`'s or psycopg's), in ``dialect``.
    """
    decisions, reasons = f"{dialect.prefix}decisions", f"{dialect.prefix}decision_reasons"

    def pairs(sql: str) -> dict[str, int]:
        return {str(key): int(value) for key, value in conn.execute(sql).fetchall()}

    def refused_with(codes: tuple[str, ...]) -> int:
        row = conn.execute(
            f"SELECT COUNT(DISTINCT r.decision) FROM {reasons} r "  # noqa: S608 - constants
            f"JOIN {decisions} d ON d.seq = r.decision "
            f"WHERE {dialect.any_code} AND d.verdict <> 'ACCEPT'", (dialect.codes(codes),),
        ).fetchone()
        return int(row[0]) if row else 0

    total, mean_bytes, first, last, sampled, disagreed = conn.execute(
        "SELECT COUNT(*), AVG(message_bytes), MIN(decided_at), MAX(decided_at), "  # noqa: S608
        f"COUNT(readback), COUNT(CASE WHEN readback = 'disagree' THEN 1 END) FROM {decisions}"
    ).fetchone()
    by = f"FROM {decisions} GROUP BY"
    return LogSummary(
        decisions=int(total),
        by_verdict=pairs(f"SELECT verdict, COUNT(*) {by} verdict ORDER BY verdict"),
        by_step=pairs(f"SELECT step, COUNT(*) {by} step ORDER BY step"),
        by_reason=pairs(f"SELECT code, COUNT(DISTINCT decision) FROM {reasons} "  # noqa: S608
                        "GROUP BY code ORDER BY code"),
        by_receiver=pairs(f"SELECT receiver, COUNT(*) {by} receiver ORDER BY receiver"),
        missing_field_rejections=refused_with(("missing-field",)),
        expired=refused_with(EXPIRED_CODES),
        source_resolution_failures=refused_with(("evidence-unresolved",)),
        replays=refused_with(("replayed",)),
        readback_sampled=int(sampled),
        readback_disagreements=int(disagreed),
        readback_disagreement_rate=(int(disagreed) / int(sampled)) if sampled else None,
        counterfactual_triggers=pairs(
            f"SELECT counterfactual_trigger, COUNT(*) FROM {decisions} "  # noqa: S608
            "WHERE counterfactual_trigger IS NOT NULL GROUP BY counterfactual_trigger "
            "ORDER BY COUNT(*) DESC, counterfactual_trigger"),
        mean_message_bytes=float(mean_bytes) if mean_bytes is not None else None,
        first_decided_at=dialect.stamp(first),
        last_decided_at=dialect.stamp(last),
    )
