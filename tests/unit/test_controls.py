"""Reading the falsifying controls and the authority negative control (essay, Part III)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
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
    paired_chunks,
    read_baselines,
    shuffle_cycle,
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
    assert expected.shuffled == 9 / 28  # partners along a random cycle, not neighbours
    assert expected.constant == 4 / 28  # the routine cases, like the first one
    assert expected.for_control("constant-message") == expected.constant
    assert expected.for_control("mutate") is None
    # the pairing is the experiment's seed's
    assert control_expectations(attrs.evolve(payment_experiment(), seed=3)).shuffled \
        == 6 / 28


def test_a_single_case_is_not_shuffled() -> None:
    one = attrs.evolve(payment_experiment(variants=1), cases=IterableCases(
        lambda: list(payment_experiment(variants=1).cases)[:1], description="one"))
    expected = control_expectations(one)
    assert expected.cases == 1
    assert expected.shuffled is None
    assert expected.to_json()["shuffled-message"] is None
    report = run(attrs.evolve(one, injections=())).report
    assert ("decision_contract", "shuffled-message") not in {
        (r["strategy"], r["perturbation"]) for r in report["results"]}


# --------------------------------------------------------------- the pairing


@pytest.mark.parametrize("count", [2, 3, 5, 28, 1025])
def test_the_shuffle_is_one_cycle_through_every_case(count: int) -> None:
    cycle = shuffle_cycle(count, seed=7, window=2)
    assert sorted(cycle) == list(range(count))  # every message is sent once
    at, seen = 0, set()
    while at not in seen:  # one cycle: from case 0 every case is reached
        seen.add(at)
        at = cycle[at]
    assert len(seen) == count
    assert all(cycle[i] != i for i in range(count))  # nobody gets its own
    assert cycle == shuffle_cycle(count, seed=7, window=2)


def test_the_shuffle_is_drawn_from_the_seed_and_the_window() -> None:
    assert shuffle_cycle(1, seed=0) == shuffle_cycle(0, seed=0) == ()
    assert shuffle_cycle(2, seed=0) == (1, 0)
    cycles = {shuffle_cycle(28, seed=s, window=w) for s in range(4) for w in range(4)}
    assert len(cycles) == 16
    # pinned: a reproducible pairing on every platform and Python version
    assert shuffle_cycle(6, seed=0) == (4, 3, 5, 2, 1, 0)


def _pairing(count: int, chunk_size: int, window: int) -> tuple[dict[int, int | None],
                                                                list[tuple[int, int]]]:
    """Each case's partner, and per chunk (read when handed out, end of the chunk)."""
    read = 0

    def stream() -> Iterator[int]:
        nonlocal read
        for i in range(count):
            read = i + 1
            yield i

    partners: dict[int, int | None] = {}
    reads = []
    start = 0
    for chunk, pairs in paired_chunks(stream(), chunk_size, seed=11, window=window):
        assert chunk == list(range(start, start + len(chunk)))
        assert pairs.start == start
        assert len(chunk) == chunk_size or start + len(chunk) == count
        for j, case in enumerate(chunk):
            found = pairs.partner(j, chunk)
            if found is None:
                partners[case] = None
                continue
            index, evidence = found
            assert evidence == index  # the cases here are their own stream indices
            partners[case] = index
        # only partners outside the chunk travel with it
        assert set(pairs.evidence) == {p for p in pairs.indices if p is not None
                                       and not start <= p < start + len(chunk)}
        reads.append((read, start + len(chunk)))
        start += len(chunk)
    assert start == count
    return partners, reads


@pytest.mark.parametrize("count", [1, 2, 29, 40, 41, 100])
def test_the_pairing_does_not_depend_on_the_chunks(count: int) -> None:
    window = 10
    expected, _ = _pairing(count, count, window)
    for chunk_size in (1, 3, 7, 10, 64):
        partners, reads = _pairing(count, chunk_size, window)
        assert partners == expected
        for read, end in reads:  # one window (and two cases) read ahead at most
            assert read <= end + window + 2
    if count == 1:
        assert expected == {0: None}
        return
    # windows of 10 cases, a lone last case joining the one before (41: 10, 10, 10, 11)
    bounds = [(s, min(s + window, count)) for s in range(0, count, window)]
    if len(bounds) > 1 and bounds[-1][1] - bounds[-1][0] == 1:
        bounds[-2:] = [(bounds[-2][0], count)]
    for first, end in bounds:
        inside = range(first, end)
        # within each window, every case gets another's message, each message once
        assert {expected[case] for case in inside} == set(inside)
        assert all(expected[case] != case for case in inside)


def test_the_pairing_checks_its_sizes() -> None:
    with pytest.raises(ExperimentError, match="chunk_size"):
        list(paired_chunks(range(3), 0, seed=0))
    with pytest.raises(ExperimentError, match="window"):
        list(paired_chunks(range(3), 2, seed=0, window=1))


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
