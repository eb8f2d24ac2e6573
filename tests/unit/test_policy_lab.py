"""The lab on the p·h pump (issue 8): a straddling interval is counted, the minimal
message for an arithmetic expression is a region, ``consequence`` is a trigger, an
opaque predicate is reported, and state-conditioned hard constraints are counted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import ph_pump as pump
from handoffs.contracts import Interval
from handoffs.lab import (
    counterfactual_triggers,
    minimal_message,
    run,
)
from handoffs.lab._minimal import Reference
from worlds.ph_pump_lab import WIDEN, experiment


def _row(report: dict[str, Any], perturbation: str) -> dict[str, Any]:
    (row,) = [r for r in report["results"] if r["perturbation"] == perturbation]
    return row


@pytest.fixture(scope="module", params=["expression", "predicate"])
def report(request: pytest.FixtureRequest) -> dict[str, Any]:
    contract = pump.EXPRESSION if request.param == "expression" else pump.PREDICATE
    return run(experiment(contract)).report


def test_straddling_intervals_are_counted_and_the_release_gate_fails(
        report: dict[str, Any]) -> None:
    clean, widened = _row(report, "none"), _row(report, WIDEN)
    straddling = sum(not pump.EXPRESSION.evaluate(pump.EXPRESSION.view(c.state)).determined
                     for c in pump.cases())
    assert straddling == 4  # true intervals that touch 1/h or 2/h from inside
    # unperturbed, those escalate with STOP, which is their reference (fail closed)
    assert (clean["agreement"], clean["verdicts"]["ESCALATE"]) == (1.0, straddling)
    # widening by 0.1 makes intervals straddle 1/h or 2/h: the controller fails closed
    # (ESCALATE, STOP) where the reference continues or reduces the load
    assert widened["agreement"] < 1.0
    assert widened["verdicts"]["ESCALATE"] > straddling
    assert widened["verdicts"]["ACCEPT"] + widened["verdicts"]["ESCALATE"] == 30
    failed = [c for c in report["gate"]["checks"] if not c["passed"]]
    assert report["gate"]["passed"] is False
    assert {c["perturbation"] for c in failed} == {WIDEN}


def test_the_expressions_minimal_messages_are_regions() -> None:
    report = run(experiment(pump.EXPRESSION)).report
    minimal = report["minimal_messages"]
    assert minimal["method"] == "region"
    assert minimal["opaque_conditions"] == []
    assert minimal["regions"]
    states = {c.case_id: c.state for c in pump.cases()}

    def determined(region: dict[str, Any]) -> bool:
        state = states[region["example_case_id"]]
        return pump.EXPRESSION.evaluate(pump.EXPRESSION.view(state)).determined

    stop = [r for r in minimal["regions"] if r["action"] == "STOP" and determined(r)]
    assert stop
    for region in stop:
        shown = {m["field"]: m for m in region["message"]}
        p = shown["failure_probability"]
        assert p["representation"] == "interval"
        bounds = Interval(p["interval"]["lo"], p["interval"]["hi"])
        h = shown["consequence"]
        assert h["representation"] == "interval"  # a region, not the exact 60
        lowest = h["interval"]["lo"]
        # the region does not straddle: every state in it has p·h > 2
        assert pump.RISK.bounds({"failure_probability": bounds, "consequence": lowest})[0] > 2
    assert "consequence" in report["counterfactual_triggers"]["by_field"]


def test_an_opaque_predicate_is_reported_not_silently_skipped() -> None:
    report = run(experiment(pump.PREDICATE)).report
    minimal = report["minimal_messages"]
    # the search cannot look inside the predicate: it falls back to delta debugging on
    # exact values, and the report says why
    assert minimal["method"] == "ddmin"
    assert {m["representation"] for r in minimal["regions"] for m in r["message"]} == {"exact"}
    assert minimal["opaque_conditions"] == [
        {"rule": rule, "kind": "predicate", "condition": f"failure_probability * consequence > {t}",
         "fields": ["consequence", "failure_probability"]}
        for rule, t in (("stop", 2), ("reduce-load", 1))
    ]


def test_the_search_on_a_straddling_truth_and_on_a_determined_one() -> None:
    reference = Reference(pump.EXPRESSION)
    straddling = pump.EXPRESSION.view(pump.STRADDLING)
    assert reference(straddling) == "STOP"  # undetermined: the fail-closed action
    triggers = counterfactual_triggers(reference, straddling)
    assert {t.field for t in triggers} == {"failure_probability", "consequence"}
    assert any(t.field == "consequence" and t.threshold == 12.5 and t.action == "CONTINUE"
               for t in triggers)  # 1/0.08: below it p·h ≤ 1 for the whole interval
    determined = pump.EXPRESSION.view(pump.PumpState(Interval(0.04, 0.05), 60.0, True))
    found = minimal_message(reference, determined)
    assert (found.action, found.fields, found.guarantee) == (
        "STOP", ("failure_probability", "consequence"), "minimum")
    p, h = found.message
    assert p.representation == h.representation == "interval"
    assert p.interval is not None
    assert h.interval is not None
    assert p.interval.lo == pytest.approx(1 / 30)
    assert p.interval.hi == 1.0
    assert h.interval.lo == pytest.approx(60)
    assert h.interval.hi == 100.0
    assert pump.RISK.bounds({"failure_probability": p.interval,
                             "consequence": h.interval})[0] > 2


def _likely_cases() -> Iterator[pump.Case]:
    # p > 0.3 but h = 1: p·h < 1, so the policy itself says CONTINUE, which the
    # state-conditioned constraint forbids
    yield pump.Case("likely-1", pump.PumpState(Interval(0.35, 0.4), 1.0, True))
    yield pump.Case("likely-2", pump.PumpState(Interval(0.5, 0.6), 1.0, True))
    yield pump.Case("unlikely", pump.PumpState(Interval(0.1, 0.2), 1.0, True))
    yield pump.Case("straddles-0.3", pump.PumpState(Interval(0.25, 0.35), 1.0, True))


def test_the_lab_counts_hard_constraints_on_the_true_state() -> None:
    report = run(experiment(pump.EXPRESSION, cases=_likely_cases)).report
    clean = _row(report, "none")
    assert clean["agreement"] == 1.0  # the receiver follows the policy...
    # ...and the policy breaks "never CONTINUE when p > 0.3" on the two likely cases
    # and on the one whose true interval straddles 0.3
    assert clean["hard_violations"] == 3
    assert clean["hard_violations_by_constraint"] == {"no-continue-when-likely": 3}
    assert report["gate"]["passed"] is False


def test_arithmetic_beside_an_opaque_predicate_is_searched_conservatively() -> None:
    from handoffs.lab._minimal import Constraint, region_sufficient

    mixed = pump.contract(lambda t: pump.expression(t) if t == 2 else pump.predicate(t))
    reference = Reference(mixed)
    assert reference.arithmetic
    assert reference.predicates
    truth = mixed.view(pump.PumpState(Interval(0.04, 0.05), 60.0, True))
    exact = {name: Constraint(exact=value) for name, value in truth.items()}
    assert region_sufficient(reference, exact, "STOP")
    # without h the expression cannot be proved; the answer is the conservative one
    partial = {name: c for name, c in exact.items() if name != "consequence"}
    assert not region_sufficient(reference, partial, "STOP")
