"""Message partitions: which cases a strategy sends as the same message, and whether
one message stands for states that need different actions (essay, Part II).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import attrs
import pytest

from handoffs.contracts import (
    Contract,
    GovernanceService,
    LossMatrix,
    ReceiptEncoder,
    decision_field,
)
from handoffs.contracts.policy import Over, Policy, Rule
from handoffs.lab import Experiment, ExperimentError, IterableCases, Strategy
from handoffs.lab._partition import MessagePartition, message_partition
from handoffs.receivers import AdvisoryActionReceiver


class Act(enum.Enum):
    GO = "GO"
    HOLD = "HOLD"


@attrs.frozen
class Level:
    level: int = decision_field("A gauge reading.", minimum=0, maximum=10)


CONTRACT = Contract(
    name="level-check", version="1.0.0", description="Hold above level 5.",
    actions=Act, state=Level,
    policy=Policy(rules=(Rule("high", Over("level", 5), Act.HOLD),), default=Act.GO),
    loss=LossMatrix({(Act.GO, Act.GO): 0, (Act.HOLD, Act.HOLD): 0, (Act.GO, Act.HOLD): 5,
                     (Act.HOLD, Act.GO): 1}),
    fail_closed_action=Act.HOLD, counterfactual_trigger="Recompute when the level changes.",
)
GOVERNANCE = GovernanceService(sender="gauge", receiver="operator", policy_version="L-1",
                               valid_until=datetime(2027, 1, 1, tzinfo=UTC))


@attrs.frozen
class Reading:
    case_id: str
    level: int

    @property
    def state(self) -> Level:
        return Level(self.level)

    @property
    def evidence_refs(self) -> tuple[str, ...]:
        return (f"evidence://gauge/{self.case_id}",)


def readings() -> Iterator[Reading]:
    for i, level in enumerate((1, 3, 3, 7, 9)):
        yield Reading(f"r{i}", level)


@attrs.frozen
class Bucket:
    """Sends the level rounded down to a multiple of ``width``, with a per-case note."""

    width: int
    name: str = "bucket"

    def encode(self, evidence: Reading) -> dict[str, Any]:
        return {"decision_state": {"level": evidence.level // self.width * self.width},
                "notes": f"reading {evidence.case_id}"}


def experiment(**changes: Any) -> Experiment:
    receiver = AdvisoryActionReceiver(CONTRACT)
    fields: dict[str, Any] = {
        "name": "levels", "contract": CONTRACT,
        "cases": IterableCases(readings, description="readings"),
        "strategies": (
            Strategy(name="exact", encoder=ReceiptEncoder(CONTRACT, state_of=lambda e: e.state),
                     receiver=receiver),
            Strategy(name="coarse", encoder=Bucket(10), receiver=receiver),
            Strategy(name="halves", encoder=Bucket(5), receiver=receiver),
        ),
        "governance": GOVERNANCE,
    }
    return Experiment(**{**fields, **changes})


def test_an_exact_message_refines_the_decision_partition() -> None:
    partition = message_partition(experiment(), "exact")
    assert partition.refines
    assert partition.collapsed == ()
    assert partition.cases == 5
    assert [cell.case_ids for cell in partition.cells] == [("r0",), ("r1", "r2"), ("r3",),
                                                           ("r4",)]
    assert partition.cells[1].references == ("GO", "GO")


def test_a_coarse_message_collapses_states_that_need_different_actions() -> None:
    partition = message_partition(experiment(), "coarse", members=("decision_state",))
    assert not partition.refines
    (cell,) = partition.collapsed
    assert cell.message == {"decision_state": {"level": 0}}
    assert cell.actions == ("GO", "HOLD")
    assert cell.cases_for("GO") == ("r0", "r1", "r2")
    assert cell.cases_for("HOLD") == ("r3", "r4")
    assert cell.states[3] == {"level": 7}


def test_a_bucket_on_the_threshold_refines() -> None:
    partition = message_partition(experiment(), "halves", members=("decision_state",))
    assert partition.refines  # 0-4 and 5-9: level 5 itself is GO, none of the cases is 5
    assert len(partition.cells) == 2


def test_members_narrow_the_comparison() -> None:
    every = message_partition(experiment(), "coarse")
    assert len(every.cells) == 5  # the per-case note makes every message distinct
    assert every.refines
    assert every.members is None


def test_a_declared_reference_is_used() -> None:
    declared = experiment(reference=lambda _: Act.HOLD)
    assert message_partition(declared, "coarse", members=("decision_state",)).refines


def test_to_json() -> None:
    data = message_partition(experiment(), "coarse", members=("decision_state",)).to_json()
    assert data["refines"] is False
    assert data["messages"] == 1
    assert data["members"] == ["decision_state"]
    (cell,) = data["collapsed"]
    assert cell["cases"][0] == {"case_id": "r0", "state": {"level": 1},
                                "reference_action": "GO"}
    json.dumps(data)
    assert isinstance(message_partition(experiment(), "exact"), MessagePartition)


@pytest.mark.parametrize(("call", "match"), [
    (lambda: message_partition(experiment(), "nope"), "unknown strategy 'nope'"),
    (lambda: message_partition(experiment(), "exact", members="decision_state"),
     "not one string"),
    (lambda: message_partition(experiment(), "exact", limit=3), "more than 3 cases"),
    (lambda: message_partition(experiment(cases=IterableCases(list, description="none")),
                               "exact"), "no cases"),
])
def test_errors(call: Any, match: str) -> None:
    with pytest.raises(ExperimentError, match=match):
        call()
