"""The how-to "Your own contract, end to end" runs: in page order, each file the page
shows under a title (``deploy.py``, ``unsigned.json``, ``experiment.toml``) is written
and each console command is run, in one bash session, from an empty temporary
directory, as the installed ``handoffs`` script, with an environment that holds no
``HANDOFFS_*`` variable but the one the page exports. Each output line the page shows
must appear in what its block printed (standard output and standard error).

The commands and files are read from the page itself, so the page and the test cannot
drift apart.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from console_pages import matches, steps

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "how-to" / "own-contract.md"
HANDOFFS = Path(sys.executable).with_name("handoffs")
_EOF = "HANDOFFS_PAGE_EOF"


def test_step_parsing() -> None:
    text = ('```python title="m.py"\nX = 1\n```\n```toml\nshown = 1\n```\n'
            "```console\n$ a \\\n  b\nout\n```\n")
    assert steps(text) == [("file:m.py", "X = 1\n"),
                           ("console", (["a \\\n  b"], ["out"]))]


def test_the_page_runs(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    if shutil.which("bash") is None:  # pragma: no cover - every CI machine has it
        pytest.skip("bash is not installed")
    assert HANDOFFS.is_file(), "the handoffs console script is not installed"
    text = PAGE.read_text("utf-8")
    found = steps(text)
    # every command on the page is in a console block, and every block is run
    assert not re.search(r"^```(bash|shell|sh)\b", text, re.M)
    commands = [c for kind, step in found if kind == "console" for c in step[0]]
    assert len(commands) == len(re.findall(r"^\$ ", text, re.M)) >= 15
    # the user's module comes first: the directory holds only it when commands start
    assert found[0] == ("file:deploy.py", found[0][1])
    assert found[1][0] == "console"

    script = ["set -e", "exec 2>&1"]
    written = []
    for index, (kind, step) in enumerate(found):
        if kind == "console":
            assert isinstance(step, tuple)
            script.append(f"echo '::block {index}::'")
            script.extend(step[0])
        else:
            assert isinstance(step, str)
            assert _EOF not in step
            name = kind.removeprefix("file:")
            written.append(name)
            script.append(f"cat > {name} <<'{_EOF}'\n{step}{_EOF}")
            if index == 0:
                script.append("echo \"::files $(ls -A)::\"")
    env = {"PATH": f"{HANDOFFS.parent}:/usr/bin:/bin",
           "HOME": str(tmp_path_factory.mktemp("home")), "LANG": "C.UTF-8"}
    assert shutil.which("handoffs", path=env["PATH"]) == str(HANDOFFS)
    assert list(tmp_path.iterdir()) == []
    done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "::files deploy.py::" in done.stdout.splitlines()

    printed = re.split(r"^::block (\d+)::$", done.stdout, flags=re.M)
    outputs = {int(printed[i]): printed[i + 1] for i in range(1, len(printed), 2)}
    for index, (kind, step) in enumerate(found):
        if kind == "console":
            assert isinstance(step, tuple)
            assert matches(step[1], outputs[index]) == [], (index, outputs[index])

    # what the page says it made, it made
    assert (tmp_path / "schemas" / "deploy-approval" / "1.0.0.json").is_file()
    decision = json.loads((tmp_path / "again.json").read_text("utf-8"))
    assert (decision["admitted"], decision["reasons"][0]["code"]) == (False, "replayed")
    artefact = json.loads((tmp_path / "report" / "release.json").read_text("utf-8"))
    assert artefact["contract"] == "deploy-approval/1.0.0"
    assert artefact["gate"]["passed"] is True
    assert artefact["proof"]["cryptosuite"] == "eddsa-jcs-2022"
    assert not (tmp_path / "dropped.json").exists()  # never an artefact beside a FAIL
    assert artefact["gate"]["waivers"] == [
        "claims verified upstream: the release agent signs only after CI re-runs the "
        "checks it cites"]
    assert set(written) <= {p.name for p in tmp_path.iterdir()}
