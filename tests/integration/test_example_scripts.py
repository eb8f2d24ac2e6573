"""The examples run as scripts and as ``python -m handoffs lab run`` from the repository
root (their in-process tests are in ``tests/unit/test_examples.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from worlds.repo import EXAMPLES, ROOT


@pytest.mark.slow
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_script_runs(name: str) -> None:
    result = subprocess.run([sys.executable, f"examples/{name}.py"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "Conclusion:" in result.stdout
    assert result.stderr == ""


@pytest.mark.slow
def test_toml_runs_from_the_repository_root(tmp_path: Path) -> None:
    """``python -m handoffs`` puts the working directory on the path: no setup needed."""
    result = subprocess.run([sys.executable, "-m", "handoffs", "lab", "run",
                             "examples/pump.toml", "--out", str(tmp_path), "--no-progress"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "report.json").read_text("utf-8"))["gate"]["passed"]
