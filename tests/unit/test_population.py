"""Population figures (issue 31): rates over a declared case distribution, with 95 %
intervals that contain a brute-force count made here with the contract's own
``evaluate``; the generated cases' figures named ``stress``; the gate on the
population interval; bad distributions named by their path.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import attrs
import pytest

from handoffs.contracts import Interval
from handoffs.lab import Tolerances, load_experiment, run
from handoffs.lab._population import (
    CaseDistribution,
    DistributionError,
    Population,
    binomial_interval,
    draws_needed,
)
from handoffs.lab.perturbations._registry import perturbation_from_json
from handoffs.lab.reports import evaluate_gate
from handoffs.receivers import Decision, Reason, Step, Verdict
from triage_lab import TRIAGE, Acuity, triage_experiment

TRUTH_STATES = 20_000
WIDTHS = (0.005, 0.2)


def _perturbations() -> tuple[Any, ...]:
    return tuple(perturbation_from_json(d, contract=TRIAGE) for d in (
        *({"kind": "widen-interval", "field": "sepsis_risk", "width": w} for w in WIDTHS),
        {"kind": "no-message"}, {"kind": "shuffled-message"}, {"kind": "constant-message"},
        {"kind": "remove-decision-field", "field": "airway_compromised"},
    ))


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return run(triage_experiment(perturbations=_perturbations())).report


def _uniform_state(rng: random.Random) -> dict[str, Any]:
    """The default distribution, written out here: uniform over the declared bounds,
    an interval at most a twentieth of the range wide, fair booleans.
    """
    centre, half = rng.uniform(0, 1), rng.uniform(0, 1 / 40)
    return {"sepsis_risk": Interval(max(0.0, centre - half), min(1.0, centre + half)),
            "spo2": rng.randint(50, 100), "heart_rate": rng.randint(20, 220),
            "airway_compromised": rng.random() < 0.5}


def _decide(view: dict[str, Any]) -> Acuity:
    action = TRIAGE.evaluate(view).action
    return Acuity.REASSESS if action is None else action


def _widened(view: dict[str, Any], width: float) -> dict[str, Any]:
    risk = view["sepsis_risk"]
    return {**view, "sepsis_risk": Interval(max(0.0, risk.lo - width / 2),
                                            min(1.0, risk.hi + width / 2))}


@pytest.fixture(scope="module")
def truth() -> dict[str, float]:
    """Brute force over 20,000 states with the contract's own evaluate."""
    rng = random.Random(20_000)  # noqa: S311 - a reproducible sample, not a secret
    states = [_uniform_state(rng) for _ in range(TRUTH_STATES)]
    references = [_decide(s) for s in states]
    out = {}
    for width in WIDTHS:
        out[f"widen-interval:sepsis_risk:{width:g}"] = sum(
            _decide(_widened(s, width)) == r for s, r in zip(states, references, strict=True)
        ) / TRUTH_STATES
    # no message: the receiver refuses and fails closed
    out["no-message"] = sum(r is Acuity.REASSESS for r in references) / TRUTH_STATES
    # another, independent case's message: the chance two draws decide alike
    shares = {a: references.count(a) / TRUTH_STATES for a in Acuity}
    out["shuffled-message"] = sum(p * p for p in shares.values())
    # the benign-default receiver without the override: airway taken as False
    out["default-filled-airway-hard-rate"] = sum(
        s["airway_compromised"] and _decide({**s, "airway_compromised": False})
        is Acuity.DISCHARGE for s in states) / TRUTH_STATES
    return out


def _row(report: dict[str, Any], perturbation: str) -> dict[str, Any]:
    return next(r for r in report["results"] if r["perturbation"] == perturbation)


def _inside(value: float, interval: list[float]) -> bool:
    return interval[0] <= value <= interval[1]


def test_population_agreement_falls_with_the_width(report: dict[str, Any]) -> None:
    narrow = _row(report, "widen-interval:sepsis_risk:0.005")["population"]
    wide = _row(report, "widen-interval:sepsis_risk:0.2")["population"]
    assert narrow["agreement"] - wide["agreement"] >= 0.2
    assert narrow["agreement_interval"][0] > wide["agreement_interval"][1]
    assert narrow["mean_regret"] < wide["mean_regret"]
    # drawn from the default distribution, 1000 independent draws
    assert report["experiment"]["population"] == {
        "source": "drawn", "draws": 1000, "seed": 1, "confidence": 0.95, "distribution": {},
        "case_figures": "stress"}
    assert narrow["draws"] == wide["draws"] == 1000


@pytest.mark.parametrize("perturbation", [
    "widen-interval:sepsis_risk:0.005", "widen-interval:sepsis_risk:0.2", "no-message",
    "shuffled-message"])
def test_each_interval_holds_the_brute_force_truth(report: dict[str, Any],
                                                   truth: dict[str, float],
                                                   perturbation: str) -> None:
    population = _row(report, perturbation)["population"]
    assert _inside(truth[perturbation], population["agreement_interval"]), \
        (truth[perturbation], population)


def test_the_default_filled_override_hard_violation_rate(report: dict[str, Any],
                                                         truth: dict[str, float]) -> None:
    row = _row(report, "remove-decision-field:airway_compromised")
    semantic = row["population"]["semantic"]
    expected = truth["default-filled-airway-hard-rate"]
    assert expected > 0  # rare: flagged patients whose other facts would send them home
    assert _inside(expected, semantic["hard_violation_rate_interval"]), (expected, semantic)
    # the strict receiver refuses the message without the flag: no hard violation
    assert row["population"]["hard_violation_rate"] == 0


def test_the_generated_cases_figures_are_named_stress(report: dict[str, Any]) -> None:
    for row in report["results"]:
        assert row["stress"] == {"agreement": row["agreement"],
                                 "mean_regret": row["mean_regret"],
                                 "hard_violations": row["hard_violations"],
                                 "cases": row["cases"]}
    stress = _row(report, "widen-interval:sepsis_risk:0.2")["stress"]
    population = _row(report, "widen-interval:sepsis_risk:0.2")["population"]
    assert stress["cases"] == 60
    assert stress["agreement"] != population["agreement"]


def test_the_gate_compares_epsilon_with_the_interval(report: dict[str, Any]) -> None:
    row = _row(report, "widen-interval:sepsis_risk:0.005")["population"]
    low = row["agreement_interval"][0]
    # ε just above 1 - the lower bound passes; just below it fails, though the point
    # estimate clears it
    passing = Tolerances(agreement_epsilon=1 - low + 1e-9, regret_delta=1.0,
                         gate_perturbations=("widen-interval:sepsis_risk:0.005",),
                         controls_must_fail=False)
    failing = Tolerances(agreement_epsilon=(1 - low) * 0.9, regret_delta=1.0,
                         gate_perturbations=("widen-interval:sepsis_risk:0.005",),
                         controls_must_fail=False)
    assert 1 - row["agreement"] <= failing.agreement_epsilon
    assert evaluate_gate(report, passing)["passed"]
    failed = evaluate_gate(report, failing)
    assert not failed["passed"]
    assert "its lower bound" in failed["reasons"][0]
    # the stricter view checks the generated (stress) cases too
    stricter = evaluate_gate(report, Tolerances(
        agreement_epsilon=1 - low + 1e-9, regret_delta=1.0, figures="stress",
        gate_perturbations=("widen-interval:sepsis_risk:0.005",), controls_must_fail=False))
    assert not stricter["passed"]
    assert any("stress agreement" in r for r in stricter["reasons"])


def test_controls_are_judged_on_population_figures(report: dict[str, Any]) -> None:
    gate = report["gate"]
    controls = [c for c in gate["checks"] if c["metric"] == "control_falsifies"]
    assert {c["perturbation"] for c in controls} == {
        "no-message", "shuffled-message", "constant-message"}
    for check in controls:
        row = _row(report, check["perturbation"])
        assert check["value"] == row["population"]["agreement"]
        assert "the control does worse" in check["reason"]
        assert "population agreement" in check["reason"]


def test_the_draws_do_not_depend_on_the_chunking() -> None:
    population = Population(draws=40, seed=9)
    first = [c.state for c in population.cases(TRIAGE)]
    again = [c.state for c in population.cases(TRIAGE)]
    assert first == again
    other = [c.state for c in Population(draws=40, seed=10).cases(TRIAGE)]
    assert first != other


def test_a_declared_distribution_is_drawn() -> None:
    distribution = CaseDistribution.from_json(TRIAGE, {
        "airway_compromised": {"rate": 0.0},
        "spo2": {"range": [95, 100]},
        "sepsis_risk": {"range": [0.5, 0.6], "half_width": [0, 0.01]},
    })
    states = [c.state for c in Population(distribution=distribution, draws=200).cases(TRIAGE)]
    assert not any(s.airway_compromised for s in states)
    assert all(95 <= s.spo2 <= 100 for s in states)
    assert all(0.49 <= s.sepsis_risk.lo <= s.sepsis_risk.hi <= 0.61 for s in states)


@pytest.mark.parametrize(("table", "path", "text"), [
    ({"spo2": {"range": [40, 100]}}, "$.cases.distribution.spo2.range",
     "outside the field's declared bounds [50.0, 100.0]"),
    ({"airway_compromised": {"rate": 1.5}}, "$.cases.distribution.airway_compromised.rate",
     "is not a probability"),
    ({"spo2": {"weights": {"A": 1}}}, "$.cases.distribution.spo2.weights",
     "a integer field takes range"),
    ({"pulse": {"range": [1, 2]}}, "$.cases.distribution.pulse", "has no decision field"),
], ids=["range-outside-bounds", "rate-outside-0-1", "weights-on-a-number", "unknown-field"])
def test_a_bad_distribution_names_the_field_path(table: dict[str, Any], path: str,
                                                 text: str) -> None:
    with pytest.raises(DistributionError) as caught:
        CaseDistribution.from_json(TRIAGE, table)
    assert caught.value.json_path == path
    assert text in str(caught.value)


def test_a_weight_for_an_unknown_enum_value_is_named() -> None:
    from test_lab_engine import TANK

    with pytest.raises(DistributionError) as caught:
        CaseDistribution.from_json(TANK, {"grade": {"weights": {"A": 1, "Z": 2}}})
    assert caught.value.json_path == "$.cases.distribution.grade.weights.Z"
    assert "'Z' is not a value of grade (A, B, C)" in str(caught.value)
    drawn = CaseDistribution.from_json(TANK, {"grade": {"weights": {"A": 0, "C": 1}}})
    assert {c.state.grade.value for c in Population(distribution=drawn, draws=30).cases(TANK)} \
        == {"C"}


def test_too_few_draws_for_the_width_says_how_many() -> None:
    needed = draws_needed(0.05)
    assert 1_500 < needed < 1_700  # (2 × 1.96 × 0.5 / 0.05)² ≈ 1537, exact a little more
    with pytest.raises(DistributionError, match=rf"needs {needed} draws") as caught:
        Population(draws=1000, width=0.05)
    assert caught.value.json_path == "$.cases.draws"
    Population(draws=needed, width=0.05)


def test_the_toml_form(tmp_path: Path) -> None:
    path = tmp_path / "triage.toml"
    path.write_text(
        '[experiment]\nfactory = "triage_lab:triage_experiment"\n\n'
        '[cases]\nhypothesis = 30\nseed = 4\ndraws = 300\n\n'
        '[cases.distribution.airway_compromised]\nrate = 0.05\n\n'
        '[cases.distribution.spo2]\nrange = [88, 100]\n')
    experiment = load_experiment(path)
    assert experiment.population.draws == 300
    assert experiment.population.seed == 4
    path.write_text(
        '[experiment]\nfactory = "triage_lab:triage_experiment"\n\n'
        '[cases]\nhypothesis = 30\n\n[cases.distribution.airway_compromised]\nrate = -1\n')
    with pytest.raises(DistributionError) as caught:
        load_experiment(path)
    assert caught.value.json_path == "$.cases.distribution.airway_compromised.rate"


def test_the_default_filling_receiver_has_its_own_tolerances(report: dict[str, Any]) -> None:
    gated = evaluate_gate(report, Tolerances(default_filling_hard_violations=0,
                                             controls_must_fail=False))
    assert not gated["passed"]
    [reason] = [r for r in gated["reasons"] if "default-filling" in r]
    assert reason.startswith("the default-filling receiver under "
                             "remove-decision-field:airway_compromised: ")
    assert "hard violation(s) over 1000 decisions" in reason
    assert "0 allowed" in reason
    # not gated unless declared
    assert not [c for c in report["gate"]["checks"] if c["metric"].startswith("default_filling")]
    loose = evaluate_gate(report, Tolerances(default_filling_epsilon=0.5,
                                             default_filling_delta=5.0,
                                             controls_must_fail=False))
    assert loose["passed"], loose["reasons"]
    assert {c["metric"] for c in loose["checks"]} >= {"default_filling_agreement",
                                                      "default_filling_mean_regret"}


@attrs.frozen
class RefuseAll:
    """A receiver whose context dependency never resolves: it refuses every message."""

    name: str = "refuse-all"
    deterministic: bool = True

    def receive(self, message: Any) -> Decision:
        return Decision(verdict=Verdict.REJECT, action=Acuity.REASSESS.value, step=Step.CONTEXT,
                        reasons=(Reason("context-unresolved", "the bed register is down",
                                        Step.CONTEXT, "$"),),
                        receiver=self.name, contract=TRIAGE.id)


def test_refusing_everything_is_reported_as_refusals_not_catches() -> None:
    base = triage_experiment()
    refusing = attrs.evolve(base, strategies=(attrs.evolve(
        base.strategies[0], receiver=RefuseAll()),), perturbations=(
        perturbation_from_json({"kind": "mutate"}, contract=TRIAGE),),
        population=Population(draws=20))
    falsehoods = run(refusing).report["falsehoods"]["strategies"]
    [row] = falsehoods
    assert row["caught"] == 0
    assert row["refused"] > 0
    assert row["refused_by"] == {"context-unresolved": row["refused"]}
    assert (row["caught"] + row["survived"] + row["over_reacted"] + row["equivalent"]
            + row["refused"]) == row["evaluated"]


@pytest.mark.parametrize(("successes", "n"), [
    (0, 1), (1, 1), (0, 280), (1, 280), (140, 280), (279, 280), (280, 280),
    (3, 8530), (8527, 8530), (4999, 10_000)])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_the_interval_is_scipys_clopper_pearson(successes: int, n: int,
                                                confidence: float) -> None:
    """The beta quantiles give the interval binomtest's root search finds."""
    from scipy.stats import binomtest

    exact = binomtest(successes, n).proportion_ci(confidence_level=confidence,
                                                  method="exact")
    low, high = binomial_interval(successes, n, confidence)
    assert low == pytest.approx(float(exact.low), abs=2e-12)
    assert high == pytest.approx(float(exact.high), abs=2e-12)
    assert (low == 0.0) == (successes == 0)
    assert (high == 1.0) == (successes == n)
    assert low <= successes / n <= high
