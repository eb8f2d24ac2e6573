"""The ``handoffs`` command in processes of its own: the installed script, ``python -m
handoffs``, and what a fresh ``handoffs ARGS`` run loads (the in-process tests of the
commands are in ``tests/unit/test_cli.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import handoffs
from worlds.repo import CHECKED_IN


def test_the_installed_script_runs(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("handoffs")
    env = {**os.environ, "NO_COLOR": "1"}
    ok = subprocess.run([script, "schema", "diff", "payment-release/1.0.0", CHECKED_IN],
                        capture_output=True, text=True, env=env, check=False, timeout=60)
    assert (ok.returncode, ok.stderr) == (0, "")
    assert ok.stdout.endswith("no differences\n")
    bad = subprocess.run([script, "verify", tmp_path / "none.json", "--trust", CHECKED_IN],
                         capture_output=True, text=True, env=env, check=False, timeout=60)
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1
    assert bad.stderr.startswith("error: ")
    assert "Traceback" not in bad.stderr
    module = subprocess.run([sys.executable, "-m", "handoffs", "--version"], capture_output=True,
                            text=True, env=env, check=False, timeout=60)
    assert (module.returncode, module.stdout) == (0, f"handoffs, version {handoffs.__version__}\n")


def _loaded_by(args: list[str]) -> list[str]:
    """The handoffs parts, rich and hypothesis a fresh ``handoffs ARGS`` run has loaded."""
    probe = ("import sys\n"
             "from click.testing import CliRunner\n"
             "from handoffs.cli import main\n"
             f"assert CliRunner().invoke(main, {args!r}).exit_code == 0\n"
             "print(sorted(m for m in sys.modules if m.startswith(('handoffs.lab',"
             " 'handoffs.service', 'handoffs.receivers', 'handoffs.contracts',"
             " 'handoffs.examples', 'handoffs.cli._', 'rich', 'hypothesis', 'jsonschema'))"
             " or m == 'handoffs.cli._group'))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, check=True)
    return list(json.loads(done.stdout.replace("'", '"')))


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["-h"]])
def test_help_and_version_load_no_command(args: list[str]) -> None:
    assert _loaded_by(args) == ["handoffs.cli._group"]


def test_a_command_loads_only_its_own_group() -> None:
    loaded = _loaded_by(["keys", "--help"])
    assert "handoffs.cli._keys" in loaded
    assert [m for m in loaded if m.startswith(("handoffs.lab", "handoffs.service",
                                               "handoffs.receivers", "rich"))] == []
