"""``handoffs gate --evidence`` against an evidence source over real HTTP on 127.0.0.1
(:mod:`http_evidence`); the command's other tests are in ``tests/unit/test_receivers_cli.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from http_evidence import _serve
from worlds.gate import WORLD, raw
from worlds.gate_cli import NOW, decision, gate_files, run


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    return gate_files(tmp_path)


def test_admitted_receipt_exits_zero(files: dict[str, Path], evidence_server: str) -> None:
    _serve("policy-01")
    result = run(files["receipt"], "--trust", files["trust"], "--as", "case-owner",
                 "--role", "case-owner", "--policy", "PAY-7.4", "--now", NOW,
                 "--evidence", f"evidence://={evidence_server}", "--readback", "1")
    assert result.exit_code == 0, result.output
    out = decision(result)
    assert (out["verdict"], out["action"], out["readback"], out["sender"]) == (
        "ACCEPT", "ESCALATE", "agree", "evidence-specialist")


def _routine(files: dict[str, Path], server: str, *extra: Any,
             proposed: str | None = None) -> Result:
    _serve("routine-01")
    mutate = None if proposed is None else (lambda d: d.update(proposed_action=proposed))
    files["receipt"].write_bytes(raw(WORLD.signed("routine-01", mutate=mutate)))
    return run(files["receipt"], "--trust", files["trust"], "--role", "case-owner",
               "--policy", "PAY-7.4", "--now", NOW, "--evidence",
               f"evidence://={server}", *extra)


def test_exit_zero_only_when_the_receiver_may_act_on_the_proposal(
        files: dict[str, Path], evidence_server: str) -> None:
    acted = _routine(files, evidence_server)
    assert (acted.exit_code, decision(acted)["verdict"], decision(acted)["action"]) == (
        0, "ACCEPT", "RELEASE")
    assert _routine(files, evidence_server, "--expect", "RELEASE").exit_code == 0
    assert _routine(files, evidence_server, "--expect", "HOLD").exit_code == 3
    # The sender proposes HOLD; the receiver recomputes RELEASE: admitted, not as proposed.
    differs = _routine(files, evidence_server, proposed="HOLD")
    assert decision(differs)["verdict"] == "ACCEPT"
    assert decision(differs)["record"]["agrees_with_proposal"] is False
    assert differs.exit_code == 3
