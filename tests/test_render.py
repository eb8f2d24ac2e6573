"""Markdown and HTML renderings of a lab report."""

from __future__ import annotations

import copy
import json
import math
import os
import re
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from handoffs import HandoffsError, MissingExtra
from handoffs.examples.payment_lab import payment_experiment
from handoffs.lab import ReportError, render_html, render_markdown, run
from handoffs.lab import _render as render_module

SAMPLE = Path(__file__).parent / "vectors" / "lab-report-sample.json"
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
    assert first == "### ✅ handoffs lab: payment-release-essay — **PASS**"


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
                    "<details><summary>Gate checks</summary>"):
        assert heading in text
    assert ("| decision_contract | no-message | 0.4286 | 2.5714 | 0 | ✅ fails as it should |"
            in text)
    assert "| HOLD | identity_verified=false | 4 | minimum |" in text
    assert "| identity_verified | 24 | 0.8571 |" in text
    falsehoods = report["falsehoods"]["strategies"][0]
    assert (f"| decision_contract | {falsehoods['evaluated']} | {falsehoods['caught']} | "
            f"{falsehoods['survived']} |") in text


def test_markdown_is_compact(report: dict[str, Any]) -> None:
    text = render_markdown(report)
    assert len(text) < 10_000
    # Only the gated strategy's controls; the others are counted, not listed.
    assert "| full_record | no-message |" not in text
    assert "rows for ungated strategies are in the HTML report" in text


def test_a_failing_gate_says_why_and_escapes(report: dict[str, Any]) -> None:
    text = render_markdown(failing(report))
    lines = text.splitlines()
    assert lines[0] == "### ❌ handoffs lab: payment-release-essay — **FAIL**"
    assert "gate exit 1" in lines[2]
    assert lines[4:7] == [
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


@pytest.mark.parametrize("bad", [{}, [], {"report_format": "handoffs-lab-report/0"}])
def test_not_a_report(bad: Any) -> None:
    with pytest.raises(ReportError) as caught:
        render_markdown(bad)
    assert isinstance(caught.value, HandoffsError)
    assert isinstance(caught.value, ValueError)


def test_markdown_needs_no_extra() -> None:
    code = (
        "import json, sys\n"
        "sys.modules['jinja2'] = None\nsys.modules['matplotlib'] = None\n"
        "from handoffs.lab._render import render_markdown\n"
        f"report = json.loads(open({str(SAMPLE)!r}, encoding='utf-8').read())\n"
        "print(render_markdown(report).splitlines()[0])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert "PASS" in done.stdout


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


def test_html_is_deterministic(html: str, report: dict[str, Any], tmp_path: Path) -> None:
    assert render_html(report) == html
    # A fresh interpreter with another hash seed renders the same bytes.
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    code = (
        "import json, sys\nfrom handoffs.lab._render import render_html\n"
        f"sys.stdout.write(render_html(json.loads(open({str(path)!r}).read())))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True,
                          env={**os.environ, "PYTHONHASHSEED": "12345"})
    assert done.stdout.decode("utf-8") == html


def test_html_escapes_report_text(report: dict[str, Any]) -> None:
    text = render_html(failing(report))
    assert "<script>" not in text
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; | pipe" in text
    assert 'class="verdict fail">FAIL' in text


@pytest.mark.parametrize("missing", ["jinja2", "matplotlib", "markupsafe"])
def test_html_without_the_report_extra(report: dict[str, Any], missing: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    render_module._environment.cache_clear()
    monkeypatch.setitem(sys.modules, missing, None)
    try:
        with pytest.raises(MissingExtra) as caught:
            render_html(report)
    finally:
        render_module._environment.cache_clear()
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
