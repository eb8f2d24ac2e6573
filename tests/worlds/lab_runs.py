"""The essay's payment experiment run by the lab, and a report without what differs
between runs, shared by the in-process and the subprocess runner tests. Test modules
import it from here rather than from one another.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import attrs

from handoffs.examples.payment_lab import payment_experiment
from handoffs.lab import run

__all__ = ["CREATED", "essay", "normalise", "threaded_report"]

CREATED = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def normalise(report: Mapping[str, Any]) -> dict[str, Any]:
    """A report without what legitimately differs between runs (timing, where, how)."""
    out = json.loads(json.dumps(report))
    out.pop("provenance")
    out["experiment"].pop("case_source")
    for row in out["results"]:
        # The memo is run-wide in each process: which chunk pays for a decision, and how
        # many processes pay for it, depend on the executor (the figures do not).
        for key in ("mean_latency_ms", "receiver_calls", "memo_hits"):
            row.pop(key)
    return out


def essay(**changes: Any) -> Any:
    return attrs.evolve(payment_experiment(profile="essay"), **changes)


def threaded_report() -> dict[str, Any]:
    """The essay experiment's report on the default (thread) executor, 7 cases a chunk."""
    return run(essay(), chunk_size=7, created=CREATED).report
