"""Controls: no message, a message shuffled across cases, a constant message."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from handoffs.lab.perturbations._base import (
    CaseContext,
    Perturbation,
    Variant,
    _strategies_field,
    declare_perturbation,
)

__all__ = ["ConstantMessage", "NoMessage", "ShuffledMessage"]


@declare_perturbation(kind="control", id="no-message",
                      description="Control: send an empty message.")
@attrs.frozen
class NoMessage(Perturbation):
    """Control: the receiver gets an empty message (what can it infer alone?)."""

    strategies: tuple[str, ...] | None = _strategies_field()

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """``{}``."""
        yield Variant({})


@declare_perturbation(kind="control", id="shuffled-message",
                      description="Control: send the message of another case.")
@attrs.frozen
class ShuffledMessage(Perturbation):
    """Control: each case gets another case's message (does the content matter?).

    The cases are paired along one random cycle drawn from the experiment's seed
    (:func:`~handoffs.lab._controls.paired_chunks`): every case gets another case's
    message and every message is sent once, whatever the chunk size, executor or worker
    count. A run of a single case has no partner and no shuffled row.
    """

    strategies: tuple[str, ...] | None = _strategies_field()

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """The neighbour's message."""
        other = ctx.neighbour(strategy)
        if other is not None:
            yield Variant(other)


@declare_perturbation(kind="control", id="constant-message",
                      description="Control: send the first case's message for every case.")
@attrs.frozen
class ConstantMessage(Perturbation):
    """Control: every case gets the first case's message (is the channel ignored?)."""

    strategies: tuple[str, ...] | None = _strategies_field()

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """The constant message."""
        constant = ctx.constant(strategy)
        if constant is not None:
            yield Variant(constant)
