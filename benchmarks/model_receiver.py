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
  (the configured latency per call: the provider's busy time) ÷ the wall time from
  the run's start (before the first case is read) to its end, at 280 cases, once with a
  200 ms and once with a 20 ms stub (targets ≥ 12.8 and ≥ 9.6 of 16). The time before
  the first call and after the last counts against it. Beside it, measured in the same
  run: the harness alone (the same stub and client, 16 threads sending the same number
  of calls back to back, no lab), the ceiling this machine gives the figure, measured
  once before the lab's run and once after it (the order alternated; the figure is
  their mean; each with the CPU it took in this interpreter). The lab's line says how
  much CPU its run took in this interpreter and in its forked proof workers. The line
  before it also gives the calls' time as the stub served them (with its own lateness
  under load) and as the client timed them (send to answer, with the time a call
  thread waits for the interpreter while the lab works): both run higher, and neither
  is the figure.
- ``calls that cost the lab's interpreter nothing, at 20 ms: <x> of 16 (... lab / harness
  <y>)``: the same lab run with the HTTP client replaced by a :class:`ChatClient` that
  sleeps the latency and answers as the stub does, in this process (its JSON reading is
  the only work a call leaves here). It bounds what any design that takes the model
  calls off the lab's interpreter (a client in another process, say) could bring the
  figure above to: what is left is the lab's own work and its waits for answers.

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
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, str(Path(__file__).parent))

from lab import children_cpu

from handoffs.examples.payment import PAYMENT_RELEASE
from handoffs.examples.payment_lab import payment_experiment, payment_gate
from handoffs.lab import run
from handoffs.lab._cache import CallCache, close_connections
from handoffs.receivers import GovernanceChecker
from handoffs.receivers.models import (
    ChatClient,
    ChatRequest,
    Completion,
    ModelReceiver,
    OpenAICompatibleClient,
    ServedModel,
)

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

    One asyncio event loop (h11 for HTTP/1.1 with keep-alive): a call's latency is an
    ``asyncio.sleep``, so sixteen calls in flight cost the stub one thread. Each call is
    logged as one JSON line ``[start, end, body]`` (monotonic seconds, the request body
    as sent), written when the answer is ready, before it is sent.
    """
    import asyncio

    import h11

    out = open(log, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the server

    async def respond(body: bytes) -> bytes:
        start = time.monotonic()
        request = json.loads(body)
        await asyncio.sleep(latency)
        reply = json.dumps({
            "id": "chatcmpl-stub", "object": "chat.completion",
            "model": f"{request['model']}@stub", "system_fingerprint": "fp_stub",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": _answer(request)}}],
            "usage": {"prompt_tokens": len(body) // 4, "completion_tokens": 7,
                      "total_tokens": len(body) // 4 + 7},
        }).encode()
        out.write(json.dumps([start, time.monotonic(), body.decode()]) + "\n")
        out.flush()
        return reply

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        body = b""
        try:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await reader.read(65536)
                    conn.receive_data(data)
                    if not data and conn.their_state is not h11.DONE:
                        return
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    reply = await respond(body)
                    writer.write(conn.send(h11.Response(status_code=200, headers=[
                        ("content-type", "application/json"),
                        ("content-length", str(len(reply)))])))
                    writer.write(conn.send(h11.Data(data=reply)))
                    writer.write(conn.send(h11.EndOfMessage()))
                    await writer.drain()
                    conn.start_next_cycle()
                    body = b""
                elif isinstance(event, h11.ConnectionClosed):
                    return
        except (ConnectionError, h11.RemoteProtocolError):
            return  # a killed client
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(connection, "127.0.0.1", 0, backlog=128)
        print(server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()

    asyncio.run(main())


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
        if proc.stdout is not None:
            proc.stdout.close()


def experiment(variants: int, url: str, client: ChatClient | None = None) -> Any:
    """The essay-profile experiment whose two slow receivers call the stub at ``url``
    (or ``client``)."""
    base = payment_experiment(variants=variants, profile="essay")
    if client is None:
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
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run for CI: 280 cases throughout, 120 s budget")
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
    if args.quick:
        args.budget = min(args.budget, 120.0)
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
        bare = concurrency(work, args.chunk_size, latency)
    ceiling(0.02, bare)


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


def concurrency(work: Path, chunk_size: int, latency: float) -> float:
    """(3) Effective concurrency over the whole run at 280 cases, 16 calls in flight.

    The harness runs before and after the lab (the order alternated, both warm: this
    process has run the lab and the client before), and its figure is the mean of the
    two, so that neither side gains from going second or from a change of load.
    """
    log = work / f"calls-3-{round(latency * 1000)}ms.log"
    before = harness(latency, 288, work, "before")
    with stub(latency, log) as url:
        declared = experiment(40, url)
        started, cpu, workers = time.monotonic(), time.process_time(), children_cpu()
        report = run(declared, cache=False, chunk_size=chunk_size).report
        ended, cpu = time.monotonic(), time.process_time() - cpu
        workers = children_cpu() - workers
    spans = served(log)
    calls = report["cost"]["totals"]["latency_ms"] / 1000
    provider = sum(end - start for start, end, _ in spans)
    busy = latency * len(spans)
    first = min(start for start, _, _ in spans) - started
    last = ended - max(end for _, end, _ in spans)
    wall = ended - started
    print(f"{latency * 1000:.0f} ms stub, 280 cases: {len(spans)} calls; the run {wall:.2f} s "
          f"wall from its start (first call after {first * 1000:.0f} ms, run end "
          f"{last * 1000:.0f} ms after the last call; {cpu:.2f} s CPU in the lab's "
          f"interpreter, {workers:.2f} s in its proof workers); "
          f"calls {busy:.2f} s at {latency * 1000:.0f} ms each; {provider:.2f} s as the stub "
          f"served them ({provider / wall:.1f} of {WIDTH}), {calls:.2f} s as the client "
          f"timed them ({calls / wall:.1f} of {WIDTH})")
    after = harness(latency, len(spans), work, "after")
    bare = (before[0] + after[0]) / 2
    print(f"  the harness alone, {len(spans)} calls: before the lab {before[0]:.1f} of "
          f"{WIDTH} ({before[1]:.2f} s CPU), after it {after[0]:.1f} ({after[1]:.2f} s CPU)")
    print(f"effective concurrency (whole run) at {latency * 1000:.0f} ms: "
          f"{busy / wall:.1f} of {WIDTH} (the harness alone: {bare:.1f}; lab / harness "
          f"{busy / wall / bare:.2f})")
    return bare


@attrs.frozen
class SleepingClient:
    """A :class:`ChatClient` whose calls cost this interpreter nothing but the answer:
    each sleeps ``latency`` (releasing the interpreter) and answers as the stub does."""

    latency: float
    max_concurrency: int = WIDTH

    def complete(self, request: ChatRequest) -> Completion:
        time.sleep(self.latency)
        prompt = request.messages[-1][1]
        return Completion(content=_answer({"messages": [{"content": prompt}]}),
                          tokens_in=len(prompt) // 4, tokens_out=7,
                          latency_ms=self.latency * 1000, finish_reason="stop",
                          served=ServedModel(model=f"{request.model}@sleep"))


def ceiling(latency: float, bare: float) -> None:
    """(4) The run of (3) with calls that cost the lab's interpreter nothing: the
    most that taking the HTTP client off it could give (``bare``: the harness of (3))."""
    run(experiment(40, "http://127.0.0.1:1/v1", SleepingClient(latency)), cache=False)  # warm
    declared = experiment(40, "http://127.0.0.1:1/v1", SleepingClient(latency))
    started, cpu = time.monotonic(), time.process_time()
    report = run(declared, cache=False).report
    wall, cpu = time.monotonic() - started, time.process_time() - cpu
    reached = latency * report["cost"]["totals"]["model_calls"] / wall
    print(f"calls that cost the lab's interpreter nothing, at {latency * 1000:.0f} ms: "
          f"{reached:.1f} of {WIDTH} (the run {wall:.2f} s wall, {cpu:.2f} s CPU; the "
          f"harness of the line above: {bare:.1f}; lab / harness {reached / bare:.2f})")


def harness(latency: float, calls: int, work: Path, when: str) -> tuple[float, float]:
    """The same stub and client with no lab: ``WIDTH`` threads send ``calls`` requests
    (each a 3.5 kB prompt, as the full record's) back to back. The ceiling this machine
    gives the figure above, measured beside it: (concurrency, CPU seconds).
    """
    log = work / f"harness-{round(latency * 1000)}ms-{when}.log"
    request = ChatRequest(model="stub/harness", messages=(("user", "x" * 3500),))
    left, lock = [calls], threading.Lock()
    with stub(latency, log) as url:
        client = OpenAICompatibleClient(base_url=url, max_concurrency=WIDTH, timeout=30.0)

        def worker() -> None:
            while True:
                with lock:
                    if not left[0]:
                        return
                    left[0] -= 1
                client.complete(request)

        threads = [threading.Thread(target=worker) for _ in range(WIDTH)]
        started, cpu = time.monotonic(), time.process_time()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall, cpu = time.monotonic() - started, time.process_time() - cpu
        client.close()
    return latency * calls / wall, cpu


if __name__ == "__main__":
    main()
