"""The runtime record: a SQLite decision log that is also the replay store.

One file holds both: a ``decisions`` table with one row per gate decision (and its
reason codes in ``decision_reasons``), and a ``seen`` table whose primary key is the
receipt id, so that "first seen" is a single atomic ``INSERT OR IGNORE`` that holds
across threads, processes and restarts. The database runs in WAL mode with a busy
timeout; every write is one short ``BEGIN IMMEDIATE`` transaction, retried while
another writer holds the lock, so no row is lost when several processes write at
once. Every call has one deadline, ``busy_timeout`` seconds from its start (waiting
for this object's lock, for the file's lock and the retries together): a database
locked for longer fails the call closed within about that time.

As a :class:`~handoffs.receivers.ReplayLog`, the claim of a receipt id and its
decision row are written in **one** transaction (:meth:`SQLiteDecisionLog.record`):
a writer killed at any instant leaves both or neither, so no genuine id is burned.

Retention uses the store's clock, never a writer's: a ``seen`` row is pruned only
once its own ``expires`` (the receipt's ``valid_until``) lies more than ``retain``
in the past by SQLite's ``'now'``, the clock of the host that holds the file. A
writer whose clock runs ahead (``now`` = 2099) cannot make the store forget an id
that is still valid. The ``meta`` table holds the schema version; older files are
migrated forward in one transaction, newer ones are refused.

:meth:`SQLiteDecisionLog.summary` computes the essay's boundary metrics: missing-field
rejections, expired messages, source-resolution failures, disagreement on sampled
readback and the distribution of counterfactual triggers.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypeVar

from handoffs._errors import InvalidArgument
from handoffs._logs import (
    DEFAULT_PRUNE_EVERY,
    DEFAULT_RETAIN,
    DecisionLogError,
    LogSummary,
    ReplayClaim,
    ReplayStoreError,
    SummaryDialect,
    check_retention,
    summarise,
)
from handoffs.receivers._decision import Decision

__all__ = ["SQLiteDecisionLog"]

T = TypeVar("T")

SCHEMA_VERSION: Final = "3"
# SQLite's own clock, in the fixed-width text form the tables hold.
# The longest one attempt waits for the file's lock; retries run to the call's deadline.
_ATTEMPT: Final = 0.05
_STORE_NOW: Final = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"

_SCHEMA_1: Final = """
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
# Version 2: the store's own clock beside each writer's (``recorded_at``), so that a
# skewed writer shows in the log; pruning reads only the store's clock.
_SCHEMA_2: Final = """
ALTER TABLE decisions ADD COLUMN recorded_at TEXT;
ALTER TABLE seen ADD COLUMN recorded_at TEXT;
"""
# Version 3: the sender's proposal beside the decided action (``proposed_action``: the
# admitted receipt's ``proposed_action``; NULL for a refusal and for rows written
# before), so that ``handoffs log watch`` measures the decided-otherwise rate.
_SCHEMA_3: Final = """
ALTER TABLE decisions ADD COLUMN proposed_action TEXT;
"""
MIGRATIONS: Final = {1: _SCHEMA_1, 2: _SCHEMA_2, 3: _SCHEMA_3}


def _stamp(moment: datetime) -> str:
    """Fixed-width RFC 3339 UTC, so that text order is time order."""
    if moment.tzinfo is None:
        raise InvalidArgument("times must be timezone-aware")
    # isoformat, not strftime: the same text for UTC (4-digit years, 6-digit fractions),
    # at a fraction of the cost per decision.
    utc = moment if moment.tzinfo is UTC else moment.astimezone(UTC)
    return utc.isoformat(timespec="microseconds")[:-6] + "Z"


def _busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def schema_version(value: str | None, *, where: str) -> int:
    """The stored schema version as a number (0 for a new store).

    Raises:
        DecisionLogError: ``log-version``, a version this code does not know.
    """
    if value is None:
        return 0
    if value.isdigit() and 1 <= int(value) <= int(SCHEMA_VERSION):
        return int(value)
    raise DecisionLogError(
        f"{where} schema version {value!r} is not {SCHEMA_VERSION!r} or older "
        "(written by a newer handoffs?)",
        code="log-version",
    )


class SQLiteDecisionLog:
    """A SQLite decision log (one row per decision) and replay store in one file.

    It implements both :class:`~handoffs.receivers.DecisionLog` and
    :class:`~handoffs.receivers.ReplayStore`; pass it as both ``log=`` and
    ``replay=`` to a gate. It is safe to share between threads; each process opens
    its own connection (the object may be pickled into a worker process).

    Args:
        path: the database file (created if missing).
        keep_messages: also store each message's bytes (for audits; grows the file).
        busy_timeout: seconds a call may wait in all (for this object's lock and the
            file's) before failing closed.
        retain: how long past its own ``valid_until`` (by the store's clock) an id
            is kept; it bounds how far behind a writer's clock may run.
        prune_every: prune expired ids once every this many claims of this process.
        refused_retain: how long refused decision rows are kept (by the store's
            clock; pruned every ``prune_every`` appends); ``None``: forever.

    Raises:
        DecisionLogError: the file cannot be opened or has an unknown schema version.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        keep_messages: bool = False,
        busy_timeout: float = 30.0,
        retain: timedelta = DEFAULT_RETAIN,
        prune_every: int = DEFAULT_PRUNE_EVERY,
        refused_retain: timedelta | None = None,
    ) -> None:
        if refused_retain is not None and (not isinstance(refused_retain, timedelta)
                                           or refused_retain <= timedelta(0)):
            raise InvalidArgument(
                f"refused_retain must be a positive timedelta, got {refused_retain!r}")
        self.refused_retain = refused_retain
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, int | float) or (
            busy_timeout <= 0
        ):
            raise InvalidArgument(f"busy_timeout must be a positive number, got {busy_timeout!r}")
        check_retention(retain, prune_every)
        self.path = os.fspath(path)
        self.keep_messages = bool(keep_messages)
        self.busy_timeout = float(busy_timeout)
        self.retain = retain
        self.prune_every = prune_every
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self._writes = 0
        with self._lock:
            self._connection()

    # ------------------------------------------------------------- connection

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "keep_messages": self.keep_messages,
                "busy_timeout": self.busy_timeout, "retain": self.retain,
                "prune_every": self.prune_every, "refused_retain": self.refused_retain}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], **{k: v for k, v in state.items()  # type: ignore[misc]
                                        if k != "path"})

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
                self.path, timeout=min(self.busy_timeout, _ATTEMPT), isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise DecisionLogError(f"cannot open decision log {self.path!r}: {exc}") from exc
        try:
            # Each attempt waits briefly; _retry retries until the call's deadline.
            conn.execute(f"PRAGMA busy_timeout = {int(min(self.busy_timeout, _ATTEMPT) * 1000)}")
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
        """Create or migrate the schema to :data:`SCHEMA_VERSION` (one transaction)."""
        conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, "
                     "value TEXT NOT NULL)")
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        current = schema_version(None if row is None else row[0], where="decision log")
        for version in range(current + 1, int(SCHEMA_VERSION) + 1):
            for statement in MIGRATIONS[version].split(";"):
                if statement.strip():
                    conn.execute(statement)
        conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                     "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (SCHEMA_VERSION,))

    def _retry(self, fn: Callable[[], T], deadline: float | None = None) -> T:
        if deadline is None:
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
        self, conn: sqlite3.Connection, body: Callable[[sqlite3.Connection], T],
        deadline: float | None = None,
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

        return self._retry(attempt, deadline)

    @contextlib.contextmanager
    def _locked(self, deadline: float, what: str) -> Iterator[None]:
        """Hold the lock of this object, waited for until ``deadline`` at most."""
        if not self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise DecisionLogError(f"cannot {what} in {self.path!r}: the database is busy "
                                   f"(waited {self.busy_timeout:g} s)")
        try:
            yield
        finally:
            self._lock.release()

    def _write(self, body: Callable[[sqlite3.Connection], T], *, what: str) -> T:
        deadline = time.monotonic() + self.busy_timeout
        with self._locked(deadline, what):
            try:
                conn = self._connection()
                return self._transaction(conn, body, deadline)
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
        proposed_action: str | None = None,
    ) -> None:
        """Record one decision (one row, plus one row per reason code).

        ``proposed_action`` is the sender's proposal (the admitted receipt's
        ``proposed_action``; ``None`` for a refusal), kept beside the decided action.

        Raises:
            DecisionLogError: the row could not be written.
        """
        insert = self._inserter(decision, digest=digest, message_bytes=message_bytes,
                                message=message, decided_at=decided_at,
                                proposed_action=proposed_action)

        def body(conn: sqlite3.Connection) -> None:
            self._writes += 1
            if self.refused_retain is not None and self._writes % self.prune_every == 0:
                self._prune_refused(conn, self.refused_retain)
            insert(conn)

        self._write(body, what="append a decision")

    @staticmethod
    def _prune_refused(conn: sqlite3.Connection, retain: timedelta) -> None:
        """Forget refused rows recorded more than ``retain`` ago (store clock)."""
        old = ("SELECT seq FROM decisions WHERE verdict = 'REJECT' AND recorded_at < "
               "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?)")
        since = (f"-{retain.total_seconds():.6f} seconds",)
        conn.execute(f"DELETE FROM decision_reasons WHERE decision IN ({old})", since)
        conn.execute(f"DELETE FROM decisions WHERE seq IN ({old})", since)

    def record(
        self,
        decision: Decision,
        *,
        claim: ReplayClaim,
        digest: str | None,
        message_bytes: int,
        message: bytes | None = None,
        decided_at: datetime,
        proposed_action: str | None = None,
    ) -> bool:
        """Claim ``claim.receipt_id`` and append ``decision`` in one transaction.

        Returns False and writes nothing when the id was claimed before.

        Raises:
            DecisionLogError: nothing was written.
        """
        insert = self._inserter(decision, digest=digest, message_bytes=message_bytes,
                                message=message, decided_at=decided_at,
                                proposed_action=proposed_action)

        def body(conn: sqlite3.Connection) -> bool:
            if not self._claim(conn, claim.receipt_id, claim.expires, claim.claimed_at):
                return False
            insert(conn)
            return True

        return self._write(body, what="record a decision")

    def _inserter(
        self,
        decision: Decision,
        *,
        digest: str | None,
        message_bytes: int,
        message: bytes | None,
        decided_at: datetime,
        proposed_action: str | None,
    ) -> Callable[[sqlite3.Connection], None]:
        name, _, version = (decision.contract or "").partition("/")
        row = (
            _stamp(decided_at), decision.receipt_id, digest, name or None, version or None,
            decision.sender, decision.receiver, int(decision.step), decision.verdict.value,
            decision.action, proposed_action, decision.authority,
            json.dumps([r.to_json() for r in decision.reasons], ensure_ascii=False),
            decision.readback, decision.counterfactual_trigger, int(message_bytes),
            message if self.keep_messages else None, os.getpid(),
        )
        reasons = [(r.code, int(r.step)) for r in decision.reasons]

        def insert(conn: sqlite3.Connection) -> None:
            cursor = conn.execute(
                "INSERT INTO decisions (decided_at, receipt_id, digest, contract, version, "
                "sender, receiver, step, verdict, action, proposed_action, authority, reasons, "
                "readback, counterfactual_trigger, message_bytes, message, pid, recorded_at) "
                f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {_STORE_NOW})",
                row,
            )
            if reasons:
                conn.executemany(
                    "INSERT INTO decision_reasons (decision, code, step) VALUES (?, ?, ?)",
                    [(cursor.lastrowid, code, step) for code, step in reasons],
                )

        return insert

    # ------------------------------------------------------------ replay store

    def _claim(
        self, conn: sqlite3.Connection, receipt_id: str, expires: datetime, now: datetime
    ) -> bool:
        self._writes += 1
        if self._writes % self.prune_every == 0:
            self._prune(conn)
        cursor = conn.execute(
            "INSERT OR IGNORE INTO seen (receipt_id, first_seen, expires, pid, recorded_at) "
            f"VALUES (?, ?, ?, ?, {_STORE_NOW})",
            (receipt_id, _stamp(now), _stamp(expires), os.getpid()),
        )
        return cursor.rowcount == 1

    def _prune(self, conn: sqlite3.Connection) -> int:
        """Forget ids whose own validity ended ``retain`` ago by the store's clock."""
        seconds = f"-{self.retain.total_seconds():.6f} seconds"
        cursor = conn.execute(
            "DELETE FROM seen WHERE expires < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?)",
            (seconds,),
        )
        return int(cursor.rowcount)

    def prune(self) -> int:
        """Prune now (see the class notes); returns how many ids were forgotten."""
        return self._write(self._prune, what="prune expired ids")

    def first_seen(self, receipt_id: str, *, expires: datetime, now: datetime) -> bool:
        """Atomically record ``receipt_id``; True the first time in any process.

        ``now`` (the writer's clock) is recorded but never used to prune: ids are
        forgotten by the store's clock, every ``prune_every`` claims.

        Raises:
            ReplayStoreError: the database could not answer (fail closed).
        """
        try:
            return self._write(lambda conn: self._claim(conn, receipt_id, expires, now),
                               what="record a receipt id")
        except DecisionLogError as exc:
            raise ReplayStoreError(exc.message) from exc

    def seen(self, receipt_id: str) -> bool:
        """True if ``receipt_id`` was recorded before (claims nothing).

        Raises:
            ReplayStoreError: the database could not answer (fail closed).
        """
        try:
            return self._read(lambda conn: conn.execute(
                "SELECT 1 FROM seen WHERE receipt_id = ?", (receipt_id,)).fetchone() is not None)
        except DecisionLogError as exc:
            raise ReplayStoreError(exc.message) from exc

    def ping(self) -> None:
        """Check that the database answers and a writer can take its lock (readiness).

        Raises:
            DecisionLogError: it does not, within ``busy_timeout`` seconds.
        """
        self._write(lambda conn: conn.execute("SELECT COUNT(*) FROM meta").fetchone(),
                    what="reach the database")

    # ----------------------------------------------------------------- reading

    def count(self) -> int:
        """Number of decision rows."""
        return int(self._read(lambda c: c.execute("SELECT COUNT(*) FROM decisions").fetchone()[0]))

    def rows(self, *, limit: int = 100) -> list[dict[str, Any]]:
        """The last ``limit`` decision rows as dicts, newest first (without message bytes)."""

        def query(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            cursor = conn.execute(
                "SELECT seq, decided_at, receipt_id, digest, contract, version, sender, "
                "receiver, step, verdict, action, proposed_action, authority, reasons, "
                "readback, counterfactual_trigger, message_bytes, pid FROM decisions "
                "ORDER BY seq DESC LIMIT ?", (limit,),
            )
            names = [d[0] for d in cursor.description]
            result = [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]
            for item in result:
                item["reasons"] = json.loads(item["reasons"])
            return result

        return self._read(query)

    def _read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        deadline = time.monotonic() + self.busy_timeout
        with self._locked(deadline, "read"):
            try:
                return self._retry(lambda: query(self._connection()), deadline)
            except sqlite3.Error as exc:
                raise DecisionLogError(f"cannot read {self.path!r}: {exc}") from exc

    def summary(self) -> LogSummary:
        """The boundary metrics and totals over every decision in the log."""
        return self._read(_summarise)


_SQLITE: Final = SummaryDialect(
    prefix="", any_code="r.code IN (SELECT value FROM json_each(?))",
    codes=json.dumps, stamp=lambda text: text)


def _summarise(conn: sqlite3.Connection) -> LogSummary:
    return summarise(conn, _SQLITE)
