"""The lab's command group called in process (click's runner), shared by the in-process
and the subprocess lab command tests. Test modules import it from here rather than from
one another.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner

from handoffs.cli._lab import lab

__all__ = [
    "EXAMPLE",
    "invoke",
]


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "payment.toml"


def invoke(*args: str) -> Any:
    return CliRunner().invoke(lab, list(args), catch_exceptions=False)
