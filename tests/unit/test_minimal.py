"""Minimal messages and counterfactual triggers, checked against exhaustive search.

Region sufficiency is verified independently by brute force over whole finite
domains; the minimum-cardinality search is compared with exhaustive subset search;
delta debugging is checked for 1-minimality. Expected payment results come from the
lab anchors (§5): the region-minimal sets for ``routine``, ``policy-01`` and
``identity-01``, and the duality of minimal sets and single-flip triggers.
"""

from __future__ import annotations

import enum
import itertools
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from handoffs.contracts import Contract, HardConstraint, Interval, LossMatrix, decision_field
from handoffs.contracts.policy import AllOf, Is, Over, Policy, Rule
from handoffs.examples.payment import PAYMENT_RELEASE, synthetic_cases
from handoffs.examples.payment_lab import payment_experiment
from handoffs.lab import (
    ExperimentError,
    counterfactual_triggers,
    load_experiment,
    minimal_message,
    run,
)
from handoffs.lab._minimal import Constraint, Reference, exhaustive_minimum, region_sufficient
from handoffs.lab._reference import ReferenceReceiver
from handoffs.lab._search import ddmin, search_receiver
from handoffs.lab.reports import render_markdown, validate_report
from handoffs.receivers import Decision, Reason, Step, Verdict


class Act(enum.Enum):
    GO = "GO"
    STOP = "STOP"
    REVIEW = "REVIEW"


class Tier(enum.Enum):
    LOW = "LOW"
    MID = "MID"
    HIGH = "HIGH"


@attrs.frozen
class PumpState:
    failure: Interval = decision_field("Certified failure probability.", minimum=0, maximum=1)
    tier: Tier = decision_field("Criticality tier.", if_missing=Tier.LOW)
    load: int = decision_field("Load in percent.", minimum=0, maximum=100, if_missing=50)
    sensor_ok: bool = decision_field("Sensor self-test passed.", if_missing=True)


def _loss() -> LossMatrix[Act]:
    table = {(Act.GO, Act.STOP): 50, (Act.GO, Act.REVIEW): 20, (Act.STOP, Act.GO): 2,
             (Act.REVIEW, Act.GO): 1, (Act.STOP, Act.REVIEW): 3, (Act.REVIEW, Act.STOP): 10}
    return LossMatrix({**{(a, a): 0 for a in Act}, **table})


PUMP = Contract(
    name="pump-inspection",
    version="1.0.0",
    description="Continue the pump, stop it for inspection, or refer it for review.",
    actions=Act,
    state=PumpState,
    policy=Policy(rules=(
        Rule("sensor-fault", Is("sensor_ok", False), Act.REVIEW),
        Rule("critical-risk", AllOf((Is("tier", Tier.HIGH), Over("failure", 0.05))), Act.STOP),
        Rule("risk", Over("failure", 0.2), Act.STOP),
        Rule("overload", Over("load", 90, inclusive=True), Act.STOP),
    ), default=Act.GO),
    loss=_loss(),
    hard_constraints=(HardConstraint("unsafe-go", chosen=Act.GO,
                                     allowed_references=frozenset({Act.GO})),),
    fail_closed_action=Act.REVIEW,
    counterfactual_trigger="Recompute when any decisive fact changes.",
)


class Flag(enum.Enum):
    A = "A"
    B = "B"
    C = "C"


@attrs.frozen
class SmallState:
    p: bool = decision_field("p.")
    q: bool = decision_field("q.")
    r: bool = decision_field("r.")
    kind: Flag = decision_field("kind.")


SMALL = Contract(
    name="small-finite",
    version="1.0.0",
    description="A small finite contract for brute force.",
    actions=Act,
    state=SmallState,
    policy=Policy(rules=(
        Rule("p-and-a", AllOf((Is("p", True), Is("kind", Flag.A))), Act.STOP),
        Rule("q", Is("q", True), Act.REVIEW),
        Rule("r-or-b", Is("r", True) | Is("kind", Flag.B), Act.STOP),
    ), default=Act.GO),
    loss=_loss(),
    fail_closed_action=Act.REVIEW,
    counterfactual_trigger="Recompute.",
)

PUMP_REF = Reference(PUMP)
SMALL_REF = Reference(SMALL)
PAY_REF = Reference(PAYMENT_RELEASE)


def small_states() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"p": st.booleans(), "q": st.booleans(), "r": st.booleans(),
                                  "kind": st.sampled_from(list(Flag))})


def pump_states() -> st.SearchStrategy[dict[str, Any]]:
    edges = [0.0, 0.05, 0.2, 1.0, 0.04, 0.06, 0.19, 0.21]
    ends = st.one_of(st.sampled_from(edges), st.floats(0, 1, allow_nan=False))
    return st.fixed_dictionaries({
        "failure": st.tuples(ends, ends).map(lambda p: Interval(min(p), max(p))),
        "tier": st.sampled_from(list(Tier)),
        "load": st.one_of(st.sampled_from([0, 89, 90, 91, 100]), st.integers(0, 100)),
        "sensor_ok": st.booleans(),
    })


def _brute_sufficient(truth: dict[str, Any], fields: tuple[str, ...]) -> bool:
    """Independent R(S) on the finite contract: enumerate the whole domain."""
    action = SMALL_REF(truth)
    domains = {"p": (False, True), "q": (False, True), "r": (False, True), "kind": tuple(Flag)}
    for values in itertools.product(*domains.values()):
        state = dict(zip(domains, values, strict=True))
        if all(state[f] == truth[f] for f in fields) and SMALL_REF(state) != action:
            return False
    return True


@given(small_states())
def test_region_sufficiency_matches_brute_force(truth: dict[str, Any]) -> None:
    action = SMALL_REF(truth)
    names = SMALL_REF.names
    for size in range(len(names) + 1):
        for combo in itertools.combinations(names, size):
            constraints = {n: Constraint(exact=truth[n]) for n in combo}
            assert region_sufficient(SMALL_REF, constraints, action) == \
                _brute_sufficient(truth, combo), combo


@given(small_states())
def test_minimal_message_is_the_exhaustive_minimum(truth: dict[str, Any]) -> None:
    found = minimal_message(SMALL_REF, truth)
    size, sets = exhaustive_minimum(SMALL_REF, truth)
    assert found.guarantee == "minimum"
    assert len(found.fields) == size
    assert found.fields in sets
    assert found.alternatives == len(sets) - 1
    assert _brute_sufficient(truth, found.fields)


@given(pump_states())
def test_numeric_minimal_message_is_minimum_and_sufficient(truth: dict[str, Any]) -> None:
    found = minimal_message(PUMP_REF, truth)
    size, sets = exhaustive_minimum(PUMP_REF, truth)
    assert len(found.fields) == size
    assert found.fields in sets
    # The coarsened representation still fixes the decision.
    constraints: dict[str, Constraint] = {}
    for item in found.message:
        if item.representation == "exact":
            constraints[item.field] = Constraint(exact=item.value)
        elif item.representation == "values":
            constraints[item.field] = Constraint(values=item.values)
        else:
            assert item.interval is not None
            constraints[item.field] = Constraint(interval=item.interval)
            value = truth[item.field]
            lo, hi = (value.lo, value.hi) if isinstance(value, Interval) else (value, value)
            assert item.interval.lo <= lo
            assert hi <= item.interval.hi
    assert region_sufficient(PUMP_REF, constraints, found.action)


def test_coarsest_interval_stops_at_the_threshold() -> None:
    truth = {"failure": Interval(0.1, 0.12), "tier": Tier.LOW, "load": 10, "sensor_ok": True}
    found = minimal_message(PUMP_REF, truth)
    assert found.action == "GO"
    by_field = {f.field: f for f in found.message}
    failure = by_field["failure"]
    assert failure.representation == "interval"
    assert failure.interval == Interval(0.0, 0.2)  # up to the strict "> 0.2" threshold
    load = by_field["load"]
    assert load.representation == "interval"
    assert load.interval == Interval(0, 89)  # "load >= 90" stops it at 89
    assert by_field["tier"].representation == "values"
    assert set(by_field["tier"].values) == {Tier.LOW, Tier.MID}


def test_enum_values_merge_when_they_share_the_region() -> None:
    truth = {"p": False, "q": False, "r": False, "kind": Flag.A}
    found = minimal_message(SMALL_REF, truth)
    assert found.fields == ("p", "q", "r", "kind")
    kind = next(f for f in found.message if f.field == "kind")
    assert kind.representation == "values"
    assert set(kind.values) == {Flag.A, Flag.C}


@given(pump_states())
def test_every_trigger_flips_the_reference_action(truth: dict[str, Any]) -> None:
    action = PUMP_REF(truth)
    for trigger in counterfactual_triggers(PUMP_REF, truth):
        spec = PUMP.field_map[trigger.field]
        changed: Any = trigger.to
        if spec.enum_type is not None:
            changed = spec.enum_type(changed)
        elif isinstance(changed, dict):
            changed = Interval(changed["lo"], changed["hi"])
        assert PUMP_REF({**truth, trigger.field: changed}) == trigger.action != action


@given(small_states())
def test_finite_triggers_are_every_single_flip(truth: dict[str, Any]) -> None:
    action = SMALL_REF(truth)
    expected = set()
    for spec in SMALL.fields:
        for value in spec.domain() or ():
            if value != truth[spec.name] and SMALL_REF({**truth, spec.name: value}) != action:
                expected.add((spec.name, getattr(value, "value", value)))
    got = {(t.field, t.to) for t in counterfactual_triggers(SMALL_REF, truth)}
    assert got == expected


def test_numeric_trigger_names_the_threshold() -> None:
    truth = {"failure": Interval(0.1, 0.1), "tier": Tier.HIGH, "load": 10, "sensor_ok": True}
    triggers = counterfactual_triggers(PUMP_REF, truth)
    failure = [t for t in triggers if t.field == "failure"]
    assert any(t.threshold == 0.05 and t.action == "GO" for t in failure)
    assert any(t.field == "tier" and t.to == "LOW" for t in triggers)


def _payment_truth(case_id: str) -> dict[str, Any]:
    case = next(c for c in synthetic_cases() if c.case_id == case_id)
    return PAYMENT_RELEASE.view(case.state())


@pytest.mark.parametrize(("case_id", "fields"), [
    ("routine-01", ("identity_verified", "screening_clear", "duplicate_signal",
                    "policy_current", "evidence_conflict", "high_value")),
    ("policy-01", ("identity_verified", "screening_clear", "duplicate_signal",
                   "policy_current")),
    ("identity-01", ("identity_verified",)),
    ("screening-01", ("screening_clear",)),
    ("duplicate-01", ("identity_verified", "screening_clear", "duplicate_signal")),
])
def test_payment_region_minimal_sets(case_id: str, fields: tuple[str, ...]) -> None:
    truth = _payment_truth(case_id)
    found = minimal_message(PAY_REF, truth)
    assert found.fields == fields
    assert found.guarantee == "minimum"
    assert minimal_message(PAYMENT_RELEASE, truth) == found  # a contract, unmemoised


def test_the_triggers_of_a_contract_are_those_of_its_reference() -> None:
    truth = _payment_truth("duplicate-01")
    assert counterfactual_triggers(PAYMENT_RELEASE, truth) == counterfactual_triggers(
        PAY_REF, truth) != ()


def test_payment_duality_of_minimal_sets_and_triggers() -> None:
    for case in synthetic_cases():
        truth = PAYMENT_RELEASE.view(case.state())
        triggers = {t.field for t in counterfactual_triggers(PAY_REF, truth)}
        assert set(minimal_message(PAY_REF, truth).fields) == triggers, case.case_id


def test_budget_falls_back_to_subset_minimal() -> None:
    truth = _payment_truth("policy-01")
    found = minimal_message(PAY_REF, truth, budget=3)
    assert found.guarantee == "subset-minimal"
    assert region_sufficient(PAY_REF, {n: Constraint(exact=truth[n]) for n in found.fields},
                             found.action)
    for name in found.fields:  # no field can be dropped
        rest = {n: Constraint(exact=truth[n]) for n in found.fields if n != name}
        assert not region_sufficient(PAY_REF, rest, found.action)


@given(st.sets(st.integers(0, 9)), st.integers(1, 10))
def test_ddmin_finds_the_needed_units_of_a_monotone_test(needed: set[int], n: int) -> None:
    units = list(range(10))
    found, calls, complete = ddmin(units, lambda s: needed <= set(s), budget=500)
    assert complete
    assert set(found) == needed
    assert calls <= 500
    del n


@given(st.lists(st.frozensets(st.integers(0, 7), min_size=1), min_size=1, max_size=4))
def test_ddmin_result_is_one_minimal(accepted: list[frozenset[int]]) -> None:
    units = list(range(8))

    def test(subset: Any) -> bool:
        return any(a <= set(subset) for a in accepted)

    found, _, complete = ddmin(units, test, budget=1000)
    assert complete
    assert test(found)
    for unit in found:
        assert not test([u for u in found if u != unit])


def test_ddmin_budget_and_failing_full_set() -> None:
    units = list(range(6))
    found, calls, complete = ddmin(units, lambda s: False, budget=10)
    assert (found, calls, complete) == (tuple(units), 1, False)
    found, calls, complete = ddmin(units, lambda s: len(s) >= 3, budget=2)
    assert not complete
    assert calls == 2


# --------------------------------------------- the per-search budget on a receiver


class CountingModel:
    """Stands in for a model receiver (the remote part: a provider that reports token
    usage): the contract's three-valued reference receiver, counting its calls and
    reporting ``tokens`` per answer; after ``fail_after`` calls every answer is the
    run budget's refusal (``budget-exceeded``), as a model receiver in a lab run gives.
    """

    name = "counting-model"
    deterministic = True

    def __init__(self, *, tokens: int = 10, fail_after: int | None = None) -> None:
        self.inner = ReferenceReceiver(PAYMENT_RELEASE, defaults=False)
        self.tokens = tokens
        self.fail_after = fail_after
        self.calls = 0

    def receive(self, message: Any) -> Decision:
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            return Decision(verdict=Verdict.ESCALATE, action="ESCALATE", step=Step.POLICY,
                            reasons=(Reason("budget-exceeded", "the run's budget is spent",
                                            Step.POLICY),), receiver=self.name)
        decision = self.inner.receive(message)
        return attrs.evolve(decision, record={**decision.record, "tokens_in": self.tokens - 3,
                                              "tokens_out": 3})


def _example(case_id: str) -> dict[str, Any]:
    case = next(c for c in synthetic_cases() if c.case_id == case_id)
    return {"decision_state": attrs.asdict(case.state())}


NAMES = [s.name for s in PAYMENT_RELEASE.fields]
POLICY_01 = ["identity_verified", "screening_clear", "duplicate_signal", "policy_current"]


def test_a_finished_search_finds_the_receivers_minimal_message() -> None:
    model = CountingModel()
    found = search_receiver(model, _example("policy-01"), "ESCALATE", NAMES, method="ddmin",
                            fields=(), max_calls=64, max_tokens=None)
    assert found.finished
    assert found.stop is None
    assert found.fields == tuple(POLICY_01)
    assert found.confirmed is True
    assert found.calls == model.calls
    assert found.tokens == 10 * model.calls
    confirmed = search_receiver(model, _example("policy-01"), "ESCALATE", NAMES,
                                method="region", fields=POLICY_01)
    assert (confirmed.confirmed, confirmed.fields, confirmed.calls) == (True, None, 1)


def test_the_search_stops_at_its_call_budget_and_claims_nothing() -> None:
    model = CountingModel()
    stopped = search_receiver(model, _example("policy-01"), "ESCALATE", NAMES,
                              method="ddmin", fields=(), max_calls=3)
    assert model.calls == stopped.calls == 3  # never a call past the budget
    assert not stopped.finished
    assert stopped.stop is not None
    assert stopped.stop.code == "search-max-calls"
    assert (stopped.confirmed, stopped.fields) == (False, None)
    assert stopped.to_json()["reason"] == "the search's 3 receiver call(s) are spent (max_calls)"


def test_the_search_stops_at_its_token_budget() -> None:
    model = CountingModel(tokens=10)
    stopped = search_receiver(model, _example("policy-01"), "ESCALATE", NAMES,
                              method="ddmin", fields=(), max_calls=64, max_tokens=25)
    assert (model.calls, stopped.calls, stopped.tokens) == (3, 3, 30)
    assert stopped.stop is not None
    assert stopped.stop.code == "search-max-tokens"
    assert (stopped.confirmed, stopped.fields) == (False, None)


def test_a_refused_call_stops_the_search_instead_of_counting_as_a_refusal() -> None:
    # Read as "the receiver does not accept", the run budget's refusals would make
    # delta debugging keep fields it does not need and call the result 1-minimal.
    model = CountingModel(fail_after=2)
    stopped = search_receiver(model, _example("policy-01"), "ESCALATE", NAMES,
                              method="ddmin", fields=())
    assert stopped.stop is not None
    assert stopped.stop.code == "budget-exceeded"
    assert (stopped.calls, stopped.confirmed, stopped.fields) == (3, False, None)
    region = search_receiver(CountingModel(fail_after=0), _example("policy-01"), "ESCALATE",
                             NAMES, method="region", fields=POLICY_01)
    assert region.stop is not None
    assert (region.stop.code, region.confirmed, region.calls) == ("budget-exceeded", False, 1)


def test_an_unfinished_search_fails_the_release_gate_and_names_the_case() -> None:
    model = CountingModel()
    experiment = attrs.evolve(payment_experiment(profile="essay"), confirming_receiver=model,
                              minimal_method="ddmin", minimal_max_calls=3)
    report = run(experiment, created=datetime(2026, 11, 30, tzinfo=UTC)).report
    minimal = report["minimal_messages"]
    regions = minimal["regions"]
    assert model.calls == minimal["receiver_calls"] == sum(r["receiver_calls"] for r in regions)
    assert all(r["receiver_calls"] <= 3 for r in regions)
    stopped = [r for r in regions if not r["search"]["finished"]]
    assert stopped  # six fields need more than three tests
    for region in stopped:
        assert region["guarantee"] == "unfinished"
        assert region["fields"] == NAMES  # no field is dropped on its account
        assert (region["confirmed"], region["receiver_fields"]) == (False, None)
        assert region["search"]["stopped_by"] == "search-max-calls"
    assert minimal["fields_never_needed"] == []
    [check] = [c for c in report["gate"]["checks"] if c["metric"] == "minimal_message_searches"]
    assert (check["passed"], check["value"]) == (False, len(stopped))
    assert f"case {stopped[0]['example_case_id']}: the search's 3" in check["reason"]
    assert report["gate"]["passed"] is False
    validate_report(report)
    markdown = render_markdown(report)
    assert "no: the search stopped (search-max-calls)" in markdown
    assert "minimal-message search(es) stopped before finishing" in markdown


def test_with_enough_budget_the_gate_has_no_search_check() -> None:
    model = CountingModel()
    experiment = attrs.evolve(payment_experiment(profile="essay"), confirming_receiver=model,
                              minimal_method="ddmin", minimal_max_calls=64,
                              minimal_max_tokens=10_000)
    report = run(experiment, created=datetime(2026, 11, 30, tzinfo=UTC)).report
    regions = report["minimal_messages"]["regions"]
    assert all(r["search"]["finished"] and r["guarantee"] == "1-minimal" for r in regions)
    assert all(r["search"]["tokens"] == 10 * r["receiver_calls"] for r in regions)
    assert not [c for c in report["gate"]["checks"] if c["metric"] == "minimal_message_searches"]
    assert report["gate"]["passed"] is True


@pytest.mark.parametrize(("key", "value"), [("minimal_max_calls", 0),
                                            ("minimal_max_tokens", -1),
                                            ("minimal_max_calls", True),
                                            ("minimal_max_tokens", 2.5)])
def test_a_bad_search_budget_is_refused(key: str, value: Any) -> None:
    with pytest.raises(ExperimentError, match=f"{key} must be a positive integer"):
        attrs.evolve(payment_experiment(profile="essay"), **{key: value})


def test_the_search_budget_is_declared_in_toml(tmp_path: Path) -> None:
    path = tmp_path / "experiment.toml"
    head = ('[experiment]\nfactory = "handoffs.examples.payment_lab:payment_experiment"\n'
            'factory_args = { profile = "essay" }\nminimal_method = "ddmin"\n')
    path.write_text(head + "minimal_max_calls = 3\nminimal_max_tokens = 500\n",
                    encoding="utf-8")
    experiment = load_experiment(path)
    assert (experiment.minimal_max_calls, experiment.minimal_max_tokens) == (3, 500)
    report = run(experiment, created=datetime(2026, 11, 30, tzinfo=UTC)).report
    searches = [r["search"] for r in report["minimal_messages"]["regions"]]
    assert {s["max_calls"] for s in searches} == {3}
    assert {s["max_tokens"] for s in searches} == {500}
    assert "search-max-calls" in {s["stopped_by"] for s in searches}
    assert report["gate"]["passed"] is False
    path.write_text(head + "minimal_max_tokens = 0\n", encoding="utf-8")
    with pytest.raises(ExperimentError, match="minimal_max_tokens must be a positive integer"):
        load_experiment(path)
    path.write_text(head + "minimal_budget = 64\n", encoding="utf-8")
    with pytest.raises(ExperimentError, match="unknown experiment key 'minimal_budget'"):
        load_experiment(path)
