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
- **serve**: ``handoffs serve`` on the same database.
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

Printed, last lines: ``serve/gate cpu ratio`` (÷ the in-memory gate; target ≤ 2.0),
``serve/gate+pg cpu ratio`` (÷ the gate on the PostgreSQL store), ``serve/peer cpu
ratio`` (target ≤ 1.0), ``pg round trips per decision`` (target 1) and ``receipts/s
per core`` (receipts ÷ server CPU seconds).

Run: ``python benchmarks/serve.py [--receipts N] [--clients 16]`` (``--quick``: 600
receipts per phase). Needs the ``serve``, ``postgres`` and ``bench`` extras (psutil).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import queue
import shutil
import socket
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

    from handoffs.service import load_config
    from handoffs.service._app import gate_of

    config = load_config(config_path)
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


def blast(port: int, bodies: list[bytes], clients: int) -> tuple[float, dict[int, int]]:
    """Send every body once over ``clients`` keep-alive connections; wall seconds."""
    work: queue.Queue[bytes] = queue.Queue()
    for body in bodies:
        work.put(body)
    statuses: dict[int, int] = {}
    lock = threading.Lock()

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            while True:
                try:
                    body = work.get_nowait()
                except queue.Empty:
                    return
                conn.request("POST", "/receipts", body=body, headers=JSON)
                answer = conn.getresponse()
                answer.read()
                with lock:
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


def run(args: argparse.Namespace) -> int:  # noqa: PLR0915 - one linear scenario
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
        n, warm = args.receipts, 50
        receipts, trust = build(4 * (n + warm), directory)
        bodies = [body for _, body in receipts]
        phases = {name: bodies[i * (n + warm):(i + 1) * (n + warm)]
                  for i, name in enumerate(("gate", "gate+pg", "serve", "peer"))}
        config = directory / "serve.toml"
        config.write_text(f'''identity = "case-owner"
trust = "{trust}"
contracts = ["{payment.__name__}:PAYMENT_RELEASE"]
roles = ["case-owner"]
[policy]
current = ["PAY-7.4"]
[store]
url = "{pg.url("service")}"
timeout = 3
pool_size = {args.clients}
[server]
host = "127.0.0.1"
port = 0
''', "utf-8")

        # (1) the gate in this process: in-memory replay store, then the PostgreSQL one.
        from handoffs.service import load_config
        from handoffs.service._app import gate_of
        from handoffs.service.postgres import PostgresDecisionLog

        loaded = load_config(config)
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

        # (2) handoffs serve.
        proc, port = start_serve(config, directory, args.serve_args)
        procs.append(proc)
        blast(port, phases["serve"][:warm], args.clients)
        reset_statements(pg.url("service"))
        before = cpu_of([proc.pid])
        pg_before = cpu_of(pg.pids())
        wall, statuses = blast(port, phases["serve"][warm:], args.clients)
        serve_cpu = (cpu_of([proc.pid]) - before) / n
        pg_serve = (cpu_of(pg.pids()) - pg_before) / n
        time.sleep(0.2)
        trips = statements(pg.url("service")) / n
        if args.statements:
            for calls, text in statement_table(pg.url("service")):
                print(f"statement: {calls} × {text}")
        assert statuses == {200: n}, f"serve answered {statuses}"

        # (3) the peer.
        port_file = directory / "peer.port"
        peer = subprocess.Popen([sys.executable, __file__, "--peer", str(config),  # noqa: S603
                                 pg.url("peer"), str(port_file)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        procs.append(peer)
        peer_port = wait_port(peer, port_file)
        blast(peer_port, phases["peer"][:warm], args.clients)
        before = cpu_of([peer.pid])
        pg_before = cpu_of(pg.pids())
        peer_wall, peer_statuses = blast(peer_port, phases["peer"][warm:], args.clients)
        peer_cpu = (cpu_of([peer.pid]) - before) / n
        pg_peer = (cpu_of(pg.pids()) - pg_before) / n
        assert peer_statuses == {200: n}, f"peer answered {peer_statuses}"

        ms = 1000
        print(f"receipts per phase: {n} (after {warm} warm-up), clients: {args.clients}, "
              f"cores: {os.cpu_count()}, serve args: {' '.join(args.serve_args) or '-'}")
        print(f"gate in process (memory replay): {gate_cpu['gate'] * ms:.3f} ms CPU/receipt")
        print(f"gate in process (PostgreSQL store): {gate_cpu['gate+pg'] * ms:.3f} ms "
              "CPU/receipt")
        print(f"serve: {serve_cpu * ms:.3f} ms server CPU/receipt, PostgreSQL "
              f"{pg_serve * ms:.3f} ms; {n / wall:.0f} receipts/s wall")
        print(f"peer: {peer_cpu * ms:.3f} ms server CPU/receipt, PostgreSQL "
              f"{pg_peer * ms:.3f} ms; {n / peer_wall:.0f} receipts/s wall")
        print(f"serve/gate cpu ratio: {serve_cpu / gate_cpu['gate']:.2f}")
        print(f"serve/gate+pg cpu ratio: {serve_cpu / gate_cpu['gate+pg']:.2f}")
        print(f"serve/peer cpu ratio: {serve_cpu / peer_cpu:.2f}")
        print(f"pg round trips per decision: {trips:.2f}")
        print(f"receipts/s per core: {1 / serve_cpu:.0f}")
        return 0
    finally:
        for proc in procs:
            with contextlib.suppress(Exception):
                proc.kill()
                proc.wait(timeout=30)
        pg.cleanup()
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--peer":
        peer_main(*sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--receipts", type=int, default=3000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--quick", action="store_true", help="600 receipts per phase")
    parser.add_argument("--statements", action="store_true",
                        help="print the statements the service ran (pg_stat_statements)")
    parser.add_argument("--serve-arg", dest="serve_args", action="append", default=[],
                        help="an extra argument for handoffs serve (repeatable)")
    args = parser.parse_args()
    if args.quick:
        args.receipts = 600
    sys.exit(run(args))


if __name__ == "__main__":
    main()
