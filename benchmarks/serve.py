"""CPU cost of ``handoffs serve`` per receipt on PostgreSQL, against the gate in
process and against a minimal Starlette + psycopg peer, side by side in one run.

Setup (all on 127.0.0.1, stopped at the end): a throwaway PostgreSQL server with
``pg_stat_statements`` (Debian's binaries; as root they run as the ``pgtest`` user),
genuine signed ``payment-release`` receipts (as in ``benchmarks/replicas.py``: no
evidence resolver, so admitted receipts are ESCALATE after steps 1–5), and C
loopback clients (threads with keep-alive ``http.client`` connections) sending each
receipt once. Each phase gets its own fresh receipts (a replay would be refused).

- **gate**: the same gate in this process (``Gate.decide`` through the strict
  receiver), with its in-memory replay store and no log; and again with the
  PostgreSQL store as ``log=`` and ``replay=`` (what the service runs).
- **serve**: ``handoffs serve`` on the same database, with group commit
  (``store.group_commit_ms``, ``--group-commit-ms``, default 1); **serve, no group
  commit**: the same with ``group_commit_ms = 0`` (one statement per decision);
  **serve ×2**: two ``handoffs serve`` processes (what ``--workers 2`` would run: each
  its own pool and batches), the clients split between them.
- **peer**: a minimal Starlette application on uvicorn (same loop and HTTP parser)
  that runs the same gate without a store (the same verify) and then one
  ``INSERT … ON CONFLICT DO NOTHING`` of the receipt id on the same database, through
  a ``psycopg_pool`` pool, from Starlette's thread pool.

Measured: CPU time (user + system) of the server process over the timed sends
(``psutil``), divided by the receipts sent; the gate's is this thread's CPU time.
PostgreSQL's own CPU (every server process) is printed beside, not in the ratios.
``pg round trips per decision`` counts statements server-side: the sum of
``pg_stat_statements.calls`` on the service's database over the timed sends, divided
by the receipts (the extension's own queries excluded).

Serve and the peer run at once and are measured side by side: their phases alternate,
``--rounds`` times (16 clients, then one client), and each ratio is per round (the
median printed, with every round and the spread: the machine may be shared).

Printed, last lines: ``serve/gate cpu ratio`` (÷ the in-memory gate; target ≤ 2.0),
``serve/gate+pg cpu ratio`` (÷ the gate on the PostgreSQL store), ``serve/peer cpu
ratio`` at 16 clients (target ≤ 1.1) and ``single-client serve/peer cpu ratio``
(target ≤ 1.2), each with p50 latency beside, ``pg cpu per receipt`` (serve, peer,
serve without group commit), ``group commit gain`` and ``two processes/one`` (ratios
of CPU per receipt and of wall throughput), ``pg round trips per decision`` (target ≤ 1) and
``receipts/s per core`` (receipts ÷ server CPU seconds).

Run: ``python benchmarks/serve.py [--receipts N] [--clients 16] [--rounds 3]``
(``--quick``: 600 receipts per phase, 2 rounds). Needs the ``serve``, ``postgres`` and
``bench`` extras (psutil).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import http.client
import json
import os
import queue
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from replicas import HANDOFFS, Postgres, build

from handoffs.examples import payment

JSON = {"Content-Type": "application/json"}


class StatsPostgres(Postgres):
    """The throwaway server, with ``pg_stat_statements`` loaded."""

    def start(self) -> None:
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.root / "data"), "-l",
                  str(self.root / "log"), "-w", "-t", "60", "-o",
                  f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories='' "
                  "-c fsync=off -c max_connections=200 "
                  "-c shared_preload_libraries=pg_stat_statements "
                  "-c pg_stat_statements.track=top", "start")


# ------------------------------------------------------------------- the peer


def peer_main(config_path: str, url: str, port_file: str) -> None:
    """A minimal Starlette + psycopg peer: the same verify, one INSERT per receipt."""
    import psycopg_pool
    import uvicorn
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from handoffs.service import ServiceConfig
    from handoffs.service._app import gate_of

    config = ServiceConfig.load(config_path)
    receiver = gate_of(config, store=None)
    pool = psycopg_pool.ConnectionPool(url, min_size=4, max_size=16,
                                       kwargs={"autocommit": True}, open=True)
    with pool.connection() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS peer_seen (id TEXT PRIMARY KEY)")

    def decide(body: bytes) -> tuple[int, bytes]:
        decision = receiver.receive(body)
        if decision.admitted:
            with pool.connection() as conn:
                claimed = conn.execute(
                    "INSERT INTO peer_seen (id) VALUES (%s) ON CONFLICT DO NOTHING",
                    (decision.receipt_id,)).rowcount
            if not claimed:
                return 422, b'{"verdict":"REJECT","reason":"replayed"}\n'
        return (200 if decision.admitted else 422), json.dumps(decision.to_json()).encode()

    async def receipts(request: Request) -> Response:
        status, body = await run_in_threadpool(decide, await request.body())
        return Response(body, status_code=status, media_type="application/json")

    app = Starlette(routes=[Route("/receipts", receipts, methods=["POST"])])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    Path(port_file).write_text(str(sock.getsockname()[1]), "utf-8")
    uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off",
                                  loop="auto", http="auto")).run(sockets=[sock])


# -------------------------------------------------------------------- clients


def blast(port: int, bodies: list[bytes], clients: int,
          latencies: list[float] | None = None) -> tuple[float, dict[int, int]]:
    """Send every body once over ``clients`` keep-alive connections; wall seconds (each
    request's wall seconds appended to ``latencies``)."""
    work: queue.Queue[bytes] = queue.Queue()
    for body in bodies:
        work.put(body)
    statuses: dict[int, int] = {}
    lock = threading.Lock()
    took = latencies if latencies is not None else []

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            while True:
                try:
                    body = work.get_nowait()
                except queue.Empty:
                    return
                sent = time.perf_counter()
                conn.request("POST", "/receipts", body=body, headers=JSON)
                answer = conn.getresponse()
                answer.read()
                with lock:
                    took.append(time.perf_counter() - sent)
                    statuses[answer.status] = statuses.get(answer.status, 0) + 1
        finally:
            conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - began, statuses


def cpu_of(pids: list[int]) -> float:
    import psutil

    total = 0.0
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            process = psutil.Process(pid)
            for p in [process, *process.children(recursive=True)]:
                with contextlib.suppress(psutil.NoSuchProcess):
                    times = p.cpu_times()
                    total += times.user + times.system
    return total


def statements(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s JOIN pg_database d "
            "ON d.oid = s.dbid WHERE d.datname = current_database() "
            "AND s.query NOT ILIKE '%pg_stat_statements%'").fetchone()
    return int(row[0]) if row else 0


def statement_table(url: str) -> list[tuple[int, str]]:
    """Calls and the first 100 characters of each statement (``--statements``)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return [(int(calls), " ".join(query.split())[:100]) for calls, query in conn.execute(
            "SELECT calls, query FROM pg_stat_statements s JOIN pg_database d "
            "ON d.oid = s.dbid WHERE d.datname = current_database() "
            "AND s.query NOT ILIKE '%pg_stat_statements%' ORDER BY calls DESC").fetchall()]


def reset_statements(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")


def wait_port(proc: subprocess.Popen[Any], port_file: Path) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if port_file.exists() and port_file.read_text().strip():
            return int(port_file.read_text())
        if proc.poll() is not None:
            sys.exit("the server did not start")
        time.sleep(0.05)
    sys.exit("the server did not start in time")


def start_serve(config: Path, directory: Path, extra: list[str]) -> tuple[Any, int]:
    log = (directory / "serve.log").open("w")
    proc = subprocess.Popen([HANDOFFS, "serve", "--config", str(config), *extra],  # noqa: S603
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        log.write(line)
        event = json.loads(line)
        if event.get("event") == "listening":
            threading.Thread(target=lambda: shutil.copyfileobj(proc.stderr, log),
                             daemon=True).start()
            return proc, int(event["port"])
    proc.kill()
    sys.exit(f"handoffs serve did not start (see {log.name})")


@dataclasses.dataclass(frozen=True)
class Measured:
    """One phase against HTTP servers: per receipt, CPU seconds and statements."""

    cpu: float
    pg_cpu: float
    trips: float
    rate: float
    p50: float


def measure(pg: StatsPostgres, servers: list[tuple[Any, int]], bodies: list[bytes],
            warm: int, clients: int, *, database: str = "service") -> Measured:
    """Warm each server up, then send ``bodies[warm:]`` split evenly across them."""
    for i, (_, port) in enumerate(servers):
        blast(port, bodies[:warm][i::len(servers)], clients)
    timed = bodies[warm:]
    reset_statements(pg.url(database))
    pids = [proc.pid for proc, _ in servers]
    before, pg_before = cpu_of(pids), cpu_of(pg.pids())
    answers: list[tuple[float, dict[int, int]]] = []
    latencies: list[float] = []

    def send(port: int, share: list[bytes]) -> None:
        answers.append(blast(port, share, max(1, clients // len(servers)), latencies))

    threads = [threading.Thread(target=send, args=(port, timed[i::len(servers)]))
               for i, (_, port) in enumerate(servers)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    cpu, pg_cpu = cpu_of(pids) - before, cpu_of(pg.pids()) - pg_before
    time.sleep(0.2)
    trips = statements(pg.url(database))
    statuses: dict[int, int] = {}
    for _, counts in answers:
        for status, count in counts.items():
            statuses[status] = statuses.get(status, 0) + count
    assert statuses == {200: len(timed)}, f"answered {statuses}"
    n = len(timed)
    return Measured(cpu=cpu / n, pg_cpu=pg_cpu / n, trips=trips / n, rate=n / wall,
                    p50=statistics.median(latencies))


def run(args: argparse.Namespace) -> int:  # noqa: PLR0912, PLR0915 - one linear scenario
    directory = Path(tempfile.mkdtemp(prefix="handoffs-serve-bench-"))
    pg = StatsPostgres(fsync=False)
    procs: list[subprocess.Popen[Any]] = []
    try:
        pg.initdb()
        pg.start()
        import psycopg

        with psycopg.connect(pg.url(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE service")
            conn.execute("CREATE DATABASE peer")
        for db in ("service", "peer"):
            with psycopg.connect(pg.url(db), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION pg_stat_statements")
        n, warm, rounds = args.receipts, 50, args.rounds
        single = max(100, n // 3)  # one client is slow: fewer receipts per phase
        names = ("gate", "gate+pg", "serve, no group commit", "serve ×2",
                 *(f"{who} {r}" for r in range(rounds) for who in ("serve", "peer")))
        singles = tuple(f"{who} 1-client {r}" for r in range(rounds)
                        for who in ("serve", "peer"))
        sizes = {**dict.fromkeys(names, n + warm), **dict.fromkeys(singles, single + warm)}
        receipts, trust = build(sum(sizes.values()), directory)
        bodies = [body for _, body in receipts]
        phases: dict[str, list[bytes]] = {}
        for name, size in sizes.items():
            phases[name], bodies = bodies[:size], bodies[size:]

        def write_config(name: str, group_commit_ms: float) -> Path:
            path = directory / name
            path.write_text(f'''identity = "case-owner"
trust = "{trust}"
contracts = ["{payment.__name__}:PAYMENT_RELEASE"]
roles = ["case-owner"]
[policy]
current = ["PAY-7.4"]
[store]
url = "{pg.url("service")}"
timeout = 3
pool_size = {args.clients}
group_commit_ms = {group_commit_ms}
[server]
host = "127.0.0.1"
port = 0
''', "utf-8")
            return path

        config = write_config("serve.toml", args.group_commit_ms)
        config_alone = write_config("alone.toml", 0)

        # (1) the gate in this process: in-memory replay store, then the PostgreSQL one.
        from handoffs.service import ServiceConfig
        from handoffs.service._app import gate_of
        from handoffs.service.postgres import PostgresDecisionLog

        loaded = ServiceConfig.load(config)
        gate_cpu: dict[str, float] = {}
        for name, store in (("gate", None),
                            ("gate+pg", PostgresDecisionLog(pg.url("service"), timeout=3))):
            receiver = gate_of(loaded, store=store, memory_replay=True)
            for body in phases[name][:warm]:
                receiver.receive(body)
            began = time.thread_time()
            verdicts = [receiver.receive(body).admitted for body in phases[name][warm:]]
            gate_cpu[name] = (time.thread_time() - began) / n
            assert all(verdicts), f"{name}: a genuine receipt was refused"
            if store is not None:
                store.close()

        # (2) handoffs serve: with group commit, without, and as two processes (what
        # --workers 2 would be: each its own pool; the clients split between them).
        results: dict[str, Measured] = {}
        for name, path, count in (("serve, no group commit", config_alone, 1),
                                  ("serve ×2", config, 2)):
            servers = [start_serve(path, directory, args.serve_args) for _ in range(count)]
            procs.extend(proc for proc, _ in servers)
            results[name] = measure(pg, servers, phases[name], warm, args.clients)
            for proc, _ in servers:
                proc.kill()
                proc.wait(timeout=30)

        # (3) serve and the peer side by side: both running, their phases alternating
        # round by round (16 clients, then one), so that a load on the shared machine
        # falls on both; the ratios are per round, printed as median and spread.
        served = start_serve(config, directory, args.serve_args)
        procs.append(served[0])
        port_file = directory / "peer.port"
        peer = subprocess.Popen([sys.executable, __file__, "--peer", str(config),  # noqa: S603
                                 pg.url("peer"), str(port_file)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        procs.append(peer)
        peered = (peer, wait_port(peer, port_file))
        ratios: dict[str, list[float]] = {"many": [], "one": []}
        for r in range(rounds):
            for label, clients in (("", args.clients), (" 1-client", 1)):
                s_name, p_name = f"serve{label} {r}", f"peer{label} {r}"
                results[s_name] = measure(pg, [served], phases[s_name], warm, clients)
                if args.statements and r == 0 and not label:
                    for calls, text in statement_table(pg.url("service")):
                        print(f"statement: {calls} × {text}")
                results[p_name] = measure(pg, [peered], phases[p_name], warm, clients,
                                          database="peer")
                ratios["one" if label else "many"].append(
                    results[s_name].cpu / results[p_name].cpu)

        def middle(prefix: str) -> Measured:
            """The round whose CPU per receipt is the median (a real round's figures)."""
            runs = sorted((results[f"{prefix} {r}"] for r in range(rounds)),
                          key=lambda m: m.cpu)
            return runs[len(runs) // 2]

        ms = 1000
        serve, peer_m = middle("serve"), middle("peer")
        serve_one, peer_one = middle("serve 1-client"), middle("peer 1-client")
        results["serve"], results["peer"] = serve, peer_m
        alone, two = results["serve, no group commit"], results["serve ×2"]

        def spread(values: list[float]) -> str:
            return (f"{statistics.median(values):.2f} (rounds: "
                    f"{', '.join(f'{v:.2f}' for v in values)}; spread "
                    f"{min(values):.2f}–{max(values):.2f})")
        print(f"receipts per phase: {n} (after {warm} warm-up), clients: {args.clients}, "
              f"cores: {os.cpu_count()}, group commit: {args.group_commit_ms:g} ms, "
              f"serve args: {' '.join(args.serve_args) or '-'}")
        print(f"gate in process (memory replay): {gate_cpu['gate'] * ms:.3f} ms CPU/receipt")
        print(f"gate in process (PostgreSQL store): {gate_cpu['gate+pg'] * ms:.3f} ms "
              "CPU/receipt")
        for name, m in results.items():
            print(f"{name}: {m.cpu * ms:.3f} ms server CPU/receipt, PostgreSQL "
                  f"{m.pg_cpu * ms:.3f} ms; {m.trips:.2f} statements/receipt; "
                  f"{m.rate:.0f} receipts/s wall; p50 {m.p50 * ms:.2f} ms")
        print(f"serve/gate cpu ratio: {serve.cpu / gate_cpu['gate']:.2f}")
        print(f"serve/gate+pg cpu ratio: {serve.cpu / gate_cpu['gate+pg']:.2f}")
        print(f"p50 latency at {args.clients} clients: serve {serve.p50 * ms:.2f} ms, "
              f"peer {peer_m.p50 * ms:.2f} ms; at 1 client: serve "
              f"{serve_one.p50 * ms:.2f} ms, peer {peer_one.p50 * ms:.2f} ms")
        print(f"serve/peer cpu ratio: {spread(ratios['many'])}, p50 serve "
              f"{serve.p50 * ms:.2f} ms / peer {peer_m.p50 * ms:.2f} ms")
        print(f"single-client serve/peer cpu ratio: {spread(ratios['one'])}, p50 serve "
              f"{serve_one.p50 * ms:.2f} ms / peer {peer_one.p50 * ms:.2f} ms")
        print(f"pg cpu per receipt: serve {serve.pg_cpu * ms:.3f} ms, peer "
              f"{peer_m.pg_cpu * ms:.3f} ms, serve without group commit "
              f"{alone.pg_cpu * ms:.3f} ms")
        print(f"group commit gain: server cpu {alone.cpu / serve.cpu:.2f}×, pg cpu "
              f"{_ratio(alone.pg_cpu, serve.pg_cpu)}, server+pg cpu "
              f"{(alone.cpu + alone.pg_cpu) / (serve.cpu + serve.pg_cpu):.2f}×")
        print(f"two processes/one: server cpu {two.cpu / serve.cpu:.2f}×, pg cpu "
              f"{_ratio(two.pg_cpu, serve.pg_cpu)}, receipts/s wall {two.rate / serve.rate:.2f}×")
        print(f"pg round trips per decision: {serve.trips:.2f} (without group commit "
              f"{alone.trips:.2f})")
        print(f"receipts/s per core: {1 / serve.cpu:.0f}")
        return 0
    finally:
        for proc in procs:
            with contextlib.suppress(Exception):
                proc.kill()
                proc.wait(timeout=30)
        pg.cleanup()
        shutil.rmtree(directory, ignore_errors=True)


def _ratio(numerator: float, denominator: float) -> str:
    """A ratio of two CPU times, or why there is none: a short run's PostgreSQL CPU can
    fall below the clock's tick (10 ms) and read 0."""
    if denominator <= 0:
        return "n/a (below the CPU clock's resolution in this run)"
    return f"{numerator / denominator:.2f}×"


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--peer":
        peer_main(*sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--receipts", type=int, default=3000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--quick", action="store_true",
                        help="600 receipts per phase, 2 rounds")
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternating serve/peer rounds (default 3)")
    parser.add_argument("--group-commit-ms", type=float, default=1.0,
                        help="store.group_commit_ms of the serve phase (default 1)")
    parser.add_argument("--statements", action="store_true",
                        help="print the statements the service ran (pg_stat_statements)")
    parser.add_argument("--serve-arg", dest="serve_args", action="append", default=[],
                        help="an extra argument for handoffs serve (repeatable)")
    args = parser.parse_args()
    if args.quick:
        args.receipts, args.rounds = 600, 2
    sys.exit(run(args))


if __name__ == "__main__":
    main()
