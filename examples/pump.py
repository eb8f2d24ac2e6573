"""The pump under two losses: the consequence changes (essay, Part II).

A reliability analyst estimates the probability ``p`` that a pump fails in the next
operating window and hands it to the loop controller, which continues or stops the
pump for inspection. Stopping costs 2 units; continuing risks ``p × h``, so the
controller stops when ``p × h > 2``, written as it reads:
``Field("failure_probability") * h > STOP_COST`` (exact interval arithmetic: a
certified interval whose risk straddles 2 leaves the decision open).

- ``pump-inspection/1.0.0`` (h = 10): the threshold is 0.20, and the coarse message
  "p < 0.10" is sufficient: every state it stands for is on the continue side.
- ``pump-inspection/2.0.0`` (h = 40, a safety-critical cooling loop): the threshold
  is 0.05 and the same message collapses states that need different actions (0.03
  continue, 0.08 stop). A certified interval such as [0.01, 0.04] is sufficient; a
  bare point estimate without a calibration reference fails the contract's context
  dependency. The minimal-message search returns the coarsest interval that does not
  straddle the threshold.

Run from the repository root::

    python examples/pump.py [--out DIR]
    handoffs lab run examples/pump.toml --out pump-report/

Synthetic data only: eight estimates below 0.10, each with a certified interval.
The lab's loss matrix is per action pair, not per state, so it charges the whole stop
cost (2) for an unnecessary stop and the whole failure consequence (h) for a wrong
continue: conservative bounds of the expected regrets ``2 − p·h`` and ``p·h − 2``.
"""

from __future__ import annotations

import argparse
import enum
import json
import math
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import attrs

from handoffs.contracts import (
    Contract,
    EvidenceFresh,
    GovernanceService,
    HardConstraint,
    Interval,
    LossMatrix,
    Receipt,
    ReceiptEncoder,
    Registry,
    Uncertainty,
    decision_field,
)
from handoffs.contracts.policy import Field, Policy, Rule
from handoffs.examples.payment_lab import FixedClock
from handoffs.lab import Experiment, IterableCases, Strategy, Tolerances, message_partition, run
from handoffs.receivers import (
    Decision,
    Gate,
    InMemoryEvidenceResolver,
    ResolvedEvidence,
    StrictContractReceiver,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
)

DECISION_TIME: Final = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
"""The instant the controller decides."""
STOP_COST: Final = 2.0
"""What stopping the pump for inspection costs, in the contract's units."""
CALIBRATION_VALIDITY: Final = timedelta(days=90)
"""How old the estimator's calibration record may be."""


class PumpAction(enum.Enum):
    """The loop controller's actions."""

    CONTINUE = "CONTINUE"
    STOP = "STOP"


@attrs.frozen
class PumpState:
    """The decisive fact: a certified failure probability (a point is a zero-width one)."""

    failure_probability: Interval = decision_field(
        "Certified probability that the pump fails in the next operating window.",
        minimum=0, maximum=1)


CLAIMS_VERIFIED_UPSTREAM = (
    "the receivers act on what a well-formed message says; the example trusts its "
    "senders' claims (the lab measures what a false one would cost)")
"""The example's waiver of the gate's default bound on surviving catastrophic falsehoods."""

def pump_contract(h: float, *, version: str) -> Contract[PumpState, PumpAction]:
    """The controller's contract when a failure costs ``h``: stop when ``p × h > 2``."""
    c, s = PumpAction.CONTINUE, PumpAction.STOP
    return Contract(
        name="pump-inspection",
        version=version,
        description=f"A reliability analyst hands a failure-probability estimate to the loop "
                    f"controller, which continues the pump or stops it for inspection "
                    f"(stop costs {STOP_COST:g}, a failure {h:g}).",
        actions=PumpAction,
        state=PumpState,
        policy=Policy(rules=(Rule("risk-above-threshold",
                                  Field("failure_probability") * h > STOP_COST, s),),
                      default=c, default_name="continue"),
        loss=LossMatrix({(c, c): 0, (s, s): 0, (s, c): STOP_COST, (c, s): h}),
        hard_constraints=(HardConstraint(
            "unsafe-continue", chosen=c, allowed_references=frozenset({c}),
            description="CONTINUE when the failure probability is above the threshold."),),
        context=(EvidenceFresh("calibration", max_age=CALIBRATION_VALIDITY,
                               on_missing="ESCALATE"),),
        fail_closed_action=s,
        counterfactual_trigger="Recompute if the estimate, its calibration or the cost of a "
                               "failure changes.",
    )


PUMP_H10: Final = pump_contract(10, version="1.0.0")
"""h = 10: threshold 0.20."""
PUMP_H40: Final = pump_contract(40, version="2.0.0")
"""h = 40, a safety-critical cooling loop: threshold 0.05."""
CONTRACTS: Final = {10.0: PUMP_H10, 40.0: PUMP_H40}


def contract_for(h: float) -> Contract[PumpState, PumpAction]:
    """The built contract for ``h`` (10 or 40)."""
    try:
        return CONTRACTS[float(h)]
    except KeyError:
        raise ValueError(f"h must be one of {sorted(CONTRACTS)}, got {h!r}") from None


# --------------------------------------------------------------------------- cases


@attrs.frozen
class PumpEstimate:
    """The analyst's record of one estimate (the sender's evidence)."""

    case_id: str
    estimate: float
    lo: float
    hi: float
    calibrated: bool

    def state(self) -> PumpState:
        """The certified interval the calibrated estimator gives."""
        return PumpState(failure_probability=Interval(self.lo, self.hi))

    @property
    def evidence_refs(self) -> tuple[str, ...]:
        """The estimate, and the calibration record when there is one."""
        refs: tuple[str, ...] = (f"evidence://pump/{self.case_id}/estimate",)
        if self.calibrated:
            refs += (f"evidence://pump/{self.case_id}/calibration",)
        return refs


FIXTURE: Final = (
    (0.01, 0.005, 0.02), (0.02, 0.01, 0.03), (0.03, 0.01, 0.04), (0.04, 0.03, 0.045),
    (0.06, 0.055, 0.07), (0.07, 0.06, 0.08), (0.08, 0.07, 0.09), (0.09, 0.08, 0.095),
)
"""(point estimate, certified interval) of each case, all below 0.10."""


def estimates(calibrated: bool = True) -> Iterator[PumpEstimate]:
    """The eight synthetic estimates (with or without a calibration record)."""
    for estimate, lo, hi in FIXTURE:
        yield PumpEstimate(case_id=f"estimate-{estimate:.2f}", estimate=estimate, lo=lo, hi=hi,
                           calibrated=calibrated)


def uncalibrated_estimates() -> Iterator[PumpEstimate]:
    """The same estimates from an estimator with no calibration record."""
    return estimates(calibrated=False)


GOVERNANCE: Final = GovernanceService(
    sender="reliability-analyst", receiver="loop-controller", policy_version="MAINT-2",
    valid_until=datetime(2027, 1, 1, tzinfo=UTC),
)


def evidence_store() -> InMemoryEvidenceResolver:
    """The controller's evidence service: estimates (an hour old) and calibration
    records (30 days old, within the 90-day validity).
    """
    documents = {}
    for case in estimates(calibrated=True):
        estimate, calibration = case.evidence_refs
        documents[estimate] = ResolvedEvidence(
            content=json.dumps({"estimate": case.estimate}).encode(),
            observed_at=DECISION_TIME - timedelta(hours=1))
        documents[calibration] = ResolvedEvidence(
            content=json.dumps({"interval": [case.lo, case.hi]}).encode(),
            observed_at=DECISION_TIME - timedelta(days=30))
    return InMemoryEvidenceResolver(documents)


# ------------------------------------------------------------- encoders, receivers


def _content(contract: Contract[Any, Any], interval: Interval) -> dict[str, Any]:
    outcome = contract.evaluate({"failure_probability": interval})
    proposed = outcome.action if outcome.action is not None else contract.fail_closed_action
    return {
        "proposed_action": proposed.value,
        "decision_state": {"failure_probability": {"lo": interval.lo, "hi": interval.hi}},
        "uncertainty": Uncertainty.RESOLVED.value,
        "counterfactual_trigger": contract.counterfactual_trigger,
    }


@attrs.frozen
class CoarseEncoder:
    """Rounds the estimate into a bucket of ``width``: 0.03 and 0.08 both become
    [0, 0.1], the message "p < 0.10".
    """

    contract: Contract[Any, Any]
    width: float = 0.1
    name: str = "coarse"

    def encode(self, evidence: PumpEstimate) -> dict[str, Any]:
        """A receipt whose failure probability is the estimate's bucket."""
        k = math.floor(evidence.estimate / self.width)
        return _content(self.contract, Interval(k * self.width, (k + 1) * self.width))


@attrs.frozen
class PointEncoder:
    """Sends the bare point estimate as a zero-width interval."""

    contract: Contract[Any, Any]
    name: str = "point_estimate"

    def encode(self, evidence: PumpEstimate) -> dict[str, Any]:
        """A receipt whose failure probability is ``[estimate, estimate]``."""
        return _content(self.contract, Interval.point(evidence.estimate))


def coarse_encoder(h: float = 40) -> CoarseEncoder:
    """The "p < 0.10" encoder for the contract of ``h``."""
    return CoarseEncoder(contract_for(h))


def certified_encoder(h: float = 40) -> ReceiptEncoder[PumpEstimate, PumpState, PumpAction]:
    """The certified-interval receipt for the contract of ``h``."""
    return ReceiptEncoder(contract=contract_for(h), state_of=PumpEstimate.state,
                          name="certified_interval")


def point_encoder(h: float = 40) -> PointEncoder:
    """The bare point-estimate encoder for the contract of ``h``."""
    return PointEncoder(contract_for(h))


def controller(h: float = 40) -> StrictContractReceiver:
    """The loop controller: recomputes from the receipt, checks the calibration record.

    **Unsafe by declaration:** the synthetic receipts carry no proofs, so its gate uses
    :class:`~handoffs.receivers.UnsafeNoProofs`; the context and evidence steps run.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeConfigurationWarning)
        gate = Gate(identity="loop-controller", trust=UnsafeNoProofs(),
                    registry=Registry.of(contract_for(h)), evidence=evidence_store(),
                    replay=None, clock=FixedClock(DECISION_TIME))
    return StrictContractReceiver(gate)


# --------------------------------------------------------------------- experiments


def pump_experiment(h: float = 40) -> Experiment:
    """The coarse message against the certified interval, for failure cost ``h``."""
    contract = contract_for(h)
    return Experiment(
        name=f"pump-h{h:g}",
        description=f"Continue or stop a pump when a failure costs {h:g}: threshold "
                    f"{STOP_COST / h:g}.",
        contract=contract,
        cases=IterableCases(estimates, description="python:examples.pump.estimates"),
        strategies=(
            Strategy(name="coarse", encoder=coarse_encoder(h), receiver=controller(h),
                     receipts=True),
            Strategy(name="certified_interval", encoder=certified_encoder(h),
                     receiver=controller(h), gated=True),
        ),
        governance=GOVERNANCE,
        state_of=PumpEstimate.state,
        subject="certified_interval",
        tolerances=Tolerances(claims_verified_upstream=CLAIMS_VERIFIED_UPSTREAM),
        assumptions={
            "case_mix": "Eight synthetic estimates below 0.10, each with a calibrated "
                        "certified interval.",
            "receiver": "The controller recomputes from the receipt and fails closed "
                        "(STOP) when the interval straddles its threshold.",
            "loss": "Per action pair: an unnecessary stop costs 2, a wrong continue h "
                    "(conservative bounds of the expected regret).",
        },
    )


def uncalibrated_experiment(h: float = 40) -> Experiment:
    """Bare point estimates from an estimator with no calibration record."""
    contract = contract_for(h)
    return Experiment(
        name=f"pump-h{h:g}-uncalibrated",
        description="The same estimates sent as bare points, without a calibration "
                    "reference.",
        contract=contract,
        cases=IterableCases(uncalibrated_estimates,
                            description="python:examples.pump.uncalibrated_estimates"),
        strategies=(Strategy(name="point_estimate", encoder=point_encoder(h),
                             receiver=controller(h), receipts=True, gated=True),),
        governance=GOVERNANCE,
        state_of=PumpEstimate.state,
        perturbations=(),
    )


def decide_one(case: PumpEstimate, encoder: Any, *, h: float = 40) -> Decision:
    """Build one receipt for ``case`` with ``encoder`` and let the controller decide it."""
    contract = contract_for(h)
    receipt = Receipt.build(contract, encoder.encode(case),
                            GOVERNANCE.stamp(case_id=case.case_id,
                                             evidence_refs=case.evidence_refs))
    return controller(h).receive(receipt.to_json())


# -------------------------------------------------------------------------- report


def _row(report: dict[str, Any], strategy: str, perturbation: str = "none") -> dict[str, Any]:
    for row in report["results"]:
        if row["strategy"] == strategy and row["perturbation"] == perturbation:
            return dict(row)
    raise KeyError(f"{strategy} under {perturbation}")


def _line(report: dict[str, Any], strategy: str, label: str) -> str:
    row = _row(report, strategy)
    return (f"  {label:<22} agreement {row['agreement']:.2f}  mean regret "
            f"{row['mean_regret']:5.2f}  hard violations {row['hard_violations']}  "
            f"verdicts {row['verdicts']}")


def _interval(lo: float, hi: float) -> str:
    low, high = float(f"{lo:.6g}"), float(f"{hi:.6g}")
    return f"{low:g} {'<' if lo > low else '<='} p {'<' if hi < high else '<='} {high:g}"


def determines(contract: Contract[Any, Any], interval: Interval) -> bool:
    """Whether a receiver that reads only ``interval`` can decide (it does not straddle
    the threshold), by the contract's three-valued evaluation.
    """
    return contract.evaluate({"failure_probability": interval}).determined


def minimal_lines(report: dict[str, Any], contract: Contract[Any, Any]) -> list[str]:
    """The coarsest sufficient interval of each decision region, checked against the
    contract's three-valued evaluation.
    """
    lines = []
    for region in report["minimal_messages"]["regions"]:
        (item,) = region["message"]
        bounds = Interval(item["interval"]["lo"], item["interval"]["hi"])
        note = "" if determines(contract, bounds) else (
            f"  [not determined: straddles {contract.policy.thresholds()[0][1]:g}]")
        lines.append(f"    {region['action']:<8} <- {_interval(bounds.lo, bounds.hi)}"
                     f"  ({region['cases']} estimates){note}")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the pump under both losses, print the conclusion, optionally write reports."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--out", type=Path, help="write the reports here")
    args = parser.parse_args(argv)
    reports: dict[str, dict[str, Any]] = {}
    print("The pump under two losses: the consequence changes.")
    print(f"Stopping costs {STOP_COST:g}; continuing risks p x h; stop when p x h > 2 (p > 2/h).\n")
    for h in (10, 40):
        contract = contract_for(h)
        experiment = pump_experiment(h)
        report = reports[f"h{h}"] = run(experiment).report
        partition = message_partition(experiment, "coarse", members=("decision_state",))
        print(f"h = {h} ({contract.id}, threshold {STOP_COST / h:.2f}), "
              f"{report['experiment']['cases']} calibrated estimates below 0.10")
        print(_line(report, "coarse", 'coarse "p < 0.10"'))
        print(_line(report, "certified_interval", "certified interval"))
        if partition.refines:
            print(f"  the coarse message sends {len(partition.cells)} message(s) for "
                  f"{partition.cases} estimates and separates every decision region")
        idle = [c["perturbation"] for c in report["gate"]["checks"]
                if c["metric"] == "control_falsifies" and not c["passed"]]
        if idle:
            print(f"  every estimate here needs the same action: the {' and '.join(idle)} "
                  "controls do as well, so the release gate says the channel does no work")
        for cell in partition.collapsed:
            bucket = cell.message["decision_state"]["failure_probability"]
            needs = "; ".join(
                f"{a}: {', '.join(c.removeprefix('estimate-') for c in cell.cases_for(a))}"
                for a in cell.actions)
            print(f"  collapsed: the message p in [{bucket['lo']:g}, {bucket['hi']:g}] stands "
                  f"for estimates that need different actions ({needs})")
        print("  minimal messages:")
        print("\n".join(minimal_lines(report, contract)))
        print()
    three = next(c for c in estimates() if c.estimate == 0.03)
    four = next(c for c in uncalibrated_estimates() if c.estimate == 0.04)
    interval = decide_one(three, certified_encoder(40))
    bare = decide_one(four, point_encoder(40))
    backed = decide_one(attrs.evolve(four, calibrated=True), point_encoder(40))
    uncalibrated = reports["h40-uncalibrated"] = run(uncalibrated_experiment(40)).report
    print("h = 40, one case at a time:")
    print(f"  certified interval [{three.lo:g}, {three.hi:g}] with a calibration reference: "
          f"{interval.verdict.value} {interval.action}")
    print(f"  bare point {four.estimate:g}, no calibration reference: {bare.verdict.value} "
          f"{bare.action} ({bare.reasons[0].code} at step {int(bare.reasons[0].step)}: "
          f"{bare.reasons[0].message})")
    print(f"  the same point with a calibration reference: {backed.verdict.value} "
          f"{backed.action}")
    print(_line(uncalibrated, "point_estimate", "bare points, lab run"))
    coarse = _row(reports["h40"], "coarse")
    print(f"\nConclusion: the evidence and the actions did not change; the loss did. "
          f"\"p < 0.10\" is sufficient at h = 10 and agrees on {coarse['agreement']:.0%} at "
          "h = 40. What the controller needs is an interval that does not straddle its "
          "threshold, and the calibration that makes the number mean something.")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        for name, value in reports.items():
            (args.out / f"report-{name}.json").write_text(json.dumps(value, indent=2) + "\n",
                                                          encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
