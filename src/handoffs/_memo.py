"""Shared internal (not public): the memo keys of receivers, in one place.

A memo key holds each JSON value as :func:`memo_value`, equal exactly when the values
are equal and of the same types. A gate's key (:class:`GateMemo`, through
:meth:`~handoffs.receivers.Gate.memo_key`) keeps every member so, except the three that
carry per-case identifiers (:data:`PROJECTED`: ``id``, ``case_id``,
``evidence_refs``), which the gate's steps read only for their validity under the
schema, their evidence resolution and the freshness dependencies they name; a check
that reads one of them otherwise extends their treatment here
(``tests/unit/test_memo.py`` decides messages both ways). The lab checks a receipt's
schema and governance members once per such key of a gate of its contract
(``lab._chunk``; ``tests/unit/test_projection.py`` checks receipts with equal keys).
The baseline governance checker (``receivers._baselines``) and the lab (``lab._memo``:
which key each receiver it calls gets, and the run-wide memo) build on these
definitions of "the same value".
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Final, TypeVar, cast

import attrs
import jsonschema_rs

from handoffs._json import canonical_bytes
from handoffs.contracts import EvidenceFresh, EvidenceRef

__all__ = ["PROJECTED", "GateMemo", "by_identity", "gate_memo", "memo_value"]

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



# The members of a receipt that carry per-case identifiers.
PROJECTED: Final = frozenset({"id", "case_id", "evidence_refs"})


class _Valid:
    """Stands for "a value valid under its member's schema" in memo keys."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<valid>"


_VALID: Final = _Valid()
_MEMO_VALIDATORS: dict[str, Any] = {}


class _MemberValidator:
    """``is_valid`` of one member's subschema (compiled once per process; picklable),
    remembered for text values (the answer is a function of the value).
    """

    __slots__ = ("seen", "text", "validator")

    def __init__(self, subschema: Mapping[str, Any]) -> None:
        self.text = json.dumps(subschema, sort_keys=True)
        found = _MEMO_VALIDATORS.get(self.text)
        if found is None:
            found = _MEMO_VALIDATORS[self.text] = jsonschema_rs.validator_for(
                {"$schema": "https://json-schema.org/draft/2020-12/schema", **subschema})
        self.validator = found
        self.seen: dict[str, bool] = {}

    def __call__(self, value: Any) -> bool:
        if type(value) is str:
            known = self.seen.get(value)
            if known is not None:
                return known
            if len(self.seen) >= _REFS_KEPT:
                self.seen.clear()
            known = self.seen[value] = self._valid(value)
            return known
        return self._valid(value)

    def _valid(self, value: Any) -> bool:
        try:
            return bool(self.validator.is_valid(value))
        except (ValueError, TypeError, OverflowError):
            return False

    def __reduce__(self) -> tuple[Any, ...]:
        return (_MemberValidator, (json.loads(self.text),))


@attrs.frozen
class GateMemo:
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
    refs: dict[str, Hashable] = attrs.field(factory=dict, eq=False, repr=False)

    @classmethod
    def build(cls, gate: Any) -> GateMemo:
        """What :meth:`Gate.memo_key` needs of ``gate`` (``enabled=False``: nothing
        smaller than the whole message).
        """
        resolver = None
        if gate.evidence is not None:
            resolver = getattr(gate.evidence, "memo_key", None)
            if not callable(resolver):
                return cls(enabled=False)
        if not gate.deterministic or gate.verifies_proofs or gate.log is not None:
            return cls(enabled=False)
        subschemas = set()
        fresh: list[str] = []
        members = [contract.json_schema()["properties"] for contract in gate.registry]
        for contract, properties in zip(gate.registry, members, strict=True):
            subschemas.add(canonical_bytes([properties["id"], properties["case_id"],
                                            properties["evidence_refs"]["items"]]))
            fresh += [d.evidence for d in contract.context if isinstance(d, EvidenceFresh)]
        if len(subschemas) != 1:  # contracts that disagree on what a valid id is
            return cls(enabled=False)
        properties = members[0]
        sampled = 0 < gate.readback < 1
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
        return frozenset([(name, member(name, value)) for name, value in message.items()])

    def member(self, name: str, value: Any) -> Hashable:
        """One member's contribution (the key is the set of ``(name, contribution)``,
        so a message that differs in one member differs in that pair only).
        """
        if type(value) is str and name not in PROJECTED:
            return value  # most members are strings, which stand for themselves
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
        """One evidence reference's contribution (a text reference's, remembered by
        its value: the contribution is a function of the value alone).
        """
        if type(item) is not str:
            return self._ref_of(item)
        seen = self.refs
        found = seen.get(item)
        if found is None:
            if len(seen) >= _REFS_KEPT:
                seen.clear()
            found = seen[item] = self._ref_of(item)
        return found

    def _ref_of(self, item: Any) -> Hashable:
        if self.ref_ok is None or not self.ref_ok(item):
            return ("invalid", memo_value(item))
        ref = EvidenceRef(item) if type(item) is str else EvidenceRef.from_json(item)
        resolved = None if self.resolver is None else self.resolver(ref)
        uri = ref.uri
        return (_VALID, resolved, tuple([name in uri for name in self.fresh]))


_REFS_KEPT: Final = 1024  # a case's identifiers recur across its messages, not across cases


_V = TypeVar("_V")
_IDENTITY_LOCK: Final = threading.Lock()


def by_identity(cache: dict[int, tuple[Any, _V]], owner: object, make: Callable[[], _V], *,
                limit: int) -> _V:
    """What ``make()`` builds for the object ``owner``, built once per object while
    ``cache`` holds it: keyed by ``id``, the entry pinning ``owner`` so that its id stays
    its own; the cache is emptied when it reaches ``limit`` entries.
    """
    found = cache.get(id(owner))
    if found is None or found[0] is not owner:
        value = make()
        with _IDENTITY_LOCK:
            if len(cache) >= limit:
                cache.clear()
            cache[id(owner)] = found = (owner, value)
    return found[1]


_GATES: dict[int, tuple[Any, GateMemo]] = {}
_GATES_KEPT: Final = 256


def gate_memo(gate: Any) -> GateMemo | None:
    """The gate's memo configuration (built once per gate object and process)."""
    memo = by_identity(_GATES, gate, lambda: GateMemo.build(gate), limit=_GATES_KEPT)
    return memo if memo.enabled else None


