"""The benchmarks run and print their headline lines (the figures are not checked here:
speed claims live in ``benchmarks/``, never in unit tests)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


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


def test_cli_benchmark_ends_with_the_three_ratios() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "cli.py"), "--rounds", "1"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"its libraries: \d+ modules of .*attrs.*", lines[-4]), lines
    assert re.fullmatch(r"help/click ratio: \d+\.\d\d", lines[-3]), lines
    assert re.fullmatch(r"version/click ratio: \d+\.\d\d", lines[-2]), lines
    assert re.fullmatch(r"import handoffs.receivers / its libraries ratio: \d+\.\d\d",
                        lines[-1]), lines


@pytest.mark.parametrize("bench", sorted(p.name for p in (ROOT / "benchmarks").glob("*.py")))
def test_every_benchmark_has_a_quick_mode(bench: str) -> None:
    # CI runs each with --quick (.ci/run), so that none can rot unseen
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / bench), "--help"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "--quick" in done.stdout



@pytest.mark.slow
def test_serve_benchmark_counts_its_round_trips_and_prints_its_ratios() -> None:
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
    lines = {line.partition(": ")[0]: line.partition(": ")[2]
             for line in done.stdout.splitlines()}
    for name in ("serve/gate cpu ratio", "serve/gate+pg cpu ratio"):
        assert re.fullmatch(r"\d+\.\d\d", lines[name]), lines
    # Side by side in alternating rounds: the median, every round, the spread, p50 beside.
    for name in ("serve/peer cpu ratio", "single-client serve/peer cpu ratio"):
        assert re.fullmatch(r"\d+\.\d\d \(rounds: [\d., ]+; spread [\d.]+–[\d.]+\), "
                            r"p50 serve [\d.]+ ms / peer [\d.]+ ms", lines[name]), lines
    for name in ("pg cpu per receipt", "group commit gain", "two processes/one"):
        assert name in lines, lines
    # Counted by the server: one statement per decision alone, at most one grouped.
    trips = re.fullmatch(r"(\d+\.\d\d) \(without group commit (\d+\.\d\d)\)",
                         lines["pg round trips per decision"])
    assert trips is not None, lines
    assert trips[2] == "1.00"
    assert 0 < float(trips[1]) <= 1
    assert re.fullmatch(r"\d+", lines["receipts/s per core"]), lines
