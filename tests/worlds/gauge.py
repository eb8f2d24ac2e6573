"""A gauge contract with every field kind, a message of it and the case context the
perturbation tests run variants in. Test modules import it from here rather than from
one another.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from handoffs.contracts import Contract, Interval, LossMatrix, decision_field
from handoffs.contracts.policy import Is, Over, Policy, Rule
from handoffs.lab import Reference
from handoffs.lab.perturbations import CaseContext

__all__ = [
    "GAUGE",
    "MESSAGE",
    "TRUTH",
    "Act",
    "GaugeState",
    "Level",
    "ctx",
    "variants",
]


class Act(enum.Enum):
    GO = "GO"
    STOP = "STOP"


class Level(enum.Enum):
    LOW = "LOW"
    MID = "MID"
    HIGH = "HIGH"


@attrs.frozen
class GaugeState:
    level: Level = decision_field("Level.", if_missing=Level.LOW)
    count: int = decision_field("Count.", minimum=0, maximum=50)
    ratio: float = decision_field("Ratio.", minimum=0.0, maximum=1.0)
    band: Interval = decision_field("Band.", minimum=0.0, maximum=10.0)
    armed: bool = decision_field("Armed.")


GAUGE = Contract(
    name="gauge",
    version="1.0.0",
    description="A contract with every field kind.",
    actions=Act,
    state=GaugeState,
    policy=Policy(rules=(
        Rule("high", Is("level", Level.HIGH), Act.STOP),
        Rule("many", Over("count", 20), Act.STOP),
        Rule("ratio", Over("ratio", 0.5), Act.STOP),
        Rule("band", Over("band", 5.0), Act.STOP),
        Rule("armed", Is("armed", True), Act.STOP),
    ), default=Act.GO),
    loss=LossMatrix({(Act.GO, Act.GO): 0, (Act.STOP, Act.STOP): 0, (Act.GO, Act.STOP): 10,
                     (Act.STOP, Act.GO): 1}),
    fail_closed_action=Act.STOP,
    counterfactual_trigger="Recompute.",
)
TRUTH = {"level": Level.LOW, "count": 3, "ratio": 0.25, "band": Interval(1.0, 2.0),
         "armed": False}
MESSAGE: dict[str, Any] = {
    "contract": "gauge/1.0.0", "id": "urn:uuid:00000000-0000-4000-8000-000000000001",
    "case_id": "case-1", "sender": "s", "receiver": "r", "authority": "ADVISE",
    "proposed_action": "GO",
    "decision_state": {"level": "LOW", "count": 3, "ratio": 0.25,
                       "band": {"lo": 1.0, "hi": 2.0}, "armed": False},
    "evidence_refs": ["evidence://a/1/x", "evidence://a/2/y"],
    "policy_version": "G-1", "valid_until": "2027-01-01T00:00:00Z",
    "uncertainty": "CONFLICT", "counterfactual_trigger": "Recompute.",
}


def ctx(**changes: Any) -> CaseContext:
    reference = Reference(GAUGE)
    base = {
        "index": 0, "case_id": "case-1", "truth": TRUTH, "reference": reference(TRUTH),
        "contract": GAUGE, "decide": reference, "neighbour": lambda s: {"other": s},
        "constant": lambda s: {"constant": s},
    }
    return CaseContext(**{**base, **changes})


def variants(p: Any, message: dict[str, Any] | None = None, **changes: Any) -> list[Any]:
    return list(p.prepare(GAUGE, seed=0).variants(message or MESSAGE, ctx(**changes), "s"))
