"""The admission pipeline: numbered steps run in order by one engine, one refusal type.

Every receiver that admits messages is a :class:`Pipeline` of :class:`Stage` s: the
:class:`~handoffs.receivers.Gate` for signed receipts, the
:class:`~handoffs.receivers.chains.IdentityCompositionReceiver` for handoff chains and the
:class:`~handoffs.receivers.CarriedReceiptReceiver` for a receipt carried through a chain.

A stage is a plain function ``check(owner, run, value)`` bound to its
:class:`~handoffs.receivers.Step`. It passes by returning the typed value the next
stage takes (the gate: parsed → verified → in context → with evidence), refuses by
raising, and the last one settles the outcome on the :class:`Run` (:meth:`Run.settle`),
which holds only what the decision reports. The engine,
:meth:`Pipeline.run`, is the only place that catches, and it never raises:

- a :class:`Refusal` (verdict and reasons, optionally a record) becomes a fail-closed
  decision with the receiver's fail-closed action;
- any other :class:`~handoffs.HandoffsError` is a REJECT with its own code (a schema
  error gives one reason per violation; an error about the message's structure is
  reported at step (1));
- anything else is a bug, and a REJECT with the pipeline's ``crash`` code
  (``internal-error`` for the gate, ``receiver-error`` for the chain receivers).

A refusal names the sender, its authority and the counterfactual trigger only once
step (2) has passed: an unverified sender is never reported as the sender.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Generic, TypeVar

import attrs

from handoffs._errors import (
    HandoffsError,
    InvalidArgument,
    MalformedJSON,
    ReceiptValidationError,
    UnknownContract,
)
from handoffs.receivers._decision import Decision, Reason, Step, Verdict

__all__ = ["Pipeline", "Refusal", "Run", "Stage"]

_STRUCTURE_ERRORS: Final = (MalformedJSON, UnknownContract, ReceiptValidationError)
_MAX_REASONS: Final = 16
_EMPTY: Final[Mapping[str, Any]] = {}


class Refusal(HandoffsError):
    """A stage refuses the message: the verdict and the typed reasons to report.

    Attributes:
        verdict: REJECT, or ESCALATE when the contract refers the decision.
        reasons: at least one; the first gives the error's code, message and path.
        record: facts recorded with the refusal, besides the receiver's own.
        step: the step reported, when not the running stage's (e.g. an inner
            receiver's).

    Its ``code``, ``message`` and ``json_path`` are the first reason's.
    """

    def __init__(self, verdict: Verdict, reasons: Sequence[Reason], *,
                 record: Mapping[str, Any] | None = None, step: Step | None = None) -> None:
        if not reasons:
            raise InvalidArgument("a refusal gives at least one reason")
        self.verdict = verdict
        self.reasons = tuple(reasons)
        self.record = _EMPTY if record is None else record
        self.step = step
        first = self.reasons[0]
        super().__init__(first.message, code=first.code, json_path=first.json_path)

    @classmethod
    def of(cls, exc: HandoffsError, step: Step) -> Refusal:
        """The refusal an error stands for when raised while ``step`` runs."""
        if isinstance(exc, Refusal):
            return exc
        if isinstance(exc, _STRUCTURE_ERRORS):
            step = Step.PARSE
        if isinstance(exc, ReceiptValidationError) and exc.violations:
            return cls(Verdict.REJECT, [
                Reason("missing-field" if v.validator == "required" else "schema-invalid",
                       v.message, step, v.json_path)
                for v in exc.violations[:_MAX_REASONS]
            ], step=step)
        return cls(Verdict.REJECT, [Reason(exc.code, exc.message, step, exc.json_path)],
                   step=step)


class Run:
    """The mutable state of one decision, which the stages fill in as they learn it.

    A receiver subclasses it with the slots its stages need. The base slots are what
    the decision reports: the running step, the receiver's name, its fail-closed
    action and record, what is known of the message, and the outcome.
    """

    __slots__ = ("action", "authority", "contract", "extra", "fail_closed", "readback",
                 "reasons", "receipt_id", "receiver", "record", "sender", "step", "trigger",
                 "verdict")

    def __init__(self, receiver: str, fail_closed: str | None,
                 record: Mapping[str, Any] = _EMPTY) -> None:
        self.step = Step.PARSE
        self.receiver = receiver
        self.fail_closed = fail_closed
        self.record = record
        self.contract: str | None = None
        self.receipt_id: str | None = None
        self.sender: str | None = None
        self.authority: str | None = None
        self.trigger: str | None = None
        self.readback: str | None = None
        self.verdict: Verdict | None = None
        self.action: str | None = None
        self.reasons: tuple[Reason, ...] = ()
        self.extra: Mapping[str, Any] = _EMPTY

    def settle(self, verdict: Verdict, action: str | None, reasons: tuple[Reason, ...] = (),
               extra: Mapping[str, Any] = _EMPTY) -> None:
        """The outcome of the last stage: verdict, action, reasons and extra record."""
        self.verdict = verdict
        self.action = action
        self.reasons = reasons
        self.extra = extra

    def decided(self) -> Decision:
        """The decision the settled outcome stands for."""
        if self.verdict is None:
            raise HandoffsError("no stage settled the outcome", code="internal-error")
        return Decision(
            verdict=self.verdict, action=self.action, step=self.step, reasons=self.reasons,
            receiver=self.receiver, contract=self.contract, receipt_id=self.receipt_id,
            sender=self.sender, authority=self.authority, counterfactual_trigger=self.trigger,
            record={**self.record, **self.extra}, readback=self.readback,
        )

    def refused(self, refusal: Refusal) -> Decision:
        """The fail-closed decision for ``refusal`` at the running step."""
        verified = self.step > Step.PROOFS
        return Decision(
            verdict=refusal.verdict,
            action=self.fail_closed,
            step=self.step if refusal.step is None else refusal.step,
            reasons=refusal.reasons,
            receiver=self.receiver,
            contract=self.contract,
            receipt_id=self.receipt_id,
            sender=self.sender if verified else None,
            authority=self.authority if verified else None,
            counterfactual_trigger=self.trigger if verified else None,
            record={**self.record, **refusal.record},
            readback=self.readback,
        )


OwnerT = TypeVar("OwnerT")
RunT = TypeVar("RunT", bound=Run)


@attrs.frozen
class Stage(Generic[OwnerT, RunT]):
    """One numbered step: ``check(owner, run, value)`` returns the next stage's value,
    raises, or settles the outcome.

    Attributes:
        step: the step it belongs to (several stages may share one).
        name: what it checks, for readers and tests.
        check: a plain function (not a bound method: no allocation per decision).
    """

    step: Step
    name: str
    check: Callable[[OwnerT, RunT, Any], Any]


@attrs.frozen
class Pipeline(Generic[OwnerT, RunT]):
    """The stages of one receiver, run in order by :meth:`run`, which never raises.

    Attributes:
        stages: the stages, in order; the last settles the outcome.
        crash: the reason code of a decision on an unexpected exception (a bug).
        crash_step: the step such a decision reports; ``None``: the running stage's.
    """

    stages: tuple[Stage[OwnerT, RunT], ...]
    crash: str
    crash_step: Step | None = None
    # (step, check) of every stage, read once at construction instead of per message.
    _plan: tuple[tuple[Step, Callable[[OwnerT, RunT, Any], Any]], ...] = attrs.field(
        init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_plan", tuple((s.step, s.check) for s in self.stages))

    def run(self, owner: OwnerT, run: RunT, value: Any = None) -> Decision:
        """Run every stage on ``run``, each on the value the one before returned (the
        first on ``value``), and return the decision; never raises.
        """
        try:
            for step, check in self._plan:
                run.step = step
                value = check(owner, run, value)
            return run.decided()
        except HandoffsError as exc:
            return run.refused(Refusal.of(exc, run.step))
        except Exception as exc:  # a bug in a stage must never admit a message
            return self.crashed(run, exc)

    def crashed(self, run: RunT, exc: BaseException) -> Decision:
        """The fail-closed decision for an unexpected exception in a stage."""
        step = run.step if self.crash_step is None else self.crash_step
        return run.refused(Refusal(Verdict.REJECT, [Reason(
            self.crash, f"unexpected {type(exc).__name__}: {exc}", step)], step=step))
