"""The built-in experiment's lab report and the checked-in sample report, shared by the
in-process and the subprocess rendering tests. Test modules import it from here rather
than from one another.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from handoffs.examples.payment_lab import payment_experiment
from handoffs.lab import run

__all__ = ["CREATED", "SAMPLE", "payment_report"]

SAMPLE = Path(__file__).parents[1] / "vectors" / "lab-report-sample.json"
CREATED = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def payment_report() -> dict[str, Any]:
    """The built-in experiment's report (the essay's 28 cases, every perturbation)."""
    return run(payment_experiment(), created=CREATED).report
