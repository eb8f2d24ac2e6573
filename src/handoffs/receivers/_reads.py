"""What a receiver's decision reads of a message: the members (and decision-state
fields) its verdict and action depend on, stated from the receiver as configured.

The lab asks :func:`decision_reads` whether a perturbation *exercised* a receiver: a
perturbed message that differs from the unperturbed one only in members the receiver
does not read cannot change its decision (an evidence reference without an evidence
resolver, a policy version without a policy service). The statement follows the
receivers' own steps, beside them here, and leans to "reads": a receiver this module
does not know reads every member.

- A :class:`~handoffs.receivers.Gate` that verifies proofs reads every byte (the
  signature covers them). Otherwise it reads ``contract`` (step 1, which also checks
  the whole message against the contract's schema), ``receiver`` and ``valid_until``
  (step 2), ``id`` when a replay store or sampled readback keys on it,
  ``policy_version`` when a contract declares a ``PolicyResolvable`` dependency and a
  policy service is configured (without one, the dependency is unmet whatever the
  version), ``evidence_refs`` when an evidence resolver is configured (without one,
  step 4 is skipped and ``EvidenceFresh`` dependencies are unmet whatever the
  references), and every decision field when it reads claims back.
- A :class:`~handoffs.receivers.GovernanceChecker` reads its required members, and
  ``receiver`` and ``valid_until`` when it checks them.
- The rules: the strict receiver reads the decision fields its contracts' policies
  read (the policy analysis states them); the actuator ``authority``, ``action`` and
  ``proposed_action``; a function receiver what it declares (every member if it
  declares nothing); a model receiver every member its prompt shows; the score
  receiver its score; the full-record receiver the contract's fields; the advisory
  receiver nothing (it always refers the case).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import attrs

from handoffs.contracts import EvidenceFresh, PolicyResolvable

__all__ = ["Reads", "decision_reads"]

_STATE: Final = "decision_state"


@attrs.frozen
class Reads:
    """What a decision reads of a message.

    Attributes:
        members: the top-level members read by value; ``None``: every member but
            ``hidden``.
        hidden: with ``members`` ``None``, the members not read.
        fields: when ``decision_state`` is read, the fields read (``None``: every one).
        schema: whether the message's validity under the contract schema decides
            (then a perturbation that changes it exercises the receiver).
        unread: why a member is not read, for the members where that is worth saying.
    """

    members: frozenset[str] | None
    hidden: frozenset[str] = frozenset()
    fields: frozenset[str] | None = frozenset()
    schema: bool = False
    unread: Mapping[str, str] = attrs.field(factory=dict)

    def reads(self, path: str) -> bool:
        """Whether ``path`` (a member, or ``decision_state.<field>``) is read."""
        member, _, field = path.partition(".")
        if self.members is None:
            if member in self.hidden:
                return False
        elif member not in self.members:
            return False
        return not (field and member == _STATE and self.fields is not None
                    and field not in self.fields)

    def why_not(self, path: str) -> str | None:
        """Why ``path`` is not read, if said."""
        member, _, field = path.partition(".")
        if field and member == _STATE and self.reads(_STATE):
            return "no rule reads that field"
        return self.unread.get(member)

    def __or__(self, other: Reads) -> Reads:
        """What either reads."""
        state = [r.fields for r in (self, other) if r.reads(_STATE)]
        fields: frozenset[str] | None = (
            None if any(f is None for f in state)
            else frozenset().union(*[f for f in state if f is not None]))
        if self.members is None or other.members is None:
            hiddens = [r.hidden for r in (self, other) if r.members is None]
            hidden = hiddens[0] if len(hiddens) == 1 else hiddens[0] & hiddens[1]
            for r in (self, other):
                if r.members is not None:
                    hidden -= r.members
            members = None
        else:
            hidden, members = frozenset(), self.members | other.members
        unread = {k: v for k, v in {**other.unread, **self.unread}.items()
                  if not (self.reads(k) or other.reads(k))}
        return Reads(members=members, hidden=hidden, fields=fields,
                     schema=self.schema or other.schema, unread=unread)


EVERYTHING: Final = Reads(members=None, fields=None, schema=True)
NOTHING: Final = Reads(members=frozenset())


def _members(*names: str, fields: Iterable[str] | None = ()) -> Reads:
    return Reads(members=frozenset(names),
                 fields=None if fields is None else frozenset(fields))


def gate_reads(gate: Any) -> Reads:
    """What a :class:`~handoffs.receivers.Gate`'s steps (1)-(4) read (see the module)."""
    if gate.verifies_proofs:
        return EVERYTHING
    read = {"contract", "receiver", "valid_until"}
    unread: dict[str, str] = {}
    if not gate.deterministic or 0 < gate.readback < 1:
        read.add("id")
    context = [d for contract in gate.registry for d in contract.context]
    if not any(isinstance(d, PolicyResolvable) for d in context):
        unread["policy_version"] = "no contract declares a policy dependency"
    elif gate.policy_service is None:
        unread["policy_version"] = "no policy service is configured"
    else:
        read.add("policy_version")
    if gate.evidence is None:
        fresh = any(isinstance(d, EvidenceFresh) for d in context)
        unread["evidence_refs"] = "no evidence resolver is configured" + (
            " (its evidence-fresh dependencies are unmet whatever the references)"
            if fresh else "")
    else:
        read.add("evidence_refs")
    fields: frozenset[str] | None = frozenset()
    if gate.readback > 0:
        read.add(_STATE)
        fields = None
    return Reads(members=frozenset(read), fields=fields, schema=True, unread=unread)


def _admission_reads(admission: Any) -> Reads:
    from handoffs.receivers._baselines import GovernanceChecker
    from handoffs.receivers._gate import Gate

    if isinstance(admission, Gate):
        return gate_reads(admission)
    if isinstance(admission, GovernanceChecker):
        read = set(admission.required)
        if admission.identity is not None:
            read.add("receiver")
        if admission.clock is not None:
            read.add("valid_until")
        return Reads(members=frozenset(read))
    return EVERYTHING


def decision_reads(receiver: Any) -> Reads:  # noqa: PLR0911 - one return per receiver kind
    """What ``receiver``'s verdict and action read of a message, as configured (see
    the module); every member for a receiver it does not know.
    """
    from handoffs.receivers._baselines import (
        AdvisoryActionReceiver,
        FullRecordReceiver,
        ScoreReceiver,
    )
    from handoffs.receivers._receivers import (
        AuthoritativeActuator,
        FunctionReceiver,
        StrictContractReceiver,
    )
    from handoffs.receivers.models import ModelReceiver

    if isinstance(receiver, StrictContractReceiver):
        fields = frozenset().union(*[c.policy.reads() for c in receiver.gate.registry])
        return gate_reads(receiver.gate) | _members(_STATE, fields=fields)
    if isinstance(receiver, AuthoritativeActuator):
        return _admission_reads(receiver.gate) | _members(
            *AuthoritativeActuator.reads)
    if isinstance(receiver, FunctionReceiver):
        if receiver.reads is None:
            return EVERYTHING
        return _admission_reads(receiver.gate) | _members(
            "authority", *receiver.reads, fields=None)
    if isinstance(receiver, ModelReceiver):
        hidden = frozenset(receiver.hidden)
        return _admission_reads(receiver.gate) | Reads(
            members=None, hidden=hidden, fields=None,
            unread=dict.fromkeys(hidden, "the model's prompt does not show it"))
    if isinstance(receiver, ScoreReceiver):
        return _admission_reads(receiver._via()) | _members(receiver.field)
    if isinstance(receiver, FullRecordReceiver):
        return _admission_reads(receiver._via()) | _members(*receiver.contract.field_map)
    if isinstance(receiver, AdvisoryActionReceiver):
        return _admission_reads(receiver._via()) | NOTHING
    return EVERYTHING
