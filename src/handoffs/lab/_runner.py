"""The streaming runner: cases in chunks, on any ``concurrent.futures.Executor``.

The main process reads the case source lazily, cuts it into chunks of
``chunk_size`` cases and submits each chunk to the executor (threads by default;
local processes; a Dask cluster through ``distributed``'s ``Client.get_executor``).
At most a few chunks are in flight, and results are taken back *in stream order*,
so the run log, the metrics and every count are the same on every executor and
for any number of workers. Memory does not grow with the number of cases: the
metrics are aggregated chunk by chunk and the decisions stream to the run log (if
one is written).

Inside a chunk each case is encoded once per encoder and stamped once per
authority, and every message is measured from the canonical sizes of its members.
A deterministic receiver is memoised per chunk, on the canonical message or on the
projection it declares (``memo_key``); perturbations that describe their messages as
one-member patches are sized, checked and keyed from the unperturbed message and
that member alone (``memo_member``), without building the message; and when a case's
messages have the same keys, checks and reference as an earlier case's, its rows
are replayed from that case's, every decision a memo hit. A sampled receiver is
called again for every epoch. The reference policy and the per-state analysis
(counterfactual triggers, minimal messages) are memoised per process.

Chunk records hold the decisions compactly (distinct rows with their counts and
sums); the run log, when one is asked for, still holds one row per decision.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import contextlib
import functools
import gc
import hashlib
import itertools
import os
import platform
import threading
import time
import uuid
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence, Sized
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import attrs
import jsonschema_rs

from handoffs._errors import UntrustedGovernance
from handoffs._json import canonical_bytes, canonical_size, digest, dumps
from handoffs.contracts._contract import Authority, Contract, LossMatrix
from handoffs.contracts._encoders import GovernanceService
from handoffs.contracts._receipt import ENVELOPE_MEMBERS, GOVERNANCE_FIELDS, format_time
from handoffs.contracts._schema import schema_id, to_json_schema
from handoffs.lab._cache import Budget, CallCache, LabClient, close_connections
from handoffs.lab._experiment import (
    Experiment,
    ExperimentError,
    Strategy,
    typed_value,
    wire_value,
)
from handoffs.lab._metrics import Aggregator
from handoffs.lab._minimal import (
    Reference,
    counterfactual_triggers,
    ddmin,
    exhaustive_minimum,
    minimal_message,
)
from handoffs.lab._perturb import (
    REMOVED,
    SUBJECT,
    CaseContext,
    Falsehood,
    Mutate,
    Perturbation,
    Scoring,
    Variant,
    has_predicates,
    opaque_conditions,
)
from handoffs.lab._runlog import RunLog, RunLogError, read_run_log
from handoffs.receivers._decision import Receiver, Verdict, memo_value
from handoffs.receivers._model import TRANSIENT_CODES, ModelReceiver

__all__ = ["EXECUTORS", "LabRun", "Plan", "compile_plan", "rescore", "run", "run_chunk"]

EXECUTORS: Final = ("threads", "processes", "dask")
"""Executor names the runner can create itself."""

_ENVELOPE: Final = frozenset(ENVELOPE_MEMBERS)
_FORBIDDEN: Final = frozenset(GOVERNANCE_FIELDS) | _ENVELOPE
_GOVERNANCE: Final = frozenset(GOVERNANCE_FIELDS)
_RECEIPT_NAMESPACE: Final = uuid.UUID("6f1d3c1e-5d0b-4d4e-9d27-6c2f0f6b8a10")
_ANALYSIS_CACHE_LIMIT: Final = 4096


# ---------------------------------------------------------------------------- plan


@attrs.frozen(kw_only=True)
class Plan:
    """Everything a worker needs for a chunk (picklable for process executors).

    Attributes:
        name: experiment name (used in deterministic receipt ids).
        contract: the contract.
        strategies: the strategies, in order.
        perturbations: prepared perturbations; index 0 of the log is ``none``.
        targets: per perturbation, the indices of the strategies it applies to.
        semantic: the semantic receiver.
        governance: the governance service.
        state_of / reference / case_id_of / evidence_refs_of / case_json: readers.
        tokenizer: optional token counter.
        epochs: repetitions for sampled receivers.
        subject: index of the subject strategy.
        region_budget: region checks allowed per state for the minimum-size search.
        analyse: whether to compute triggers and minimal messages.
        keep_rows: whether chunk records keep every decision row (a run log is
            written), or only those the metrics read one by one.
        special: perturbation indices whose rows the metrics read one by one
            (falsehoods and injections).
        injection_cases: case ids named by injections (their baseline rows are read).
        token: identifies one run's plan, so that a worker process that receives it
            with every chunk keeps using the first copy (and what it compiled for it).
        concurrency: calls in flight at once for slow receivers (model receivers).
        prefetch: whether a chunk first collects its slow receivers' distinct messages
            and hands them to a pool of ``concurrency`` threads, so that their calls
            overlap across cases instead of following one another.
    """

    name: str
    contract: Contract[Any, Any]
    strategies: tuple[Strategy, ...]
    perturbations: tuple[Perturbation, ...]
    targets: tuple[tuple[int, ...], ...]
    semantic: Receiver
    governance: Any
    state_of: Callable[[Any], Any]
    reference: Callable[[Any], Any] | None
    case_id_of: Callable[[Any], str]
    evidence_refs_of: Callable[[Any], Sequence[Any]]
    case_json: Callable[[Any], Any]
    tokenizer: Callable[[str], int] | None
    epochs: int
    subject: int
    region_budget: int = 4096
    analyse: bool = True
    keep_rows: bool = True
    special: frozenset[int] = frozenset()
    injection_cases: frozenset[str] = frozenset()
    token: str = ""
    concurrency: int = 8
    prefetch: bool = False

    @property
    def perturbation_ids(self) -> tuple[str, ...]:
        """``("none", <perturbation ids>...)``: the log's perturbation index."""
        return ("none", *(p.id for p in self.perturbations))


def compile_plan(experiment: Experiment) -> Plan:
    """Prepare the perturbations and resolve which strategies each applies to.

    Raises:
        ExperimentError: duplicate perturbation ids, unknown strategy names, or a
            perturbation that cannot be prepared for the contract.
    """
    from handoffs.lab._perturb import standard_perturbations

    contract = experiment.contract
    declared = experiment.perturbations
    if declared is None:
        declared = standard_perturbations(contract)
    pool = [*declared, *experiment.injections]
    prepared = [p.prepare(contract, seed=experiment.seed) for p in pool]
    ids = [p.id for p in prepared]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates or "none" in ids:
        raise ExperimentError(f"perturbation ids must be unique and not 'none': "
                              f"{duplicates or ['none']}")
    names = [s.name for s in experiment.strategies]
    subject = names.index(experiment.subject_strategy.name)
    targets: list[tuple[int, ...]] = []
    for p in prepared:
        applies = p.applies_to
        if applies is None:
            targets.append(tuple(range(len(names))))
            continue
        indices: list[int] = []
        for name in applies:
            if name == SUBJECT:
                indices.append(subject)
            elif name in names:
                indices.append(names.index(name))
            else:
                raise ExperimentError(f"perturbation {p.id} names unknown strategy {name!r}")
        targets.append(tuple(sorted(set(indices))))
    return Plan(
        name=experiment.name,
        contract=contract,
        strategies=experiment.strategies,
        perturbations=tuple(prepared),
        targets=tuple(targets),
        semantic=experiment.semantic,
        governance=experiment.governance,
        state_of=experiment.state_of,
        reference=experiment.reference,
        case_id_of=experiment.case_id_of,
        evidence_refs_of=experiment.evidence_refs_of,
        case_json=experiment.case_json,
        tokenizer=experiment.tokenizer,
        epochs=experiment.epochs,
        subject=subject,
        special=frozenset(i for i, p in enumerate(prepared, start=1)
                          if isinstance(p, Mutate | Falsehood)),
        injection_cases=frozenset(p.case_id for p in prepared if isinstance(p, Falsehood)),
    )


# ------------------------------------------------------------------ per-process


class _Checks:
    """Compiled schema checks for one contract (jsonschema-rs, built once).

    Besides whole-message checks it holds one validator per receipt member, so that
    a message that differs from a checked one in one member is checked by that
    member alone: the receipt schema is closed (``additionalProperties: false``) and
    constrains nothing across members, so a message is valid exactly when its
    required members are present, it has no other members, and each member is
    valid on its own. The governance check is the same with the governance members.
    """

    def __init__(self, contract: Contract[Any, Any]) -> None:
        self.contract = contract
        schema = to_json_schema(contract)
        self.receipt = jsonschema_rs.validator_for(schema)
        properties = schema["properties"]
        governance = {
            "$schema": schema["$schema"],
            "type": "object",
            "required": list(GOVERNANCE_FIELDS),
            "properties": {m: properties[m] for m in GOVERNANCE_FIELDS},
        }
        self.governance = jsonschema_rs.validator_for(governance)
        self.memberwise = (set(schema) <= _SCHEMA_KEYS and schema.get("type") == "object"
                           and schema.get("additionalProperties") is False)
        self.required = frozenset(schema.get("required", ()))
        defs = schema.get("$defs", {})
        self.members = {
            name: jsonschema_rs.validator_for({"$schema": schema["$schema"], "$defs": defs, **sub})
            for name, sub in properties.items()
        }

    def schema_valid(self, message: Mapping[str, Any]) -> bool:
        try:
            return bool(self.receipt.is_valid(message))
        except (ValueError, TypeError, OverflowError):
            return False

    def governance_valid(self, message: Mapping[str, Any]) -> bool:
        try:
            return bool(self.governance.is_valid(message))
        except (ValueError, TypeError, OverflowError):
            return False

    def member_valid(self, name: str, value: Any) -> bool:
        """Whether ``value`` is valid for receipt member ``name`` (False if unknown)."""
        validator = self.members.get(name)
        if validator is None:
            return False
        try:
            return bool(validator.is_valid(value))
        except (ValueError, TypeError, OverflowError):
            return False


class _Entry:
    """One run-wide memo entry: an outcome, or the call that will produce it."""

    __slots__ = ("counted", "done", "future", "latency", "outcome", "usage")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.future: cf.Future[None] | None = None
        self.outcome: tuple[str, str, tuple[str, ...]] | None = None
        self.latency = 0
        self.usage: tuple[int, int, int, float] | None = None
        self.counted = False

    def set(self, outcome: tuple[str, str, tuple[str, ...]], latency: int,
            usage: tuple[int, int, int, float] | None) -> None:
        self.outcome, self.latency, self.usage = outcome, latency, usage
        self.done.set()

    def wait(self) -> bool:
        """Wait for the outcome; ``False`` if its scheduled call was cancelled."""
        while not self.done.wait(0.5):
            future = self.future
            if future is not None and future.cancelled():
                return False
        return True


class _Shared:
    """What the chunks of one run share in one process: the run-wide memo (each
    deterministic receiver's decisions by memo key, bounded), the interned memo-key
    projections, and the pool that keeps slow receivers busy across cases.
    """

    def __init__(self, plan: Plan) -> None:
        self.memo: dict[Hashable, _Entry] = {}
        self.interned: dict[Hashable, int] = {}
        self.lock = threading.Lock()
        self.pool: cf.ThreadPoolExecutor | None = None
        self.concurrency = plan.concurrency

    def intern(self, projected: Hashable) -> int:
        found = self.interned.get(projected)
        if found is None:
            with self.lock:
                found = self.interned.setdefault(projected, len(self.interned))
        return found

    def entry(self, key: Hashable) -> tuple[_Entry, bool]:
        """(the entry for ``key``, whether this caller made it and must fill it)."""
        found = self.memo.get(key)
        if found is not None:
            return found, False
        with self.lock:
            found = self.memo.get(key)
            if found is not None:
                return found, False
            if len(self.memo) >= _RUN_MEMO_LIMIT:
                self.memo.clear()  # bounded memory; the call cache still has the answers
            made = self.memo[key] = _Entry()
        return made, True

    def forget(self, key: Hashable, entry: _Entry) -> None:
        with self.lock:
            if self.memo.get(key) is entry:
                del self.memo[key]

    def take(self, entry: _Entry) -> bool:
        """Whether this caller is the first to count ``entry``'s call."""
        with self.lock:
            if entry.counted:
                return False
            entry.counted = True
            return True

    def start(self) -> cf.ThreadPoolExecutor:
        """The call pool, with all its threads started (so that starting them does not
        hold back the first calls).
        """
        with self.lock:
            if self.pool is None:
                pool = cf.ThreadPoolExecutor(max_workers=self.concurrency,
                                             thread_name_prefix="handoffs-calls")
                barrier = threading.Barrier(self.concurrency + 1)
                for _ in range(self.concurrency):
                    pool.submit(barrier.wait, 60)
                barrier.wait(60)
                self.pool = pool
            return self.pool

    def submit(self, fn: Callable[[], None]) -> cf.Future[None]:
        pool = self.pool
        if pool is None:
            pool = self.start()
        return pool.submit(fn)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


_RUN_MEMO_LIMIT: Final = 262_144
_shared: dict[str, _Shared] = {}


def _shared_for(plan: Plan) -> _Shared:
    found = _shared.get(plan.token)
    if found is None:
        with _SHARED_LOCK:
            found = _shared.get(plan.token)
            if found is None:
                if len(_shared) >= _PLANS_KEPT:
                    for stale in _shared.values():
                        stale.close()
                    _shared.clear()
                found = _shared[plan.token] = _Shared(plan)
    return found


def release_shared(token: str) -> None:
    """Drop one run's shared state in this process (the end of the run)."""
    with _SHARED_LOCK:
        found = _shared.pop(token, None)
    if found is not None:
        found.close()


_SHARED_LOCK: Final = threading.Lock()


_SCHEMA_KEYS: Final = frozenset({"$schema", "$id", "title", "description", "type",
                                 "additionalProperties", "required", "properties", "$defs"})
_checks: dict[str, _Checks] = {}
_plans: dict[str, Plan] = {}
_PLANS_KEPT: Final = 8
_references: dict[str, Reference] = {}
_analysis: dict[tuple[str, str], dict[str, Any]] = {}


def _checks_for(contract: Contract[Any, Any]) -> _Checks:
    found = _checks.get(contract.id)
    if found is None or found.contract is not contract:
        found = _checks[contract.id] = _Checks(contract)
    return found


def _reference_for(contract: Contract[Any, Any]) -> Reference:
    found = _references.get(contract.id)
    if found is None or found.contract is not contract:
        found = _references[contract.id] = Reference(contract)
    return found


def analyse_state(contract: Contract[Any, Any], key: str, truth: Mapping[str, Any],
                  *, budget: int) -> dict[str, Any]:
    """Triggers and the minimal message for one state (memoised per process)."""
    cache_key = (contract.id, key)
    found = _analysis.get(cache_key)
    if found is not None:
        return found
    reference = _reference_for(contract)
    triggers = counterfactual_triggers(reference, truth)
    result: dict[str, Any] = {
        "truth": {name: wire_value(value) for name, value in truth.items()},
        "triggers": [t.to_json() for t in triggers],
    }
    if not reference.predicates:
        minimal = minimal_message(reference, truth, budget=budget)
        result["minimal"] = {
            "action": minimal.action,
            "fields": list(minimal.fields),
            "message": [f.to_json() for f in minimal.message],
            "guarantee": minimal.guarantee,
            "alternatives": minimal.alternatives,
            "region_checks": minimal.region_checks,
        }
    if len(_analysis) >= _ANALYSIS_CACHE_LIMIT:
        _analysis.clear()
    _analysis[cache_key] = result
    return result


# ------------------------------------------------------------------------ measure


def _measure(message: Mapping[str, Any]) -> tuple[bytes, int]:
    """(memo key, payload bytes): canonical payload, envelope members apart."""
    envelope = [k for k in ENVELOPE_MEMBERS if k in message]
    if not envelope:
        body = canonical_bytes(message)
        return body, len(body)
    body = canonical_bytes({k: v for k, v in message.items() if k not in _ENVELOPE})
    head = canonical_bytes({k: message[k] for k in envelope})
    return head + b"\n" + body, len(body)


_RECEIPT_NAMESPACE_BYTES: Final = _RECEIPT_NAMESPACE.bytes


def receipt_id(experiment: str, strategy: str, case_id: str) -> str:
    """The deterministic receipt id of one strategy's message for one case
    (``uuid.uuid5`` in the runner's namespace, computed without the ``UUID`` object).
    """
    name = f"{experiment}/{strategy}/{case_id}".encode()
    raw = bytearray(hashlib.sha1(_RECEIPT_NAMESPACE_BYTES + name).digest()[:16])  # noqa: S324
    raw[6] = (raw[6] & 0x0F) | 0x50  # version 5 (name-based, SHA-1), as RFC 4122 says
    raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 4122 variant
    text = raw.hex()
    return f"urn:uuid:{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


@attrs.frozen
class _Base:
    message: dict[str, Any]
    key: bytes
    size: int
    tokens: int | None
    governance: bool
    schema: bool | None
    parts: dict[str, bytes] = attrs.field(factory=dict, eq=False)


def _patch(message: Mapping[str, Any], base: _Base, touched: frozenset[str] | None
           ) -> tuple[bytes, int] | None:
    """(memo key, payload bytes) of a variant that changed one payload member of its base
    message, without canonicalising the whole message again.

    The key is the base key plus the patch (a NUL byte never occurs in canonical JSON,
    so a patched key cannot equal a plain one); the same key always means the same
    message. Sizes follow from JCS writing each member as ``"name":value``.
    """
    if touched is None or len(touched) != 1:
        return None
    (member,) = touched
    if member in _ENVELOPE or len(base.message) - len(
            [k for k in ENVELOPE_MEMBERS if k in base.message]) < 2:
        return None
    old = base.parts.get(member)
    if old is None and member in base.message:
        old = base.parts[member] = canonical_bytes(base.message[member])
    name = len(canonical_bytes(member))
    if member in message:
        new = canonical_bytes(message[member])
        if old is None:
            size = base.size + name + 1 + len(new) + 1
        else:
            size = base.size - len(old) + len(new)
        return base.key + b"\x00" + member.encode() + b"=" + new, size
    if old is None:
        return None
    return base.key + b"\x00-" + member.encode(), base.size - (name + 1 + len(old) + 1)


def _tokens(plan: Plan, key: bytes, size: int) -> int | None:
    if plan.tokenizer is None:
        return None
    return int(plan.tokenizer(key[-size:].decode("utf-8")))


def _compose(plan: Plan, strategy: Strategy, content: Mapping[str, Any],
             stamp: Mapping[str, Any], case_id: str) -> dict[str, Any]:
    clash = _FORBIDDEN.intersection(content)
    if clash:
        first = sorted(clash)
        raise UntrustedGovernance(f"encoder {strategy.name} content may not set "
                                  f"{', '.join(first)}", json_path=f"$.{first[0]}")
    message: dict[str, Any] = {}
    if strategy.receipts:
        message["contract"] = plan.contract.id
        message["id"] = receipt_id(plan.name, strategy.name, case_id)
    message.update(content)
    message.update(stamp)
    return message


def run_chunk(plan: Plan, index: int, start: int, cases: Sequence[Any],
              constants: Sequence[Mapping[str, Any] | None]) -> dict[str, Any]:
    """Run every strategy × perturbation on one chunk of cases; return its record.

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
        # (0) schedule: walk the chunk once without deciding, handing every distinct
        # message of a slow receiver to the shared pool; the pass below then finds the
        # answers in flight or done.
        dry = _Chunk(plan, constants, shared, dry=True)
        dry.encode(cases)
        dry.decide(start)
        # The engine's own work waits until the chunk's calls are answered, so that it
        # does not compete with them (for the interpreter lock, on a small machine).
        cf.wait(dry.scheduled)
    chunk = _Chunk(plan, constants, shared)
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
        "complete_rows": plan.keep_rows,
        "model": [[si, *usage] for si, usage in sorted(chunk.usage.items())],
    }


class _Gone:
    """The memo-key part of a removed member."""

    __slots__ = ()


_GONE: Final = _Gone()
_ABSENT: Final = _Gone()
_KEY_SIZES: dict[str, int] = {}


def _member_size(name: str) -> int:
    """Canonical size of a member name plus its colon."""
    size = _KEY_SIZES.get(name)
    if size is None:
        size = _KEY_SIZES[name] = canonical_size(name) + 1
    return size


class _Slot:
    """One receiver of the chunk, with its memoisation interface."""

    __slots__ = ("deterministic", "index", "member", "project", "receiver", "slow")

    def __init__(self, index: int, receiver: Receiver) -> None:
        self.index = index
        self.receiver = receiver
        self.deterministic = bool(receiver.deterministic)
        # A receiver that says how many calls it may have in flight is slow (a model).
        self.slow = isinstance(getattr(receiver, "max_in_flight", None), int)
        project = getattr(receiver, "memo_key", None)
        member = getattr(receiver, "memo_member", None)
        self.project = project if callable(project) else None
        self.member = member if callable(member) and self.project is not None else None


class _Msg:
    """A measured message: size, validity and (lazily) its memo keys."""

    __slots__ = ("canon", "governance", "keys", "message", "parts", "payload", "pieces",
                 "reads", "schema", "size", "tokens", "total")

    def __init__(self, message: Mapping[str, Any], slots: int) -> None:
        self.message = message
        self.keys: list[Any] = [None] * slots
        self.canon: bytes | None = None
        self.reads: dict[str, Hashable] = {}
        self.parts: dict[str, int] | None = None
        self.pieces: tuple[dict[str, int], ...] = ()
        self.payload = 0
        self.total = 0
        self.size = 0
        self.tokens: int | None = None
        self.governance = False
        self.schema: bool | None = None

    def read(self, name: str) -> Hashable:
        """``memo_value`` of one member (``_ABSENT`` when missing), computed once."""
        found = self.reads.get(name, _ABSENT)
        if found is _ABSENT:
            found = self.reads[name] = memo_value(self.message[name]) \
                if name in self.message else _ABSENT
        return found

    def part_sizes(self) -> dict[str, int]:
        """Canonical ``"name":value`` size of every payload member (merged on first use
        from the sizes measured per piece: encoder content, governance stamp).
        """
        parts = self.parts
        if parts is None:
            parts = self.parts = {}
            for piece in self.pieces:
                parts.update(piece)
        return parts

    def has_state(self) -> bool:
        """Whether the message carries a decision state object."""
        return isinstance(self.message.get("decision_state"), Mapping)

    def canonical(self) -> bytes:
        """The canonical memo key (payload and envelope), computed once."""
        if self.canon is None:
            self.canon = _measure(self.message)[0]
        return self.canon


class _Piece:
    """Members shared by the messages of one case (a stamp, an encoder's content),
    with their canonical ``"name":value`` sizes.
    """

    __slots__ = ("governance", "members", "sizes", "total")

    def __init__(self, members: dict[str, Any], sizes: dict[str, int], total: int) -> None:
        self.members = members
        self.sizes = sizes
        self.total = total
        self.governance = False

    @classmethod
    def measure(cls, members: dict[str, Any], sized: bool,
                last: dict[str, tuple[Any, int]] | None = None) -> _Piece:
        """Measure every member; ``last`` remembers each member's last value and size,
        reused when the next piece holds the very same object (a service's constants).
        """
        sizes: dict[str, int] = {}
        total = 0
        if sized:
            names = _KEY_SIZES
            seen = {} if last is None else last
            for name, value in members.items():
                known = seen.get(name)
                if known is not None and known[0] is value:
                    size = known[1]
                else:
                    kind = type(value)
                    # The commonest values inline; everything else by canonical_size.
                    if kind is str and len(value) < 64 and value.isascii() \
                            and value.isprintable() and '"' not in value and "\\" not in value:
                        size = len(value) + 2
                    elif kind is bool:
                        size = 4 if value else 5
                    else:
                        size = canonical_size(value)
                    size += names.get(name) or _member_size(name)
                    seen[name] = (value, size)
                sizes[name] = size
                total += size
        return cls(members, sizes, total)


class _Value:
    """What a patch's new member value contributes: size, validity, memo entries."""

    __slots__ = ("entries", "governance", "member", "schema", "size", "value")

    def __init__(self, member: str, value: Any) -> None:
        self.member = member
        self.value = value
        self.entries: dict[int, Hashable] = {}
        self.size = -1
        self.governance: bool | None = None
        self.schema: bool | None = None


class _Cached:
    """One variant kept for reuse by a perturbation that declares what it reads."""

    __slots__ = ("falsehood", "falsified", "full_validation", "label", "reference",
                 "value")

    def __init__(self, variant: Variant, value: _Value | None) -> None:
        self.label = variant.label
        self.reference = variant.reference
        self.falsehood = variant.falsehood
        self.falsified = variant.falsified
        self.full_validation = variant.full_validation
        self.value = value  # None: the message itself, unchanged


_UNCHANGED: Final = frozenset[str]()


class _Facts:
    """One message to decide: what is known of it without building it, and how to
    key it and build it.
    """

    __slots__ = ("governance", "has_state", "key", "message", "meta", "ref", "rule",
                 "schema", "size", "tokens")

    def __init__(self, *, meta: Variant | _Cached | None, ref: str, size: int,
                 tokens: int | None, governance: bool, schema: bool | None, has_state: bool,
                 key: Callable[[_Slot], Hashable], message: Callable[[], Mapping[str, Any]],
                 rule: _Value | None = None) -> None:
        self.meta = meta
        self.ref = ref
        self.size = size
        self.tokens = tokens
        self.governance = governance
        self.schema = schema
        self.has_state = has_state
        self.key = key
        self.message = message
        self.rule = rule  # the patch, for replaying the size of a recorded row


class _Run:
    """Consecutive perturbations of a strategy that declare what they read."""

    __slots__ = ("members", "present", "values")

    def __init__(self) -> None:
        self.members: list[tuple[int, Perturbation, tuple[str, ...], tuple[str, ...]]] = []
        self.values: tuple[str, ...] = ()
        self.present: tuple[str, ...] = ()

    def add(self, pi: int, perturbation: Perturbation, values: frozenset[str],
            present: frozenset[str]) -> None:
        self.members.append((pi, perturbation, tuple(sorted(values)), tuple(sorted(present))))
        self.values = tuple(sorted({*self.values, *values}))
        self.present = tuple(sorted({*self.present, *present}))


class _Block:
    """Recorded rows to replay: (perturbation, template, patched member or ``None``, the
    member's new ``"name":value`` size or ``-1`` for a removal, has state).
    """

    __slots__ = ("patched", "perturbations", "rows")

    def __init__(self, rows: list[tuple[int, int, _Value | None, bool]]) -> None:
        self.rows: list[tuple[int, int, str | None, int, bool]] = []
        for pi, t, value, has_state in rows:
            if value is None or value.member in _ENVELOPE:  # the payload is the base's
                self.rows.append((pi, t, None, 0, has_state))
            else:
                removed = value.value is REMOVED
                assert removed or value.size >= 0  # noqa: S101 - sized when recorded
                self.rows.append((pi, t, value.member, -1 if removed else value.size,
                                  has_state))
        self.perturbations = tuple(dict.fromkeys(pi for pi, _, _, _ in rows))
        self.patched = any(member is not None for _, _, member, _, _ in self.rows)


class _Chunk:
    """The work on one chunk: encode every case once, then decide every message."""

    def __init__(self, plan: Plan, constants: Sequence[Mapping[str, Any] | None],
                 shared: _Shared | None = None, *, dry: bool = False) -> None:
        self.plan = plan
        self.shared = _Shared(plan) if shared is None else shared
        self.dry = dry
        self.scheduled: list[cf.Future[None]] = []
        # per strategy: [model calls, cache hits, tokens in, tokens out, latency µs]
        self.usage: dict[int, list[int]] = {}
        self.constants = constants
        self.contract = plan.contract
        self.checks = _checks_for(plan.contract)
        self.reference = _reference_for(plan.contract)
        slots: dict[int, _Slot] = {}
        for strategy in plan.strategies:
            if id(strategy.receiver) not in slots:
                slots[id(strategy.receiver)] = _Slot(len(slots), strategy.receiver)
        self.slots = [slots[id(s.receiver)] for s in plan.strategies]
        self.semantic = _Slot(len(slots), plan.semantic)
        self.nslots = len(slots) + 1
        self.fail = str(plan.contract.fail_closed_action.value)
        self.receipts = [s.receipts for s in plan.strategies]
        self.case_rows: list[list[Any]] = []
        self.truths: list[dict[str, Any]] = []
        # per case: the state-conditioned hard constraints whose `when` holds on its truth
        self.conditioned = tuple(h for h in plan.contract.hard_constraints
                                 if h.when is not None)
        self.holding: list[tuple[str, ...]] = []
        self.bases: list[list[_Msg]] = []
        self.states: dict[str, dict[str, Any]] = {}
        # memoisation: the chunk's outcome ids by memo key, in front of the run's memo
        self.memo: dict[Hashable, int] = {}
        self.outcomes: list[tuple[str, str, tuple[str, ...]]] = []
        if dry:  # the scheduling pass decides nothing: one placeholder outcome
            self.outcomes.append((self.fail, Verdict.ACCEPT.value, ()))
        self.outcome_ids: dict[tuple[str, str, tuple[str, ...]], int] = {}
        self.calls = 0
        self.hits = 0
        self.variants: dict[Hashable, list[_Cached] | None] = {}
        self.truth_memo: dict[Hashable, tuple[str, str]] = {}
        # compact decision rows
        self.template_ids: dict[Hashable, int] = {}
        self.templates: list[list[Any]] = []
        self.stats: list[list[int]] = []
        self.rows: list[tuple[int, int, int, int | None, int, int]] = []
        self.case_counts: dict[tuple[int, int], int] = {}
        self.last_case: dict[tuple[int, int], int] = {}
        self.special = plan.special
        self.special_cases: set[int] = set()
        # blocks of rows replayed for later cases with the same block key
        self.blocks: dict[Hashable, _Block] = {}
        self.recording: list[tuple[int, int, _Value | None, bool]] | None = None
        self.exact = True
        # the last value and size of each stamp member, and of each encoder's members
        self.last_sizes: dict[str, tuple[Any, int]] = {}
        self.content_sizes: dict[int, dict[str, tuple[Any, int]]] = {}

    # (1) encode every case once per encoder, stamp governance once per authority.
    def encode(self, cases: Sequence[Any]) -> None:
        plan = self.plan
        strategies = plan.strategies
        service = plan.governance
        derive = type(service) is GovernanceService
        for evidence in cases:
            truth = self.contract.view(plan.state_of(evidence))
            state_key, ref = self._truth(truth, evidence)
            case_id = str(plan.case_id_of(evidence))
            evidence_refs = tuple(plan.evidence_refs_of(evidence))
            stamps: dict[Authority, _Piece] = {}
            contents: dict[int, _Piece] = {}
            row: list[_Msg] = []
            for si, strategy in enumerate(strategies):
                if self.dry and not self.slots[si].slow:  # not walked by the scheduling pass
                    row.append(_Msg({}, self.nslots))
                    continue
                authority = strategy.authority
                stamp = stamps.get(authority)
                if stamp is None:
                    stamp = self._stamp(stamps, authority, case_id, evidence_refs, derive)
                content = contents.get(id(strategy.encoder))
                if content is None:
                    content = contents[id(strategy.encoder)] = self._content(
                        strategy, strategy.encoder.encode(evidence))
                row.append(self._base(strategy, si, content, stamp, case_id))
            j = len(self.bases)
            self.bases.append(row)
            self.truths.append(truth)
            self.holding.append(tuple(h.name for h in self.conditioned
                                      if h.when is not None
                                      and h.when.evaluate(truth) is not False))
            if case_id in plan.injection_cases:
                self.special_cases.add(j)
            if self.dry:
                self.case_rows.append([case_id, "", state_key, ref])
                for si, msg in enumerate(row):  # the unperturbed messages, at once
                    slot = self.slots[si]
                    if slot.slow and slot.deterministic:
                        self._schedule(slot, _Facts(
                            meta=None, ref=ref, size=0, tokens=None, governance=True,
                            schema=None, has_state=False,
                            key=functools.partial(self._key, msg=msg),
                            message=functools.partial(getattr, msg, "message")),
                            memoise=True)
                continue
            self.case_rows.append([case_id, _case_digest(plan, evidence), state_key, ref])
            if plan.analyse and state_key not in self.states:
                analysis = analyse_state(self.contract, state_key, truth,
                                         budget=plan.region_budget)
                self.states[state_key] = {**analysis, "example_case_id": case_id,
                                          "example": row[plan.subject].message}

    def _truth(self, truth: dict[str, Any], evidence: Any) -> tuple[str, str]:
        """(state key, reference action), memoised on the typed truth."""
        plan = self.plan
        try:
            key: Hashable = (tuple(truth.items()), tuple(map(type, truth.values())))
            found = self.truth_memo.get(key)
        except TypeError:  # an unhashable value: no memo
            key, found = None, None
        if found is None:
            state_json = dumps({name: wire_value(value) for name, value in truth.items()})
            state_key = hashlib.sha256(state_json.encode("utf-8")).hexdigest()[:16]
            found = (state_key, self.reference(truth))
            if key is not None:
                self.truth_memo[key] = found
        if plan.reference is not None:
            declared = plan.reference(evidence)
            return found[0], str(declared.value if hasattr(declared, "value") else declared)
        return found

    def _stamp(self, stamps: dict[Authority, _Piece], authority: Authority,
               case_id: str, evidence_refs: tuple[Any, ...], derive: bool) -> _Piece:
        """The governance stamp for one authority, measured and checked once. For the
        library's own (deterministic) service, a second authority's stamp is the first
        with ``authority`` changed, exactly as the service would write it (it refuses
        an undue DECIDE itself). A message's governance members are exactly its
        stamp's (encoders may not set them), so the governance check of the stamp is
        the check of every message it stamps.
        """
        service = self.plan.governance
        if derive and stamps and (authority is not Authority.DECIDE or service.may_decide):
            first = next(iter(stamps.values()))
            members = dict(first.members)
            members["authority"] = authority.value
            sizes = dict(first.sizes)
            total = first.total - sizes.get("authority", 0)
            sizes["authority"] = _member_size("authority") + canonical_size(authority.value)
            piece = _Piece(members, sizes, total + sizes["authority"])
        else:
            members = service.stamp(case_id=case_id, evidence_refs=evidence_refs,
                                    authority=authority).to_json()
            piece = _Piece.measure(members, self.plan.tokenizer is None, self.last_sizes)
        piece.governance = self.checks.governance_valid(members)
        stamps[authority] = piece
        return piece

    def _content(self, strategy: Strategy, content: dict[str, Any]) -> _Piece:
        """An encoder's content, checked (it may not set governance or envelope
        members) and measured once per case.
        """
        clash = _FORBIDDEN.intersection(content)
        if clash:
            first = sorted(clash)
            raise UntrustedGovernance(f"encoder {strategy.name} content may not set "
                                      f"{', '.join(first)}", json_path=f"$.{first[0]}")
        return _Piece.measure(content, self.plan.tokenizer is None,
                              self.content_sizes.setdefault(id(strategy.encoder), {}))

    def _base(self, strategy: Strategy, si: int, content: _Piece, stamp: _Piece,
              case_id: str) -> _Msg:
        """One strategy's message for one case, measured and checked."""
        plan = self.plan
        message: dict[str, Any] = {}
        if strategy.receipts:
            message["contract"] = plan.contract.id
            message["id"] = receipt_id(plan.name, strategy.name, case_id)
        message.update(content.members)
        message.update(stamp.members)
        msg = _Msg(message, self.nslots)
        if plan.tokenizer is not None:
            msg.canon, msg.size = _measure(message)
            msg.tokens = _tokens(plan, msg.canon, msg.size)
        else:
            msg.pieces = (content.sizes, stamp.sizes)
            msg.payload = payload = len(content.sizes) + len(stamp.sizes)
            msg.total = total = content.total + stamp.total
            msg.size = total + payload + 1 if payload else 2
        msg.governance = stamp.governance
        if self.receipts[si]:
            msg.schema = self.checks.schema_valid(message)
        return msg

    @staticmethod
    def _sizes(msg: _Msg) -> None:
        piece = _Piece.measure({k: v for k, v in msg.message.items() if k not in _ENVELOPE},
                               True)
        msg.parts = piece.sizes
        msg.payload = len(piece.sizes)
        msg.total = piece.total
        msg.size = piece.total + msg.payload + 1 if msg.payload else 2

    # (2) decide: every strategy unperturbed first, then under each perturbation.
    def decide(self, start: int) -> None:
        plan = self.plan
        count = len(self.bases)
        strategies: Sequence[int] = range(len(plan.strategies))
        if self.dry:  # the scheduling pass walks only the slow receivers' messages
            strategies = [si for si in strategies
                          if self.slots[si].slow and self.slots[si].deterministic]
        replayable = [slot.deterministic and self.semantic.deterministic
                      and plan.tokenizer is None for slot in self.slots]
        for j in range(count):
            ref = self.case_rows[j][3]
            for si in strategies:
                self._base_row(j, si, self.bases[j][si], ref, replayable=replayable[si])
        segments = {si: self._segments(si) for si in strategies}
        contexts: dict[int, CaseContext] = {}

        def context(j: int) -> CaseContext:
            found = contexts.get(j)
            if found is None:
                found = contexts[j] = CaseContext(
                    index=start + j, case_id=self.case_rows[j][0], truth=self.truths[j],
                    reference=self.case_rows[j][3], contract=self.contract,
                    decide=self.reference,
                    neighbour=functools.partial(self._neighbour, (j - 1) % count, j),
                    constant=self._constant)
            return found

        for j in range(count):
            case_ref = self.case_rows[j][3]
            for si in strategies:
                strategy = plan.strategies[si]
                base = self.bases[j][si]
                for segment in segments[si]:
                    if isinstance(segment, _Run):
                        self._run((j, si), base, segment, case_ref, context,
                                  replayable=replayable[si])
                        continue
                    pi, perturbation = segment
                    for variant in perturbation.variants(base.message, context(j),
                                                         strategy.name):
                        self._emit_variant((j, si, pi), base, variant, case_ref)
            contexts.pop(j, None)

    def _segments(self, si: int) -> list[_Run | tuple[int, Perturbation]]:
        """The perturbations of one strategy, in order, consecutive ones that declare
        what they read grouped into runs.
        """
        plan = self.plan
        out: list[_Run | tuple[int, Perturbation]] = []
        for pi, perturbation in enumerate(plan.perturbations, start=1):
            if si not in plan.targets[pi - 1]:
                continue
            reads = perturbation.reads if plan.tokenizer is None else None
            if reads is None:
                out.append((pi, perturbation))
                continue
            run = out[-1] if out else None
            if not isinstance(run, _Run):
                run = _Run()
                out.append(run)
            run.add(pi, perturbation, reads, perturbation.presence)
        return out

    def _block_key(self, si: int, base: _Msg, *parts: Hashable) -> Hashable:
        """What a block of rows for one strategy's message depends on: the memo keys
        of the strategy's and the semantic receiver's, the checks, and ``parts``;
        ``None`` when a memo key is the whole message (nothing to replay).
        """
        rk = self._key(self.slots[si], base)
        if rk[0] != "k":
            return None
        has_state = base.has_state()
        sk: Hashable = None
        if has_state:
            sk = self._key(self.semantic, base)
            if sk[0] != "k":  # type: ignore[index]
                return None
        return (si, rk[2], sk, has_state, base.governance, base.schema, *parts)

    def _base_row(self, j: int, si: int, base: _Msg, ref: str, *, replayable: bool) -> None:
        """The unperturbed message's row (replayed from an earlier case when alike)."""
        block_key = self._block_key(si, base, ref, self.holding[j]) if replayable else None
        if block_key is not None:
            block = self.blocks.get(block_key)
            if block is not None:
                self._replay(j, si, base, block)
                return
            self.recording, self.exact = [], True
        self._emit_base((j, si, 0), base, ref, None)
        if block_key is not None:
            if self.exact:
                self.blocks[block_key] = _Block(self.recording or [])
            self.recording = None

    def _run(self, at: tuple[int, int], base: _Msg, run: _Run, case_ref: str,
             context: Callable[[int], CaseContext], *, replayable: bool) -> None:
        """Rows of a run of perturbations that declare what they read: replayed when an
        earlier case of the chunk had the same block key (the same read members, memo
        keys, checks and reference), else computed from the cached variants.
        """
        j, si = at
        message = base.message
        block_key = self._block_key(
            si, base, run, case_ref, self.holding[j],
            tuple([base.read(name) for name in run.values]),
            tuple([name in message for name in run.present])) if replayable else None
        if block_key is not None:
            block = self.blocks.get(block_key)
            if block is not None:
                self._replay(j, si, base, block)
                return
            self.recording, self.exact = [], True
        strategy = self.plan.strategies[si].name
        for pi, perturbation, values, present in run.members:
            read_key = (pi, tuple([base.read(name) for name in values]),
                        tuple([name in message for name in present]))
            cached = self._cached_variants(read_key, perturbation, base, context(j), strategy)
            if cached is None:
                self.exact = False
                for variant in perturbation.variants(message, context(j), strategy):
                    self._emit_variant((j, si, pi), base, variant, case_ref)
                continue
            for item in cached:
                self._emit_cached((j, si, pi), base, item, case_ref)
        if block_key is not None:
            if self.exact:
                self.blocks[block_key] = _Block(self.recording or [])
            self.recording = None

    def _replay(self, j: int, si: int, base: _Msg, block: _Block) -> None:
        """Record a block's rows for another case: every decision a memo hit."""
        for pi in block.perturbations:
            counted = (si, pi)
            self.case_counts[counted] = self.case_counts.get(counted, 0) + 1
            self.last_case[counted] = j
        keep = self.plan.keep_rows
        special = j in self.special_cases
        parts = base.part_sizes() if block.patched else {}
        for pi, t, member, new, has_state in block.rows:
            if member is None:
                size = base.size
            else:  # as _patched_size
                payload, total = base.payload, base.total
                old = parts.get(member)
                if old is not None:
                    payload -= 1
                    total -= old
                if new >= 0:
                    payload += 1
                    total += new
                size = total + payload + 1 if payload else 2
            stats = self.stats[t]
            stats[0] += 1
            stats[1] += size
            stats[2] = max(stats[2], size)
            stats[6] += 1
            self.hits += 2 if has_state else 1
            if keep or (special and pi == 0):
                self.rows.append((j, t, size, None, 0, 1))

    @staticmethod
    def _patched_size(base: _Msg, value: _Value) -> int:
        """Payload bytes of ``base`` with one member set (or removed): JCS writes each
        member as ``"name":value``, separated by commas, inside braces.
        """
        member = value.member
        if member in _ENVELOPE:
            return base.size
        payload, total = base.payload, base.total
        old = base.part_sizes().get(member)
        if old is not None:
            payload -= 1
            total -= old
        if value.value is not REMOVED:
            if value.size < 0:
                value.size = _member_size(member) + canonical_size(value.value)
            payload += 1
            total += value.size
        return total + payload + 1 if payload else 2

    def _neighbour(self, other: int, own: int, name: str) -> Mapping[str, Any] | None:
        if other == own:
            return None
        return self.bases[other][_strategy_index(self.plan, name)].message

    def _constant(self, name: str) -> Mapping[str, Any] | None:
        return self.constants[_strategy_index(self.plan, name)]

    # ---------------------------------------------------------------- variants

    def _cached_variants(self, key: Hashable, perturbation: Perturbation, base: _Msg,
                         ctx: CaseContext, strategy: str) -> list[_Cached] | None:
        """The variants of a perturbation that depends only on the members it declares,
        computed once per distinct value of those members (``key``; ``None``: the
        variants are not patches of the message, so they cannot be cached).
        """
        if key in self.variants:
            return self.variants[key]
        items: list[_Cached] = []
        for variant in perturbation.variants(base.message, ctx, strategy):
            if variant.patch is not None and variant.base is base.message:
                member, value = variant.patch
                items.append(_Cached(variant, _Value(member, value)))
            elif variant.patch is None and variant.message is base.message \
                    and variant.touched == _UNCHANGED:
                items.append(_Cached(variant, None))
            else:  # not a patch of this message: the declaration does not hold
                self.variants[key] = None
                return None
        self.variants[key] = items
        return items

    def _emit_cached(self, at: tuple[int, int, int], base: _Msg, item: _Cached,
                     case_ref: str) -> None:
        ref = item.reference or case_ref
        value = item.value
        if value is None:
            self._emit_base(at, base, ref, item)
            return
        variant = Variant.patched(base.message, value.member, value.value, label=item.label,
                                  reference=item.reference, falsehood=item.falsehood,
                                  falsified=item.falsified,
                                  full_validation=item.full_validation)
        self._emit_patch(at, base, variant, value, ref)

    def _emit_variant(self, at: tuple[int, int, int], base: _Msg, variant: Variant,
                      case_ref: str) -> None:
        ref = variant.reference or case_ref
        if variant.patch is not None and variant.base is base.message \
                and self.plan.tokenizer is None:
            self._emit_patch(at, base, variant, _Value(*variant.patch), ref)
            return
        message = variant.message
        if message is base.message:
            self._emit_base(at, base, ref, variant)
            return
        si = at[1]
        msg = self._measured(message, base, variant.touched, si)
        schema = msg.schema
        if variant.full_validation and self.receipts[si]:
            schema = self.checks.schema_valid(message)
        self._emit(at, _Facts(
            meta=variant, ref=ref, size=msg.size, tokens=msg.tokens,
            governance=msg.governance, schema=schema, has_state=msg.has_state(),
            key=lambda slot: self._key(slot, msg), message=lambda: msg.message))

    def _measured(self, message: Mapping[str, Any], base: _Msg,
                  touched: frozenset[str] | None, si: int) -> _Msg:
        """A whole variant message, measured (sizes and checks reuse the base's when
        the variant says which members it changed).
        """
        msg = _Msg(dict(message), self.nslots)
        if self.plan.tokenizer is not None:
            msg.canon, msg.size = _measure(message)
            msg.tokens = _tokens(self.plan, msg.canon, msg.size)
        else:
            self._sizes(msg)
        if touched is not None and not touched & _GOVERNANCE:
            msg.governance = base.governance
        else:
            msg.governance = self.checks.governance_valid(message)
        if self.receipts[si]:
            msg.schema = base.schema if touched is not None and not touched else \
                self.checks.schema_valid(message)
        return msg

    def _emit_base(self, at: tuple[int, int, int], base: _Msg, ref: str,
                   meta: Variant | _Cached | None) -> None:
        schema = base.schema
        if meta is not None and meta.full_validation and self.receipts[at[1]]:
            schema = self.checks.schema_valid(base.message)
            self.exact = False
        self._emit(at, _Facts(
            meta=meta, ref=ref, size=base.size, tokens=base.tokens,
            governance=base.governance, schema=schema, has_state=base.has_state(),
            key=lambda slot: self._key(slot, base), message=lambda: base.message))

    def _emit_patch(self, at: tuple[int, int, int], base: _Msg, variant: Variant,
                    value: _Value, ref: str) -> None:
        """A variant that sets (or removes) one member of its base: sized, checked and
        keyed from the base and the member alone.
        """
        member, new = value.member, value.value
        if new is REMOVED and member not in base.message:  # removes nothing: the base
            self._emit_base(at, base, ref, variant)
            return
        schema = self._patched_schema(base, variant, value) if self.receipts[at[1]] else None
        has_state = isinstance(new, Mapping) if member == "decision_state" \
            else base.has_state()
        self._emit(at, _Facts(
            meta=variant, ref=ref, size=self._patched_size(base, value), tokens=None,
            governance=self._patched_governance(base, variant, value), schema=schema,
            has_state=has_state,
            key=lambda slot: self._patch_key(slot, base, variant, value),
            message=lambda: variant.message, rule=value))

    def _patched_governance(self, base: _Msg, variant: Variant, value: _Value) -> bool:
        """Governance members present and valid, from the base's check and the member."""
        member, new = value.member, value.value
        if member not in _GOVERNANCE:
            return base.governance
        if new is REMOVED:
            return False  # every governance member is required
        if base.governance:
            if value.governance is None:
                value.governance = self.checks.member_valid(member, new)
            return value.governance
        self.exact = False  # depends on the other members too
        return self.checks.governance_valid(variant.message)

    def _patched_schema(self, base: _Msg, variant: Variant, value: _Value) -> bool:
        """Receipt-schema validity, from the base's and the member's (when the base is
        valid and the schema is member-wise), else of the whole message.
        """
        checks = self.checks
        if variant.full_validation or not checks.memberwise or not base.schema:
            self.exact = False
            return checks.schema_valid(variant.message)
        if value.value is REMOVED:
            return value.member not in checks.required
        if value.schema is None:
            value.schema = checks.member_valid(value.member, value.value)
        return value.schema

    # ------------------------------------------------------------------- keys

    def _key(self, slot: _Slot, msg: _Msg) -> Any:
        """The memo key of a whole message for one receiver: ``("k", slot, id)`` of its
        projection, or ``("c", slot, canonical bytes)``.
        """
        found = msg.keys[slot.index]
        if found is None:
            projected = slot.project(msg.message) if slot.project is not None else None
            if projected is not None:
                found = ("k", slot.index, self.shared.intern(projected))
            else:
                found = ("c", slot.index, msg.canonical())
            msg.keys[slot.index] = found
        return found

    def _patch_key(self, slot: _Slot, base: _Msg, variant: Variant, value: _Value) -> Hashable:
        """The memo key of a patched message, from its base's key and the patch."""
        key = self._key(slot, base)
        member, new = value.member, value.value
        if key[0] == "k":
            if slot.member is not None:
                entry = value.entries.get(slot.index, _ABSENT)
                if entry is _ABSENT:
                    entry = value.entries[slot.index] = \
                        _GONE if new is REMOVED else slot.member(member, new)
                return ("p", slot.index, key[2], member, entry)
            assert slot.project is not None  # noqa: S101 - a "k" key needs a projection
            projected = slot.project(variant.message)
            if projected is not None:
                return ("k", slot.index, self.shared.intern(projected))
        patch = _GONE if new is REMOVED else canonical_bytes(new)
        return ("c", slot.index, base.canonical(), member, patch)

    # ------------------------------------------------------------------- rows

    def _outcome(self, slot: _Slot, facts: _Facts, *, memoise: bool, si: int = -1
                 ) -> tuple[int, int, int]:
        """(outcome id, latency µs, memo flag) of one receiver decision.

        A deterministic receiver's decision is looked up in the chunk's memo, then in
        the run's (shared by the chunks of this process, and filled ahead of time for
        slow receivers by the scheduling pass); only a decision no chunk has asked
        for yet calls the receiver. Failed calls (a receiver that raised, a model call
        that failed) are never memoised.
        """
        if self.dry:
            return self._schedule(slot, facts, memoise=memoise)
        if not memoise:
            outcome, latency, usage, ok = _decide(slot.receiver, facts.message(), self.fail)
            self.exact = self.exact and ok
            self._account(si, usage)
            self.calls += 1
            return self._outcome_id(outcome), latency, 0
        memo_key = facts.key(slot)
        found = self.memo.get(memo_key)
        if found is not None:
            self.hits += 1
            return found, 0, 1
        shared = self.shared
        while True:
            entry, mine = shared.entry(memo_key)
            if mine:
                outcome, latency, usage, ok = _decide(slot.receiver, facts.message(),
                                                      self.fail)
                entry.set(outcome, latency, usage)
                if not ok:
                    shared.forget(memo_key, entry)
                counted = shared.take(entry)
                break
            if not entry.wait():  # its scheduled call was cancelled: ask again
                shared.forget(memo_key, entry)
                continue
            counted = shared.take(entry)
            assert entry.outcome is not None  # noqa: S101 - set before done
            outcome, latency, usage = entry.outcome, entry.latency, entry.usage
            ok = _memoisable(outcome)
            if not ok:  # a failed call is reported once, then asked again
                shared.forget(memo_key, entry)
            if ok or counted:
                break
        oid = self._outcome_id(outcome)
        if ok:
            self.memo[memo_key] = oid
        else:
            self.exact = False
        if counted:
            self.calls += 1
            self._account(si, usage)
            return oid, latency, 0
        self.hits += 1
        return oid, 0, 1

    def _schedule(self, slot: _Slot, facts: _Facts, *, memoise: bool) -> tuple[int, int, int]:
        """The scheduling pass: hand a slow receiver's new messages to the pool."""
        if slot.slow and memoise:
            key = facts.key(slot)
            if key not in self.memo:
                self.memo[key] = 0
                shared = self.shared
                entry, mine = shared.entry(key)
                if mine:
                    message = facts.message()
                    receiver, fail = slot.receiver, self.fail

                    def call() -> None:
                        entry.set(*_decide(receiver, message, fail)[:3])

                    entry.future = shared.submit(call)
                    self.scheduled.append(entry.future)
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

    def _emit(self, at: tuple[int, int, int], facts: _Facts) -> None:
        """Decide one message (every epoch of a sampled receiver) and record the rows."""
        j, si, pi = at
        plan = self.plan
        slot = self.slots[si]
        counted = (si, pi)
        if self.last_case.get(counted) != j:
            self.last_case[counted] = j
            self.case_counts[counted] = self.case_counts.get(counted, 0) + 1
        semantic = self.semantic
        size, tokens = facts.size, facts.tokens
        for epoch in range(1 if slot.deterministic else plan.epochs):
            oid, latency, memo = self._outcome(slot, facts, memoise=slot.deterministic, si=si)
            sid = -1
            if facts.has_state:
                sid = self._outcome(semantic, facts, memoise=semantic.deterministic)[0]
            t = self._template(at, epoch, facts, oid, sid)
            if self.recording is not None:
                self.recording.append((pi, t, facts.rule, facts.has_state))
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
            if plan.keep_rows or pi in self.special or (pi == 0 and j in self.special_cases):
                self.rows.append((j, t, size, tokens, latency, memo))

    def _template(self, at: tuple[int, int, int], epoch: int, facts: _Facts, oid: int,
                  sid: int) -> int:
        """The id of the distinct row (all but case, bytes, tokens, latency, memo)."""
        j, si, pi = at
        meta = facts.meta
        label = falsified = falsehood = None
        if meta is not None:
            label, falsified, falsehood = meta.label, meta.falsified, meta.falsehood
        holding = self.holding[j]
        key = (si, pi, label, epoch, facts.ref, oid, sid, facts.governance, facts.schema,
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
        self.templates.append([
            None, si, pi, label, epoch, facts.ref, action, verdict, semantic, determined,
            None, None, facts.governance, facts.schema, None, None, falsified,
            list(falsehood) if falsehood is not None else None, list(reasons), list(holding),
        ])
        self.stats.append([0, 0, 0, 0, 0, 0, 0, 0])
        return found


def _decide(receiver: Receiver, message: Mapping[str, Any], fail: str
            ) -> tuple[tuple[str, str, tuple[str, ...]], int, tuple[int, int, int, float] | None,
                       bool]:
    """(outcome, latency µs, model usage, memoisable) of one receiver call."""
    started = time.perf_counter_ns()
    usage: tuple[int, int, int, float] | None = None
    try:
        decision = receiver.receive(message)
        outcome = (
            str(decision.action) if decision.action is not None else fail,
            decision.verdict.value,
            tuple(r.code for r in decision.reasons),
        )
        record = decision.record
        if "tokens_in" in record and "cached" in record:
            usage = (1 if record["cached"] else 0, int(record["tokens_in"]),
                     int(record["tokens_out"]), float(record.get("latency_ms", 0.0)))
        ok = _memoisable(outcome)
    except Exception as exc:  # a receiver must not raise; record it as an error
        outcome = (fail, "ERROR", (f"receiver-raised:{type(exc).__name__}",))
        ok = False
    return outcome, (time.perf_counter_ns() - started) // 1000, usage, ok


def _memoisable(outcome: tuple[str, str, tuple[str, ...]]) -> bool:
    """Whether an outcome may be reused: not an error, not a failed model call."""
    return outcome[1] != "ERROR" and not TRANSIENT_CODES.intersection(outcome[2])


def _case_digest(plan: Plan, evidence: Any) -> str:
    return digest(canonical_bytes(plan.case_json(evidence)))


def _strategy_index(plan: Plan, name: str) -> int:
    for i, strategy in enumerate(plan.strategies):
        if strategy.name == name:
            return i
    raise ExperimentError(f"unknown strategy {name!r}")


# -------------------------------------------------------------------------- runs


@attrs.frozen
class LabRun:
    """The outcome of :func:`run`: the report and where the run log lives."""

    report: dict[str, Any]
    run_log: Path | None

    @property
    def exit_code(self) -> int:
        """The release gate's exit code (0 pass, 1 fail)."""
        return int(self.report["gate"]["exit_code"])


def fingerprint(experiment: Experiment, plan: Plan, *, chunk_size: int) -> str:
    """Digest of everything that determines the decisions (not the tolerances)."""
    return digest({
        "experiment": experiment.name,
        "contract": plan.contract.describe(),
        "schema": schema_id(plan.contract),
        "strategies": [s.to_json() for s in plan.strategies],
        "perturbations": [p.to_json() for p in plan.perturbations],
        "targets": [list(t) for t in plan.targets],
        "cases": experiment.cases.description,
        "epochs": plan.epochs,
        "seed": experiment.seed,
        "chunk_size": chunk_size,
    })


def _executor(kind: str | cf.Executor | None, workers: int | None
              ) -> tuple[cf.Executor, Callable[[], None], str]:
    if isinstance(kind, cf.Executor):
        return kind, lambda: None, type(kind).__name__
    if kind in (None, "threads"):
        pool = cf.ThreadPoolExecutor(max_workers=workers or min(8, (os.cpu_count() or 1) + 2),
                                     thread_name_prefix="handoffs-lab")
        return pool, lambda: pool.shutdown(wait=True, cancel_futures=True), "threads"
    if kind == "processes":
        import multiprocessing

        processes = cf.ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 1,
                                           mp_context=multiprocessing.get_context("spawn"),
                                           initializer=_process_worker)
        return (processes, lambda: processes.shutdown(wait=True, cancel_futures=True),
                "processes")
    if kind == "dask":
        from contextlib import ExitStack

        from handoffs.lab.dask import dask_executor

        stack = ExitStack()
        executor = stack.enter_context(dask_executor(n_workers=workers or 2))
        return executor, stack.close, "dask"
    raise ExperimentError(f"unknown executor {kind!r}; use one of {list(EXECUTORS)} or an "
                          "Executor instance")


@contextlib.contextmanager
def _collector_frozen() -> Iterator[None]:
    """For the duration of a run, keep the objects that already exist (interpreter,
    libraries, the experiment) out of the garbage collector's full passes
    (``gc.freeze``), which the chunks' short-lived objects would otherwise trigger
    again and again. Nothing is frozen when the process froze objects itself.
    """
    if gc.get_freeze_count() or not gc.isenabled():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _process_worker() -> None:
    """Start a worker process of the runner's own pool: import the engine, then move
    everything loaded so far out of the collector's sight (``gc.freeze``), so that
    its full passes do not walk the interpreter's and the libraries' objects again
    and again. The process is the runner's, and ends with the pool.
    """
    import handoffs.lab.payment  # noqa: F401 - the engine and the built-in experiment

    gc.freeze()


def _chunks(cases: Iterator[Any], size: int) -> Iterator[list[Any]]:
    while True:
        chunk = list(itertools.islice(cases, size))
        if not chunk:
            return
        yield chunk


def _progress(enabled: bool, total: int | None) -> Any:
    if not enabled:
        return None
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    progress = Progress(TextColumn("lab"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("cases"), TimeElapsedColumn(), TimeRemainingColumn(),
                        console=Console(stderr=True), transient=True)
    progress.start()
    progress.add_task("cases", total=total)
    return progress


def run(
    experiment: Experiment,
    *,
    executor: str | cf.Executor | None = None,
    workers: int | None = None,
    chunk_size: int = 256,
    run_log: Path | str | None = None,
    resume: bool = False,
    progress: bool = False,
    created: datetime | None = None,
    cache: CallCache | Path | str | bool | None = None,
    refresh: bool = False,
    max_calls: int | None = None,
    max_tokens: int | None = None,
    concurrency: int | None = None,
) -> LabRun:
    """Run an experiment and build its report.

    Args:
        experiment: the experiment.
        executor: ``"threads"`` (default), ``"processes"`` (started with ``spawn``:
            a script needs an ``if __name__ == "__main__":`` guard), ``"dask"`` (a
            local cluster; needs the ``dask`` extra), or any
            ``concurrent.futures.Executor`` (e.g. from
            :func:`handoffs.lab.dask.dask_executor`), which the caller keeps
            ownership of. Process and Dask executors need a picklable experiment.
        workers: worker count for an executor the runner creates.
        chunk_size: cases per work unit (part of the run's identity: the shuffled
            control pairs cases within a chunk).
        run_log: where the JSON Lines run log goes (default: none is written; the
            report is built from the decisions as they stream in).
        resume: continue the run log at ``run_log`` after its last complete chunk.
        progress: show a rich progress bar on stderr.
        created: timestamp recorded in the report (default: now).
        cache: the call cache of model receivers (a :class:`CallCache` or its SQLite
            path); by default the file ``<run_log>.calls.sqlite`` beside the run log,
            so that a resumed run asks the model nothing twice; without a run log, none
            (the run-wide memo still asks each distinct request once per process).
            ``False``: no cache.
        refresh: ignore answers cached before this run (ask again, and store anew).
        max_calls: the run's budget of model calls (minimal-message confirmation
            included); past it a model receiver fails closed with ``budget-exceeded``.
        max_tokens: the run's budget of model tokens (in + out), likewise: no call
            starts once it is spent (calls already in flight, at most
            ``concurrency``, still finish, so a run may overshoot it by those).
        concurrency: model calls in flight at once (default: the largest
            ``max_in_flight`` of the experiment's model receivers).

    Raises:
        ExperimentError: bad arguments or an inconsistent experiment (before any work).
        RunLogError: resuming a log written by another experiment.
    """
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ExperimentError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    if resume and run_log is None:
        raise ExperimentError("resume needs the run_log path of the interrupted run")
    for name, value in (("workers", workers), ("max_calls", max_calls),
                        ("max_tokens", max_tokens), ("concurrency", concurrency)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or value < 1):
            raise ExperimentError(f"{name} must be a positive integer, got {value!r}")
    plan = attrs.evolve(compile_plan(experiment), keep_rows=run_log is not None,
                        token=str(uuid.uuid4()))
    started = time.perf_counter()
    log_path = None if run_log is None else Path(run_log)
    models = any(isinstance(r, ModelReceiver) for r in (
        *(s.receiver for s in plan.strategies), plan.semantic, experiment.confirming))
    calls = _call_cache(cache, log_path, refresh=refresh) if models else None
    budget = Budget(run=plan.token, max_calls=max_calls, max_tokens=max_tokens, cache=calls)
    header = {
        "run_id": f"urn:uuid:{uuid.uuid4()}",
        "experiment": experiment.name,
        "contract": plan.contract.id,
        "fingerprint": fingerprint(experiment, plan, chunk_size=chunk_size),
        "chunk_size": chunk_size,
        "created": format_time(created or datetime.now(UTC)),
        "strategies": [s.name for s in plan.strategies],
        "perturbations": list(plan.perturbation_ids),
        "epochs": plan.epochs,
    }
    if log_path is None:
        log = RunLog.discarding(header)
    else:
        log = RunLog.resume(log_path, header) if resume else RunLog.create(log_path, header)
    plan, confirming = _wired(plan, experiment.confirming, calls, budget, concurrency)
    if plan.prefetch:
        _shared_for(plan).start()
    aggregator = Aggregator.for_experiment(experiment, plan)
    resumed = log.chunks
    if resumed and log_path is not None:
        _, records = read_run_log(log_path)
        for record in records:
            if record.get("complete") is not True:
                aggregator.feed(record)
    kind = "resumed"
    try:
        with log, _collector_frozen():
            if not log.complete:
                kind = _execute(experiment, plan, log, aggregator, executor=executor,
                                workers=workers, chunk_size=chunk_size, progress=progress)
        minimal_extra = finish_minimal(experiment, plan, aggregator, receiver=confirming)
    finally:
        _release(plan, confirming)
    from handoffs.lab._report import build_report

    provenance = {
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "run_id": str(log.header.get("run_id")),
        "run_log": None if log_path is None else str(log_path),
        "executor": kind,
        "workers": workers,
        "chunk_size": chunk_size,
        "resumed_chunks": resumed,
        "elapsed_seconds": time.perf_counter() - started,
    }
    cost = {
        "cache": None if calls is None else {"path": str(calls.path),
                                            "refresh": bool(refresh)},
        "budget": {"max_calls": max_calls, "max_tokens": max_tokens},
        "concurrency": plan.concurrency if plan.prefetch else None,
    }
    report = build_report(experiment, plan, aggregator, provenance=provenance,
                          minimal_extra=minimal_extra, created=created, cost=cost)
    return LabRun(report=report, run_log=log_path)


def _release(plan: Plan, confirming: Receiver) -> None:
    """Drop a finished run's shared state, cache connections and model connections."""
    release_shared(plan.token)
    close_connections()
    for receiver in (*(s.receiver for s in plan.strategies), confirming):
        if isinstance(receiver, ModelReceiver) and isinstance(receiver.client, LabClient):
            receiver.client.close()


def _call_cache(cache: CallCache | Path | str | bool | None, log_path: Path | None, *,
                refresh: bool) -> CallCache | None:
    if cache is False:
        return None
    if isinstance(cache, CallCache):
        return CallCache(cache.path, refresh=True) if refresh and not cache.refresh else cache
    if cache is None or cache is True:
        if log_path is None:
            return None
        cache = log_path.with_name(log_path.name + ".calls.sqlite")
    if not isinstance(cache, str | Path):
        raise ExperimentError(f"cache must be a path, a CallCache or False, got {cache!r}")
    return CallCache(cache, refresh=refresh)


def _wired(plan: Plan, confirming: Receiver, cache: CallCache | None, budget: Budget,
           concurrency: int | None) -> tuple[Plan, Receiver]:
    """The plan with every model receiver's client wrapped for this run (call cache,
    budget), and the scheduling it needs.
    """
    wrapped: dict[int, Any] = {}

    def wire(receiver: Any) -> Any:
        if not isinstance(receiver, ModelReceiver):
            return receiver
        found = wrapped.get(id(receiver))
        if found is None:
            client = LabClient(inner=receiver.client, fingerprint=receiver.fingerprint(),
                               receiver=receiver.name, cache=cache,
                               budget=budget if budget.limited else None)
            found = wrapped[id(receiver)] = attrs.evolve(receiver, client=client)
        return found

    strategies = tuple(attrs.evolve(s, receiver=wire(s.receiver)) if
                       isinstance(s.receiver, ModelReceiver) else s for s in plan.strategies)
    slow = [s.receiver for s in strategies
            if isinstance(getattr(s.receiver, "max_in_flight", None), int)]
    prefetch = any(r.deterministic for r in slow)
    width = concurrency or max([int(getattr(r, "max_in_flight", 8)) for r in slow], default=8)
    return (attrs.evolve(plan, strategies=strategies, semantic=wire(plan.semantic),
                         prefetch=prefetch, concurrency=width), wire(confirming))


def _execute(experiment: Experiment, plan: Plan, log: RunLog, aggregator: Aggregator, *,
             executor: str | cf.Executor | None, workers: int | None, chunk_size: int,
             progress: bool) -> str:
    source = iter(experiment.cases)
    try:
        first = next(source)
    except StopIteration:
        raise ExperimentError("the case source yielded no cases", code="no-cases") from None
    constants = _constants(plan, first)
    if plan.prefetch:
        _warm(plan, constants)
    stream: Iterator[Any] = itertools.chain([first], source)
    skipped = sum(1 for _ in itertools.islice(stream, log.cases))
    if skipped != log.cases:
        raise ExperimentError(f"the case source has {skipped} cases but the run log already "
                              f"covers {log.cases}", code="run-log-mismatch")
    total = len(experiment.cases) if isinstance(experiment.cases, Sized) else None
    bar = _progress(progress, total)
    if bar is not None and log.cases:
        bar.update(bar.task_ids[0], completed=log.cases)
    pool, close, kind = _executor(executor, workers)
    window = max(2, 2 * (workers or os.cpu_count() or 1))
    pending: collections.deque[cf.Future[dict[str, Any]]] = collections.deque()
    index, start = log.chunks, log.cases

    def collect(future: cf.Future[dict[str, Any]]) -> None:
        record = future.result()
        log.append(record)
        aggregator.feed(record)
        if bar is not None:
            bar.update(bar.task_ids[0], advance=len(record["cases"]))

    try:
        for chunk in _chunks(stream, chunk_size):
            pending.append(pool.submit(run_chunk, plan, index, start, chunk, constants))
            index += 1
            start += len(chunk)
            while len(pending) >= window:
                collect(pending.popleft())
        while pending:
            collect(pending.popleft())
        log.finish({"chunks": log.chunks, "cases": log.cases,
                    "case_set_digest": aggregator.case_set_digest()})
    except BaseException:
        # Keep what already finished (in order), so that a resumed run redoes less.
        while pending and pending[0].done() and not pending[0].cancelled() \
                and pending[0].exception() is None:
            collect(pending.popleft())
        for future in pending:
            future.cancel()
        raise
    finally:
        close()
        if bar is not None:
            bar.stop()
    return kind


def _warm(plan: Plan, constants: Sequence[Mapping[str, Any] | None]) -> None:
    """Build the receivers' memo projections (compiled validators and the like) once,
    here, rather than while the first calls of slow receivers wait for them.
    """
    for strategy, message in zip(plan.strategies, constants, strict=True):
        project = getattr(strategy.receiver, "memo_key", None)
        if message is not None and callable(project):
            project(message)


def _constants(plan: Plan, first: Any) -> list[Mapping[str, Any] | None]:
    constants: list[Mapping[str, Any] | None] = []
    case_id = str(plan.case_id_of(first))
    refs = tuple(plan.evidence_refs_of(first))
    for strategy in plan.strategies:
        stamp = plan.governance.stamp(case_id=case_id, evidence_refs=refs,
                                      authority=strategy.authority).to_json()
        constants.append(_compose(plan, strategy, strategy.encoder.encode(first), stamp,
                                  case_id))
    return constants


# -------------------------------------------------------------- minimal messages


def finish_minimal(experiment: Experiment, plan: Plan, aggregator: Aggregator, *,
                   confirm: bool = True, receiver: Receiver | None = None
                   ) -> dict[str, Any]:
    """Confirm each region's minimal message on the confirming receiver (one call per
    region; delta debugging when it does not confirm, or when the method is
    ``ddmin``), and check the search against exhaustive search on small contracts.
    """
    reference = _reference_for(plan.contract)
    method = experiment.minimal_method
    if method == "auto":
        method = "ddmin" if has_predicates(plan.contract.policy) else "region"
    if receiver is None:
        receiver = experiment.confirming
    calls = 0
    exhaustive_ok = True
    checked = 0
    exhaustive = len(plan.contract.fields) <= 12 and method == "region" \
        and not reference.predicates
    for region in aggregator.regions():
        truth_wire = region["truth"]
        if confirm:
            calls += _confirm_region(region, experiment, plan, receiver, method)
        else:
            region["confirmed"] = None
            region["receiver_calls"] = 0
            region["receiver_fields"] = None
        region["duality_holds"] = set(region["trigger_fields"]) == set(region["fields"])
        if exhaustive:
            truth = {spec.name: typed_value(spec, truth_wire[spec.name])
                     for spec in plan.contract.fields}
            size, sets = exhaustive_minimum(reference, truth)
            checked += 1
            if len(region["fields"]) != size or tuple(region["fields"]) not in sets:
                exhaustive_ok = False
    return {
        "method": method,
        "opaque_conditions": opaque_conditions(plan.contract.policy),
        "confirming_receiver": str(getattr(receiver, "name", type(receiver).__name__)),
        "receiver_calls": calls,
        "exhaustive_check": {
            "performed": bool(checked),
            "agrees": exhaustive_ok if checked else None,
            "states_checked": checked,
        },
    }


def _confirm_region(region: dict[str, Any], experiment: Experiment, plan: Plan,
                    receiver: Receiver, method: str) -> int:
    """Confirm one region on ``receiver``; return the receiver calls spent."""
    example: Mapping[str, Any] = region["example"]
    action = region["action"]
    names = [s.name for s in plan.contract.fields]

    def accepts(fields: Sequence[str]) -> bool:
        message = dict(example)
        state = example.get("decision_state")
        if isinstance(state, Mapping):
            message["decision_state"] = {k: v for k, v in state.items() if k in fields}
        decision = receiver.receive(message)
        return bool(decision.verdict is Verdict.ACCEPT and decision.action == action)

    region["receiver_fields"] = None
    if method == "ddmin":
        found, spent, complete = ddmin(names, accepts, budget=experiment.minimal_budget)
        region["fields"] = [n for n in names if n in found]
        region["message"] = [{"field": n, "representation": "exact",
                              "value": region["truth"][n]} for n in region["fields"]]
        region["guarantee"] = "1-minimal"
        region["receiver_fields"] = list(region["fields"])
        region["confirmed"] = bool(complete and accepts(region["fields"]))
        region["receiver_calls"] = spent + 1
        return spent + 1
    region["confirmed"] = accepts(region["fields"])
    spent = 1
    if not region["confirmed"]:
        # The receiver needs more than the region-minimal message: find what it needs
        # by delta debugging (1-minimal under the receiver).
        found, used, _ = ddmin(names, accepts, budget=experiment.minimal_budget)
        spent += used
        region["receiver_fields"] = [n for n in names if n in found]
    region["receiver_calls"] = spent
    return spent


def rescore(
    experiment: Experiment,
    run_log: Path | str,
    *,
    loss: LossMatrix[Any] | Mapping[tuple[str, str], float],
    name: str = "rescored",
    created: datetime | None = None,
) -> dict[str, Any]:
    """Re-score a finished run under another loss matrix, calling no receiver.

    The decisions come from the run log; only the scoring changes (the hard
    constraints stay the contract's). Minimal messages are reported unconfirmed.

    Args:
        experiment: the experiment the log was written for.
        run_log: the run log.
        loss: the new loss matrix (a :class:`LossMatrix`, or entries keyed by
            ``(chosen, reference)`` action values).
        name: the name of the new matrix, recorded as ``provenance.rescored_with``.
        created: report timestamp.

    Raises:
        RunLogError: the log was written for another experiment declaration.
    """
    plan = compile_plan(experiment)
    header, records = read_run_log(run_log)
    if header.get("strategies") != [s.name for s in plan.strategies] or \
            header.get("perturbations") != list(plan.perturbation_ids):
        raise RunLogError(f"{run_log} was written for another experiment declaration",
                          code="run-log-mismatch")
    entries = loss.entries if isinstance(loss, LossMatrix) else loss
    base = Scoring.of(plan.contract)
    scoring = Scoring(
        loss={(getattr(c, "value", c), getattr(r, "value", r)): float(v)
              for (c, r), v in entries.items()},
        hard=base.hard, name=name, conditioned=base.conditioned)
    aggregator = Aggregator.for_experiment(experiment, plan, scoring)
    complete = False
    for record in records:
        if record.get("complete") is True:
            complete = True
        else:
            aggregator.feed(record)
    if not complete:
        raise RunLogError(f"{run_log} is not a complete run; resume it first",
                          code="run-log-incomplete")
    provenance = {
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "run_id": str(header.get("run_id")),
        "run_log": str(run_log),
        "executor": "rescore",
        "workers": None,
        "chunk_size": int(header.get("chunk_size", 1)),
        "resumed_chunks": 0,
        "elapsed_seconds": 0.0,
    }
    from handoffs.lab._report import build_report

    minimal_extra = finish_minimal(experiment, plan, aggregator, confirm=False)
    return build_report(experiment, plan, aggregator, provenance=provenance,
                        minimal_extra=minimal_extra, created=created)
