"""A base pump contract and builders of its next versions (actions, fields, rules and
losses changed), shared by the contract diff and fingerprint tests. Test modules import
it from here rather than from one another.
"""

from __future__ import annotations

import enum
from datetime import timedelta
from typing import Any

import attrs

from handoffs.contracts import (
    Contract,
    EvidenceFresh,
    HardConstraint,
    LossMatrix,
    RoleHeld,
    decision_field,
)
from handoffs.contracts.policy import Is, Over, Policy, Rule

__all__ = [
    "BASE",
    "BASE_FIELDS",
    "BLIND",
    "HOT",
    "MANUAL",
    "WORN",
    "Act",
    "ActPlus",
    "Mode",
    "ModeAuto",
    "ModePlus",
    "fields_with",
    "loss",
    "make",
    "make_state",
    "plus_actions",
]


# ------------------------------------------------------------ a base contract


class Act(enum.Enum):
    CONTINUE = "CONTINUE"
    STOP = "STOP"


class ActPlus(enum.Enum):
    CONTINUE = "CONTINUE"
    STOP = "STOP"
    INSPECT = "INSPECT"


class Mode(enum.Enum):
    AUTO = "AUTO"
    MANUAL = "MANUAL"


class ModePlus(enum.Enum):
    AUTO = "AUTO"
    MANUAL = "MANUAL"
    SERVICE = "SERVICE"


class ModeAuto(enum.Enum):
    AUTO = "AUTO"


BASE_FIELDS: dict[str, tuple[Any, dict[str, Any]]] = {
    "mode": (Mode, {}),
    "cycles": (int, {"minimum": 0, "maximum": 1000}),
    "temperature": (float, {"minimum": -40.0, "maximum": 200.0}),
    "running": (bool, {}),
}


def make_state(fields: dict[str, tuple[Any, dict[str, Any]]]) -> type[Any]:
    namespace: dict[str, Any] = {"__annotations__": {}}
    for name, (annotation, declared) in fields.items():
        options = dict(declared)
        description = options.pop("description", f"The pump's {name}.")
        namespace["__annotations__"][name] = annotation
        namespace[name] = decision_field(description, **options)
    return attrs.frozen(type("PumpState", (), namespace))


def fields_with(**changes: tuple[Any, dict[str, Any]] | None) -> type[Any]:
    fields = dict(BASE_FIELDS)
    for name, value in changes.items():
        if value is None:
            del fields[name]
        else:
            fields[name] = value
    return make_state(fields)


def loss(actions: type[enum.Enum], **overrides: float) -> LossMatrix[Any]:
    entries = {(c, r): (0 if c is r else 10) for c in actions for r in actions}
    entries[(actions["CONTINUE"], actions["STOP"])] = 40
    for key, value in overrides.items():
        chosen, reference = key.split("__")
        entries[(actions[chosen], actions[reference])] = value
    return LossMatrix(entries)


HOT = Rule("hot", Over("temperature", 90), Act.STOP)
WORN = Rule("worn", Over("cycles", 900), Act.STOP)
MANUAL = Rule("manual", Is("mode", Mode.MANUAL), Act.STOP)
BLIND = HardConstraint("blind-continue", chosen=Act.CONTINUE,
                       allowed_references={Act.CONTINUE}, description="Continue a failing pump.")


def make(**changes: Any) -> Contract[Any, Any]:
    fields: dict[str, Any] = {
        "name": "pump-diff",
        "version": "1.0.0",
        "description": "A maintenance specialist hands a pump to the controller.",
        "actions": Act,
        "state": make_state(BASE_FIELDS),
        "policy": Policy(rules=(HOT, WORN, MANUAL), default=Act.CONTINUE),
        "loss": loss(Act),
        "hard_constraints": (BLIND,),
        "context": (RoleHeld("controller"), EvidenceFresh("sensor", max_age=timedelta(hours=1))),
        "fail_closed_action": Act.STOP,
        "counterfactual_trigger": "Recompute if a reading or the cost of failure changes.",
    }
    fields.update(changes)
    return Contract(**fields)


BASE = make()


def plus_actions(**changes: Any) -> Contract[Any, Any]:
    rules = tuple(Rule(r.name, r.when, ActPlus(r.action.value)) for r in (HOT, WORN, MANUAL))
    blind = HardConstraint("blind-continue", chosen=ActPlus.CONTINUE,
                           allowed_references={ActPlus.CONTINUE},
                           description="Continue a failing pump.")
    return make(actions=ActPlus, policy=Policy(rules=rules, default=ActPlus.CONTINUE),
                loss=loss(ActPlus), hard_constraints=(blind,),
                fail_closed_action=ActPlus.STOP, **changes)
