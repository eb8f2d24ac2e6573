"""pump-maintenance 1.0.0: a maintenance planner keeps a pump running, reduces its
load or stops it, from a certified failure probability and the cost of a failure."""

import enum
import warnings
from datetime import UTC, datetime

import attrs

from handoffs.contracts import (
    Contract,
    GovernanceService,
    HardConstraint,
    Interval,
    LossMatrix,
    ReceiptEncoder,
    decision_field,
)
from handoffs.contracts.policy import Field, Is, Policy, Rule
from handoffs.receivers import (
    Gate,
    StrictContractReceiver,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
)


class Action(enum.Enum):
    """What the maintenance planner may do."""

    CONTINUE = "CONTINUE"
    REDUCE_LOAD = "REDUCE_LOAD"
    STOP = "STOP"


@attrs.frozen
class PumpState:
    """The decisive facts about one pump."""

    failure_probability: Interval = decision_field(
        "Certified probability that the pump fails before the next inspection.",
        minimum=0.0, maximum=1.0)
    consequence: float = decision_field(
        "Cost of a failure, in thousands.", minimum=0.0, maximum=1000.0)
    calibrated: bool = decision_field("The failure model was calibrated this quarter.")


C, R, S = Action.CONTINUE, Action.REDUCE_LOAD, Action.STOP

MY_CONTRACT = Contract(
    name="pump-maintenance",
    version="1.0.0",
    description="A monitoring agent hands a pump's condition to the maintenance planner.",
    actions=Action,
    state=PumpState,
    policy=Policy(
        rules=(
            Rule("expected-loss-high",
                 Field("failure_probability") * Field("consequence") > 2, S),
            Rule("uncalibrated", Is("calibrated", False), R),
        ),
        default=C,
        default_name="routine",
    ),
    loss=LossMatrix({
        (C, C): 0, (R, R): 0, (S, S): 0,
        (C, R): 20, (C, S): 100,
        (R, C): 2, (R, S): 40,
        (S, C): 5, (S, R): 3,
    }),
    hard_constraints=(
        HardConstraint("unsafe-continue", chosen=C, allowed_references={C},
                       description="CONTINUE when the reference action is not CONTINUE."),
    ),
    fail_closed_action=S,
    counterfactual_trigger="Recompute when the failure estimate or its cost changes.",
)


# ---- for the lab: how a case becomes a receipt, and who decides it ----

GOVERNANCE = GovernanceService(
    sender="monitoring-agent", receiver="maintenance-planner",
    policy_version="PM-1", valid_until=datetime(2027, 1, 1, tzinfo=UTC),
)


def encoder() -> ReceiptEncoder:
    """The monitoring agent's encoding: the full decisive state."""
    return ReceiptEncoder(contract=MY_CONTRACT, state_of=lambda case: case.state)


def planner() -> StrictContractReceiver:
    """The planner recomputes the policy from the receipt (unsigned in the lab)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeConfigurationWarning)
        gate = Gate(identity="maintenance-planner", trust=UnsafeNoProofs(),
                    registry=MY_CONTRACT, replay=None)
    return StrictContractReceiver(gate)


# ---- for the discovery tests: a registry, and a clash ----

def _with_the_example() -> list[Contract]:
    from handoffs.examples.payment import PAYMENT_RELEASE

    return [MY_CONTRACT, PAYMENT_RELEASE]


REGISTRY = _with_the_example()
OTHER_1_0_0 = attrs.evolve(MY_CONTRACT, description="Another definition under the same id.")
