"""Issue 33: proved verdicts. Each result row of a declarative contract decided by a
strict or reference receiver is proved or refuted by the solver (with a witness that
joins the generated cases), or unknown; anything else is sampled, never proved."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import pytest

from claim_triage import CLAIM_TRIAGE
from credit_limit import CREDIT_LIMIT, Employment
from handoffs.contracts import Interval, ReceiptEncoder
from handoffs.contracts._analysis._perturbed import perturbed_state
from handoffs.contracts._analysis._search import draw_value
from handoffs.contracts.analysis import MergeValues, SymbolicForm
from handoffs.lab import Experiment, GeneratedCases, Strategy, Tolerances, run
from handoffs.lab._proofs import (
    RowProof,
    _run_with_deadline,
    _Task,
    proof_checks,
    receiver_semantics,
)
from handoffs.lab._reference import ReferenceReceiver
from handoffs.lab._values import wire_value
from handoffs.lab.perturbations import (
    CaseContext,
    Perturbation,
    Variant,
    declare_perturbation,
    select_perturbations,
    standard_perturbations,
)
from handoffs.lab.perturbations._coarsening import WidenInterval
from handoffs.lab.reports import render_markdown
from worlds.credit import (
    HARMFUL,
    HARMLESS,
    ROUNDINGS,
    credit_experiment,
    governance_for,
    state_of,
    strict_receiver,
)


def _credit_perturbations() -> tuple[Perturbation, ...]:
    return select_perturbations(CREDIT_LIMIT, include=[*HARMFUL, HARMLESS, *ROUNDINGS,
                                                       "remove-decision-field:bankruptcy"])


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_credit_merges_and_roundings_are_decided(seed: int) -> None:
    # The library's default 1,000 draws: the harmful merges' population agreement
    # fails the gate on every seed (200 draws miss UNEMPLOYED->EMPLOYED on seed 2).
    report = run(credit_experiment(seed, _credit_perturbations(), gate=(*HARMFUL, HARMLESS),
                                   draws=1000)).report
    rows = {r["perturbation"]: r for r in report["results"]}
    assert rows["none"]["verdict"] == "proved"
    assert rows["none"]["agreement"] == 1.0
    for name in (*HARMFUL, *ROUNDINGS):
        row = rows[name]
        assert row["verdict"] == "refuted", (name, row["verdict_reason"])
        assert row["agreement"] < 1.0, name
        witness = row["witness"]
        assert witness["case_id"] is not None
        assert witness["case_id"].startswith("witness-")
        assert witness["reference_action"] != witness["received_action"]
        assert witness["loss"] > 0
    assert rows[HARMLESS]["verdict"] == "proved"
    assert rows[HARMLESS]["agreement"] == 1.0
    assert rows[HARMLESS]["witness"] is None
    # the UNEMPLOYED->EMPLOYED witness: an unemployed applicant approved, REFER right
    unemployed = rows[HARMFUL[0]]["witness"]
    assert unemployed["state"]["employment_status"] == "UNEMPLOYED"
    assert (unemployed["reference_action"], unemployed["received_action"]) == (
        "REFER_TO_HUMAN", "APPROVE")
    assert unemployed["loss"] == 40.0
    failed = {(c["metric"], c["perturbation"]) for c in report["gate"]["checks"]
              if not c["passed"]}
    assert ("agreement", HARMFUL[0]) in failed
    assert ("agreement", HARMFUL[1]) in failed
    assert not any(p == HARMLESS for _, p in failed)
    assert report["gate"]["passed"] is False
    assert report["proofs"]["witness_cases"] >= len(HARMFUL) + len(ROUNDINGS) - 1
    assert report["experiment"]["cases"] == 60  # the witnesses take draws' places
    coverage = report["coverage"]
    assert coverage["refuted_witnessed"] == coverage["refuted_perturbations"] > 0
    assert coverage["transitions_found"] > 0
    assert "employment_status: UNEMPLOYED->EMPLOYED" not in coverage["missed_transitions"]


def test_remove_field_under_a_benign_default_receiver_breaks_a_hard_constraint() -> None:
    receiver = ReferenceReceiver(CREDIT_LIMIT, defaults=True)
    assert receiver_semantics(receiver) == "benign-defaults"
    report = run(credit_experiment(0, select_perturbations(
        CREDIT_LIMIT, include=["remove-decision-field:bankruptcy"]),
        gate=("remove-decision-field:bankruptcy",), receiver=receiver)).report
    row = next(r for r in report["results"]
               if r["perturbation"] == "remove-decision-field:bankruptcy")
    assert row["verdict"] == "refuted"
    witness = row["witness"]
    assert witness["state"]["bankruptcy"] is True
    assert "bankruptcy" not in witness["message"]
    assert witness["received_action"] == "APPROVE"
    assert witness["hard_violations"] == ["no-approval-on-bankruptcy"]
    assert row["hard_violations"] >= 1
    reasons = " ".join(report["gate"]["reasons"])
    assert "refuted with a witness that breaks no-approval-on-bankruptcy" in reasons


def test_a_refuted_hard_witness_fails_the_gate_whatever_the_sample_says() -> None:
    row = {"strategy": "s", "perturbation": "p", "verdict": "refuted", "hard_violations": 0,
           "witness": {"hard_violations": ["no-pay"], "reference_action": "DENY",
                       "received_action": "PAY"}}
    checks = proof_checks(row, "s under p", Tolerances())
    assert [(c["metric"], c["passed"], c["value"]) for c in checks] == [
        ("hard_violations", False, 1)]
    assert proof_checks(row, "s under p", Tolerances(hard_violations=1)) == []


@pytest.mark.parametrize(("verdict", "passed"), [("proved", True), ("refuted", True),
                                                 ("unknown", False), ("sampled", False),
                                                 (None, False)])
def test_require_proof(verdict: str | None, passed: bool) -> None:
    row = {"strategy": "s", "perturbation": "p", "verdict": verdict, "witness": None,
           "verdict_reason": "why"}
    assert proof_checks(row, "s under p", Tolerances()) == []
    (check,) = proof_checks(row, "s under p", Tolerances(require_proof=True))
    assert check["metric"] == "proof"
    assert check["passed"] is passed


def test_require_proof_fails_a_sampled_row_in_a_run() -> None:
    report = run(credit_experiment(0, select_perturbations(CREDIT_LIMIT, include=["mutate"]),
                                   gate=("mutate",), require_proof=True)).report
    row = next(r for r in report["results"] if r["perturbation"] == "mutate")
    assert row["verdict"] == "sampled"
    failed = [c for c in report["gate"]["checks"] if not c["passed"]]
    assert any(c["metric"] == "proof" and c["perturbation"] == "mutate" for c in failed)
    proved = [c for c in report["gate"]["checks"]
              if c["metric"] == "proof" and c["perturbation"] == "none"]
    assert proved
    assert proved[0]["passed"]


def test_the_hard_deadline_makes_every_row_unknown() -> None:
    (perturbation,) = select_perturbations(CREDIT_LIMIT, include=[HARMFUL[0]])
    task = _Task(("s", perturbation.id), perturbation, perturbation.symbolic(CREDIT_LIMIT)
                 or SymbolicForm(), "strict", "s", False)
    found = _run_with_deadline(CREDIT_LIMIT, [task], 5000, 0.0)
    assert found[task.key].verdict == "unknown"
    assert "hard deadline" in found[task.key].reason
    answered = _run_with_deadline(CREDIT_LIMIT, [task], 5000, 60.0)
    assert answered[task.key].verdict == "refuted"


def test_widen_interval_is_refuted_at_every_width_that_can_straddle_a_cut() -> None:
    for width in (0.005, 0.05, 0.2):
        experiment = Experiment(
            name="claims", contract=CLAIM_TRIAGE, cases=GeneratedCases(CLAIM_TRIAGE, 40),
            strategies=(Strategy(name="receipt", receiver=strict_receiver(CLAIM_TRIAGE, "handler"),
                                 encoder=ReceiptEncoder(contract=CLAIM_TRIAGE,
                                                        state_of=state_of, name="receipt"),
                                 receipts=True, gated=True),),
            governance=governance_for("handler"),
            perturbations=(WidenInterval("fraud_probability", width),),
            tolerances=Tolerances(controls_must_fail=False))
        report = run(experiment).report
        row = next(r for r in report["results"]
                   if r["perturbation"].startswith("widen-interval"))
        assert row["verdict"] == "refuted", width
        assert row["agreement"] < 1
        assert row["witness"]["received_action"] == "INVESTIGATE"  # the fail-closed action
        rendered = render_markdown(report)
        assert "Verdicts" in rendered
        assert f"({row['witness']['case_id']})" in rendered or \
            f"case {row['witness']['case_id']}" in rendered


# ------------------------------------------------------------ forms against the code


def _random_states(contract: Any, count: int, seed: int) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)  # noqa: S311 - reproducible test inputs, not secrets
    for _ in range(count):
        yield {s.name: draw_value(s, rng) for s in contract.fields}


def _by_code(perturbation: Perturbation, contract: Any,
             state: Mapping[str, Any]) -> dict[str, Any] | None:
    message = {"decision_state": {s.name: wire_value(state[s.name]) for s in contract.fields}}
    reference = contract.decide(contract.state(**state)).value
    ctx = CaseContext(index=0, case_id="c", truth=state, reference=reference,
                      contract=contract, decide=lambda v: reference,
                      neighbour=lambda _: None, constant=lambda _: None)
    variants = list(perturbation.variants(message, ctx, "s"))
    if not variants:
        return dict(state)
    sent = variants[0].message["decision_state"]
    return {name: contract.field_map[name].read(value) for name, value in sent.items()}


def _same(contract: Any, got: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
    if set(got) != set(want):
        return False
    for name, value in want.items():
        other = got[name]
        if isinstance(value, Interval):
            if (float(other[0]), float(other[1])) != pytest.approx((value.lo, value.hi),
                                                                   abs=1e-9):
                return False
        elif isinstance(value, float) and not isinstance(value, bool):
            if float(other) != pytest.approx(value, abs=1e-9):
                return False
        elif wire_value(other) != wire_value(value):
            return False
    return True


@pytest.mark.parametrize("contract", [CREDIT_LIMIT, CLAIM_TRIAGE], ids=lambda c: c.name)
def test_every_symbolic_form_matches_its_perturbation_on_random_states(contract: Any) -> None:
    checked = 0
    for perturbation in standard_perturbations(contract):
        prepared = perturbation.prepare(contract, seed=0)
        form = prepared.symbolic(contract)
        if form is None or not form.changes:
            continue
        for state in _random_states(contract, 25, seed=checked):
            got = perturbed_state(contract, form, "three-valued", state)
            assert got is not None
            want = _by_code(prepared, contract, state)
            assert want is not None
            assert _same(contract, got, want), (prepared.id, state, got, want)
        checked += 1
    assert checked >= 5


def test_every_witness_is_the_perturbation_s_own_outcome() -> None:
    report = run(credit_experiment(1, _credit_perturbations())).report
    for row in report["results"]:
        if row["verdict"] != "refuted":
            continue
        (chosen,) = select_perturbations(CREDIT_LIMIT, include=[row["perturbation"]])
        perturbation = chosen.prepare(CREDIT_LIMIT, seed=0)
        state = {s.name: s.read(row["witness"]["state"][s.name])
                 for s in CREDIT_LIMIT.fields}
        form = perturbation.symbolic(CREDIT_LIMIT)
        assert form is not None
        got = perturbed_state(CREDIT_LIMIT, form, "three-valued", state)
        want = _by_code(perturbation, CREDIT_LIMIT, state)
        assert got is not None
        assert want is not None
        assert _same(CREDIT_LIMIT, got, want), row["perturbation"]
        if row["witness"]["message"] is not None and "bankruptcy" in want:
            assert {k: wire_value(v) for k, v in want.items()} == row["witness"]["message"]


# ------------------------------------------------------------ user perturbations


@declare_perturbation(kind="coarsening", id="unemployed-as-retired", subject=True,
                      description="Send UNEMPLOYED as RETIRED.")
@attrs.frozen
class UnemployedAsRetired(Perturbation):
    """A user perturbation that declares its symbolic form."""

    declared: bool = True

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        state = dict(message["decision_state"])
        if state.get("employment_status") == "UNEMPLOYED":
            state["employment_status"] = "RETIRED"
        yield Variant.patched(message, "decision_state", state)

    def symbolic(self, contract: Any) -> SymbolicForm | None:
        if not self.declared:
            return None
        return SymbolicForm(changes=(MergeValues("employment_status",
                                                 (Employment.UNEMPLOYED,),
                                                 Employment.RETIRED),))


def test_a_user_perturbation_is_proved_only_with_a_symbolic_form() -> None:
    declared = UnemployedAsRetired()
    opaque = attrs.evolve(declared, declared=False)
    for perturbation, verdict in ((declared, "refuted"), (opaque, "sampled")):
        report = run(credit_experiment(2, (perturbation,))).report
        row = next(r for r in report["results"] if r["perturbation"] == "unemployed-as-retired")
        assert row["verdict"] == verdict, row["verdict_reason"]
        assert row["agreement"] < 1 or verdict == "sampled"
    assert RowProof("sampled", "x").to_json()["witness"] is None


def test_action_added_follows_the_extended_policy_and_is_refuted_where_it_decides() -> None:
    from handoffs.contracts.policy import Over
    from handoffs.lab.perturbations import ActionAdded

    added = ActionAdded("PARTIAL_APPROVE", Over("credit_score", 800)).prepare(CREDIT_LIMIT,
                                                                             seed=0)
    assert isinstance(added, ActionAdded)
    for state in _random_states(CREDIT_LIMIT, 50, seed=9):
        reference = CREDIT_LIMIT.decide(CREDIT_LIMIT.state(**state)).value
        ctx = CaseContext(index=0, case_id="c", truth=state, reference=reference,
                          contract=CREDIT_LIMIT, decide=lambda v, r=reference: r,
                          neighbour=lambda _: None, constant=lambda _: None)
        (variant,) = added.variants({"decision_state": {}}, ctx, "s")
        outcome = added.policy.evaluate(state) if added.policy is not None else None
        assert outcome is not None
        # the form's reference: the extended policy, or the case's where it is undetermined
        want = reference if outcome.action is None else outcome.action.value
        assert variant.reference == want
    report = run(credit_experiment(0, (added,))).report
    row = next(r for r in report["results"] if r["perturbation"] == added.id)
    assert row["verdict"] == "refuted"
    assert row["witness"]["reference_action"] == "PARTIAL_APPROVE"
    assert row["witness"]["state"]["credit_score"] > 800
    assert row["agreement"] < 1


def test_the_rows_a_strict_receiver_refused_are_proved_refused_in_one_worker(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A governance field removed: the proof assumed the strict receiver admits the
    message, the run saw it refuse every one, so the row's verdict is the proof of the
    refusal (its witness is refused), and every such row's refusal is proved by one
    worker, not one each."""
    from handoffs.examples.payment_lab import payment_experiment
    from handoffs.lab import _proofs

    workers: list[list[tuple[str, str]]] = []

    def counted(contract: Any, tasks: Any, *args: Any) -> Any:
        workers.append([t.key for t in tasks])
        return _run_with_deadline(contract, tasks, *args)

    monkeypatch.setattr(_proofs, "_run_with_deadline", counted)
    report = run(payment_experiment(variants=2, profile="essay")).report
    refused = [r for r in report["results"] if r["strategy"] == "decision_contract"
               and r["perturbation"].startswith("remove-governance-field:")]
    assert len(refused) == 7
    assert all(r["admitted_rate"] == 0 for r in refused)
    assert all(r["verdict"] == "refuted" and r["witness"]["refused"] for r in refused)
    assert len(workers) == 2  # the plan's rows, then every refusal at once
    assert sorted(workers[1]) == sorted((r["strategy"], r["perturbation"]) for r in refused)
