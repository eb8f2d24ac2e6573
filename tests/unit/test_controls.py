"""Reading the falsifying controls and the authority negative control (essay, Part III)."""

from __future__ import annotations

import copy
import json
from typing import Any

import attrs
import pytest

from handoffs.examples.payment_lab import payment_experiment
from handoffs.lab import ExperimentError, IterableCases, run
from handoffs.lab._controls import (
    AUTHORITATIVE_SENDER,
    CONTROLS,
    NoSuchReading,
    control_expectations,
    read_baselines,
)


@pytest.fixture(scope="module")
def small() -> tuple[Any, dict[str, Any]]:
    base = payment_experiment(variants=1)
    assert base.perturbations is not None
    experiment = attrs.evolve(base, injections=(), perturbations=tuple(
        p for p in base.perturbations if p.id in (*CONTROLS, AUTHORITATIVE_SENDER)))
    return experiment, run(experiment).report


def test_expectations_of_the_essay_fixture() -> None:
    expected = control_expectations(payment_experiment())
    assert expected.cases == 28
    assert expected.no_message == 12 / 28  # ESCALATE, the fail-closed action
    assert expected.shuffled == 24 / 28  # neighbours mostly share a scenario
    assert expected.constant == 4 / 28  # the routine cases, like the first one
    assert expected.for_control("constant-message") == expected.constant
    assert expected.for_control("mutate") is None
    assert control_expectations(payment_experiment(), chunk_size=28) == expected


def test_shuffling_needs_two_cases_in_a_chunk() -> None:
    expected = control_expectations(payment_experiment(variants=1), chunk_size=1)
    assert expected.shuffled is None
    assert expected.to_json()["shuffled-message"] is None


@pytest.mark.parametrize("size", [0, -1, 1.5])
def test_expectations_check_the_chunk_size(size: Any) -> None:
    with pytest.raises(ExperimentError, match="chunk_size"):
        control_expectations(payment_experiment(), chunk_size=size)


def test_expectations_need_cases() -> None:
    empty = attrs.evolve(payment_experiment(), cases=IterableCases(list, description="none"))
    with pytest.raises(ExperimentError, match="no cases"):
        control_expectations(empty)


def test_readings_of_a_run(small: tuple[Any, dict[str, Any]]) -> None:
    experiment, report = small
    readings = read_baselines(report, experiment=experiment)
    assert readings.cases == 7
    assert len(readings.controls) == 5 * 3
    subject = readings.control("decision_contract", "constant-message")
    assert subject.follows_content
    assert subject.agreement == 1 / 7
    assert not subject.falsifies
    advisory = readings.control("action_only_advisory", "shuffled-message")
    assert advisory.unchanged
    (negative,) = readings.authority
    assert negative.decide == "action_only_authoritative"
    assert {c.strategy: c.changed for c in readings.sender_claims}["decision_contract"] is False
    assert "already decides" in {c.strategy: c for c in readings.sender_claims}[
        "action_only_authoritative"].reading
    json.dumps(readings.to_json())
    with pytest.raises(NoSuchReading) as caught:
        readings.control("decision_contract", "mutate")
    assert isinstance(caught.value, KeyError)
    assert caught.value.code == "no-such-reading"
    assert caught.value.json_path == "$.controls"
    assert str(caught.value).startswith(
        "no reading of strategy 'decision_contract' under control 'mutate' in the report of ")
    assert "decision_contract under constant-message" in caught.value.message


def test_readings_without_expectations(small: tuple[Any, dict[str, Any]]) -> None:
    _, report = small
    readings = read_baselines(report, strategies=["decision_contract"])
    assert {r.strategy for r in readings.controls} == {"decision_contract"}
    assert all(r.if_followed is None and r.follows_content is None for r in readings.controls)
    assert readings.authority == ()  # the DECIDE partner was not asked for


def _falsified(report: dict[str, Any], *, unchanged: bool) -> dict[str, Any]:
    """A report whose constant control matches the message (or meets the thresholds)."""
    doctored = copy.deepcopy(report)
    rows = {(r["strategy"], r["perturbation"]): r for r in doctored["results"]}
    base = rows[("decision_contract", "none")]
    control = rows[("decision_contract", "constant-message")]
    for key in ("agreement", "mean_regret", "hard_violations"):
        control[key] = base[key]
    if not unchanged:
        doctored["experiment"]["tolerances"]["agreement_epsilon"] = 0.9
        doctored["experiment"]["tolerances"]["regret_delta"] = 1000.0
        control["agreement"] = 0.2
    return doctored


def test_a_control_that_matches_the_message_falsifies(small: tuple[Any, dict[str, Any]]
                                                      ) -> None:
    _, report = small
    same = read_baselines(_falsified(report, unchanged=True)).control(
        "decision_contract", "constant-message")
    assert same.falsifies
    assert same.unchanged
    assert "architecture is falsified" in same.reading
    loose = read_baselines(_falsified(report, unchanged=False)).control(
        "decision_contract", "constant-message")
    assert loose.falsifies
    assert not loose.unchanged
    assert "not what makes the decision" in loose.reading


def test_read_errors(small: tuple[Any, dict[str, Any]]) -> None:
    _, report = small
    with pytest.raises(ExperimentError, match="not in the report"):
        read_baselines(report, strategies=["nope"])
    with pytest.raises(ExperimentError, match="expectations cover 28 cases"):
        read_baselines(report, experiment=payment_experiment())


def test_an_unknown_gate_perturbation_is_refused_before_any_work() -> None:
    experiment = payment_experiment(variants=1)
    tolerances = attrs.evolve(experiment.tolerances,
                              gate_perturbations=("none", "remove-decision-field:typo"))
    calls: list[object] = []

    def cases() -> list[object]:
        calls.append(None)
        return list(experiment.cases)

    bad = attrs.evolve(experiment, tolerances=tolerances,
                       cases=IterableCases(cases, description="counted"))
    with pytest.raises(ExperimentError, match=r"does not run: \['remove-decision-field:typo'\]"):
        run(bad)
    assert calls == []
