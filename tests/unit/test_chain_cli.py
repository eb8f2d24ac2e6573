"""``handoffs gate chain.json``: handoff chains from the shell, receipts' exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from handoffs._time import format_time
from handoffs.cli import main
from worlds.chains import LEDGER, RING, STANDARD, T, make_chain, with_step
from worlds.chains import aged as _aged

NOW = format_time(T)


@pytest.fixture
def trust(tmp_path: Path) -> Path:
    path = tmp_path / "trust.json"
    path.write_text(json.dumps(RING.to_json()))
    return path


def _file(tmp_path: Path, spec: list[dict[str, Any]], name: str = "chain.json") -> Path:
    path = tmp_path / name
    path.write_bytes(make_chain(spec).to_bytes())
    return path


def gate(*args: Any) -> Result:
    return CliRunner().invoke(main, ["gate", *(str(a) for a in args)], prog_name="handoffs")


def codes(result: Result) -> list[str]:
    return [reason["code"] for reason in json.loads(result.stdout)["reasons"]]


def test_an_accepted_decide_chain_exits_zero(tmp_path: Path, trust: Path) -> None:
    chain = _file(tmp_path, STANDARD)
    result = gate(chain, "--trust", trust, "--as", LEDGER, "--now", NOW)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["verdict"], out["action"], out["authority"]) == ("ACCEPT", "RELEASE", "DECIDE")
    assert out["receiver"] == "identity-composition"
    # --expect: 0 only for that action.
    assert gate(chain, "--trust", trust, "--as", LEDGER, "--now", NOW,
                "--expect", "HOLD").exit_code == 3


def test_a_refused_chain_exits_one(tmp_path: Path, trust: Path) -> None:
    chain = _file(tmp_path, STANDARD)
    result = gate(chain, "--trust", trust, "--as", "someone-else", "--now", NOW)
    assert result.exit_code == 1
    assert codes(result) == ["wrong-audience"]


def test_advice_and_escalation_exit_three(tmp_path: Path, trust: Path) -> None:
    advice = gate(_file(tmp_path, with_step(3, authority="ADVISE")), "--trust", trust,
                  "--as", LEDGER, "--now", NOW)
    assert advice.exit_code == 3
    out = json.loads(advice.stdout)
    assert (out["verdict"], out["action"], out["record"]["advice"]) == (
        "ACCEPT", None, "RELEASE")
    spec = [dict(STANDARD[0]), {k: v for k, v in STANDARD[1].items() if k != "approved_by"}]
    escalated = gate(_file(tmp_path, spec, "unapproved.json"), "--trust", trust,
                     "--as", LEDGER, "--now", NOW)
    assert escalated.exit_code == 3
    assert codes(escalated) == ["approval-missing"]


def test_freshness_and_replay_from_the_shell(tmp_path: Path, trust: Path) -> None:
    old = _file(tmp_path, _aged(20), "old.json")
    stale = gate(old, "--trust", trust, "--as", LEDGER, "--now", NOW, "--max-age", "1d")
    assert stale.exit_code == 1
    assert codes(stale) == ["chain-stale"]
    assert gate(old, "--trust", trust, "--as", LEDGER, "--now", NOW,
                "--max-age", "30d").exit_code == 0
    # --log is the replay store: the second execution of the same chain is refused.
    chain, db = _file(tmp_path, STANDARD), tmp_path / "log.sqlite"
    assert gate(chain, "--trust", trust, "--as", LEDGER, "--now", NOW,
                "--log", db).exit_code == 0
    again = gate(chain, "--trust", trust, "--as", LEDGER, "--now", NOW, "--log", db)
    assert again.exit_code == 1
    assert codes(again) == ["replayed"]


@pytest.mark.parametrize(("extra", "message"), [
    (["--max-age", "0h"], "--max-age expects a positive duration"),
    (["--max-age", "soon"], "--max-age expects a positive duration"),
    (["--role", "approver"], "apply to receipts, not to handoff chains"),
])
def test_bad_chain_options_are_usage_errors(tmp_path: Path, trust: Path, extra: list[str],
                                            message: str) -> None:
    result = gate(_file(tmp_path, STANDARD), "--trust", trust, "--as", LEDGER, *extra)
    assert result.exit_code == 2
    assert message in result.output


def test_chain_options_on_a_receipt_are_usage_errors(tmp_path: Path, trust: Path) -> None:
    receipt = tmp_path / "receipt.json"
    receipt.write_text(json.dumps({"contract": "payment-release/1.0.0"}))
    result = gate(receipt, "--trust", trust, "--as", LEDGER, "--max-age", "1h")
    assert result.exit_code == 2
    assert "apply to handoff chains only" in result.output


def test_a_day_is_the_default_bound(tmp_path: Path, trust: Path) -> None:
    old = _file(tmp_path, _aged(2), "old.json")
    assert codes(gate(old, "--trust", trust, "--as", LEDGER, "--now", NOW)) == ["chain-stale"]
