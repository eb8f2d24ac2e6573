"""Run-wide memoisation and the call pool that keeps slow receivers busy.

The chunks of one run share, in each process, one :class:`_Shared`: the decisions of
every deterministic receiver by memo key (bounded; an entry is made by the first chunk
that needs it and filled once, so two chunks never call a receiver for the same key),
the interned memo-key projections, and a pool of ``plan.concurrency`` threads to which
a chunk's scheduling pass hands its slow (model) receivers' distinct messages, so that
their calls overlap across cases. Failed calls (a receiver that raised, a model call
that failed) are reported once and never reused.

Across processes and runs, a model receiver's answers are kept by the call cache
(:mod:`handoffs.lab._cache`) around its client.
"""

from __future__ import annotations

import concurrent.futures as cf
import itertools
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Final

from handoffs.lab._plan import Plan
from handoffs.receivers._decision import Receiver
from handoffs.receivers._model import TRANSIENT_CODES

__all__ = ["release_shared"]


class _Entry:
    """One run-wide memo entry: an outcome, or the call that will produce it.

    ``ahead``: a scheduling pass sent the entry's request to the model; the first
    deciding pass to need the entry decides it (finding the answer sent ahead).
    """

    __slots__ = ("ahead", "counted", "done", "latency", "outcome", "usage")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.ahead = False
        self.outcome: tuple[str, str, tuple[str, ...]] | None = None
        self.latency = 0
        self.usage: tuple[int, int, int, float] | None = None
        self.counted = False

    def set(self, outcome: tuple[str, str, tuple[str, ...]], latency: int,
            usage: tuple[int, int, int, float] | None) -> None:
        self.outcome, self.latency, self.usage = outcome, latency, usage
        self.done.set()


class _Shared:
    """What the chunks of one run share in one process: the run-wide memo (each
    deterministic receiver's decisions by memo key, bounded), the interned memo-key
    projections, and the pool that keeps slow receivers busy across cases.
    """

    def __init__(self, plan: Plan) -> None:
        self.memo: dict[Hashable, _Entry] = {}
        self.interned: dict[Hashable, int] = {}
        self.ids = itertools.count()
        self.lock = threading.Lock()
        self.pool: cf.ThreadPoolExecutor | None = None
        self.concurrency = plan.concurrency

    def intern(self, projected: Hashable) -> int:
        """A small id for a memo-key projection. Ids are never reused, so bounding the
        table (clearing it) loses reuse, never soundness.
        """
        found = self.interned.get(projected)
        if found is None:
            with self.lock:
                found = self.interned.get(projected)
                if found is None:
                    if len(self.interned) >= _RUN_MEMO_LIMIT:
                        self.interned.clear()
                    found = self.interned[projected] = next(self.ids)
        return found

    def entry(self, key: Hashable) -> tuple[_Entry, bool]:
        """(the entry for ``key``, whether this caller made it, or claimed the entry
        sent ahead, and must fill it).
        """
        found = self.memo.get(key)
        if found is None:
            with self.lock:
                found = self.memo.get(key)
                if found is None:
                    if len(self.memo) >= _RUN_MEMO_LIMIT:
                        self.memo.clear()  # bounded memory; the call cache keeps answers
                    made = self.memo[key] = _Entry()
                    return made, True
        return found, self.claim(found)

    def claim(self, entry: _Entry) -> bool:
        """Whether this caller takes ``entry``, sent ahead, to decide it."""
        if not entry.ahead:
            return False
        with self.lock:
            taken, entry.ahead = entry.ahead, False
        return taken

    def wait(self, entry: _Entry) -> bool:
        """Wait for ``entry``'s outcome; ``True`` if this caller claimed it meanwhile
        (sent ahead, its own decider gone: the memo dropped it) and must decide it.
        """
        while not entry.done.wait(0.05):
            if self.claim(entry):
                return True
        return False

    def forget(self, key: Hashable, entry: _Entry) -> None:
        with self.lock:
            if self.memo.get(key) is entry:
                del self.memo[key]

    def take(self, entry: _Entry) -> bool:
        """Whether this caller is the first to count ``entry``'s call."""
        with self.lock:
            if entry.counted:
                return False
            entry.counted = True
            return True

    def start(self) -> cf.ThreadPoolExecutor:
        """The call pool, with all its threads started (so that starting them does not
        hold back the first calls).
        """
        with self.lock:
            if self.pool is None:
                pool = cf.ThreadPoolExecutor(max_workers=self.concurrency,
                                             thread_name_prefix="handoffs-calls")
                barrier = threading.Barrier(self.concurrency + 1)
                for _ in range(self.concurrency):
                    pool.submit(barrier.wait, 60)
                barrier.wait(60)
                self.pool = pool
            return self.pool

    def submit(self, fn: Callable[..., Any], *args: Any) -> cf.Future[Any]:
        """Run ``fn(*args)`` on the call pool."""
        pool = self.pool
        if pool is None:
            pool = self.start()
        return pool.submit(fn, *args)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


_RUN_MEMO_LIMIT: Final = 65_536
_RUNS_KEPT: Final = 8


_shared: dict[str, _Shared] = {}


def _shared_for(plan: Plan) -> _Shared:
    found = _shared.get(plan.token)
    if found is None:
        with _SHARED_LOCK:
            found = _shared.get(plan.token)
            if found is None:
                if len(_shared) >= _RUNS_KEPT:
                    for stale in _shared.values():
                        stale.close()
                    _shared.clear()
                found = _shared[plan.token] = _Shared(plan)
    return found


def release_shared(token: str) -> None:
    """Drop one run's shared state in this process (the end of the run)."""
    with _SHARED_LOCK:
        found = _shared.pop(token, None)
    if found is not None:
        found.close()


_SHARED_LOCK: Final = threading.Lock()


def _decide(receiver: Receiver, message: Mapping[str, Any], fail: str
            ) -> tuple[tuple[str, str, tuple[str, ...]], int, tuple[int, int, int, float] | None,
                       bool]:
    """(outcome, latency µs, model usage, memoisable) of one receiver call."""
    started = time.perf_counter_ns()
    usage: tuple[int, int, int, float] | None = None
    try:
        decision = receiver.receive(message)
        outcome = (
            str(decision.action) if decision.action is not None else fail,
            decision.verdict.value,
            tuple(r.code for r in decision.reasons),
        )
        record = decision.record
        if "tokens_in" in record and "cached" in record:
            usage = (1 if record["cached"] else 0, int(record["tokens_in"]),
                     int(record["tokens_out"]), float(record.get("latency_ms", 0.0)))
        ok = _memoisable(outcome)
    except Exception as exc:  # a receiver must not raise; record it as an error
        outcome = (fail, "ERROR", (f"receiver-raised:{type(exc).__name__}",))
        ok = False
    return outcome, (time.perf_counter_ns() - started) // 1000, usage, ok


def _memoisable(outcome: tuple[str, str, tuple[str, ...]]) -> bool:
    """Whether an outcome may be reused: not an error, not a failed model call."""
    return outcome[1] != "ERROR" and not TRANSIENT_CODES.intersection(outcome[2])
