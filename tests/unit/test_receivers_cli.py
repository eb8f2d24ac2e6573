"""``handoffs gate`` and ``handoffs log summary``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from handoffs.cli._gate import gate, log
from handoffs.integrity._base58 import b58encode
from worlds.gate import WORLD
from worlds.gate_cli import NOW, decision, gate_files, run


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    return gate_files(tmp_path)


def test_the_gate_needs_an_identity(files: dict[str, Path]) -> None:
    argv = [str(files["receipt"]), "--trust", str(files["trust"]), "--now", NOW]
    bare = CliRunner().invoke(gate, argv, env={"HANDOFFS_IDENTITY": ""})
    assert bare.exit_code == 2
    assert "--as" in bare.output
    configured = run(*argv, env={"HANDOFFS_IDENTITY": "case-owner"})
    assert decision(configured)["step"] == 3  # past the audience check (step 2)
    elsewhere = run(*argv, env={"HANDOFFS_IDENTITY": "auditor"})
    assert elsewhere.exit_code == 1
    assert [r["code"] for r in decision(elsewhere)["reasons"]] == ["wrong-audience"]


def test_escalated_receipt_is_admitted_but_exits_three(files: dict[str, Path]) -> None:
    """ESCALATE is not a licence to act: ``handoffs gate r.json && pay`` must not pay."""
    result = run(files["receipt"], "--trust", files["trust"], "--role", "case-owner",
                 "--now", NOW)
    assert result.exit_code == 3
    out = decision(result)
    assert out["verdict"] == "ESCALATE"
    assert [r["code"] for r in out["reasons"]] == ["policy-unresolvable", "evidence-unresolved"]


def test_rejected_receipt_exits_one(files: dict[str, Path]) -> None:
    doc = json.loads(files["receipt"].read_text())
    doc["authority"] = "DECIDE"
    files["receipt"].write_text(json.dumps(doc))
    result = run(files["receipt"], "--trust", files["trust"], "--now", NOW)
    assert result.exit_code == 1
    out = decision(result)
    assert (out["verdict"], out["reasons"][0]["code"], out["step"]) == (
        "REJECT", "bad-signature", 2)


def test_roles_come_from_the_trust_file_too(files: dict[str, Path]) -> None:
    without = run(files["receipt"], "--trust", files["trust"], "--now", NOW)
    assert [r["code"] for r in decision(without)["reasons"]] == [
        "policy-unresolvable", "receiver-role-missing", "evidence-unresolved"]
    assert without.exit_code == 1
    from handoffs.integrity import SigningKey

    ring = WORLD.keyring.enrol(SigningKey.generate().public_key_multibase,
                               controller="case-owner", roles=["case-owner"],
                               not_before=WORLD.keyring.entries[0].not_before)
    files["trust"].write_text(json.dumps(ring.to_json()))
    with_role = run(files["receipt"], "--trust", files["trust"], "--now", NOW, "--policy",
                    "PAY-7.4")
    assert with_role.exit_code == 3  # admitted, escalated
    assert [r["code"] for r in decision(with_role)["reasons"]] == ["evidence-unresolved"]


def test_wrong_audience_with_as(files: dict[str, Path]) -> None:
    result = run(files["receipt"], "--trust", files["trust"], "--as", "payments", "--now", NOW)
    assert result.exit_code == 1
    assert decision(result)["reasons"][0]["code"] == "wrong-audience"


def test_stdin_and_real_clock(files: dict[str, Path]) -> None:
    result = run("-", "--trust", files["trust"], stdin=files["receipt"].read_bytes())
    assert result.exit_code == 1  # signed in 2026-06: expired, or created in the future
    assert decision(result)["reasons"][0]["code"] in {
        "receipt-expired", "proof-not-yet-valid", "grant-expired"}


def test_log_records_and_blocks_replays_across_runs(files: dict[str, Path]) -> None:
    args = (files["receipt"], "--trust", files["trust"], "--role", "case-owner", "--policy",
            "PAY-7.4", "--now", NOW, "--log", files["db"])
    first, second = run(*args), run(*args)
    assert (first.exit_code, second.exit_code) == (3, 1)  # escalated, then a replay
    assert decision(second)["reasons"][0]["code"] == "replayed"
    summary = CliRunner().invoke(log, ["summary", str(files["db"])])
    assert summary.exit_code == 0
    out = json.loads(summary.stdout)
    assert (out["decisions"], out["replays"], out["by_verdict"]) == (
        2, 1, {"ESCALATE": 1, "REJECT": 1})


@pytest.mark.parametrize(
    ("change", "start", "end"),
    [
        ({"trust": "not json"}, "error: invalid JSON: Expecting value", "[invalid-json]"),
        ({"trust": json.dumps({"type": "KeyRing", "schema_version": "1.0", "keys": [{
            "verification_method": "k", "controller": "x", "roles": [],
            "not_before": "2026-01-01T00:00:00Z",
            "public_key_multibase": "z" + b58encode(b"\xed\x01" + b"\x01" + b"\x00" * 31),
        }]})}, "error: the public key 01000000", "@ $.keys[0].public_key_multibase "
                                                "[weak-key]"),
        ({"trust": json.dumps({"type": "KeyRing", "schema_version": "1.0", "keys": []})},
         "error: the trust key ring is empty", "[empty-trust-store]"),
        ({"receipt": None}, "error: cannot read receipt", "[io]"),
        ({"args": ("--evidence", "nonsense")}, "error: --evidence expects PREFIX=BASE_URL",
         "[usage]"),
        ({"args": ("--now", "yesterday")}, "error: expected an RFC 3339 UTC time",
         "@ --now [bad-time]"),
        ({"args": ("--readback", "0.5")}, "error: --readback needs --evidence PREFIX=URL",
         "[usage]"),
    ],
)
def test_configuration_errors_are_one_line(
    files: dict[str, Path], change: dict[str, Any], start: str, end: str
) -> None:
    if "trust" in change:
        files["trust"].write_text(change["trust"])
    receipt = files["dir"] / "absent.json" if "receipt" in change else files["receipt"]
    result = run(receipt, "--trust", files["trust"], *change.get("args", ()))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(start), result.stderr
    assert result.stderr.endswith(end + "\n"), result.stderr
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr


def test_log_summary_of_a_missing_database(files: dict[str, Path]) -> None:
    result = CliRunner().invoke(log, ["summary", str(files["db"])])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: no decision log at")

