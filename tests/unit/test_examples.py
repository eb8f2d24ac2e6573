"""The worked examples (issue 5): each conclusion, with the numbers from the lab's report.

Sources: the decision-sufficiency essay, Part II (the scout and the pilot; the pump
under two losses), Part III (baselines that can falsify the architecture) and Part IV
(temporal and multi-hop sufficiency). The examples live in ``examples/`` and are
imported from the repository root; every ``python examples/<name>.py`` and every
``examples/<name>.toml`` is run once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from handoffs.cli._lab import lab
from handoffs.contracts import Interval, Receipt
from handoffs.contracts._diff import FindingCode
from handoffs.lab import run
from handoffs.receivers import Step, Verdict

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ("scout", "pump", "relay", "baselines")


@pytest.fixture(scope="module")
def ex() -> Iterator[SimpleNamespace]:
    """The example modules, imported from the repository root."""
    import importlib

    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(ROOT))
        modules: dict[str, ModuleType] = {
            name: importlib.import_module(f"examples.{name}") for name in EXAMPLES}
        yield SimpleNamespace(**modules)


def row(report: dict[str, Any], strategy: str, perturbation: str = "none") -> dict[str, Any]:
    found = [r for r in report["results"]
             if r["strategy"] == strategy and r["perturbation"] == perturbation]
    assert len(found) == 1, (strategy, perturbation)
    return found[0]


def region(report: dict[str, Any], action: str) -> dict[str, Any]:
    (found,) = [r for r in report["minimal_messages"]["regions"] if r["action"] == action]
    return found


# ---------------------------------------------------------------- the scout and the pilot


@pytest.fixture(scope="module")
def scout(ex: SimpleNamespace) -> SimpleNamespace:
    return SimpleNamespace(v1=run(ex.scout.scout_v1_experiment()).report,
                           v2=run(ex.scout.scout_v2_experiment()).report)


def test_scout_one_bit_is_sufficient_only_when_the_scout_may_decide(
        scout: SimpleNamespace) -> None:
    v1 = scout.v1
    assert v1["experiment"]["cases"] == 32
    authorised = row(v1, "one_bit_authorised")
    assert (authorised["agreement"], authorised["hard_violations"]) == (1.0, 0)
    verified = row(v1, "one_bit_verified")  # the pilot refuses a bare verdict
    assert verified["agreement"] == 0.75
    assert verified["hard_violations"] == 8
    assert verified["verdicts"]["ESCALATE"] == 32
    receipt = row(v1, "decision_receipt")
    assert (receipt["agreement"], receipt["hard_violations"]) == (1.0, 0)
    assert v1["gate"]["passed"]


def test_scout_v1_never_needs_visibility(scout: SimpleNamespace) -> None:
    minimal = scout.v1["minimal_messages"]
    assert minimal["fields_ever_needed"] == ["blocked", "confidence"]
    assert minimal["fields_never_needed"] == ["visibility"]
    removed = row(scout.v1, "decision_receipt", "remove-decision-field:visibility")
    assert removed["semantic_agreement"] == 1.0
    assert removed["semantic_hard_violations"] == 0


def test_scout_v1_lab_predicts_the_new_action(scout: SimpleNamespace) -> None:
    land = row(scout.v1, "one_bit_authorised", "action-added:LAND")
    assert land["agreement"] == 0.5
    # 1.0.0's constraint allows LEFT only for the reference LEFT: it says nothing of
    # LAND, a finding about the constraint, not a hard violation (issue #31)
    assert land["hard_violations"] == 0
    assert land["unstated_constraints"] == [{
        "constraint": "left-into-confirmed-obstacle", "chosen": "LEFT",
        "added_action": "LAND", "decisions": 12}]
    stop = row(scout.v1, "one_bit_authorised", "action-added:STOP")
    assert stop["agreement"] < 1


def test_scout_v2_old_message_is_insufficient(scout: SimpleNamespace) -> None:
    old = row(scout.v2, "one_bit_authorised")
    assert old["agreement"] == 0.25
    assert old["mean_regret"] == 47.5
    assert old["hard_violations"] == 16
    # Every low-visibility survey: the old turn where the pilot should land.
    assert old["hard_violations_by_constraint"] == {"left-into-hazard": 12,
                                                    "right-into-hazard": 4}
    receipt = row(scout.v2, "decision_receipt")
    assert (receipt["agreement"], receipt["mean_regret"], receipt["hard_violations"]) == (
        1.0, 0.0, 0)
    assert scout.v2["gate"]["passed"]


def test_scout_v2_minimal_message_adds_visibility(scout: SimpleNamespace) -> None:
    minimal = scout.v2["minimal_messages"]
    assert minimal["fields_ever_needed"] == ["blocked", "confidence", "visibility"]
    land = region(scout.v2, "LAND")
    assert land["message"] == [{"field": "visibility", "representation": "exact",
                                "value": "LOW"}]
    assert land["cases"] == 16
    removed = row(scout.v2, "decision_receipt", "remove-decision-field:visibility")
    assert removed["semantic_agreement"] == 0.5
    assert removed["semantic_hard_violations"] == 8


def test_scout_diff_flags_the_wider_action_set_as_breaking(ex: SimpleNamespace) -> None:
    changes = ex.scout.contract_diff()
    assert changes.breaking
    assert changes.required_bump == "major"
    added = [f for f in changes.findings if f.code is FindingCode.ACTION_ADDED]
    assert len(added) == 2
    assert all(f.breaking for f in added)
    assert [f.json_path for f in added] == ["$.proposed_action", "$.proposed_action"]
    assert {a.value for a in ex.scout.Manoeuvre} - {a.value for a in ex.scout.Turn} == {
        "STOP", "LAND"}
    changes.check_version_bump()  # 1.0.0 -> 2.0.0 is the major bump it needs


def test_scout_observation_time_is_checked(ex: SimpleNamespace) -> None:
    """A verifying pilot needs a fresh observation: 30 minutes old is too old."""
    import attrs

    from handoffs.receivers import StrictContractReceiver

    s = ex.scout
    old = attrs.evolve(next(s.surveys()), observed_at=s.DECISION_TIME.replace(hour=11,
                                                                             minute=30))
    receipt = Receipt.build(s.SCOUT_V1, s.receipt_encoder_v1().encode(old),
                            s.GOVERNANCE.stamp(case_id=old.case_id,
                                               evidence_refs=old.evidence_refs))
    gate = s.pilot_gate(s.SCOUT_V1, evidence=s.evidence_store(iter([old])))
    decision = StrictContractReceiver(gate).receive(receipt.to_json())
    assert decision.verdict is Verdict.ESCALATE
    assert decision.step is Step.CONTEXT
    assert [r.code for r in decision.reasons] == ["evidence-stale"]


# --------------------------------------------------------------------------- the pump


@pytest.fixture(scope="module")
def pump(ex: SimpleNamespace) -> SimpleNamespace:
    return SimpleNamespace(h10=run(ex.pump.pump_experiment(10)).report,
                           h40=run(ex.pump.pump_experiment(40)).report,
                           bare=run(ex.pump.uncalibrated_experiment(40)).report)


def test_pump_thresholds(ex: SimpleNamespace) -> None:
    assert ex.pump.PUMP_H10.policy.thresholds() == (("failure_probability", 0.2),)
    assert ex.pump.PUMP_H40.policy.thresholds() == (("failure_probability", 0.05),)


def test_pump_coarse_message_sufficient_at_h10(ex: SimpleNamespace,
                                               pump: SimpleNamespace) -> None:
    coarse = row(pump.h10, "coarse")
    assert (coarse["agreement"], coarse["mean_regret"], coarse["hard_violations"]) == (
        1.0, 0.0, 0)
    assert coarse["verdicts"]["ACCEPT"] == 8
    partition = ex.pump.message_partition(ex.pump.pump_experiment(10), "coarse",
                                          members=("decision_state",))
    assert partition.refines
    assert len(partition.cells) == 1


def test_pump_coarse_message_collapses_at_h40(ex: SimpleNamespace,
                                              pump: SimpleNamespace) -> None:
    coarse = row(pump.h40, "coarse")
    assert coarse["agreement"] == 0.5
    assert coarse["mean_regret"] == 1.0
    assert coarse["verdicts"]["ESCALATE"] == 8  # the interval straddles 0.05: fail closed
    assert coarse["semantic_determined_rate"] == 0.0
    partition = ex.pump.message_partition(ex.pump.pump_experiment(40), "coarse",
                                          members=("decision_state",))
    (cell,) = partition.collapsed
    assert cell.message == {"decision_state": {"failure_probability": {"lo": 0.0,
                                                                       "hi": 0.1}}}
    assert "estimate-0.03" in cell.cases_for("CONTINUE")
    assert "estimate-0.08" in cell.cases_for("STOP")


def test_pump_certified_interval_is_sufficient(ex: SimpleNamespace,
                                               pump: SimpleNamespace) -> None:
    for report in (pump.h10, pump.h40):
        interval = row(report, "certified_interval")
        assert (interval["agreement"], interval["hard_violations"]) == (1.0, 0)
    assert pump.h40["gate"]["passed"]
    # At h = 10 every estimate here needs CONTINUE: a constant or shuffled message does as
    # well, and the release gate reports that the channel does no work.
    failed = [c["perturbation"] for c in pump.h10["gate"]["checks"] if not c["passed"]]
    assert failed == ["shuffled-message", "constant-message"]
    case = next(c for c in ex.pump.estimates() if c.estimate == 0.03)
    assert (case.lo, case.hi) == (0.01, 0.04)
    decision = ex.pump.decide_one(case, ex.pump.certified_encoder(40))
    assert (decision.verdict, decision.action) == (Verdict.ACCEPT, "CONTINUE")


def test_pump_bare_point_fails_the_calibration_dependency(ex: SimpleNamespace,
                                                          pump: SimpleNamespace) -> None:
    import attrs

    bare = next(c for c in ex.pump.uncalibrated_estimates() if c.estimate == 0.04)
    decision = ex.pump.decide_one(bare, ex.pump.point_encoder(40))
    assert (decision.verdict, decision.action, decision.step) == (
        Verdict.ESCALATE, "STOP", Step.CONTEXT)
    assert [r.code for r in decision.reasons] == ["evidence-missing"]
    backed = ex.pump.decide_one(attrs.evolve(bare, calibrated=True), ex.pump.point_encoder(40))
    assert (backed.verdict, backed.action) == (Verdict.ACCEPT, "CONTINUE")
    points = row(pump.bare, "point_estimate")
    assert points["verdicts"] == {"ACCEPT": 0, "ESCALATE": 8, "REJECT": 0}
    assert points["agreement"] == 0.5


def test_pump_minimal_interval_does_not_straddle(ex: SimpleNamespace,
                                                 pump: SimpleNamespace) -> None:
    for report, contract, threshold in ((pump.h10, ex.pump.PUMP_H10, 0.2),
                                        (pump.h40, ex.pump.PUMP_H40, 0.05)):
        (item,) = region(report, "CONTINUE")["message"]
        assert item["interval"] == {"lo": 0.0, "hi": threshold}  # the coarsest, up to it
        bounds = Interval(item["interval"]["lo"], item["interval"]["hi"])
        assert ex.pump.determines(contract, bounds)


def test_pump_minimal_stop_interval_does_not_straddle(ex: SimpleNamespace,
                                                      pump: SimpleNamespace) -> None:
    (item,) = region(pump.h40, "STOP")["message"]
    bounds = Interval(item["interval"]["lo"], item["interval"]["hi"])
    assert ex.pump.determines(ex.pump.PUMP_H40, bounds)


# --------------------------------------------------------------------------- the relay


@pytest.fixture(scope="module")
def relay(ex: SimpleNamespace) -> SimpleNamespace:
    r = ex.relay
    return SimpleNamespace(ab=run(r.edge_ab_experiment()).report,
                           bc=run(r.edge_bc_experiment()).report,
                           e2e=run(r.end_to_end_experiment()).report,
                           lab=run(r.relay_experiment()).report)


def test_relay_each_edge_passes_its_local_test(relay: SimpleNamespace) -> None:
    ab = row(relay.ab, "a_to_b")
    assert (ab["agreement"], ab["hard_violations"]) == (1.0, 0)
    assert relay.ab["minimal_messages"]["fields_never_needed"] == ["sources"]  # not B's
    bc = row(relay.bc, "b_to_c")
    assert (bc["agreement"], bc["hard_violations"]) == (1.0, 0)
    assert relay.ab["gate"]["passed"]
    assert relay.bc["gate"]["passed"]


def test_relay_end_to_end_fails(relay: SimpleNamespace) -> None:
    end = row(relay.e2e, "b_to_c")
    assert end["agreement"] == 20 / 24
    assert end["hard_violations"] == 4
    assert end["hard_violations_by_constraint"] == {"unsafe-continue": 4}
    assert not relay.e2e["gate"]["passed"]


def test_relay_prose_softens_conflict_and_collapses_interval(ex: SimpleNamespace,
                                                             relay: SimpleNamespace) -> None:
    r = ex.relay
    conflict = next(c for c in r.analyses() if c.sources is r.SourceAgreement.CONFLICT)
    text = r.summarise(conflict.analysis_state())
    read = r.read_summary(text)
    assert read.sources is r.SourceAgreement.PREFER_LOWER
    assert read.failure_probability == Interval.point(0.03)
    prose = row(relay.lab, "prose_relay")
    assert prose["agreement"] == 16 / 24
    assert prose["hard_violations"] == 8


def test_relay_perturbations_catch_it_on_the_stable_receipt(relay: SimpleNamespace) -> None:
    stable = row(relay.lab, "stable_receipt")
    assert (stable["agreement"], stable["hard_violations"]) == (1.0, 0)
    collapsed = row(relay.lab, "stable_receipt", "relay:2:soften:collapse")
    assert collapsed["hard_violations"] == 4  # the straddling interval became a point
    softened = row(relay.lab, "stable_receipt",
                   "merge-enum-values:decision_state.sources:CONFLICT->PREFER_LOWER")
    assert softened["hard_violations"] == 4  # the conflict became a preference


def test_relay_stable_receipt_through_signed_hops_passes(relay: SimpleNamespace) -> None:
    carried = row(relay.lab, "signed_carrier")
    assert (carried["agreement"], carried["hard_violations"]) == (1.0, 0)
    assert carried["verdicts"]["REJECT"] == 0
    refused = row(relay.lab, "signed_prose_carrier")
    assert refused["verdicts"] == {"ACCEPT": 0, "ESCALATE": 0, "REJECT": 24}
    assert refused["hard_violations"] == 0
    assert relay.lab["gate"]["passed"]


def test_relay_identity_composition_catches_the_re_encoding(ex: SimpleNamespace) -> None:
    r = ex.relay
    case = next(c for c in r.analyses() if c.sources is r.SourceAgreement.CONFLICT)
    decision = r.carrier().receive(r.SignedCarrierEncoder(prose=True).encode(case))
    assert decision.verdict is Verdict.REJECT
    assert {x.code for x in decision.reasons} == {"receipt-unattributed",
                                                  "receipt-not-carried"}
    assert [x.code for x in r.widened_authority().reasons] == ["authority-widened"]


@pytest.mark.parametrize("prose", [False, True])
def test_relay_signed_messages_reproduce_byte_for_byte(ex: SimpleNamespace,
                                                       prose: bool) -> None:
    """Fixed keys and ids: the carriers' bytes, and so the report's message sizes,
    are the same on every run (a fresh proof or grant id would change the signature,
    and base58 of a signature varies in length).
    """
    r = ex.relay
    encoder = r.SignedCarrierEncoder(prose=prose)
    for case in list(r.analyses())[:3]:
        assert json.dumps(encoder.encode(case)) == json.dumps(encoder.encode(case))


def test_relay_planner_cannot_pose_as_the_originator(ex: SimpleNamespace) -> None:
    """B starting its own chain: the binding holds, but B has no grant to author it."""
    from datetime import timedelta

    from handoffs.receivers import CarriedReceiptReceiver, carry
    from handoffs.receivers.chains import HandoffChain

    r = ex.relay
    case = next(c for c in r.analyses() if c.sources is r.SourceAgreement.CONFLICT)
    own = r._signed_receipt(case, r.ProseRelayEncoder().encode(case), sender=r.PLANNER,
                            key=r.PARTIES.planner, granted=False)
    chain = HandoffChain.start(case_id=case.case_id).add_hop(
        r.PARTIES.planner, sender=r.PLANNER,
        role="investigator", receiver=r.CONTROLLER, authority="ADVISE",
        valid_until=r.DECISION_TIME + timedelta(hours=1),
        transformation=carry("my own reading", own),
        created=r.DECISION_TIME - timedelta(minutes=5))
    decision = r.carrier().receive(CarriedReceiptReceiver.message(own, chain.to_json()))
    assert decision.verdict is Verdict.REJECT
    assert [x.code for x in decision.reasons] == ["grant-missing"]
    assert decision.reasons[0].json_path == "$.receipt.grant"


# ------------------------------------------------------------------------- baselines


@pytest.fixture(scope="module")
def baselines(ex: SimpleNamespace) -> SimpleNamespace:
    experiment = ex.baselines.baselines_experiment()
    report = run(experiment).report
    return SimpleNamespace(report=report, readings=ex.baselines.read(report, experiment))


def test_baselines_controls_fall_to_what_following_the_message_gives(
        baselines: SimpleNamespace) -> None:
    readings = baselines.readings
    expected = {"no-message": (12 / 28, 0), "shuffled-message": (24 / 28, 1),
                "constant-message": (4 / 28, 24)}
    for control, (agreement, hard) in expected.items():
        reading = readings.control("decision_contract", control)
        assert (reading.agreement, reading.hard_violations) == (agreement, hard)
        assert reading.baseline_agreement == 1.0
        assert reading.if_followed == agreement
        assert reading.follows_content is True
        assert reading.falsifies is False
    assert "infers nothing, it refers" in readings.control(
        "decision_contract", "no-message").reading
    assert "content, not the extra call" in readings.control(
        "decision_contract", "shuffled-message").reading
    assert "reads the channel" in readings.control(
        "decision_contract", "constant-message").reading
    assert baselines.report["gate"]["passed"]


def test_baselines_expose_a_receiver_that_ignores_the_channel(
        baselines: SimpleNamespace) -> None:
    for control in ("no-message", "shuffled-message", "constant-message"):
        reading = baselines.readings.control("action_only_advisory", control)
        assert reading.unchanged
        assert reading.agreement == 12 / 28
        assert "do not depend on the message" in reading.reading


def test_baselines_authority_negative_control(baselines: SimpleNamespace) -> None:
    (negative,) = baselines.readings.authority
    assert (negative.advise, negative.decide) == ("action_only_advisory",
                                                  "action_only_authoritative")
    assert (negative.advise_agreement, negative.decide_agreement) == (12 / 28, 1.0)
    assert negative.advise_bytes == negative.decide_bytes
    assert negative.advise_bytes == pytest.approx(298.5714285714)
    assert negative.decide_hard_violations_under_controls == {
        "no-message": 0, "shuffled-message": 1, "constant-message": 24}
    assert "the decision moved to the sender" in negative.reading
    claims = {c.strategy: c for c in baselines.readings.sender_claims}
    assert not claims["decision_contract"].changed
    assert not claims["action_only_advisory"].changed


TOML_ROWS = {
    "scout": ("scout_v2_experiment", (), [("one_bit_authorised", "none"),
                                         ("decision_receipt", "none")]),
    "pump": ("pump_experiment", (40,), [("coarse", "none"), ("certified_interval", "none")]),
    "relay": ("relay_experiment", (), [("prose_relay", "none"), ("signed_carrier", "none"),
                                       ("stable_receipt", "relay:2:soften:collapse")]),
    "baselines": ("baselines_experiment", (), [("decision_contract", "constant-message"),
                                               ("action_only_authoritative", "none")]),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_toml_runs_like_the_python(name: str, ex: SimpleNamespace, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    out = tmp_path / name
    result = CliRunner().invoke(lab, ["run", str(ROOT / "examples" / f"{name}.toml"),
                                      "--out", str(out), "--no-progress"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text("utf-8"))
    factory, args, rows = TOML_ROWS[name]
    expected = run(getattr(getattr(ex, name), factory)(*args)).report
    assert report["experiment"]["name"] == expected["experiment"]["name"]
    assert [p["id"] for p in report["experiment"]["perturbations"]] == [
        p["id"] for p in expected["experiment"]["perturbations"]]
    for strategy, perturbation in rows:
        got, want = row(report, strategy, perturbation), row(expected, strategy, perturbation)
        for key in ("agreement", "mean_regret", "hard_violations", "verdicts"):
            assert got[key] == want[key], (strategy, perturbation, key)
        if not strategy.startswith("signed"):  # signatures vary in length
            assert got["mean_bytes"] == want["mean_bytes"]


