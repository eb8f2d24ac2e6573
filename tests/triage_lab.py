"""An emergency-triage contract shaped like issue 31's (the population tests' example).

RESUS / URGENT / ROUTINE / DISCHARGE from a certified sepsis risk (an interval with cuts
at 0.1 and 0.3, read first: a risk straddling a cut leaves the decision undetermined and
the receiver fails closed with REASSESS), two vitals (SpO2 with a benign default of 98,
heart rate) and an override flag (a compromised airway, defaulting to ``False`` when
missing). The hard constraint: never discharge a patient whose airway is compromised.
Shared by the population tests; not part of the library.
"""

from __future__ import annotations

import enum
import operator
import warnings
from datetime import UTC, datetime
from typing import Any, Final

import attrs

from handoffs.contracts import (
    Contract,
    GovernanceService,
    HardConstraint,
    Interval,
    LossMatrix,
    ReceiptEncoder,
    Registry,
    Uncertainty,
    decision_field,
)
from handoffs.contracts.policy import Field, Is, Over, Policy, Rule, Under
from handoffs.examples.payment_lab import FixedClock
from handoffs.lab import Experiment, GeneratedCases, Strategy
from handoffs.receivers import (
    Gate,
    StrictContractReceiver,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
)

__all__ = ["TRIAGE", "Acuity", "TriageState", "triage_experiment"]


class Acuity(enum.Enum):
    """Where the patient goes."""

    RESUS = "RESUS"
    URGENT = "URGENT"
    ROUTINE = "ROUTINE"
    DISCHARGE = "DISCHARGE"
    REASSESS = "REASSESS"


@attrs.frozen
class TriageState:
    """The decisive facts of one emergency-department arrival."""

    sepsis_risk: Interval = decision_field("Certified sepsis risk.", minimum=0.0, maximum=1.0)
    spo2: int = decision_field("Oxygen saturation, %.", if_missing=98, minimum=50, maximum=100)
    heart_rate: int = decision_field("Heart rate, bpm.", minimum=20, maximum=220)
    airway_compromised: bool = decision_field("The airway is compromised (override).",
                                              if_missing=False)


def _loss() -> LossMatrix[Acuity]:
    order = [Acuity.RESUS, Acuity.URGENT, Acuity.ROUTINE, Acuity.DISCHARGE]

    def loss(c: Acuity, r: Acuity) -> float:
        if c is r:
            return 0.0
        if Acuity.REASSESS in (c, r):  # a delay: costs the same whatever the truth
            return 1.0
        steps = order.index(c) - order.index(r)
        return 3.0 * steps if steps > 0 else float(-steps)  # under-triage costs more

    return LossMatrix({(c, r): loss(c, r) for c in Acuity for r in Acuity})


TRIAGE: Final = Contract(
    name="ed-triage",
    version="1.0.0",
    description="Emergency-department triage.",
    actions=Acuity,
    state=TriageState,
    policy=Policy(rules=(
        Rule("septic", Field("sepsis_risk") > 0.3, Acuity.RESUS),
        Rule("at-risk", Field("sepsis_risk") > 0.1, Acuity.URGENT),
        Rule("airway", Is("airway_compromised", True), Acuity.RESUS),
        Rule("hypoxic", Under("spo2", 90), Acuity.URGENT),
        Rule("tachycardic", Over("heart_rate", 120), Acuity.ROUTINE),
    ), default=Acuity.DISCHARGE),
    loss=_loss(),
    fail_closed_action=Acuity.REASSESS,
    counterfactual_trigger="a change in risk, vitals or the airway",
    hard_constraints=(
        HardConstraint("no-discharge-with-airway", chosen=Acuity.DISCHARGE,
                       when=Is("airway_compromised", True)),
    ),
)
GOVERNANCE: Final = GovernanceService(sender="triage-nurse", receiver="ed-physician",
                                      policy_version="ED-1",
                                      valid_until=datetime(2027, 1, 1, tzinfo=UTC))


def _resolved(_: Any) -> Uncertainty:
    return Uncertainty.RESOLVED


def triage_experiment(**changes: Any) -> Experiment:
    """The triage experiment over 60 generated cases; ``changes`` override its parts."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeConfigurationWarning)
        gate = Gate(identity="ed-physician", trust=UnsafeNoProofs(),
                    registry=Registry.of(TRIAGE), replay=None, clock=FixedClock())
    encoder = ReceiptEncoder(TRIAGE, state_of=operator.attrgetter("state"),
                             uncertainty_of=_resolved)
    defaults: dict[str, Any] = {
        "name": "ed-triage-lab",
        "contract": TRIAGE,
        "cases": GeneratedCases(TRIAGE, 60, seed=1),
        "strategies": (
            Strategy(name="receipt", encoder=encoder, receiver=StrictContractReceiver(gate)),
        ),
        "governance": GOVERNANCE,
    }
    return Experiment(**{**defaults, **changes})
