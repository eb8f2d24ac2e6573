"""Memo keys: what the lab derives from a receiver's declaration.

Receivers only *declare*: whether they are deterministic, and what their rule reads
(:attr:`~handoffs.receivers.FunctionReceiver.reads`, the members a
:class:`~handoffs.receivers.ModelReceiver`'s prompt does not show, the members the
strict receiver and the actuator read), besides the public configuration of their
admission (a :class:`~handoffs.receivers.Gate`'s contracts, trust, replay store,
decision log, evidence resolver and readback; the lab's
:class:`~handoffs.lab.GovernanceChecker`). From that, :func:`memo_key` computes a key
on which decisions may be memoised and :func:`memo_member` one member's contribution
to it. A receiver the lab does not know may compute its own key (:class:`Memoisable`);
any other deterministic receiver is memoised on the whole canonical message.

**Soundness.** Two messages with equal keys get the same verdict, action and reason
codes (not necessarily the same ids, messages or ``record``): the key keeps everything
those depend on and may drop the rest, such as unique ids whose only effect is through
their validity.

**Member-wise.** A key is determined by its members' contributions, and determines
them: the key of a message that differs from another in one member follows from the
other's key and that member's contribution (or its absence). The lab keys perturbed
messages this way without building them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Final, Protocol, cast, runtime_checkable

import attrs
import jsonschema_rs

from handoffs._json import canonical_bytes
from handoffs.contracts._contract import EvidenceFresh
from handoffs.contracts._receipt import EvidenceRef
from handoffs.receivers._gate import Gate
from handoffs.receivers._model import ModelReceiver
from handoffs.receivers._receivers import (
    AuthoritativeActuator,
    FunctionReceiver,
    StrictContractReceiver,
)

__all__ = ["Memoisable", "keyed", "memo_key", "memo_member", "memo_value"]


@runtime_checkable
class Memoisable(Protocol):
    """A deterministic receiver that computes its own memo key (see the module's
    soundness and member-wise rules); the lab uses it for receivers whose
    declarations it cannot read.
    """

    def memo_key(self, message: Mapping[str, Any]) -> Hashable | None:
        """The key, or ``None`` when the receiver (as configured) may not be memoised
        on anything smaller than the whole message.
        """
        ...

    def memo_member(self, name: str, value: Any) -> Hashable:
        """One member's contribution to :meth:`memo_key`."""
        ...


# ------------------------------------------------------------------ JSON values


_FLAT: Final = frozenset({str, int, float, bool, type(None)})


class _Unique:
    """A key part equal only to itself (for values that cannot be compared safely)."""

    __slots__ = ()


def memo_value(value: Any) -> Hashable:  # noqa: PLR0911 - one return per JSON shape
    """A hashable stand-in for a JSON value, equal exactly when the values are equal
    *and* of the same types (``True``, ``1`` and ``1.0`` are different values here),
    with object members in order. Unhashable foreign values never compare equal.
    """
    kind = type(value)
    if kind is str:
        return cast(str, value)
    if kind is dict:
        types = tuple(map(type, value.values()))
        if _FLAT.issuperset(types):
            return (dict, tuple(value.items()), types)
        return (dict, tuple((k, memo_value(v)) for k, v in value.items()))
    if kind in _FLAT:
        return (kind, value)
    if kind is list or kind is tuple:
        types = tuple(map(type, value))
        if _FLAT.issuperset(types):
            return (kind, tuple(value), types)
        return (kind, tuple(memo_value(v) for v in value))
    if isinstance(value, Mapping):
        return (kind, tuple((k, memo_value(v)) for k, v in value.items()))
    try:
        hash(value)
    except TypeError:
        return _Unique()
    return (kind, value)


class _Unmemoisable:
    """A key part equal only to itself."""

    __slots__ = ()


class _Missing:
    """Stands for an absent member in memo keys."""

    __slots__ = ()


_MISSING_MEMBER: Final = _Missing()


# --------------------------------------------------------------------- the gate

# The members of a receipt that carry per-case identifiers.
_PROJECTED: Final = frozenset({"id", "case_id", "evidence_refs"})


class _Valid:
    """Stands for "a value valid under its member's schema" in memo keys."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<valid>"


_VALID: Final = _Valid()
_MEMO_VALIDATORS: dict[str, Any] = {}


class _MemberValidator:
    """``is_valid`` of one member's subschema (compiled once per process; picklable)."""

    __slots__ = ("text", "validator")

    def __init__(self, subschema: Mapping[str, Any]) -> None:
        self.text = json.dumps(subschema, sort_keys=True)
        found = _MEMO_VALIDATORS.get(self.text)
        if found is None:
            found = _MEMO_VALIDATORS[self.text] = jsonschema_rs.validator_for(
                {"$schema": "https://json-schema.org/draft/2020-12/schema", **subschema})
        self.validator = found

    def __call__(self, value: Any) -> bool:
        try:
            return bool(self.validator.is_valid(value))
        except (ValueError, TypeError, OverflowError):
            return False

    def __reduce__(self) -> tuple[Any, ...]:
        return (_MemberValidator, (json.loads(self.text),))


@attrs.frozen
class _GateMemo:
    """What a gate's memo keys need: member validators, freshness names, the resolver.

    A gate's decisions may be memoised when they depend on the message alone: it is
    deterministic (no replay store), checks no proofs (a signature covers every
    byte), keeps no decision log, and its evidence resolver (if any) says by its own
    ``memo_key(ref)`` what its answer for a reference depends on. The key then keeps
    every member as it is, except three that carry per-case identifiers, whose only
    effect on the decision is this:

    - ``id`` and ``case_id``: whether each is valid under the contract schema (the
      receipt id is kept as it is when readback samples receipts by id);
    - ``evidence_refs``: per reference, whether it is valid under the schema, the
      resolver's ``memo_key`` for it, and which of the contracts' freshness
      dependencies it names.

    This holds for rules that read only the typed receipt's decision state, proposed
    action and authority (the strict receiver, the actuator); a rule that reads an
    identifier declares it, and the lab keeps that member by value too.
    """

    enabled: bool
    id_ok: Callable[[Any], bool] | None = None
    case_ok: Callable[[Any], bool] | None = None
    ref_ok: Callable[[Any], bool] | None = None
    fresh: tuple[str, ...] = ()
    resolver: Callable[[EvidenceRef], Hashable] | None = None
    keep_id: bool = False

    @classmethod
    def build(cls, gate: Gate) -> _GateMemo:
        from handoffs.contracts._schema import to_json_schema_cached

        resolver = None
        if gate.evidence is not None:
            resolver = getattr(gate.evidence, "memo_key", None)
            if not callable(resolver):
                return cls(enabled=False)
        if not gate.deterministic or gate.verifies_proofs or gate.log is not None:
            return cls(enabled=False)
        subschemas = set()
        fresh: list[str] = []
        for contract in gate.registry:
            properties = to_json_schema_cached(contract)["properties"]
            subschemas.add(canonical_bytes([properties["id"], properties["case_id"],
                                            properties["evidence_refs"]["items"]]))
            fresh += [d.evidence for d in contract.context if isinstance(d, EvidenceFresh)]
        if len(subschemas) != 1:  # contracts that disagree on what a valid id is
            return cls(enabled=False)
        properties = to_json_schema_cached(next(iter(gate.registry)))["properties"]
        sampled = gate.readback.enabled and gate.readback.fraction < 1
        return cls(
            enabled=True,
            id_ok=_MemberValidator(properties["id"]),
            case_ok=_MemberValidator(properties["case_id"]),
            ref_ok=_MemberValidator(properties["evidence_refs"]["items"]),
            fresh=tuple(sorted(set(fresh))),
            resolver=resolver,
            keep_id=sampled,
        )

    def key(self, message: Mapping[str, Any]) -> Hashable:
        """The key of a message (a frozenset of the members' contributions)."""
        member = self.member
        # Most members are strings, which stand for themselves (see memo_value).
        return frozenset([(name, value if type(value) is str and name not in _PROJECTED
                           else member(name, value)) for name, value in message.items()])

    def member(self, name: str, value: Any) -> Hashable:
        """One member's contribution."""
        if name == "id":
            if not self.keep_id and self.id_ok is not None and self.id_ok(value):
                return _VALID
        elif name == "case_id":
            if self.case_ok is not None and self.case_ok(value):
                return _VALID
        elif name == "evidence_refs" and type(value) is list:
            return tuple([self._ref(item) for item in value])
        return memo_value(value)

    def _ref(self, item: Any) -> Hashable:
        if self.ref_ok is None or not self.ref_ok(item):
            return ("invalid", memo_value(item))
        ref = EvidenceRef(item) if type(item) is str else EvidenceRef.from_json(item)
        resolved = None if self.resolver is None else self.resolver(ref)
        uri = ref.uri
        return (_VALID, resolved, tuple([name in uri for name in self.fresh]))


_GATES: dict[int, tuple[Gate, _GateMemo]] = {}
_GATES_KEPT: Final = 256
_GATES_LOCK: Final = threading.Lock()


def _gate_memo(gate: Gate) -> _GateMemo | None:
    """The gate's memo configuration (built once per gate object and process)."""
    found = _GATES.get(id(gate))
    if found is None or found[0] is not gate:
        memo = _GateMemo.build(gate)
        with _GATES_LOCK:
            if len(_GATES) >= _GATES_KEPT:
                _GATES.clear()
            _GATES[id(gate)] = found = (gate, memo)  # the gate pinned: its id stays its
    return found[1] if found[1].enabled else None


# ------------------------------------------------------------------ admissions


def _admission_key(admission: Any, message: Mapping[str, Any], keep: frozenset[str]
                   ) -> Hashable | None:
    """The admission's key, keeping the members in ``keep`` (what the rule reads)."""
    if isinstance(admission, Gate):
        memo = _gate_memo(admission)
        if memo is None:
            return None
        key = memo.key(message)
        extra = sorted(keep & _PROJECTED)  # every other member is in the key as it is
        if not extra:
            return key
        return (key, tuple([memo_value(message[n]) if n in message else _MISSING_MEMBER
                            for n in extra]))
    own = getattr(admission, "memo_key", None)  # the lab's governance checker
    if callable(own):
        return cast(Hashable | None, own(message, keep=keep))
    return None


def _admission_member(admission: Any, name: str, value: Any, keep: frozenset[str]
                      ) -> Hashable:
    if isinstance(admission, Gate):
        memo = _gate_memo(admission)
        if memo is None:
            return _Unmemoisable()
        part = memo.member(name, value)
        if not keep & _PROJECTED:
            return part
        return (part, memo_value(value) if name in keep & _PROJECTED else None)
    own = getattr(admission, "memo_member", None)
    if callable(own):
        return cast(Hashable, own(name, value, keep=keep))
    return _Unmemoisable()


# ------------------------------------------------------------------- receivers

_READS: dict[int, tuple[Any, frozenset[str]]] = {}


def _reads(receiver: Any) -> frozenset[str]:
    """What the rule of a receiver that decides through an admission reads."""
    found = _READS.get(id(receiver))
    if found is None or found[0] is not receiver:
        if len(_READS) >= _GATES_KEPT:
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


def memo_member(receiver: Any, name: str, value: Any) -> Hashable:
    """One member's contribution to :func:`memo_key`."""
    if isinstance(receiver, ModelReceiver):
        return (_admission_member(receiver.gate, name, value, frozenset()),
                None if name in receiver.hidden else memo_value(value))
    if isinstance(receiver, FunctionReceiver | StrictContractReceiver
                  | AuthoritativeActuator):
        if receiver.reads is None:
            return _Unmemoisable()
        return _admission_member(receiver.gate, name, value, _reads(receiver))
    own = getattr(receiver, "memo_member", None)
    if callable(own):
        return cast(Hashable, own(name, value))
    return _Unmemoisable()
