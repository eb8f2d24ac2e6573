"""Receiver contracts: plug-ins behind the one :class:`~handoffs.receivers.Receiver` interface.

Each receiver pairs an admission (a :class:`~handoffs.receivers.Gate` for signed
receipts, or any other :class:`~handoffs.receivers.Admission`) with its own rule for
step (5). On the essay's messages they decide exactly as the essay's ``receive_*``
functions do, and fail closed where those would crash (a missing or ill-typed member).

=====================================  ==========================================
receiver                               essay function
=====================================  ==========================================
:class:`StrictContractReceiver`        ``receive_contract`` (receipts)
:class:`AuthoritativeActuator`         ``receive_action_authoritative``
:class:`FunctionReceiver`              (a language-model or other user function)
=====================================  ==========================================

The essay's baselines (score, advisory action-only, full record) are lab receivers:
see :mod:`handoffs.lab`.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Protocol, runtime_checkable

import attrs

from handoffs._errors import HandoffsError, InvalidArgument
from handoffs.contracts import Authority, Contract
from handoffs.receivers._decision import Decision, Reason, Step, Verdict
from handoffs.receivers._gate import Admitted, Gate, ReceiverRule, Ruling

__all__ = [
    "Admission",
    "AuthoritativeActuator",
    "FunctionReceiver",
    "StrictContractReceiver",
]


@runtime_checkable
class Admission(Protocol):
    """What admits a message before a receiver's rule (steps 1-4), then applies it.

    A :class:`~handoffs.receivers.Gate` is the admission for signed receipts; the
    lab's :class:`~handoffs.receivers.GovernanceChecker` admits the essay's unsigned
    message forms.
    """

    @property
    def deterministic(self) -> bool:
        """Whether the same message always gets the same decision."""
        ...

    def decide(self, message: bytes | str | Mapping[str, Any], *, rule: ReceiverRule,
               receiver: str, record: Mapping[str, Any] | None = None) -> Decision:
        """Admit ``message`` and apply ``rule``; never raises."""
        ...


def _fail(admitted: Admitted, verdict: Verdict, *reasons: Reason, **record: Any) -> Ruling:
    return Ruling(
        action=str(admitted.contract.fail_closed_action.value),
        verdict=verdict,
        reasons=reasons,
        record=record,
    )


def _is_gate(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, Gate):
        raise InvalidArgument(f"{attribute.name} must be a Gate, got {type(value).__name__}")


def _is_admission(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, Gate | Admission):
        raise InvalidArgument(
            f"{attribute.name} must be a Gate or another Admission, got {type(value).__name__}"
        )


def _is_contract(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, Contract):
        raise InvalidArgument(f"{attribute.name} must be a Contract, got {type(value).__name__}")


class _ViaAdmission:
    """Plumbing shared by receivers that decide through a gate or governance checker:
    each supplies its admission (``_via``) and the rule itself, and declares what
    the rule reads (``reads``).
    """

    __slots__ = ()
    name: str

    def _via(self) -> Gate | Admission:
        raise NotImplementedError

    def _rule(self, admitted: Admitted) -> Ruling:
        raise NotImplementedError

    @property
    def deterministic(self) -> bool:
        """As deterministic as its admission."""
        return self._via().deterministic

    def receive(self, message: bytes | str | Mapping[str, Any]) -> Decision:
        """Decide one message; never raises."""
        return self._via().decide(message, rule=self._rule, receiver=self.name)


# ----------------------------------------------------------------- strict contract


def _strict_rule(admitted: Admitted) -> Ruling:
    """Recompute the contract policy from the verified decision state."""
    receipt = admitted.receipt
    contract = admitted.contract
    if receipt is None:  # pragma: no cover - a Gate always admits a typed receipt
        return _fail(admitted, Verdict.REJECT, Reason(
            "unsupported-message", "the strict receiver decides receipts only", Step.POLICY))
    # The typed state's view straight to the policy (what Contract.evaluate does for it).
    outcome = contract.policy.evaluate(contract.view(receipt.decision_state))
    if not outcome.determined or outcome.action is None:
        return _fail(admitted, Verdict.ESCALATE, Reason(
            "undetermined",
            f"the decision state leaves rule {outcome.rule!r} undetermined",
            Step.POLICY, "$.decision_state",
        ), rule=outcome.rule)
    action = str(outcome.action._value_)  # the values as plain attributes (see _gate)
    proposed = str(receipt.proposed_action._value_)
    return Ruling(action=action, record={
        "rule": outcome.rule,
        "proposed_action": proposed,
        "agrees_with_proposal": action == proposed,
    })


@attrs.frozen
class StrictContractReceiver(_ViaAdmission):
    """The accountable receiver of the essay's decision contract.

    It recomputes the contract's policy from the receipt's decision state, under
    ADVISE and, being strict, under DECIDE too: a sender's proposal never replaces
    the receiver's own decision. A state that leaves the policy undetermined (an
    interval straddling a threshold) escalates with ``undetermined``. The decision's
    ``record`` names the deciding rule and whether it agrees with the proposal.

    Attributes:
        gate: the gate that admits receipts (steps 1-4).
        name: the receiver's name in decisions and logs.
    """

    gate: Gate = attrs.field(validator=_is_gate)
    name: str = attrs.field(default="strict-contract", kw_only=True)

    reads: ClassVar[tuple[str, ...]] = ("decision_state", "proposed_action")
    """What the rule reads: the typed receipt's decision state and proposal."""

    def _via(self) -> Gate | Admission:
        return self.gate

    # The rule itself (a static method: no call in between, per receipt).
    _rule = staticmethod(_strict_rule)


# ---------------------------------------------------------------------- actuator


@attrs.frozen
class AuthoritativeActuator(_ViaAdmission):
    """The essay's negative control: executes a sender's DECIDE.

    It executes the receipt's ``proposed_action`` (or the ``action`` member of an
    action-only message) only when the message's authority is DECIDE and the sender
    is authorised to decide: with a proof-checking gate, the verified grant must allow
    DECIDE. Anything else fails closed: ``authority-not-decide`` (escalate),
    ``authority-not-granted``, ``invalid-action`` or ``conflicting-action`` (reject).

    Attributes:
        gate: a :class:`Gate` (signed receipts) or another
            :class:`~handoffs.receivers.Admission`
            (a :class:`GovernanceChecker` for action-only and other unsigned forms).
        name: the receiver's name.
    """

    gate: Gate | Admission = attrs.field(validator=_is_admission)
    name: str = attrs.field(default="authoritative-actuator", kw_only=True)

    reads: ClassVar[tuple[str, ...]] = ("action", "authority", "proposed_action")
    """What the rule reads besides what its admission checks."""

    def _via(self) -> Gate | Admission:
        return self.gate

    def _rule(self, admitted: Admitted) -> Ruling:
        if admitted.authority != Authority.DECIDE.value:
            return _fail(admitted, Verdict.ESCALATE, Reason(
                "authority-not-decide",
                f"authority is {admitted.authority!r}; an actuator executes DECIDE only",
                Step.POLICY, "$.authority",
            ))
        verified = admitted.verified
        if isinstance(self.gate, Gate) and self.gate.verifies_proofs and (
            verified is None or verified.grant is None
            or Authority.DECIDE not in verified.grant.authority
        ):
            return _fail(admitted, Verdict.REJECT, Reason(
                "authority-not-granted", "no verified grant allows this sender to DECIDE",
                Step.POLICY, "$.grant",
            ))
        if admitted.receipt is not None:
            return Ruling(action=str(admitted.receipt.proposed_action.value),
                          record={"executed": True})
        doc = admitted.document
        action = doc.get("action", doc.get("proposed_action"))
        other = doc.get("proposed_action", action)
        if action != other:
            return _fail(admitted, Verdict.REJECT, Reason(
                "conflicting-action",
                f"action {action!r} and proposed_action {other!r} differ", Step.POLICY,
                "$.action",
            ))
        values = {a.value for a in admitted.contract.actions}
        if not isinstance(action, str) or action not in values:
            return _fail(admitted, Verdict.REJECT, Reason(
                "invalid-action", f"{action!r} is not an action of {admitted.contract.id}",
                Step.POLICY, "$.action",
            ))
        return Ruling(action=action, record={"executed": True})


# ------------------------------------------------------------------ user function


def _tools(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise InvalidArgument("tools must be a collection of tool names, not one string")
    tools = tuple(value)
    if not all(isinstance(t, str) and t for t in tools):
        raise InvalidArgument("tools must be non-empty strings")
    return tools


def _text_field(_: Any, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{attribute.name} must be a non-empty string")


@attrs.frozen
class FunctionReceiver:
    """A receiver whose step (5) is a user function, e.g. a language-model call.

    The function receives the :class:`~handoffs.receivers.Admitted` message (the
    verified document, never the raw bytes) and returns an action (its value or an
    enum member) or a :class:`~handoffs.receivers.Ruling`. An action outside the
    contract's action set is rejected (``invalid-action``); an exception escalates
    (``receiver-error``).

    As the essay's release experiment (step 1) asks, the receiver is *declared*: the
    SHA-256 of its frozen prompt, its model route and its tools are recorded in every
    decision's ``record``, refusals included.

    Attributes:
        fn: the function, ``fn(admitted) -> action | Ruling``.
        gate: its admission (a :class:`Gate` or another admission).
        name: the receiver's name.
        prompt: the frozen prompt (or policy text) the function uses.
        model_route: the model route, e.g. ``"provider/model@2026-01-01"``.
        tools: names of the tools the function may call.
        deterministic: whether ``fn`` is deterministic (temperature 0, no tools with
            side effects); the receiver is deterministic only if its gate is too.
        reads: the message members ``fn`` reads (besides ``authority``), when it
            declares them. The lab memoises a deterministic function on the whole
            canonical message whatever it declares; only a run with
            ``projection=True`` keys it on its admission's key and these members,
            and checks the declaration on a sample of memo hits (a wrong one stops
            the run with ``ProjectionError``).
    """

    fn: Callable[[Admitted], Any]
    gate: Gate | Admission = attrs.field(validator=_is_admission, kw_only=True)
    name: str = attrs.field(validator=_text_field, kw_only=True)
    prompt: str = attrs.field(validator=_text_field, kw_only=True)
    model_route: str = attrs.field(validator=_text_field, kw_only=True)
    tools: tuple[str, ...] = attrs.field(default=(), converter=_tools, kw_only=True)
    deterministic: bool = attrs.field(default=False, kw_only=True)
    reads: tuple[str, ...] | None = attrs.field(
        default=None, converter=attrs.converters.optional(_tools), kw_only=True)
    record: Mapping[str, Any] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        if not callable(self.fn):
            raise InvalidArgument("fn must be callable")
        object.__setattr__(self, "deterministic", bool(self.deterministic)
                           and self.gate.deterministic)
        object.__setattr__(self, "record", {
            "prompt_sha256": hashlib.sha256(self.prompt.encode("utf-8")).hexdigest(),
            "model_route": self.model_route,
            "tools": list(self.tools),
        })

    def receive(self, message: bytes | str | Mapping[str, Any]) -> Decision:
        """Admit, call the function, check its answer; never raises."""
        return self.gate.decide(message, rule=self._rule, receiver=self.name,
                                record=self.record)

    def _rule(self, admitted: Admitted) -> Ruling:
        try:
            answer = self.fn(admitted)
        except HandoffsError as exc:
            return _fail(admitted, Verdict.ESCALATE, Reason(
                "receiver-error", f"{self.name} failed: {exc}", Step.POLICY))
        except Exception as exc:
            return _fail(admitted, Verdict.ESCALATE, Reason(
                "receiver-error", f"{self.name} failed: {type(exc).__name__}: {exc}",
                Step.POLICY))
        ruling = answer if isinstance(answer, Ruling) else None
        action = ruling.action if ruling is not None else answer
        if isinstance(action, enum.Enum):
            action = action.value
        values = {a.value for a in admitted.contract.actions}
        if not isinstance(action, str) or action not in values:
            return _fail(admitted, Verdict.REJECT, Reason(
                "invalid-action",
                f"{self.name} answered {action!r}, not an action of {admitted.contract.id}",
                Step.POLICY,
            ))
        if ruling is None:
            return Ruling(action=action)
        if ruling.verdict is not Verdict.ACCEPT:  # a refusal always maps to fail closed
            action = str(admitted.contract.fail_closed_action.value)
        return attrs.evolve(ruling, action=action)
