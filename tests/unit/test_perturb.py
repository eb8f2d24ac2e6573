"""Perturbations: generic over any contract, each checked on hand-made messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from jsonschema import Draft202012Validator

from handoffs.contracts.policy import Is, Policy
from handoffs.examples.payment import PAYMENT_RELEASE
from handoffs.lab import ExperimentError
from handoffs.lab._minimal import Reference
from handoffs.lab.perturbations import (
    ActionAdded,
    CaseContext,
    Falsehood,
    LossChanged,
    Perturbation,
    Relay,
    RemoveDecisionField,
    RemoveGovernanceField,
    declare_perturbation,
    select_perturbations,
    standard_perturbations,
)
from handoffs.lab.perturbations._base import NOT_APPLICABLE, REMOVED, UNCHANGED, Scoring
from handoffs.lab.perturbations._boundary import AuthoritativeSender, PolicyVersionChanged
from handoffs.lab.perturbations._coarsening import (
    MergeEnumValues,
    RoundNumeric,
    ShortenEvidenceRefs,
    WidenInterval,
)
from handoffs.lab.perturbations._controls import ConstantMessage, NoMessage, ShuffledMessage
from handoffs.lab.perturbations._falsehood import Mutate
from handoffs.lab.perturbations._registry import perturbation_from_json
from worlds.gauge import GAUGE, MESSAGE, TRUTH, Act, Level, ctx, variants


def test_remove_decision_field() -> None:
    [v] = variants(RemoveDecisionField("count"))
    assert "count" not in v.message["decision_state"]
    assert v.message["decision_state"]["level"] == "LOW"
    assert "count" in MESSAGE["decision_state"]  # the input is not modified
    assert variants(RemoveDecisionField("count"), {"no": "state"}) == []


def test_remove_governance_field() -> None:
    [v] = variants(RemoveGovernanceField("sender"))
    assert "sender" not in v.message
    assert variants(RemoveGovernanceField("absent")) == []


def test_merge_enum_values() -> None:
    merge = MergeEnumValues(target="decision_state.level", values=("LOW",), into="MID")
    [v] = variants(merge)
    assert v.message["decision_state"]["level"] == "MID"
    launder = MergeEnumValues(target="uncertainty", values=("CONFLICT",), into="RESOLVED")
    [v] = variants(launder)
    assert v.message["uncertainty"] == "RESOLVED"
    untouched = MergeEnumValues(target="uncertainty", values=("MISSING",), into="RESOLVED")
    [v] = variants(untouched)
    assert v.message is MESSAGE
    assert merge.id == "merge-enum-values:decision_state.level:LOW->MID"


def test_round_and_widen() -> None:
    [v] = variants(RoundNumeric("count", 5))
    assert v.message["decision_state"]["count"] == 5
    [v] = variants(RoundNumeric("ratio", 0.2))
    assert v.message["decision_state"]["ratio"] == pytest.approx(0.2)
    [v] = variants(WidenInterval("band", 4.0))
    assert v.message["decision_state"]["band"] == {"lo": 0.0, "hi": 4.0}  # clamped at 0
    with pytest.raises(ExperimentError, match="not a numeric field"):
        RoundNumeric("level", 1).prepare(GAUGE, seed=0)
    with pytest.raises(ExperimentError, match="> 0"):
        RoundNumeric("count", 0)


def test_shorten_evidence_refs() -> None:
    [v] = variants(ShortenEvidenceRefs(keep=1))
    assert v.message["evidence_refs"] == ["evidence://a/1/x"]
    [v] = variants(ShortenEvidenceRefs(depth=1))
    assert v.message["evidence_refs"] == ["evidence://a", "evidence://a"]
    pinned = {**MESSAGE, "evidence_refs": [{"uri": "evidence://a/1/x", "digest": "sha256:0"}]}
    [v] = variants(ShortenEvidenceRefs(depth=2), pinned)
    assert v.message["evidence_refs"] == ["evidence://a/1"]
    with pytest.raises(ExperimentError):
        ShortenEvidenceRefs()
    with pytest.raises(ExperimentError):
        ShortenEvidenceRefs(keep=0)


def test_mutate_generates_schema_valid_falsehoods_only() -> None:
    mutate = Mutate().prepare(GAUGE, seed=0)
    assert isinstance(mutate, Mutate)
    assert mutate.schema_rejected == 0
    schema = GAUGE.json_schema()
    full = Draft202012Validator(schema)
    found = list(mutate.variants(MESSAGE, ctx(), "s"))
    labels = [v.label for v in found]
    assert len(labels) == len(set(labels))
    reference = Reference(GAUGE)
    for variant in found:
        field, truth, value = variant.falsehood
        assert value != truth
        assert full.is_valid(variant.message), variant.label
        if field in GAUGE.field_map:
            assert variant.message["decision_state"][field] == value
    levels = [v.falsehood[2] for v in found if v.falsehood[0] == "level"]
    assert sorted(levels) == ["HIGH", "MID"]  # the finite complement, enumerated
    assert [v.falsehood[2] for v in found if v.falsehood[0] == "armed"] == [True]
    counts = [v.falsehood[2] for v in found if v.falsehood[0] == "count"]
    assert {20, 21} <= set(counts)  # both sides of the threshold
    high = next(v for v in found if v.label == 'level="HIGH"')
    assert high.falsified == "STOP" != reference(TRUTH)
    proposals = [v for v in found if v.falsehood[0] == "proposed_action"]
    assert [v.falsehood[2] for v in proposals] == ["STOP"]
    assert proposals[0].falsified == reference(TRUTH)  # no effect on the reference


def test_mutate_is_deterministic() -> None:
    a = [v.label for v in Mutate().prepare(GAUGE, seed=3).variants(MESSAGE, ctx(), "s")]
    b = [v.label for v in Mutate().prepare(GAUGE, seed=3).variants(MESSAGE, ctx(), "s")]
    assert a == b


def test_falsehood_injection() -> None:
    inject = Falsehood(case_id="case-1", field="armed", value=True)
    [v] = variants(inject)
    assert v.message["decision_state"]["armed"] is True
    assert v.falsified == "STOP"
    assert variants(inject, case_id="case-2") == []
    with pytest.raises(ExperimentError, match="schema-valid"):
        Falsehood(case_id="c", field="count", value=99).prepare(GAUGE, seed=0)
    with pytest.raises(ExperimentError, match="not a decision field"):
        Falsehood(case_id="c", field="nope", value=1).prepare(GAUGE, seed=0)


def test_controls() -> None:
    assert variants(NoMessage())[0].message == {}
    assert variants(ShuffledMessage())[0].message == {"other": "s"}
    assert variants(ConstantMessage())[0].message == {"constant": "s"}
    assert variants(ShuffledMessage(), neighbour=lambda s: None) == []


def test_action_added() -> None:
    added = ActionAdded(action="HOLD", when=Is("armed", False), before="armed",
                        loss={("GO", "HOLD"): 7}, default_loss=3)
    [v] = variants(added)
    assert v.reference == "HOLD"
    assert v.message is MESSAGE
    scoring = added.scoring(Scoring.of(GAUGE))
    assert scoring.regret("GO", "HOLD") == 7
    assert scoring.regret("STOP", "HOLD") == 3
    assert scoring.regret("HOLD", "HOLD") == 0
    with pytest.raises(ExperimentError, match="already an action"):
        ActionAdded(action="GO", when=Is("armed", True)).prepare(GAUGE, seed=0)
    with pytest.raises(ExperimentError, match="no rule named"):
        ActionAdded(action="X", when=Is("armed", True), before="nope").prepare(GAUGE, seed=0)


def test_loss_changed_only_rescores() -> None:
    changed = LossChanged(name="costly", entries={("STOP", "GO"): 9})
    [v] = variants(changed)
    assert v.message is MESSAGE
    assert changed.scoring(Scoring.of(GAUGE)).regret("STOP", "GO") == 9


def test_policy_version_and_authority() -> None:
    [v] = variants(PolicyVersionChanged())
    assert v.message["policy_version"] == "G-1-superseded"
    [v] = variants(PolicyVersionChanged("G-2", policy=Policy(rules=(), default=Act.STOP)))
    assert (v.message["policy_version"], v.reference) == ("G-2", "STOP")
    [v] = variants(AuthoritativeSender())
    assert v.message["authority"] == "DECIDE"


def test_relay_reencodes_at_each_hop() -> None:
    [v] = variants(Relay(hops=3))
    assert v.message["sender"] == "relay-3"
    assert v.message["id"] != MESSAGE["id"]
    assert v.message["id"].startswith("urn:uuid:")
    assert v.message["decision_state"] == MESSAGE["decision_state"]
    [again] = variants(Relay(hops=3))
    assert again.message == v.message  # deterministic
    [lossy] = variants(Relay(hops=2, drop=("decision_state",), soften_uncertainty=True))
    assert "decision_state" not in lossy.message
    assert lossy.message["uncertainty"] == "RESOLVED"
    [points] = variants(Relay(hops=1, collapse_intervals=True))
    assert points.message["decision_state"]["band"] == {"lo": 1.5, "hi": 1.5}
    with pytest.raises(ExperimentError):
        Relay(hops=0)
    with pytest.raises(ExperimentError, match="positive integer, got True"):
        Relay(hops=True)


def test_standard_set_is_generated_from_the_contract() -> None:
    ids = [p.id for p in standard_perturbations(GAUGE)]
    assert len(ids) == len(set(ids))
    for name in ("level", "count", "ratio", "band", "armed"):
        assert f"remove-decision-field:{name}" in ids
    assert "merge-enum-values:decision_state.level:MID->LOW" in ids
    assert "merge-enum-values:decision_state.level:HIGH->MID" in ids
    assert "round-numeric:count:5" in ids
    assert "round-numeric:ratio:0.1" in ids
    assert "widen-interval:band:1" in ids
    assert {"mutate", "no-message", "shuffled-message", "constant-message",
            "authoritative-sender", "relay:2"} <= set(ids)
    payment = [p.id for p in standard_perturbations(PAYMENT_RELEASE)]
    assert not any(i.startswith(("round-numeric", "widen-interval")) for i in payment)


def test_select_and_from_json() -> None:
    chosen = select_perturbations(GAUGE, include=("remove-*",), exclude=("*:armed",))
    assert all(p.id.startswith("remove-") and not p.id.endswith(":armed") for p in chosen)
    added = perturbation_from_json({"kind": "action-added", "action": "HOLD",
                                    "when": {"field": "level", "is": "HIGH"}}, contract=GAUGE)
    assert isinstance(added, ActionAdded)
    assert added.when == Is("level", Level.HIGH)
    loss = perturbation_from_json({"kind": "loss-changed", "name": "x", "entries": [
        {"chosen": "GO", "reference": "STOP", "loss": 99}]}, contract=GAUGE)
    assert isinstance(loss, LossChanged)
    assert loss.entries == {("GO", "STOP"): 99.0}
    relay = perturbation_from_json({"kind": "relay", "hops": 3}, contract=GAUGE)
    assert relay.id == "relay:3"
    with pytest.raises(ExperimentError, match="unknown perturbation kind"):
        perturbation_from_json({"kind": "teleport"}, contract=GAUGE)
    with pytest.raises(ExperimentError, match="relay"):
        perturbation_from_json({"kind": "relay", "hopz": 3}, contract=GAUGE)


def _shape(variants_: list[Any], message: dict[str, Any]) -> list[Any]:
    out = []
    for v in variants_:
        if v.patch is not None:
            assert v.base is message
            out.append(("patch", v.patch, v.label, v.reference, v.falsehood, v.falsified))
        else:
            assert v.message is message
            out.append(("same", v.label, v.reference, v.falsehood, v.falsified))
    return out


@pytest.mark.parametrize("perturbation", [
    p for p in standard_perturbations(GAUGE) if p.prepare(GAUGE, seed=0).reads is not None
] + [PolicyVersionChanged("G-2"), AuthoritativeSender()], ids=lambda p: p.id)
def test_declared_reads_are_all_the_variants_depend_on(perturbation: Any) -> None:
    prepared = perturbation.prepare(GAUGE, seed=0)
    declared = prepared.reads | prepared.presence
    for message in (MESSAGE, {**MESSAGE, "authority": "DECIDE"},
                    {k: v for k, v in MESSAGE.items() if k != "decision_state"}):
        # Another message that agrees on the declared members only.
        twin = {k: f"other-{k}" for k in MESSAGE if k not in declared}
        twin["extra"] = "member"
        twin.update({k: v for k, v in message.items() if k in declared})
        one = list(prepared.variants(message, ctx(), "s"))
        two = list(prepared.variants(twin, ctx(case_id="other", index=7), "t"))
        assert [s[1:] for s in _shape(one, message)] == [s[1:] for s in _shape(two, twin)]
        for v in one:
            if v.patch is not None:  # the patch builds exactly the message it describes
                member, value = v.patch
                built = dict(message)
                if value is REMOVED:
                    del built[member]
                else:
                    built[member] = value
                assert v.message == built


# --------------------------------------------------- the declarative form itself

SHIPPED = json.loads((Path(__file__).parents[1] / "vectors" / "perturbations-shipped.json")
                     .read_text(encoding="utf-8"))


def _described(p: Perturbation) -> dict[str, Any]:
    return {"json": p.to_json(), "reads": None if p.reads is None else sorted(p.reads),
            "presence": sorted(p.presence)}


def test_shipped_perturbations_describe_themselves_as_the_hand_written_classes_did() -> None:
    from handoffs.examples.payment_lab import payment_perturbations

    assert [_described(p) for p in standard_perturbations(GAUGE, hops=3)] == SHIPPED["gauge"]
    assert [_described(p) for p in payment_perturbations("full")] == SHIPPED["payment"]


@declare_perturbation(kind="coarsening", subject=True, id="cap:{field}:{limit:g}",
                      target="{field}", member="decision_state.{field}",
                      description="Send {field} as at most {limit:g}.")
@attrs.frozen
class Cap(Perturbation):
    field: str
    limit: float
    strategies: tuple[str, ...] | None = None

    def change(self, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return NOT_APPLICABLE
        return UNCHANGED if value <= self.limit else self.limit


@declare_perturbation(kind="ablation", id="drop:{member}", target="{member}",
                      member="{member}", reads=(), presence=("{member}",),
                      description="Drop {member}.")
@attrs.frozen
class Drop(Perturbation):
    member: str

    def change(self, value: Any) -> Any:
        return REMOVED


def test_a_declared_perturbation_describes_itself_from_its_templates() -> None:
    cap = Cap("count", 2.5)
    assert (cap.id, cap.kind, cap.target, cap.description) == (
        "cap:count:2.5", "coarsening", "count", "Send count as at most 2.5.")
    assert cap.applies_to == ("@subject",)
    assert Cap("count", 1, ("x",)).applies_to == ("x",)
    assert (cap.reads, cap.presence) == ({"decision_state"}, frozenset())
    drop = Drop("sender")
    assert (drop.applies_to, drop.reads, drop.presence) == (None, frozenset(), {"sender"})
    assert drop.to_json() == {"id": "drop:sender", "kind": "ablation", "target": "sender",
                              "description": "Drop sender.", "strategies": None}


def test_the_generic_engine_patches_the_declared_member() -> None:
    [patched] = variants(Cap("count", 2))
    assert patched.patch == ("decision_state", {**MESSAGE["decision_state"], "count": 2})
    assert patched.message["decision_state"]["count"] == 2
    [same] = variants(Cap("count", 10))  # UNCHANGED: the message itself, no patch
    assert same.message is MESSAGE
    assert same.patch is None
    assert variants(Cap("armed", 0)) == []  # NOT_APPLICABLE (a boolean)
    assert variants(Cap("count", 1), {"no": "state"}) == []  # the member is absent
    [removed] = variants(Drop("sender"))
    assert removed.patch == ("sender", REMOVED)
    assert "sender" not in removed.message
    assert variants(Drop("absent")) == []


def test_a_bad_declaration_is_refused_when_the_class_is_made() -> None:
    with pytest.raises(ExperimentError, match="unknown perturbation kind 'twist'"):
        declare_perturbation(kind="twist", id="t", description="t")
    declare = declare_perturbation(kind="ablation", id="x:{nope}", description="x")
    with pytest.raises(ExperimentError, match=r"names \{nope\}, which is no attribute"):
        declare(attrs.frozen(type("X", (Perturbation,), {"__annotations__": {"a": "int"}})))
    plain = declare_perturbation(kind="ablation", id="x", description="x")
    with pytest.raises(ExperimentError, match="attrs subclass of Perturbation"):
        plain(type("NotAttrs", (Perturbation,), {}))
    with pytest.raises(ExperimentError, match="attrs subclass of Perturbation"):
        plain(attrs.frozen(type("NotAPerturbation", (), {})))
    broken = declare_perturbation(kind="ablation", id="x:{oops", description="x")
    with pytest.raises(ExperimentError, match="bad template"):
        broken(attrs.frozen(type("Y", (Perturbation,), {})))


def test_an_undeclared_subclass_still_writes_its_own_properties() -> None:
    @attrs.frozen
    class Blank(Perturbation):
        kind = "control"

        @property
        def id(self) -> str:
            return "blank"

        @property
        def description(self) -> str:
            return "Send a blank."

        def variants(self, message: Any, ctx: CaseContext, strategy: str) -> Any:
            yield from ()

    assert Blank().to_json() == {"id": "blank", "kind": "control", "target": None,
                                 "description": "Send a blank.", "strategies": None}
    assert (Blank().reads, Blank().presence) == (None, frozenset())

    @attrs.frozen
    class Unwritten(Perturbation):
        pass

    with pytest.raises(NotImplementedError, match="not declared"):
        _ = Unwritten().id
    with pytest.raises(NotImplementedError):
        list(Unwritten().variants(MESSAGE, ctx(), "s"))
