"""``benchmarks/gate.py --compiled PATH``: a compiled build measured beside the pure one.

handoffs ships pure Python only: a mypyc build of the verification path's modules that
compile as they are was measured with this option and did not pay on the whole gate
(docs/explanation/cost.md, "A compiled build"). These tests keep the measurement honest,
so that it can be repeated as the gate changes: the benchmark refuses a PATH that
imports no compiled module, and the slow test compiles one module with mypyc and checks
that the child measuring PATH really imports it compiled, beside the pure build.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GATE = ROOT / "benchmarks" / "gate.py"


def test_the_benchmark_refuses_a_path_that_imports_nothing_compiled(tmp_path: Path) -> None:
    pytest.importorskip("jwt")
    pytest.importorskip("based58")
    pure = tmp_path / "src"
    shutil.copytree(ROOT / "src", pure, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run(
        [sys.executable, str(GATE), "--compiled", str(pure), "--receipts", "7", "--rounds",
         "1"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"--compiled {pure}: no compiled handoffs module there" in done.stderr
    assert "gate/peer ratio" not in done.stdout  # no figure for a build that is not one


@pytest.mark.slow
def test_a_module_compiled_by_mypyc_is_measured_beside_the_pure_build(tmp_path: Path) -> None:
    pytest.importorskip("jwt")
    pytest.importorskip("based58")
    pytest.importorskip("mypyc")
    pytest.importorskip("setuptools")  # mypyc builds its extension with setuptools
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "src", copy, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [sys.executable, "-m", "mypyc", "handoffs/_time.py"], cwd=copy,
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    assert list((copy / "handoffs").glob("_time.*.so")) or list(
        (copy / "handoffs").glob("_time.*.pyd"))
    done = subprocess.run(
        [sys.executable, str(GATE), "--compiled", str(copy), "--receipts", "7", "--rounds",
         "2"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    lines = done.stdout.splitlines()
    # The child measuring PATH imported the compiled module, and only that one.
    assert f"compiled build ({copy}): 1 modules compiled (handoffs._time)" in lines, lines
    header = next(line for line in lines if line.startswith("operation"))
    assert header.split()[-2:] == ["µs", "compiled/pure"]
    rounds = r"\d+\.\d\d \(rounds: \d+\.\d\d, \d+\.\d\d\)"
    assert any(re.fullmatch(rf"compiled/pure gate CPU ratio: {rounds}", line)
               for line in lines), lines
    assert any(re.fullmatch(rf"compiled/pure peer CPU ratio: {rounds} \(the control: .*\)",
                            line) for line in lines), lines
    assert re.fullmatch(r"compiled gate/peer ratio: \d+\.\d\d", lines[-3]), lines
    # The headline stays the pure build's, last, as without --compiled.
    assert re.fullmatch(r"gate/peer ratio: \d+\.\d\d", lines[-2]), lines
    assert re.fullmatch(r"gate/verify ratio: \d+\.\d\d", lines[-1]), lines
