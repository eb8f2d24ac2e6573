"""Memo keys: exact by construction, and user declarations only as a checked option.

By default a deterministic receiver's decisions are memoised on the whole canonical
message (with the receiver's slot in the run and the draw: :mod:`handoffs.lab._chunk`).
A smaller key is used only where the library itself knows what a decision reads:

- a receiver that decides by a declarative contract (the strict receiver, the
  actuator) through a :class:`~handoffs.receivers.Gate`: the gate's own key
  (:meth:`~handoffs.receivers.Gate.memo_key`, from its contracts, trust, replay store,
  decision log, evidence resolver and readback), which keeps every member by value
  but the per-case identifiers; the policy reads decision-state fields only
  (:func:`policy_reads`, from the policy itself), so no identifier joins the key;
- a :class:`~handoffs.receivers.models.ModelReceiver`: its admission's key and every
  member its prompt shows;
- the lab's baseline receivers, which compute their own (:class:`Memoisable`).

A user's declaration of what a rule reads (:attr:`~handoffs.receivers.FunctionReceiver.reads`)
is trusted only when the run opts in (``run(..., projection=True)``), and then checked:
the chunk re-decides a sample of memo hits without the memo (``_Chunk._check`` in
:mod:`handoffs.lab._chunk`), and a hit whose decision differs stops the run with
:class:`~handoffs.errors.ProjectionError`, naming the receiver and the members the
declaration left out.

**Soundness.** Two messages with equal keys get the same verdict, action and reason
codes (not necessarily the same ids, messages or ``record``): the key keeps everything
those depend on and may drop the rest, such as unique ids whose only effect is through
their validity.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Final, Protocol, cast, runtime_checkable

from handoffs._memokey import PROJECTED, memo_value
from handoffs.receivers import AuthoritativeActuator, FunctionReceiver, Gate, StrictContractReceiver
from handoffs.receivers.models import ModelReceiver

__all__ = ["Memoisable", "declared", "keyed", "member_keyer", "memo_key", "memo_value", "projector"]


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


Projector = Callable[[Mapping[str, Any]], Hashable | None]


def _admission_projector(admission: Any, keep: frozenset[str]) -> Projector:
    """The admission's key, keeping the members in ``keep`` (what the rule reads)."""
    if isinstance(admission, Gate):
        extra = tuple(sorted(keep & PROJECTED))  # every other member is in the key as it is
        if not extra:
            return cast(Projector, admission.memo_key)
        return functools.partial(_with_members, admission.memo_key, extra)
    own = getattr(admission, "memo_key", None)  # the lab's governance checker
    if callable(own):
        return cast(Projector, functools.partial(own, keep=keep))
    return _no_key


def _with_members(key: Projector, extra: tuple[str, ...], message: Mapping[str, Any]
                  ) -> Hashable | None:
    found = key(message)
    if found is None:
        return None
    return (found, tuple([memo_value(message[n]) if n in message else _MISSING_MEMBER
                          for n in extra]))


def _no_key(message: Mapping[str, Any]) -> Hashable | None:
    return None


# ------------------------------------------------------------------- receivers

_READS: dict[int, tuple[Any, frozenset[str]]] = {}
_READS_KEPT: Final = 256


def _reads(receiver: Any) -> frozenset[str]:
    """What the rule of a receiver that decides through an admission reads: a
    contract receiver's from its policy (:func:`_contract_reads`), a function
    receiver's as declared (used only with projection on).
    """
    found = _READS.get(id(receiver))
    if found is None or found[0] is not receiver:
        if len(_READS) >= _READS_KEPT:
            _READS.clear()
        reads = _contract_reads(receiver) if isinstance(
            receiver, StrictContractReceiver | AuthoritativeActuator) \
            else frozenset(receiver.reads or ())
        found = _READS[id(receiver)] = (receiver, reads)
    return found[1]


def declared(receiver: Any) -> bool:
    """Whether ``receiver``'s smaller key rests on a user's declaration (``reads``),
    which the lab uses only with projection on, and checks.
    """
    return isinstance(receiver, FunctionReceiver) and receiver.reads is not None


def keyed(receiver: Any, *, projection: bool = False) -> bool:
    """Whether the lab has a memo key for ``receiver`` smaller than the whole message
    (``projection``: the run trusts, and checks, users' ``reads`` declarations).
    """
    if isinstance(receiver, ModelReceiver | StrictContractReceiver | AuthoritativeActuator):
        return True
    if isinstance(receiver, FunctionReceiver):
        return projection and receiver.reads is not None
    return callable(getattr(receiver, "memo_key", None))


def projector(receiver: Any, *, projection: bool = False) -> Projector | None:
    """The function giving ``receiver``'s memo key of a parsed message (see
    :func:`memo_key`), or ``None`` when there is no key smaller than the whole message.
    Built once per receiver and run (the chunk's slots keep it).
    """
    if not keyed(receiver, projection=projection):
        return None
    if isinstance(receiver, ModelReceiver):
        return functools.partial(_model_key, receiver)
    if isinstance(receiver, FunctionReceiver | StrictContractReceiver | AuthoritativeActuator):
        return _admission_projector(receiver.gate, _reads(receiver))
    return cast(Projector, receiver.memo_key)


def member_keyer(receiver: Any, *, projection: bool = False
                 ) -> Callable[[str, Any], Hashable] | None:
    """When ``receiver``'s memo key (:func:`projector`) is its gate's, the set of its
    members' ``(name, contribution)`` pairs: the contribution of one member
    (:meth:`~handoffs.receivers.Gate.memo_member`), from which the key of a message
    that differs from another in one member follows. ``None`` otherwise.
    """
    if not isinstance(receiver, FunctionReceiver | StrictContractReceiver
                      | AuthoritativeActuator) or not keyed(receiver, projection=projection):
        return None
    gate = receiver.gate
    if not isinstance(gate, Gate) or _reads(receiver) & PROJECTED:
        return None
    return gate.memo_member()


def memo_key(receiver: Any, message: bytes | str | Mapping[str, Any], *,
             projection: bool = False) -> Hashable | None:
    """The key on which ``receiver``'s decisions of ``message`` may be memoised, or
    ``None``: memoise on the whole canonical message (raw bytes or text; a receiver or
    admission whose decisions depend on more than the message; a message its
    admission refuses at parse whatever its members say; a user's ``reads``
    declaration without ``projection``).
    """
    project = projector(receiver, projection=projection)
    if project is None or not isinstance(message, Mapping):
        return None
    return project(message)


def policy_reads(contract: Any) -> frozenset[str]:
    """The decision-state fields ``contract``'s policy reads, from the policy itself
    (every field a rule's condition names; a contract refuses a policy that reads a
    field outside its decision state).
    """
    return frozenset(contract.policy.reads())


def _contract_reads(receiver: StrictContractReceiver | AuthoritativeActuator) -> frozenset[str]:
    """The message members a contract receiver's rule reads.

    The strict receiver decides by the policy on the receipt's decision state: the
    members it reads are those holding the policy's fields (:func:`policy_reads`), the
    ``decision_state``, which a gate's key keeps by value. The actuator executes what
    the admitted message proposes or states: the members its rule takes from the
    admitted document (``AuthoritativeActuator.reads``, the library's own rule, checked
    by ``tests/unit/test_memo.py``), which a governance checker's key keeps by value
    only when asked to.
    """
    if isinstance(receiver, AuthoritativeActuator):
        return frozenset(AuthoritativeActuator.reads)
    gate = receiver.gate
    if isinstance(gate, Gate) and any(policy_reads(contract) for contract in gate.registry):
        return _STATE
    return frozenset()


_STATE: Final = frozenset({"decision_state"})


def _model_key(receiver: ModelReceiver, message: Mapping[str, Any]) -> Hashable | None:
    """The admission's key and every member the prompt shows, by value."""
    admission = _admission_projector(receiver.gate, frozenset())(message)
    if admission is None:
        return None
    hidden = receiver.hidden
    return (admission, frozenset([(k, memo_value(v)) for k, v in message.items()
                                  if k not in hidden]))
