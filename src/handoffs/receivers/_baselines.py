"""The essay's baseline receivers and the governance checker they stand behind.

These are the receivers the essay compares the decision contract against: a risk
score (``receive_score``), an advisory action-only message
(``receive_action_advisory``) and the full record (``receive_full``). They exist to
be measured in the lab, not to run in production; but they are receivers, built on
the gate's own pipeline (its parse, its stages, its refusals), so they live beside the
gate. The :class:`GovernanceChecker` admits the message forms that are not receipts
(full record, risk score, action-only); it checks **no proof**, so a production
receiver of signed receipts uses a :class:`~handoffs.receivers.Gate`.

=====================================  ==========================================
receiver                               essay function
=====================================  ==========================================
:class:`ScoreReceiver`                 ``receive_score``
:class:`AdvisoryActionReceiver`        ``receive_action_advisory``
:class:`FullRecordReceiver`            ``receive_full``
=====================================  ==========================================

The essay's ``receive_action_authoritative`` is
:class:`~handoffs.receivers.AuthoritativeActuator` behind a :class:`GovernanceChecker`.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Hashable, Iterable, Mapping
from typing import Any, Final, cast

import attrs

from handoffs._audience import check_addressed
from handoffs._errors import InvalidArgument, MalformedJSON
from handoffs._json import DEFAULT_LIMITS, JSONLimits, check_value, parse_object
from handoffs._memo import memo_value
from handoffs._time import parse_time
from handoffs.contracts import (
    ANY_AUDIENCE,
    Contract,
    Governance,
)
from handoffs.receivers._decision import Decision, Reason, Step, Verdict
from handoffs.receivers._gate import Admitted, Clock, ReceiverRule, Ruling, _text
from handoffs.receivers._pipeline import Pipeline, Refusal, Run, Stage
from handoffs.receivers._receivers import _fail, _is_contract, _ViaAdmission

__all__ = [
    "AdvisoryActionReceiver",
    "FullRecordReceiver",
    "GovernanceChecker",
    "ScoreReceiver",
]


# ------------------------------------------------------------- governance checker


def _fields(value: Iterable[str]) -> tuple[str, ...]:
    fields = tuple(value)
    if not all(isinstance(f, str) and f for f in fields):
        raise InvalidArgument("required must hold field names")
    return fields


@attrs.frozen
class GovernanceChecker:
    """Admission for the message forms that are not receipts (full record, risk
    score, action-only): the essay's ``governance_valid`` plus optional audience and
    expiry checks. It checks **no proof**; use a :class:`~handoffs.receivers.Gate` for signed
    receipts.

    Steps it runs: (1) parse with limits; governance members present and non-empty
    (``missing-field``), ``authority`` one of ADVISE/DECIDE; (2) audience when
    ``identity`` is set, expiry when ``clock`` is set; then (5) the receiver's rule.

    Attributes:
        contract: the contract whose action set and fail-closed action apply.
        required: members that must be present and non-empty (the essay's seven
            governance fields by default; ``()`` checks none, as the essay's score,
            full-record and advisory receivers do).
        identity: when set, ``receiver`` must equal it (``wrong-audience``).
        clock: when set, ``valid_until`` must lie after ``clock()``.
        limits: size and depth bounds for raw input.
    """

    contract: Contract[Any, Any]
    required: tuple[str, ...] = attrs.field(
        default=Governance.FIELDS, converter=_fields, kw_only=True
    )
    identity: str | None = attrs.field(default=None, kw_only=True)
    clock: Clock | None = attrs.field(default=None, kw_only=True)
    limits: JSONLimits = attrs.field(default=DEFAULT_LIMITS, kw_only=True)
    _memo: dict[frozenset[str], tuple[tuple[str, ...], frozenset[str]]] = attrs.field(
        init=False, factory=dict, eq=False, repr=False)

    @property
    def deterministic(self) -> bool:
        """True unless a clock makes decisions time-dependent."""
        return self.clock is None

    def memo_key(self, message: bytes | str | Mapping[str, Any], *,
                 keep: frozenset[str] = frozenset()) -> Hashable | None:
        """A key on which decisions through this checker may be memoised, or ``None``.

        The checks read a required member only for being present and non-empty (the
        key keeps that bit), except ``authority`` and, with an ``identity``,
        ``receiver``, which it keeps as they are; other members it ignores, except
        ``keep``: the members the receiver's rule reads. ``None`` for raw bytes or
        text, with a ``clock`` (time-dependent decisions), and for a message the
        checker refuses at parse whatever its members say (not JSON data, or beyond
        the limits: see ``check_value``).
        """
        if self.clock is not None or not isinstance(message, Mapping):
            return None
        try:
            check_value(message, limits=self.limits)
        except MalformedJSON:
            return None
        names, raw = self._memo_names(keep)
        key: list[Hashable] = []
        for name in names:
            if name not in message:
                key.append(None)  # no present member's part is None (see below)
                continue
            value = message[name]
            if name not in raw:
                key.append(value is None or (isinstance(value, str | list | tuple | dict)
                                             and not value))
            elif type(value) is str:  # stands for itself (see memo_value)
                key.append(value)
            else:
                key.append(memo_value(value))
        return tuple(key)

    def _memo_names(self, keep: frozenset[str]) -> tuple[tuple[str, ...], frozenset[str]]:
        """(members the key holds, in order; those it holds by value)."""
        found = self._memo.get(keep)
        if found is None:
            raw = set(keep) | {"authority"}
            if self.identity is not None:
                raw.add("receiver")
            names = tuple(sorted(raw | set(self.required)))
            found = self._memo[keep] = (names, frozenset(raw))
        return found

    def decide(
        self,
        message: bytes | str | Mapping[str, Any],
        *,
        rule: ReceiverRule,
        receiver: str,
        record: Mapping[str, Any] | None = None,
    ) -> Decision:
        """Check governance, then apply ``rule``, on the one admission engine
        (``handoffs.receivers._pipeline``); never raises.
        """
        run = _GovernanceRun(message, rule, receiver,
                             str(self.contract.fail_closed_action.value),
                             {} if record is None else record)
        return _GOVERNANCE.run(self, run)

    def _parse_step(self, run: _GovernanceRun, _: object = None) -> None:
        """(1) parse with limits; governance members present, ``authority`` known."""
        doc = run.document = parse_object(run.message, limits=self.limits)
        run.contract = self.contract.id
        run.receipt_id = _text(doc.get("id"))
        missing = tuple(
            Reason("missing-field", f"required field {name!r} missing", Step.PARSE, f"$.{name}")
            for name in self.required
            if (value := doc.get(name)) is None
            or (isinstance(value, str | list | tuple | dict) and not value)
        )
        if missing:
            raise Refusal(Verdict.REJECT, missing)
        if "authority" in self.required and doc["authority"] not in ("ADVISE", "DECIDE"):
            raise Refusal(Verdict.REJECT, (Reason(
                "schema-invalid",
                f"expected one of ['ADVISE', 'DECIDE'], got {doc['authority']!r}",
                Step.PARSE, "$.authority",
            ),))

    def _window_step(self, run: _GovernanceRun, _: object = None) -> None:
        """(2) audience when ``identity`` is set, expiry when ``clock`` is set."""
        doc = run.document
        until = None
        if self.clock is not None:
            until = parse_time(cast(str, doc.get("valid_until")), json_path="$.valid_until")
        check_addressed(doc.get("receiver"), until,
                        ANY_AUDIENCE if self.identity is None else self.identity,
                        None if self.clock is None else self.clock())
        run.sender = _text(doc.get("sender"))
        run.trigger = _text(doc.get("counterfactual_trigger"))

    def _policy_step(self, run: _GovernanceRun, _: object = None) -> None:
        """(5) the receiver's rule."""
        admitted = Admitted(document=run.document, contract=self.contract)
        run.authority = admitted.authority
        ruling = run.rule(admitted)
        run.settle(ruling.verdict, ruling.action, ruling.reasons, ruling.record)


class _GovernanceRun(Run):
    """Per-decision state of a :class:`GovernanceChecker`."""

    __slots__ = ("document", "message", "rule")
    document: Mapping[str, Any]  # (1)

    def __init__(self, message: Any, rule: ReceiverRule, receiver: str, fail_closed: str,
                 record: Mapping[str, Any]) -> None:
        super().__init__(receiver, fail_closed, record)
        self.message = message
        self.rule = rule


_GOVERNANCE: Final[Pipeline[GovernanceChecker, _GovernanceRun]] = Pipeline((
    Stage(Step.PARSE, "parse", GovernanceChecker._parse_step),
    Stage(Step.PROOFS, "audience and validity", GovernanceChecker._window_step),
    Stage(Step.POLICY, "policy", GovernanceChecker._policy_step),
), crash="internal-error")
"""The governance checker's steps, run by the one admission engine."""


def _admission_for(contract: Contract[Any, Any],
                   governance: GovernanceChecker | None) -> GovernanceChecker:
    if governance is None:
        return GovernanceChecker(contract, required=())
    if governance.contract is not contract:
        raise InvalidArgument("the governance checker must use the receiver's contract")
    return governance


class _KeyedByAdmission:
    """The memo key of a lab receiver that decides through a governance checker: the
    checker's key, keeping the members the rule reads (``_keep``). See
    :class:`~handoffs.lab._memo.Memoisable`.
    """

    __slots__ = ()

    def _via(self) -> GovernanceChecker:
        raise NotImplementedError

    def _keep(self) -> frozenset[str]:
        return frozenset()

    def memo_key(self, message: Mapping[str, Any]) -> Hashable | None:
        """The checker's memo key, keeping the members the rule reads."""
        return self._via().memo_key(message, keep=self._keep())


# -------------------------------------------------------------------------- score


@attrs.frozen
class ScoreReceiver(_KeyedByAdmission, _ViaAdmission):
    """Decides from one scalar risk score: ``below`` under ``threshold``, else
    ``at_or_above`` (the essay's ``receive_score``).

    A missing score fails closed (``missing-field``); a score that is not a finite
    number fails closed (``invalid-field``).

    Attributes:
        contract: the contract whose actions and fail-closed action apply.
        below: action for ``score < threshold``.
        at_or_above: action for ``score >= threshold``.
        threshold: the cut-off (the essay's 20).
        field: the message member holding the score.
        governance: optional governance checks (the essay's receiver has none).
        name: the receiver's name.
    """

    contract: Contract[Any, Any] = attrs.field(validator=_is_contract)
    below: enum.Enum = attrs.field(kw_only=True)
    at_or_above: enum.Enum = attrs.field(kw_only=True)
    threshold: float = attrs.field(default=20, kw_only=True)
    field: str = attrs.field(default="risk_score", kw_only=True)
    governance: GovernanceChecker | None = attrs.field(default=None, kw_only=True)
    name: str = attrs.field(default="score", kw_only=True)
    _admission: GovernanceChecker = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        for action in (self.below, self.at_or_above):
            if not isinstance(action, self.contract.actions):
                raise InvalidArgument(f"{action!r} is not an action of {self.contract.id}")
        object.__setattr__(self, "_admission", _admission_for(self.contract, self.governance))

    def _via(self) -> GovernanceChecker:
        return self._admission

    def _keep(self) -> frozenset[str]:
        return frozenset({self.field})

    def _rule(self, admitted: Admitted) -> Ruling:
        path = f"$.{self.field}"
        if self.field not in admitted.document:
            return _fail(admitted, Verdict.REJECT, Reason(
                "missing-field", f"required field {self.field!r} missing", Step.POLICY, path))
        score = admitted.document[self.field]
        if isinstance(score, bool) or not isinstance(score, int | float) or (
            isinstance(score, float) and not math.isfinite(score)
        ):
            return _fail(admitted, Verdict.REJECT, Reason(
                "invalid-field", f"expected a number, got {score!r}", Step.POLICY, path))
        action = self.below if score < self.threshold else self.at_or_above
        return Ruling(action=str(action.value), record={"score": score})


# ----------------------------------------------------------------- advisory action


@attrs.frozen
class AdvisoryActionReceiver(_KeyedByAdmission, _ViaAdmission):
    """The accountable receiver of an action-only advisory message.

    It refuses an unsupported advisory verdict: whatever the message proposes, it
    escalates with the contract's fail-closed action and reason ``unsupported-verdict``
    (the essay's ``receive_action_advisory``).

    Attributes:
        contract: the contract whose fail-closed action applies.
        governance: optional governance checks (the essay's receiver has none).
        name: the receiver's name.
    """

    contract: Contract[Any, Any] = attrs.field(validator=_is_contract)
    governance: GovernanceChecker | None = attrs.field(default=None, kw_only=True)
    name: str = attrs.field(default="advisory-action", kw_only=True)
    _admission: GovernanceChecker = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_admission", _admission_for(self.contract, self.governance))

    def _via(self) -> GovernanceChecker:
        return self._admission

    @staticmethod
    def _rule(admitted: Admitted) -> Ruling:
        proposed = admitted.document.get("action", admitted.document.get("proposed_action"))
        return _fail(admitted, Verdict.ESCALATE, Reason(
            "unsupported-verdict",
            f"the advisory verdict {proposed!r} comes without the decisive state that would "
            "support it; the accountable receiver refers the case",
            Step.POLICY, "$.action",
        ), proposed=proposed if isinstance(proposed, str) else None)


# -------------------------------------------------------------------- full record


@attrs.frozen
class FullRecordReceiver(_KeyedByAdmission, _ViaAdmission):
    """Applies the contract policy to the record's top-level decision-field members
    (the essay's ``receive_full``).

    Fields are read strictly (a boolean must be a JSON boolean). The policy is
    evaluated in three-valued logic: a missing field that an earlier rule makes
    irrelevant does not matter; one that leaves the decision undetermined escalates
    with ``undetermined`` and a ``missing-field`` reason per absent field.

    Attributes:
        contract: the contract whose fields and policy apply.
        governance: optional governance checks (the essay's receiver has none).
        name: the receiver's name.
    """

    contract: Contract[Any, Any] = attrs.field(validator=_is_contract)
    governance: GovernanceChecker | None = attrs.field(default=None, kw_only=True)
    name: str = attrs.field(default="full-record", kw_only=True)
    _admission: GovernanceChecker = attrs.field(init=False, repr=False, eq=False)
    _fields: frozenset[str] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_admission", _admission_for(self.contract, self.governance))
        object.__setattr__(self, "_fields", frozenset(self.contract.field_map))

    def _via(self) -> GovernanceChecker:
        return self._admission

    def _keep(self) -> frozenset[str]:
        return self._fields

    def _rule(self, admitted: Admitted) -> Ruling:
        doc = admitted.document
        view: dict[str, Any] = {}
        invalid: list[Reason] = []
        for spec in self.contract.fields:
            if spec.name in doc:
                try:
                    view[spec.name] = spec.read(doc[spec.name])
                except (ValueError, TypeError) as exc:
                    invalid.append(Reason("invalid-field", str(exc), Step.POLICY,
                                          f"$.{spec.name}"))
        if invalid:
            return _fail(admitted, Verdict.REJECT, *invalid)
        outcome = self.contract.evaluate(view)
        if not outcome.determined or outcome.action is None:
            missing = [
                Reason("missing-field", f"decision field {spec.name!r} missing", Step.POLICY,
                       f"$.{spec.name}")
                for spec in self.contract.fields if spec.name not in view
            ]
            return _fail(admitted, Verdict.ESCALATE, Reason(
                "undetermined", f"the record leaves rule {outcome.rule!r} undetermined",
                Step.POLICY, "$",
            ), *missing, rule=outcome.rule)
        return Ruling(action=str(outcome.action.value), record={"rule": outcome.rule})


