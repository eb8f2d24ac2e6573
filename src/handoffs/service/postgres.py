"""A PostgreSQL decision log and replay store, shared by every replica of a gate.

:class:`PostgresDecisionLog` has the interface of
:class:`~handoffs.receivers.SQLiteDecisionLog` (it is a
:class:`~handoffs.receivers.ReplayLog`): pass it as both ``log=`` and ``replay=`` to a
:class:`~handoffs.receivers.Gate`, in as many processes and hosts as you like::

    from handoffs.service.postgres import PostgresDecisionLog

    store = PostgresDecisionLog("postgresql://gate@db.internal:5432/handoffs")
    gate = Gate(identity="case-owner", trust=ring, registry=contracts, log=store,
                replay=store, ...)

Guarantees:

- **One statement, one round trip per decision** (or fewer: with ``group_commit``,
  one per batch of concurrent decisions, each answered with its own row's outcome,
  at most one decision per id in a batch): the claim of a receipt id
  (``INSERT … ON CONFLICT DO NOTHING`` on the ``seen`` primary key), the replay check
  (the claim's conflict) and the decision row are one statement, so a replica killed
  at any instant leaves both or neither, and two replicas racing on one id admit it at
  most once. A refusal is one ``INSERT`` without a claim. No query checks a pooled
  connection before use: one that broke is discarded and the call fails closed.
- **The store's clock**: an id is pruned only once its own ``expires`` (the receipt's
  ``valid_until``) lies more than ``retain`` before the server's ``now()``; a writer's
  clock is recorded, never trusted.
- **Fail closed**: an unreachable server (or one that restarts under the gate) raises
  :class:`~handoffs.errors.DecisionLogError` /
  :class:`~handoffs.errors.ReplayStoreError` within ``timeout`` seconds, which the
  gate turns into a refusal with the reason ``log-unavailable`` or
  ``replay-store-unavailable``. Every call has one deadline: the wait for a
  connection and the statement share ``timeout``; the server cancels a statement
  past it (``statement_timeout``), and a server that does not answer at all (stopped,
  partitioned) has its connection cut by this process at the deadline. A statement
  cut while the server was stopped may still commit when it resumes: the id is then
  spent although the caller was told 503 (a retry is refused as a replay).
- **Clock skew is bounded**: a claim whose ``claimed_at`` (the writer's clock) is older
  than the server's ``now()`` minus ``retain / 2`` is refused with
  :class:`~handoffs.errors.DecisionLogError` code ``clock-skew``, so a writer whose
  clock lags cannot claim an id that may already have been pruned.
- **Versioned schema**: tables live in the ``handoffs`` schema; ``handoffs.meta``
  holds the schema version, migrations run once under an advisory lock, and a newer
  version than this code knows is refused (``log-version``).

Needs the ``postgres`` extra (``psycopg`` 3 and ``psycopg-pool``).

One concern, kept in one module although it is past 800 lines: one store, whose SQL,
migrations, deadlines and group commit make the guarantees above together; split, each
guarantee would be read across files.
"""

from __future__ import annotations

import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, TypeVar

import orjson

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
from handoffs.receivers import Decision

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = ["PostgresDecisionLog"]

T = TypeVar("T")

_SCHEMA_VERSION: Final = "4"
# An arbitrary constant: the advisory lock that serialises migrations across replicas.
_MIGRATION_LOCK: Final = 0x68616E64

_MIGRATIONS: Final = {
    1: """
CREATE TABLE handoffs.decisions (
    seq BIGSERIAL PRIMARY KEY,
    decided_at TIMESTAMPTZ NOT NULL,
    recorded_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    receipt_id TEXT,
    digest TEXT,
    contract TEXT,
    version TEXT,
    sender TEXT,
    receiver TEXT NOT NULL,
    step SMALLINT NOT NULL,
    verdict TEXT NOT NULL,
    action TEXT,
    authority TEXT,
    reasons JSONB NOT NULL,
    readback TEXT,
    counterfactual_trigger TEXT,
    message_bytes INTEGER NOT NULL,
    message BYTEA,
    pid INTEGER NOT NULL
);
CREATE INDEX decisions_receipt ON handoffs.decisions (receipt_id);
CREATE TABLE handoffs.decision_reasons (
    decision BIGINT NOT NULL REFERENCES handoffs.decisions (seq),
    code TEXT NOT NULL,
    step SMALLINT NOT NULL
);
CREATE INDEX decision_reasons_code ON handoffs.decision_reasons (code);
CREATE TABLE handoffs.seen (
    receipt_id TEXT PRIMARY KEY,
    first_seen TIMESTAMPTZ NOT NULL,
    expires TIMESTAMPTZ NOT NULL,
    recorded_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    pid INTEGER NOT NULL
);
CREATE INDEX seen_expires ON handoffs.seen (expires);
""",
    # Version 2: refused rows are pruned by age (``refused_retain``).
    # The reasons' foreign key goes: each row and its reasons are one statement, and
    # its check was a second (internal) query per decision.
    2: """
CREATE INDEX decisions_refused ON handoffs.decisions (recorded_at) WHERE verdict = 'REJECT';
ALTER TABLE handoffs.decision_reasons DROP CONSTRAINT IF EXISTS decision_reasons_decision_fkey;
""",
    # Version 3: the reason codes are read from each row's ``reasons`` (which always
    # held them, with their steps): ``decision_reasons`` becomes a view over it, so a
    # decision is one heap row and its indexes instead of one more row and index entry
    # per reason. Every old ``decision_reasons`` row repeats its decision's ``reasons``.
    # The index on ``decisions.receipt_id`` goes too (a write per decision that no
    # query of the gate reads; an auditor may create it back, see the how-to).
    3: """
DROP TABLE handoffs.decision_reasons;
CREATE VIEW handoffs.decision_reasons AS
    SELECT d.seq AS decision, r.code, r.step
    FROM handoffs.decisions d,
        jsonb_to_recordset(d.reasons) AS r (code text, step smallint);
DROP INDEX handoffs.decisions_receipt
""",
    # Version 4: the sender's proposal beside the decided action (``proposed_action``:
    # the admitted receipt's ``proposed_action``; NULL for a refusal and for rows
    # written before), so that ``handoffs log watch`` measures the decided-otherwise rate.
    4: """
ALTER TABLE handoffs.decisions ADD COLUMN proposed_action TEXT
""",
}

# Each write is one statement with one parameter, a JSON document: the client
# serialises it once (orjson) instead of adapting some twenty parameters, and the
# server unpacks it in one pass (``jsonb_to_record``) into typed columns.
_FIELDS: Final = """
    decided_at timestamptz, receipt_id text, digest text, contract text, version text,
    sender text, receiver text, step smallint, verdict text, action text,
    proposed_action text, authority text, reasons jsonb, readback text,
    counterfactual_trigger text, message_bytes integer, message bytea, pid integer,
    prune boolean, refused_retain interval, claim text, claimed_at timestamptz,
    expires timestamptz, retain interval, skew interval
"""
_ROW: Final = """
    INSERT INTO handoffs.decisions (decided_at, receipt_id, digest, contract, version, sender,
        receiver, step, verdict, action, proposed_action, authority, reasons, readback,
        counterfactual_trigger, message_bytes, message, pid)
    SELECT decided_at, receipt_id, digest, contract, version, sender, receiver, step, verdict,
        action, proposed_action, authority, reasons, readback, counterfactual_trigger,
        message_bytes, message, pid
    FROM p
"""
# Pruning, the skew check, the claims (replay detection) and the decision rows of one
# or more decisions (``n`` numbers them; their ids are distinct) in one statement (one
# transaction, one round trip). Each answers whether its clock was fresh and its claim won.
_RECORD: Final = f"""
WITH p AS MATERIALIZED (SELECT * FROM jsonb_to_recordset(%s::jsonb) AS j ({_FIELDS}, n integer)),
pruned AS (
    DELETE FROM handoffs.seen
    WHERE (SELECT bool_or(prune) FROM p) AND expires < now() - (SELECT max(retain) FROM p)
),
fresh AS (SELECT n, claimed_at >= now() - skew AS ok FROM p),
won AS (
    INSERT INTO handoffs.seen (receipt_id, first_seen, expires, pid)
    SELECT claim, claimed_at, expires, pid FROM p JOIN fresh USING (n) WHERE fresh.ok
    ON CONFLICT (receipt_id) DO NOTHING
    RETURNING receipt_id
),
drow AS ({_ROW} WHERE p.claim IN (SELECT receipt_id FROM won) RETURNING seq)
SELECT n, ok, claim IN (SELECT receipt_id FROM won) FROM p JOIN fresh USING (n)
"""
# A refusal: its row, and (every ``prune_every`` writes) refused rows past
# ``refused_retain`` by the server's clock forgotten, in one statement.
_APPEND: Final = f"""
WITH p AS MATERIALIZED (SELECT * FROM jsonb_to_record(%s::jsonb) AS j ({_FIELDS})),
old_rows AS (
    DELETE FROM handoffs.decisions WHERE seq IN (
        SELECT seq FROM handoffs.decisions
        WHERE (SELECT prune AND refused_retain IS NOT NULL FROM p)
            AND verdict = 'REJECT'
            AND recorded_at < now() - (SELECT refused_retain FROM p)
        LIMIT 10000)
),
drow AS ({_ROW} RETURNING seq)
SELECT count(*) FROM drow
"""
_FIRST_SEEN: Final = """
INSERT INTO handoffs.seen (receipt_id, first_seen, expires, pid)
VALUES (%s, %s, %s, %s) ON CONFLICT (receipt_id) DO NOTHING
"""
_PRUNE: Final = "DELETE FROM handoffs.seen WHERE expires < now() - %s::interval"


class _Watchdog:
    """One thread per process that cuts the connection of a call past its deadline.

    ``statement_timeout`` cancels a slow statement on a server that runs; a server
    that does not run (stopped, partitioned) answers nothing, so the socket is shut
    down here and the waiting call fails with an error at once.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: list[tuple[float, int]] = []
        self._active: dict[int, Any] = {}
        self._ticket = itertools.count()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def watch(self, deadline: float, conn: Any) -> int:
        """Cut ``conn`` at ``deadline`` (monotonic) unless :meth:`done` is called first."""
        ticket = next(self._ticket)
        with self._cond:
            if self._thread is None or self._pid != os.getpid():
                self._due, self._active, self._pid = [], {}, os.getpid()
                self._thread = threading.Thread(target=self._loop, name="handoffs-pg-deadline",
                                                daemon=True)
                self._thread.start()
            self._active[ticket] = conn
            heapq.heappush(self._due, (deadline, ticket))
            if self._due[0][1] == ticket:
                self._cond.notify()
        return ticket

    def done(self, ticket: int) -> None:
        """The call finished in time."""
        with self._cond:
            self._active.pop(ticket, None)

    def _loop(self) -> None:
        with self._cond:
            while True:
                while self._due and self._due[0][1] not in self._active:
                    heapq.heappop(self._due)
                if not self._due:
                    self._cond.wait()
                    continue
                wait = self._due[0][0] - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                _, ticket = heapq.heappop(self._due)
                _cut(self._active.pop(ticket))


def _cut(conn: Any) -> None:
    """Shut the connection's socket down (the blocked call then fails at once)."""
    try:
        sock = socket.socket(fileno=os.dup(conn.fileno()))
    except Exception:  # already closed: nothing to cut
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.close()


_WATCHDOG: Final = _Watchdog()
# After a call ran into its timeout, further calls of this process fail at once for this
# many seconds (then one tries again): callers queued behind a stalled server are
# answered within about one timeout, not one timeout each.
_STALL_HOLD: Final = 1.0


# The most decisions one group commit records in one statement.
_BATCH_MAX: Final = 64


class _Pending:
    """One decision waiting to be recorded (group commit)."""

    __slots__ = ("claim_id", "deadline", "document", "error", "finished", "lead", "outcome",
                 "wake")

    def __init__(self, document: dict[str, Any], claim_id: str, deadline: float) -> None:
        self.document = document
        self.claim_id = claim_id
        self.deadline = deadline
        self.wake = threading.Event()
        self.finished = False
        self.lead = False
        self.outcome = (False, False)
        self.error: DecisionLogError | None = None


def _stamp(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    # isoformat, not strftime: the same text for UTC, at a fraction of the cost.
    utc = moment if moment.tzinfo is UTC else moment.astimezone(UTC)
    return utc.isoformat(timespec="microseconds")[:-6] + "Z"


def _redact(url: str) -> str:
    """The URL without its password (for error messages and logs)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(url)
    except Exception:  # a malformed URL is reported by the driver when used
        return "<postgresql url>"
    host, port = str(parts.get("host", "")), str(parts.get("port", ""))
    user, db = str(parts.get("user", "")), str(parts.get("dbname", ""))
    return f"postgresql://{user + '@' if user else ''}{host}{':' + port if port else ''}/{db}"


class PostgresDecisionLog:
    """A PostgreSQL decision log and replay store (see the module notes).

    It is safe to share between threads (a connection pool per process) and may be
    pickled into worker processes (the pool reopens there). Creating it does not
    connect: a server that is down makes every call fail closed until it is back.

    Args:
        url: a libpq connection URL, ``postgresql://user:password@host:port/db``.
        keep_messages: also store each message's bytes (for audits).
        retain: how long past its own ``valid_until`` (by the server's clock) an id
            is kept; it bounds how far behind a writer's clock may run.
        prune_every: prune expired ids once every this many claims of this process.
        timeout: seconds a call may take in all (waiting for a connection, connecting
            and running its statement) before failing closed.
        pool_size: the most connections this process opens.
        refused_retain: how long refused decision rows are kept (by the server's
            clock; pruned every ``prune_every`` writes); ``None``: forever.
        group_commit: seconds to gather concurrent claims into one statement (group
            commit: one transaction for up to 64 decisions, each caller answered with
            its own row's outcome); adaptive: a claim with no other waiting commits at
            once, and those queued meanwhile go together in the next statement;
            ``0``: each decision is its own statement.

    Raises:
        DecisionLogError: ``psycopg`` is not installed, or an option is bad.
    """

    def __init__(
        self,
        url: str,
        *,
        keep_messages: bool = False,
        retain: timedelta = DEFAULT_RETAIN,
        prune_every: int = DEFAULT_PRUNE_EVERY,
        timeout: float = 5.0,
        pool_size: int = 8,
        refused_retain: timedelta | None = None,
        group_commit: float = 0.0,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("postgresql://", "postgres://")):
            raise InvalidArgument(f"a PostgreSQL URL starts with postgresql://, got {url!r}")
        check_retention(retain, prune_every)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise InvalidArgument(f"timeout must be a positive number, got {timeout!r}")
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise InvalidArgument(f"pool_size must be a positive integer, got {pool_size!r}")
        try:
            import psycopg  # noqa: F401
            import psycopg_pool  # noqa: F401
        except ImportError as exc:
            raise DecisionLogError(
                "the PostgreSQL store needs the postgres extra: pip install 'handoffs[postgres]'"
            ) from exc
        self.url = url
        self.keep_messages = bool(keep_messages)
        self.retain = retain
        self.prune_every = prune_every
        self.timeout = float(timeout)
        self.pool_size = pool_size
        if refused_retain is not None and (not isinstance(refused_retain, timedelta)
                                           or refused_retain <= timedelta(0)):
            raise InvalidArgument(
                f"refused_retain must be a positive timedelta, got {refused_retain!r}")
        self.refused_retain = refused_retain
        if (isinstance(group_commit, bool) or not isinstance(group_commit, int | float)
                or not 0 <= group_commit <= min(0.1, self.timeout / 2)):
            raise InvalidArgument(
                "group_commit must be a number of seconds in [0, min(0.1, timeout / 2)], "
                f"got {group_commit!r}")
        self.group_commit = float(group_commit)
        self.where = _redact(url)
        self._lock = threading.Lock()
        self._pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]] | None = None
        self._pid = 0
        self._migrated = False
        self._writes = 0
        self._stalled_until = 0.0
        self._group = threading.Lock()
        self._full = threading.Event()
        self._queue: list[_Pending] = []
        self._flushing = False

    # ------------------------------------------------------------- connection

    def __repr__(self) -> str:
        return f"PostgresDecisionLog({self.where!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.url, "keep_messages": self.keep_messages, "retain": self.retain,
                "prune_every": self.prune_every, "timeout": self.timeout,
                "pool_size": self.pool_size, "refused_retain": self.refused_retain,
                "group_commit": self.group_commit}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def __enter__(self) -> PostgresDecisionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close this process's connections (they reopen on next use)."""
        with self._lock:
            pool, self._pool = self._pool, None
            if pool is not None and self._pid == os.getpid():
                pool.close(timeout=self.timeout)

    def _connections(self) -> psycopg_pool.ConnectionPool[psycopg.Connection[Any]]:
        with self._lock:
            if self._pool is None or self._pid != os.getpid():
                from psycopg_pool import ConnectionPool

                millis = max(1, round(self.timeout * 1000))
                # No check query per checkout: a broken connection fails its call
                # (closed) and the pool replaces it. Generic plans: the statements take
                # one JSON parameter, so replanning per call buys nothing. libpq's
                # connect timeout is whole seconds (at least 2); the call's deadline
                # bounds the wait anyway.
                self._pool = ConnectionPool(
                    self.url, min_size=1, max_size=self.pool_size, open=False,
                    kwargs={"autocommit": True,
                            "connect_timeout": max(2, int(self.timeout + 0.999)),
                            "options": f"-c statement_timeout={millis} "
                                       f"-c idle_in_transaction_session_timeout={millis} "
                                       f"-c lock_timeout={millis} "
                                       "-c plan_cache_mode=force_generic_plan"},
                    timeout=self.timeout, reconnect_timeout=max(self.timeout, 30.0),
                    name="handoffs",
                )
                self._pool.open(wait=False)
                self._pid, self._migrated, self._writes = os.getpid(), False, 0
            return self._pool

    def _run(self, body: Callable[[psycopg.Connection[Any]], T], *, what: str,
             deadline: float | None = None) -> T:
        import psycopg
        import psycopg_pool

        began = time.monotonic()
        deadline = began + self.timeout if deadline is None else deadline
        if began < self._stalled_until:
            raise DecisionLogError(f"cannot {what} in {self.where}: a call ran into the "
                                   f"{self.timeout:g} s timeout less than "
                                   f"{_STALL_HOLD:g} s ago (the server is stalled?)")
        try:
            with self._connections().connection(timeout=max(0.0, deadline - began)) as conn:
                ticket = _WATCHDOG.watch(deadline, conn)
                try:
                    if not self._migrated:
                        self._migrate(conn)
                    return body(conn)
                finally:
                    _WATCHDOG.done(ticket)
        except DecisionLogError:
            raise
        except (psycopg.Error, psycopg_pool.PoolTimeout, OSError) as exc:
            if time.monotonic() >= deadline:  # a stall, not a refusal: fail fast a while
                self._stalled_until = time.monotonic() + _STALL_HOLD
            raise DecisionLogError(
                f"cannot {what} in {self.where}: {type(exc).__name__}: {exc}".rstrip()
            ) from exc

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        """Create or migrate the schema to the current schema version (one transaction)."""
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute("CREATE SCHEMA IF NOT EXISTS handoffs")
            conn.execute("CREATE TABLE IF NOT EXISTS handoffs.meta "
                         "(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = conn.execute(
                "SELECT value FROM handoffs.meta WHERE key = 'schema_version'").fetchone()
            current = 0 if row is None else _version(row[0], self.where)
            for version in range(current + 1, int(_SCHEMA_VERSION) + 1):
                for statement in _MIGRATIONS[version].split(";"):
                    if statement.strip():
                        conn.execute(statement)
            conn.execute(
                "INSERT INTO handoffs.meta (key, value) VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (_SCHEMA_VERSION,))
        self._migrated = True

    # ---------------------------------------------------------------- the log

    def _params(
        self,
        decision: Decision,
        *,
        digest: str | None,
        message_bytes: int,
        message: bytes | None,
        decided_at: datetime,
        proposed_action: str | None,
    ) -> dict[str, Any]:
        if decided_at.tzinfo is None:
            raise InvalidArgument("times must be timezone-aware")
        name, _, version = (decision.contract or "").partition("/")
        self._writes += 1
        return {
            "decided_at": _stamp(decided_at), "receipt_id": decision.receipt_id,
            "digest": digest, "contract": name or None, "version": version or None,
            "sender": decision.sender, "receiver": decision.receiver,
            "step": int(decision.step), "verdict": decision.verdict.value,
            "action": decision.action, "proposed_action": proposed_action,
            "authority": decision.authority,
            "reasons": [r.to_json() for r in decision.reasons],
            "readback": decision.readback,
            "counterfactual_trigger": decision.counterfactual_trigger,
            "message_bytes": int(message_bytes),
            "message": ("\\x" + message.hex()
                        if self.keep_messages and message is not None else None),
            "pid": os.getpid(),
            "prune": self._writes % self.prune_every == 0,
            "refused_retain": _interval(self.refused_retain),
        }

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
        """Record one decision (one row; its reason codes are in ``reasons``).

        ``proposed_action`` is the sender's proposal (the admitted receipt's
        ``proposed_action``; ``None`` for a refusal), kept beside the decided action.

        Raises:
            DecisionLogError: the row could not be written.
        """
        params = _document(self._params(decision, digest=digest, message_bytes=message_bytes,
                                        message=message, decided_at=decided_at,
                                        proposed_action=proposed_action))
        self._run(lambda conn: conn.execute(_APPEND, params, prepare=True),
                  what="append a decision")

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
        """Claim ``claim.receipt_id`` and append ``decision`` in one statement.

        Returns False and writes nothing when the id was claimed before.

        Raises:
            DecisionLogError: nothing was written (or, if the connection broke during
                the commit, it cannot be known; a retry then finds the id claimed);
                code ``clock-skew`` when ``claim.claimed_at`` is older than the
                server's ``now()`` minus ``retain / 2``.
        """
        if claim.claimed_at.tzinfo is None or claim.expires.tzinfo is None:
            raise InvalidArgument("times must be timezone-aware")
        document = self._params(decision, digest=digest, message_bytes=message_bytes,
                                message=message, decided_at=decided_at,
                                proposed_action=proposed_action)
        document.update(claim=claim.receipt_id, claimed_at=_stamp(claim.claimed_at),
                        expires=_stamp(claim.expires), retain=_interval(self.retain),
                        skew=_interval(self.retain / 2))
        entry = _Pending(document, claim.receipt_id, time.monotonic() + self.timeout)
        if self.group_commit > 0:
            self._join(entry)
        else:
            self._flush([entry])
        if entry.error is not None:
            raise entry.error
        fresh, won = entry.outcome
        if not fresh:
            raise DecisionLogError(
                f"the claim of receipt {claim.receipt_id} was made at "
                f"{_stamp(claim.claimed_at)} by this process's clock, more than "
                f"retain/2 = {self.retain / 2} before the store's clock: this clock lags",
                code="clock-skew")
        return won

    def _flush(self, batch: list[_Pending]) -> None:
        """Record ``batch`` (distinct ids) in one statement; each entry gets its outcome."""
        documents = [dict(entry.document, n=n) for n, entry in enumerate(batch)]
        params = (orjson.dumps(documents).decode(),)
        try:
            rows = self._run(lambda conn: conn.execute(_RECORD, params, prepare=True).fetchall(),
                             what="record a decision",
                             deadline=min(entry.deadline for entry in batch))
        except DecisionLogError as exc:
            for entry in batch:
                entry.error = exc
        else:
            answered = {int(n): (bool(ok), bool(won)) for n, ok, won in rows}
            for n, entry in enumerate(batch):
                if n in answered:
                    entry.outcome = answered[n]
                else:  # cannot happen: every input row is answered
                    entry.error = DecisionLogError(
                        f"cannot record a decision in {self.where}: no answer for it")
        for entry in batch:
            entry.finished = True
            entry.wake.set()

    def _join(self, entry: _Pending) -> None:
        """Group commit: queue ``entry``; one caller at a time (the leader) records
        everything queued in one statement, then hands the lead to the next waiter.
        A waiter still queued at its deadline withdraws (nothing of it was written).
        """
        with self._group:
            self._queue.append(entry)
            if len(self._queue) >= _BATCH_MAX:
                self._full.set()
            lead = not self._flushing
            self._flushing = True
        if not lead:
            entry.wake.wait(max(0.0, entry.deadline - time.monotonic()))
            with self._group:
                if not entry.finished and not entry.lead and entry in self._queue:
                    self._queue.remove(entry)
                    entry.error = DecisionLogError(
                        f"cannot record a decision in {self.where}: not sent within the "
                        f"{self.timeout:g} s timeout (the server is slow or stalled?)")
                    return
            # In a batch under way (bounded by its deadline, ours or earlier), or leading.
            entry.wake.wait(self.timeout + 1.0)
            if not entry.finished and not entry.lead:
                entry.error = DecisionLogError(
                    f"cannot record a decision in {self.where}: no outcome within the "
                    f"{self.timeout:g} s timeout (it may have been recorded)")
                return
        while not entry.finished:
            with self._group:
                waiting = len(self._queue) > 1
            if waiting:  # others wait too: gather for the window, or a full batch
                self._full.wait(self.group_commit)
            # else commit at once: batches form under concurrency from the decisions
            # that queue while a statement is under way (adaptive group commit)
            with self._group:
                batch: list[_Pending] = []
                ids: set[str] = set()
                for queued in self._queue:
                    if queued.claim_id not in ids and len(batch) < _BATCH_MAX:
                        ids.add(queued.claim_id)
                        batch.append(queued)
                self._queue = [queued for queued in self._queue if queued not in batch]
                if len(self._queue) < _BATCH_MAX:
                    self._full.clear()
            self._flush(batch)
        with self._group:
            if self._queue:
                follower = self._queue[0]
                follower.lead = True
                follower.wake.set()
            else:
                self._flushing = False

    # ------------------------------------------------------------ replay store

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

    def ping(self) -> None:
        """Check that the server answers and the schema is current (readiness).

        Raises:
            DecisionLogError: it does not.
        """
        self._run(lambda conn: conn.execute("SELECT 1").fetchone(), what="reach the server")

    # ----------------------------------------------------------------- reading

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
                item["decided_at"] = _stamp(item["decided_at"])
            return result

        return self._run(query, what="read decisions")

    def summary(self) -> LogSummary:
        """The boundary metrics and totals over every decision in the log."""
        return self._run(_summarise, what="summarise decisions")


def _interval(span: timedelta | None) -> str | None:
    return None if span is None else f"{span.total_seconds():.6f} seconds"


def _document(document: dict[str, Any]) -> tuple[str]:
    return (orjson.dumps(document).decode(),)


def _version(value: str, where: str) -> int:
    if value.isdigit() and 1 <= int(value) <= int(_SCHEMA_VERSION):
        return int(value)
    raise DecisionLogError(
        f"decision log schema version {value!r} in {where} is not {_SCHEMA_VERSION!r} or "
        "older (written by a newer handoffs?)",
        code="log-version",
    )


_POSTGRES: Final = SummaryDialect(
    prefix="handoffs.", any_code="r.code = ANY(%s::text[])", codes=list, stamp=_stamp)


def _summarise(conn: psycopg.Connection[Any]) -> LogSummary:
    return summarise(conn, _POSTGRES)
