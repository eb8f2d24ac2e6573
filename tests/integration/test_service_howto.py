"""The how-to "Run the gate as a service" runs: its serve.toml, then every console
command in order, in one bash session, against real processes on 127.0.0.1, a real
PostgreSQL server and an evidence server over HTTP. Each output line the page shows
must appear in what its block printed (``...`` stands for any lines; a line ending in
``...`` is a prefix).

Addresses are the page's with free ports substituted; ``python benchmarks/…`` lines
run in ``test_the_replicas_benchmark`` (slow).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from console_pages import blocks, matches
from serve_world import evidence_server, receipt
from stores import PostgresServer, free_port
from worlds.gate import WORLD

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "how-to" / "run-as-a-service.md"
_CONFIG = re.compile(r'^```toml title="serve.toml"\n(.*?)^```', re.S | re.M)

pytest.importorskip("starlette")


def test_block_parsing() -> None:
    text = "```console\n$ a \\\n  b\nout\n...\n```\n"
    assert blocks(text) == [(["a \\\n  b"], ["out", "..."])]
    assert matches(["out", "pre...", "..."], "x\nout\nprefix\n") == []
    assert matches(["gone"], "out") == ["gone"]


def test_the_how_to_runs(tmp_path: Path, postgres: PostgresServer) -> None:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed (apt-get install curl)")
    text = PAGE.read_text("utf-8")
    ports = {str(page): str(free_port()) for page in (8080, 8081, 8082, 8083)}
    database = postgres.create_database("howto")
    with evidence_server() as evidence:
        substitutions = {
            "http://127.0.0.1:9000/": evidence,
            "postgresql://postgres@127.0.0.1:5432/handoffs": database,
            "127.0.0.1:5999": f"127.0.0.1:{free_port()}",
            **{f"127.0.0.1:{page}": f"127.0.0.1:{port}" for page, port in ports.items()},
            **{f"HANDOFFS_PORT={page}": f"HANDOFFS_PORT={port}" for page, port in ports.items()},
            "port = 8080": f"port = {ports['8080']}",
        }

        def local(value: str) -> str:
            for page_text, here in substitutions.items():
                value = value.replace(page_text, here)
            return value

        config = _CONFIG.search(text)
        assert config is not None
        (tmp_path / "serve.toml").write_text(local(config[1]), "utf-8")
        (tmp_path / "trust.json").write_text(
            __import__("json").dumps(WORLD.keyring.to_json()), "utf-8")
        for name, case in (("receipt.json", "routine-01"), ("receipt-2.json", "policy-01"),
                           ("receipt-3.json", "value-02")):
            (tmp_path / name).write_bytes(receipt(case))
        script = ["trap 'kill $(jobs -p) 2>/dev/null || true' EXIT", "set -e"]
        found = blocks(text)
        ran = 0
        for index, (commands, _) in enumerate(found):
            script.append(f"echo '::block {index}::'")
            for command in commands:
                if command.startswith("python benchmarks/"):
                    continue
                script.append(local(command))
                ran += 1
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        env.pop("HANDOFFS_STORE_URL", None)
        done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    assert ran >= 20
    printed = re.split(r"^::block (\d+)::$", done.stdout, flags=re.M)
    outputs = {int(printed[i]): printed[i + 1] for i in range(1, len(printed), 2)}
    for index, (commands, expected) in enumerate(found):
        if any(c.startswith("python benchmarks/") for c in commands):
            continue
        assert matches(expected, outputs[index]) == [], (index, outputs[index])


@pytest.mark.slow
def test_the_replicas_benchmark() -> None:
    """The page's benchmark command, as written; every count must be 0."""
    commands = [c for block, _ in blocks(PAGE.read_text("utf-8")) for c in block
                if c.startswith("python benchmarks/")]
    assert commands == ["python benchmarks/replicas.py"]
    done = subprocess.run([sys.executable, *commands[0].split()[1:]], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    for line in ("double-admitted: 0", "lost acknowledged rows: 0", "burned ids: 0",
                 "stall: admitted during stall 0"):
        assert line in done.stdout.splitlines()
