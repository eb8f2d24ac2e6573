"""A tank-valve contract and its experiment: the lab engine's world on a contract other
than the payment example's. Test modules import it from here rather than from one another.
"""

from __future__ import annotations

import enum
import operator
import warnings
from datetime import UTC, datetime
from typing import Any

import attrs

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
from handoffs.examples.payment_lab import FixedClock
from handoffs.lab import Experiment, GeneratedCases, Population, Strategy
from handoffs.receivers import (
    AdvisoryActionReceiver,
    Gate,
    StrictContractReceiver,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
)
from worlds import TEST_DRAWS

__all__ = ["GOVERNANCE", "TANK", "ActionEncoder", "Grade", "TankState", "Valve", "resolved",
           "tank_experiment"]


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
        "population": Population(draws=TEST_DRAWS, seed=1),
        "strategies": (
            Strategy(name="receipt", encoder=encoder, receiver=StrictContractReceiver(gate)),
            Strategy(name="action", encoder=ActionEncoder(),
                     receiver=AdvisoryActionReceiver(TANK)),
        ),
        "governance": GOVERNANCE,
    }
    return Experiment(**{**defaults, **changes})
