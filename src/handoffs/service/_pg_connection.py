"""The PostgreSQL store's connections: a pool per process, one deadline per call, and a
watchdog that cuts the connection of a call whose server does not answer.

Every call runs through ``Connection._run``: the wait for a connection and the
statement share ``timeout``; a call past it fails closed with
:class:`~handoffs.errors.DecisionLogError`, and after a stall further calls of the
process fail at once for a while (``_STALL_HOLD``). The first call of a process migrates
the schema (``_pg_schema.migrate``).
"""

from __future__ import annotations

import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from handoffs._logs import DecisionLogError
from handoffs.service._pg_schema import migrate

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = ["Connection", "redact"]

T = TypeVar("T")


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


def redact(url: str) -> str:
    """The URL without its password (for error messages and logs)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(url)
    except Exception:  # a malformed URL is reported by the driver when used
        return "<postgresql url>"
    host, port = str(parts.get("host", "")), str(parts.get("port", ""))
    user, db = str(parts.get("user", "")), str(parts.get("dbname", ""))
    return f"postgresql://{user + '@' if user else ''}{host}{':' + port if port else ''}/{db}"


class Connection:
    """The connection side of the store: the pool of this process and the calls on it."""

    url: str
    timeout: float
    pool_size: int
    where: str
    _lock: threading.Lock
    _pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]] | None
    _pid: int
    _migrated: bool
    _writes: int
    _stalled_until: float

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
                        migrate(conn, self.where)
                        self._migrated = True
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
