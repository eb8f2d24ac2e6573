"""Memo keys: what the lab derives from a receiver's declaration.

Receivers only *declare*: whether they are deterministic, and what their rule reads
(:attr:`~handoffs.receivers.FunctionReceiver.reads`, the members a
:class:`~handoffs.receivers.models.ModelReceiver`'s prompt does not show, the members the
strict receiver and the actuator read), besides the public configuration of their
admission (a :class:`~handoffs.receivers.Gate`'s contracts, trust, replay store,
decision log, evidence resolver and readback; the lab's
:class:`~handoffs.receivers.GovernanceChecker`). From that, :func:`memo_key` computes a key
on which decisions may be memoised. A receiver the lab does not know may compute its
own key (:class:`Memoisable`); any other deterministic receiver is memoised on the
whole canonical message.

**Soundness.** Two messages with equal keys get the same verdict, action and reason
codes (not necessarily the same ids, messages or ``record``): the key keeps everything
those depend on and may drop the rest, such as unique ids whose only effect is through
their validity.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Final, Protocol, cast, runtime_checkable

from handoffs._memokey import PROJECTED, memo_value
from handoffs.receivers import AuthoritativeActuator, FunctionReceiver, Gate, StrictContractReceiver
from handoffs.receivers.models import ModelReceiver

__all__ = ["Memoisable", "keyed", "memo_key", "memo_value"]


@runtime_checkable
class Memoisable(Protocol):
    """A deterministic receiver that computes its own memo key (see the module's
    soundness rule); the lab uses it for receivers whose declarations it cannot read.
    """

    def memo_key(self, message: Mapping[str, Any]) -> Hashable | None:
        """The key, or ``None`` when the receiver (as configured) may not be memoised
        on anything smaller than the whole message.
        """
        ...


class _Missing:
    """Stands for an absent member in memo keys."""

    __slots__ = ()


_MISSING_MEMBER: Final = _Missing()


# ------------------------------------------------------------------ admissions


def _admission_key(admission: Any, message: Mapping[str, Any], keep: frozenset[str]
                   ) -> Hashable | None:
    """The admission's key, keeping the members in ``keep`` (what the rule reads)."""
    if isinstance(admission, Gate):
        key = admission.memo_key(message)
        if key is None:
            return None
        extra = sorted(keep & PROJECTED)  # every other member is in the key as it is
        if not extra:
            return key
        return (key, tuple([memo_value(message[n]) if n in message else _MISSING_MEMBER
                            for n in extra]))
    own = getattr(admission, "memo_key", None)  # the lab's governance checker
    if callable(own):
        return cast(Hashable | None, own(message, keep=keep))
    return None


# ------------------------------------------------------------------- receivers

_READS: dict[int, tuple[Any, frozenset[str]]] = {}
_READS_KEPT: Final = 256


def _reads(receiver: Any) -> frozenset[str]:
    """What the rule of a receiver that decides through an admission reads."""
    found = _READS.get(id(receiver))
    if found is None or found[0] is not receiver:
        if len(_READS) >= _READS_KEPT:
            _READS.clear()
        found = _READS[id(receiver)] = (receiver, frozenset(receiver.reads or ()))
    return found[1]


def keyed(receiver: Any) -> bool:
    """Whether the lab has a memo key for ``receiver`` smaller than the whole message."""
    if isinstance(receiver, ModelReceiver | StrictContractReceiver | AuthoritativeActuator):
        return True
    if isinstance(receiver, FunctionReceiver):
        return receiver.reads is not None
    return callable(getattr(receiver, "memo_key", None))


def memo_key(receiver: Any, message: bytes | str | Mapping[str, Any]) -> Hashable | None:
    """The key on which ``receiver``'s decisions of ``message`` may be memoised, or
    ``None`` (raw bytes or text; a receiver or admission whose decisions depend on
    more than the message; a message its admission refuses at parse whatever its
    members say).
    """
    if not isinstance(message, Mapping):
        return None
    if isinstance(receiver, ModelReceiver):
        return _model_key(receiver, message)
    if isinstance(receiver, FunctionReceiver | StrictContractReceiver
                  | AuthoritativeActuator):
        if receiver.reads is None:
            return None
        return _admission_key(receiver.gate, message, _reads(receiver))
    own = getattr(receiver, "memo_key", None)
    if callable(own):
        return cast(Hashable | None, own(message))
    return None


def _model_key(receiver: ModelReceiver, message: Mapping[str, Any]) -> Hashable | None:
    """The admission's key and every member the prompt shows, by value."""
    admission = _admission_key(receiver.gate, message, frozenset())
    if admission is None:
        return None
    hidden = receiver.hidden
    return (admission, frozenset([(k, memo_value(v)) for k, v in message.items()
                                  if k not in hidden]))
