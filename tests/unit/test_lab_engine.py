"""The engine on any contract: experiments, case sources, TOML, re-scoring, the gate,
the release artefact and the report schema.
"""

from __future__ import annotations

import enum
import json
import operator
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest

from handoffs._errors import MalformedJSON, ProofError, UnknownContract
from handoffs.contracts import (
    Contract,
    GovernanceService,
    LossMatrix,
    ReceiptEncoder,
    Registry,
    Uncertainty,
    decision_field,
)
from handoffs.contracts.policy import Is, Over, Policy, Rule
from handoffs.examples.payment import PAYMENT_RELEASE, PaymentCase, synthetic_cases
from handoffs.examples.payment_lab import (
    CLAIMS_VERIFIED_UPSTREAM,
    FixedClock,
    payment_experiment,
)
from handoffs.integrity import KeyRing, SigningKey, verify
from handoffs.lab import (
    Experiment,
    ExperimentError,
    GeneratedCases,
    IterableCases,
    JSONLinesCases,
    Strategy,
    Tolerances,
    load_experiment,
    rescore,
    run,
)
from handoffs.lab._metrics import falsehood_class
from handoffs.lab._reference import ReferenceReceiver
from handoffs.lab._report import ReportError
from handoffs.lab.perturbations._base import Scoring
from handoffs.lab.reports import (
    evaluate_gate,
    release_artefact,
    validate_report,
)
from handoffs.receivers import (
    AdvisoryActionReceiver,
    Gate,
    StrictContractReceiver,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
)

VECTORS = Path(__file__).parents[1] / "vectors"


class Valve(enum.Enum):
    OPEN = "OPEN"
    SHUT = "SHUT"
    CHECK = "CHECK"


class Grade(enum.Enum):
    A = "A"
    B = "B"
    C = "C"


@attrs.frozen
class TankState:
    grade: Grade = decision_field("Fluid grade.", if_missing=Grade.A)
    pressure: int = decision_field("Pressure in kPa.", minimum=0, maximum=500)
    leak: bool = decision_field("A leak sensor fired.", if_missing=False)


def _loss() -> LossMatrix[Valve]:
    o, s, c = Valve.OPEN, Valve.SHUT, Valve.CHECK
    return LossMatrix({(o, o): 0, (s, s): 0, (c, c): 0, (o, s): 90, (o, c): 40, (s, o): 5,
                       (c, o): 2, (s, c): 3, (c, s): 10})


TANK = Contract(
    name="tank-valve",
    version="2.1.0",
    description="Open, shut or check a tank valve.",
    actions=Valve,
    state=TankState,
    policy=Policy(rules=(
        Rule("leak", Is("leak", True), Valve.SHUT),
        Rule("over-pressure", Over("pressure", 300), Valve.SHUT),
        Rule("grade-c", Is("grade", Grade.C), Valve.CHECK),
    ), default=Valve.OPEN),
    loss=_loss(),
    fail_closed_action=Valve.CHECK,
    counterfactual_trigger="Recompute when a reading changes.",
)
GOVERNANCE = GovernanceService(sender="tank-sensor", receiver="valve-owner",
                               policy_version="T-1",
                               valid_until=datetime(2027, 1, 1, tzinfo=UTC))


def resolved(_: Any) -> Uncertainty:
    return Uncertainty.RESOLVED


@attrs.frozen
class ActionEncoder:
    name: str = "action_only"

    def encode(self, evidence: Any) -> dict[str, Any]:
        return {"action": TANK.decide(evidence.state).value}


def tank_experiment(**changes: Any) -> Experiment:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeConfigurationWarning)
        gate = Gate(identity="valve-owner", trust=UnsafeNoProofs(), registry=Registry.of(TANK),
                    replay=None, clock=FixedClock())
    encoder = ReceiptEncoder(TANK, state_of=operator.attrgetter("state"),
                             uncertainty_of=resolved)
    defaults: dict[str, Any] = {
        "name": "tank-valve-lab",
        "contract": TANK,
        "cases": GeneratedCases(TANK, 40, seed=1),
        "strategies": (
            Strategy(name="receipt", encoder=encoder, receiver=StrictContractReceiver(gate)),
            Strategy(name="action", encoder=ActionEncoder(),
                     receiver=AdvisoryActionReceiver(TANK)),
        ),
        "governance": GOVERNANCE,
    }
    return Experiment(**{**defaults, **changes})


@pytest.fixture(scope="module")
def tank_report() -> dict[str, Any]:
    return run(tank_experiment()).report


def test_any_contract_runs_end_to_end(tank_report: dict[str, Any]) -> None:
    validate_report(tank_report)
    rows = {(r["strategy"], r["perturbation"]): r for r in tank_report["results"]}
    assert rows[("receipt", "none")]["agreement"] == 1.0
    assert rows[("receipt", "none")]["schema_valid_rate"] == 1.0
    assert rows[("action", "none")]["schema_valid_rate"] is None
    for name in ("grade", "pressure", "leak"):
        assert ("receipt", f"remove-decision-field:{name}") in rows
    assert ("receipt", "merge-enum-values:decision_state.grade:B->A") in rows
    assert ("receipt", "round-numeric:pressure:50") in rows
    assert tank_report["experiment"]["cases"] == 40
    assert tank_report["experiment"]["contract"] == "tank-valve/2.1.0"
    falsehoods = tank_report["falsehoods"]
    assert falsehoods["generated"] > 0
    assert falsehoods["schema_rejected"] == 0
    minimal = tank_report["minimal_messages"]
    assert minimal["exhaustive_check"] == {"performed": True, "agrees": True,
                                           "states_checked": len(minimal["regions"])}
    assert tank_report["counterfactual_triggers"]["cases"] == 40
    assert [d["if_missing"] for d in tank_report["experiment"]["decision_fields"]] == [
        "A", None, False]


def test_benign_default_and_strict_receivers_apart(tank_report: dict[str, Any]) -> None:
    rows = {(r["strategy"], r["perturbation"]): r for r in tank_report["results"]}
    leak = rows[("receipt", "remove-decision-field:leak")]
    assert leak["admitted_rate"] == 0.0  # the strict receiver rejects an incomplete state
    pressure = rows[("receipt", "remove-decision-field:pressure")]
    assert pressure["semantic_determined_rate"] is not None
    assert pressure["semantic_determined_rate"] < 1.0  # no declared default: undetermined


def test_generated_cases_are_reproducible() -> None:
    first = [c.state for c in GeneratedCases(TANK, 30, seed=7, batch=11)]
    again = [c.state for c in GeneratedCases(TANK, 30, seed=7, batch=11)]
    assert first == again
    assert len(first) == 30
    assert all(isinstance(s, TankState) for s in first)


def test_json_lines_cases(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    lines = [json.dumps(attrs.asdict(c)) for c in synthetic_cases()]
    path.write_text("\n".join(lines[:3]) + "\n\n" + "\n".join(lines[3:]) + "\n", "utf-8")

    def structure(d: dict[str, Any]) -> PaymentCase:
        return PaymentCase(**{**d, "evidence_refs": tuple(d["evidence_refs"])})

    experiment = attrs.evolve(payment_experiment(profile="essay"),
                              cases=JSONLinesCases(path, structure))
    report = run(experiment).report
    python = run(payment_experiment(profile="essay")).report
    for key in ("strategy_results", "decision_field_ablation", "governance_field_ablation",
                "error_injection"):
        assert report[key] == python[key]
    assert report["experiment"]["case_set_digest"] == python["experiment"]["case_set_digest"]
    path.write_text(lines[0] + "\n{not json\n", "utf-8")
    with pytest.raises(MalformedJSON, match="line 2"):
        list(JSONLinesCases(path))


def test_iterable_cases_need_a_factory_to_be_reiterable() -> None:
    source = IterableCases(lambda: iter([1, 2]))
    assert list(source) == list(source) == [1, 2]


def test_experiment_declarations_are_checked() -> None:
    with pytest.raises(ExperimentError, match="at least one strategy"):
        tank_experiment(strategies=())
    strategy = tank_experiment().strategies[0]
    with pytest.raises(ExperimentError, match="unique"):
        tank_experiment(strategies=(strategy, strategy))
    with pytest.raises(ExperimentError, match="subject"):
        tank_experiment(subject="nope")
    with pytest.raises(ExperimentError, match="epochs"):
        tank_experiment(epochs=0)
    with pytest.raises(ExperimentError, match="minimal_method"):
        tank_experiment(minimal_method="guess")
    with pytest.raises(ExperimentError, match="name"):
        Strategy(name="has space", encoder=ActionEncoder(), receiver=strategy.receiver)
    with pytest.raises(ExperimentError, match="tolerance"):
        Tolerances(regret_delta=-1)
    with pytest.raises(ExperimentError, match="unknown tolerance"):
        Tolerances.from_json({"epsilon": 0.1})


def test_reference_receiver() -> None:
    benign = ReferenceReceiver(TANK, defaults=True)
    strict = ReferenceReceiver(TANK, defaults=False)
    message = {"decision_state": {"pressure": 10}}
    assert benign.receive(message).action == "OPEN"
    decision = strict.receive(message)
    assert (decision.verdict.value, decision.action) == ("ESCALATE", "CHECK")
    assert strict.receive(b'{"decision_state": {"pressure": 10, "leak": true}}').action \
        == "SHUT"
    assert benign.receive({}).verdict.value == "REJECT"
    assert benign.receive({"decision_state": {"pressure": "high"}}).verdict.value == "REJECT"
    assert benign.receive({"decision_state": {"valve": 1}}).reasons[0].code == "unknown-field"
    assert benign.receive(b"not json").reasons[0].code == "invalid-json"


def test_rescore_calls_no_receiver(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    experiment = payment_experiment(profile="essay")
    original = run(experiment, run_log=path).report
    calls: list[Any] = []
    receivers = [attrs.evolve(s, receiver=_Forbidden(calls)) for s in experiment.strategies]
    forbidden = attrs.evolve(experiment, strategies=tuple(receivers))
    changed = {(c, r): v * 10 for (c, r), v in Scoring.of(experiment.contract).loss.items()}
    report = rescore(forbidden, path, loss=changed, name="tenfold")
    assert calls == []
    assert report["provenance"]["rescored_with"] == "tenfold"
    for got, was in zip(report["strategy_results"], original["strategy_results"], strict=True):
        assert got["agreement"] == was["agreement"]
        assert got["mean_regret"] == pytest.approx(was["mean_regret"] * 10)
    assert report["error_injection"]["synthetic_loss"] == 1200


@attrs.frozen
class _Forbidden:
    calls: list[Any]
    name: str = "forbidden"
    deterministic: bool = True

    def receive(self, message: Any) -> Any:
        self.calls.append(message)
        raise AssertionError("rescoring must not call a receiver")


@pytest.fixture(scope="module")
def payment_report() -> dict[str, Any]:
    return run(payment_experiment()).report


def test_gate_one_threshold_per_metric(payment_report: dict[str, Any]) -> None:
    gate = payment_report["gate"]
    assert gate["passed"] is True
    metrics = {c["metric"] for c in gate["checks"]}
    assert {"agreement", "mean_regret", "hard_violations", "governance_failures",
            "control_falsifies"} <= metrics
    strict = Tolerances(gate_perturbations=("none", "remove-decision-field:policy_current"))
    failed = evaluate_gate(payment_report, strict)
    assert failed["exit_code"] == 1
    assert any("remove-decision-field:policy_current: agreement" in r
               for r in failed["reasons"])
    catastrophic = evaluate_gate(payment_report,
                                 Tolerances(surviving_catastrophic_falsehoods=0))
    assert catastrophic["exit_code"] == 1
    assert any("24 catastrophic" in r for r in catastrophic["reasons"])
    lenient = evaluate_gate(payment_report, Tolerances(gate_perturbations=("missing",),
                                                       surviving_catastrophic_falsehoods=None))
    assert lenient["reasons"] == ["decision_contract under missing: no decisions were recorded"]
    # the built-in experiment names its waiver; the check passes as waived
    waived = next(c for c in gate["checks"] if c["metric"] == "surviving_catastrophic_falsehoods")
    assert waived["passed"] is True
    assert waived["value"] == 24
    assert "; waived (claims verified upstream: " in waived["reason"]
    assert gate["waivers"] == [f"claims verified upstream: {CLAIMS_VERIFIED_UPSTREAM}"]


def test_a_control_that_passes_falsifies_the_architecture(
        payment_report: dict[str, Any]) -> None:
    report = json.loads(json.dumps(payment_report))
    for row in report["results"]:
        if (row["strategy"], row["perturbation"]) == ("decision_contract", "no-message"):
            row["agreement"], row["mean_regret"] = 1.0, 0.0
            # controls are judged on their population figures (issue 31)
            row["population"].update(agreement=1.0, agreement_interval=[0.9, 1.0],
                                     mean_regret=0.0, mean_regret_interval=[0.0, 0.1])
    gate = evaluate_gate(report)
    assert gate["exit_code"] == 1
    assert any("not doing the work" in r for r in gate["reasons"])


def test_release_artefact_is_signed_like_receipts(payment_report: dict[str, Any]) -> None:
    artefact = payment_report["release"]
    assert artefact["contract"] == "payment-release/1.0.0"
    assert artefact["contract_version"] == "1.0.0"
    assert artefact["schema_digest"] == payment_report["experiment"]["schema_digest"]
    assert artefact["case_set_digest"] == payment_report["experiment"]["case_set_digest"]
    assert artefact["regret_budget"] == payment_report["experiment"]["tolerances"]
    assert len(artefact["ablation_record"]) == len(payment_report["results"])
    key = SigningKey.generate()
    now = datetime.now(UTC)
    ring = KeyRing().enrol(key.public_key_multibase, controller="release-lab",
                           roles={"release"}, not_before=now - timedelta(minutes=1))
    signed = release_artefact(payment_report, key=key, created=now)
    assert "proof" not in release_artefact(payment_report, created=now)
    [proof] = verify(signed, ring, purpose="assertionMethod", now=now)
    assert proof.controller == "release-lab"
    tampered = {**signed, "cases": 29}
    with pytest.raises(ProofError):
        verify(tampered, ring, purpose="assertionMethod", now=now)


def test_report_schema(payment_report: dict[str, Any]) -> None:
    validate_report(payment_report)
    sample = json.loads((VECTORS / "lab-report-sample.json").read_text("utf-8"))
    validate_report(sample)
    broken = {k: v for k, v in payment_report.items() if k != "gate"}
    with pytest.raises(ReportError, match="'gate' is a required property"):
        validate_report(broken)
    bad = json.loads(json.dumps(payment_report))
    bad["results"][0]["agreement"] = 2
    with pytest.raises(ReportError) as info:
        validate_report(bad)
    assert info.value.json_path == "$.results[0].agreement"


def test_falsehood_classes() -> None:
    scoring = Scoring.of(payment_experiment().contract)
    assert falsehood_class(scoring, "ESCALATE", "ESCALATE") == "no_effect"
    assert falsehood_class(scoring, "ESCALATE", "RELEASE") == "catastrophic"
    assert falsehood_class(scoring, "ESCALATE", "HOLD") == "changes_action"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "experiment.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_toml_factory_with_overrides(tmp_path: Path) -> None:
    path = _write(tmp_path, """
[experiment]
factory = "handoffs.examples.payment_lab:payment_experiment"
factory_args = { profile = "essay" }
name = "payment-override"

[tolerances]
agreement_epsilon = 0.1
gate_perturbations = ["none"]

[perturbations]
include = ["remove-decision-field:*"]

[[injection]]
case_id = "value-02"
field = "high_value"
value = false
""")
    experiment = load_experiment(path)
    assert experiment.name == "payment-override"
    assert experiment.tolerances.agreement_epsilon == 0.1
    assert [p.id for p in experiment.perturbations or ()] == [
        f"remove-decision-field:{s.name}" for s in experiment.contract.fields]
    report = run(experiment).report
    assert report["error_injection"]["case_id"] == "value-02"
    assert report["error_injection"]["altered_action"] == "RELEASE"
    assert report["governance_field_ablation"] == []


@pytest.mark.parametrize(("text", "match"), [
    ("[nonsense]\n", "unknown table"),
    ("[experiment\n", "invalid TOML"),
    ('[experiment]\ncontract = "no-such/1.0.0"\n', "unknown contract"),
    ('[experiment]\nfactory = "handoffs.examples.payment_lab:nope"\n', "has no"),
    ('[experiment]\nfactory = "not.a.module:x"\n', "cannot import"),
    ('[experiment]\ncontract = "payment-release/1.0.0"\ncolour = 1\n', "unknown experiment key"),
    ('[experiment]\ncontract = "payment-release/1.0.0"\n', "required without a factory"),
    ('[experiment]\nfactory = "handoffs.examples.payment_lab:payment_experiment"\n'
     '[[injection]]\ncase_id = "x"\n', "injection needs"),
    ('[experiment]\nfactory = "handoffs.examples.payment_lab:payment_experiment"\n'
     '[cases]\nnothing = 1\n', "unknown key 'nothing' in \\[cases\\]"),
    ('[experiment]\nfactory = "handoffs.examples.payment_lab:payment_experiment"\n'
     '[cases]\nstructure = "x"\n', "read only with cases.jsonl"),
    ('[experiment]\nfactory = "handoffs.examples.payment_lab:payment_experiment"\n'
     '[[strategy]]\nname = "x"\nencoder = "a:b"\nreceiver = "a:b"\ncolour = 1\n',
     "unknown strategy key"),
])
def test_toml_errors_explain_themselves(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(Exception, match=match) as info:
        load_experiment(_write(tmp_path, text), registry=PAYMENT_RELEASE)
    assert isinstance(info.value, ExperimentError | LookupError)


def test_a_toml_contract_id_needs_a_registry_that_holds_it(tmp_path: Path) -> None:
    path = _write(tmp_path, '[experiment]\ncontract = "payment-release/1.0.0"\n')
    with pytest.raises(UnknownContract, match=r"unknown contract 'payment-release/1\.0\.0'"):
        load_experiment(path)
    with pytest.raises(ExperimentError, match="required without a factory"):
        load_experiment(path, registry=PAYMENT_RELEASE)


def test_tokens_progress_and_a_declared_reference(capsys: pytest.CaptureFixture[str]) -> None:
    base = payment_experiment(profile="essay")
    experiment = attrs.evolve(
        base,
        tokenizer=lambda text: len(text.split(",")),
        reference=lambda case: base.contract.decide(case.state()),
    )
    report = run(experiment, progress=True).report
    plain = run(base).report
    assert report["strategy_results"] == plain["strategy_results"]
    assert all(r["mean_tokens"] is not None and r["mean_tokens"] > 0
               for r in report["results"])
    assert all(r["mean_tokens"] is None for r in plain["results"])
    capsys.readouterr()


def test_hypothesis_cases_from_toml(tmp_path: Path) -> None:
    path = _write(tmp_path, """
[experiment]
factory = "handoffs.examples.payment_lab:payment_experiment"
factory_args = { profile = "essay" }

[cases]
hypothesis = 25
seed = 3

[evidence]
state = "state"
""")
    experiment = load_experiment(path)
    encoder = ReceiptEncoder(experiment.contract, state_of=operator.attrgetter("state"),
                             uncertainty_of=resolved)
    strategy = Strategy(name="receipt", encoder=encoder,
                        receiver=ReferenceReceiver(experiment.contract, defaults=False))
    experiment = attrs.evolve(experiment, strategies=(strategy,), subject=None, injections=())
    report = run(experiment).report
    assert report["experiment"]["cases"] == 25
    assert report["experiment"]["case_source"] == "hypothesis:payment-release/1.0.0:25:seed=3"
    assert report["strategy_results"][0]["agreement"] == 1.0
