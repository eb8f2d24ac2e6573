"""Issue 33, item 5: optional decision fields (``T | None``, ``None`` meaning "known not
to apply") in the contract, the schema, the policy language, the analysis, the
perturbations, case generation and population draws."""

from __future__ import annotations

import enum
import itertools
import random
from typing import Any

import attrs
import pytest

from credit_optional import CREDIT_OPTIONAL, CreditState, Employment
from handoffs.contracts import (
    Contract,
    ContractDefinitionError,
    Interval,
    LossMatrix,
    ReceiptValidationError,
    decision_field,
)
from handoffs.contracts._analysis._coverage import transitions
from handoffs.contracts._analysis._perturbed import perturbed_state, prove_form
from handoffs.contracts.analysis import (
    DropField,
    MergeValues,
    RoundValue,
    SymbolicForm,
    analyse,
)
from handoffs.contracts.policy import (
    Absent,
    AllOf,
    Field,
    Is,
    Not,
    Over,
    Policy,
    Present,
    Rule,
    Under,
)
from handoffs.lab import GeneratedCases
from handoffs.lab._minimal import counterfactual_triggers, minimal_message
from handoffs.lab._population import CaseDistribution, DistributionError
from handoffs.lab._reference import ReferenceReceiver
from handoffs.lab._values import wire_value
from handoffs.lab.perturbations import CaseContext
from handoffs.lab.perturbations._ablation import RemoveDecisionField
from handoffs.lab.perturbations._coarsening import MergeEnumValues, RoundNumeric
from handoffs.lab.perturbations._falsehood import Mutate
from handoffs.testing import falsehoods, states

# --------------------------------------------------------------------- a small contract


class Act(enum.Enum):
    APPROVE = "APPROVE"
    REFER = "REFER"
    DECLINE = "DECLINE"


class Grade(enum.Enum):
    A = "A"
    B = "B"
    C = "C"


@attrs.frozen
class Small:
    """Every kind optional but one, with small domains to enumerate."""

    months: int | None = decision_field("Months since the event.", minimum=0, maximum=30)
    grade: Grade | None = decision_field("The grade.")
    flag: bool | None = decision_field("A flag.")
    x: float = decision_field("A number.", minimum=0.0, maximum=10.0)


SMALL = Contract(
    name="small-optional", version="1.0.0", description="Optional fields, enumerated.",
    actions=Act, state=Small,
    policy=Policy(rules=(
        Rule("no-flag-high-x", Absent("flag") & Over("x", 5), Act.DECLINE),
        Rule("recent", Under("months", 12), Act.REFER),
        Rule("not-old-grade-a", Not(Over("months", 20)) & Is("grade", Grade.A), Act.REFER),
        Rule("product", Field("x") * Field("months") > 100, Act.DECLINE),
        Rule("dead", Absent("months") & Under("months", 5), Act.DECLINE),
        Rule("graded-flag", Present("grade") & Is("flag", True), Act.REFER),
        Rule("ungraded", Absent("grade"), Act.DECLINE),
    ), default=Act.APPROVE),
    loss=LossMatrix({(c, r): 0.0 if c is r else 1.0 for c in Act for r in Act}),
    fail_closed_action=Act.REFER,
    counterfactual_trigger="any change",
)

MONTHS = (None, 0, 11, 12, 19, 20, 21, 30)
GRADES = (None, *Grade)
FLAGS = (None, False, True)
XS = (0.0, 5.0, 5.5, 10.0)


def _states() -> list[dict[str, Any]]:
    return [dict(zip(("months", "grade", "flag", "x"), values, strict=True))
            for values in itertools.product(MONTHS, GRADES, FLAGS, XS)]


# ----------------------------------------------------------------- declaration


def test_optional_annotations_are_read_as_optional_fields() -> None:
    specs = SMALL.field_map
    assert [specs[n].optional for n in ("months", "grade", "flag", "x")] == [
        True, True, True, False]
    assert specs["grade"].values() == (None, *Grade)
    assert specs["grade"].domain() == tuple(Grade)
    assert specs["months"].contains(None)
    assert not specs["x"].contains(None)
    assert not specs["months"].contains(31)


def test_an_optional_interval_and_if_missing_none() -> None:
    @attrs.frozen
    class Ranged:
        p: Interval | None = decision_field("A range.", minimum=0.0, maximum=1.0,
                                            if_missing=None)

    contract = Contract(
        name="ranged", version="1.0.0", description="d", actions=Act, state=Ranged,
        policy=Policy(rules=(Rule("high", Over("p", 0.5), Act.DECLINE),), default=Act.APPROVE),
        loss=LossMatrix({(c, r): 0.0 if c is r else 1.0 for c in Act for r in Act}),
        fail_closed_action=Act.REFER, counterfactual_trigger="t")
    spec = contract.field_map["p"]
    assert spec.optional
    assert spec.if_missing is None
    assert not spec.fails_closed
    assert contract.decide(Ranged(None)) is Act.APPROVE
    assert contract.decide(Ranged(Interval(0.6, 0.7))) is Act.DECLINE
    schema = contract.json_schema()["properties"]["decision_state"]["properties"]["p"]
    assert schema["type"] == ["object", "null"]


def test_if_missing_none_is_refused_on_a_required_field() -> None:
    @attrs.frozen
    class Bad:
        n: int = decision_field("n", minimum=0, maximum=1, if_missing=None)

    with pytest.raises(ContractDefinitionError, match="if_missing value None") as info:
        Contract(name="bad", version="1.0.0", description="d", actions=Act, state=Bad,
                 policy=Policy(rules=(), default=Act.APPROVE),
                 loss=LossMatrix({(c, r): 0.0 if c is r else 1.0 for c in Act for r in Act}),
                 fail_closed_action=Act.REFER, counterfactual_trigger="t")
    assert info.value.json_path == "$.n"


def test_absence_tests_on_a_required_field_are_refused() -> None:
    with pytest.raises(ContractDefinitionError, match="not optional") as info:
        attrs.evolve(SMALL, policy=Policy(rules=(Rule("r", Absent("x"), Act.REFER),),
                                          default=Act.APPROVE))
    assert info.value.code == "not-optional"
    assert info.value.json_path == "$.x"
    with pytest.raises(ContractDefinitionError, match="Absent") as refused:
        Is("grade", None)
    assert refused.value.code == "bad-condition"


# ---------------------------------------------------------------------- semantics


def test_absence_semantics_of_every_condition() -> None:
    absent = {"months": None, "grade": None, "flag": None, "x": 3.0}
    assert Absent("months").evaluate(absent) is True
    assert Present("months").evaluate(absent) is False
    assert Under("months", 12).evaluate(absent) is False      # a comparison is false
    assert Over("months", 12).evaluate(absent) is False
    assert Not(Under("months", 12)).evaluate(absent) is True
    assert (Field("x") * Field("months") > 1).evaluate(absent) is False
    assert (Field("x") * Field("months") > 1).evaluate({"months": None}) is False  # x missing
    assert Is("grade", Grade.A).evaluate(absent) is False
    assert Is("flag", False).evaluate(absent) is False
    missing: dict[str, Any] = {"x": 3.0}                        # missing: unknown, as before
    for condition in (Absent("months"), Present("months"), Under("months", 12)):
        assert condition.evaluate(missing) is None
    assert AllOf((Absent("months"), Under("months", 5))).evaluate(absent) is False


def test_never_delinquent_is_absent_not_a_sentinel() -> None:
    never = CreditState(False, 700, 100.0, 5000.0, None, Employment.EMPLOYED)
    assert CREDIT_OPTIONAL.decide(never) is CREDIT_OPTIONAL.actions.APPROVE
    recent = attrs.evolve(never, months_since_delinquency=3)
    assert CREDIT_OPTIONAL.evaluate(recent).rule == "recent-delinquency"
    no_status = attrs.evolve(never, employment_status=None, credit_score=690)
    assert CREDIT_OPTIONAL.evaluate(no_status).rule == "no-status"
    assert CREDIT_OPTIONAL.decide(attrs.evolve(no_status, credit_score=700)).value == "APPROVE"


def test_the_wire_form_is_null_and_the_member_stays_required() -> None:
    schema = CREDIT_OPTIONAL.json_schema()
    state = schema["properties"]["decision_state"]
    months = state["properties"]["months_since_delinquency"]
    assert months["type"] == ["integer", "null"]
    assert (months["minimum"], months["maximum"]) == (0, 600)
    assert state["properties"]["employment_status"]["enum"][-1] is None
    assert "months_since_delinquency" in state["required"]
    content = CREDIT_OPTIONAL.content_schema()["properties"]["decision_state"]["properties"]
    assert content["employment_status"]["type"] == ["string", "null"]
    never = CreditState(False, 700, 100.0, 5000.0, None, None)
    dumped = CREDIT_OPTIONAL.dump_state(never)
    assert dumped["months_since_delinquency"] is None
    assert dumped["employment_status"] is None
    assert CREDIT_OPTIONAL.load_state(dumped) == never


def _receipt(state: dict[str, Any]) -> dict[str, Any]:
    return {
        "contract": CREDIT_OPTIONAL.id, "id": "urn:uuid:0b3f2c4e-1d2a-4b5c-8d9e-0f1a2b3c4d5e",
        "case_id": "c-1", "sender": "intake", "receiver": "desk", "authority": "ADVISE",
        "proposed_action": "APPROVE", "decision_state": state,
        "evidence_refs": ["urn:evidence:1"], "policy_version": "V-1",
        "valid_until": "2030-01-01T00:00:00Z", "uncertainty": "RESOLVED",
        "counterfactual_trigger": "t",
    }


def test_the_schema_admits_null_refuses_a_missing_member_and_keeps_bounds() -> None:
    state = CREDIT_OPTIONAL.dump_state(CreditState(False, 700, 100.0, 5000.0, None, None))
    CREDIT_OPTIONAL.validate(_receipt(state))
    without = {k: v for k, v in state.items() if k != "months_since_delinquency"}
    with pytest.raises(ReceiptValidationError):
        CREDIT_OPTIONAL.validate(_receipt(without))
    with pytest.raises(ReceiptValidationError):
        CREDIT_OPTIONAL.validate(_receipt({**state, "months_since_delinquency": 601}))
    with pytest.raises(ReceiptValidationError):
        CREDIT_OPTIONAL.validate(_receipt({**state, "credit_score": None}))


def test_receivers_read_null_as_absent_and_a_missing_member_as_unknown() -> None:
    state = CREDIT_OPTIONAL.dump_state(CreditState(False, 700, 100.0, 5000.0, None,
                                                   Employment.EMPLOYED))
    three_valued = ReferenceReceiver(CREDIT_OPTIONAL, defaults=False)
    assert three_valued.receive({"decision_state": state}).action == "APPROVE"
    without = {k: v for k, v in state.items() if k != "months_since_delinquency"}
    decided = three_valued.receive({"decision_state": without})
    assert decided.action == "REFER_TO_HUMAN"
    assert decided.verdict.value == "ESCALATE"
    benign = ReferenceReceiver(CREDIT_OPTIONAL, defaults=True)  # if_missing=None: absent
    assert benign.receive({"decision_state": without}).action == "APPROVE"
    assert CREDIT_OPTIONAL.field_map["employment_status"].read(None) is None
    with pytest.raises(ValueError, match="not a valid"):
        CREDIT_OPTIONAL.field_map["credit_score"].read(None)


def test_the_fingerprint_records_optionality_and_absence_tests() -> None:
    document = SMALL.policy_document()
    fields = {f["name"]: f for f in document["decision_fields"]}
    assert fields["months"]["optional"] is True
    assert "optional" not in fields["x"]
    guards = [rule["guard"] for rule in document["rules"]]
    assert guards[-1] == {"absent": "grade"}
    assert {"present": "grade"} in guards[-2]["all"]


# ------------------------------------------------------------ analysis by brute force


def test_the_compiled_policy_matches_evaluate_on_every_enumerated_state() -> None:
    import z3

    from handoffs.contracts import _smt

    index = {a.value: i for i, a in enumerate(Act)}
    variables = _smt.StateVars(SMALL.fields, "s.")
    decision = _smt.Decision(SMALL, variables, index)
    solver = z3.Solver()
    solver.add(*variables.domain)
    for state in _states():
        solver.push()
        for name, value in state.items():
            solver.add(*variables.pin(name, value))
        assert solver.check() == z3.sat, state
        model = solver.model()
        got = model.eval(decision.action, model_completion=True).as_long()
        assert got == index[SMALL.decide(Small(**state)).value], state
        assert {name: variables.value(model, name) for name in state} == {
            **state, "x": pytest.approx(state["x"])}
        solver.pop()


def test_regions_and_dead_rules_match_the_enumeration() -> None:
    found = analyse(SMALL, timeout_ms=20_000)
    deciding = {SMALL.evaluate(Small(**s)).rule for s in _states()}
    assert {r.rule for r in found.dead} == {"dead"}
    assert "dead" not in deciding
    live = {r.rule for r in found.live}
    assert deciding == live
    for region in found.live:
        assert SMALL.evaluate(region.witness).rule == region.rule
    # the regions only absence reaches have absent witnesses
    witnesses = {r.rule: r.witness for r in found.live}
    assert witnesses["no-flag-high-x"]["flag"] is None
    assert witnesses["ungraded"]["grade"] is None


def test_presence_flips_are_enum_transitions() -> None:
    names = {t.name for t in transitions(SMALL, timeout_ms=20_000)}
    assert "grade: null->A" in names or "grade: A->null" in names
    found = {t.name: t for t in transitions(SMALL, timeout_ms=20_000)}
    for transition in found.values():
        spec = SMALL.field_map[transition.field]
        target = next(v for v in spec.values() or () if wire_value(v) == transition.target)
        before = SMALL.decide(Small(**transition.state))
        after = SMALL.decide(Small(**{**transition.state, transition.field: target}))
        assert (before.value, after.value) == transition.actions


# -------------------------------------------------------- symbolic forms vs their code


def _context(state: dict[str, Any]) -> CaseContext:
    return CaseContext(index=0, case_id="c", truth=state, reference="APPROVE",
                       contract=SMALL, decide=lambda view: SMALL.decide(Small(**view)).value,
                       neighbour=lambda _: None, constant=lambda _: None)


def _sent(perturbation: Any, state: dict[str, Any]) -> dict[str, Any] | None:
    message = {"decision_state": {k: wire_value(v) for k, v in state.items()}}
    variants = list(perturbation.variants(message, _context(state), "s"))
    if not variants:
        return None
    sent = variants[0].message["decision_state"]
    return {name: SMALL.field_map[name].read(value) for name, value in sent.items()}


@pytest.mark.parametrize(("perturbation", "form"), [
    (RoundNumeric("months", 10), SymbolicForm(changes=(RoundValue("months", 10, 0, 30),))),
    (MergeEnumValues(target="decision_state.grade", values=("B",), into="A"),
     SymbolicForm(changes=(MergeValues("grade", ("B",), "A"),))),
])
def test_forms_agree_with_their_perturbation_on_absent_values(perturbation: Any,
                                                              form: SymbolicForm) -> None:
    prepared = perturbation.prepare(SMALL, seed=0)
    for state in _states():
        code = _sent(prepared, state)
        solved = perturbed_state(SMALL, form, "three-valued", state)
        assert code is not None
        assert solved is not None
        assert solved == {k: pytest.approx(v) if isinstance(v, float) else v
                          for k, v in code.items()}, state


def test_a_removed_optional_field_is_missing_not_absent() -> None:
    form = SymbolicForm(changes=(DropField("months"),))
    state = {"months": 3, "grade": Grade.B, "flag": False, "x": 1.0}
    assert perturbed_state(SMALL, form, "strict", state) is None          # refused
    assert "months" not in (perturbed_state(SMALL, form, "three-valued", state) or {})
    assert _sent(RemoveDecisionField("months"), state) == {
        "grade": Grade.B, "flag": False, "x": 1.0}


def _brute_differs(perturbation: Any) -> dict[str, Any] | None:
    """The first enumerated state where the perturbation's own code changes a
    three-valued receiver's decision."""
    receiver = ReferenceReceiver(SMALL, defaults=False)
    prepared = perturbation.prepare(SMALL, seed=0)
    for state in _states():
        message = {"decision_state": {k: wire_value(v) for k, v in state.items()}}
        sent = next(iter(prepared.variants(message, _context(state), "s"))).message
        if receiver.receive(sent).action != SMALL.decide(Small(**state)).value:
            return state
    return None


@pytest.mark.parametrize(("perturbation", "status"), [
    (RoundNumeric("months", 10), "refuted"),
    (RoundNumeric("months", 1), "proved"),
    (MergeEnumValues(target="decision_state.grade", values=("C",), into="B"), "proved"),
    # refuted only through absence: months absent makes "not over 20" true for grade A
    (MergeEnumValues(target="decision_state.grade", values=("B",), into="A"), "refuted"),
    (RemoveDecisionField("flag"), "refuted"),
    (RemoveDecisionField("grade"), "refuted"),
])
def test_proofs_match_the_brute_force(perturbation: Any, status: str) -> None:
    loss = {(c.value, r.value): SMALL.loss(c, r) for c in Act for r in Act}
    form = perturbation.symbolic(SMALL)
    assert form is not None
    receiver = ReferenceReceiver(SMALL, defaults=False)
    prepared = perturbation.prepare(SMALL, seed=0)

    def confirm(state: Any) -> bool:
        message = {"decision_state": {k: wire_value(v) for k, v in state.items()}}
        sent = next(iter(prepared.variants(message, _context(state), "s"))).message
        return bool(receiver.receive(sent).action != SMALL.decide(Small(**state)).value)

    answer = prove_form(SMALL, form, "three-valued", loss=loss, hard=[], confirm=confirm,
                        timeout_ms=20_000)
    assert answer.status == status, answer.reason
    brute = _brute_differs(perturbation)
    assert (brute is None) == (status == "proved"), brute
    if status == "refuted":
        assert answer.state is not None
        assert confirm(answer.state)


# ------------------------------------------------------------ generation and draws


def test_generated_states_and_cases_hold_absent_values() -> None:
    from hypothesis import given, settings

    seen: list[Any] = []

    @settings(max_examples=150, database=None, derandomize=True)
    @given(states(CREDIT_OPTIONAL))
    def collect(state: CreditState) -> None:
        seen.append(state)

    collect()
    assert any(s.months_since_delinquency is None for s in seen)
    assert any(s.months_since_delinquency is not None for s in seen)
    assert any(s.employment_status is None for s in seen)
    cases = list(GeneratedCases(CREDIT_OPTIONAL, 80, seed=0))
    assert any(c.state.months_since_delinquency is None for c in cases)
    assert any(c.state.employment_status is None for c in cases)


def test_falsehoods_flip_presence() -> None:
    from hypothesis import given, settings

    truth = CreditState(False, 700, 100.0, 5000.0, 30, None)
    flips: set[str] = set()

    @settings(max_examples=200, database=None, derandomize=True)
    @given(falsehoods(CREDIT_OPTIONAL, truth,
                      fields=["months_since_delinquency", "employment_status"]))
    def collect(false: CreditState) -> None:
        if false.months_since_delinquency is None:
            flips.add("months->null")
        if false.employment_status is not None:
            flips.add("status->value")

    collect()
    assert flips == {"months->null", "status->value"}


def test_mutate_generates_null_and_values_for_an_absent_truth() -> None:
    mutate = Mutate(fields=("months_since_delinquency",), members=()).prepare(
        CREDIT_OPTIONAL, seed=0)
    assert mutate.schema_rejected == 0
    pool = mutate.pools["decision_state.months_since_delinquency"]  # type: ignore[index]
    assert None in pool
    assert any(isinstance(v, int) for v in pool)
    enum_pool = Mutate(fields=("employment_status",), members=()).prepare(
        CREDIT_OPTIONAL, seed=0).pools["decision_state.employment_status"]  # type: ignore[index]
    assert None in enum_pool


def test_population_draws_take_an_absence_rate() -> None:
    rng = random.Random(0)  # noqa: S311 - reproducible draws, not secrets
    never = CaseDistribution.from_json(CREDIT_OPTIONAL, {
        "months_since_delinquency": {"absent": 1.0},
        "employment_status": {"absent": 0.0, "weights": {"EMPLOYED": 1}}})
    drawn = [never.draw(rng) for _ in range(50)]
    assert all(s.months_since_delinquency is None for s in drawn)
    assert all(s.employment_status is Employment.EMPLOYED for s in drawn)
    default = CaseDistribution.from_json(CREDIT_OPTIONAL, {})
    mixed = [default.draw(rng).months_since_delinquency for _ in range(400)]
    assert 40 < sum(v is None for v in mixed) < 160                # about a quarter
    assert never.to_json()["months_since_delinquency"] == {"absent": 1.0}


@pytest.mark.parametrize(("table", "path", "message"), [
    ({"months_since_delinquency": {"absent": 1.5}},
     "$.cases.distribution.months_since_delinquency.absent", "not a probability"),
    ({"months_since_delinquency": {"absent": -0.1}},
     "$.cases.distribution.months_since_delinquency.absent", "not a probability"),
    ({"credit_score": {"absent": 0.5}},
     "$.cases.distribution.credit_score.absent", "only an optional field"),
])
def test_a_bad_absence_rate_is_a_typed_error_naming_the_path(
        table: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(DistributionError, match=message) as info:
        CaseDistribution.from_json(CREDIT_OPTIONAL, table)
    assert info.value.json_path == path
    assert info.value.code == "bad-distribution"


# --------------------------------------------------------------- minimal messages


def test_triggers_and_minimal_messages_with_absent_values() -> None:
    truth = CREDIT_OPTIONAL.view(CreditState(False, 700, 100.0, 5000.0, None,
                                             Employment.EMPLOYED))
    to_recent = [t for t in counterfactual_triggers(CREDIT_OPTIONAL, truth)
                 if t.field == "months_since_delinquency"]
    assert to_recent
    assert all(t.from_ is None and isinstance(t.to, int) and t.to < 12
                             for t in to_recent)
    assert {t.action for t in to_recent} == {"REFER_TO_HUMAN"}
    minimal = minimal_message(CREDIT_OPTIONAL, truth, budget=256)
    assert minimal.action == "APPROVE"
    assert "months_since_delinquency" in minimal.fields
    carried = {f.field: f.to_json() for f in minimal.message}
    assert carried["months_since_delinquency"] == {
        "field": "months_since_delinquency", "representation": "exact", "value": None}
    recent = {**truth, "months_since_delinquency": 3}
    flips = [t for t in counterfactual_triggers(CREDIT_OPTIONAL, recent)
             if t.field == "months_since_delinquency"]
    assert any(t.to is None and t.action == "APPROVE" for t in flips)
    assert any(isinstance(t.to, int) and t.to >= 12 for t in flips)


# ------------------------------------------------------------------------ a lab run


OPTIONAL_ROWS = (
    "round-numeric:months_since_delinquency:60",
    "merge-enum-values:decision_state.employment_status:SELF_EMPLOYED->EMPLOYED",
    "merge-enum-values:decision_state.employment_status:UNEMPLOYED->EMPLOYED",
)


def test_a_lab_run_proves_and_refutes_with_absent_values() -> None:
    from handoffs.contracts import ReceiptEncoder
    from handoffs.lab import Experiment, Strategy, Tolerances, run
    from handoffs.lab.perturbations import select_perturbations
    from worlds.credit import governance_for, state_of, strict_receiver

    contract = CREDIT_OPTIONAL
    experiment = Experiment(
        name="credit-optional", contract=contract,
        cases=GeneratedCases(contract, 60, seed=0),
        strategies=(Strategy(name="receipt", receiver=strict_receiver(contract, "desk"),
                             encoder=ReceiptEncoder(contract=contract, state_of=state_of,
                                                    name="receipt"),
                             receipts=True, gated=True),),
        governance=governance_for("desk"),
        perturbations=select_perturbations(contract, include=list(OPTIONAL_ROWS)),
        tolerances=Tolerances(controls_must_fail=False))
    report = run(experiment).report
    rows = {r["perturbation"]: r for r in report["results"]}
    assert rows["none"]["verdict"] == "proved"
    rounded = rows[OPTIONAL_ROWS[0]]
    assert rounded["verdict"] == "refuted"
    assert rounded["agreement"] < 1.0
    # the witness is a present value next to the cut: absence is never rounded
    months = rounded["witness"]["state"]["months_since_delinquency"]
    assert isinstance(months, int)
    assert rounded["witness"]["message"]["months_since_delinquency"] != months
    assert rows[OPTIONAL_ROWS[1]]["verdict"] == "proved"
    assert rows[OPTIONAL_ROWS[1]]["agreement"] == 1.0
    harmful = rows[OPTIONAL_ROWS[2]]
    assert harmful["verdict"] == "refuted"
    assert harmful["agreement"] < 1.0
    assert harmful["witness"]["state"]["employment_status"] == "UNEMPLOYED"
    # every case counts, absent ones too (sent unchanged, not dropped as inapplicable)
    assert rounded["cases"] == rows["none"]["cases"]
    fields = {f["name"]: f for f in report["experiment"]["decision_fields"]}
    assert fields["months_since_delinquency"]["optional"] is True
    assert fields["credit_score"]["optional"] is False
    import json
    from pathlib import Path

    import jsonschema

    import handoffs.lab

    schema = json.loads((Path(handoffs.lab.__file__).parent / "report.schema.json").read_text())
    jsonschema.validate(json.loads(json.dumps(report, default=str)), schema)


def test_declared_conditions_read_absence() -> None:
    from handoffs.lab._experiment import ExperimentError
    from handoffs.lab.perturbations._registry import condition_from_json

    assert condition_from_json({"field": "months", "absent": True}) == Absent("months")
    assert condition_from_json({"field": "months", "absent": False}) == Present("months")
    with pytest.raises(ExperimentError, match="absent is true or false"):
        condition_from_json({"field": "months", "absent": "yes"})


def test_making_a_field_optional_is_a_finding_old_receivers_feel() -> None:
    from credit_limit import CREDIT_LIMIT
    from handoffs.contracts.versions import diff

    found = diff(CREDIT_LIMIT, attrs.evolve(CREDIT_OPTIONAL, name="credit-limit",
                                            version="2.0.0"))
    widened = [f for f in found.findings if f.code.value == "FIELD_TYPE_WIDENED"]
    assert any("integer|null" in f.message for f in widened)
    assert all(f.direction.value == "FORWARD" for f in widened)
    assert any("null (absent: known not to apply)" in f.message for f in found.findings)
