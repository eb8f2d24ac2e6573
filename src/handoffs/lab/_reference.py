"""The contract's reference policy as a receiver: the lab's semantic yardstick.

:class:`ReferenceReceiver` decides from a message's ``decision_state`` alone, with the
contract's declared defaults (the essay's benign-default receiver) or without them (the
three-valued receiver). An :class:`~handoffs.lab.Experiment` uses it, unless it
declares its own, to measure semantic agreement and to confirm minimal messages.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Final

import attrs

from handoffs._errors import MalformedJSON
from handoffs._json import loads
from handoffs._memo import memo_value
from handoffs.contracts import Contract
from handoffs.receivers import Decision, Reason, Step, Verdict

__all__ = ["ReferenceReceiver"]


_CACHE_LIMIT: Final = 4096

_STATE: Final = "decision_state"
KEY_MEMBERS: Final = frozenset({_STATE})
"""The only members :meth:`ReferenceReceiver.memo_key` reads (the lab keys a message that
differs from another in any other member as it keys that other)."""


@attrs.frozen
class ReferenceReceiver:
    """The contract's reference policy, applied to a message's ``decision_state``.

    With ``defaults=True`` it is the essay's *benign-default receiver*: a field that
    is missing takes its declared ``if_missing`` value (fields declared without one
    stay missing). With ``defaults=False`` it is the *three-valued receiver*: a
    missing field, or an interval straddling a threshold, leaves the decision
    undetermined, and the receiver fails closed with the contract's
    ``fail_closed_action``. Either way it ignores governance, authority and proofs:
    the lab uses it for *semantic* agreement, kept apart from admissibility.

    It never raises: a message without a readable ``decision_state`` is rejected.
    """

    contract: Contract[Any, Any]
    defaults: bool = True
    _cache: dict[Any, Decision] = attrs.field(factory=dict, eq=False, repr=False, init=False)

    @property
    def name(self) -> str:
        """``reference-benign-defaults`` or ``reference-three-valued``."""
        return "reference-benign-defaults" if self.defaults else "reference-three-valued"

    @property
    def deterministic(self) -> bool:
        """Always true."""
        return True

    def memo_key(self, message: Mapping[str, Any]) -> Hashable:
        """The part of the message the decision depends on, the decision state: the
        set of ``(name, memo_member(name, value))`` of the members in :data:`KEY_MEMBERS`.
        """
        return frozenset([(name, self.memo_member(name, message[name]))
                          for name in KEY_MEMBERS if name in message])

    @staticmethod
    def memo_member(name: str, value: Any) -> Hashable:
        """One member's contribution to :meth:`memo_key`: its value (``memo_value``)."""
        return memo_value(value)

    def receive(self, message: bytes | str | Mapping[str, Any]) -> Decision:
        """Decide from the message's decision state alone."""
        if isinstance(message, bytes | str):
            try:
                message = loads(message)
            except MalformedJSON as exc:
                return self._reject("invalid-json", exc.message, Step.PARSE)
        if not isinstance(message, Mapping):
            return self._reject("not-an-object", "a message is a JSON object", Step.PARSE)
        state = message.get("decision_state")
        if not isinstance(state, Mapping):
            return self._reject("no-decision-state", "the message carries no decision_state",
                                Step.PARSE, "$.decision_state")
        key = self.memo_key(message)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        decision = self._decide(state)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = decision
        return decision

    def _decide(self, state: Mapping[str, Any]) -> Decision:
        view: dict[str, Any] = {}
        for spec in self.contract.fields:
            if spec.name in state:
                try:
                    view[spec.name] = spec.read(state[spec.name])
                except (ValueError, TypeError) as exc:
                    return self._reject("invalid-value", str(exc), Step.PARSE,
                                        f"$.decision_state.{spec.name}")
            elif self.defaults and not spec.fails_closed:
                view[spec.name] = spec.if_missing
        unknown = sorted(set(state) - set(self.contract.field_map))
        if unknown:
            return self._reject("unknown-field", f"unknown decision fields {unknown}",
                                Step.PARSE, f"$.decision_state.{unknown[0]}")
        outcome = self.contract.policy.evaluate(view)
        if outcome.action is None:
            return Decision(
                verdict=Verdict.ESCALATE,
                action=self.contract.fail_closed_action.value,
                step=Step.POLICY,
                reasons=(Reason("undetermined", f"rule {outcome.rule} is undetermined on "
                                "this state", Step.POLICY, "$.decision_state"),),
                receiver=self.name,
                contract=self.contract.id,
                record={"rule": outcome.rule},
            )
        return Decision(verdict=Verdict.ACCEPT, action=outcome.action.value, step=Step.POLICY,
                        receiver=self.name, contract=self.contract.id,
                        record={"rule": outcome.rule})

    def _reject(self, code: str, message: str, step: Step, path: str = "$") -> Decision:
        return Decision(
            verdict=Verdict.REJECT,
            action=self.contract.fail_closed_action.value,
            step=step,
            reasons=(Reason(code, message, step, path),),
            receiver=self.name,
            contract=self.contract.id,
        )
