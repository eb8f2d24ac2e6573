"""The pump world, shared by the sender, suite and verification tests: a user's own
contract (pump maintenance), its keys, trust ring, governance service and grant issuer,
and builders of a sender, a gate and decision content.

Test modules import it from here (``from worlds.pump import PUMP, sender``) rather than
from another test module; it imports public names only.
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from handoffs.contracts import (
    Contract,
    GovernanceService,
    GrantIssuer,
    Interval,
    LossMatrix,
    Registry,
    Sender,
    decision_field,
)
from handoffs.contracts.policy import Is, Over, Policy, Rule
from handoffs.integrity import KeyRing, SigningKey
from handoffs.receivers import Gate

__all__ = ["AGENT_KEY", "GRANTS", "NOW", "PUMP", "REFS", "REGISTRY", "SERVICE", "SERVICE_KEY",
           "SINCE", "TRUST", "Mode", "Pump", "PumpState", "content", "gate", "sender"]


class Pump(enum.Enum):
    CONTINUE = "CONTINUE"
    REDUCE_LOAD = "REDUCE_LOAD"
    STOP = "STOP"


class Mode(enum.Enum):
    AUTO = "AUTO"
    MANUAL = "MANUAL"


@attrs.frozen
class PumpState:
    failure_probability: Interval = decision_field(
        "Certified probability of failure in the next window.", minimum=0.0, maximum=1.0)
    calibrated: bool = decision_field("The sensor was calibrated this week.")
    mode: Mode = decision_field("How the pump is operated.")
    cycles: int = decision_field("Cycles since inspection.", minimum=0, maximum=100_000)


C, R, S = Pump.CONTINUE, Pump.REDUCE_LOAD, Pump.STOP
PUMP = Contract(
    name="pump-maintenance",
    version="1.0.0",
    description="A maintenance specialist hands a pump to the plant controller.",
    actions=Pump,
    state=PumpState,
    policy=Policy(rules=(
        Rule("uncalibrated", Is("calibrated", False), R),
        Rule("failure-likely", Over("failure_probability", 0.3), S),
        Rule("failure-possible", Over("failure_probability", 0.05), R),
    ), default=C),
    loss=LossMatrix({(a, b): 0 if a is b else 10 * (a is C) + 1 for a in Pump for b in Pump}),
    fail_closed_action=S,
    counterfactual_trigger="Recompute when the failure probability or calibration changes.",
)
REGISTRY = Registry.of(PUMP)

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
SINCE = NOW - timedelta(days=30)
AGENT_KEY, SERVICE_KEY = SigningKey.generate(), SigningKey.generate()
TRUST = (KeyRing()
         .enrol(AGENT_KEY.public_key_multibase, controller="maintenance-specialist",
                not_before=SINCE)
         .enrol(SERVICE_KEY.public_key_multibase, controller="policy-service",
                roles=["policy-service"], purposes=["capabilityDelegation"], not_before=SINCE))
SERVICE = GovernanceService(sender="maintenance-specialist", receiver="plant-controller",
                            policy_version="PUMP-3", valid_for=timedelta(hours=1))
GRANTS = GrantIssuer(key=SERVICE_KEY, issuer="policy-service")
REFS = ["sensor://pump-7/probability", "calib://pump-7/2026-05-30"]


def sender(**changes: Any) -> Sender[PumpState, Pump]:
    config: dict[str, Any] = {"contract": PUMP, "key": AGENT_KEY, "governance": SERVICE,
                              "grants": GRANTS, "clock": lambda: NOW}
    config.update(changes)
    return Sender(**config)


def gate(*, at: datetime = NOW + timedelta(minutes=1), trust: KeyRing = TRUST) -> Gate:
    return Gate(identity="plant-controller", trust=trust, registry=REGISTRY,
                clock=lambda: at)


def content(lo: float = 0.01, hi: float = 0.02, **changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "proposed_action": "CONTINUE",
        "decision_state": {"failure_probability": {"lo": lo, "hi": hi}, "calibrated": True,
                           "mode": "AUTO", "cycles": 120},
        "uncertainty": "RESOLVED",
        "counterfactual_trigger": None,
        "notes": None,
    }
    doc.update(changes)
    return doc
