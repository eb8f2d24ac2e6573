"""Ablation: remove one decision field or one governance member."""

from __future__ import annotations

from typing import Any

import attrs

from handoffs.contracts import Contract
from handoffs.contracts.analysis import DropField, SymbolicForm
from handoffs.lab.perturbations._base import (
    REMOVED,
    Perturbation,
    _strategies_field,
    declare_perturbation,
)

__all__ = ["RemoveDecisionField", "RemoveGovernanceField"]


@declare_perturbation(
    kind="ablation", subject=True, id="remove-decision-field:{field}", target="{field}",
    member="decision_state.{field}",
    description="Remove decision field {field} (a benign-default receiver assumes its "
                "declared if_missing value).")
@attrs.frozen
class RemoveDecisionField(Perturbation):
    """Remove one decision field from the message's ``decision_state``.

    On an optional field (``T | None``) removal is not absence: the member is required
    by the schema (``null`` when the fact is known not to apply), so a removed member is
    *missing* (unknown), which a strict receiver refuses and a three-valued one reads
    as unknown; only a benign-default receiver of a field declared ``if_missing=None``
    reads it as absent. Id ``remove-decision-field:<field>``.
    """

    field: str
    strategies: tuple[str, ...] | None = _strategies_field()

    def change(self, value: Any) -> Any:
        """:attr:`.Perturbation.REMOVED`."""
        return REMOVED

    def symbolic(self, contract: Contract[Any, Any]) -> SymbolicForm | None:
        """The field dropped from the decision state."""
        if self.field not in contract.field_map:
            return None
        return SymbolicForm(changes=(DropField(self.field),))


@declare_perturbation(
    kind="ablation", subject=True, id="remove-governance-field:{field}", target="{field}",
    member="{field}", reads=(), presence=("{field}",),
    description="Remove governance member {field}.")
@attrs.frozen
class RemoveGovernanceField(Perturbation):
    """Remove one governance member (``case_id``, ``sender``, ``authority``, ...).

    Id ``remove-governance-field:<member>``; the variant depends only on whether the
    member is present.
    """

    field: str
    strategies: tuple[str, ...] | None = _strategies_field()

    def change(self, value: Any) -> Any:
        """:attr:`.Perturbation.REMOVED`."""
        return REMOVED

    def symbolic(self, contract: Contract[Any, Any]) -> SymbolicForm | None:
        """Admission only: the decision state is unchanged."""
        return SymbolicForm(admission=True)
