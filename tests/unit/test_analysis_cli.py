"""``handoffs contracts analyse``: text, JSON, dead rules as warnings or (--strict)
errors, and the per-query time limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from handoffs.cli import main

TESTS = Path(__file__).resolve().parents[1]


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), prog_name="handoffs")


@pytest.fixture(autouse=True)
def _in_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(TESTS)


def test_text_names_regions_dead_rules_fields_cuts_and_minimal_sets() -> None:
    done = run("--contracts", "claim_triage:CLAIM_TRIAGE", "contracts", "analyse",
               "claim-triage/1.0.0")
    assert done.exit_code == 0, done.stderr
    out = done.stdout
    assert out.startswith("claim-triage/1.0.0 (certified, 5000 ms per query)\nregions:\n")
    assert "  likely-fraud -> INVESTIGATE: live; witness " in out
    assert "dead rules: none" in out
    assert "relevant fields: fraud_probability, claim_amount, coverage, policy_active" in out
    assert ("minimal sufficient sets (certified): {fraud_probability, claim_amount, "
            "coverage, policy_active}") in out
    assert "  claim_amount: 10000; surfaces: fraud_probability * claim_amount > 500.0" in out
    assert done.stderr == ""


def test_json_is_the_analysis_document() -> None:
    done = run("--contracts", "claim_triage:CLAIM_TRIAGE", "contracts", "analyse",
               "claim-triage/1.0.0", "--json")
    assert done.exit_code == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["contract"] == "claim-triage/1.0.0"
    assert [r["status"] for r in data["regions"]] == ["live"] * 6
    assert data["minimal_sets"]["status"] == "certified"


def test_a_dead_rule_warns_and_fails_with_strict() -> None:
    args = ("--contracts", "claim_triage:WITH_DEAD_RULE", "contracts", "analyse")
    warned = run(*args)
    assert warned.exit_code == 0
    assert "dead rules: small-partial" in warned.stdout
    assert warned.stderr.strip() == ("warning: claim-triage/0.9.0: dead rule 'small-partial' "
                                     "(PAY): shadowed by partial-coverage")
    strict = run(*args, "--strict")
    assert strict.exit_code == 1
    assert strict.stderr.strip() == ("error: claim-triage/0.9.0: dead rule 'small-partial' "
                                     "(PAY): shadowed by partial-coverage [dead-rule]")


def test_an_unknown_contract_is_one_error_line() -> None:
    done = run("--contracts", "claim_triage:CLAIM_TRIAGE", "contracts", "analyse", "nope/1.0.0")
    assert done.exit_code == 2
    assert done.stderr.startswith("error: ")
    assert len(done.stderr.splitlines()) == 1


def test_the_listing_still_works_without_a_subcommand() -> None:
    done = run("--contracts", "claim_triage:CLAIM_TRIAGE", "contracts")
    assert done.exit_code == 0
    assert done.stdout.startswith("claim-triage/1.0.0  claim_triage:CLAIM_TRIAGE")


EXPERIMENT = """\
[experiment]
name = "claims-with-a-dead-rule"
contract = "claim-triage/0.9.0"
subject = "receipt"

[cases]
hypothesis = 60
draws = 200  # worlds.TEST_DRAWS

[governance]
object = "claim_lab:GOVERNANCE"

[[strategy]]
name = "receipt"
encoder = "claim_lab:encoder"
receiver = "claim_lab:handler"
gated = true

[tolerances]
gate_perturbations = ["none"]
controls_must_fail = false
claims_verified_upstream = "the claims handler trusts the triage agent's receipts"
"""


def test_lab_run_reports_a_dead_rule_and_fails_with_strict(tmp_path: Path) -> None:
    toml = tmp_path / "experiment.toml"
    toml.write_text(EXPERIMENT, encoding="utf-8")
    args = ("--contracts", "claim_triage:WITH_DEAD_RULE", "lab", "run", str(toml),
            "--no-cache")
    passed = run(*args, "--out", str(tmp_path / "plain"))
    assert passed.exit_code == 0, passed.stderr
    report = json.loads((tmp_path / "plain" / "report.json").read_text(encoding="utf-8"))
    assert report["coverage"]["dead_rules"] == ["small-partial"]
    markdown = (tmp_path / "plain" / "report.md").read_text(encoding="utf-8")
    assert "dead rules: small-partial" in markdown
    strict = run(*args, "--out", str(tmp_path / "strict"), "--strict")
    assert strict.exit_code == 1
    assert strict.stderr.strip().splitlines()[-1] == (
        "error: claim-triage/0.9.0 has dead rules: small-partial [dead-rule]")
