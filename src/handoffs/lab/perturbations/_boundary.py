"""Boundary changes around the message.

The loss matrix changed, an action added, the policy version changed, an
authoritative sender. (The relay, also a boundary change, has its own module.)
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs

from handoffs._errors import ExperimentError
from handoffs.contracts import Authority, Contract
from handoffs.contracts.analysis import SymbolicForm
from handoffs.contracts.policy import Condition, Policy, Rule
from handoffs.lab.perturbations._base import (
    CaseContext,
    Perturbation,
    Scoring,
    Variant,
    _strategies_field,
    declare_perturbation,
)

__all__ = ["ActionAdded", "AuthoritativeSender", "LossChanged", "PolicyVersionChanged"]


def _loss_entries(value: Mapping[Any, float] | Sequence[Mapping[str, Any]]
                  ) -> dict[tuple[str, str], float]:
    if isinstance(value, Mapping):
        out: dict[tuple[str, str], float] = {}
        for key, loss in value.items():
            chosen, reference = key
            out[(_action_value(chosen), _action_value(reference))] = float(loss)
        return out
    return {(str(row["chosen"]), str(row["reference"])): float(row["loss"]) for row in value}


def _action_value(action: Any) -> str:
    return str(action.value) if isinstance(action, enum.Enum | _AddedAction) else str(action)


@declare_perturbation(
    kind="boundary", id="loss-changed:{name}",
    description=lambda p: f"Loss matrix {p.name}: " + ", ".join(
        f"({c}, {r}) = {v:g}" for (c, r), v in sorted(p.entries.items())) + ".")
@attrs.frozen
class LossChanged(Perturbation):
    """Boundary: re-score the unperturbed decisions under a changed loss matrix.

    Messages are not changed, so a deterministic receiver is not called again: the
    decisions come from the memo (and :func:`handoffs.lab.rescore` does the same for
    a finished run log). Id ``loss-changed:<name>``.
    """

    name: str
    entries: Mapping[tuple[str, str], float] = attrs.field(converter=_loss_entries)
    strategies: tuple[str, ...] | None = _strategies_field()

    def scoring(self, base: Scoring) -> Scoring:
        """The base loss with the changed entries."""
        return attrs.evolve(base, loss={**base.loss, **self.entries}, name=self.name)

    def symbolic(self, contract: Contract[Any, Any]) -> SymbolicForm | None:
        """Nothing sent changes; the scoring does."""
        return SymbolicForm()

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """The unchanged message."""
        yield Variant(message)


@attrs.frozen
class _AddedAction:
    """An action outside the contract's enum; policies only read its ``value``."""

    value: str


@declare_perturbation(
    kind="boundary", id="action-added:{action}",
    description=lambda p: f"Add action {p.action}, chosen when {p.when.describe()} ("
                          + (f"before rule {p.before}" if p.before else "after every rule")
                          + ").")
@attrs.frozen
class ActionAdded(Perturbation):
    """Boundary: the receiver's action set gains ``action``, chosen when ``when`` holds
    (a rule inserted before rule ``before``, or last). Messages and receivers stay
    as they are; the reference changes wherever the new rule now decides.

    ``loss`` gives the new (chosen, reference) entries; pairs it leaves out cost
    ``default_loss``. Id ``action-added:<action>``.
    """

    action: str
    when: Condition
    before: str | None = None
    loss: Mapping[tuple[str, str], float] = attrs.field(factory=dict, converter=_loss_entries)
    default_loss: float = 1.0
    policy: Policy[Any] | None = attrs.field(default=None, eq=False, repr=False, kw_only=True)
    strategies: tuple[str, ...] | None = _strategies_field()

    def prepare(self, contract: Contract[Any, Any], *, seed: int) -> Perturbation:
        """Build the extended policy."""
        if self.action in {a.value for a in contract.actions}:
            raise ExperimentError(f"action-added: {self.action} is already an action")
        unknown = self.when.reads() - set(contract.field_map)
        if unknown:
            raise ExperimentError(f"action-added: the condition reads unknown fields "
                                  f"{sorted(unknown)}")
        rules = list(contract.policy.rules)
        rule: Rule[Any] = Rule(f"added-{self.action.lower()}", self.when,
                               _AddedAction(self.action))
        names = [r.name for r in rules]
        if self.before is not None and self.before not in names:
            raise ExperimentError(f"action-added: no rule named {self.before!r}; "
                                  f"rules: {names}")
        rules.insert(names.index(self.before) if self.before is not None else len(rules), rule)
        policy: Policy[Any] = Policy(rules=tuple(rules), default=contract.policy.default,
                                     default_name=contract.policy.default_name)
        return attrs.evolve(self, policy=policy)

    def scoring(self, base: Scoring) -> Scoring:
        """The base loss extended with the new action's row and column."""
        actions = {a for pair in base.loss for a in pair}
        extended = dict(base.loss)
        extended[(self.action, self.action)] = 0.0
        for other in actions:
            for pair in ((self.action, other), (other, self.action)):
                extended[pair] = self.loss.get(pair, self.default_loss)
        return attrs.evolve(base, loss=extended, name=f"{base.name}+{self.action}",
                            added=base.added | {self.action})

    def symbolic(self, contract: Contract[Any, Any]) -> SymbolicForm | None:
        """The reference follows the extended policy (once prepared)."""
        return None if self.policy is None else SymbolicForm(reference=self.policy)

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """The unchanged message, scored against the extended policy's action."""
        if self.policy is None:
            raise ExperimentError("action-added was not prepared for a contract")
        outcome = self.policy.evaluate(ctx.truth)
        reference = ctx.reference if outcome.action is None else _action_value(outcome.action)
        yield Variant(message, reference=reference)


@declare_perturbation(
    kind="boundary", target="policy_version",
    id=lambda p: "policy-version-changed" + (f":{p.version}" if p.version else ""),
    description=lambda p: f"The message names policy version "
                          f"{p.version or '<stamped>-superseded'}"
                          + (", and the reference follows the new policy." if p.policy else "."))
@attrs.frozen
class PolicyVersionChanged(Perturbation):
    """Boundary: the message names policy version ``version`` (default: the stamped
    version with ``-superseded`` appended), not the one the receiver holds current.
    With ``policy``, the reference is that new policy's action. Id
    ``policy-version-changed[:<version>]``.
    """

    version: str | None = None
    policy: Policy[Any] | None = attrs.field(default=None, eq=False)
    strategies: tuple[str, ...] | None = _strategies_field()

    @property
    def reads(self) -> frozenset[str] | None:
        """``policy_version`` (``None`` with a new policy: the reference follows the case)."""
        return frozenset({"policy_version"}) if self.policy is None else None

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """The message naming the other version."""
        current = message.get("policy_version")
        if not isinstance(current, str):
            return
        reference = None
        if self.policy is not None:
            outcome = self.policy.evaluate(ctx.truth)
            reference = None if outcome.action is None else _action_value(outcome.action)
        yield Variant.patched(message, "policy_version", self.version or f"{current}-superseded",
                              reference=reference)

    def symbolic(self, contract: Contract[Any, Any]) -> SymbolicForm | None:
        """Admission only, and the reference follows the new policy when one is given."""
        return SymbolicForm(reference=self.policy, admission=True)


@declare_perturbation(kind="boundary", id="authoritative-sender", target="authority",
                      reads=("authority",), description="The sender claims DECIDE authority.")
@attrs.frozen
class AuthoritativeSender(Perturbation):
    """Boundary: the sender claims ``DECIDE`` authority (the receiver becomes an
    actuator). A negative control: success here moves the decision, it does not
    show the message is sufficient.
    """

    strategies: tuple[str, ...] | None = _strategies_field()

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """The message with ``authority: DECIDE`` (unchanged without an authority)."""
        if message.get("authority") == Authority.DECIDE.value or "authority" not in message:
            yield Variant(message)
        else:
            yield Variant.patched(message, "authority", Authority.DECIDE.value)

    def symbolic(self, contract: Contract[Any, Any]) -> SymbolicForm | None:
        """Admission only: the decision state is unchanged."""
        return SymbolicForm(admission=True)
