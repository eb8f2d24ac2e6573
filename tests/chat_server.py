"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1.

**A test double for a remote model provider** (the only thing the tests stand in
for): it speaks real HTTP through the standard library's ``http.server``, so the
client's connection handling, headers, status codes, ``Retry-After`` and timeouts
are exercised for real; only the "model" is a Python function. It records every
request and the most requests it ever had in flight at once; with ``gather=n`` it holds
the first requests until ``n`` are in flight together, so a test of a client's overlap
does not depend on how fast a loaded machine sends them.
"""

from __future__ import annotations

import ipaddress
import json
import re
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Reply = tuple[int, dict[str, str], Any]
"""(status, headers, body: a JSON value, or str/bytes sent as they are)."""


def completion(content: str, *, tokens_in: int | None = None, tokens_out: int = 5) -> Any:
    """A chat-completions body answering ``content``."""
    return {
        "id": "chatcmpl-test", "object": "chat.completion", "model": "scripted",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": tokens_in if tokens_in is not None else 50,
                  "completion_tokens": tokens_out,
                  "total_tokens": (tokens_in or 50) + tokens_out},
    }


def prompt_of(body: dict[str, Any]) -> str:
    """The last user message of a request body."""
    return str(body["messages"][-1]["content"])


def payment_policy(body: dict[str, Any]) -> Reply:
    """A 'model' that applies the payment policy to the decision state in the prompt
    (ESCALATE when it cannot read one): a well-behaved receiver for the tests.
    """
    prompt = prompt_of(body)
    match = re.search(r"\{.*\}", prompt, re.DOTALL)
    action = "ESCALATE"
    if match:
        try:
            message = json.loads(match.group(0))
        except ValueError:
            message = {}
        state = message.get("decision_state") if isinstance(message, dict) else None
        if isinstance(state, dict):
            action = _policy(state)
    tokens_in = max(1, len(prompt) // 4)
    return 200, {}, completion(json.dumps({"action": action}), tokens_in=tokens_in)


def handover_policy(body: dict[str, Any]) -> Reply:
    """A 'model' for the agents experiment's case owner: the payment policy on the
    decision state of the last verified receipt in the conversation (a handover's
    ``content``), ESCALATE when there is none.
    """
    action = "ESCALATE"
    for message in reversed(body["messages"]):
        content = message.get("content")
        try:
            value = json.loads(content) if isinstance(content, str) else None
        except ValueError:
            continue
        receipt = value.get("content") if isinstance(value, dict) else None
        if isinstance(receipt, dict) and isinstance(receipt.get("decision_state"), dict):
            action = _policy(receipt["decision_state"])
            break
    chars = sum(len(str(m.get("content") or "")) for m in body["messages"])
    return 200, {}, completion(json.dumps({"action": action}), tokens_in=max(1, chars // 4))


def _policy(state: dict[str, Any]) -> str:  # noqa: PLR0911 - the essay's decision list
    if state.get("identity_verified") is not True:
        return "HOLD"
    if state.get("screening_clear") is not True:
        return "HOLD"
    if state.get("duplicate_signal") is not False:
        return "REJECT_DUPLICATE"
    if state.get("policy_current") is not True:
        return "ESCALATE"
    if state.get("evidence_conflict") is not False:
        return "ESCALATE"
    if state.get("high_value") is not False:
        return "ESCALATE"
    return "RELEASE"


class ScriptedServer:
    """The server; ``script(body) -> Reply`` answers each request (in order).

    ``delay`` seconds pass before each answer. With ``gather=n``, the first requests
    are held until ``n`` are in flight at once (or for ``hold`` seconds, after which the
    server stops waiting); from then on it answers after ``delay`` alone. A client that
    never has ``n`` requests out therefore shows a smaller ``max_in_flight``, however
    fast or slow the machine.
    """

    def __init__(self, script: Callable[[dict[str, Any]], Reply] = payment_policy, *,
                 delay: float = 0.0, gather: int = 0, hold: float = 10.0,
                 tls: ssl.SSLContext | None = None) -> None:
        self.script = script
        self.tls = tls
        self.delay = delay
        self.gather = gather
        self.hold = hold
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.gathered = threading.Condition(self.lock)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                raw = self.rfile.read(length)
                with server.lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    if server.max_in_flight >= server.gather:
                        server.gathered.notify_all()
                    elif not server.gathered.wait_for(
                            lambda: server.max_in_flight >= server.gather, server.hold):
                        server.gather = 0  # never came: answer after ``delay`` alone
                        server.gathered.notify_all()
                try:
                    body = json.loads(raw)
                    with server.lock:
                        server.requests.append(body)
                        server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    if self.path.rstrip("/") != "/v1/chat/completions":
                        status, headers, reply = 404, {}, {"error": "not found"}
                    else:
                        if server.delay:
                            time.sleep(server.delay)
                        status, headers, reply = server.script(body)
                finally:
                    with server.lock:
                        server.in_flight -= 1
                data = reply if isinstance(reply, bytes) else (
                    reply.encode() if isinstance(reply, str) else json.dumps(reply).encode())
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up
                    return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The ``base_url`` to give a client."""
        host, port = self.httpd.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host!s}:{port}/v1"

    def start(self) -> ScriptedServer:
        """Serve in a background thread."""
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.httpd.shutdown()
        self.httpd.server_close()


@contextmanager
def serving(script: Callable[[dict[str, Any]], Reply] = payment_policy, *,
            delay: float = 0.0, gather: int = 0,
            tls: ssl.SSLContext | None = None) -> Iterator[ScriptedServer]:
    """A started server (over TLS with ``tls``: see :func:`self_signed`; holding the
    first requests until ``gather`` are in flight: see :class:`ScriptedServer`),
    stopped on exit."""
    server = ScriptedServer(script, delay=delay, gather=gather, tls=tls).start()
    try:
        yield server
    finally:
        server.stop()


def sequence(*replies: Reply) -> Callable[[dict[str, Any]], Reply]:
    """A script answering with ``replies`` in turn (the last one repeats)."""
    lock = threading.Lock()
    position = [0]

    def script(_: dict[str, Any]) -> Reply:
        with lock:
            index = min(position[0], len(replies) - 1)
            position[0] += 1
        return replies[index]

    return script



def self_signed(directory: Path) -> tuple[ssl.SSLContext, Path]:
    """A server TLS context for 127.0.0.1 with a self-signed certificate, and the
    certificate's PEM file (what a client must be told to trust)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = directory / "server.pem", directory / "server.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    return context, cert_file
