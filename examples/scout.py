"""The scout and the pilot: the action set changes (essay, Part II).

A scout drone surveys a fork and reports which branch is blocked, how confident it is
and what the visibility was. Under ``scout-pilot/1.0.0`` the pilot can only turn LEFT
or RIGHT. A one-bit message ("RIGHT") is then sufficient when the scout may choose
the turn (the pilot executes a DECIDE message), and insufficient when the pilot must
verify it: a verifying pilot needs the obstacle's location, the scout's confidence and
a fresh observation, which the decision receipt carries.

``scout-pilot/2.0.0`` gives the pilot two more actions, STOP and LAND. The survey does
not change, and the old one-bit message stays true; but low visibility, irrelevant
while the pilot had to pick a branch, now makes landing the right call. The lab shows
the old message insufficient (agreement, regret, hard violations), the contract diff
flags the widened action set as breaking, and the minimal-message search now needs
visibility.

Run from the repository root::

    python examples/scout.py [--out DIR]
    handoffs lab run examples/scout.toml --out scout-report/

Synthetic data only: 32 surveys, four variants of each of eight combinations of
blocked branch, confirmed or unconfirmed obstacle, and good or low visibility.
"""

from __future__ import annotations

import argparse
import enum
import json
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import attrs

from handoffs.contracts import (
    Authority,
    Contract,
    EvidenceFresh,
    Governance,
    GovernanceService,
    HardConstraint,
    LossMatrix,
    ReceiptEncoder,
    Registry,
    decision_field,
)
from handoffs.contracts.policy import AllOf, Is, Over, Policy, Rule, Under
from handoffs.contracts.versions import ContractDiff, diff
from handoffs.examples.payment_lab import FixedClock
from handoffs.lab import Experiment, IterableCases, Strategy, Tolerances, run
from handoffs.lab.perturbations import ActionAdded, standard_perturbations
from handoffs.receivers import (
    AdvisoryActionReceiver,
    AuthoritativeActuator,
    Gate,
    GovernanceChecker,
    InMemoryEvidenceResolver,
    ResolvedEvidence,
    StrictContractReceiver,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
)

DECISION_TIME: Final = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
"""The instant the pilot decides (every survey was observed two minutes before)."""
CONFIRMED: Final = 0.9
"""The confidence from which an obstacle report counts as confirmed."""


class Branch(enum.Enum):
    """A branch of the fork."""

    LEFT = "LEFT"
    RIGHT = "RIGHT"


class Visibility(enum.Enum):
    """Visibility at the fork when the scout observed it."""

    GOOD = "GOOD"
    LOW = "LOW"


class Turn(enum.Enum):
    """The pilot's actions under 1.0.0: it must take a branch."""

    LEFT = "LEFT"
    RIGHT = "RIGHT"


class Manoeuvre(enum.Enum):
    """The pilot's actions under 2.0.0: it may also hold position or land."""

    LEFT = "LEFT"
    RIGHT = "RIGHT"
    STOP = "STOP"
    LAND = "LAND"


@attrs.frozen
class ScoutState:
    """What the scout's survey establishes about the fork (the same in both versions)."""

    blocked: Branch = decision_field("The branch the scout reports blocked.")
    confidence: float = decision_field(
        "The scout's confidence in that obstacle report.", minimum=0, maximum=1)
    visibility: Visibility = decision_field(
        "Visibility at the fork when the scout observed it.", if_missing=Visibility.GOOD)


_TRIGGER: Final = ("Recompute if the obstacle report, its confidence, the visibility or the "
                   "observation changes, or if the pilot's action set changes.")
_OBSERVATION: Final = EvidenceFresh("observation", max_age=timedelta(minutes=5),
                                    on_missing="ESCALATE")
_AVOID_LEFT: Final = AllOf((Is("blocked", Branch.LEFT),
                            Over("confidence", CONFIRMED, inclusive=True)))

SCOUT_V1: Final = Contract(
    name="scout-pilot",
    version="1.0.0",
    description="A scout reports the fork ahead; the pilot turns LEFT or RIGHT.",
    actions=Turn,
    state=ScoutState,
    policy=Policy(
        rules=(Rule("avoid-left", _AVOID_LEFT, Turn.RIGHT),),
        default=Turn.LEFT,
        default_name="flight-plan",
    ),
    loss=LossMatrix({
        (Turn.LEFT, Turn.LEFT): 0, (Turn.RIGHT, Turn.RIGHT): 0,
        (Turn.LEFT, Turn.RIGHT): 100,  # into the confirmed obstacle
        (Turn.RIGHT, Turn.LEFT): 60,   # off the flight plan, or into the right obstacle
    }),
    hard_constraints=(
        HardConstraint("left-into-confirmed-obstacle", chosen=Turn.LEFT,
                       allowed_references=frozenset({Turn.LEFT}),
                       description="LEFT when the reference is RIGHT: the left branch is "
                                   "confirmed blocked."),
    ),
    context=(_OBSERVATION,),
    fail_closed_action=Turn.LEFT,
    counterfactual_trigger=_TRIGGER,
)
"""``scout-pilot/1.0.0``: leave the flight plan (LEFT) only for a confirmed left obstacle."""

_L, _R, _S, _D = Manoeuvre.LEFT, Manoeuvre.RIGHT, Manoeuvre.STOP, Manoeuvre.LAND

SCOUT_V2: Final = Contract(
    name="scout-pilot",
    version="2.0.0",
    description="A scout reports the fork ahead; the pilot turns LEFT or RIGHT, holds "
                "position (STOP) or lands (LAND).",
    actions=Manoeuvre,
    state=ScoutState,
    policy=Policy(
        rules=(
            Rule("low-visibility", Is("visibility", Visibility.LOW), _D),
            Rule("unconfirmed-obstacle", Under("confidence", CONFIRMED), _S),
            Rule("avoid-left", _AVOID_LEFT, _R),
        ),
        default=_L,
        default_name="flight-plan",
    ),
    loss=LossMatrix({
        (_L, _L): 0, (_R, _R): 0, (_S, _S): 0, (_D, _D): 0,
        (_L, _R): 100, (_R, _L): 100,  # into a confirmed obstacle
        (_L, _D): 80, (_R, _D): 80,    # flying a branch it cannot see
        (_S, _D): 20,                  # hovering in low visibility
        (_L, _S): 30, (_R, _S): 30,    # turning on an unconfirmed report
        (_D, _L): 5, (_D, _R): 5, (_D, _S): 5,  # an unnecessary landing
        (_S, _L): 2, (_S, _R): 2,      # an unnecessary hold
    }),
    hard_constraints=(
        HardConstraint("left-into-hazard", chosen=_L, allowed_references=frozenset({_L, _S}),
                       description="LEFT when the reference is RIGHT (left confirmed "
                                   "blocked) or LAND (too little visibility to fly a branch)."),
        HardConstraint("right-into-hazard", chosen=_R, allowed_references=frozenset({_R, _S}),
                       description="RIGHT when the reference is LEFT (right confirmed "
                                   "blocked) or LAND."),
    ),
    context=(_OBSERVATION,),
    fail_closed_action=_S,
    counterfactual_trigger=_TRIGGER,
)
"""``scout-pilot/2.0.0``: the same state and evidence, two more actions."""


# --------------------------------------------------------------------------- cases


@attrs.frozen
class ScoutSurvey:
    """The scout's full record of one fork (the sender's evidence)."""

    case_id: str
    blocked: Branch
    confidence: float
    visibility: Visibility
    observed_at: datetime
    terrain: str

    def state(self) -> ScoutState:
        """The decisive state the survey establishes."""
        return ScoutState(blocked=self.blocked, confidence=self.confidence,
                          visibility=self.visibility)

    @property
    def evidence_refs(self) -> tuple[str, ...]:
        """The observation record and the terrain map."""
        return (f"evidence://scout/{self.case_id}/observation",
                f"evidence://scout/{self.case_id}/terrain-map")


_HIGH: Final = (0.92, 0.95, 0.97, 0.99)
_LOW: Final = (0.55, 0.65, 0.75, 0.85)


CLAIMS_VERIFIED_UPSTREAM = (
    "the receivers act on what a well-formed message says; the example trusts its "
    "senders' claims (the lab measures what a false one would cost)")
"""The example's waiver of the gate's default bound on surviving catastrophic falsehoods."""

def surveys(variants: int = 4) -> Iterator[ScoutSurvey]:
    """The synthetic fixture: ``variants`` surveys of each of eight combinations of
    blocked branch, confirmed (confidence ≥ 0.9) or not, and visibility.
    """
    for blocked in Branch:
        for confirmed in (True, False):
            for visibility in Visibility:
                for v in range(variants):
                    confidence = (_HIGH if confirmed else _LOW)[v % 4]
                    name = (f"{blocked.value.lower()}-"
                            f"{'confirmed' if confirmed else 'unconfirmed'}-"
                            f"{visibility.value.lower()}-{v + 1:02d}")
                    yield ScoutSurvey(
                        case_id=name, blocked=blocked, confidence=confidence,
                        visibility=visibility,
                        observed_at=DECISION_TIME - timedelta(minutes=2),
                        terrain=("Synthetic terrain map: ridge lines, tree cover and the "
                                 "fork's geometry, none of it decisive. ") * (4 + v),
                    )


GOVERNANCE: Final = GovernanceService(
    sender="scout", receiver="pilot", policy_version="FLIGHT-OPS-3",
    valid_until=datetime(2027, 1, 1, tzinfo=UTC), may_decide=True,
)
"""The flight-operations governance stamp (the scout may be authorised to DECIDE)."""


def evidence_store(cases: Iterator[ScoutSurvey] | None = None) -> InMemoryEvidenceResolver:
    """The pilot's evidence service: every survey's observation and terrain map."""
    documents = {}
    for survey in cases if cases is not None else surveys():
        observation, terrain = survey.evidence_refs
        documents[observation] = ResolvedEvidence(
            content=json.dumps({"blocked": survey.blocked.value,
                                "confidence": survey.confidence}).encode(),
            observed_at=survey.observed_at)
        documents[terrain] = ResolvedEvidence(content=survey.terrain.encode(),
                                              observed_at=survey.observed_at)
    return InMemoryEvidenceResolver(documents)


# ------------------------------------------------------------- encoders, receivers


@attrs.frozen
class OneBitEncoder:
    """The scout's one-bit message: the turn it would take under 1.0.0."""

    name: str = "one_bit"

    def encode(self, evidence: ScoutSurvey) -> dict[str, Any]:
        """``{"action": "LEFT" | "RIGHT"}``."""
        return {"action": SCOUT_V1.decide(evidence.state()).value}


def receipt_encoder_v1() -> ReceiptEncoder[ScoutSurvey, ScoutState, Turn]:
    """The 1.0.0 decision receipt: blocked branch, confidence, visibility."""
    return ReceiptEncoder(contract=SCOUT_V1, state_of=ScoutSurvey.state)


def receipt_encoder_v2() -> ReceiptEncoder[ScoutSurvey, ScoutState, Manoeuvre]:
    """The 2.0.0 decision receipt (the same state)."""
    return ReceiptEncoder(contract=SCOUT_V2, state_of=ScoutSurvey.state)


def pilot_gate(contract: Contract[Any, Any], *,
               evidence: InMemoryEvidenceResolver | None = None) -> Gate:
    """The pilot's gate for the lab's unsigned receipts (``evidence``: the fixture's).

    **Unsafe by declaration:** the synthetic receipts carry no proofs, so the gate uses
    :class:`~handoffs.receivers.UnsafeNoProofs`; every other step runs, including the
    observation-freshness dependency against a fixed clock.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeConfigurationWarning)
        return Gate(identity="pilot", trust=UnsafeNoProofs(), registry=Registry.of(contract),
                    roles={"pilot"}, evidence=evidence or evidence_store(), replay=None,
                    clock=FixedClock(DECISION_TIME))


def pilot_v1() -> StrictContractReceiver:
    """A verifying pilot under 1.0.0: recomputes from the receipt's decisive state."""
    return StrictContractReceiver(pilot_gate(SCOUT_V1))


def pilot_v2() -> StrictContractReceiver:
    """A verifying pilot under 2.0.0."""
    return StrictContractReceiver(pilot_gate(SCOUT_V2))


def verifying_pilot_v1() -> AdvisoryActionReceiver:
    """A pilot that must verify but gets a bare verdict: it keeps to its flight plan."""
    return AdvisoryActionReceiver(SCOUT_V1)


def actuator_v1() -> AuthoritativeActuator:
    """A pilot that executes the scout's DECIDE message under 1.0.0."""
    return AuthoritativeActuator(GovernanceChecker(SCOUT_V1, required=Governance.FIELDS))


def actuator_v2() -> AuthoritativeActuator:
    """A pilot that executes the scout's DECIDE message under 2.0.0."""
    return AuthoritativeActuator(GovernanceChecker(SCOUT_V2, required=Governance.FIELDS))


# --------------------------------------------------------------------- experiments


def _cases() -> IterableCases:
    return IterableCases(surveys, description="python:examples.scout.surveys")


def scout_v1_experiment() -> Experiment:
    """1.0.0: the one-bit message authorised and verified, and the decision receipt.

    Its boundary perturbations add LAND (for low visibility) and STOP (for an
    unconfirmed obstacle) to the action set one at a time: the lab predicts 2.0.0's
    finding before 2.0.0 exists.
    """
    one_bit = OneBitEncoder()
    loss_land = {("LEFT", "LAND"): 80, ("RIGHT", "LAND"): 80, ("LAND", "LEFT"): 5,
                 ("LAND", "RIGHT"): 5}
    loss_stop = {("LEFT", "STOP"): 30, ("RIGHT", "STOP"): 30, ("STOP", "LEFT"): 2,
                 ("STOP", "RIGHT"): 2}
    return Experiment(
        name="scout-pilot-v1",
        description="The one-bit turn against the decision receipt while the pilot can "
                    "only turn.",
        contract=SCOUT_V1,
        cases=_cases(),
        strategies=(
            Strategy(name="one_bit_authorised", encoder=one_bit, receiver=actuator_v1(),
                     authority=Authority.DECIDE),
            Strategy(name="one_bit_verified", encoder=one_bit, receiver=verifying_pilot_v1()),
            Strategy(name="decision_receipt", encoder=receipt_encoder_v1(),
                     receiver=pilot_v1(), gated=True),
        ),
        governance=GOVERNANCE,
        state_of=ScoutSurvey.state,
        subject="decision_receipt",
        perturbations=(
            *standard_perturbations(SCOUT_V1),
            ActionAdded(action="LAND", when=Is("visibility", Visibility.LOW),
                        before="avoid-left", loss=loss_land, default_loss=5),
            ActionAdded(action="STOP", when=Under("confidence", CONFIRMED),
                        before="avoid-left", loss=loss_stop, default_loss=2),
        ),
        tolerances=Tolerances(claims_verified_upstream=CLAIMS_VERIFIED_UPSTREAM),
        assumptions={
            "case_mix": "Four synthetic surveys for each of eight combinations of blocked "
                        "branch, confirmed obstacle and visibility.",
            "receiver": "A DECIDE one-bit message is executed; an advisory one is refused "
                        "(the pilot keeps to its flight plan); receipts are recomputed.",
            "loss": "Synthetic: flying into a confirmed obstacle costs most.",
        },
    )


def scout_v2_experiment() -> Experiment:
    """2.0.0: the old one-bit message (still the 1.0.0 turn) against the receipt."""
    return Experiment(
        name="scout-pilot-v2",
        description="The pilot may now also STOP or LAND; the scout's survey and its "
                    "one-bit message are unchanged.",
        contract=SCOUT_V2,
        cases=_cases(),
        strategies=(
            Strategy(name="one_bit_authorised", encoder=OneBitEncoder(),
                     receiver=actuator_v2(), authority=Authority.DECIDE),
            Strategy(name="decision_receipt", encoder=receipt_encoder_v2(),
                     receiver=pilot_v2(), gated=True),
        ),
        governance=GOVERNANCE,
        state_of=ScoutSurvey.state,
        subject="decision_receipt",
        tolerances=Tolerances(claims_verified_upstream=CLAIMS_VERIFIED_UPSTREAM),
        assumptions={
            "case_mix": "The same 32 synthetic surveys as 1.0.0.",
            "receiver": "The old one-bit message is executed as sent; receipts are "
                        "recomputed under 2.0.0.",
            "loss": "Synthetic: flying a branch into an obstacle or into low visibility "
                    "costs most; an unnecessary landing or hold costs little.",
        },
    )


def contract_diff() -> ContractDiff:
    """The compatibility diff from 1.0.0 to 2.0.0."""
    return diff(SCOUT_V1, SCOUT_V2)


# -------------------------------------------------------------------------- report


def _row(report: dict[str, Any], strategy: str, perturbation: str = "none") -> dict[str, Any]:
    for row in report["results"]:
        if row["strategy"] == strategy and row["perturbation"] == perturbation:
            return dict(row)
    raise KeyError(f"{strategy} under {perturbation}")


def _line(report: dict[str, Any], strategy: str, label: str,
          perturbation: str = "none") -> str:
    row = _row(report, strategy, perturbation)
    return (f"  {label:<44} agreement {row['agreement']:.2f}  mean regret "
            f"{row['mean_regret']:6.2f}  hard violations {row['hard_violations']:2d}  "
            f"bytes {row['mean_bytes']:.0f}")


def _interval(name: str, lo: float, hi: float) -> str:
    # The search stops a bound one float short of a strict threshold: print "<" then.
    low, high = float(f"{lo:.6g}"), float(f"{hi:.6g}")
    return (f"{low:g} {'<' if lo > low else '<='} {name} "
            f"{'<' if hi < high else '<='} {high:g}")


def _describe(item: dict[str, Any]) -> str:
    if item["representation"] == "interval":
        return _interval(item["field"], item["interval"]["lo"], item["interval"]["hi"])
    if item["representation"] == "values":
        return f"{item['field']} in {{{', '.join(map(str, item['values']))}}}"
    return f"{item['field']}={item['value']}"


def minimal_lines(report: dict[str, Any]) -> list[str]:
    """One line per decision region: its action and its minimal sufficient message."""
    return [f"    {region['action']:<6} <- {'; '.join(_describe(m) for m in region['message'])}"
            f"  ({region['cases']} surveys)"
            for region in report["minimal_messages"]["regions"]]


def main(argv: list[str] | None = None) -> int:
    """Run both versions, print the conclusion, optionally write the reports."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--out", type=Path, help="write report-v1.json, report-v2.json "
                        "and diff.json here")
    args = parser.parse_args(argv)
    v1 = run(scout_v1_experiment()).report
    v2 = run(scout_v2_experiment()).report
    changes = contract_diff()
    print("The scout and the pilot: the action set changes.\n")
    print(f"{SCOUT_V1.id}: actions {', '.join(a.value for a in Turn)}; "
          f"{v1['experiment']['cases']} surveys")
    print(_line(v1, "one_bit_authorised", 'one bit, scout authorised (DECIDE)'))
    print(_line(v1, "one_bit_verified", "one bit, pilot must verify (ADVISE)"))
    print(_line(v1, "decision_receipt", "receipt: blocked, confidence, observation"))
    print(_line(v1, "one_bit_authorised", "one bit under action-added:LAND",
                "action-added:LAND"))
    minimal = v1["minimal_messages"]
    print(f"  minimal messages need {', '.join(minimal['fields_ever_needed'])}; never "
          f"{', '.join(minimal['fields_never_needed']) or 'nothing'}\n")
    print(f"{SCOUT_V2.id}: actions {', '.join(a.value for a in Manoeuvre)}; "
          "same surveys, same messages")
    print(_line(v2, "one_bit_authorised", "old one-bit message (DECIDE)"))
    print(_line(v2, "decision_receipt", "decision receipt"))
    dropped = _row(v2, "decision_receipt", "remove-decision-field:visibility")
    print(f"  {'receipt without visibility (GOOD assumed)':<44} agreement "
          f"{dropped['semantic_agreement']:.2f}  mean regret "
          f"{dropped['semantic_mean_regret']:6.2f}  hard violations "
          f"{dropped['semantic_hard_violations']:2d}")
    minimal = v2["minimal_messages"]
    print(f"  minimal messages need {', '.join(minimal['fields_ever_needed'])}:")
    print("\n".join(minimal_lines(v2)) + "\n")
    added = [a.value for a in Manoeuvre if a.value not in {t.value for t in Turn}]
    count = sum(f.code == "ACTION_ADDED" for f in changes.findings)
    print(f"diff {changes.old} -> {changes.new}: breaking={changes.breaking}, required bump "
          f"{changes.required_bump}; ACTION_ADDED x{count} ({', '.join(added)}) among "
          f"{len(changes.findings)} findings\n")
    old = _row(v2, "one_bit_authorised")
    print(f"Conclusion: the survey and the one-bit message did not change and stayed true, "
          f"but once the pilot may stop or land the old message agrees on "
          f"{old['agreement']:.0%} of surveys with {old['hard_violations']} hard violations. "
          "What makes a message sufficient is the decision it serves.")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        for name, value in (("report-v1.json", v1), ("report-v2.json", v2),
                            ("diff.json", changes.to_json())):
            (args.out / name).write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
