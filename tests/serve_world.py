"""A world for the service tests: a trust file, receipts valid now, an evidence server
over real HTTP, a configuration file, and real ``handoffs serve`` processes.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any, ClassVar

import attrs

from worlds.gate import CASES, WORLD, evidence_for, raw


def _contract_spec() -> str:
    from handoffs.examples import payment

    module = payment.__name__
    return f"{module}:PAYMENT_RELEASE"


CONTRACT_SPEC = _contract_spec()
HANDOFFS = str(Path(sys.executable).with_name("handoffs"))


def receipt(case_id: str = "routine-01", **fields: Any) -> bytes:
    """A genuine receipt, valid for the next hour by the real clock."""
    now = datetime.now(UTC)
    return raw(WORLD.signed(
        case_id, valid_until=now + timedelta(hours=1), created=now - timedelta(seconds=5),
        grant=WORLD.grant(case_id, valid_until=now + timedelta(hours=2)), **fields))


class _Evidence(http.server.BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, bytes]] = {}
    delay: ClassVar[float] = 0.0
    asked: ClassVar[threading.Event] = threading.Event()

    def do_GET(self) -> None:
        self.asked.set()
        body = self.routes.get(self.path)
        if self.delay:
            time.sleep(self.delay)
        if body is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        observed = datetime.now(UTC) - timedelta(minutes=1)
        self.send_header("Last-Modified", format_datetime(observed, usegmt=True))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return


@contextlib.contextmanager
def evidence_server() -> Iterator[str]:
    """Every case's evidence over HTTP on 127.0.0.1; yields the base URL."""
    for case in CASES.values():
        for uri, ev in evidence_for(case).items():
            _Evidence.routes["/" + uri.removeprefix("evidence://")] = json.dumps(
                {"uri": uri, "claims": dict(ev.claims or {})}).encode()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Evidence)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def set_evidence_delay(seconds: float) -> None:
    """Answer every evidence request after ``seconds``; from now on,
    :func:`evidence_asked` waits for a new request."""
    _Evidence.delay = seconds
    _Evidence.asked.clear()


def evidence_asked(timeout: float) -> bool:
    """Whether the evidence server was asked since :func:`set_evidence_delay`, waiting
    up to ``timeout`` seconds for it."""
    return _Evidence.asked.wait(timeout)


def write_config(directory: Path, *, store: str, evidence: str | None, readback: float = 0,
                 extra: str = "") -> Path:
    """``serve.toml`` and ``trust.json`` in ``directory``; returns the config path."""
    (directory / "trust.json").write_text(json.dumps(WORLD.keyring.to_json()), "utf-8")
    routes = f'\n[evidence.routes]\n"evidence://" = "{evidence}"\n' if evidence else ""
    config = directory / "serve.toml"
    config.write_text(f'''identity = "case-owner"
trust = "trust.json"
contracts = ["{CONTRACT_SPEC}"]
roles = ["case-owner"]
readback = {readback}

[policy]
current = ["PAY-7.4"]
superseded = ["PAY-7.3"]

[store]
url = "{store}"
timeout = 2

[server]
host = "127.0.0.1"
port = 0
max_body_bytes = 65536
{extra}{routes}''', "utf-8")
    return config


@attrs.define
class Served:
    """A running ``handoffs serve`` process and what it logged."""

    proc: subprocess.Popen[str]
    port: int
    lines: queue.Queue[dict[str, Any]]
    seen: list[dict[str, Any]] = attrs.field(factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def events(self, name: str, *, wait: float = 0.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + wait
        while True:
            try:
                self.seen.append(self.lines.get(timeout=0.05))
                continue
            except queue.Empty:
                pass
            found = [line for line in self.seen if line.get("event") == name]
            if found or time.monotonic() >= deadline:
                return found

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)


def start_serve(config: Path, *, env: dict[str, str] | None = None,
                args: tuple[str, ...] = (), timeout: float = 60) -> Served:
    """Start ``handoffs serve`` and wait for its ``listening`` log line."""
    proc = subprocess.Popen(
        [HANDOFFS, "serve", "--config", str(config), *args], stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})},
    )
    lines: queue.Queue[dict[str, Any]] = queue.Queue()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            try:
                lines.put(json.loads(line))
            except ValueError:
                lines.put({"event": "non-json", "text": line})

    threading.Thread(target=pump, daemon=True).start()
    served = Served(proc=proc, port=0, lines=lines)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = served.events("listening", wait=0.2)
        if found:
            served.port = int(found[0]["port"])
            return served
        if proc.poll() is not None:
            break
    proc.kill()
    proc.wait()
    if proc.stderr is not None:
        proc.stderr.close()
    raise AssertionError(f"handoffs serve did not start: {served.seen}")


@contextlib.contextmanager
def serving(config: Path, **options: Any) -> Iterator[Served]:
    served = start_serve(config, **options)
    try:
        yield served
    finally:
        if served.proc.poll() is None:
            served.proc.kill()
        served.proc.wait(timeout=30)
        if served.proc.stderr is not None:
            served.proc.stderr.close()
