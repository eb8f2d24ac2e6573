"""``handoffs lab run`` and ``handoffs lab gate``: files, summary, exit codes 0/1/2."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from handoffs.cli._lab import lab
from handoffs.integrity import KeyRing, SigningKey, verify
from worlds.lab_cli import EXAMPLE, invoke


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("lab-run")
    result = invoke("run", "--out", str(directory), "--no-progress")
    assert result.exit_code == 0, result.output
    return directory


def test_run_writes_the_report_and_prints_the_table(out: Path) -> None:
    assert {p.name for p in out.iterdir()} >= {"report.json", "report.md", "report.html",
                                              "run.jsonl"}
    report = json.loads((out / "report.json").read_text("utf-8"))
    assert report["report_format"] == "handoffs-lab-report/1"
    assert report["provenance"]["run_log"] == str(out / "run.jsonl")
    assert "payment-release" in (out / "report.md").read_text("utf-8")


def test_summary_lists_the_essay_figures(tmp_path: Path) -> None:
    result = invoke("run", "--out", str(tmp_path), "--no-progress")
    assert result.exit_code == 0
    for text in ("full_record", "3017.5", "623.57", "0.5714", "0.4286", "14.2857",
                 "17.1429", "policy-01", "RELEASE", "Release gate: PASS"):
        assert text in result.output, text


def test_run_a_toml_experiment(tmp_path: Path) -> None:
    result = invoke("run", str(EXAMPLE), "--out", str(tmp_path), "--no-progress",
                    "--chunk-size", "10")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "report.json").read_text("utf-8"))
    assert report["provenance"]["chunk_size"] == 10
    assert report["strategy_results"][1]["mean_bytes"] == 623.5714285714286


def test_resume_a_complete_run(tmp_path: Path) -> None:
    assert invoke("run", "--out", str(tmp_path), "--no-progress").exit_code == 0
    result = invoke("run", "--out", str(tmp_path), "--no-progress", "--resume")
    assert result.exit_code == 0
    report = json.loads((tmp_path / "report.json").read_text("utf-8"))
    assert report["provenance"]["resumed_chunks"] == 1


def test_a_bad_experiment_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[nonsense]\n", "utf-8")
    result = invoke("run", str(bad), "--out", str(tmp_path / "o"))
    assert result.exit_code == 2
    assert "unknown table" in result.output


def test_gate_passes_and_writes_the_artefact_when_asked(out: Path, tmp_path: Path) -> None:
    (out / "release.json").unlink(missing_ok=True)
    result = invoke("gate", str(out / "report.json"))
    assert result.exit_code == 0, result.output
    assert "Release gate: PASS" in result.output
    assert not (out / "release.json").exists()  # only when asked
    target = tmp_path / "release.json"
    result = invoke("gate", str(out / "report.json"), "--artefact", str(target))
    assert result.exit_code == 0, result.output
    # the built-in experiment's waiver is printed beside the verdict and recorded
    assert "waived: claims verified upstream:" in " ".join(result.output.split())
    artefact = json.loads(target.read_text("utf-8"))
    assert artefact["artefact_format"] == "handoffs-release/1"
    assert artefact["gate"]["passed"] is True
    assert artefact["gate"]["reasons"] == []
    [waiver] = artefact["gate"]["waivers"]
    assert waiver.startswith("claims verified upstream: ")


def test_gate_fails_under_a_stricter_budget(out: Path, tmp_path: Path) -> None:
    target = tmp_path / "release.json"
    result = invoke("gate", str(out / "report.json"), "--artefact", str(target),
                    "--budget", 'gate_perturbations=["none", "relay:2:drop=decision_state"]')
    assert result.exit_code == 1
    assert "FAIL" in result.output
    assert not target.exists()  # never an artefact beside a FAIL
    assert "no release artefact written" in result.output
    # without the waiver, the default bound of 0 surviving catastrophic falsehoods fails
    unwaived = invoke("gate", str(out / "report.json"), "--budget",
                      "claims_verified_upstream=")
    assert unwaived.exit_code == 1
    assert "catastrophic schema-valid falsehood(s) survived, 0 allowed" in unwaived.output


def test_gate_errors_exit_2(out: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"report_format": "handoffs-lab-report/1"}', "utf-8")
    assert invoke("gate", str(broken)).exit_code == 2
    assert invoke("gate", str(out / "report.json"), "--budget", "nonsense").exit_code == 2
    assert invoke("gate", str(out / "report.json"), "--budget", "colour=1").exit_code == 2


def test_gate_signs_the_artefact(out: Path, tmp_path: Path) -> None:
    key = SigningKey.generate()
    pem = tmp_path / "key.pem"
    pem.write_bytes(key.to_pem())
    target = tmp_path / "signed.json"
    result = invoke("gate", str(out / "report.json"), "--sign-key", str(pem),
                    "--artefact", str(target))
    assert result.exit_code == 0, result.output
    signed = json.loads(target.read_text("utf-8"))
    now = datetime.now(UTC)
    ring = KeyRing().enrol(key.public_key_multibase, controller="release-lab",
                           roles={"release"}, not_before=now - timedelta(minutes=5))
    assert verify(signed, ring, purpose="assertionMethod", now=now + timedelta(seconds=1))


def _loss_rows(**changes: float) -> list[dict[str, Any]]:
    from handoffs.examples.payment import PAYMENT_RELEASE

    rows = PAYMENT_RELEASE.loss.to_json()
    for row in rows:
        key = f"{row['chosen']}_{row['reference']}"
        row["loss"] = changes.get(key, row["loss"])
    return rows


def test_rescore_changes_regret_without_calling_receivers(out: Path, tmp_path: Path) -> None:
    loss = tmp_path / "costly-referrals.json"
    loss.write_text(json.dumps(_loss_rows(ESCALATE_RELEASE=10)), encoding="utf-8")
    result = invoke("rescore", "--run-log", str(out / "run.jsonl"), "--loss", str(loss),
                    "--out", str(tmp_path / "rescored"))
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "rescored" / "report.json").read_text("utf-8"))
    rows = {r["strategy"]: r for r in report["strategy_results"]}
    # The advisory receiver escalates the four routine releases: 4 × 10 instead of 4 × 2.
    assert rows["action_only_advisory"]["mean_regret"] == pytest.approx(104 / 28)
    assert rows["action_only_advisory"]["agreement"] == pytest.approx(12 / 28)
    assert rows["decision_contract"]["mean_regret"] == 0
    assert report["provenance"]["rescored_with"] == "costly-referrals"
    assert (tmp_path / "rescored" / "report.md").is_file()


def test_rescore_refuses_a_malformed_loss_file(out: Path, tmp_path: Path) -> None:
    loss = tmp_path / "loss.json"
    loss.write_text(json.dumps([{"chosen": "RELEASE"}]), encoding="utf-8")
    result = CliRunner().invoke(lab, ["rescore", "--run-log", str(out / "run.jsonl"),
                                      "--loss", str(loss)])
    assert result.exit_code == 2
    assert "[bad-loss]" in result.output


def test_the_executor_choices_are_the_runners() -> None:
    """``--executor`` offers exactly the executors ``run`` creates by name."""
    from handoffs.cli._lab import _EXECUTORS
    from handoffs.lab._runner import EXECUTORS

    assert _EXECUTORS == EXECUTORS
    result = CliRunner().invoke(lab, ["run", "--help"])
    assert "threads|processes|dask" in result.output
