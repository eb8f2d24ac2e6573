"""The lab on worker processes (``executor="processes"``, ``--executor processes``): the
same figures as on threads (the other executors are tested in ``tests/unit/test_runner.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from handoffs.lab import run
from worlds.lab_cli import invoke
from worlds.lab_runs import CREATED, essay, normalise, threaded_report


@pytest.fixture(scope="module")
def threaded() -> dict[str, Any]:
    return threaded_report()


def test_processes_give_identical_results(threaded: dict[str, Any]) -> None:
    report = run(essay(), executor="processes", workers=2, chunk_size=7, created=CREATED).report
    assert report["provenance"]["executor"] == "processes"
    assert normalise(report) == normalise(threaded)


@pytest.mark.slow
def test_run_on_processes(tmp_path: Path) -> None:
    result = invoke("run", "--out", str(tmp_path), "--no-progress", "--executor", "processes",
                    "--workers", "2")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "report.json").read_text("utf-8"))
    assert report["provenance"]["executor"] == "processes"
