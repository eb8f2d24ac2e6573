"""Fixtures of the adapter tests (the payment world lives in ``adapter_world``), re-exported by
the conftest.py of tests/unit/adapters and tests/integration/adapters.

Each adapter's test module starts with ``pytest.importorskip("<framework>")`` so that
it is skipped cleanly when its extra is absent; this file imports no framework. The
only test doubles are for what is remote: the language models (each framework's own
scripted or fake model).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from adapter_world import Replayer, World, make_sender, make_world, strict_receiver
from handoffs.contracts import Sender
from handoffs.receivers import StrictContractReceiver


@pytest.fixture(scope="session")
def world() -> World:
    return make_world()


@pytest.fixture
def signer(world: World) -> Sender[Any, Any]:
    return make_sender(world)


@pytest.fixture
def make_receiver(world: World) -> Callable[..., StrictContractReceiver]:
    """A strict case-owner receiver; ``at=`` moves its clock (expiry), ``identity=`` its
    audience. Each call has a fresh replay store."""
    return lambda **options: strict_receiver(world, **options)


@pytest.fixture
def receiver(world: World) -> StrictContractReceiver:
    return strict_receiver(world)


@pytest.fixture
def replayer() -> Replayer:
    return Replayer()


@pytest.fixture(scope="session")
def otel_exporter() -> Any:
    """The OpenTelemetry SDK's ``InMemorySpanExporter`` on the global tracer provider,
    installed once per process (OpenTelemetry allows one global provider)."""
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(TracerProvider())
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider), "another tracer provider is installed"
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


@pytest.fixture
def otel_spans(otel_exporter: Any) -> Any:
    """:func:`otel_exporter`, emptied for this test."""
    otel_exporter.clear()
    return otel_exporter
