"""Boundary metrics where operators look: Prometheus text at ``/metrics``, and
OpenTelemetry metrics and one span per decision when ``opentelemetry`` is installed.

The counters are the essay's monitoring list, counted per decision exactly as
:meth:`~handoffs.receivers.SQLiteDecisionLog.summary` counts them over a log:
missing-field rejections, expired messages, source-resolution failures, readback
sampled and disagreeing, the distribution of counterfactual triggers, and message
bytes; plus decisions by verdict and step, refusals by reason code, replays, and
the store's availability.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any, Final

from handoffs._codes import EXPIRED_CODES
from handoffs._spans import decision_attributes
from handoffs.receivers import Decision

__all__ = ["STORE_DOWN_CODES", "BoundaryMetrics"]

STORE_DOWN_CODES: Final = frozenset({"log-unavailable", "replay-store-unavailable"})
"""Reason codes that mean the store could not answer (HTTP 503: retry later)."""

MAX_TRIGGERS: Final = 64
"""Distinct counterfactual-trigger labels kept; further texts count as ``other``."""

_BYTE_BUCKETS: Final = tuple(float(2**n) for n in range(7, 21))


def _signals(decision: Decision) -> dict[str, bool]:
    codes = {reason.code for reason in decision.reasons}
    refused = not decision.admitted
    return {
        "missing_field": refused and "missing-field" in codes,
        "expired": refused and bool(codes.intersection(EXPIRED_CODES)),
        "source_resolution": refused and "evidence-unresolved" in codes,
        "replayed": refused and "replayed" in codes,
        "store_unavailable": bool(codes & STORE_DOWN_CODES),
        # Admitted and decided, but not the proposal (``handoffs gate``'s exit 3).
        "decided_otherwise": decision.record.get("agrees_with_proposal") is False,
    }


_SIGNALS: Final = ("missing_field", "expired", "source_resolution", "store_unavailable",
                   "decided_otherwise")


class BoundaryMetrics:
    """Prometheus counters (own registry) and, optionally, OpenTelemetry instruments.

    Args:
        otel: ``True`` to require OpenTelemetry, ``False`` to skip it, ``None`` to use
            it when ``opentelemetry`` is importable.
        meter_provider / tracer_provider: OpenTelemetry providers (default: the
            global ones, as configured by the application or ``opentelemetry-instrument``).
    """

    def __init__(self, *, otel: bool | None = None, meter_provider: Any = None,
                 tracer_provider: Any = None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.decisions = Counter("handoffs_decisions", "Gate decisions.",
                                 ["receiver", "verdict", "step"], registry=r)
        self.refusals = Counter("handoffs_refusal_reasons", "Refused decisions per reason code.",
                                ["code"], registry=r)
        self.missing_field = Counter("handoffs_missing_field_rejections",
                                     "Refusals with a missing-field reason.", registry=r)
        self.expired = Counter("handoffs_expired_messages",
                               "Refusals as expired (receipt, proof or grant).", registry=r)
        self.source_resolution = Counter("handoffs_source_resolution_failures",
                                         "Refusals with evidence-unresolved.", registry=r)
        self.replays = Counter("handoffs_replays", "Refusals as replays.", registry=r)
        self.decided_otherwise = Counter(
            "handoffs_decided_otherwise", "Accepted decisions whose action is not the "
            "proposal (handoffs gate's exit 3; escalations are counted by verdict).",
            registry=r)
        self.readback = Counter("handoffs_readback", "Decisions whose claims were read back, "
                                "by result.", ["result"], registry=r)
        self.triggers = Counter("handoffs_counterfactual_triggers",
                                "Decisions per counterfactual trigger.", ["trigger"], registry=r)
        self.message_bytes = Histogram("handoffs_message_bytes", "Size of messages as received.",
                                       buckets=_BYTE_BUCKETS, registry=r)
        self.seconds = Histogram("handoffs_decision_seconds", "Time to decide one message.",
                                 registry=r)
        self.store_unavailable = Counter("handoffs_store_unavailable",
                                         "Decisions refused because the store did not answer.",
                                         registry=r)
        self.oversize = Counter("handoffs_oversize_requests",
                                "Requests refused before parsing (body too large).", registry=r)
        self.refused_requests = Counter(
            "handoffs_refused_requests", "Requests refused before the gate (unauthenticated, "
            "forbidden, rate-limited, unsupported-media-type, body-timeout).", ["reason"],
            registry=r)
        self._lock = threading.Lock()
        self._trigger_labels: set[str] = set()
        # The labelled child per (receiver, verdict, step): looked up once, not per decision.
        self._decided: dict[tuple[str | None, str, int], Any] = {}
        self.otel = (_OTel.create(meter_provider, tracer_provider) if otel is not False
                     else None)
        if otel is True and self.otel is None:
            from handoffs._errors import MissingExtra

            raise MissingExtra("OpenTelemetry metrics", extra="otel", module="opentelemetry")

    def _trigger(self, text: str) -> str:
        with self._lock:
            if text in self._trigger_labels or len(self._trigger_labels) < MAX_TRIGGERS:
                self._trigger_labels.add(text)
                return text
        return "other"

    @contextlib.contextmanager
    def span(self, receiver: str) -> Iterator[dict[str, Any] | None]:
        """One OpenTelemetry span around a decision; the yielded dict receives the
        decision's attributes. ``None`` (and no span) without OpenTelemetry, while the
        global tracer provider is the API's proxy (no SDK set: its spans would record
        nothing), or when the span does not record (sampled out): then nothing needs
        the attributes.
        """
        otel = self.otel
        if otel is None or not otel.tracing():
            yield None
            return
        with otel.tracer.start_as_current_span("handoffs.decide") as span:
            if not span.is_recording():
                yield None
                return
            attributes: dict[str, Any] = {}
            span.set_attribute("handoffs.receiver", receiver)
            yield attributes
            for key, value in attributes.items():
                if value is not None:
                    span.set_attribute(key, value)

    def observe(self, decision: Decision, *, message_bytes: int, seconds: float,
                attributes: bool = True) -> dict[str, Any]:
        """Count one decision; returns its span attributes (an empty dict unless
        ``attributes``: no span records them).
        """
        signals = _signals(decision)
        verdict, step = decision.verdict.value, int(decision.step)
        labels = {"receiver": decision.receiver, "verdict": verdict, "step": str(step)}
        key = (decision.receiver, verdict, step)
        decided = self._decided.get(key)
        if decided is None:
            decided = self._decided.setdefault(key, self.decisions.labels(**labels))
        decided.inc()
        if not decision.admitted:
            for code in sorted({reason.code for reason in decision.reasons}):
                self.refusals.labels(code=code).inc()
        for name in _SIGNALS:
            if signals[name]:
                getattr(self, name).inc()
        if signals["replayed"]:
            self.replays.inc()
        if decision.readback is not None:
            self.readback.labels(result=decision.readback).inc()
        trigger = None
        if decision.counterfactual_trigger is not None:
            trigger = self._trigger(decision.counterfactual_trigger)
            self.triggers.labels(trigger=trigger).inc()
        self.message_bytes.observe(message_bytes)
        self.seconds.observe(seconds)
        if self.otel is not None:
            self.otel.observe(labels, signals, decision, trigger, message_bytes, seconds=seconds)
        if not attributes:
            return {}
        # The attributes the adapters' spans carry too; the reasons a string array.
        return {**decision_attributes(decision), "handoffs.message_bytes": message_bytes}

    def exposition(self) -> bytes:
        """The Prometheus text exposition of every counter."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


class _OTel:
    """The same counters as OpenTelemetry instruments, on the global providers."""

    def __init__(self, metrics: Any, trace: Any, meter_provider: Any,
                 tracer_provider: Any) -> None:
        meter = metrics.get_meter("handoffs.service", meter_provider=meter_provider)
        self.tracer = trace.get_tracer("handoffs.service", tracer_provider=tracer_provider)
        self._trace = trace
        self._global = tracer_provider is None
        self.decisions = meter.create_counter("handoffs.decisions", description="Gate decisions.")
        self.signals = {
            "missing_field": meter.create_counter("handoffs.missing_field_rejections"),
            "expired": meter.create_counter("handoffs.expired_messages"),
            "source_resolution": meter.create_counter("handoffs.source_resolution_failures"),
            "replayed": meter.create_counter("handoffs.replays"),
            "store_unavailable": meter.create_counter("handoffs.store_unavailable"),
            "decided_otherwise": meter.create_counter("handoffs.decided_otherwise"),
        }
        self.readback = meter.create_counter("handoffs.readback")
        self.triggers = meter.create_counter("handoffs.counterfactual_triggers")
        self.message_bytes = meter.create_histogram("handoffs.message_bytes", unit="By")
        self.duration = meter.create_histogram(
            "handoffs.decision.duration", unit="s",
            description="Time to decide one message (Prometheus: handoffs_decision_seconds).")

    @classmethod
    def create(cls, meter_provider: Any, tracer_provider: Any) -> _OTel | None:
        try:
            from opentelemetry import metrics, trace
        except ImportError:
            return None
        return cls(metrics, trace, meter_provider, tracer_provider)

    def tracing(self) -> bool:
        """False while the tracer is the global provider's and that is the API's proxy
        (no provider set yet: a span would record nothing).
        """
        return not (self._global and isinstance(self._trace.get_tracer_provider(),
                                                self._trace.ProxyTracerProvider))

    def observe(self, labels: dict[str, str], signals: dict[str, bool], decision: Decision,
                trigger: str | None, message_bytes: int, *, seconds: float) -> None:
        self.decisions.add(1, labels)
        for name, counter in self.signals.items():
            if signals[name]:
                counter.add(1)
        if decision.readback is not None:
            self.readback.add(1, {"result": decision.readback})
        if trigger is not None:
            self.triggers.add(1, {"trigger": trigger})
        self.message_bytes.record(message_bytes)
        self.duration.record(seconds, labels)
