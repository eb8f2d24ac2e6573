#!/usr/bin/env python3
"""What the lab costs with a slow receiver: model calls, resumption, concurrency.

The built-in payment experiment on the essay's interventions (``profile="essay"``)
with two of its receivers replaced by :class:`~handoffs.receivers.ModelReceiver`
instances whose client is a *latency model*: it sleeps 20 ms per call, answers
deterministically (the payment policy applied to the decision state in the prompt,
``ESCALATE`` when there is none) and logs one line per call to a file, so that calls
are counted across threads and processes. It stands in for a remote model provider,
whose bookkeeping costs the lab nothing: only the resume measurement's runs, whose
log is read while they run, write each line as the call ends (with its cache key);
the other runs note calls in memory and write the lines (request digests included)
after the run: a stand-in that hashes a 4 KB request and writes a line in the lab's
call threads spent 230 µs of CPU per call there, where the lab's own work took about
90 (see :class:`LatencyModel`). The lab's side (run-wide memo, scheduling pass,
call cache, run log) is the library's real code. The two receivers are the decision
contract's (admitted by the payment gate) and the full record's (admitted by a
governance checker).

Printed figures:

- ``calls/distinct: <x>``: model calls ÷ distinct requests the model saw, over a
  whole run of ``--cases`` (≥ 2,800) cases with a fresh call cache (target ≤ 1.0).
- ``resumed repeat calls: <n>``: a run with a run log and call cache is started in a
  child process and killed (SIGKILL) once about half of its calls are made, then
  resumed; ``n`` is how many requests the resumed run sent whose answers the killed
  run had received and stored (target 0). A call the model had answered at the
  instant of the kill but whose answer the killed process had not yet committed is
  counted apart (``answered at the kill, not yet stored``): the model writes its log
  line before it returns the answer, and the library commits the answer in the
  thread that receives it as its first act, but no code of the killed process runs
  between the model's line and that commit, so no library can keep such a call from
  being asked again; the script checks the call cache file right after the kill.
- ``effective concurrency: <x> of <w>``: the latency model's busy time (20 ms per
  call, as the provider counts it) ÷ the wall time from the first call's start to the
  last call's end, at 280 cases with ``w`` = 16 calls in flight (target ≥ 0.8 · w).
  A chunk's scheduling pass makes all its requests before it sends them together, so
  the figure starts with the first chunk's calls; the line before it gives the whole
  run's time too.

Each run is bounded (``--budget`` seconds overall, default 240); the script says
when it had to stop early.

    python benchmarks/model_receiver.py
"""

from __future__ import annotations

import argparse
import hashlib
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import attrs

from handoffs.examples.payment import PAYMENT_RELEASE
from handoffs.examples.payment_lab import payment_experiment, payment_gate
from handoffs.lab import GovernanceChecker, run
from handoffs.lab._cache import CallCache, close_connections
from handoffs.receivers import ChatRequest, Completion, ModelReceiver

LATENCY = 0.020
WIDTH = 16


def _policy(state: dict[str, Any]) -> str:
    """The contract's own policy on what the message states; undetermined fails closed."""
    action = PAYMENT_RELEASE.evaluate(state).action
    return PAYMENT_RELEASE.fail_closed_action.value if action is None else action.value


@attrs.frozen
class LatencyModel:
    """A chat client that sleeps ``latency`` seconds per call and logs the call.

    Each line of ``log`` is ``<request digest> <start> <end> <cache key>`` (seconds,
    monotonic clock of the machine; the key under which the lab's call cache stores
    the answer for the receiver with ``fingerprint``, ``-`` without one). With a
    ``fingerprint`` (the resume measurement, whose log is read while the run goes on
    and after it is killed) each line is written and flushed when its call completes;
    without one, the call only notes its request and times in memory and
    :func:`write_logs` writes the lines (digests included) after the run, so that a
    stand-in provider's bookkeeping (a digest of a 4 KB request, a write that gives up
    the interpreter lock) does not take the lab's CPU while its calls are measured.
    """

    log: str
    latency: float = LATENCY
    max_concurrency: int = WIDTH
    fingerprint: str = ""
    _lock: threading.Lock = attrs.field(factory=threading.Lock, eq=False, repr=False)

    def __reduce__(self) -> tuple[Any, ...]:
        return (LatencyModel, (self.log, self.latency, self.max_concurrency,
                               self.fingerprint))

    def complete(self, request: ChatRequest) -> Completion:
        """Sleep, answer, log."""
        start = time.monotonic()
        time.sleep(self.latency)
        prompt = request.messages[-1][1]
        action = "ESCALATE"
        opening = prompt.find("{")
        if opening >= 0:
            state = json.loads(prompt[opening:prompt.rindex("}") + 1]).get("decision_state")
            if isinstance(state, dict):
                action = _policy(state)
        end = time.monotonic()
        if self.fingerprint:
            line = _line(request, start, end, CallCache.key(self.fingerprint, request))
            with self._lock:
                out = _LOGS.get(self.log)
                if out is None:
                    out = _LOGS[self.log] = open(self.log, "a", encoding="utf-8")  # noqa: SIM115
                out.write(line)
                out.flush()
        else:
            _NOTED.setdefault(self.log, []).append((request, start, end))  # atomic append
        return Completion(content=json.dumps({"action": action}),
                          tokens_in=len(prompt) // 4, tokens_out=7,
                          latency_ms=(end - start) * 1000)


def _line(request: ChatRequest, start: float, end: float, key: str) -> str:
    digest = hashlib.sha256(repr((request.model, request.messages, request.temperature,
                                  request.seed, request.max_tokens)).encode()).hexdigest()
    return f"{digest[:24]} {start:.6f} {end:.6f} {key}\n"


_LOGS: dict[str, Any] = {}
_NOTED: dict[str, list[tuple[ChatRequest, float, float]]] = {}


def write_logs() -> None:
    """Write the lines of the calls noted in memory (see :class:`LatencyModel`)."""
    for log, noted in list(_NOTED.items()):
        with open(log, "a", encoding="utf-8") as out:
            out.writelines(_line(request, start, end, "-") for request, start, end in noted)
        del _NOTED[log]


def experiment(variants: int, log: str, *, keyed: bool = False) -> Any:
    """The essay-profile experiment with two latency-model receivers (whose calls log
    their cache keys when ``keyed``: the resume measurement).
    """
    base = payment_experiment(variants=variants, profile="essay")
    model = LatencyModel(log)
    declared = {
        "decision_contract": ModelReceiver(gate=payment_gate(), client=model,
                                           model_route="latency/20ms",
                                           name="latency-contract"),
        "full_record": ModelReceiver(gate=GovernanceChecker(PAYMENT_RELEASE, required=()),
                                     client=model, model_route="latency/20ms",
                                     name="latency-full-record"),
    }
    receivers = {name: attrs.evolve(r, client=attrs.evolve(
        model, fingerprint=r.fingerprint() if keyed else "")) for name, r in declared.items()}
    strategies = tuple(attrs.evolve(s, receiver=receivers[s.name]) if s.name in receivers
                       else s for s in base.strategies)
    return attrs.evolve(base, strategies=strategies)


def calls_in(log: Path) -> list[tuple[str, float, float]]:
    return [(digest, start, end) for digest, start, end, _ in keyed_calls_in(log)]


def keyed_calls_in(log: Path) -> list[tuple[str, float, float, str]]:
    if not log.exists():
        return []
    out = []
    for line in log.read_text(encoding="utf-8").splitlines():
        digest, start, end, key = line.split()
        out.append((digest, float(start), float(end), key))
    return out


def child(args: argparse.Namespace) -> None:
    """One run in this process (the resume measurement's killed run)."""
    run(experiment(args.variants, args.log, keyed=True), run_log=args.run_log, cache=args.cache,
        resume=args.resume, chunk_size=args.chunk_size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=2800)
    parser.add_argument("--budget", type=float, default=240.0)
    parser.add_argument("--chunk-size", type=int, default=256)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--variants", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    parser.add_argument("--run-log", help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    parser.add_argument("--resume", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run for CI: 280 cases, 120 s budget")
    args = parser.parse_args()
    if args.quick:
        args.cases, args.budget = 280, 120.0
    if args.child:
        child(args)
        return
    deadline = time.monotonic() + args.budget
    variants = max(1, -(-args.cases // 7))
    work = Path(tempfile.mkdtemp(prefix="handoffs-model-bench-"))
    print(f"latency model: {LATENCY * 1000:.0f} ms per call; essay profile; "
          f"{7 * variants} cases; chunk size {args.chunk_size}")
    calls, elapsed = calls_per_distinct(work, variants, args.chunk_size)
    if time.monotonic() + 3 * elapsed + 30 > deadline:
        print("resumed repeat calls: not measured (over the time budget)")
    else:
        resumed_repeats(work, variants, args.chunk_size, calls, elapsed)
    concurrency(work, args.chunk_size)


def calls_per_distinct(work: Path, variants: int, chunk_size: int) -> tuple[int, float]:
    """(1) Model calls / distinct requests over a whole run, fresh call cache."""
    log = work / "calls-1.log"
    started = time.perf_counter()
    report = run(experiment(variants, str(log)), cache=work / "calls-1.sqlite",
                 chunk_size=chunk_size).report
    elapsed = time.perf_counter() - started
    write_logs()
    calls = calls_in(log)
    distinct = len({d for d, _, _ in calls})
    print(f"run: {elapsed:.1f} s wall, {len(calls)} model calls, {distinct} distinct requests, "
          f"{report['provenance']['memo_hits']} memo hits")
    for row in report["cost"]["strategies"]:
        print(f"  {row['strategy']}: {row['model_calls']} calls, {row['cache_hits']} cache "
              f"hits, {row['tokens_in']} tokens in, {row['tokens_out']} out")
    print(f"calls/distinct: {len(calls) / distinct:.3f}")
    return len(calls), elapsed


def resumed_repeats(work: Path, variants: int, chunk_size: int, calls: int,
                    elapsed: float) -> None:
    """(2) Stop a run midway (SIGKILL once half its calls are answered), resume it."""
    first, second = work / "calls-2a.log", work / "calls-2b.log"
    run_log, cache = work / "run.jsonl", work / "calls-2.sqlite"
    common = [sys.executable, __file__, "--child", "--variants", str(variants),
              "--run-log", str(run_log), "--cache", str(cache),
              "--chunk-size", str(chunk_size)]
    proc = subprocess.Popen([*common, "--log", str(first)])  # noqa: S603 - ourselves
    limit = time.monotonic() + max(60.0, 6 * elapsed)
    while proc.poll() is None and len(calls_in(first)) < calls // 2 \
            and time.monotonic() < limit:
        time.sleep(0.01)
    killed = proc.poll() is None
    if killed:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    logged = keyed_calls_in(first)
    answered = {d for d, _, _, _ in logged}
    kept = CallCache(cache)
    stored = {d for d, _, _, key in logged if kept.get(key) is not None}
    close_connections()
    subprocess.run([*common, "--log", str(second), "--resume"],  # noqa: S603
                   check=True, timeout=max(60.0, 6 * elapsed))
    resumed = [d for d, _, _ in calls_in(second)]
    repeat = sum(1 for d in resumed if d in stored)
    lost = answered - stored
    print(f"stopped run: {'killed' if killed else 'finished before the kill'} after "
          f"{len(answered)} answered calls ({len(stored)} stored); answered at the kill, "
          f"not yet stored: {len(lost)} (asked again: "
          f"{sum(1 for d in resumed if d in lost)}); resumed run: {len(resumed)} calls")
    print(f"resumed repeat calls: {repeat}")


def concurrency(work: Path, chunk_size: int) -> None:
    """(3) Effective concurrency at 280 cases, 16 calls in flight."""
    log = work / "calls-3.log"
    started = time.perf_counter()
    run(experiment(40, str(log)), cache=False, chunk_size=chunk_size)
    whole = time.perf_counter() - started
    write_logs()
    spans = calls_in(log)
    # Busy time as the provider counts it: 20 ms per call (the measured spans also hold
    # the time a woken thread waits for the interpreter lock, which is ours, not theirs).
    busy = LATENCY * len(spans)
    measured = sum(end - start for _, start, end in spans)
    wall = max(end for _, _, end in spans) - min(start for _, start, _ in spans)
    print(f"280 cases: {len(spans)} calls, {busy:.2f} s busy (measured spans {measured:.2f} s) "
          f"from the first call's start to the last one's end, {wall:.2f} s; the whole run "
          f"{whole:.2f} s (busy / run {busy / whole:.1f})")
    print(f"effective concurrency: {busy / wall:.1f} of {WIDTH}")

if __name__ == "__main__":
    main()
