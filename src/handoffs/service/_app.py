"""The gate behind HTTP: a Starlette application (run by uvicorn in ``handoffs serve``).

Endpoints:

- ``POST /receipts``: the body is the receipt's bytes as sent, with ``Content-Type:
  application/json``. The answer is the :class:`~handoffs.receivers.Decision` as JSON
  with status **200** when admitted (``ACCEPT`` or ``ESCALATE``), **422** when refused,
  **503** (with ``Retry-After``) when refused because the store did not answer (nothing
  was claimed: sending the same bytes again is safe; the answer says only "store
  unavailable", the details go to the log). A ``replayed`` refusal carries
  ``earlier.admitted`` (an earlier decision admitted a receipt with this id: the store
  spends an id only with an admitted decision). Before the gate, without a decision:
  **400** ``repeated-header`` for a second ``Authorization``, ``Content-Type`` or
  ``Content-Length`` header, **401** without a valid ``Bearer`` token (when callers are
  configured; any other scheme is refused), **403** for a caller not bound to this
  receiver, **429** over the caller's rate (counted per replica: each process holds its
  own buckets), **415** for a body not declared ``application/json``, **413** above
  ``max_body_bytes``, **408** when the body is not sent within ``body_timeout``.
  Before any request, the connection guard (:meth:`Service.http_protocol`) answers
  **408** to a connection without a complete request head within ``header_timeout``
  and **503** to a connection above ``max_connections`` or
  ``max_connections_per_address``, and closes it.
- ``GET /healthz``: 200 while the process serves.
- ``GET /readyz``: 200 when the store answers, 503 ("store unavailable") otherwise or
  while shutting down.
- ``GET /metrics``: the boundary metrics in Prometheus text format.

The gate runs on a thread pool (its store call blocks for up to the store's timeout;
the event loop keeps answering meanwhile). A JSON log line per decision only with
``log_decisions``: the store holds every decision.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeAlias, TypeVar

import orjson

from handoffs._json import JSONLimits, dumps
from handoffs.integrity import KeyRing
from handoffs.receivers import (
    Decision,
    Gate,
    HTTPEvidenceResolver,
    InMemoryPolicyService,
    MemoryReplayStore,
    StrictContractReceiver,
)
from handoffs.service._config import Caller, ConfigError, ServiceConfig
from handoffs.service._guard import guarded_protocol
from handoffs.service._metrics import STORE_DOWN_CODES, BoundaryMetrics
from handoffs.service._store import DecisionStore, open_store

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["Service"]

LOG: Final = logging.getLogger("handoffs.service")
T = TypeVar("T")
RECEIPTS_PATH: Final = "/receipts"
STORE_UNAVAILABLE: Final = "store unavailable"
"""What answers say when the store did not answer (its address stays in the log)."""


def _event(event: str, **fields: Any) -> None:
    LOG.info(event, extra={"fields": fields})


def gate_of(config: ServiceConfig, *, store: DecisionStore | None,
            memory_replay: bool = False) -> StrictContractReceiver:
    """The strict receiver over the gate ``config`` describes, on ``store`` (its decision
    log and replay store); without a store, an in-memory replay store when
    ``memory_replay``, else none (the benchmarks' references).

    Raises:
        ConfigError: the trust file or the contracts cannot be loaded.
    """
    try:
        ring = KeyRing.from_json(json.loads(config.trust.read_text("utf-8")))
    except OSError as exc:
        raise ConfigError(f"cannot read the trust file {config.trust}: "
                          f"{exc.strerror or exc}", json_path="$.trust") from exc
    except ValueError as exc:
        raise ConfigError(f"bad trust file {config.trust}: {exc}",
                          json_path="$.trust") from exc
    roles = set(config.roles).union(
        *(entry.roles for entry in ring.for_controller(config.identity)))
    options: dict[str, Any] = {}
    versions = {**dict.fromkeys(config.policy_superseded, False),
                **dict.fromkeys(config.policy_current, True)}
    if versions:
        options["policy_service"] = InMemoryPolicyService(versions)
    if config.evidence_routes:
        options["evidence"] = HTTPEvidenceResolver(routes=config.evidence_routes,
                                                   timeout=config.evidence_timeout)
    replay: Any = store if store is not None or not memory_replay else MemoryReplayStore()
    gate = Gate(
        identity=config.identity, trust=ring, registry=config.registry(), roles=roles,
        replay=replay, log=store, readback=config.readback,
        limits=JSONLimits(max_bytes=config.max_body_bytes), **options,
    )
    return StrictContractReceiver(gate)


class Service:
    """A configured gate, its store and its metrics (what the application serves).

    Raises:
        ConfigError: the trust file or the contracts cannot be loaded.
        DecisionLogError: the store cannot be opened (a SQLite file; PostgreSQL only
            connects on use).
    """

    def __init__(self, config: ServiceConfig, *, store: DecisionStore | None = None) -> None:
        self.config = config
        self.store = store if store is not None else open_store(
            config.store_url, keep_messages=config.keep_messages, retain=config.retain,
            **({"refused_retain": config.refused_retain} if config.refused_retain else {}),
            **({"timeout": config.store_timeout, "pool_size": config.pool_size,
                "group_commit": min(config.group_commit, config.store_timeout / 2)}
               if "://" in config.store_url else {"busy_timeout": config.store_timeout}),
        )
        self.receiver = gate_of(config, store=self.store)
        self.gate = self.receiver.gate
        self.metrics = BoundaryMetrics(otel=config.otel)
        self.stopping = False
        self.callers = {caller.token_sha256: caller for caller in config.callers}
        self.clock: Callable[[], float] = time.monotonic
        self._buckets: dict[str, tuple[float, float]] = {}

    def decide(self, body: bytes) -> Decision:
        """Gate ``body`` and count it (runs in a worker thread)."""
        metrics = self.metrics
        # No span (and no attributes built) unless one records: metrics.span.
        with metrics.span(self.receiver.name) as attributes:
            started = time.perf_counter()
            decision = self.receiver.receive(body)
            seconds = time.perf_counter() - started
            observed = metrics.observe(decision, message_bytes=len(body), seconds=seconds,
                                       attributes=attributes is not None)
            if attributes is not None:
                attributes.update(observed)
        status = status_of(decision)
        if status == 503:  # the details (the store's address) only here
            LOG.warning("store-unavailable", extra={"fields": {
                "receipt_id": decision.receipt_id,
                "reasons": [r.message for r in decision.reasons
                            if r.code in STORE_DOWN_CODES]}})
        if self.config.log_decisions:
            _event("decision", receipt_id=decision.receipt_id, contract=decision.contract,
                   verdict=decision.verdict.value, action=decision.action,
                   step=int(decision.step), reasons=[r.code for r in decision.reasons],
                   status=status, bytes=len(body), ms=round(seconds * 1000, 3))
        return decision

    def ready(self) -> str | None:
        """None when ready, else why not (the store's details go to the log only)."""
        if self.stopping:
            return "shutting down"
        try:
            self.store.ping()
        except Exception as exc:  # any failure means "not ready"
            LOG.warning("not-ready", extra={"fields": {"detail": str(exc)}})
            return STORE_UNAVAILABLE
        return None

    def app(self) -> Starlette:
        """The ASGI application (Starlette) serving this gate, for ``handoffs serve``'s
        uvicorn or for embedding in another server.
        """
        return _create_app(self)

    def http_protocol(self) -> type[asyncio.Protocol]:
        """Uvicorn's HTTP protocol class (httptools or h11, as uvicorn picks) under this
        service's connection guard: the header timeout and the connection caps
        (``header_timeout``, ``max_connections``, ``max_connections_per_address``);
        what ``handoffs serve`` passes as uvicorn's ``http``.
        """
        from uvicorn.protocols.http.auto import AutoHTTPProtocol

        refused = self.metrics.refused_requests
        return guarded_protocol(
            AutoHTTPProtocol, header_timeout=self.config.header_timeout,
            max_connections=self.config.max_connections,
            max_connections_per_address=self.config.max_connections_per_address,
            refused=lambda reason: refused.labels(reason=reason).inc())

    def caller(self, authorization: str | None) -> Caller | None:
        """The caller whose bearer token this ``Authorization`` header carries."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        digest = hashlib.sha256(token.strip().encode()).hexdigest()
        found = None
        for known, caller in self.callers.items():  # every one, in constant time each
            if hmac.compare_digest(known, digest):
                found = caller
        return found

    def admit_rate(self, caller: Caller) -> float:
        """0 when ``caller`` may send one more receipt now, else seconds to wait."""
        if caller.rate is None:
            return 0.0
        now = self.clock()
        tokens, then = self._buckets.get(caller.name, (float(caller.burst), now))
        tokens = min(float(caller.burst), tokens + (now - then) * caller.rate)
        if tokens < 1:
            self._buckets[caller.name] = (tokens, now)
            return (1 - tokens) / caller.rate
        self._buckets[caller.name] = (tokens - 1, now)
        return 0.0


REPLAYED: Final = "replayed"


def answer_of(decision: Decision) -> dict[str, Any]:
    """The decision as answered: a store failure's reason says only "store unavailable";
    a replay says what became of the earlier receipt with its id (``earlier``).

    The service's store claims a receipt id only together with an admitted decision's
    row (a refusal spends nothing), so a ``replayed`` refusal means an earlier decision
    **admitted** a receipt with this id: a sender re-sending after a 503 (a commit cut
    by a store stall) learns that its receipt was admitted, and is not admitted twice.
    """
    document = decision.to_json()
    if any(reason.code == REPLAYED for reason in decision.reasons):
        document["earlier"] = {
            "admitted": True,
            "message": f"an earlier decision admitted receipt {decision.receipt_id}; "
                       "it stands in the decision log (this copy is not admitted again)"}
    if any(reason.code in STORE_DOWN_CODES for reason in decision.reasons):
        document["reasons"] = [
            {**reason, "message": STORE_UNAVAILABLE} if reason.get("code") in STORE_DOWN_CODES
            else reason for reason in document["reasons"]]
    return document


def _is_json(content_type: str | None) -> bool:
    """True for ``application/json``, with no parameter but ``charset=utf-8`` (JSON
    is UTF-8: RFC 8259); any other media type (``text/json``, ``…+json``) is not.
    """
    media, _, parameters = (content_type or "").partition(";")
    if media.strip().lower() != "application/json":
        return False
    for parameter in filter(None, (p.strip() for p in parameters.split(";"))):
        name, _, value = parameter.partition("=")
        if name.strip().lower() != "charset" or value.strip().strip('"').lower() not in {
                "utf-8", "utf8"}:
            return False
    return True


def status_of(decision: Decision) -> int:
    """200 admitted, 503 refused because the store did not answer, 422 refused."""
    if decision.admitted:
        return 200
    if any(reason.code in STORE_DOWN_CODES for reason in decision.reasons):
        return 503
    return 422


class _Workers:
    """The threads the gate runs on: up to ``size`` daemon threads taking calls from one
    queue, each answering on the calling event loop. A thread starts only when none is
    idle (one client keeps one thread warm). Half the CPU per call of
    ``run_in_executor`` on a ``ThreadPoolExecutor`` (its futures and callbacks).

    A call cut by the process's exit (after uvicorn's graceful shutdown, which waits
    for the requests in flight) is a cut connection: the store's statement commits
    whole or not at all, and the sender learns which by sending again.
    """

    def __init__(self, size: int, name: str) -> None:
        self._size, self._name = size, name
        self._calls: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._threads = 0
        self._lock = threading.Lock()

    def run(self, function: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """``function(*args)`` on a worker thread; its result (or exception) on the
        running loop's future.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._calls.put((loop, future, function, args))
        if not self._idle.acquire(blocking=False) and self._threads < self._size:
            with self._lock:
                if self._threads < self._size:
                    self._threads += 1
                    threading.Thread(target=self._work, name=f"{self._name}_{self._threads}",
                                     daemon=True).start()
        return future

    def _work(self) -> None:
        calls, idle = self._calls, self._idle
        while True:
            loop, future, function, args = calls.get()
            result: Any = None
            error: BaseException | None = None
            try:
                result = function(*args)
            except BaseException as exc:  # handed to the awaiting request
                error = exc
            idle.release()  # before the answer: the caller's next call finds this thread
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody awaits it
                loop.call_soon_threadsafe(_settle, future, result, error)
            del loop, future, function, args, result, error


def _settle(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if future.cancelled():  # the request went away (its client disconnected)
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


_ORJSON: Final = orjson.OPT_SORT_KEYS
_SINGLE: Final = frozenset({b"authorization", b"content-type", b"content-length"})
"""Headers a request may carry at most once (else 400 ``repeated-header``)."""
_Answer: TypeAlias = tuple[int, bytes, list[tuple[bytes, bytes]]]


class _Endpoint:
    """An ASGI callable as a route's endpoint (Starlette calls it with scope, receive,
    send instead of wrapping it in a Request).
    """

    def __init__(self, app: Callable[[Any, Any, Any], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


def _create_app(service: Service) -> Starlette:  # noqa: PLR0915 - one closure per endpoint
    """The Starlette application serving ``service`` (:meth:`Service.app`)."""
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    def json_response(content: Any, status_code: int = 200,
                      headers: dict[str, str] | None = None) -> Response:
        """JSON with a final newline (for curl and line-oriented clients)."""
        return Response(dumps(content) + "\n", status_code=status_code, headers=headers,
                        media_type="application/json")

    config = service.config
    limit = config.max_body_bytes
    # The gate and the store block (up to the store's timeout): they run on threads, so
    # that a stalled store never stalls the event loop; one thread per pooled
    # connection (more would only contend for the GIL: benchmarks/serve.py).
    workers = _Workers(config.pool_size, "handoffs-gate")

    # POST /receipts is a bare ASGI endpoint (no Request or Response objects): the hot path.
    close = [(b"connection", b"close")]

    def answer(status: int, content: Any, headers: list[tuple[bytes, bytes]] | None = None,
               ) -> _Answer:
        return status, orjson.dumps(content, option=_ORJSON) + b"\n", headers or []

    def refused(status: int, error: str, message: str, *,
                headers: list[tuple[bytes, bytes]] | None = None) -> _Answer:
        service.metrics.refused_requests.labels(reason=error).inc()
        if config.log_decisions:
            _event("refused-before-parsing", reason=error, status=status)
        return answer(status, {"error": error, "message": message}, headers)

    def too_large(size: int | None) -> _Answer:
        service.metrics.oversize.inc()
        if config.log_decisions:
            _event("refused-before-parsing", reason="too-large", limit=limit, bytes=size)
        return answer(413, {"error": "too-large", "limit": limit,
                            "message": f"the body exceeds {limit} bytes"}, close)

    async def read_body(headers: dict[bytes, bytes], receive: Any) -> bytes | _Answer:
        declared = headers.get(b"content-length")
        if declared is not None:
            if not declared.isdigit():
                return answer(400, {"error": "bad-content-length"}, close)
            if int(declared) > limit:
                return too_large(int(declared))
        body = bytearray()
        try:
            async with asyncio.timeout(config.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return answer(400, {"error": "disconnected"}, close)
                    body += message.get("body", b"")
                    if len(body) > limit:
                        return too_large(None)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            return refused(408, "body-timeout",
                           f"the body was not sent within {config.body_timeout:g} s",
                           headers=close)
        return bytes(body)

    def authorise(headers: dict[bytes, bytes]) -> _Answer | None:
        if not service.callers:
            return None
        token = headers.get(b"authorization")
        caller = service.caller(token.decode("latin-1") if token is not None else None)
        if caller is None:
            return refused(401, "unauthenticated", "a valid bearer token is required",
                           headers=[(b"www-authenticate", b'Bearer realm="handoffs"')])
        if config.identity not in caller.receivers:
            return refused(403, "forbidden", f"caller {caller.name!r} may not decide for "
                           f"receiver {config.identity!r}")
        wait = service.admit_rate(caller)
        if wait > 0:
            return refused(429, "rate-limited", f"caller {caller.name!r} is over its rate",
                           headers=[(b"retry-after", str(max(1, round(wait + 0.5))).encode())])
        return None

    async def decide(headers: dict[bytes, bytes], receive: Any) -> _Answer:
        denied = authorise(headers)
        if denied is not None:
            return denied
        content_type = headers.get(b"content-type")
        if not _is_json(content_type.decode("latin-1") if content_type is not None else None):
            return refused(415, "unsupported-media-type",
                           "the body must be declared Content-Type: application/json "
                           "(charset utf-8, if any)")
        body = await read_body(headers, receive)
        if isinstance(body, tuple):
            return body
        decision = await workers.run(service.decide, body)
        status = status_of(decision)
        return answer(status, answer_of(decision),
                      [(b"retry-after", b"1")] if status == 503 else None)

    async def receipts(scope: Any, receive: Any, send: Any) -> None:
        headers: dict[bytes, bytes] = {}
        repeated: bytes | None = None
        for raw, value in scope["headers"]:
            name = raw.lower()
            if name in headers and name in _SINGLE:
                repeated = name
            headers[name] = value
        if repeated is not None:  # which one would count is ambiguous: refuse both
            status, body, extra = refused(
                400, "repeated-header", f"the {repeated.decode()} header is sent more "
                "than once", headers=close)
        else:
            status, body, extra = await decide(headers, receive)
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()), *extra]})
        await send({"type": "http.response.body", "body": body})

    async def healthz(_: Request) -> Response:
        return json_response({"status": "ok"})

    async def readyz(_: Request) -> Response:
        why = await workers.run(service.ready)
        if why is None:
            return json_response({"status": "ready"})
        return json_response({"status": "unavailable", "reason": why}, status_code=503)

    async def metrics(_: Request) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(service.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    class Application(Starlette):
        """Starlette, with ``POST /receipts`` (the hot path) called before its middleware
        and router: the endpoint answers every outcome itself. Any other request, and
        this one when mounted under a prefix, goes through the router as usual.
        """

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if (scope["type"] == "http" and scope["path"] == RECEIPTS_PATH
                    and scope["method"] == "POST" and not scope.get("root_path")):
                await receipts(scope, receive, send)
                return
            await super().__call__(scope, receive, send)

    return Application(routes=[
        Route(RECEIPTS_PATH, _Endpoint(receipts), methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ])
