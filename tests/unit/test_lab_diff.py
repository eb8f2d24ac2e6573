"""``lab diff``: what regressed between two lab reports, and its exit code."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from handoffs._errors import InvalidArgument
from handoffs.examples.payment_lab import payment_experiment
from handoffs.lab import run
from handoffs.lab._report import ReportError
from handoffs.lab.reports import diff_reports

ROW = "shorten-evidence-refs:keep=1"


@pytest.fixture(scope="module")
def old() -> dict[str, Any]:
    return run(payment_experiment(), created=datetime(2026, 12, 1, tzinfo=UTC)).report


def _row(report: dict[str, Any], strategy: str, perturbation: str) -> dict[str, Any]:
    return next(r for r in report["results"]
                if (r["strategy"], r["perturbation"]) == (strategy, perturbation))


def regressed(old: dict[str, Any]) -> dict[str, Any]:
    """``old`` with decision_contract worse under shorten-evidence-refs:keep=1 (a row
    its perturbation exercises: the payment gate resolves evidence) and a new hard
    violation.
    """
    new = copy.deepcopy(old)
    row = _row(new, "decision_contract", ROW)
    row["agreement"] -= 1 / 28
    row["mean_regret"] += 120 / 28
    row["hard_violations"] += 1
    new["failures"]["cases"].append({
        "case_id": "routine-03", "strategy": "decision_contract", "perturbation": ROW,
        "variant": None, "epoch": 0, "falsehood": None, "reference_action": "HOLD",
        "action": "RELEASE", "verdict": "ACCEPT", "reasons": [], "reference_rule": "x",
        "hard_violations": ["unsafe-release"], "regret": 120.0, "message": None})
    return new


def test_the_same_report_has_no_regression(old: dict[str, Any]) -> None:
    diff = diff_reports(old, copy.deepcopy(old))
    assert diff.changes == ()
    assert diff.exit_code == 0
    assert diff.render() == "lab diff: no regression beyond the budget\n"


def test_a_regression_is_found_per_strategy_and_perturbation(old: dict[str, Any]) -> None:
    diff = diff_reports(old, regressed(old))
    assert diff.exit_code == 1
    found = {(c.strategy, c.perturbation, c.metric) for c in diff.regressions}
    assert found == {("decision_contract", ROW, "agreement"),
                     ("decision_contract", ROW, "mean_regret"),
                     ("decision_contract", ROW, "hard_violations")}
    assert [f["case_id"] for f in diff.new_hard_violations] == ["routine-03"]
    text = diff.render(format="markdown")
    assert text.startswith("### handoffs lab diff: **REGRESSED** (3 regression(s) beyond "
                           "the budget)\n")
    assert f"| REGRESSED | decision_contract | {ROW} | hard_violations | 0 | 1 |" in text
    assert (f"- routine-03: decision_contract under {ROW} chose RELEASE for HOLD "
            "(unsafe-release)") in text


def test_the_budget_allows_what_it_says(old: dict[str, Any]) -> None:
    new = regressed(old)
    diff = diff_reports(old, new, agreement=0.05, regret=5.0, hard_violations=1)
    assert diff.exit_code == 0
    assert len(diff.changes) == 3  # still reported, not regressions
    # Bytes: 10 % more is allowed by default, 11 % is not.
    heavier = copy.deepcopy(old)
    row = _row(heavier, "full_record", "none")
    row["mean_bytes"] *= 1.10
    assert diff_reports(old, heavier).exit_code == 0
    row["mean_bytes"] = _row(old, "full_record", "none")["mean_bytes"] * 1.11
    assert [c.metric for c in diff_reports(old, heavier).regressions] == ["mean_bytes"]


def test_a_vanished_row_is_removed_and_a_failing_gate_regresses(old: dict[str, Any]) -> None:
    new = copy.deepcopy(old)
    new["results"] = [r for r in new["results"] if r["perturbation"] != "mutate"]
    new["gate"]["passed"], new["gate"]["exit_code"] = False, 1
    diff = diff_reports(old, new)
    assert {(c.perturbation, c.metric, c.old, c.new) for c in diff.regressions} == {
        (None, "gate", "PASS", "FAIL")}
    removed = [c for c in diff.changes if c.status == "removed"]
    assert {(c.perturbation, c.metric) for c in removed} == {("mutate", "row")}
    assert "| removed | decision_contract | mutate | row | present | — |" in diff.render(
        format="markdown")


def test_a_control_doing_worse_is_expected_not_a_regression(old: dict[str, Any]) -> None:
    new = copy.deepcopy(old)
    control = _row(new, "decision_contract", "no-message")
    control["agreement"] -= 0.2
    control["mean_regret"] += 3.0
    diff = diff_reports(old, new)
    assert diff.exit_code == 0
    assert {c.status for c in diff.changes} == {"expected"}
    assert "expected (the control does worse)" in diff.render()


def test_coverage_falling_is_a_regression(old: dict[str, Any]) -> None:
    before, after = copy.deepcopy(old), copy.deepcopy(old)
    before["coverage"] = {"available": True, "line": "", "regions_live": 7,
                          "regions_witnessed": 7, "boundaries_found": 4,
                          "boundaries_covered": 4}
    after["coverage"] = {**before["coverage"], "regions_witnessed": 6,
                         "boundaries_covered": 3, "regions_live": 6}
    diff = diff_reports(before, after)
    # fewer regions or boundaries reached regresses; the policy's own counts do not
    assert {c.metric for c in diff.regressions} == {"coverage.regions_witnessed",
                                                    "coverage.boundaries_covered"}


def test_bad_budgets_and_bad_reports_are_refused(old: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument, match="agreement must be a finite number"):
        diff_reports(old, old, agreement=-0.1)
    with pytest.raises(ReportError):
        diff_reports(old, {"report_format": "handoffs-lab-report/0"})


# ------------------------------------------------------------------- the command line


def _lab_diff(tmp_path: Path, old: dict[str, Any], new: dict[str, Any],
              *args: str) -> Any:
    from click.testing import CliRunner

    from handoffs.cli import main

    (tmp_path / "old.json").write_text(json.dumps(old), encoding="utf-8")
    (tmp_path / "new.json").write_text(json.dumps(new), encoding="utf-8")
    return CliRunner().invoke(main, ["lab", "diff", str(tmp_path / "old.json"),
                                     str(tmp_path / "new.json"), *args])


def test_lab_diff_exits_0_without_a_regression(old: dict[str, Any], tmp_path: Path) -> None:
    result = _lab_diff(tmp_path, old, old)
    assert (result.exit_code, result.output) == (0, "lab diff: no regression beyond the "
                                                    "budget\n")


def test_lab_diff_exits_1_on_a_regression_with_markdown(old: dict[str, Any],
                                                        tmp_path: Path) -> None:
    result = _lab_diff(tmp_path, old, regressed(old), "--format", "markdown")
    assert result.exit_code == 1, result.output
    assert result.output.startswith("### handoffs lab diff: **REGRESSED**")
    assert f"| REGRESSED | decision_contract | {ROW} | agreement | 0.5714 | 0.5357 |" \
        in result.output
    # Within a budget that allows it: reported, exit 0.
    loose = _lab_diff(tmp_path, old, regressed(old), "--budget-agreement", "0.05",
                      "--budget-regret", "5", "--budget-hard-violations", "1",
                      "--format", "json")
    assert loose.exit_code == 0, loose.output
    document = json.loads(loose.output)
    assert document["regressed"] is False
    assert len(document["changes"]) == 3


def test_lab_diff_cannot_read_a_bad_report(old: dict[str, Any], tmp_path: Path) -> None:
    result = _lab_diff(tmp_path, old, {"report_format": "nope"})
    assert result.exit_code == 2
