"""The benchmarks run and print their headline lines (the figures are not checked here:
speed claims live in ``benchmarks/``, never in unit tests)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_gate_benchmark_runs_its_self_checks_and_ends_with_both_ratios() -> None:
    pytest.importorskip("jwt")
    pytest.importorskip("based58")
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gate.py"), "--receipts", "7",
         "--rounds", "1"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(re.fullmatch(r"floor/verify ratio: \d+\.\d\d \(.*\)", line) for line in lines)
    last = lines[-2:]
    assert re.fullmatch(r"gate/peer ratio: \d+\.\d\d", last[0]), last
    assert re.fullmatch(r"gate/verify ratio: \d+\.\d\d", last[1]), last


def test_imports_benchmark_ends_with_the_ratio() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "imports.py"), "--rounds", "1"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"import ratio: \d+\.\d\d", done.stdout.splitlines()[-1])


@pytest.mark.slow
def test_serve_benchmark_counts_one_round_trip_and_prints_its_ratios() -> None:
    """A real PostgreSQL server, ``handoffs serve`` and the Starlette peer."""
    from stores import why_no_postgres

    pytest.importorskip("psutil")
    pytest.importorskip("starlette")
    reason = why_no_postgres()
    if reason is not None:
        pytest.skip(reason)
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "serve.py"), "--receipts", "100"],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    last = done.stdout.splitlines()[-5:]
    for line, name in zip(last, ("serve/gate cpu ratio", "serve/gate+pg cpu ratio",
                                 "serve/peer cpu ratio"), strict=False):
        assert re.fullmatch(rf"{re.escape(name)}: \d+\.\d\d", line), last
    assert last[3] == "pg round trips per decision: 1.00"  # counted by the server
    assert re.fullmatch(r"receipts/s per core: \d+", last[4]), last
