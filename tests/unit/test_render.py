"""Markdown and HTML renderings of a lab report."""

from __future__ import annotations

import copy
import json
import math
import re
import sys
from collections import Counter
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from handoffs import HandoffsError, MissingExtra
from handoffs.examples.payment_lab import payment_experiment
from handoffs.lab import run
from handoffs.lab._render import html as html_module
from handoffs.lab._report import ReportError
from handoffs.lab.reports import render_html, render_markdown

SAMPLE = Path(__file__).parents[1] / "vectors" / "lab-report-sample.json"
CREATED = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    """The built-in experiment's report (the essay's 28 cases, every perturbation)."""
    return run(payment_experiment(), created=CREATED).report


@pytest.fixture(scope="module")
def html(report: dict[str, Any]) -> str:
    return render_html(report)


def failing(report: dict[str, Any]) -> dict[str, Any]:
    broken = copy.deepcopy(report)
    broken["gate"]["passed"] = False
    broken["gate"]["exit_code"] = 1
    broken["gate"]["reasons"] = ["decision_contract under none: agreement 0.9 against 1 - ε = 1",
                                 "<script>alert('x')</script> | pipe"]
    return broken


# ------------------------------------------------------------------------ Markdown


def test_markdown_opens_with_the_verdict(report: dict[str, Any]) -> None:
    first = render_markdown(report).splitlines()[0]
    assert first == "### handoffs lab: payment-release-essay: **PASS** (gate exit 0)"


def sections(text: str) -> dict[str, dict[str, str]]:
    """Table rows of each Markdown section, keyed by heading, then by first cell."""
    found: dict[str, dict[str, str]] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith(("#### ", "<details><summary>")):
            current = re.sub(r"<[^>]+>|#### ", "", line)
            found[current] = {}
        elif line.startswith("| ") and current:
            found[current][line.split(" | ")[0][2:]] = line
    return found


def test_markdown_has_the_essays_figures(report: dict[str, Any]) -> None:
    tables = sections(render_markdown(report))
    # Part III's printed table: agreement, regret, catastrophic, governance, bytes.
    strategies = tables["Strategies"]
    assert strategies["full_record"] == "| full_record | 1 | 0 | 0 | 1 | 3017.5 |"
    assert strategies["decision_contract (subject)"] == (
        "| decision_contract (subject) | 1 | 0 | 0 | 1 | 623.6 |")
    assert strategies["risk_score"] == "| risk_score | 0.5714 | 2.2857 | 0 | 1 | 294.6 |"
    assert strategies["action_only_advisory"] == (
        "| action_only_advisory | 0.4286 | 2.5714 | 0 | 1 | 298.6 |")
    assert strategies["action_only_authoritative"] == (
        "| action_only_authoritative | 1 | 0 | 0 | 1 | 298.6 |")
    # Decision-field ablation, rounded as the essay prints it.
    ablation = tables["Decision-field ablation"]
    for field, regret in [("identity_verified", "14.2857"), ("screening_clear", "14.2857"),
                          ("duplicate_signal", "11.4286"), ("policy_current", "17.1429"),
                          ("evidence_conflict", "17.1429"), ("high_value", "17.1429")]:
        assert ablation[field].startswith(f"| {field} | 0.8571 | {regret} | 4 |"), field
    governance = tables["Governance-field ablation"]
    for member in ("case_id", "sender", "receiver", "authority", "policy_version",
                   "valid_until", "evidence_refs"):
        assert governance[member] == f"| {member} | 1 | 0.4286 | 28 |"
    assert tables["Error injection"]["policy-01"] == (
        "| policy-01 | policy_current | false → true | yes | ESCALATE | ESCALATE | RELEASE | "
        "120 | unsafe-release |")


def test_markdown_has_the_labs_findings(report: dict[str, Any]) -> None:
    text = render_markdown(report)
    for heading in ("#### Strategies", "#### Decision-field ablation",
                    "#### Governance-field ablation", "#### Error injection",
                    "#### Falsehoods caught and missed", "#### Controls",
                    "#### Minimal messages", "#### Counterfactual triggers",
                    "<details><summary>Falsehoods by field</summary>",
                    "#### Gate checks", "#### Failing decisions",
                    "<details><summary>Perturbations</summary>"):
        assert heading in text
    control = next(line for line in text.splitlines()
                   if line.startswith("| decision_contract | no-message |"))
    # the cases' figures, then the population's with their intervals (issue 31)
    assert control.startswith("| decision_contract | no-message | 0.4286 | 2.5714 | 0 | 0.4286 [")
    assert control.endswith("| the control does worse |")
    assert "| HOLD | identity_verified=false | 4 | minimum |" in text
    assert "| identity_verified | 24 | 0.8571 |" in text
    falsehoods = report["falsehoods"]["strategies"][0]
    assert (f"| decision_contract | {falsehoods['evaluated']} | {falsehoods['caught']} | "
            f"{falsehoods['survived']} |") in text


def test_markdown_is_compact(report: dict[str, Any]) -> None:
    text = render_markdown(report)
    # A CI comment (GitHub's limit is 65,536 characters) with room to spare: the essay's
    # report, with its population figures and the refuted rows' verdicts, stays under 20k.
    assert len(text) < 20_000
    # Only the gated strategy's controls; the others are counted, not listed.
    assert "| full_record | no-message |" not in text
    assert "rows for ungated strategies are in the HTML report" in text


def test_a_failing_gate_says_why_and_escapes(report: dict[str, Any]) -> None:
    text = render_markdown(failing(report))
    lines = text.splitlines()
    assert lines[0] == "### handoffs lab: payment-release-essay: **FAIL** (gate exit 1)"
    assert "gate exit 1" in lines[2]
    start = lines.index("**Why it failed:**")
    assert lines[start:start + 3] == [
        "**Why it failed:**",
        "- decision_contract under none: agreement 0.9 against 1 - ε = 1",
        "- &lt;script&gt;alert('x')&lt;/script&gt; \\| pipe",
    ]
    assert "<script>" not in text


def test_the_published_sample_renders() -> None:
    sample = json.loads(SAMPLE.read_text(encoding="utf-8"))
    text = render_markdown(sample)
    assert "| policy_current | 0.8571 | 17.1429 | 4 | 0.4286 | 0 |" in text
    assert render_html(sample).count("<svg") == 3
    # A report written before failing decisions were listed still renders.
    assert "failures" not in sample
    assert "#### Failing decisions" not in text


@pytest.mark.parametrize("bad", [{}, [], {"report_format": "handoffs-lab-report/0"}])
def test_not_a_report(bad: Any) -> None:
    with pytest.raises(ReportError) as caught:
        render_markdown(bad)
    assert isinstance(caught.value, HandoffsError)
    assert isinstance(caught.value, ValueError)


# ---------------------------------------------------------------------------- HTML


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: Counter[str] = Counter()
        self.ids: list[str] = []
        self.refs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        for name, value in attrs:
            if name == "id" and value is not None:
                self.ids.append(value)
            if name in ("href", "src", "xlink:href") and value is not None:
                self.refs.append(value)


def test_html_is_one_self_contained_file(html: str) -> None:
    assert html.startswith("<!DOCTYPE html>\n<html lang=\"en\">")
    parser = _Collect()
    parser.feed(html)
    assert parser.tags["svg"] == 3
    assert parser.tags["style"] >= 1
    for tag in ("script", "link", "img", "iframe", "object", "embed"):
        assert parser.tags[tag] == 0, tag
    # No network: no URL anywhere, references only to ids in the page.
    assert "http" not in html
    assert "@import" not in html
    assert "@font-face" not in html
    assert re.findall(r"url\((?!#)", html) == []
    assert all(ref.startswith("#") for ref in parser.refs)
    assert {ref[1:] for ref in parser.refs} <= set(parser.ids)
    # Several plots, one page: ids never collide.
    assert [i for i, n in Counter(parser.ids).items() if n > 1] == []


def test_html_plots_what_the_report_says(html: str, report: dict[str, Any]) -> None:
    for title in ("Cost–regret frontier across strategies",
                  "Regret and hard violations when one decision field is removed",
                  "Falsehoods caught and missed, per field"):
        assert title in html
    assert "mean message bytes (log scale)" in html
    for row in report["strategy_results"]:
        assert row["strategy"] in html
    assert "<td class=\"num\">17.1429</td>" in html
    assert "policy-01" in html


def test_html_escapes_report_text(report: dict[str, Any]) -> None:
    text = render_html(failing(report))
    assert "<script>" not in text
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; | pipe" in text
    assert 'class="verdict fail">FAIL' in text


@pytest.mark.parametrize("missing", ["jinja2", "matplotlib", "markupsafe"])
def test_html_without_the_report_extra(report: dict[str, Any], missing: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    html_module.environment.cache_clear()
    monkeypatch.setitem(sys.modules, missing, None)
    try:
        with pytest.raises(MissingExtra) as caught:
            render_html(report)
    finally:
        html_module.environment.cache_clear()
    error = caught.value
    assert isinstance(error, ImportError)
    assert isinstance(error, HandoffsError)
    assert (error.code, error.extra, error.module) == ("missing-extra", "report", missing)
    assert f"the HTML report needs the optional dependency {missing!r}; install it with " \
           "pip install 'handoffs[report]'" in str(error)


def test_minimal_messages_show_intervals_and_unconfirmed_regions() -> None:
    sample = json.loads(SAMPLE.read_text(encoding="utf-8"))
    region = sample["minimal_messages"]["regions"][0]
    region["message"] = [
        {"field": "failure", "representation": "interval",
         "interval": {"lo": math.nextafter(0.2, 1.0), "hi": 1.0}},
        {"field": "loop", "representation": "values", "values": ["SAFETY", "BACKUP"]},
    ]
    region["confirmed"] = False
    region["receiver_fields"] = ["failure", "loop"]
    text = render_markdown(sample)
    assert ("| failure∈[0.2⁺, 1]; loop∈{SAFETY, BACKUP} | 4 | minimum | "
            "no: the receiver needs failure, loop |") in text


# ------------------------------------------------------------ reports you can act on


def test_a_hard_violation_names_its_case(report: dict[str, Any]) -> None:
    failures = report["failures"]
    assert failures["disagreements"] >= failures["hard_violations"] > 0
    assert len(failures["cases"]) == failures["disagreements"]
    injected = [f for f in failures["cases"]
                if f["perturbation"] == "inject:policy-01:policy_current=true"]
    assert len(injected) == 1
    failure = injected[0]
    assert failure["case_id"] == "policy-01"
    assert failure["strategy"] == "decision_contract"
    assert (failure["reference_action"], failure["action"], failure["verdict"]) == (
        "ESCALATE", "RELEASE", "ACCEPT")
    assert failure["hard_violations"] == ["unsafe-release"]
    assert failure["reference_rule"] == "policy-stale"
    assert failure["falsehood"] == {"field": "policy_current", "true_value": False,
                                    "value": True}
    # The message that was sent: the false value is in it.
    assert failure["message"]["decision_state"]["policy_current"] is True
    assert failure["message"]["case_id"] == "policy-01"
    # Hard violations come first.
    flags = [bool(f["hard_violations"]) for f in failures["cases"]]
    assert flags == sorted(flags, reverse=True)


def test_markdown_lists_failing_decisions_capped(report: dict[str, Any]) -> None:
    text = render_markdown(report)
    body = text.split("#### Failing decisions")[1].split("####")[0]
    assert len([line for line in body.splitlines() if line.startswith("| ")]) == 2 + 10
    assert ("| policy-01 | decision_contract | inject:policy-01:policy_current=true "
            "(policy_current: false → true) | ESCALATE | RELEASE | ACCEPT | receiver: its "
            "policy on the message; reference rule policy-stale | unsafe-release |") in text
    total = report["failures"]["disagreements"]
    assert f"_{total} decisions differ from the reference action" in text
    assert f"{total - 10} more in report.json._" in text


@pytest.mark.parametrize("perturbation", [
    "merge-enum-values:uncertainty:CONFLICT+MISSING->RESOLVED", "relay:2",
    "relay:2:soften:collapse", "mutate", "shorten-evidence-refs:keep=1",
    "authoritative-sender", "loss-changed:costly-referrals",
])
def test_every_declared_perturbation_is_a_row(report: dict[str, Any], html: str,
                                              perturbation: str) -> None:
    row = next(r for r in report["results"]
               if r["strategy"] == "decision_contract" and r["perturbation"] == perturbation)
    body = render_markdown(report).split("<summary>Perturbations</summary>")[1]
    line = next(line for line in body.splitlines()
                if line.startswith(f"| decision_contract | {escape(perturbation)} |"))
    # a row its perturbation did not exercise reads so, not the unperturbed figures
    shown = "not exercised" if row["exercised"] is False else render_num(row["agreement"])
    assert line.split(" | ")[2:4] == [row["kind"], shown]
    assert f"<td>{escape(perturbation)}</td>" in html


def render_num(value: float) -> str:
    from handoffs.lab._render._format import num

    return num(value)


def escape(text: str) -> str:
    import html as html_lib

    return html_lib.escape(text)


def test_the_verdict_is_words_not_emoji(report: dict[str, Any], html: str) -> None:
    text = render_markdown(report)
    for rendering in (text, html, render_markdown(failing(report)), render_html(failing(report))):
        assert not re.search("[\u2705\u274c\U0001F300-\U0001FAFF]", rendering)
    assert '<span id="verdict" class="verdict pass">PASS</span>' in html
    # The gate checks sit beside the verdict, open, each passed or failed in words.
    assert html.index('id="gate-checks"') < html.index("<main>")
    assert '<td class="status-pass">passed</td>' in html
    failed = copy.deepcopy(report)
    failed["gate"]["checks"][0]["passed"] = False
    assert '<td class="status-fail">FAILED</td>' in render_html(failed)
    assert "| FAILED | agreement | decision_contract | none |" in render_markdown(failed)


def test_surviving_falsehoods_are_explained_beside_the_verdict(report: dict[str, Any],
                                                                html: str) -> None:
    sentence = ("Falsehoods: decision_contract: 308 schema-valid falsehoods sent, 0 caught, "
                "92 survived (24 catastrophic). The gate's bound of 0 catastrophic "
                "survivor(s) is waived: claims verified upstream (")
    text = render_markdown(report)
    assert text.index(sentence) < text.index("#### Gate checks")
    assert html.index(sentence.replace("'", "&#39;")) < html.index('id="gate-checks"')
    unbounded = copy.deepcopy(report)
    unbounded["experiment"]["tolerances"]["surviving_catastrophic_falsehoods"] = None
    assert "The gate does not bound them" in render_markdown(unbounded)
    bounded = copy.deepcopy(report)
    bounded["experiment"]["tolerances"]["claims_verified_upstream"] = None
    bounded["experiment"]["tolerances"]["surviving_catastrophic_falsehoods"] = 30
    assert "The gate allows 30 catastrophic survivor(s)." in render_markdown(bounded)


def test_provenance_has_no_placeholder(html: str) -> None:
    assert "× —" not in html
    assert "threads, the executor&#39;s default worker count, chunks of 256 cases" in html


def test_all_zero_panels_are_not_plotted(report: dict[str, Any]) -> None:
    quiet = copy.deepcopy(report)
    for row in quiet["decision_field_ablation"]:
        row["mean_regret"], row["catastrophic_errors"] = 0.0, 0
    for row in quiet["results"]:
        if row["perturbation"].startswith("remove-decision-field:"):
            row["mean_regret"], row["hard_violations"] = 0.0, 0
    page = render_html(quiet)
    assert "Regret and hard violations when one decision field is removed" not in page
    assert page.count("<svg") == 2
    # Regret without hard violations: one panel, no empty hard-violation axis.
    regret_only = copy.deepcopy(quiet)
    regret_only["decision_field_ablation"][0]["mean_regret"] = 2.0
    page = render_html(regret_only)
    assert page.count("<svg") == 3
    assert ">hard violations<" not in page.split('id="decision-ablation"')[1].split("</figure>")[0]


def test_a_long_failure_list_is_capped_with_hard_violations_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from handoffs.lab import _metrics

    monkeypatch.setattr(_metrics, "_FAILURE_LIMIT", 5)
    capped = run(payment_experiment(), created=CREATED).report
    failures = capped["failures"]
    assert (failures["disagreements"], failures["hard_violations"]) == (834, 125)
    assert failures["truncated"] is True
    assert len(failures["cases"]) == 5
    assert all(f["hard_violations"] for f in failures["cases"])
    assert ("_834 decisions differ from the reference action, 125 of them hard violations; "
            "829 more (report.json lists 5, the run log every one)._") in render_markdown(capped)
