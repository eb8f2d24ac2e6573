#!/usr/bin/env python3
"""What the lab costs with a slow receiver: model calls, resumption, concurrency.

The built-in payment experiment on the essay's interventions (``profile="essay"``)
with two of its receivers replaced by :class:`~handoffs.receivers.ModelReceiver`
instances that call a **stub OpenAI-compatible server** on 127.0.0.1 through the
library's real HTTP client (:class:`~handoffs.receivers.OpenAICompatibleClient`, 16
calls in flight). The stub stands in for a remote model provider: it runs in a process
of its own (so its work does not take the lab's interpreter), sleeps the configured
latency per call, answers deterministically (the payment policy applied to the
decision state in the prompt, ``ESCALATE`` when there is none), names the served model
(``model``, ``system_fingerprint``) and logs every call it serves (its start and end on
the machine's monotonic clock, and the request body). The lab's side — run-wide memo,
scheduling pass, call pool, call cache, run log — is the library's real code. The two
receivers are the decision contract's (admitted by the payment gate) and the full
record's (admitted by a governance checker).

Printed figures:

- ``calls/distinct: <x>``: model calls ÷ distinct requests the stub served, over a
  whole run of ``--cases`` cases (2,800; 280 with ``--quick``) with a fresh call cache
  (target ≤ 1.0).
- ``resumed repeat calls: <n>``: a run with a run log and call cache is started in a
  child process and killed (SIGKILL) once about half of its calls are served, then
  resumed; ``n`` is how many requests the resumed run sent whose answers the killed
  run had received and stored (target 0). A call the stub had answered at the instant
  of the kill but whose answer the killed process had not yet committed is counted
  apart (``answered at the kill, not yet stored``): no code of the killed process runs
  between the stub's answer and the commit, so no library can keep such a call from
  being asked again.
- ``effective concurrency (whole run): <x> of 16``: the sum of the calls' durations
  as the stub served them (its sleep and its own work per call) ÷ the wall time from
  the run's start (before the first case is read) to its end, at 280 cases, once with a
  200 ms and once with a 20 ms stub (targets ≥ 12.8 and ≥ 9.6 of 16). The time before
  the first call and after the last counts against it. The line before it also gives
  the calls' time as the client timed them (send to answer): that includes the time a
  call thread waits for the interpreter while the lab works, which is ours, not the
  provider's, so it is not the figure.

Each run is bounded (``--budget`` seconds overall, default 300); the script says
when it had to stop early.

    python benchmarks/model_receiver.py            # the figures
    python benchmarks/model_receiver.py --quick    # 280 cases throughout
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import attrs

from handoffs.examples.payment import PAYMENT_RELEASE
from handoffs.examples.payment_lab import payment_experiment, payment_gate
from handoffs.lab import GovernanceChecker, run
from handoffs.lab._cache import CallCache, close_connections
from handoffs.receivers import ModelReceiver, OpenAICompatibleClient

WIDTH = 16
ROUTES = {"decision_contract": "stub/decision-contract", "full_record": "stub/full-record"}


def _policy(state: dict[str, Any]) -> str:
    """The contract's own policy on what the message states; undetermined fails closed."""
    action = PAYMENT_RELEASE.evaluate(state).action
    return PAYMENT_RELEASE.fail_closed_action.value if action is None else action.value


def _answer(body: dict[str, Any]) -> str:
    """The stub's answer: the payment policy on the decision state in the prompt."""
    prompt = str(body["messages"][-1]["content"])
    action = "ESCALATE"
    opening = prompt.find("{")
    if opening >= 0:
        state = json.loads(prompt[opening:prompt.rindex("}") + 1]).get("decision_state")
        if isinstance(state, dict):
            action = _policy(state)
    return json.dumps({"action": action})


def serve(latency: float, log: str) -> None:
    """The stub provider (``--serve``): print the port, serve until killed.

    Each call is logged as one JSON line ``[start, end, body]`` (monotonic seconds, the
    request body as sent), written when the answer is ready, before it is sent.
    """
    lock = threading.Lock()
    out = open(log, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the server

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            start = time.monotonic()
            raw = self.rfile.read(int(self.headers.get("content-length", 0)))
            body = json.loads(raw)
            time.sleep(latency)
            content = _answer(body)
            reply = json.dumps({
                "id": "chatcmpl-stub", "object": "chat.completion",
                "model": f"{body['model']}@stub", "system_fingerprint": "fp_stub",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": len(raw) // 4, "completion_tokens": 7,
                          "total_tokens": len(raw) // 4 + 7},
            }).encode()
            end = time.monotonic()
            with lock:
                out.write(json.dumps([start, end, raw.decode()]) + "\n")
                out.flush()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 128

    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


@contextlib.contextmanager
def stub(latency: float, log: Path) -> Iterator[str]:
    """A stub provider in a child process; yields its ``base_url``."""
    proc = subprocess.Popen(  # noqa: S603 - ourselves
        [sys.executable, __file__, "--serve", "--latency", str(latency), "--log", str(log)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait()


def experiment(variants: int, url: str) -> Any:
    """The essay-profile experiment whose two slow receivers call the stub at ``url``."""
    base = payment_experiment(variants=variants, profile="essay")
    client = OpenAICompatibleClient(base_url=url, max_concurrency=WIDTH, timeout=30.0)
    receivers = {
        "decision_contract": ModelReceiver(gate=payment_gate(), client=client,
                                           model_route=ROUTES["decision_contract"],
                                           name="stub-contract"),
        "full_record": ModelReceiver(gate=GovernanceChecker(PAYMENT_RELEASE, required=()),
                                     client=client, model_route=ROUTES["full_record"],
                                     name="stub-full-record"),
    }
    strategies = tuple(attrs.evolve(s, receiver=receivers[s.name]) if s.name in receivers
                       else s for s in base.strategies)
    return attrs.evolve(base, strategies=strategies)


def fingerprints(variants: int) -> dict[str, str]:
    """Each model route's receiver fingerprint (which keys its call cache entries)."""
    declared = experiment(variants, "http://127.0.0.1:1/v1")
    return {s.receiver.model_route: s.receiver.fingerprint() for s in declared.strategies
            if isinstance(s.receiver, ModelReceiver)}


def served(log: Path) -> list[tuple[float, float, str]]:
    """(start, end, body) of every call the stub served, in the order it logged them."""
    if not log.exists():
        return []
    out = []
    for line in log.read_text(encoding="utf-8").splitlines():
        try:
            start, end, body = json.loads(line)
        except ValueError:  # a line cut by the stub's own end
            continue
        out.append((float(start), float(end), str(body)))
    return out


def digest(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()


def cache_key(keys: dict[str, str], body: str) -> str:
    """The call cache's key of a served request (:meth:`CallCache.key`: the receiver's
    fingerprint and the request body exactly as the client sent it)."""
    fingerprint = keys[json.loads(body)["model"]]
    return hashlib.sha256((fingerprint + "\n" + body).encode("utf-8")).hexdigest()


def child(args: argparse.Namespace) -> None:
    """One run in this process (the resume measurement's killed run)."""
    run(experiment(args.variants, args.url), run_log=args.run_log, cache=args.cache,
        resume=args.resume, chunk_size=args.chunk_size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=None)
    parser.add_argument("--quick", action="store_true", help="280 cases throughout")
    parser.add_argument("--budget", type=float, default=300.0)
    parser.add_argument("--chunk-size", type=int, default=256)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--latency", type=float, default=0.02, help=argparse.SUPPRESS)
    parser.add_argument("--variants", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    parser.add_argument("--run-log", help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    parser.add_argument("--resume", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.latency, args.log)
        return
    if args.child:
        child(args)
        return
    deadline = time.monotonic() + args.budget
    cases = args.cases or (280 if args.quick else 2800)
    variants = max(1, -(-cases // 7))
    work = Path(tempfile.mkdtemp(prefix="handoffs-model-bench-"))
    print(f"stub OpenAI-compatible server on 127.0.0.1 (a stand-in for a remote provider); "
          f"essay profile; {7 * variants} cases; chunk size {args.chunk_size}; "
          f"{WIDTH} calls in flight")
    calls, elapsed = calls_per_distinct(work, variants, args.chunk_size)
    if time.monotonic() + 3 * elapsed + 30 > deadline:
        print("resumed repeat calls: not measured (over the time budget)")
    else:
        resumed_repeats(work, variants, args.chunk_size, calls, elapsed)
    for latency in (0.2, 0.02):
        concurrency(work, args.chunk_size, latency)


def calls_per_distinct(work: Path, variants: int, chunk_size: int) -> tuple[int, float]:
    """(1) Model calls / distinct requests over a whole run, fresh call cache, 20 ms."""
    log = work / "calls-1.log"
    with stub(0.02, log) as url:
        started = time.perf_counter()
        report = run(experiment(variants, url), cache=work / "calls-1.sqlite",
                     chunk_size=chunk_size).report
        elapsed = time.perf_counter() - started
    calls = served(log)
    distinct = len({digest(body) for _, _, body in calls})
    print(f"run: {elapsed:.1f} s wall, {len(calls)} model calls, {distinct} distinct requests, "
          f"{report['provenance']['memo_hits']} memo hits")
    for row in report["cost"]["strategies"]:
        print(f"  {row['strategy']}: {row['model_calls']} calls, {row['cache_hits']} cache "
              f"hits, {row['tokens_in']} tokens in, {row['tokens_out']} out")
    print(f"calls/distinct: {len(calls) / distinct:.3f}")
    return len(calls), elapsed


def resumed_repeats(work: Path, variants: int, chunk_size: int, calls: int,
                    elapsed: float) -> None:
    """(2) Stop a run midway (SIGKILL once half its calls are served), resume it."""
    first, second = work / "calls-2a.log", work / "calls-2b.log"
    run_log, cache = work / "run.jsonl", work / "calls-2.sqlite"
    keys = fingerprints(variants)
    with stub(0.02, first) as url:
        common = [sys.executable, __file__, "--child", "--variants", str(variants),
                  "--url", url, "--run-log", str(run_log), "--cache", str(cache),
                  "--chunk-size", str(chunk_size)]
        proc = subprocess.Popen(common)  # noqa: S603 - ourselves
        limit = time.monotonic() + max(60.0, 6 * elapsed)
        while proc.poll() is None and len(served(first)) < calls // 2 \
                and time.monotonic() < limit:
            time.sleep(0.01)
        killed = proc.poll() is None
        if killed:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
    logged = served(first)
    answered = {cache_key(keys, body) for _, _, body in logged}
    kept = CallCache(cache)
    stored = {key for key in answered if kept.get(key) is not None}
    close_connections()
    with stub(0.02, second) as url:
        resume = [*common[:common.index("--url") + 1], url,
                  *common[common.index("--url") + 2:], "--resume"]
        subprocess.run(resume, check=True, timeout=max(60.0, 6 * elapsed))  # noqa: S603
    resumed = [cache_key(keys, body) for _, _, body in served(second)]
    repeat = sum(1 for key in resumed if key in stored)
    lost = answered - stored
    print(f"stopped run: {'killed' if killed else 'finished before the kill'} after "
          f"{len(answered)} answered calls ({len(stored)} stored); answered at the kill, "
          f"not yet stored: {len(lost)} (asked again: "
          f"{sum(1 for key in resumed if key in lost)}); resumed run: {len(resumed)} calls")
    print(f"resumed repeat calls: {repeat}")


def concurrency(work: Path, chunk_size: int, latency: float) -> None:
    """(3) Effective concurrency over the whole run at 280 cases, 16 calls in flight."""
    log = work / f"calls-3-{round(latency * 1000)}ms.log"
    with stub(latency, log) as url:
        declared = experiment(40, url)
        started = time.monotonic()
        report = run(declared, cache=False, chunk_size=chunk_size).report
        ended = time.monotonic()
    spans = served(log)
    calls = report["cost"]["totals"]["latency_ms"] / 1000
    provider = sum(end - start for start, end, _ in spans)
    first = min(start for start, _, _ in spans) - started
    last = ended - max(end for _, end, _ in spans)
    wall = ended - started
    print(f"{latency * 1000:.0f} ms stub, 280 cases: {len(spans)} calls; the run {wall:.2f} s "
          f"wall from its start (first call after {first * 1000:.0f} ms, run end "
          f"{last * 1000:.0f} ms after the last call); calls {provider:.2f} s as the stub "
          f"served them, {calls:.2f} s as the client timed them (send to answer, with the "
          f"lab's own interpreter waits: {calls / wall:.1f} of {WIDTH})")
    print(f"effective concurrency (whole run) at {latency * 1000:.0f} ms: "
          f"{provider / wall:.1f} of {WIDTH}")


if __name__ == "__main__":
    main()
