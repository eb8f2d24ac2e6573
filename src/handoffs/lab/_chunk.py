"""The work on one chunk of cases: encode every case once, then decide every message.

Inside a chunk each case is encoded once per encoder and stamped once per authority.
An unperturbed message is measured (its canonical bytes, with RFC 8785's fast path
decided once per member value: :class:`~handoffs.lab._plan.Canonical`), checked and
keyed whole; a one-member patch of it (:meth:`_Chunk._patched`) is sized from it (RFC
8785 writes members one by one, so sizes add: the base's member sized once,
:meth:`~handoffs.lab._messages.Message.member_size`) and keyed from its key. A receipt
is checked once per memo key of a gate of its contract (:meth:`_Chunk._checked`: that
key keeps every member as the schema reads it). A deterministic receiver is memoised run-wide
(:mod:`handoffs.lab._memo`) on the canonical message, or on the key the library derives
for it (:mod:`handoffs.lab._memo`); a user's ``reads`` declaration only with
``plan.projection``, and then checked on a sample of memo hits (:meth:`_Chunk._check`).
(Caching variants per declared read, replaying a case's rows from an
earlier alike case, a per-chunk memo in front of the run-wide one, sizing, checking and
keying a one-member patch from its unperturbed message, sizing messages from their
members' remembered sizes, reusing the base's checks for members a variant did not
touch, deriving a second authority's stamp from the first and memoising the reference
per decision state were removed in an earlier release; issue #34 judges each
optimisation by the whole-engine figure of ``benchmarks/lab.py`` instead.) A sampled receiver is
called again for every epoch, except a sampled model receiver with a deterministic
admission, which is memoised per draw: the request of epoch ``i`` is asked once per run
(and kept by the call cache), so ``n`` epochs of one prompt are ``n`` calls.

When the plan has slow receivers (``plan.prefetch``), a scheduling pass walks the
chunk first, handing their distinct messages to the run's call pool; the deciding
pass then finds the answers in flight or done.

Chunk records hold the decisions compactly (distinct rows with their counts and
sums); the run log, when one is asked for, still holds one row per decision.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import hashlib
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, Final

from handoffs._errors import ExperimentError, ProjectionError, UntrustedGovernance
from handoffs._json import canonical_bytes, canonical_size, digest, dumps
from handoffs._members import GOVERNANCE_FIELDS
from handoffs.contracts import Authority
from handoffs.lab._controls import Partners
from handoffs.lab._exercised import Tally, touched
from handoffs.lab._experiment import Strategy
from handoffs.lab._maps import reference_rule
from handoffs.lab._memo import (
    _decide,
    _Pending,
    _Shared,
    _shared_for,
    _whole,
    memo_value,
    send_ahead,
    send_batch,
)
from handoffs.lab._messages import (
    Message,
    Patched,
    Slot,
    drawn,
)
from handoffs.lab._plan import (
    _ENVELOPE,
    _FORBIDDEN,
    Canonical,
    Plan,
    _checks_for,
    _compose,
    _reference_for,
    _strategy_index,
    _tokens,
    analyse_state,
    receipt_id,
)
from handoffs.lab._usercode import case_id_of, encoded, evidence_refs_of, user_error
from handoffs.lab._values import wire_value
from handoffs.lab.perturbations import CaseContext, Perturbation, Variant
from handoffs.receivers import Gate, Verdict, decision_reads

__all__ = ["EXHIBITS", "run_chunk"]


_plans: dict[str, Plan] = {}
_GOVERNANCE: Final = frozenset(GOVERNANCE_FIELDS)


_PLANS_KEPT: Final = 8
_GONE: Final = ("removed",)  # a removed member's contribution to a patched key
EXHIBITS: Final = 3
"""Failing messages kept per strategy × perturbation: by each chunk, and by the
metrics over the run."""
_CHECK_EVERY: Final = 16
"""A hit on a declared projection is decided again once in this many (and the first)."""


def run_chunk(plan: Plan, index: int, start: int, cases: Sequence[Any],
              constants: Sequence[Mapping[str, Any] | None], *, partners: Partners
              ) -> dict[str, Any]:
    """Run every strategy × perturbation on one chunk of cases; return its record.

    ``partners`` says whose message each case gets under the shuffled control
    (:func:`~handoffs.lab._controls.paired_chunks`); a partner outside the chunk is
    encoded here from the evidence it carries.

    The record holds the chunk's decisions in compact form: distinct decision rows
    (``templates``) with per-template counts and sums (``stats``), and the rows
    themselves (``rows``: case offset, template, bytes, tokens, latency, memo) when
    ``plan.keep_rows`` (a run log is written), else only the rows the metrics read
    one by one (falsehoods, injections and their baselines). See
    :func:`handoffs.lab._runlog.expand_rows` for the run log's one-row-per-decision
    form. Deterministic given its arguments (latencies aside), whatever the executor.
    """
    if plan.token:
        # A process executor unpickles a new copy of the plan with every chunk; keep the
        # first, whose contract the compiled checks and caches of this process know.
        known = _plans.get(plan.token)
        if known is None:
            if len(_plans) >= _PLANS_KEPT:
                _plans.clear()
            known = _plans[plan.token] = plan
        plan = known
    shared = _shared_for(plan)
    if plan.prefetch:
        # (0) schedule: walk the chunk without deciding, making every distinct request
        # of a slow receiver and sending it to the shared pool as it is made (one pass
        # at a time, in stream order). The walk goes in slices that double from
        # _FIRST_SLICE cases, so the first request is made after a few cases are
        # encoded, not the whole chunk. The pass below then finds the answers, in
        # flight or done: it waits for each as it needs it.
        with shared.scheduling(index):
            at, size = 0, _FIRST_SLICE
            while at < len(cases):
                dry = _Chunk(plan, constants, shared, dry=True)
                dry.pair(partners, cases, at)
                try:
                    dry.encode(cases[at:at + size])
                    dry.decide(start + at)
                finally:  # sent even if the pass failed: other chunks may wait for them
                    dry.send()
                at, size = at + size, 2 * size
    chunk = _Chunk(plan, constants, shared)
    chunk.pair(partners, cases, 0)
    chunk.encode(cases)
    chunk.decide(start)
    return {
        "chunk": index,
        "start": start,
        "cases": chunk.case_rows,
        "states": chunk.states,
        "calls": chunk.calls,
        "hits": chunk.hits,
        "templates": chunk.templates,
        "stats": chunk.stats,
        "case_counts": [[si, pi, n] for (si, pi), n in chunk.case_counts.items()],
        "rows": chunk.rows,
        "exhibits": chunk.failing.exhibits,
        "rules": chunk.failing.rules,
        "complete_rows": plan.keep_rows,
        "model": [[si, *usage] for si, usage in sorted(chunk.usage.items())],
        "exercised": chunk.tally.to_json(),
    }


_FIRST_SLICE: Final = 8
"""Cases in the scheduling pass's first slice (the slices double from there)."""


class _Failing:
    """A chunk's failing decisions: the templates whose action differs from the
    reference, the messages kept for the first few, the reference's deciding rules.
    """

    __slots__ = ("counts", "exhibits", "notable", "rules")

    def __init__(self) -> None:
        self.notable: set[int] = set()
        self.exhibits: list[list[Any]] = []  # [row index, message sent]
        self.rules: dict[str, str] = {}  # state key: the reference's deciding rule
        self.counts: dict[tuple[int, int], int] = {}  # exhibits per (strategy, perturbation)


class _Chunk:
    """The work on one chunk: encode every case once, then decide every message."""

    validity: dict[Hashable, tuple[bool, bool | None]]
    """Governance and schema validity by memo key (see :meth:`_checked`)."""

    def __init__(self, plan: Plan, constants: Sequence[Mapping[str, Any] | None],
                 shared: _Shared | None = None, *, dry: bool = False) -> None:
        self.plan = plan
        self.shared = _Shared(plan) if shared is None else shared
        self.dry = dry
        self.scheduled: list[cf.Future[Any]] = []
        self.asked: set[Hashable] = set()  # the scheduling pass's memo keys so far
        # The scheduling pass's requests, sent as they are made: the first alone, then
        # in batches that double up to the pool's width (one call-cache look-up each),
        # so that the first call leaves at once and the pool stays fed.
        self.batch: list[_Pending] = []
        self.flush_at = 1
        # per strategy: [model calls, cache hits, tokens in, tokens out, latency µs]
        self.usage: dict[int, list[int]] = {}
        self.constants = constants
        self.contract = plan.contract
        self.checks = _checks_for(plan.contract)
        self.canonical = Canonical()
        self.reference = _reference_for(plan.contract)
        slots: dict[int, Slot] = {}
        for strategy in plan.strategies:
            if id(strategy.receiver) not in slots:
                slots[id(strategy.receiver)] = Slot(len(slots), strategy.receiver,
                                                    projection=plan.projection)
        self.slots = [slots[id(s.receiver)] for s in plan.strategies]
        # per strategy, the slot whose memo key also decides the message's checks (see
        # _checked), and the checks by that key
        self.checked_by, self.validity = [
            slot if _keys_checks(slot, plan.contract) else None for slot in self.slots], {}
        self.semantic = Slot(len(slots), plan.semantic, projection=plan.projection)
        self.nslots = len(slots) + 1
        self.fail = str(plan.contract.fail_closed_action.value)
        self.receipts = [s.receipts for s in plan.strategies]
        self.case_rows: list[list[Any]] = []
        self.truths: list[dict[str, Any]] = []
        # per case: the state-conditioned hard constraints whose `when` holds on its truth
        self.conditioned = tuple(h for h in plan.contract.hard_constraints
                                 if h.when is not None)
        self.holding: list[tuple[str, ...]] = []
        self.bases: list[list[Message]] = []
        self.states: dict[str, dict[str, Any]] = {}
        # the chunk's distinct outcomes, by id
        self.outcomes: list[tuple[str, str, tuple[str, ...]]] = []
        if dry:  # the scheduling pass decides nothing: one placeholder outcome
            self.outcomes.append((self.fail, Verdict.ACCEPT.value, ()))
        self.outcome_ids: dict[tuple[str, str, tuple[str, ...]], int] = {}
        self.calls = self.hits = 0
        # compact decision rows
        self.template_ids: dict[Hashable, int] = {}
        self.templates: list[list[Any]] = []
        self.stats: list[list[int]] = []
        self.rows: list[tuple[int, int, int, int | None, int, int]] = []
        self.case_counts: dict[tuple[int, int], int] = {}
        self.last_case: dict[tuple[int, int], int] = {}
        # failures: the templates whose action differs from the reference (their rows
        # are always kept, so that every disagreement names its case), the reference
        # policy's deciding rule per state, and for the first few per strategy ×
        # perturbation the message sent
        self.failing = _Failing()
        self.special = plan.special
        self.special_cases: set[int] = set()
        # whether each perturbation exercised each receiver (handoffs.lab._exercised):
        # what each receiver reads, the unperturbed decisions' outcomes, the last one
        self.tally = Tally()
        self.reads = [decision_reads(s.receiver) for s in plan.strategies]
        self.controls = {pi for pi, p in enumerate(plan.perturbations, start=1)
                         if p.kind == "control"}
        self.base_oids: dict[tuple[int, int], int] = {}
        self.last_oid = -1
        # the shuffled control's pairing (see pair), and the messages of the current
        # case's partner, encoded here when the partner is not among self.bases
        self.chunk_cases: Sequence[Any] = ()
        self.partners, self.offset = Partners(start=0, indices=(), evidence={}), 0
        self.partner_parts: dict[tuple[str, Any], Any] = {}

    def pair(self, partners: Partners, cases: Sequence[Any], offset: int) -> None:
        """Take the chunk's pairing under the shuffled control; the cases this object
        encodes are ``cases[offset:]`` (a scheduling pass walks the chunk in slices).
        """
        if len(partners.indices) != len(cases):
            raise ExperimentError(f"the pairing covers {len(partners.indices)} cases, the chunk "
                             f"{len(cases)}")
        self.partners, self.chunk_cases, self.offset = partners, cases, offset

    # (1) encode every case once per encoder, stamp governance once per authority.
    def encode(self, cases: Sequence[Any]) -> None:
        plan = self.plan
        strategies = plan.strategies
        for evidence in cases:
            case_id, truth, evidence_refs = self._read(evidence)
            state_key, ref = self._truth(truth, evidence, case_id)
            stamps: dict[Authority, dict[str, Any]] = {}
            contents: dict[int, dict[str, Any]] = {}
            row: list[Message] = []
            for si, strategy in enumerate(strategies):
                if self.dry and not self.slots[si].slow:  # not walked by the scheduling pass
                    row.append(Message({}, self.nslots))
                    continue
                authority = strategy.authority
                stamp = stamps.get(authority)
                if stamp is None:
                    stamp = stamps[authority] = plan.governance.stamp(
                        case_id=case_id, evidence_refs=evidence_refs,
                        authority=authority).to_json()
                content = contents.get(id(strategy.encoder))
                if content is None:
                    content = contents[id(strategy.encoder)] = self._content(
                        strategy, encoded(strategy, evidence, case_id))
                row.append(self._base(strategy, si, content, stamp, case_id))
            j = len(self.bases)
            self.bases.append(row)
            self.truths.append(truth)
            self.holding.append(() if self.dry else tuple(
                h.name for h in self.conditioned
                if h.when is not None and h.when.evaluate(truth) is not False))
            if case_id in plan.injection_cases:
                self.special_cases.add(j)
            if self.dry:
                self.case_rows.append([case_id, "", state_key, ref])
                for si, msg in enumerate(row):  # the unperturbed messages, at once
                    slot = self.slots[si]
                    if slot.slow and slot.memoised:
                        for sample in range(1 if slot.deterministic else plan.epochs):
                            self._schedule(slot, msg, memoise=True, sample=sample)
                continue
            self.case_rows.append([case_id, _case_digest(plan, evidence, case_id), state_key,
                                   ref])
            if plan.analyse and state_key not in self.states:
                analysis = analyse_state(self.contract, state_key, truth,
                                         budget=plan.region_budget)
                self.states[state_key] = {**analysis, "example_case_id": case_id,
                                          "example": row[plan.subject].message}

    def _read(self, evidence: Any) -> tuple[str, dict[str, Any], tuple[Any, ...]]:
        """A case's id, decision state (as a view) and evidence references, read by
        the experiment's own functions; one that raises is named in a
        :class:`UserCodeError` with the case.
        """
        plan = self.plan
        case_id = case_id_of(plan.case_id_of, evidence)
        try:
            truth = self.contract.view(plan.state_of(evidence))
        except Exception as exc:
            raise user_error("state function", plan.state_of, case_id, exc) from exc
        return case_id, truth, evidence_refs_of(plan.evidence_refs_of, evidence, case_id)

    def _truth(self, truth: dict[str, Any], evidence: Any,
               case_id: str) -> tuple[str, str]:
        """(state key, reference action)."""
        plan = self.plan
        state_json = dumps({name: wire_value(value) for name, value in truth.items()})
        state_key = hashlib.sha256(state_json.encode("utf-8")).hexdigest()[:16]
        if plan.reference is not None:
            try:
                declared = plan.reference(evidence)
            except Exception as exc:
                raise user_error("reference function", plan.reference, case_id, exc) from exc
            return state_key, str(declared.value if hasattr(declared, "value") else declared)
        return state_key, self.reference(truth)

    @staticmethod
    def _content(strategy: Strategy, content: dict[str, Any]) -> dict[str, Any]:
        """An encoder's content, checked: it may not set governance or envelope members."""
        clash = _FORBIDDEN.intersection(content)
        if clash:
            first = sorted(clash)
            raise UntrustedGovernance(f"encoder {strategy.name} content may not set "
                                      f"{', '.join(first)}", json_path=f"$.{first[0]}")
        return content

    def _base(self, strategy: Strategy, si: int, content: Mapping[str, Any],
              stamp: Mapping[str, Any], case_id: str) -> Message:
        """One strategy's message for one case, measured and checked."""
        plan = self.plan
        message: dict[str, Any] = {}
        if strategy.receipts:
            message["contract"] = plan.contract.id
            message["id"] = receipt_id(plan.name, strategy.name, case_id)
        message.update(content)
        message.update(stamp)
        return self._measured(message, si)

    # (2) decide: every strategy unperturbed first, then under each perturbation.
    def decide(self, start: int) -> None:
        plan = self.plan
        count = len(self.bases)
        strategies: Sequence[int] = range(len(plan.strategies))
        if self.dry:  # the scheduling pass walks only the slow receivers' messages
            strategies = [si for si in strategies
                          if self.slots[si].slow and self.slots[si].memoised]
        for j in range(count):
            ref = self.case_rows[j][3]
            for si in strategies:
                self._emit((j, si, 0), self.bases[j][si], ref, None)
        perturbations = {si: [(pi, p) for pi, p in enumerate(plan.perturbations, start=1)
                              if si in plan.targets[pi - 1]] for si in strategies}
        contexts: dict[int, CaseContext] = {}

        def context(j: int) -> CaseContext:
            found = contexts.get(j)
            if found is None:
                found = contexts[j] = CaseContext(
                    index=start + j, case_id=self.case_rows[j][0], truth=self.truths[j],
                    reference=self.case_rows[j][3], contract=self.contract,
                    decide=self.reference,
                    neighbour=functools.partial(self._neighbour, j),
                    constant=self._constant)
            return found

        for j in range(count):
            case_ref = self.case_rows[j][3]
            for si in strategies:
                strategy = plan.strategies[si]
                base = self.bases[j][si]
                for pi, perturbation in perturbations[si]:
                    for variant in perturbation.variants(base.message, context(j),
                                                         strategy.name):
                        self._emit_variant((j, si, pi), base, variant, case_ref)
            contexts.pop(j, None)
            self.partner_parts.clear()

    def _neighbour(self, j: int, name: str) -> Mapping[str, Any] | None:
        """The unperturbed message of strategy ``name`` for the case whose message case
        ``j`` gets under the shuffled control (``None`` when it has no partner): the
        partner's own message when this object encoded it, else encoded here from its
        evidence, as its own chunk encodes it.
        """
        found = self.partners.partner(self.offset + j, self.chunk_cases)
        if found is None:
            return None
        index, evidence = found
        si = _strategy_index(self.plan, name)
        at = index - self.partners.start - self.offset
        if 0 <= at < len(self.bases):
            return self.bases[at][si].message
        plan = self.plan
        strategy = plan.strategies[si]
        parts = self.partner_parts
        case_id = parts.get(("case", index))
        if case_id is None:
            case_id = parts["case", index] = case_id_of(plan.case_id_of, evidence)
        stamp = parts.get(("stamp", strategy.authority))
        if stamp is None:
            stamp = parts["stamp", strategy.authority] = plan.governance.stamp(
                case_id=case_id, authority=strategy.authority,
                evidence_refs=evidence_refs_of(plan.evidence_refs_of, evidence, case_id),
            ).to_json()
        content = parts.get(("content", id(strategy.encoder)))
        if content is None:
            content = parts["content", id(strategy.encoder)] = encoded(strategy, evidence,
                                                                       case_id)
        return _compose(plan, strategy, content, stamp, case_id)

    def _constant(self, name: str) -> Mapping[str, Any] | None:
        return self.constants[_strategy_index(self.plan, name)]

    # ---------------------------------------------------------------- variants

    def _emit_variant(self, at: tuple[int, int, int], base: Message, variant: Variant,
                      case_ref: str) -> None:
        ref = variant.reference or case_ref
        if variant.patch is not None and variant.base is base.message:
            msg = self._patched(variant, base, at[1])
        else:
            message = variant.message
            msg = base if message is base.message else self._measured(message, at[1])
        self._emit(at, msg, ref, variant)
        if not self.dry and at[2] not in self.controls:
            j, si, _ = at
            self.tally.note(
                at, self.reads[si],
                tuple if msg is base else functools.partial(touched, base.message, variant),
                validity=msg.schema != base.schema, reference=ref != case_ref,
                decision=self.slots[si].deterministic
                and self.last_oid != self.base_oids.get((j, si)))

    def _patched(self, variant: Variant, base: Message, si: int) -> Message:
        """A variant that differs from ``base`` in one member, measured and checked from
        that member: its canonical payload size from ``base``'s (RFC 8785 writes an
        object's members one by one, so the sizes add), its governance validity from
        ``base``'s unless the member is a governance member. Keys: :meth:`_key`.
        """
        name, value = variant.patch  # type: ignore[misc]
        if self.plan.tokenizer is not None or name in _ENVELOPE:
            return self._measured(variant.message, si)
        msg = Patched(variant, base, self.nslots)
        if self.dry:  # the scheduling pass needs the messages and their keys only
            return msg
        message = base.message
        members = len(message) - sum([k in message for k in _ENVELOPE])
        size = base.size
        if name in message:
            size -= base.member_size(name)
            members -= 1
            if members:
                size -= 1  # its comma
        if value is not Perturbation.REMOVED:
            size += canonical_size({name: value}) - 2
            if members:
                size += 1
            members += 1
        msg.size = size
        # a patch of no governance member leaves the base's governance as it was
        self._checked(msg, si, None if name in _GOVERNANCE else base.governance)
        return msg

    def _measured(self, message: Mapping[str, Any], si: int) -> Message:
        """A message of strategy ``si``, measured (canonical payload bytes, tokens) and
        checked (governance members; the receipt schema if the strategy sends receipts).
        """
        msg = Message(message, self.nslots)
        if self.dry:  # the scheduling pass needs the messages and their keys only
            return msg
        # The canonical bytes are not kept: a memo key on the whole message makes them
        # again (Message.canonical), the rest need only their size.
        canon, msg.size = self.canonical.measure(message)
        msg.tokens = _tokens(self.plan, canon, msg.size)
        self._checked(msg, si)
        return msg

    def _checked(self, msg: Message, si: int, governance: bool | None = None) -> None:
        """Check a message of strategy ``si``: its governance members (unless
        ``governance`` says already), and the receipt schema if the strategy sends
        receipts. Once per memo key when the strategy's receiver is keyed by a gate of
        the plan's contract (``checked_by``): that key keeps every member as the schema
        reads it (:class:`handoffs._memo.GateMemo`), so messages with equal keys get the
        same checks.
        """
        checks = self.checks
        receipts = self.receipts[si]
        slot = self.checked_by[si]
        if slot is not None:
            key = self._key(slot, msg)
            if key[0] != "c":
                found = self.validity.get(key)
                if found is None:
                    message = msg.message
                    found = self.validity[key] = (
                        checks.governance_valid(message),
                        checks.schema_valid(message) if receipts else None)
                msg.governance, msg.schema = found
                return
        message = msg.message
        msg.governance = checks.governance_valid(message) if governance is None else governance
        if receipts:
            msg.schema = checks.schema_valid(message)

    # ------------------------------------------------------------------- keys

    def _key(self, slot: Slot, msg: Message) -> Any:
        """The memo key of a message for one receiver: ``("k", slot, id)`` of its
        projection, or ``("c", slot, canonical bytes)``. When the projection is the set
        of the ``(name, contribution)`` pairs of the members it reads
        (:attr:`Slot.member`), a patched message's key follows from its base's: the
        base's when the member is not read, else ``("p", base's key, member, its
        contribution)``, which stands for the base's pairs with that member's replaced
        (equal keys, equal projections).
        """
        found = msg.keys[slot.index]
        if found is None:
            base = msg.base
            if base is not None and slot.member is not None:
                under = self._key(slot, base)
                if under[0] == "k":
                    assert isinstance(msg, Patched)  # noqa: S101 - only a Patched has a base
                    name, value = msg.patch
                    members = slot.members
                    if members is not None and name not in members:
                        found = under
                    else:
                        found = ("p", under, name, _GONE if value is Perturbation.REMOVED
                                 else slot.member(name, value))
            if found is None:
                projected = None if slot.project is None else slot.project(msg.message)
                if projected is not None:
                    found = ("k", slot.index, self.shared.intern(projected))
                else:
                    found = ("c", slot.index, msg.canonical(self.canonical.measure))
            msg.keys[slot.index] = found
        return found

    # ------------------------------------------------------------------- rows

    def _outcome(self, slot: Slot, msg: Message, *, memoise: bool, si: int = -1,
                 sample: int = 0) -> tuple[int, int, int]:
        """(outcome id, latency µs, memo flag) of one receiver decision.

        A deterministic receiver's decision is looked up in the run's memo (shared by
        the chunks of this process, and filled ahead of time for slow receivers by the
        scheduling pass); only a decision no chunk has asked for yet calls the
        receiver. Failed calls (a receiver that raised, a model call that failed) are
        never memoised.
        """
        if self.dry:
            return self._schedule(slot, msg, memoise=memoise, sample=sample)
        if not memoise:
            return self._call(slot, msg, si, sample)
        return self._shared_outcome(slot, msg, si, drawn(self._key(slot, msg), sample), sample)

    def _call(self, slot: Slot, msg: Message, si: int, sample: int) -> tuple[int, int, int]:
        """Call a receiver that is not memoised (draw ``sample``)."""
        outcome, latency, usage, _ = _decide(slot.receiver, msg.message, self.fail,
                                             sample)
        oid = self._outcome_id(outcome)
        self.calls += 1
        self._account(si, usage)
        return oid, latency, 0

    def _shared_outcome(self, slot: Slot, msg: Message, si: int, memo_key: Hashable,
                        sample: int) -> tuple[int, int, int]:
        """The outcome from the run-wide memo (filled by another chunk, or by the call
        pool for a request a scheduling pass sent ahead), calling the receiver if no
        chunk has. A hit on a key that rests on a user's ``reads`` declaration is
        checked now and then (:meth:`_check`).
        """
        entry = self.shared.memo.get(memo_key)
        if entry is not None and entry.ok and entry.counted:  # a hit: filled, counted
            outcome = entry.value[0]  # type: ignore[index]
        else:
            entry, outcome, latency, usage, counted = self._fill(slot, msg, memo_key, sample)
            if counted:
                self.calls += 1
                self._account(si, usage)
                return self._outcome_id(outcome), latency, 0
        if slot.checked:
            self._check(slot, msg, entry, outcome, sample)
        self.hits += 1
        return self._outcome_id(outcome), 0, 1

    def _fill(self, slot: Slot, msg: Message, memo_key: Hashable, sample: int
              ) -> tuple[Any, tuple[str, str, tuple[str, ...]], int, Any, bool]:
        """(entry, outcome, latency µs, usage, counted here) of a memo look-up that is
        not a plain hit: the entry made here (the receiver called), or waited for, or
        a failed call reported once and asked again.
        """
        shared = self.shared
        while True:
            entry, mine = shared.entry(memo_key)
            if mine:
                message = msg.message
                outcome, latency, usage, ok = _decide(slot.receiver, message, self.fail,
                                                      sample)
                if usage is not None and not usage[0]:  # the model's time is the call's
                    latency += round(usage[3] * 1000)
                if slot.checked:
                    entry.source = message
                entry.set(outcome, latency, usage)
                if not ok:
                    shared.forget(memo_key, entry)
                return entry, outcome, latency, usage, shared.take(entry)
            outcome, latency, usage = entry.get()
            counted = shared.take(entry)
            if not entry.ok:  # a failed call is reported once, then asked again
                shared.forget(memo_key, entry)
            if entry.ok or counted:
                return entry, outcome, latency, usage, counted

    def _check(self, slot: Slot, msg: Message, entry: Any,
               outcome: tuple[str, str, tuple[str, ...]], sample: int) -> None:
        """Decide a memo hit again without the memo (the first hit of each entry and
        every :data:`_CHECK_EVERY`-th after it); a different outcome means the
        receiver's declared ``reads`` left out a member its decision depends on.
        """
        entry.hits += 1
        if entry.hits % _CHECK_EVERY != 1 or entry.source is None:
            return
        message = msg.message
        again, _, _, ok = _decide(slot.receiver, message, self.fail, sample)
        if not ok or again == outcome:
            return
        source = entry.source
        declared = tuple(getattr(slot.receiver, "reads", None) or ())
        differ = sorted(name for name in {*source, *message} - set(declared)
                        if name not in source or name not in message
                        or memo_value(source[name]) != memo_value(message[name]))
        # the members whose value alone, taken from the entry's message, turns the
        # decision back (all that differ when no single one does)
        culprits = [name for name in differ if _decide(
            slot.receiver, _with(message, source, name), self.fail, sample)[0] == outcome]
        raise ProjectionError(
            str(getattr(slot.receiver, "name", type(slot.receiver).__name__)),
            culprits or differ,
            declared, f"two messages with the same declared projection were decided "
            f"{outcome[0]}/{outcome[1]} and {again[0]}/{again[1]}")

    def send(self) -> None:
        """Send the scheduling pass's pending requests (:func:`send_batch`)."""
        batch, self.batch = self.batch, []
        if batch:
            send_batch(self.shared, batch, self.scheduled)
        self.flush_at = min(2 * self.flush_at, max(1, self.shared.concurrency))

    def _schedule(self, slot: Slot, msg: Message, *, memoise: bool, sample: int = 0
                  ) -> tuple[int, int, int]:
        """The scheduling pass: hand a slow receiver's new requests (draw ``sample``)
        to the run's call pool (:func:`~handoffs.lab._memo.send_ahead`: admission,
        prompt and cache look-up here, the ruling where the answer arrives); what
        needs no model call (refused before it, answered by the cache) is decided at
        once. A receiver whose admission keeps a decision log is decided whole on the
        pool (each decision writes one row).
        """
        if slot.slow and memoise:
            key = drawn(self._key(slot, msg), sample)
            if key not in self.asked:
                self.asked.add(key)
                shared = self.shared
                entry, mine = shared.entry(key)
                if mine and slot.ahead:
                    try:
                        send_ahead(shared, slot.receiver, msg.message, fail=self.fail,
                                   sample=sample, entry=entry, batch=self.batch,
                                   scheduled=self.scheduled)
                    except BaseException as exc:  # filled all the same: others wait for it
                        if not entry.done():
                            entry.set((self.fail, "ERROR",
                                       (f"receiver-raised:{type(exc).__name__}",)), 0, None)
                        raise
                    if len(self.batch) >= self.flush_at:
                        self.send()
                elif mine:
                    self.scheduled.append(shared.submit(
                        _whole, entry, slot.receiver, msg.message, self.fail, sample))
        return 0, 0, 1

    def _outcome_id(self, outcome: tuple[str, str, tuple[str, ...]]) -> int:
        oid = self.outcome_ids.get(outcome, -1)
        if oid < 0:
            oid = self.outcome_ids[outcome] = len(self.outcomes)
            self.outcomes.append(outcome)
        return oid

    def _account(self, si: int, usage: tuple[int, int, int, float] | None) -> None:
        """Add one model call's cost to strategy ``si``'s (cache hit or model call)."""
        if usage is None or si < 0:
            return
        row = self.usage.get(si)
        if row is None:
            row = self.usage[si] = [0, 0, 0, 0, 0]
        cached, tokens_in, tokens_out, latency_ms = usage
        if cached:
            row[1] += 1
        else:
            row[0] += 1
            row[2] += tokens_in
            row[3] += tokens_out
            row[4] += round(latency_ms * 1000)

    def _emit(self, at: tuple[int, int, int], msg: Message, ref: str,
              meta: Variant | None) -> None:
        """Decide one message (every epoch of a sampled receiver) and record the rows."""
        j, si, pi = at
        plan = self.plan
        slot = self.slots[si]
        counted = (si, pi)
        if self.last_case.get(counted) != j:
            self.last_case[counted] = j
            self.case_counts[counted] = self.case_counts.get(counted, 0) + 1
        semantic = self.semantic
        size, tokens = msg.size, msg.tokens
        for epoch in range(1 if slot.deterministic else plan.epochs):
            oid, latency, memo = self._outcome(slot, msg, memoise=slot.memoised, si=si,
                                               sample=epoch)
            if epoch == 0:
                self.last_oid = oid
                if pi == 0:
                    self.base_oids[(j, si)] = oid
            sid = -1
            if msg.state:
                sid = self._outcome(semantic, msg, memoise=semantic.deterministic)[0]
            t = self._template(at, epoch, msg, oid, sid, ref=ref, meta=meta)
            stats = self.stats[t]
            stats[0] += 1
            stats[1] += size
            stats[2] = max(stats[2], size)
            if tokens is not None:
                stats[3] += 1
                stats[4] += tokens
            if memo:
                stats[6] += 1
            else:
                stats[5] += 1
                stats[7] += latency
            notable = t in self.failing.notable
            # baselines are read one by one beside falsehoods: a falsehood counts as
            # caught only where the true message was admitted (issue 31)
            if (plan.keep_rows or notable or pi in self.special
                    or (pi == 0 and (self.special or j in self.special_cases))):
                self.rows.append((j, t, size, tokens, latency, memo))
            if notable and not self.dry:
                self._deciding_rule(j)
                self._exhibit(j, si, pi, msg)

    def _exhibit(self, j: int, si: int, pi: int, msg: Message) -> None:
        """Keep the message sent for the row just added (a disagreement), up to
        :data:`EXHIBITS` per strategy × perturbation.
        """
        seen = self.failing.counts.get((si, pi), 0)
        if seen >= EXHIBITS:
            return
        self.failing.counts[(si, pi)] = seen + 1
        self.failing.exhibits.append([len(self.rows) - 1, dict(msg.message)])

    def _deciding_rule(self, j: int) -> None:
        """Note the reference policy's deciding rule on case ``j``'s truth (or the cut
        an undetermined truth straddles), once per state (none when the experiment
        declares its own reference).
        """
        state_key = self.case_rows[j][2]
        if state_key not in self.failing.rules and self.plan.reference is None:
            self.failing.rules[state_key] = reference_rule(self.contract, self.truths[j])

    def _template(self, at: tuple[int, int, int], epoch: int, msg: Message, oid: int,
                  sid: int, *, ref: str, meta: Variant | None) -> int:
        """The id of the distinct row (all but case, bytes, tokens, latency, memo)."""
        j, si, pi = at
        label = falsified = falsehood = None
        if meta is not None:
            label, falsified, falsehood = meta.label, meta.falsified, meta.falsehood
        holding = self.holding[j]
        key = (si, pi, label, epoch, ref, oid, sid, msg.governance, msg.schema,
               falsified, None if falsehood is None else dumps(list(falsehood)), holding)
        found = self.template_ids.get(key)
        if found is not None:
            return found
        action, verdict, reasons = self.outcomes[oid]
        semantic: str | None = None
        determined: bool | None = None
        if sid >= 0:
            semantic, sem_verdict, _ = self.outcomes[sid]
            determined = sem_verdict == Verdict.ACCEPT.value
        found = self.template_ids[key] = len(self.templates)
        if action != ref:
            self.failing.notable.add(found)
        self.templates.append([
            None, si, pi, label, epoch, ref, action, verdict, semantic, determined,
            None, None, msg.governance, msg.schema, None, None, falsified,
            list(falsehood) if falsehood is not None else None, list(reasons), list(holding),
        ])
        self.stats.append([0, 0, 0, 0, 0, 0, 0, 0])
        return found


def _keys_checks(slot: Slot, contract: Any) -> bool:
    """Whether ``slot``'s memo keys decide the checks of a message of ``contract``: its
    receiver is keyed by a gate (every member's pair, :meth:`Gate.memo_member`) whose
    registry holds ``contract``. Such a key keeps every member by value but ``id``,
    ``case_id`` and ``evidence_refs``, of which it keeps what the contract's schema
    reads (their validity under their subschemas, which every contract of the
    registry shares, and the references one by one: :mod:`handoffs._memo`).
    """
    if slot.member is None or slot.members is not None or not slot.deterministic:
        return False
    gate = getattr(slot.receiver, "gate", None)
    return isinstance(gate, Gate) and any(c is contract for c in gate.registry)


def _with(message: Mapping[str, Any], source: Mapping[str, Any], name: str
          ) -> dict[str, Any]:
    """``message`` with member ``name`` as in ``source`` (absent if absent there)."""
    changed = dict(message)
    if name in source:
        changed[name] = source[name]
    else:
        changed.pop(name, None)
    return changed


def _case_digest(plan: Plan, evidence: Any, case_id: str) -> str:
    try:
        return digest(canonical_bytes(plan.case_json(evidence)))
    except Exception as exc:  # evidence that is not JSON, or the user's case_json raised
        raise user_error("case JSON function", plan.case_json, case_id, exc) from exc



