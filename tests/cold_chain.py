"""The cold chain of issue #35: sufficiency at each edge is not sufficiency end to end.

A, the inspector, knows ``excursion_hours`` and the ``seal``; B, the planner, reroutes
when the excursion exceeds 6 h and never needs the seal; B's handover to C carries the
excursion only; C, the release pharmacist, quarantines when the seal is broken or the
excursion exceeds 2 h (a wrong RELEASE costs 100 and is a hard violation).
"""

from __future__ import annotations

import enum
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Final

import attrs

from handoffs.contracts import (
    Contract,
    GovernanceService,
    HardConstraint,
    LossMatrix,
    ReceiptEncoder,
    Registry,
    decision_field,
)
from handoffs.contracts.policy import Is, Over, Policy, Rule
from handoffs.examples.payment_lab import FixedClock
from handoffs.receivers import (
    Gate,
    StrictContractReceiver,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
)

NOW: Final = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


class Seal(enum.Enum):
    """The shipment's tamper seal."""

    INTACT = "INTACT"
    BROKEN = "BROKEN"


class Route(enum.Enum):
    """B's actions."""

    CONTINUE = "CONTINUE"
    REROUTE = "REROUTE"


class Release(enum.Enum):
    """C's actions."""

    RELEASE = "RELEASE"
    QUARANTINE = "QUARANTINE"


@attrs.frozen
class InspectionState:
    """What A knows."""

    excursion_hours: float = decision_field("Hours above 8 °C.", minimum=0, maximum=100)
    seal: Seal = decision_field("The tamper seal.")


@attrs.frozen
class HandoverState:
    """What B hands to C: the excursion only."""

    excursion_hours: float = decision_field("Hours above 8 °C.", minimum=0, maximum=100)


_R, _Q = Release.RELEASE, Release.QUARANTINE
_LOSS: Final = LossMatrix({(_R, _R): 0, (_Q, _Q): 0, (_Q, _R): 5, (_R, _Q): 100})
_WRONG: Final = HardConstraint("wrong-release", chosen=_R, allowed_references=frozenset({_R}),
                               description="RELEASE of a shipment that must be quarantined.")
_WARM: Final = Rule("excursion", Over("excursion_hours", 2.0), _Q)

PLANNING: Final = Contract(
    name="cold-planning", version="1.0.0", description="A → B: reroute or continue.",
    actions=Route, state=InspectionState,
    policy=Policy(rules=(Rule("long-excursion", Over("excursion_hours", 6.0),
                              Route.REROUTE),), default=Route.CONTINUE),
    loss=LossMatrix({(Route.CONTINUE, Route.CONTINUE): 0, (Route.REROUTE, Route.REROUTE): 0,
                     (Route.CONTINUE, Route.REROUTE): 10, (Route.REROUTE, Route.CONTINUE): 1}),
    fail_closed_action=Route.REROUTE, counterfactual_trigger="Recompute on a new reading.")
HANDOVER: Final = Contract(
    name="cold-handover", version="1.0.0", description="B → C: the excursion only.",
    actions=Release, state=HandoverState, policy=Policy(rules=(_WARM,), default=_R),
    loss=_LOSS, hard_constraints=(_WRONG,), fail_closed_action=_Q,
    counterfactual_trigger="Recompute on a new reading.")
RELEASE: Final = Contract(
    name="cold-release", version="1.0.0", description="C's full-evidence release decision.",
    actions=Release, state=InspectionState,
    policy=Policy(rules=(Rule("seal-broken", Is("seal", Seal.BROKEN), _Q), _WARM),
                  default=_R),
    loss=_LOSS, hard_constraints=(_WRONG,), fail_closed_action=_Q,
    counterfactual_trigger="Recompute on a new reading or seal check.")


@attrs.frozen
class Shipment:
    """One case: A's inspection."""

    case_id: str
    excursion_hours: float
    seal: Seal

    def inspection(self) -> InspectionState:
        """What A knows (and C's full evidence)."""
        return InspectionState(excursion_hours=self.excursion_hours, seal=self.seal)

    @property
    def evidence_refs(self) -> tuple[str, ...]:
        """The logger's readings."""
        return (f"evidence://logger/{self.case_id}",)


def shipments() -> Iterator[Shipment]:
    """40 shipments: four excursions × two seals × five."""
    for hours in (0.5, 1.5, 3.0, 8.0):
        for seal in Seal:
            for k in range(5):
                yield Shipment(f"s-{hours:g}-{seal.value.lower()}-{k}", hours, seal)


def _gate(identity: str, contract: Contract[Any, Any]) -> StrictContractReceiver:
    with warnings.catch_warnings():  # unsigned lab messages: **unsafe** by declaration
        warnings.simplefilter("ignore", UnsafeConfigurationWarning)
        return StrictContractReceiver(Gate(identity=identity, trust=UnsafeNoProofs(),
                                           registry=Registry.of(contract), replay=None,
                                           clock=FixedClock(NOW)))


def planner() -> StrictContractReceiver:
    """B."""
    return _gate("planner", PLANNING)


def pharmacist() -> StrictContractReceiver:
    """C, deciding from B's handover."""
    return _gate("pharmacist", HANDOVER)


def inspector_encoder() -> ReceiptEncoder[Shipment, InspectionState, Route]:
    """A → B: the whole inspection."""
    return ReceiptEncoder(contract=PLANNING, state_of=Shipment.inspection, name="inspection")


def _stamp(sender: str, receiver: str) -> GovernanceService:
    return GovernanceService(sender=sender, receiver=receiver, policy_version="COLD-1",
                             valid_until=datetime(2027, 1, 1, tzinfo=UTC))


GOVERNANCE_AB: Final = _stamp("inspector", "planner")
GOVERNANCE_BC: Final = _stamp("planner", "pharmacist")
