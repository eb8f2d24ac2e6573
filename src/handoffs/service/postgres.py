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

The store is one class over five rooms: connections and deadlines
(``_pg_connection``), the schema and its migrations (``_pg_schema``), the decision log
and group commit (``_pg_log``), the replay store (``_pg_replay``) and reading
(``_pg_summary``).
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from handoffs._errors import InvalidArgument
from handoffs._logs import (
    DEFAULT_PRUNE_EVERY,
    DEFAULT_RETAIN,
    DecisionLogError,
    check_retention,
)
from handoffs.service._pg_connection import redact
from handoffs.service._pg_log import DecisionLogRows, _Pending
from handoffs.service._pg_replay import ReplayRows
from handoffs.service._pg_summary import Reading

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = ["PostgresDecisionLog"]


class PostgresDecisionLog(DecisionLogRows, ReplayRows, Reading):
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
        self.where = redact(url)
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

    def ping(self) -> None:
        """Check that the server answers and the schema is current (readiness).

        Raises:
            DecisionLogError: it does not.
        """
        self._run(lambda conn: conn.execute("SELECT 1").fetchone(), what="reach the server")
