"""Message partitions: which states does a strategy send as the same message.

The receiver's policy divides the evidence states into decision regions, one action
each. A message refines that partition when no two states that need different actions
are sent as the same message. :func:`message_partition` encodes every case of an
experiment with one strategy's encoder, groups the cases by what the encoder wrote,
and reports each *collapsed* cell: one message standing for states whose reference
actions differ. Whatever a deterministic receiver does with such a message, it is
wrong on at least one of those states; more digits are needed only where a cell
collapses.

The comparison uses the encoder's content, not the governance stamp (which differs
per case by construction), and can be narrowed to the members a receiver reads
(``members=("decision_state",)`` for a receiver that recomputes from the state).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from handoffs._errors import ExperimentError
from handoffs._json import canonical_bytes, loads
from handoffs.lab._experiment import Experiment, Strategy
from handoffs.lab._values import wire_value

__all__ = ["MessagePartition", "PartitionCell", "message_partition"]

_CASE_LIMIT: Final = 100_000


@attrs.frozen
class PartitionCell:
    """One message and the cases it was sent for.

    Attributes:
        message: the content the cases share (only the compared members).
        case_ids: the cases, in stream order.
        states: each case's true decision state (wire form), in the same order.
        references: each case's reference action, in the same order.
    """

    message: Mapping[str, Any]
    case_ids: tuple[str, ...]
    states: tuple[Mapping[str, Any], ...]
    references: tuple[str, ...]

    @property
    def actions(self) -> tuple[str, ...]:
        """The distinct reference actions in the cell, sorted."""
        return tuple(sorted(set(self.references)))

    @property
    def collapsed(self) -> bool:
        """True when the cell holds states that need different actions."""
        return len(set(self.references)) > 1

    def cases_for(self, action: str) -> tuple[str, ...]:
        """The cell's cases whose reference action is ``action``."""
        return tuple(c for c, r in zip(self.case_ids, self.references, strict=True)
                     if r == action)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "message": dict(self.message),
            "collapsed": self.collapsed,
            "actions": list(self.actions),
            "cases": [{"case_id": c, "state": dict(s), "reference_action": r}
                      for c, s, r in zip(self.case_ids, self.states, self.references,
                                         strict=True)],
        }


def _cells(value: Sequence[PartitionCell]) -> tuple[PartitionCell, ...]:
    return tuple(value)


@attrs.frozen
class MessagePartition:
    """The partition of an experiment's cases by one strategy's message.

    Attributes:
        experiment: the experiment name.
        strategy: the strategy whose encoder was used.
        members: the content members compared (``None``: all of them).
        cells: one cell per distinct message, in order of first appearance.
    """

    experiment: str
    strategy: str
    members: tuple[str, ...] | None
    cells: tuple[PartitionCell, ...] = attrs.field(converter=_cells)

    @property
    def cases(self) -> int:
        """Number of cases partitioned."""
        return sum(len(cell.case_ids) for cell in self.cells)

    @property
    def collapsed(self) -> tuple[PartitionCell, ...]:
        """The cells that send one message for states needing different actions."""
        return tuple(cell for cell in self.cells if cell.collapsed)

    @property
    def refines(self) -> bool:
        """True when no cell collapses: the message separates every decision region
        the cases visit.
        """
        return not self.collapsed

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "experiment": self.experiment,
            "strategy": self.strategy,
            "members": None if self.members is None else list(self.members),
            "cases": self.cases,
            "messages": len(self.cells),
            "refines": self.refines,
            "collapsed": [cell.to_json() for cell in self.collapsed],
        }


def _strategy(experiment: Experiment, name: str) -> Strategy:
    for strategy in experiment.strategies:
        if strategy.name == name:
            return strategy
    known = [s.name for s in experiment.strategies]
    raise ExperimentError(f"unknown strategy {name!r}; strategies: {known}")


def message_partition(experiment: Experiment, strategy: str, *,
                      members: Sequence[str] | None = None,
                      limit: int = _CASE_LIMIT) -> MessagePartition:
    """Group ``experiment``'s cases by what ``strategy``'s encoder writes for them.

    Args:
        experiment: the experiment (its cases, truth and reference are used).
        strategy: the strategy name.
        members: compare only these content members (e.g. ``("decision_state",)``);
            a member the encoder does not write counts as absent.
        limit: the most cases read (the partition keeps every case id).

    Raises:
        ExperimentError: an unknown strategy, no cases, or more than ``limit`` cases.
    """
    if isinstance(members, str):
        raise ExperimentError("members must be a sequence of member names, not one string")
    chosen = _strategy(experiment, strategy)
    names = None if members is None else tuple(members)
    contract = experiment.contract
    grouped: dict[bytes, list[tuple[str, Mapping[str, Any], str]]] = {}
    messages: dict[bytes, Mapping[str, Any]] = {}
    count = 0
    for evidence in experiment.cases:
        count += 1
        if count > limit:
            raise ExperimentError(f"more than {limit} cases; raise limit to partition them all")
        content = chosen.encoder.encode(evidence)
        if names is not None:
            content = {k: content[k] for k in names if k in content}
        key = canonical_bytes(content)
        truth = contract.view(experiment.state_of(evidence))
        if experiment.reference is not None:
            declared = experiment.reference(evidence)
            reference = str(getattr(declared, "value", declared))
        else:
            reference = str(contract.decide(experiment.state_of(evidence)).value)
        state = {name: wire_value(value) for name, value in truth.items()}
        if key not in grouped:
            grouped[key] = []
            messages[key] = loads(key)
        grouped[key].append((str(experiment.case_id_of(evidence)), state, reference))
    if not count:
        raise ExperimentError("the case source yielded no cases", code="no-cases")
    cells = [
        PartitionCell(
            message=messages[key],
            case_ids=tuple(c for c, _, _ in rows),
            states=tuple(s for _, s, _ in rows),
            references=tuple(r for _, _, r in rows),
        )
        for key, rows in grouped.items()
    ]
    return MessagePartition(experiment=experiment.name, strategy=strategy, members=names,
                            cells=cells)
