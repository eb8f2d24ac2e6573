"""Issue 18's release case: a claim-triage contract with a product rule, an interval
field, an enum and four actions, run with generated cases only. Rounding the amount
and widening the interval must show disagreement for every seed, and the report's
coverage line must read all regions and boundaries covered."""

from __future__ import annotations

import warnings
from datetime import UTC, datetime
from typing import Any

import pytest

from claim_triage import CLAIM_TRIAGE
from handoffs.contracts import GovernanceService, ReceiptEncoder, Registry
from handoffs.lab import Experiment, GeneratedCases, Strategy, Tolerances, run
from handoffs.lab.perturbations._coarsening import RoundNumeric, WidenInterval
from handoffs.lab.reports import render_markdown
from handoffs.receivers import (
    Gate,
    StrictContractReceiver,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
)

GOVERNANCE = GovernanceService(sender="claims-intake", receiver="claims-handler",
                               policy_version="CLAIMS-1",
                               valid_until=datetime(2027, 1, 1, tzinfo=UTC))
PERTURBATIONS = ("round-numeric:claim_amount:1000", "round-numeric:claim_amount:10000",
                 "widen-interval:fraud_probability:0.1")


def state_of(case: Any) -> Any:
    return case.state


def handler() -> StrictContractReceiver:
    """The claims handler. **Unsafe by declaration:** the generated receipts carry no
    proofs (the step under test is (5) policy), so its gate uses UnsafeNoProofs.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeConfigurationWarning)
        gate = Gate(identity="claims-handler", trust=UnsafeNoProofs(),
                    registry=Registry.of(CLAIM_TRIAGE), replay=None,
                    clock=lambda: datetime(2026, 6, 1, tzinfo=UTC))
    return StrictContractReceiver(gate)


def experiment(seed: int, count: int = 80) -> Experiment:
    return Experiment(
        name="claim-triage", contract=CLAIM_TRIAGE,
        cases=GeneratedCases(CLAIM_TRIAGE, count, seed=seed),
        strategies=(Strategy(name="receipt",
                             encoder=ReceiptEncoder(contract=CLAIM_TRIAGE, state_of=state_of,
                                                    name="receipt"),
                             receiver=handler(), receipts=True, gated=True),),
        governance=GOVERNANCE,
        perturbations=(RoundNumeric("claim_amount", 1000), RoundNumeric("claim_amount", 10000),
                       WidenInterval("fraud_probability", 0.1)),
        tolerances=Tolerances(controls_must_fail=False,
                              gate_perturbations=("none", *PERTURBATIONS)),
    )


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 7])
def test_generated_cases_alone_catch_rounding_and_widening(seed: int) -> None:
    report = run(experiment(seed)).report
    rows = {r["perturbation"]: r for r in report["results"]}
    assert rows["none"]["agreement"] == 1.0
    for name in PERTURBATIONS:
        assert rows[name]["agreement"] < 1.0, (name, rows[name]["agreement"])
    assert report["gate"]["passed"] is False
    coverage = report["coverage"]
    # the proofs' witnesses are among the cases: say how they went if coverage falls short
    why = (coverage["line"], report["proofs"]["line"],
           {r["perturbation"]: r["verdict_reason"] for r in report["results"]})
    assert report["proofs"]["counts"] == {"proved": 1, "refuted": 3, "unknown": 0,
                                          "sampled": 0}, why
    assert coverage["complete"] is True, why
    assert coverage["regions_witnessed"] == coverage["regions_live"] == 6
    assert coverage["boundaries_covered"] == coverage["boundaries_found"] > 0
    assert coverage["line"].startswith(
        f"regions 6/6 witnessed, boundaries {coverage['boundaries_found']}/"
        f"{coverage['boundaries_found']} covered")
    assert f"coverage: {coverage['line']}" in render_markdown(report)


def test_too_few_cases_say_what_they_miss_next_to_the_verdict() -> None:
    report = run(experiment(0, count=3)).report
    coverage = report["coverage"]
    assert coverage["complete"] is False
    assert coverage["missed_regions"] or coverage["missed_boundaries"]
    text = render_markdown(report)
    first = text.splitlines()[2]  # the subtitle under the verdict
    assert "the cases miss" in first
    assert "policy coverage:" in text


def test_realistic_draws_are_realistic() -> None:
    cases = list(GeneratedCases(CLAIM_TRIAGE, 400, seed=5))
    states = [c.state for c in cases]
    amounts = [s.claim_amount for s in states]
    assert sum(a < 1.0 for a in amounts) <= 4  # not piled up at 0 EUR
    for s in states:
        width = s.fraud_probability.hi - s.fraud_probability.lo
        assert 0.0 <= s.fraud_probability.lo <= s.fraud_probability.hi <= 1.0
        assert width <= 0.05 + 1e-9 or s in states[:60]  # the geometry may need wide ones
        for value in (s.fraud_probability.lo, s.fraud_probability.hi, s.claim_amount):
            assert value == 0.0 or abs(value) >= 2.2250738585072014e-308  # no subnormals
    active = sum(s.policy_active for s in states[60:]) / len(states[60:])
    assert 0.4 < active < 0.6


def test_minimal_messages_are_certified_by_the_analysis_or_labelled_sampled() -> None:
    import ph_pump
    from worlds.ph_pump_lab import experiment as pump_experiment

    report = run(experiment(0)).report
    minimal = report["minimal_messages"]
    assert minimal["certification"] == "certified"
    assert minimal["regions"]
    for region in minimal["regions"]:
        certificate = region["certificate"]
        assert certificate["method"] == "certified"
        assert certificate["sufficient"] is True
        assert certificate["triggers_agree"] is True
        assert set(certificate["trigger_fields"]) == set(region["trigger_fields"])
    # run after an expression contract with the same id: the lab's per-state memo must
    # not answer for the other spelling (it did, keyed by contract id alone)
    sampled = run(pump_experiment(ph_pump.PREDICATE)).report["minimal_messages"]
    assert sampled["certification"] == "sampled"
    assert {r["certificate"]["method"] for r in sampled["regions"]} == {"sampled"}
