"""The runtime record: a SQLite decision log that is also the replay store.

One file holds both: a ``decisions`` table with one row per gate decision (and its
reason codes in ``decision_reasons``), and a ``seen`` table whose primary key is the
receipt id, so that "first seen" is a single atomic ``INSERT OR IGNORE`` that holds
across threads, processes and restarts. The database runs in WAL mode with a busy
timeout; every write is one short ``BEGIN IMMEDIATE`` transaction, retried while
another writer holds the lock, so no row is lost when several processes write at
once.

:meth:`SQLiteDecisionLog.summary` computes the essay's boundary metrics: missing-field
rejections, expired messages, source-resolution failures, disagreement on sampled
readback and the distribution of counterfactual triggers.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypeVar

import attrs

from handoffs._errors import HandoffsError
from handoffs.receivers._decision import Decision
from handoffs.receivers._gate import ReplayStoreError

__all__ = ["DecisionLogError", "LogSummary", "SQLiteDecisionLog"]

T = TypeVar("T")

SCHEMA_VERSION: Final = "1"
_EXPIRED_CODES: Final = ("receipt-expired", "proof-expired", "grant-expired")
_PRUNE_MARGIN: Final = timedelta(hours=1)

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS decisions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    decided_at TEXT NOT NULL,
    receipt_id TEXT,
    digest TEXT,
    contract TEXT,
    version TEXT,
    sender TEXT,
    receiver TEXT NOT NULL,
    step INTEGER NOT NULL,
    verdict TEXT NOT NULL,
    action TEXT,
    authority TEXT,
    reasons TEXT NOT NULL,
    readback TEXT,
    counterfactual_trigger TEXT,
    message_bytes INTEGER NOT NULL,
    message BLOB,
    pid INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS decisions_receipt ON decisions (receipt_id);
CREATE TABLE IF NOT EXISTS decision_reasons (
    decision INTEGER NOT NULL REFERENCES decisions (seq),
    code TEXT NOT NULL,
    step INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS decision_reasons_code ON decision_reasons (code);
CREATE TABLE IF NOT EXISTS seen (
    receipt_id TEXT PRIMARY KEY,
    first_seen TEXT NOT NULL,
    expires TEXT NOT NULL,
    pid INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS seen_expires ON seen (expires);
"""


class DecisionLogError(HandoffsError, OSError):
    """The decision log cannot be opened or written (the gate then fails closed)."""

    code = "log-unavailable"


def _stamp(moment: datetime) -> str:
    """Fixed-width RFC 3339 UTC, so that text order is time order."""
    if moment.tzinfo is None:
        raise ValueError("times must be timezone-aware")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


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


class SQLiteDecisionLog:
    """A SQLite decision log (one row per decision) and replay store in one file.

    It implements both :class:`~handoffs.receivers.DecisionLog` and
    :class:`~handoffs.receivers.ReplayStore`; pass it as both ``log=`` and
    ``replay=`` to a gate. It is safe to share between threads; each process opens
    its own connection (the object may be pickled into a worker process).

    Args:
        path: the database file (created if missing).
        keep_messages: also store each message's bytes (for audits; grows the file).
        busy_timeout: seconds a writer waits for another writer's lock.

    Raises:
        DecisionLogError: the file cannot be opened or has an unknown schema version.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        keep_messages: bool = False,
        busy_timeout: float = 30.0,
    ) -> None:
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, int | float) or (
            busy_timeout <= 0
        ):
            raise ValueError(f"busy_timeout must be a positive number, got {busy_timeout!r}")
        self.path = os.fspath(path)
        self.keep_messages = bool(keep_messages)
        self.busy_timeout = float(busy_timeout)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self._writes = 0
        with self._lock:
            self._connection()

    # ------------------------------------------------------------- connection

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "keep_messages": self.keep_messages,
                "busy_timeout": self.busy_timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], keep_messages=state["keep_messages"],  # type: ignore[misc]
                      busy_timeout=state["busy_timeout"])

    def __enter__(self) -> SQLiteDecisionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close this process's connection (it reopens on next use)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def _connection(self) -> sqlite3.Connection:
        """Return this process's connection, opened and initialised on first use."""
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        try:
            conn = sqlite3.connect(
                self.path, timeout=self.busy_timeout, isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise DecisionLogError(f"cannot open decision log {self.path!r}: {exc}") from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            self._retry(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone())
            conn.execute("PRAGMA synchronous = NORMAL")
            self._transaction(conn, self._init_schema)
        except (sqlite3.Error, DecisionLogError) as exc:
            conn.close()
            if isinstance(exc, DecisionLogError):
                raise
            raise DecisionLogError(f"cannot open decision log {self.path!r}: {exc}") from exc
        self._conn, self._pid, self._writes = conn, os.getpid(), 0
        return conn

    @staticmethod
    def _init_schema(conn: sqlite3.Connection) -> None:
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
                         (SCHEMA_VERSION,))
        elif row[0] != SCHEMA_VERSION:
            raise DecisionLogError(
                f"decision log schema version {row[0]!r} is not {SCHEMA_VERSION!r}",
                code="log-version",
            )

    def _retry(self, fn: Callable[[], T]) -> T:
        deadline = time.monotonic() + self.busy_timeout
        delay = 0.001
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.05)

    def _transaction(
        self, conn: sqlite3.Connection, body: Callable[[sqlite3.Connection], T]
    ) -> T:
        """Run ``body`` in one short ``BEGIN IMMEDIATE`` transaction, retried while busy."""

        def attempt() -> T:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = body(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

        return self._retry(attempt)

    def _write(self, body: Callable[[sqlite3.Connection], T], *, what: str) -> T:
        with self._lock:
            try:
                conn = self._connection()
                return self._transaction(conn, body)
            except sqlite3.Error as exc:
                raise DecisionLogError(f"cannot {what} in {self.path!r}: {exc}") from exc

    # ---------------------------------------------------------------- the log

    def append(
        self,
        decision: Decision,
        *,
        digest: str | None,
        message_bytes: int,
        message: bytes | None = None,
        decided_at: datetime,
    ) -> None:
        """Record one decision (one row, plus one row per reason code).

        Raises:
            DecisionLogError: the row could not be written.
        """
        name, _, version = (decision.contract or "").partition("/")
        row = (
            _stamp(decided_at), decision.receipt_id, digest, name or None, version or None,
            decision.sender, decision.receiver, int(decision.step), decision.verdict.value,
            decision.action, decision.authority,
            json.dumps([r.to_json() for r in decision.reasons], ensure_ascii=False),
            decision.readback, decision.counterfactual_trigger, int(message_bytes),
            message if self.keep_messages else None, os.getpid(),
        )
        reasons = [(r.code, int(r.step)) for r in decision.reasons]

        def insert(conn: sqlite3.Connection) -> None:
            cursor = conn.execute(
                "INSERT INTO decisions (decided_at, receipt_id, digest, contract, version, "
                "sender, receiver, step, verdict, action, authority, reasons, readback, "
                "counterfactual_trigger, message_bytes, message, pid) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
            if reasons:
                conn.executemany(
                    "INSERT INTO decision_reasons (decision, code, step) VALUES (?, ?, ?)",
                    [(cursor.lastrowid, code, step) for code, step in reasons],
                )

        self._write(insert, what="append a decision")

    # ------------------------------------------------------------ replay store

    def first_seen(self, receipt_id: str, *, expires: datetime, now: datetime) -> bool:
        """Atomically record ``receipt_id``; True the first time in any process.

        Expired ids (with an hour's margin) are pruned every 1024 writes.

        Raises:
            ReplayStoreError: the database could not answer (fail closed).
        """
        row = (receipt_id, _stamp(now), _stamp(expires), os.getpid())

        def insert(conn: sqlite3.Connection) -> bool:
            self._writes += 1
            if self._writes % 1024 == 0:
                conn.execute("DELETE FROM seen WHERE expires < ?", (_stamp(now - _PRUNE_MARGIN),))
            cursor = conn.execute(
                "INSERT OR IGNORE INTO seen (receipt_id, first_seen, expires, pid) "
                "VALUES (?, ?, ?, ?)", row,
            )
            return cursor.rowcount == 1

        try:
            return self._write(insert, what="record a receipt id")
        except DecisionLogError as exc:
            raise ReplayStoreError(exc.message) from exc

    # ----------------------------------------------------------------- reading

    def count(self) -> int:
        """Number of decision rows."""
        return int(self._read(lambda c: c.execute("SELECT COUNT(*) FROM decisions").fetchone()[0]))

    def rows(self, *, limit: int = 100) -> list[dict[str, Any]]:
        """The last ``limit`` decision rows as dicts, newest first (without message bytes)."""

        def query(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            cursor = conn.execute(
                "SELECT seq, decided_at, receipt_id, digest, contract, version, sender, "
                "receiver, step, verdict, action, authority, reasons, readback, "
                "counterfactual_trigger, message_bytes, pid FROM decisions "
                "ORDER BY seq DESC LIMIT ?", (limit,),
            )
            names = [d[0] for d in cursor.description]
            result = [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]
            for item in result:
                item["reasons"] = json.loads(item["reasons"])
            return result

        return self._read(query)

    def _read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            try:
                return self._retry(lambda: query(self._connection()))
            except sqlite3.Error as exc:
                raise DecisionLogError(f"cannot read {self.path!r}: {exc}") from exc

    def summary(self) -> LogSummary:
        """The boundary metrics and totals over every decision in the log."""
        return self._read(_summarise)


def _pairs(conn: sqlite3.Connection, sql: str, *args: Any) -> dict[str, int]:
    return {str(key): int(value) for key, value in conn.execute(sql, args).fetchall()}


_REFUSED_WITH_REASON: Final = (
    "SELECT COUNT(DISTINCT r.decision) FROM decision_reasons r "
    "JOIN decisions d ON d.seq = r.decision "
    "WHERE r.code IN (SELECT value FROM json_each(?)) AND d.verdict != 'ACCEPT'"
)


def _with_reason(conn: sqlite3.Connection, codes: tuple[str, ...]) -> int:
    """Refused decisions carrying any of ``codes``."""
    return int(conn.execute(_REFUSED_WITH_REASON, (json.dumps(codes),)).fetchone()[0])


def _summarise(conn: sqlite3.Connection) -> LogSummary:
    total, mean_bytes, first, last, sampled, disagreed = conn.execute(
        "SELECT COUNT(*), AVG(message_bytes), MIN(decided_at), MAX(decided_at), "
        "COUNT(readback), COALESCE(SUM(readback = 'disagree'), 0) FROM decisions"
    ).fetchone()
    return LogSummary(
        decisions=int(total),
        by_verdict=_pairs(conn, "SELECT verdict, COUNT(*) FROM decisions GROUP BY verdict "
                                "ORDER BY verdict"),
        by_step=_pairs(conn, "SELECT step, COUNT(*) FROM decisions GROUP BY step ORDER BY step"),
        by_reason=_pairs(conn, "SELECT code, COUNT(DISTINCT decision) FROM decision_reasons "
                               "GROUP BY code ORDER BY code"),
        by_receiver=_pairs(conn, "SELECT receiver, COUNT(*) FROM decisions GROUP BY receiver "
                                 "ORDER BY receiver"),
        missing_field_rejections=_with_reason(conn, ("missing-field",)),
        expired=_with_reason(conn, _EXPIRED_CODES),
        source_resolution_failures=_with_reason(conn, ("evidence-unresolved",)),
        replays=_with_reason(conn, ("replayed",)),
        readback_sampled=int(sampled),
        readback_disagreements=int(disagreed),
        readback_disagreement_rate=(int(disagreed) / int(sampled)) if sampled else None,
        counterfactual_triggers=_pairs(
            conn, "SELECT counterfactual_trigger, COUNT(*) FROM decisions "
                  "WHERE counterfactual_trigger IS NOT NULL GROUP BY counterfactual_trigger "
                  "ORDER BY COUNT(*) DESC, counterfactual_trigger"),
        mean_message_bytes=float(mean_bytes) if mean_bytes is not None else None,
        first_decided_at=first,
        last_decided_at=last,
    )
