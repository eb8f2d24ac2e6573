"""Issue 33 item 2: each refuted numeric perturbation drawn on a decision map.

The maps are sampled with the contract's own ``evaluate`` over the fields the crossed cut
involves (the others held at the witness's true values) and drawn as inline SVG in the
HTML report; the Markdown points there and gives the witness pair in words.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from credit_limit import CREDIT_LIMIT
from handoffs.contracts import Interval
from handoffs.lab import run
from handoffs.lab._maps import CODES, UNDETERMINED, straddled_cut
from handoffs.lab._report import validate_report
from handoffs.lab.perturbations import select_perturbations
from handoffs.lab.perturbations._coarsening import WidenInterval
from handoffs.lab.reports import render_html, render_markdown
from triage_lab import TRIAGE, triage_experiment
from worlds.credit import HARMLESS, credit_experiment

ROUNDINGS = ("round-numeric:credit_score:55", "round-numeric:monthly_debt:2000")
_SVG = re.compile(r'<svg class="decision-map".*?</svg>', re.DOTALL)


@pytest.fixture(scope="module")
def credit() -> dict[str, Any]:
    perturbations = select_perturbations(CREDIT_LIMIT, include=[*ROUNDINGS, HARMLESS])
    report: dict[str, Any] = run(credit_experiment(0, perturbations)).report
    return report


@pytest.fixture(scope="module")
def triage() -> dict[str, Any]:
    experiment = triage_experiment(perturbations=(WidenInterval("sepsis_risk", 0.2),))
    report: dict[str, Any] = run(experiment).report
    return report


def _row(report: dict[str, Any], perturbation: str) -> dict[str, Any]:
    return next(r for r in report["results"] if r["perturbation"] == perturbation)


def _maps(html: str) -> list[str]:
    return _SVG.findall(html)


def test_every_refuted_numeric_row_has_a_map_with_its_cut_and_witness_pair(
        credit: dict[str, Any]) -> None:
    validate_report(credit)
    for name in ROUNDINGS:
        assert _row(credit, name)["verdict"] == "refuted"
    assert _row(credit, HARMLESS)["verdict"] == "proved"
    found = credit["decision_maps"]
    assert [m["perturbation"] for m in found["maps"]] == list(ROUNDINGS)
    assert found["rows"] == len(ROUNDINGS)
    html = render_html(credit)
    drawn = _maps(html)
    assert len(drawn) == len(ROUNDINGS)
    for svg in drawn:
        actions = set(re.findall(r'<rect class="cell" data-action="([^"]+)"', svg))
        assert len(actions) >= 2, actions
        assert '<g class="witness-state">' in svg
        assert '<g class="witness-message">' in svg
        assert re.search(r'<g class="cut">\s*<polyline points="[^"]+"', svg)
        assert "<script" not in svg
        assert "http" not in svg
    # the proved row gets no map; the ratio rule's cut is a slice over both its fields
    assert HARMLESS not in "".join(drawn)
    debt = found["maps"][1]
    assert (debt["x"]["field"], debt["y"]["field"]) == ("monthly_debt", "monthly_income")
    assert debt["cut"]["condition"] == "monthly_debt / monthly_income > 0.43"
    assert debt["cut"]["rule"] == "over-indebted"
    score = found["maps"][0]
    assert score["cut"]["condition"] == "credit_score < 580"
    assert score["y"] is not None
    assert score["y"]["field"] != "credit_score"


def test_map_cells_are_the_contracts_own_decisions(credit: dict[str, Any]) -> None:
    """Every cell (sampled here at a stride) is what ``evaluate`` gives at its values,
    the other fields held at the witness's true values."""
    for entry in credit["decision_maps"]["maps"]:
        x, y = entry["x"], entry["y"]
        held = {k: CREDIT_LIMIT.field_map[k].read(v) for k, v in entry["held"].items()}
        for row_index in range(0, len(entry["grid"]), 7):
            for col in range(0, len(x["values"]), 5):
                view = dict(held)
                for axis, index in ((x, col), (y, row_index)):
                    value = axis["values"][index]
                    view[axis["field"]] = round(value) if axis["kind"] == "integer" else value
                outcome = CREDIT_LIMIT.evaluate(view)
                expected = UNDETERMINED if outcome.action is None else outcome.action.value
                got = entry["actions"][CODES.index(entry["grid"][row_index][col])]
                assert got == expected, (entry["perturbation"], view)


def test_markdown_points_to_the_map_and_gives_the_witness_pair(credit: dict[str, Any]) -> None:
    markdown = render_markdown(credit)
    assert markdown.count("decision map in the HTML report") == len(ROUNDINGS)
    debt = _row(credit, "round-numeric:monthly_debt:2000")["witness"]
    true_debt, sent_debt = debt["state"]["monthly_debt"], debt["message"]["monthly_debt"]
    assert true_debt != sent_debt
    assert sent_debt.is_integer()
    assert not true_debt.is_integer()  # a hair over the cut, printed in full
    assert (f"true monthly_debt {true_debt!r} (DECLINE) → sent monthly_debt {int(sent_debt)}"
            in markdown)
    assert "across `monthly_debt / monthly_income &gt; 0.43` (rule over-indebted)" in markdown


def test_a_widened_interval_is_drawn_as_bars_across_its_cut(triage: dict[str, Any]) -> None:
    row = _row(triage, "widen-interval:sepsis_risk:0.2")
    assert row["verdict"] == "refuted"
    (entry,) = triage["decision_maps"]["maps"]
    assert entry["x"]["field"] == "sepsis_risk"
    assert entry["x"]["kind"] == "interval"
    assert entry["cut"]["rule"] in ("septic", "at-risk")
    assert isinstance(entry["message"]["sepsis_risk"], dict)
    (svg,) = _maps(render_html(triage))
    actions = set(re.findall(r'data-action="([^"]+)"', svg))
    assert len(actions) >= 2
    assert UNDETERMINED in actions  # where the held width straddles a cut
    assert "fails closed: REASSESS" in svg
    # an interval is a bar with end ticks, for the truth and for the message
    for kind in ("state", "message"):
        group = re.search(rf'<g class="witness-{kind}">(.*?)</g>', svg, re.DOTALL)
        assert group is not None
        assert group.group(1).count("<line") >= 3


def test_the_same_report_draws_the_same_maps(credit: dict[str, Any]) -> None:
    assert _maps(render_html(credit)) == _maps(render_html(credit))


def test_a_straddled_reference_names_its_cut() -> None:
    view = {"sepsis_risk": Interval(0.25, 0.35), "spo2": 97, "heart_rate": 80,
            "airway_compromised": False}
    assert straddled_cut(TRIAGE, view) == "straddles `sepsis_risk > 0.3` (rule septic)"
    assert straddled_cut(TRIAGE, {**view, "sepsis_risk": Interval(0.5, 0.6)}) is None
    missing = {k: v for k, v in view.items() if k != "sepsis_risk"}
    assert straddled_cut(TRIAGE, missing) == "misses sepsis_risk for `sepsis_risk > 0.3` " \
                                             "(rule septic)"
