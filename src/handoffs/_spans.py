"""The OpenTelemetry attributes of one gate decision, named once for the service and the
adapters, and the adapters' span per decision.

OpenTelemetry is the ``otel`` extra: it is imported on the first decision that could be
traced, and without it nothing is recorded (no error, no cost beyond one failed import).
Attribute names follow the semantic conventions' style: a ``handoffs.`` namespace,
dot-separated, snake_case; the reason codes are a string array.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

from handoffs.receivers import Decision

__all__ = ["SPAN_NAME", "decision_attributes", "decision_span"]

SPAN_NAME: Final = "handoffs.gate"
"""The name of an adapter's span per gate decision."""

TRACER: Final = "handoffs.adapters"
"""The instrumentation scope of the adapters' spans."""

AttributeValue = str | bool | int | float | Sequence[str]

_TRACE: list[Any] = []
"""``[(opentelemetry.trace, tracer)]`` once OpenTelemetry is imported (the global
provider's tracer: a proxy until a provider is set, then that provider's), ``[None]``
when it is not installed."""


def decision_attributes(decision: Decision) -> dict[str, AttributeValue]:
    """The span attributes of ``decision`` (members that are ``None`` are left out):
    ``handoffs.receiver``, ``handoffs.verdict``, ``handoffs.admitted``, ``handoffs.step``,
    ``handoffs.action`` (the ruling, or the fail-closed action), ``handoffs.reasons``
    (the reason codes, a string array), ``handoffs.contract``, ``handoffs.receipt_id``,
    ``handoffs.sender``, ``handoffs.authority``, ``handoffs.readback``.
    """
    attributes: dict[str, Any] = {
        "handoffs.receiver": decision.receiver,
        "handoffs.verdict": decision.verdict.value,
        "handoffs.admitted": decision.admitted,
        "handoffs.step": int(decision.step),
        "handoffs.action": decision.action,
        "handoffs.reasons": [reason.code for reason in decision.reasons],
        "handoffs.contract": decision.contract,
        "handoffs.receipt_id": decision.receipt_id,
        "handoffs.sender": decision.sender,
        "handoffs.authority": decision.authority,
        "handoffs.readback": decision.readback,
    }
    return {key: value for key, value in attributes.items() if value is not None}


def _tracer() -> Any:
    """The adapters' tracer; ``None`` without OpenTelemetry, or while no tracer provider
    is set (the API's proxy would only make non-recording spans).
    """
    if not _TRACE:
        try:
            from opentelemetry import trace
        except ImportError:
            _TRACE.append(None)
        else:
            _TRACE.append((trace, trace.get_tracer(TRACER)))
    if _TRACE[0] is None:
        return None
    trace, tracer = _TRACE[0]
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return None
    return tracer


Extra = Callable[[], Mapping[str, "AttributeValue | None"]]
"""Makes a span's further attributes (called only when the span records)."""
Record = Callable[[Decision, Extra], None]
"""Sets a decision's attributes on the open span."""


@contextlib.contextmanager
def decision_span(adapter: str) -> Iterator[Record]:
    """A span :data:`SPAN_NAME` around one gate decision, a child of the current span
    (the framework's, when it traces with OpenTelemetry), on the global tracer
    provider; the yielded callable records the decision's attributes
    (:func:`decision_attributes` and what ``extra()`` returns). Without OpenTelemetry,
    or when the span does not record (no SDK, or sampled out), it builds nothing.
    """
    tracer = _tracer()
    if tracer is None:
        yield _ignore
        return
    with tracer.start_as_current_span(SPAN_NAME, attributes={"handoffs.adapter": adapter}
                                      ) as span:
        if not span.is_recording():  # no SDK (or a sampler said no): build nothing
            yield _ignore
            return

        def record(decision: Decision, extra: Extra) -> None:
            attributes = decision_attributes(decision)
            attributes.update({key: value for key, value in extra().items()
                               if value is not None})
            span.set_attributes(attributes)

        yield record


def _ignore(decision: Decision, extra: Extra) -> None:
    return None
