"""Contract diffs: every finding code from a crafted pair, verdicts and version bumps."""

from __future__ import annotations

import copy
import enum
import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from handoffs import HandoffsError
from handoffs.contracts import (
    Contract,
    ContractDefinitionError,
    EvidenceFresh,
    HardConstraint,
    Interval,
    LossMatrix,
    PolicyResolvable,
    decision_field,
)
from handoffs.contracts._diff import (
    Category,
    ContractDiff,
    Direction,
    Finding,
    FindingCode,
    VersionBumpError,
    diff,
)
from handoffs.contracts.policy import Is, Over, Policy, Rule
from handoffs.examples.payment import PAYMENT_RELEASE, PaymentAction
from worlds.pump_versions import (
    BASE,
    BLIND,
    HOT,
    MANUAL,
    WORN,
    Act,
    ModeAuto,
    ModePlus,
    fields_with,
    loss,
    make,
    plus_actions,
)
from worlds.receipts import receipts

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


def base_schema() -> dict[str, Any]:
    return copy.deepcopy(BASE.json_schema())


def schema_with(edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    schema = base_schema()
    edit(schema)
    return schema


# ------------------------------------------------------- one case per finding


@attrs.frozen
class Case:
    code: FindingCode
    old: Contract[Any, Any] | dict[str, Any]
    new: Contract[Any, Any] | dict[str, Any]
    json_path: str
    direction: Direction
    breaking: bool
    category: Category = Category.WIRE

    def run(self) -> ContractDiff:
        if isinstance(self.old, Contract) and isinstance(self.new, Contract):
            return diff(self.old, self.new)
        assert isinstance(self.old, dict)
        assert isinstance(self.new, dict)
        return ContractDiff.between_schemas(self.old, self.new)


W, DEC = Category.WIRE, Category.DECISION
B, FWD, BACK, NONE = Direction.BOTH, Direction.FORWARD, Direction.BACKWARD, Direction.NONE
C = FindingCode
ACTION_PLUS = plus_actions()


def _drop_required(name: str) -> Callable[[dict[str, Any]], None]:
    return lambda s: s["required"].remove(name)


CASES = [
    Case(C.CONTRACT_RENAMED, BASE, make(name="pump-check"), "$.contract", B, True),
    Case(C.FIELD_ADDED_REQUIRED, BASE,
         make(state=fields_with(pressure=(float, {"minimum": 0.0, "maximum": 10.0}))),
         "$.decision_state.pressure", B, True),
    Case(C.FIELD_ADDED_OPTIONAL, base_schema(), schema_with(
        lambda s: s["properties"].update(annotations={"type": "string", "description": "x"})),
        "$.annotations", FWD, False),
    Case(C.FIELD_REMOVED, BASE, make(state=fields_with(running=None)),
         "$.decision_state.running", B, True),
    Case(C.FIELD_NOW_REQUIRED, base_schema(), schema_with(lambda s: s["required"].append("notes")),
         "$.notes", BACK, True),
    Case(C.FIELD_NOW_OPTIONAL, base_schema(), schema_with(_drop_required("case_id")),
         "$.case_id", FWD, False),
    Case(C.FIELD_TYPE_CHANGED, BASE,
         make(state=fields_with(running=(int, {"minimum": 0, "maximum": 1}))),
         "$.decision_state.running", B, True),
    Case(C.FIELD_TYPE_WIDENED, BASE,
         make(state=fields_with(cycles=(float, {"minimum": 0, "maximum": 1000}))),
         "$.decision_state.cycles", FWD, False),
    Case(C.FIELD_TYPE_NARROWED, BASE,
         make(state=fields_with(temperature=(int, {"minimum": -40, "maximum": 200}))),
         "$.decision_state.temperature", BACK, True),
    Case(C.FIELD_BOUNDS_NARROWED, BASE,
         make(state=fields_with(temperature=(float, {"minimum": -40.0, "maximum": 150.0}))),
         "$.decision_state.temperature", BACK, True),
    Case(C.FIELD_BOUNDS_WIDENED, BASE, make(max_notes_length=4000), "$.notes", FWD, False),
    Case(C.ENUM_VALUE_ADDED, BASE, make(state=fields_with(mode=(ModePlus, {}))),
         "$.decision_state.mode", FWD, True, DEC),
    Case(C.ENUM_VALUE_REMOVED, BASE, make(state=fields_with(mode=(ModeAuto, {}))),
         "$.decision_state.mode", BACK, True, DEC),
    Case(C.CONST_CHANGED, base_schema(), schema_with(
        lambda s: s["$defs"]["proof"]["properties"]["type"].update(const="OtherProof")),
        "$.proof.type", B, True),
    Case(C.PATTERN_CHANGED, base_schema(),
         schema_with(lambda s: s["properties"]["id"].update(pattern="^urn:")),
         "$.id", B, True),
    Case(C.CONTENT_MODEL_OPENED, base_schema(), schema_with(
        lambda s: s["properties"]["decision_state"].pop("additionalProperties")),
        "$.decision_state", FWD, True),
    Case(C.CONTENT_MODEL_CLOSED, schema_with(
        lambda s: s["properties"]["decision_state"].pop("additionalProperties")), base_schema(),
        "$.decision_state", BACK, True),
    Case(C.ANYOF_BRANCH_ADDED, schema_with(
        lambda s: s["properties"]["evidence_refs"]["items"]["anyOf"].pop()), base_schema(),
        "$.evidence_refs[*]", FWD, False),
    Case(C.ANYOF_BRANCH_REMOVED, base_schema(), schema_with(
        lambda s: s["properties"]["evidence_refs"]["items"]["anyOf"].pop()),
        "$.evidence_refs[*]", BACK, True),
    Case(C.KEYWORD_CHANGED, base_schema(), schema_with(
        lambda s: s["properties"]["evidence_refs"].update(uniqueItems=True)),
        "$.evidence_refs", B, True),
    Case(C.DESCRIPTION_CHANGED, BASE, make(description="A pump, handed over."), "$", NONE,
         False),
    Case(C.ACTION_ADDED, BASE, ACTION_PLUS, "$.proposed_action", B, True, DEC),
    Case(C.ACTION_REMOVED, ACTION_PLUS, BASE, "$.proposed_action", BACK, True, DEC),
    Case(C.POLICY_PRECEDENCE_CHANGED, BASE,
         make(policy=Policy(rules=(WORN, HOT, MANUAL), default=Act.CONTINUE)),
         "$.policy.rules", B, True, DEC),
    Case(C.POLICY_RULE_ADDED, BASE, make(policy=Policy(
        rules=(HOT, WORN, MANUAL, Rule("stopped", Is("running", False), Act.STOP)),
        default=Act.CONTINUE)), "$.policy.rules.stopped", B, True, DEC),
    Case(C.POLICY_RULE_REMOVED, BASE,
         make(policy=Policy(rules=(HOT, WORN), default=Act.CONTINUE)),
         "$.policy.rules.manual", B, True, DEC),
    Case(C.POLICY_RULE_CHANGED, BASE, make(policy=Policy(
        rules=(Rule("hot", Over("temperature", 80), Act.STOP), WORN, MANUAL),
        default=Act.CONTINUE)), "$.policy.rules.hot", B, True, DEC),
    Case(C.DEFAULT_CHANGED, BASE, make(fail_closed_action=Act.CONTINUE),
         "$.fail_closed_action", B, True, DEC),
    Case(C.LOSS_CHANGED, BASE, make(loss=loss(Act, CONTINUE__STOP=80)),
         "$.loss.CONTINUE.STOP", B, True, DEC),
    Case(C.HARD_CONSTRAINT_ADDED, make(hard_constraints=()), BASE,
         "$.hard_constraints.blind-continue", B, True, DEC),
    Case(C.HARD_CONSTRAINT_REMOVED, BASE, make(hard_constraints=()),
         "$.hard_constraints.blind-continue", B, True, DEC),
    Case(C.HARD_CONSTRAINT_CHANGED, BASE, make(hard_constraints=(
        attrs.evolve(BLIND, allowed_references={Act.CONTINUE, Act.STOP}),)),
        "$.hard_constraints.blind-continue", B, True, DEC),
    Case(C.CONTEXT_DEPENDENCY_ADDED, BASE, make(context=(*BASE.context, PolicyResolvable())),
         "$.context.policy-resolvable", B, True, DEC),
    Case(C.CONTEXT_DEPENDENCY_REMOVED, BASE, make(context=BASE.context[1:]),
         "$.context.role-held:controller", B, True, DEC),
    Case(C.CONTEXT_DEPENDENCY_CHANGED, BASE, make(context=(
        BASE.context[0], EvidenceFresh("sensor", max_age=timedelta(hours=2)))),
        "$.context.evidence-fresh:sensor", B, True, DEC),
    Case(C.COUNTERFACTUAL_TRIGGER_CHANGED, BASE, make(counterfactual_trigger="Never reuse."),
         "$.counterfactual_trigger", B, True, DEC),
]


def test_every_code_has_a_case() -> None:
    assert {case.code for case in CASES} == set(FindingCode)


@pytest.mark.parametrize("case", CASES, ids=lambda c: str(c.code))
def test_each_finding_code(case: Case) -> None:
    result = case.run()
    found = [f for f in result.findings if f.code == case.code and f.json_path == case.json_path]
    assert found, [str(f) for f in result.findings]
    finding = found[0]
    assert (finding.direction, finding.breaking, finding.category) == (
        case.direction, case.breaking, case.category)
    assert result.breaking is any(f.breaking for f in result.findings)
    assert finding.message


# Soundness: when no finding breaks BACKWARD, every receipt valid under the old
# schema is valid under the new one (a new receiver reads every old receipt).
BACKWARD_SAFE = [
    case for case in CASES
    if (case.old is BASE or case.old == base_schema())
    and not any(f.direction in (Direction.BACKWARD, Direction.BOTH) for f in case.run().findings)
]


def test_backward_safe_cases_exist() -> None:
    assert {str(c.code) for c in BACKWARD_SAFE} >= {
        "FIELD_TYPE_WIDENED", "FIELD_BOUNDS_WIDENED", "FIELD_ADDED_OPTIONAL",
        "FIELD_NOW_OPTIONAL", "DESCRIPTION_CHANGED"}


@pytest.mark.parametrize("case", BACKWARD_SAFE, ids=lambda c: str(c.code))
@settings(suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_backward_safe_changes_accept_every_old_receipt(case: Case, data: st.DataObject
                                                       ) -> None:
    new_schema = case.new if isinstance(case.new, dict) else case.new.json_schema()
    receipt = data.draw(receipts(BASE))
    assert list(Draft202012Validator(new_schema).iter_errors(receipt.to_json())) == []


def test_identical_contracts_have_no_findings() -> None:
    result = diff(BASE, make())
    assert result.findings == ()
    assert (result.breaking, result.required_bump) == (False, "none")
    result.check_version_bump()
    assert ContractDiff.between_schemas(base_schema(), base_schema()).findings == ()


def test_a_version_bump_alone_is_not_a_finding() -> None:
    assert diff(BASE, make(version="1.0.1")).findings == ()


# ------------------------------------------------------ the scout and the pilot


class Turn(enum.Enum):
    LEFT = "LEFT"
    RIGHT = "RIGHT"


class Manoeuvre(enum.Enum):
    LEFT = "LEFT"
    RIGHT = "RIGHT"
    STOP = "STOP"
    LAND = "LAND"


@attrs.frozen
class Fork:
    left_blocked: bool = decision_field("An obstacle blocks the left path.")
    right_blocked: bool = decision_field("An obstacle blocks the right path.")
    low_visibility: bool = decision_field("Visibility is below the landing minimum.")


def pilot(actions: type[enum.Enum], rules: tuple[Rule[Any], ...], version: str
          ) -> Contract[Any, Any]:
    return Contract(
        name="pilot-turn", version=version,
        description="A scout hands the terrain ahead to a pilot at a fork.",
        actions=actions, state=Fork,
        policy=Policy(rules=rules, default=actions["LEFT"]),
        loss=LossMatrix({(c, r): 0 if c is r else 1 for c in actions for r in actions}),
        fail_closed_action=actions["RIGHT"],
        counterfactual_trigger="Recompute if an obstacle or the visibility changes.",
    )


SCOUT = pilot(Turn, (Rule("left-blocked", Is("left_blocked", True), Turn.RIGHT),), "1.0.0")


def test_the_pilots_new_actions_break_a_byte_identical_state() -> None:
    rules = (Rule("low-visibility", Is("low_visibility", True), Manoeuvre.LAND),
             Rule("left-blocked", Is("left_blocked", True), Manoeuvre.RIGHT))
    result = diff(SCOUT, pilot(Manoeuvre, rules, "1.1.0"))
    # The decision state did not change at all: no field is added, removed or retyped.
    assert not [f for f in result.findings if f.json_path.startswith("$.decision_state")]
    added = [f for f in result.findings if f.code == FindingCode.ACTION_ADDED]
    assert [f.message.split(":")[0] for f in added] == ['action "STOP" added',
                                                        'action "LAND" added']
    assert all(f.breaking and f.category is Category.DECISION for f in added)
    assert [(str(f.code), f.json_path) for f in result.findings] == [
        ("ACTION_ADDED", "$.proposed_action"), ("ACTION_ADDED", "$.proposed_action"),
        ("POLICY_RULE_ADDED", "$.policy.rules.low-visibility"),
    ]
    assert (result.breaking, result.required_bump) == (True, "major")
    with pytest.raises(VersionBumpError, match="is a minor bump but the changes need a major"):
        result.check_version_bump()
    diff(SCOUT, pilot(Manoeuvre, rules, "2.0.0")).check_version_bump()


def test_a_new_payment_action_is_breaking_even_though_old_receipts_validate() -> None:
    class Payment(enum.Enum):
        RELEASE = "RELEASE"
        HOLD = "HOLD"
        REJECT_DUPLICATE = "REJECT_DUPLICATE"
        ESCALATE = "ESCALATE"
        FREEZE = "FREEZE"

    same = {a: Payment(a.value) for a in PaymentAction}
    entries = {(same[c], same[r]): v for (c, r), v in PAYMENT_RELEASE.loss.entries.items()}
    entries.update({(Payment.FREEZE, a): 0 if a is Payment.FREEZE else 10 for a in Payment})
    entries.update({(a, Payment.FREEZE): 0 if a is Payment.FREEZE else 10 for a in Payment})
    new = attrs.evolve(
        PAYMENT_RELEASE, version="1.1.0", actions=Payment, loss=LossMatrix(entries),
        policy=Policy(rules=tuple(Rule(r.name, r.when, same[r.action])
                                  for r in PAYMENT_RELEASE.policy.rules),
                      default=Payment.RELEASE, default_name="routine-release"),
        fail_closed_action=Payment.ESCALATE,
        hard_constraints=tuple(HardConstraint(h.name, chosen=same[h.chosen],
                                              allowed_references={same[a] for a in
                                                                  h.allowed_references},
                                              description=h.description)
                               for h in PAYMENT_RELEASE.hard_constraints),
    )
    result = diff(PAYMENT_RELEASE, new)
    assert [str(f) for f in result.findings] == [
        'ACTION_ADDED @ $.proposed_action [DECISION, BOTH, BREAKING]: action "FREEZE" added: '
        "the receiver's choice set grew, so receipts sufficient for the old actions may not "
        "be sufficient now (the scout and the pilot), and old receivers cannot read it",
    ]


# ------------------------------------------------------------- further findings


def test_benign_defaults_are_decision_findings() -> None:
    benign = make(state=fields_with(running=(bool, {"if_missing": True})))
    result = diff(BASE, benign)
    assert [(str(f.code), f.json_path, f.breaking) for f in result.findings] == [
        ("DEFAULT_CHANGED", "$.decision_state.running", True)]
    assert "now assumes a benign default instead of failing closed" in result.findings[0].message
    back = diff(benign, BASE).findings[0]
    assert "now fails closed" in back.message
    new_field = make(state=fields_with(pressure=(float, {"minimum": 0.0, "maximum": 9.0,
                                                         "if_missing": 1.0})))
    codes = [(str(f.code), f.json_path) for f in diff(BASE, new_field).findings]
    assert codes == [("FIELD_ADDED_REQUIRED", "$.decision_state.pressure"),
                     ("DEFAULT_CHANGED", "$.decision_state.pressure")]


def test_a_default_keyword_on_a_decision_field_is_unsafe() -> None:
    new = schema_with(lambda s: s["properties"]["decision_state"]["properties"]["running"]
                      .update(default=True))
    (finding,) = ContractDiff.between_schemas(base_schema(), new).findings
    assert (finding.code, finding.category, finding.breaking) == (
        FindingCode.DEFAULT_CHANGED, Category.DECISION, True)
    assert "unsafe benign default" in finding.message


def test_field_description_change_is_a_patch() -> None:
    new = make(state=fields_with(running=(bool, {"description": "Whether it turns."})))
    result = diff(BASE, new)
    assert [(str(f.code), f.json_path) for f in result.findings] == [
        ("DESCRIPTION_CHANGED", "$.decision_state.running")]
    assert result.required_bump == "patch"


def test_hard_constraint_description_only_is_a_patch() -> None:
    new = make(hard_constraints=(attrs.evolve(BLIND, description="Reworded."),))
    (finding,) = diff(BASE, new).findings
    assert (finding.code, finding.direction, finding.breaking) == (
        FindingCode.DESCRIPTION_CHANGED, Direction.NONE, False)


def test_interval_replacing_a_number_is_a_type_change() -> None:
    new = make(state=fields_with(temperature=(Interval, {"minimum": -40.0, "maximum": 200.0})))
    codes = {(str(f.code), f.json_path) for f in diff(BASE, new).findings}
    assert codes == {("FIELD_TYPE_CHANGED", "$.decision_state.temperature")}


def test_interval_bounds_are_diffed_at_each_end() -> None:
    old = make(state=fields_with(temperature=(Interval, {"minimum": -40.0, "maximum": 200.0})))
    new = make(state=fields_with(temperature=(Interval, {"minimum": -40.0, "maximum": 100.0})))
    paths = [f.json_path for f in diff(old, new).findings]
    assert paths == ["$.decision_state.temperature.lo", "$.decision_state.temperature.hi"]


def test_pattern_removed_is_forward_only() -> None:
    new = schema_with(lambda s: s["properties"]["id"].pop("pattern"))
    (finding,) = ContractDiff.between_schemas(base_schema(), new).findings
    assert (finding.code, finding.direction, finding.breaking) == (
        FindingCode.PATTERN_CHANGED, Direction.FORWARD, False)


def test_proof_definition_changes_are_found_through_refs() -> None:
    new = schema_with(lambda s: s["$defs"]["proof"]["properties"]["nonce"].update(maxLength=64))
    paths = sorted(f.json_path for f in ContractDiff.between_schemas(base_schema(), new).findings)
    assert paths == ["$.proof.nonce", "$.proof[*].nonce"]


def test_dialect_change_is_breaking() -> None:
    new = schema_with(lambda s: s.update({"$schema": "http://json-schema.org/draft-07/schema#"}))
    (finding,) = ContractDiff.between_schemas(base_schema(), new).findings
    assert (finding.code, finding.breaking) == (FindingCode.KEYWORD_CHANGED, True)


@pytest.mark.parametrize(
    ("schema", "match"),
    [
        ([], "must be a JSON object"),
        ({"properties": {"a": {"$ref": "#/$defs/missing"}}}, "does not resolve"),
        ({"properties": {"a": {"$ref": "https://example.com/s"}}}, "only local"),
        ({"properties": []}, "'properties' at \\$ must be an object"),
        ({"properties": {"a": {"type": "string", "enum": "ab"}}},
         "'enum' at \\$.a must be an array"),
    ],
)
def test_bad_schemas_are_refused(schema: Any, match: str) -> None:
    old = {"properties": {"a": {"type": "string"}}}
    with pytest.raises(ContractDefinitionError, match=match) as info:
        ContractDiff.between_schemas(old, schema)
    assert info.value.code == "bad-schema"


# ------------------------------------------------------- verdicts and versions


@pytest.mark.parametrize(
    ("new", "bump"),
    [
        (make(version="1.0.1"), "none"),
        (make(description="Reworded."), "patch"),
        (make(max_notes_length=4000), "minor"),
        (make(fail_closed_action=Act.CONTINUE), "major"),
    ],
)
def test_required_bump(new: Contract[Any, Any], bump: str) -> None:
    assert diff(BASE, new).required_bump == bump


@pytest.mark.parametrize(
    ("change", "old_version", "new_version", "code"),
    [
        ({"description": "Reworded."}, "1.0.0", "1.0.1", None),
        ({"description": "Reworded."}, "1.0.0", "1.0.0", "version-bump-too-small"),
        ({"max_notes_length": 4000}, "1.0.0", "1.1.0", None),
        ({"max_notes_length": 4000}, "1.0.0", "1.0.7", "version-bump-too-small"),
        ({"max_notes_length": 4000}, "1.4.2", "2.0.0", None),
        ({"fail_closed_action": Act.CONTINUE}, "1.0.0", "1.9.0", "version-bump-too-small"),
        ({"fail_closed_action": Act.CONTINUE}, "1.0.0", "2.0.0", None),
        ({"fail_closed_action": Act.CONTINUE}, "0.3.0", "0.4.0", None),  # 0.x: minor
        ({"fail_closed_action": Act.CONTINUE}, "0.3.0", "0.3.1", "version-bump-too-small"),
        ({"max_notes_length": 4000}, "0.3.0", "0.3.1", None),
        ({}, "1.2.0", "1.1.0", "version-decreased"),
        ({}, "1.2.0", "1.2.0", None),
    ],
)
def test_check_version_bump(change: dict[str, Any], old_version: str, new_version: str,
                            code: str | None) -> None:
    result = diff(make(version=old_version), make(version=new_version, **change))
    if code is None:
        result.check_version_bump()
        return
    with pytest.raises(VersionBumpError) as info:
        result.check_version_bump()
    error = info.value
    assert (error.code, error.json_path) == (code, "$.version")
    assert (error.old_version, error.new_version) == (old_version, new_version)
    assert isinstance(error, HandoffsError)
    assert isinstance(error, ValueError)


def test_version_bump_error_explains_itself() -> None:
    result = diff(BASE, make(version="1.1.0", fail_closed_action=Act.CONTINUE))
    with pytest.raises(VersionBumpError) as info:
        result.check_version_bump()
    assert str(info.value) == (
        "1.0.0 → 1.1.0 is a minor bump but the changes need a major bump (1 finding; "
        "first: DEFAULT_CHANGED @ $.fail_closed_action) @ $.version")
    assert (info.value.required, info.value.actual) == ("major", "minor")


def test_renamed_contracts_have_no_version_relation() -> None:
    with pytest.raises(VersionBumpError, match="different contracts") as info:
        diff(BASE, make(name="pump-check", version="2.0.0")).check_version_bump()
    assert info.value.code == "contract-renamed"


def test_schema_labels_without_a_version_cannot_be_checked() -> None:
    result = ContractDiff("custom-schema", "custom-schema", ())
    with pytest.raises(VersionBumpError) as info:
        result.check_version_bump()
    assert info.value.code == "no-version"


# ----------------------------------------------------------- schema files


def test_checked_in_schema_file_diffs_against_a_new_version() -> None:
    checked_in = json.loads((SCHEMAS / "payment-release" / "1.0.0.json").read_text("utf-8"))
    assert ContractDiff.between_schemas(checked_in, PAYMENT_RELEASE.json_schema()).findings == ()
    longer_notes = attrs.evolve(PAYMENT_RELEASE, version="1.1.0", max_notes_length=4000)
    result = ContractDiff.between_schemas(checked_in, longer_notes.json_schema())
    assert (result.old, result.new) == ("payment-release/1.0.0", "payment-release/1.1.0")
    assert [str(f) for f in result.findings] == [
        "FIELD_BOUNDS_WIDENED @ $.notes [WIRE, FORWARD, minor]: maxLength 2000 → 4000: old "
        "receivers reject values outside the old bounds"]
    result.check_version_bump()


def test_schema_labels_fall_back_to_the_id() -> None:
    schema = base_schema()
    del schema["properties"]["contract"]
    assert ContractDiff.between_schemas(schema, schema).old == "pump-diff/1.0.0"
    assert ContractDiff.between_schemas({"$id": "urn:x"}, {}).old == "urn:x"
    assert ContractDiff.between_schemas({}, {}).new == "?"


# ---------------------------------------------------------------- reports


def test_to_json_report() -> None:
    result = diff(BASE, make(version="2.0.0", fail_closed_action=Act.CONTINUE,
                             description="Reworded."))
    report = result.to_json()
    assert report["old"] == "pump-diff/1.0.0"
    assert report["new"] == "pump-diff/2.0.0"
    assert (report["breaking"], report["required_bump"]) == (True, "major")
    assert [f["code"] for f in report["findings"]] == ["DEFAULT_CHANGED", "DESCRIPTION_CHANGED"]
    assert report["findings"][0] == {
        "code": "DEFAULT_CHANGED", "json_path": "$.fail_closed_action", "direction": "BOTH",
        "breaking": True, "category": "DECISION",
        "message": "fail_closed_action changed from 'STOP' to 'CONTINUE'",
    }
    json.dumps(report)


def test_to_markdown_report() -> None:
    result = diff(BASE, make(version="2.0.0", counterfactual_trigger="a | b"))
    text = result.to_markdown()
    assert text.startswith("# Contract diff: `pump-diff/1.0.0` → "
                           "`pump-diff/2.0.0`\n\n**Breaking: yes** · required bump: "
                           "**major** · 1 finding\n")
    assert "| `COUNTERFACTUAL_TRIGGER_CHANGED` | `$.counterfactual_trigger` | DECISION | BOTH " \
           "| yes |" in text
    assert "'a \\| b'" in text
    assert diff(BASE, BASE).to_markdown().endswith("No differences.\n")


def test_findings_are_frozen_and_breaking_first() -> None:
    result = diff(BASE, make(description="Reworded.", fail_closed_action=Act.CONTINUE))
    assert [f.breaking for f in result.findings] == [True, False]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        result.findings[0].breaking = False  # type: ignore[misc]
    finding = Finding(FindingCode.LOSS_CHANGED, "$.loss", Direction.BOTH, True,
                      Category.DECISION, "changed")
    assert finding.bump == "major"
    assert FindingCode.LOSS_CHANGED == "LOSS_CHANGED"
