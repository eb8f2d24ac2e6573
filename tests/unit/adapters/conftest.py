"""The adapter tests' fixtures (defined in tests/adapter_fixtures.py)."""

from adapter_fixtures import (  # noqa: F401
    make_receiver,
    otel_exporter,
    otel_spans,
    receiver,
    replayer,
    signer,
    world,
)
