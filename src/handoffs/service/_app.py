"""The gate behind HTTP: a Starlette application (run by uvicorn in ``handoffs serve``).

Endpoints:

- ``POST /receipts``: the body is the receipt's bytes as sent. The answer is the
  :class:`~handoffs.receivers.Decision` as JSON with status **200** when admitted
  (``ACCEPT`` or ``ESCALATE``), **422** when refused, **503** (with ``Retry-After``)
  when refused because the store did not answer (nothing was claimed: sending the
  same bytes again is safe), **413** when the body exceeds ``max_body_bytes`` (refused
  before parsing; no decision).
- ``GET /healthz``: 200 while the process serves.
- ``GET /readyz``: 200 when the store answers, 503 otherwise or while shutting down.
- ``GET /metrics``: the boundary metrics in Prometheus text format.

Each decision is one JSON log line (logger ``handoffs.service``).
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any, Final

from handoffs._json import JSONLimits, dumps
from handoffs.contracts._keys import KeyRing
from handoffs.receivers._decision import Decision
from handoffs.receivers._gate import Gate
from handoffs.receivers._receivers import StrictContractReceiver
from handoffs.receivers._services import HTTPEvidenceResolver, InMemoryPolicyService, Readback
from handoffs.service._config import ConfigError, ServiceConfig
from handoffs.service._metrics import STORE_DOWN_CODES, BoundaryMetrics
from handoffs.service._store import DecisionStore, open_store

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["Service", "create_app"]

LOG: Final = logging.getLogger("handoffs.service")
RECEIPTS_PATH: Final = "/receipts"


def _event(event: str, **fields: Any) -> None:
    LOG.info(event, extra={"fields": fields})


class Service:
    """A configured gate, its store and its metrics (what the application serves).

    Raises:
        ConfigError: the trust file or the contracts cannot be loaded.
        DecisionLogError: the store cannot be opened (a SQLite file; PostgreSQL only
            connects on use).
    """

    def __init__(self, config: ServiceConfig, *, store: DecisionStore | None = None) -> None:
        self.config = config
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
        self.store = store if store is not None else open_store(
            config.store_url, keep_messages=config.keep_messages, retain=config.retain,
            **({"timeout": config.store_timeout, "pool_size": config.pool_size}
               if "://" in config.store_url else {}),
        )
        options: dict[str, Any] = {}
        versions = {**dict.fromkeys(config.policy_superseded, False),
                    **dict.fromkeys(config.policy_current, True)}
        if versions:
            options["policy_service"] = InMemoryPolicyService(versions)
        if config.evidence_routes:
            options["evidence"] = HTTPEvidenceResolver(routes=config.evidence_routes,
                                                       timeout=config.evidence_timeout)
        self.gate = Gate(
            identity=config.identity, trust=ring, registry=config.registry(), roles=roles,
            replay=self.store, log=self.store, readback=Readback(config.readback),
            limits=JSONLimits(max_bytes=config.max_body_bytes), **options,
        )
        self.receiver = StrictContractReceiver(self.gate)
        self.metrics = BoundaryMetrics(otel=config.otel)
        self.stopping = False

    def decide(self, body: bytes) -> Decision:
        """Gate ``body``, count it and log it (runs in a worker thread)."""
        with self.metrics.span(self.receiver.name) as attributes:
            started = time.perf_counter()
            decision = self.receiver.receive(body)
            seconds = time.perf_counter() - started
            attributes.update(self.metrics.observe(decision, message_bytes=len(body),
                                                   seconds=seconds))
        _event("decision", receipt_id=decision.receipt_id, contract=decision.contract,
               verdict=decision.verdict.value, action=decision.action,
               step=int(decision.step), reasons=[r.code for r in decision.reasons],
               status=status_of(decision), bytes=len(body), ms=round(seconds * 1000, 3))
        return decision

    def ready(self) -> str | None:
        """None when ready, else why not."""
        if self.stopping:
            return "shutting down"
        try:
            self.store.ping()
        except Exception as exc:  # any failure means "not ready"
            return str(exc)
        return None


def status_of(decision: Decision) -> int:
    """200 admitted, 503 refused because the store did not answer, 422 refused."""
    if decision.admitted:
        return 200
    if any(reason.code in STORE_DOWN_CODES for reason in decision.reasons):
        return 503
    return 422


def create_app(service: Service) -> Starlette:
    """The Starlette application serving ``service``."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import Response
    from starlette.routing import Route

    def json_response(content: Any, status_code: int = 200) -> Response:
        """JSON with a final newline (for curl and line-oriented clients)."""
        return Response(dumps(content) + "\n", status_code=status_code,
                        media_type="application/json")

    limit = service.config.max_body_bytes

    def too_large(size: int | None) -> Response:
        service.metrics.oversize.inc()
        _event("refused-before-parsing", reason="too-large", limit=limit, bytes=size)
        return json_response({"error": "too-large", "limit": limit,
                             "message": f"the body exceeds {limit} bytes"}, status_code=413)

    async def receipts(request: Request) -> Response:
        declared = request.headers.get("content-length")
        if declared is not None:
            if not declared.isdigit():
                return json_response({"error": "bad-content-length"}, status_code=400)
            if int(declared) > limit:
                return too_large(int(declared))
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                return too_large(None)
        decision = await run_in_threadpool(service.decide, bytes(body))
        status = status_of(decision)
        headers = {"Retry-After": "1"} if status == 503 else None
        return Response(dumps(decision.to_json()) + "\n", status_code=status, headers=headers,
                        media_type="application/json")

    async def healthz(_: Request) -> Response:
        return json_response({"status": "ok"})

    async def readyz(_: Request) -> Response:
        why = await run_in_threadpool(service.ready)
        if why is None:
            return json_response({"status": "ready"})
        return json_response({"status": "unavailable", "reason": why}, status_code=503)

    async def metrics(_: Request) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(service.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    return Starlette(routes=[
        Route(RECEIPTS_PATH, receipts, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ])
