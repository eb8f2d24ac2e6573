"""The lab's call cache: a model is asked at most once per distinct request.

:class:`CallCache` is a SQLite file shared by every thread, worker process and later
run that opens it (WAL mode, one connection per thread). Entries are keyed by the
receiver's fingerprint (its frozen declaration: template digest, route, parameters,
response format, tools, name) and the request as sent (rendered prompt, parameters,
response format), so a changed prompt or parameter is a new entry, never a stale hit.

A request being answered is *claimed* first (a row naming its owner process), so
that two workers that need the same answer at once make one call: the second waits
for the first's answer. A claim whose owner has died (a stopped run) is taken over.
Failures are never cached.

:class:`LabClient` wraps a model receiver's client for one run: the cache, the run's
call and token budget (:class:`Budget`), in that order. The cache lives here, in the
lab, around the client, not in the receiver or the gate.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import attrs

from handoffs._errors import BudgetExceeded, CallCacheError
from handoffs.receivers.models import ChatClient, ChatRequest, Completion

__all__ = ["Budget", "BudgetExceeded", "CallCache", "CallCacheError", "LabClient"]


_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, receiver TEXT NOT NULL, "
    "content TEXT NOT NULL, tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL, "
    "latency_ms REAL NOT NULL, finish_reason TEXT, created REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, owner TEXT NOT NULL, "
    "pid INTEGER NOT NULL, created REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS budgets (run TEXT PRIMARY KEY, calls INTEGER NOT NULL, "
    "tokens INTEGER NOT NULL)",
    # an answer stored drops its claim in the same statement (see CallCache.put)
    "CREATE TRIGGER IF NOT EXISTS answered AFTER INSERT ON calls BEGIN "
    "DELETE FROM claims WHERE key = NEW.key; END",
)
_STALE_CLAIM: Final = 900.0  # seconds after which any claim is taken over
_POLL: Final = 0.005
_SENT_KEPT: Final = 65_536
_SELECT_MANY: Final = ("SELECT key, content, tokens_in, tokens_out, finish_reason, created "
                       "FROM calls WHERE key IN")
_HASH_SLICE: Final = 2047  # below CPython's HASHLIB_GIL_MINSIZE (2048)
_BATCH: Final = 500  # keys per look-up statement (SQLite allows 32,766 parameters)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


class CallCache:
    """A persistent cache of model answers (SQLite), safe across threads and processes.

    Args:
        path: the SQLite file (created with its directory).
        refresh: ignore entries written before this cache object was made (they are
            replaced as requests come in: ``--refresh``).
    """

    def __init__(self, path: Path | str, *, refresh: bool = False,
                 _since: float | None = None) -> None:
        self.path = Path(path)
        self.refresh = refresh
        self.since = (time.time() if refresh else 0.0) if _since is None else _since
        self.owner = f"{os.getpid()}-{id(self)}-{time.time_ns()}"
        self._local = threading.local()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._tx() as db:
                for statement in _SCHEMA:
                    db.execute(statement)
        except (OSError, sqlite3.Error) as exc:
            raise CallCacheError(f"cannot open the call cache {self.path}: {exc}") from exc

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_cache, (str(self.path), self.refresh, self.since))

    def _db(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None or getattr(self._local, "pid", None) != os.getpid():
            db = sqlite3.connect(self.path, timeout=60, isolation_level=None,
                                 check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
            self._local.pid = os.getpid()
            with _OPEN_LOCK:
                _OPEN.append(db)
        return db

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    @staticmethod
    def key(fingerprint: str, request: ChatRequest) -> str:
        """The entry key: the receiver's fingerprint, the request as sent, and the
        request's sample index when it is not 0 (``n`` draws of a sampled receiver are
        ``n`` entries).
        """
        found = hashlib.sha256((fingerprint + "\n").encode("utf-8"))
        body = memoryview(request.body())  # encoded once: the call sends the same bytes
        # Fed in slices below 2 KiB: hashlib gives up the interpreter for larger ones,
        # and the thread that makes a run's requests would then wait a switch interval
        # (5 ms) to get it back from the call threads, for every request.
        for at in range(0, len(body), _HASH_SLICE):
            found.update(body[at:at + _HASH_SLICE])
        if request.sample:
            found.update(f"\nsample {request.sample}".encode())
        return found.hexdigest()

    def get(self, key: str) -> Completion | None:
        """The cached answer for ``key`` (``cached=True``, zero latency), if any."""
        row = self._db().execute(
            "SELECT content, tokens_in, tokens_out, finish_reason, created FROM calls "
            "WHERE key = ?", (key,)).fetchone()
        if row is None or row[4] < self.since:
            return None
        return Completion(content=row[0], tokens_in=row[1], tokens_out=row[2],
                          latency_ms=0.0, cached=True, finish_reason=row[3])

    def get_many(self, keys: Sequence[str]) -> dict[str, Completion]:
        """The cached answers for ``keys`` (those it has), as :meth:`get` gives them, in
        one statement per ``_BATCH`` keys (a scheduling pass looks up its whole
        batch at once).
        """
        unique = list(dict.fromkeys(keys))
        found: dict[str, Completion] = {}
        db = self._db()
        for at in range(0, len(unique), _BATCH):
            part = unique[at:at + _BATCH]
            marks = ", ".join("?" * len(part))
            statement = f"{_SELECT_MANY} ({marks})"
            rows = db.execute(statement, part).fetchall()
            for key, content, tokens_in, tokens_out, finish_reason, created in rows:
                if created >= self.since:
                    found[key] = Completion(content=content, tokens_in=tokens_in,
                                            tokens_out=tokens_out, latency_ms=0.0,
                                            cached=True, finish_reason=finish_reason)
        return found

    def put(self, key: str, receiver: str, completion: Completion) -> None:
        """Store an answer and drop its claim: one statement, committed when it
        returns (the connection autocommits), so that the answer is durable as soon
        as possible after it arrived.
        """
        self._db().execute(
            "INSERT OR REPLACE INTO calls VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (key, receiver, completion.content, completion.tokens_in,
             completion.tokens_out, completion.latency_ms, completion.finish_reason,
             time.time()))

    def claim(self, key: str) -> bool:
        """Claim ``key`` for this process; ``False`` if a live owner holds it.

        Each statement commits on its own (the connection autocommits), so the file's
        write lock is held only while SQLite runs one statement, never across this
        thread's waits for the interpreter: an answer arriving meanwhile is stored at
        once (:meth:`put`).
        """
        db = self._db()
        now = time.time()
        if db.execute("INSERT OR IGNORE INTO claims VALUES (?, ?, ?, ?)",
                      (key, self.owner, os.getpid(), now)).rowcount == 1:
            return True
        row = db.execute("SELECT owner, pid, created FROM claims WHERE key = ?",
                         (key,)).fetchone()
        if row is None:  # released meanwhile: claim it again
            return self.claim(key)
        owner, pid, created = row
        if owner == self.owner or (_alive(pid) and now - created < _STALE_CLAIM):
            return False
        # the owner died (a stopped run) or is stale: take over, unless someone did
        return db.execute(
            "UPDATE claims SET owner = ?, pid = ?, created = ? WHERE key = ? AND owner = ? "
            "AND created = ?", (self.owner, os.getpid(), now, key, owner, created)
        ).rowcount == 1

    def release(self, key: str) -> None:
        """Drop this process's claim on ``key`` (the call failed)."""
        self._db().execute("DELETE FROM claims WHERE key = ? AND owner = ?",
                           (key, self.owner))

    def entries(self) -> int:
        """How many answers the cache holds."""
        return int(self._db().execute("SELECT count(*) FROM calls").fetchone()[0])

    # ------------------------------------------------------------------ budgets

    def charge_call(self, run: str, max_calls: int | None, max_tokens: int | None) -> bool:
        """Count one call against run ``run``'s budget; ``False`` when it is spent."""
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO budgets VALUES (?, 0, 0)", (run,))
            calls, tokens = db.execute("SELECT calls, tokens FROM budgets WHERE run = ?",
                                       (run,)).fetchone()
            if (max_calls is not None and calls >= max_calls) or \
                    (max_tokens is not None and tokens >= max_tokens):
                return False
            db.execute("UPDATE budgets SET calls = calls + 1 WHERE run = ?", (run,))
        return True

    def charge_tokens(self, run: str, tokens: int) -> None:
        """Add a call's tokens to run ``run``'s count."""
        with self._tx() as db:
            db.execute("UPDATE budgets SET tokens = tokens + ? WHERE run = ?", (tokens, run))


_OPEN: list[sqlite3.Connection] = []
_OPEN_LOCK: Final = threading.Lock()


def close_connections() -> None:
    """Close every cache connection this process opened (end of a run)."""
    with _OPEN_LOCK:
        while _OPEN:
            _OPEN.pop().close()


def _rebuild_cache(path: str, refresh: bool, since: float) -> CallCache:
    return CallCache(path, refresh=refresh, _since=since)


@attrs.frozen(kw_only=True)
class Budget:
    """A run's model budget: calls and tokens (in + out) over the whole run.

    With a call cache the counts are kept in its file (shared by worker processes);
    without one, in this process.
    """

    run: str
    max_calls: int | None = None
    max_tokens: int | None = None
    cache: CallCache | None = None
    _counts: list[int] = attrs.field(factory=lambda: [0, 0], eq=False, repr=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, eq=False, repr=False)

    @property
    def limited(self) -> bool:
        """Whether any limit is set."""
        return self.max_calls is not None or self.max_tokens is not None

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_budget, (self.run, self.max_calls, self.max_tokens, self.cache))

    def charge_call(self) -> None:
        """Count one call, or raise :class:`BudgetExceeded`."""
        if not self.limited:
            return
        if self.cache is not None:
            allowed = self.cache.charge_call(self.run, self.max_calls, self.max_tokens)
        else:
            with self._lock:
                calls, tokens = self._counts
                allowed = not ((self.max_calls is not None and calls >= self.max_calls)
                               or (self.max_tokens is not None and tokens >= self.max_tokens))
                if allowed:
                    self._counts[0] += 1
        if not allowed:
            raise BudgetExceeded(f"the run's model budget is spent (max_calls="
                                 f"{self.max_calls}, max_tokens={self.max_tokens})")

    def charge_tokens(self, tokens: int) -> None:
        """Count a call's tokens."""
        if not self.limited or not tokens:
            return
        if self.cache is not None:
            self.cache.charge_tokens(self.run, tokens)
        else:
            with self._lock:
                self._counts[1] += tokens


def _rebuild_budget(run: str, max_calls: int | None, max_tokens: int | None,
                    cache: CallCache | None) -> Budget:
    return Budget(run=run, max_calls=max_calls, max_tokens=max_tokens, cache=cache)


@attrs.frozen(kw_only=True)
class LabClient:
    """A model receiver's client as the lab runs it: answers sent ahead, the call
    cache, then the budget, then the receiver's own client.

    Attributes:
        inner: the receiver's client.
        fingerprint: the receiver's fingerprint (part of every cache key).
        receiver: the receiver's name (recorded with cache entries).
        cache: the call cache (``None``: ``--no-cache``).
        budget: the run's budget (``None``: unlimited).
    """

    inner: ChatClient
    fingerprint: str
    receiver: str
    cache: CallCache | None = None
    budget: Budget | None = None
    # calls sent ahead by a scheduling pass (this process), by cache key
    _sent: dict[str, cf.Future[Completion]] = attrs.field(init=False, factory=dict,
                                                          eq=False, repr=False)
    _lock: threading.Lock = attrs.field(init=False, factory=threading.Lock, eq=False,
                                        repr=False)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_client, (self.inner, self.fingerprint, self.receiver, self.cache,
                                  self.budget))

    @property
    def max_concurrency(self) -> int | None:
        """The inner client's concurrency bound, if it declares one."""
        found = getattr(self.inner, "max_concurrency", None)
        return found if isinstance(found, int) else None

    def close(self) -> None:
        """Close the inner client's connections, if it has any (it reopens on use)."""
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()

    def complete(self, request: ChatRequest) -> Completion:
        """The answer sent ahead (:meth:`send`), else the cached answer, else the
        model's (stored before it is returned).
        """
        key = CallCache.key(self.fingerprint, request)
        with self._lock:
            future = self._sent.get(key)
        if future is not None:
            try:
                return future.result()
            except BaseException:
                with self._lock:  # asked again, a failed call is sent again
                    if self._sent.get(key) is future:
                        del self._sent[key]
                raise
        return self._answer(key, request)

    def key(self, request: ChatRequest) -> str:
        """The call cache's key for ``request`` (:meth:`CallCache.key`)."""
        return CallCache.key(self.fingerprint, request)

    def sent(self, key: str) -> cf.Future[Completion] | None:
        """The call for ``key`` already on its way (sent ahead in this process), if any."""
        with self._lock:
            return self._sent.get(key)

    def cached(self, keys: Sequence[str]) -> dict[str, Completion]:
        """The call cache's answers for ``keys`` (one look-up for them all)."""
        return {} if self.cache is None or not keys else self.cache.get_many(keys)

    def send(self, key: str, request: ChatRequest,
             submit: Callable[..., cf.Future[Completion]]) -> cf.Future[Completion]:
        """The call for ``request`` (key ``key``) on its way: sent through ``submit``
        (the run's call pool) unless it already was. The lab's scheduling pass produces
        every request (admission, rendering, cache look-up) itself; the pool's threads
        only wait for the model and store its answer. A later :meth:`complete` of the
        same request gets the same answer.
        """
        with self._lock:
            future = self._sent.get(key)
            if future is not None:
                return future
            if len(self._sent) >= _SENT_KEPT:
                self._sent.clear()  # bounded; the answers are in the cache, if any
            future = self._sent[key] = submit(self._answer, key, request)
        # Outside the lock: a future that has already failed (an inline executor, a
        # budget already spent) runs the callback at once, and _settled takes the lock.
        future.add_done_callback(functools.partial(self._settled, key))
        return future

    def _settled(self, key: str, future: cf.Future[Completion]) -> None:
        """Forget a call sent ahead that failed: asked again, it is sent again."""
        if future.cancelled() or future.exception() is not None:
            with self._lock:
                if self._sent.get(key) is future:
                    del self._sent[key]

    def _answer(self, key: str, request: ChatRequest) -> Completion:
        """The cached answer, or the model's, committed to the cache before it is
        returned (in the thread that received it).
        """
        cache = self.cache
        if cache is None:
            return self._call(request)
        while True:
            found = cache.get(key)
            if found is not None:
                return found
            if cache.claim(key):
                break
            time.sleep(_POLL)  # another worker is asking the model this very request
        try:
            if self.budget is not None:
                self.budget.charge_call()
            completion = self.inner.complete(request)
        except BaseException:
            cache.release(key)
            raise
        # Committed first, in the thread that received it, before anything else (a
        # run stopped from here on finds the answer when resumed).
        cache.put(key, self.receiver, completion)
        self._charge(completion)
        return completion

    def _call(self, request: ChatRequest) -> Completion:
        if self.budget is not None:
            self.budget.charge_call()
        completion = self.inner.complete(request)
        self._charge(completion)
        return completion

    def _charge(self, completion: Completion) -> None:
        if self.budget is not None:
            self.budget.charge_tokens(completion.tokens_in + completion.tokens_out)


def _rebuild_client(inner: ChatClient, fingerprint: str, receiver: str,
                    cache: CallCache | None, budget: Budget | None) -> LabClient:
    return LabClient(inner=inner, fingerprint=fingerprint, receiver=receiver, cache=cache,
                     budget=budget)
