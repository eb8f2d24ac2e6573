"""``handoffs gate`` called in process: its files (a trust ring and a signed receipt of
the gate's world), the call and its decision, shared by the command's tests with and
without an evidence server. Test modules import it from here rather than from one
another.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from handoffs.cli._gate import gate
from worlds.gate import WORLD, raw

__all__ = ["NOW", "decision", "gate_files", "run"]

NOW = "2026-06-01T12:01:00Z"


def gate_files(tmp_path: Path) -> dict[str, Path]:
    """The trust ring and the receipt of ``policy-01`` in ``tmp_path``, and a log path."""
    trust = tmp_path / "trust.json"
    trust.write_text(json.dumps(WORLD.keyring.to_json()))
    receipt = tmp_path / "receipt.json"
    receipt.write_bytes(raw(WORLD.signed("policy-01")))
    return {"trust": trust, "receipt": receipt, "db": tmp_path / "log.sqlite",
            "dir": tmp_path}


def run(*args: Any, stdin: bytes | None = None, env: dict[str, str] | None = None) -> Result:
    """Invoke ``handoffs gate``; as ``case-owner`` unless the arguments say otherwise."""
    argv = [str(a) for a in args]
    if "--as" not in argv and env is None:
        argv += ["--as", "case-owner"]
    return CliRunner().invoke(gate, argv, input=stdin, env=env)


def decision(result: Result) -> dict[str, Any]:
    """The decision the command printed."""
    return dict(json.loads(result.stdout))
