"""Issue 31 item 7: reports you can act on. Each failing gate check's deciding cases come
first in Markdown and HTML (named beside the check, and first among the failing
decisions), and an undetermined reference names the cut it straddles.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import attrs
import pytest

from handoffs.examples.payment_lab import payment_experiment
from handoffs.lab import run
from handoffs.lab._render._sections import check_label, deciding_cases
from handoffs.lab.perturbations import select_perturbations
from handoffs.lab.reports import render_html, render_markdown
from triage_lab import TRIAGE, triage_experiment

CREATED = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    """The built-in experiment gating risk_score too (it disagrees under none) and
    bounding surviving catastrophic falsehoods with no waiver: several checks fail, and
    hard violations under other perturbations would crowd the list without the order."""
    experiment = payment_experiment()
    strategies = tuple(attrs.evolve(s, gated=s.name in ("decision_contract", "risk_score"))
                       for s in experiment.strategies)
    tolerances = attrs.evolve(experiment.tolerances, surviving_catastrophic_falsehoods=0,
                              claims_verified_upstream=None,
                              gate_perturbations=("none", "relay:2"))
    found: dict[str, Any] = run(attrs.evolve(experiment, strategies=strategies,
                                             tolerances=tolerances), created=CREATED).report
    assert found["gate"]["passed"] is False
    return found


def _failure_rows(markdown: str) -> list[list[str]]:
    body = markdown.split("#### Failing decisions")[1].split("####", maxsplit=1)[0]
    lines = [line for line in body.splitlines() if line.startswith("| ")][2:]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines]


def test_each_failing_check_names_its_deciding_cases(report: dict[str, Any]) -> None:
    decided = deciding_cases(report)
    failing = [c for c in report["gate"]["checks"] if not c["passed"]]
    assert [check for check, _ in decided] == failing
    by_metric = {(c["metric"], c["strategy"], c["perturbation"]): cases for c, cases in decided}
    agreement = by_metric[("agreement", "risk_score", "none")]
    assert agreement
    assert {(f["strategy"], f["perturbation"]) for f in agreement} == {("risk_score", "none")}
    falsehoods = by_metric[("surviving_catastrophic_falsehoods", "decision_contract", "mutate")]
    assert falsehoods
    assert all(f["falsehood"] and f["hard_violations"] for f in falsehoods)
    # a control's check is decided by no single case
    assert all(not cases for c, cases in decided if c["metric"] == "control_falsifies")


def test_markdown_lists_the_deciding_cases_first(report: dict[str, Any]) -> None:
    markdown = render_markdown(report)
    rows = _failure_rows(markdown)
    decided = [(check_label(c), cases) for c, cases in deciding_cases(report) if cases]
    # every failing check with a deciding case shows one, labelled, before any other row
    labelled = [row for row in rows if row[-1] != "—"]
    assert rows[:len(labelled)] == labelled
    for label, cases in decided:
        assert any(label in row[-1] for row in labelled), label
        assert any(row[0] == cases[0]["case_id"] for row in labelled), label
    # the first is the agreement check under none (the order of the gate's checks), not
    # one of the hard violations of the controls that the old order put first
    first = rows[0]
    assert (first[1], first[2]) == ("risk_score", "none")
    assert "agreement" in first[-1]
    # beside the verdict, each failing check names its cases
    checks = markdown.split("#### Gate checks")[1].split("####")[0]
    line = next(row for row in checks.splitlines()
                if row.startswith("| FAILED | agreement | risk_score | none |"))
    assert first[0] in line
    passed = next(row for row in checks.splitlines() if row.startswith("| passed |"))
    assert passed.endswith("| — |")


def test_html_lists_the_deciding_cases_first(report: dict[str, Any]) -> None:
    html = render_html(report)
    table = html.split('<section id="failures">')[1].split("</section>")[0]
    first = re.search(r"<tbody>\s*<tr[^>]*>(.*?)</tr>", table, re.DOTALL)
    assert first is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", first.group(1), re.DOTALL)
    assert cells[1:3] == ["risk_score", "none"]
    assert "agreement" in cells[-1]
    assert "(risk_score under none)" in cells[-1]


def test_an_undetermined_reference_names_the_cut_it_straddles() -> None:
    """A true risk interval straddling a cut leaves the reference undetermined (REASSESS);
    the report names the cut, not the rule as if it had decided."""
    perturbations = select_perturbations(TRIAGE, include=["constant-message"])
    report = run(triage_experiment(perturbations=perturbations), created=CREATED).report
    straddled = [f for f in report["failures"]["cases"] if f["reference_action"] == "REASSESS"]
    assert straddled
    for failure in straddled:
        assert re.fullmatch(r"straddles `sepsis_risk > 0\.[13]` \(rule (septic|at-risk)\)",
                            failure["reference_rule"]), failure["reference_rule"]
    decided = [f for f in report["failures"]["cases"] if f["reference_action"] != "REASSESS"]
    assert all(f["reference_rule"] in {r.name for r in TRIAGE.policy.rules} | {"default"}
               for f in decided)
    html = render_html(report)
    assert "reference straddles `sepsis_risk &gt; 0." in html
    assert "reference rule straddles" not in html
