"""The HTML report in a real headless browser: Debian's chromium, driven by Playwright.

The page must load with no console message and no page error, and a reader must see
the verdict (in words, on a red or green badge), why it failed, the failing gate
check and the failing decisions, and be able to fold out the message that was sent.
CI installs chromium (``.ci/run``); a machine without it fails here rather than
skipping the check.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import pytest
from playwright.sync_api import sync_playwright

from handoffs.examples.payment_lab import payment_experiment
from handoffs.lab import run
from handoffs.lab.perturbations._coarsening import WidenInterval
from handoffs.lab.reports import render_html
from triage_lab import triage_experiment

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def failing_report() -> dict[str, Any]:
    """The built-in experiment, gated on surviving catastrophic falsehoods: it fails."""
    experiment = payment_experiment()
    strict = attrs.evolve(experiment, tolerances=attrs.evolve(
        experiment.tolerances, surviving_catastrophic_falsehoods=0,
        claims_verified_upstream=None))
    report = run(strict, created=datetime(2026, 12, 1, tzinfo=UTC)).report
    assert report["gate"]["passed"] is False
    return report


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    assert shutil.which(CHROMIUM), f"{CHROMIUM} is missing: apt-get install chromium"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                              args=FLAGS)
        try:
            yield launched
        finally:
            launched.close()


def _open(browser: Any, path: Path) -> tuple[Any, list[str]]:
    page = browser.new_page()
    problems: list[str] = []
    page.on("console", lambda message: problems.append(f"console {message.type}: "
                                                       f"{message.text}"))
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("requestfailed", lambda request: problems.append(f"request failed: {request.url}"))
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    return page, problems


def test_the_failing_report_shows_what_failed(browser: Any, failing_report: dict[str, Any],
                                              tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    path.write_text(render_html(failing_report), encoding="utf-8")
    page, problems = _open(browser, path)
    verdict = page.locator("#verdict")
    assert verdict.is_visible()
    assert verdict.inner_text() == "FAIL"
    assert verdict.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(197, 48, 48)"
    reasons = page.locator(".reasons")
    assert reasons.is_visible()
    assert "catastrophic schema-valid falsehood(s) survived, 0 allowed" in reasons.inner_text()
    # The failed gate check, in words, open beside the verdict (not folded away).
    failed = page.locator("#gate-checks tr.fail")
    assert failed.count() == 1
    assert failed.first.is_visible()
    assert failed.first.locator("td").first.inner_text() == "FAILED"
    # The failing decisions: the injected falsehood's hard violation names its case.
    row = page.locator("#failures tr", has_text="inject:policy-01:policy_current=true")
    assert row.is_visible()
    cells = row.locator("td").all_inner_texts()
    assert cells[:2] == ["policy-01", "decision_contract"]
    assert cells[3:6] == ["ESCALATE", "RELEASE", "ACCEPT"]
    assert cells[7] == "unsafe-release"
    # The message sent folds out under the row.
    sent = row.locator("xpath=following-sibling::tr[1]")
    assert sent.get_attribute("class") == "sent"
    message = sent.locator("pre")
    assert not message.is_visible()
    sent.locator("summary").click()
    assert message.is_visible()
    assert '"policy_current": true' in message.inner_text()
    assert problems == []


def test_the_passing_report_loads_clean(browser: Any, tmp_path: Path) -> None:
    report = run(payment_experiment(), created=datetime(2026, 12, 1, tzinfo=UTC)).report
    path = tmp_path / "report.html"
    path.write_text(render_html(report), encoding="utf-8")
    page, problems = _open(browser, path)
    verdict = page.locator("#verdict")
    assert (verdict.inner_text(), verdict.is_visible()) == ("PASS", True)
    assert verdict.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(47, 133, 90)"
    finding = page.locator(".findings")
    assert finding.is_visible()
    assert "92 survived (24 catastrophic)" in finding.inner_text()
    assert page.locator("#gate-checks tr.pass").count() == len(report["gate"]["checks"])
    assert page.locator("svg").count() == 3
    assert problems == []


def test_a_decision_map_renders(browser: Any, tmp_path: Path) -> None:
    """A refuted widen-interval row's decision map: drawn, with a visible size, its
    cells in at least two colours, the cut and both witness markers on screen."""
    experiment = triage_experiment(perturbations=(WidenInterval("sepsis_risk", 0.2),))
    report = run(experiment, created=datetime(2026, 12, 1, tzinfo=UTC)).report
    path = tmp_path / "report.html"
    path.write_text(render_html(report), encoding="utf-8")
    page, problems = _open(browser, path)
    figure = page.locator("figure.decision-map")
    assert figure.count() == 1
    svg = figure.locator("svg.decision-map")
    assert svg.is_visible()
    box = svg.bounding_box()
    assert box is not None
    assert box["width"] > 300
    assert box["height"] > 200
    fills = {cell.get_attribute("fill") for cell in svg.locator("rect.cell").all()}
    assert len(fills) >= 2
    for part in ("g.cut polyline", "g.witness-state", "g.witness-message"):
        drawn = svg.locator(part).first.bounding_box()
        assert drawn is not None, part
        assert drawn["width"] + drawn["height"] > 0, part
    assert "widen-interval:sepsis_risk:0.2" in figure.locator("figcaption").inner_text()
    assert problems == []


def test_the_check_sees_console_errors(browser: Any, tmp_path: Path) -> None:
    """The forced-fail run: a page that logs an error and throws is caught."""
    path = tmp_path / "broken.html"
    path.write_text("<!DOCTYPE html><title>x</title><script>console.error('boom');"
                    "undefined_name();</script>", encoding="utf-8")
    _, problems = _open(browser, path)
    assert problems[0] == "console error: boom"
    assert problems[1].startswith("page error: ")
    assert "undefined_name" in problems[1]
