"""Rows that say when nothing was exercised, and constraints silent on an added action
(issue 31, items 3 and 5).

A perturbation that changes nothing the receiver reads or checks leaves its row
``exercised: false`` with the reason; every rendering prints "not exercised" instead of
the unperturbed figures, and a gate over the row fails with the reason. A hard
constraint whose allowlist does not name an action ``action-added`` introduces is a
finding about the constraint, never a hard violation.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from handoffs import lab
from handoffs.contracts import Registry
from handoffs.contracts.policy import Is
from handoffs.examples.payment import PAYMENT_RELEASE, PaymentCase
from handoffs.examples.payment_lab import (
    CurrentPolicies,
    FixedClock,
    SyntheticEvidence,
    decision_contract_encoder,
    payment_experiment,
)
from handoffs.lab import Experiment, Strategy, Tolerances
from handoffs.lab._exercised import touched
from handoffs.lab.perturbations import ActionAdded, LossChanged, RemoveDecisionField, Variant
from handoffs.lab.perturbations._base import REMOVED
from handoffs.lab.perturbations._boundary import PolicyVersionChanged
from handoffs.lab.perturbations._coarsening import ShortenEvidenceRefs
from handoffs.lab.perturbations._controls import NoMessage
from handoffs.lab.reports import diff_reports, evaluate_gate, render_html, render_markdown
from handoffs.receivers import Gate, StrictContractReceiver, UnsafeNoProofs
from handoffs.receivers._reads import decision_reads

pytestmark = pytest.mark.filterwarnings("ignore::handoffs.errors.UnsafeConfigurationWarning")

SHORTEN = ShortenEvidenceRefs(keep=1)
# The payment contract without its context dependencies: a gate without services still
# admits its receipts, so that what the rows show is what the perturbations exercise.
BARE = attrs.evolve(PAYMENT_RELEASE, context=())


def _gate(*, evidence: bool = False, policies: bool = False, contract: Any = BARE) -> Gate:
    return Gate(identity="case-owner", registry=Registry.of(contract), trust=UnsafeNoProofs(),
                roles={"case-owner"}, replay=None, clock=FixedClock(),
                policy_service=CurrentPolicies({"PAY-7.4"}) if policies else None,
                evidence=SyntheticEvidence() if evidence else None)


def _experiment(gate: Gate, *perturbations: Any, contract: Any = BARE,
                gated: tuple[str, ...] = ("none",)) -> Experiment:
    base = payment_experiment()
    return attrs.evolve(
        base, contract=contract,
        strategies=(Strategy(name="decision_contract", encoder=decision_contract_encoder(),
                             receiver=StrictContractReceiver(gate), gated=True),),
        perturbations=(*perturbations, NoMessage()), injections=(),
        tolerances=Tolerances(gate_perturbations=gated, controls_must_fail=False,
                              surviving_catastrophic_falsehoods=None))


def _row(report: dict[str, Any], perturbation: str) -> dict[str, Any]:
    return next(r for r in report["results"] if r["perturbation"] == perturbation)


@pytest.fixture(scope="module")
def unresolved() -> dict[str, Any]:
    """No evidence resolver, no policy service; the gate bounds shorten-evidence-refs."""
    return lab.run(_experiment(
        _gate(), SHORTEN, PolicyVersionChanged(), LossChanged("costly", {("ESCALATE",
                                                                         "RELEASE"): 10}),
        RemoveDecisionField("high_value"),
        gated=("none", SHORTEN.id))).report


def test_shorten_evidence_refs_without_resolver_is_not_exercised(
        unresolved: dict[str, Any]) -> None:
    row = _row(unresolved, SHORTEN.id)
    assert (row["exercised"], row["exercised_cases"]) == (False, 0)
    assert "evidence_refs (no evidence resolver is configured)" in row["exercised_reason"]
    assert row["agreement"] == 1.0  # the unperturbed decisions' figure, kept in the JSON


def test_a_gate_over_an_unexercised_row_fails_with_the_reason(
        unresolved: dict[str, Any]) -> None:
    gate = unresolved["gate"]
    assert not gate["passed"]
    failed = [c for c in gate["checks"] if not c["passed"]]
    assert [(c["metric"], c["perturbation"]) for c in failed] == [("exercised", SHORTEN.id)]
    assert failed[0]["reason"].startswith(
        f"decision_contract under {SHORTEN.id}: not exercised: in none of its 28 case(s)")
    assert "no evidence resolver is configured" in failed[0]["reason"]
    # no figure check of the row reads as a pass
    assert not [c for c in gate["checks"] if c["perturbation"] == SHORTEN.id
                and c["metric"] != "exercised"]


def test_policy_version_changed_without_a_policy_service_is_not_exercised(
        unresolved: dict[str, Any]) -> None:
    row = _row(unresolved, "policy-version-changed")
    assert row["exercised"] is False
    assert row["verdicts"]["ACCEPT"] == row["decisions"]  # all accepted, as unperturbed
    assert "policy_version (no contract declares a policy dependency)" in \
        row["exercised_reason"]


def test_loss_changed_is_not_exercised_when_the_receiver_is_not_given_the_loss(
        unresolved: dict[str, Any]) -> None:
    row = _row(unresolved, "loss-changed:costly")
    assert row["exercised"] is False
    assert "only the scoring changed (loss matrix costly)" in row["exercised_reason"]


def test_controls_and_read_fields_are_exercised(unresolved: dict[str, Any]) -> None:
    assert _row(unresolved, "none")["exercised"] is True
    assert _row(unresolved, "no-message")["exercised"] is True
    removed = _row(unresolved, "remove-decision-field:high_value")
    assert (removed["exercised"], removed["exercised_cases"], removed["exercised_reason"]) \
        == (True, 28, None)


def test_policy_version_is_read_with_a_policy_service_and_a_dependency() -> None:
    contract = attrs.evolve(PAYMENT_RELEASE, context=PAYMENT_RELEASE.context[:1])
    report = lab.run(_experiment(_gate(policies=True, contract=contract),
                                 PolicyVersionChanged(), contract=contract)).report
    row = _row(report, "policy-version-changed")
    assert (row["exercised"], row["exercised_cases"]) == (True, 28)
    assert row["verdicts"]["ACCEPT"] == 0


def test_policy_version_without_a_service_under_a_dependency_says_so() -> None:
    contract = attrs.evolve(PAYMENT_RELEASE, context=PAYMENT_RELEASE.context[:1])
    reads = decision_reads(StrictContractReceiver(_gate(contract=contract)))
    assert not reads.reads("policy_version")
    assert reads.why_not("policy_version") == "no policy service is configured"


def test_with_an_evidence_resolver_the_row_is_exercised() -> None:
    report = lab.run(_experiment(_gate(evidence=True), SHORTEN,
                                 gated=("none", SHORTEN.id))).report
    row = _row(report, SHORTEN.id)
    assert row["exercised"] is True
    assert row["exercised_cases"] > 0
    assert not [c for c in report["gate"]["checks"] if c["metric"] == "exercised"]


def test_the_strict_receiver_reads_policy_fields_and_addressing() -> None:
    reads = decision_reads(StrictContractReceiver(_gate()))
    assert reads.reads("decision_state.high_value")
    assert not reads.reads("evidence_refs")
    assert not reads.reads("authority")
    assert reads.reads("receiver")
    assert reads.reads("valid_until")


def test_touched_names_the_members_and_fields_a_variant_changes() -> None:
    base = {"decision_state": {"a": 1, "b": True}, "policy_version": "P", "id": "x"}
    patched = Variant.patched(base, "decision_state", {"a": 1, "b": 1})
    assert touched(base, patched) == {"decision_state.b"}  # True and 1 differ
    assert touched(base, Variant(base)) == set()
    whole = Variant({**base, "policy_version": "Q", "sender": "s"})
    assert touched(base, whole) == {"policy_version", "sender"}
    assert touched(base, Variant.patched(base, "id", REMOVED)) == {"id"}


# --------------------------------------------------------------------- renderings


def test_every_format_prints_not_exercised_with_the_reason(
        unresolved: dict[str, Any]) -> None:
    from handoffs.lab.reports import findings

    said = [f for f in findings(unresolved) if f.startswith("Not exercised")]
    assert len(said) == 1
    assert f"decision_contract under {SHORTEN.id} (in none" in said[0]
    markdown = render_markdown(unresolved)
    assert "not exercised" in markdown
    assert "no evidence resolver is configured" in markdown
    html = render_html(unresolved)
    assert "not exercised" in html
    assert "no evidence resolver is configured" in html
    line = next(ln for ln in markdown.splitlines()
                if f"| {SHORTEN.id} | coarsening |" in ln)
    assert "not exercised" in line
    assert "| 1 |" not in line


def test_lab_diff_does_not_compare_the_figures_of_an_unexercised_row(
        unresolved: dict[str, Any]) -> None:
    old = {**unresolved, "results": [
        {**r, "exercised": True, "exercised_cases": 28, "exercised_reason": None,
         "agreement": 0.5} if r["perturbation"] == SHORTEN.id else r
        for r in unresolved["results"]]}
    diff = diff_reports(old, unresolved)
    changes = [c for c in diff.changes if c.perturbation == SHORTEN.id]
    assert [(c.metric, c.old, c.new, c.status, c.regressed) for c in changes] == [
        ("exercised", "exercised", "not exercised", "not exercised", False)]
    assert "not exercised (figures not compared)" in diff.render()


# ------------------------------------------------------- constraints and new actions


def test_an_allowlist_that_does_not_name_an_added_action_is_a_finding() -> None:
    # OBSERVE becomes the reference where the routine release applied; the strict
    # receiver, which does not know OBSERVE, releases there. unsafe-release allows
    # RELEASE only for the reference RELEASE: it does not say whether RELEASE is
    # allowed when the reference is OBSERVE.
    observe = ActionAdded("OBSERVE", Is("high_value", False))
    report = lab.run(_experiment(_gate(), observe, gated=("none", observe.id))).report
    row = _row(report, observe.id)
    assert row["hard_violations"] == 0
    assert row["hard_violations_by_constraint"] == {}
    assert row["population"]["hard_violation_rate"] == 0
    assert row["exercised"] is True
    assert row["agreement"] < 1
    [found] = row["unstated_constraints"]
    assert found == {"constraint": "unsafe-release", "chosen": "RELEASE",
                     "added_action": "OBSERVE",
                     "decisions": round((1 - row["agreement"]) * row["decisions"])}
    from handoffs.lab.reports import findings

    [said] = [f for f in findings(report) if f.startswith("Constraints silent")]
    assert ("constraint unsafe-release does not say whether RELEASE is allowed when the "
            "reference is OBSERVE (its allowlist names RELEASE)") in said
    assert "not counted as hard violations" in said
    for rendered in (render_markdown(report), render_html(report)):
        assert "constraint unsafe-release does not say whether RELEASE is allowed" in rendered
    hard = [c for c in report["gate"]["checks"] if c["perturbation"] == observe.id
            and c["metric"] in ("hard_violations", "population_hard_violations")]
    assert hard
    assert all(c["passed"] for c in hard)


def test_an_empty_allowlist_still_counts_the_violation() -> None:
    from handoffs.lab.perturbations import Scoring

    scoring = attrs.evolve(Scoring.of(PAYMENT_RELEASE),
                           hard=(("never-release", "RELEASE", frozenset()),),
                           added=frozenset({"OBSERVE"}))
    assert scoring.violations("RELEASE", "OBSERVE") == ("never-release",)
    assert scoring.unstated("RELEASE", "OBSERVE") == ()


def test_the_gate_reads_the_row_not_the_names(unresolved: dict[str, Any]) -> None:
    # a report whose row is exercised passes the same gate: the check is the field's
    report = {**unresolved, "results": [
        {**r, "exercised": True, "exercised_cases": 28, "exercised_reason": None}
        for r in unresolved["results"]]}
    gate = evaluate_gate(report)
    assert gate["passed"], gate["reasons"]


def test_the_cases_carry_more_than_one_evidence_reference() -> None:
    # what makes keep=1 change the references in the fixtures above
    case = next(iter(payment_experiment().cases))
    assert isinstance(case, PaymentCase)
    assert len(case.evidence_refs) > 1


def test_the_command_line_summary_prints_not_exercised(unresolved: dict[str, Any]) -> None:
    from click.testing import CliRunner

    from handoffs.cli._lab import print_summary

    with CliRunner().isolation() as (out, _, _):
        print_summary(unresolved)
        text = " ".join(out.getvalue().decode().split())
    assert "Release gate: FAIL" in text
    assert f"{SHORTEN.id}: not exercised: in none of its 28 case(s)" in text
    assert "Not exercised (no figures shown" in text
