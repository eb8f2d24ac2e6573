"""The lab's memo room: which key each receiver's decisions are memoised on, the
run-wide memo, and the call pool that keeps slow receivers busy.

**Keys: exact by construction, and user declarations only as a checked option.**
By default a deterministic receiver's decisions are memoised on the whole canonical
message (with the receiver's slot in the run and the draw: :mod:`handoffs.lab._chunk`).
A smaller key is used only where the library itself knows what a decision reads:

- a receiver that decides by a declarative contract (the strict receiver, the
  actuator) through a :class:`~handoffs.receivers.Gate`: the gate's own key
  (:meth:`~handoffs.receivers.Gate.memo_key`, :mod:`handoffs._memo`), which keeps every
  member by value but the per-case identifiers; the policy reads decision-state fields
  only (:func:`policy_reads`, from the policy itself), so no identifier joins the key.
  That key is a set of per-member pairs (:func:`member_keyer`), so the key of a
  message that differs from a keyed one in one member follows from it;
- a :class:`~handoffs.receivers.models.ModelReceiver`: its admission's key and every
  member its prompt shows. Through a gate that is the gate's key alone, which keeps by
  value every member but the identifiers, which the prompt does not show (so that it
  follows member by member, as above); through another admission, that admission's
  key and the shown members by value;
- the lab's baseline receivers, which compute their own (:class:`Memoisable`).

A user's declaration of what a rule reads (:attr:`~handoffs.receivers.FunctionReceiver.reads`)
is trusted only when the run opts in (``run(..., projection=True)``), and then checked:
the chunk re-decides a sample of memo hits without the memo (``_Chunk._check``), and a
hit whose decision differs stops the run with :class:`~handoffs.errors.ProjectionError`,
naming the receiver and the members the declaration left out.

**Soundness.** Two messages with equal keys get the same verdict, action and reason
codes (not necessarily the same ids, messages or ``record``): the key keeps everything
those depend on and may drop the rest, such as unique ids whose only effect is through
their validity. ``tests/unit/test_projection.py`` holds the engine's figures to the
unmemoised ones (the essay's lab, a generated contract, a wrong ``reads``).

**The memo.** The chunks of one run share, in each process, one :class:`_Shared`: the
decisions of every deterministic receiver by memo key (bounded; an entry is a future
made by the first chunk that needs it and filled once, so two chunks never call a
receiver for the same key), the interned key projections, and a pool of
``plan.concurrency`` threads to which a chunk's scheduling pass hands its slow (model)
receivers' distinct messages, so that their calls overlap across cases. Failed calls
(a receiver that raised, a model call that failed) are reported once and never reused.
Across processes and runs, a model receiver's answers are kept by the call cache
(:mod:`handoffs.lab._cache`) around its client.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import functools
import itertools
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Any, Final, Protocol, cast, runtime_checkable

import attrs

from handoffs._codes import TRANSIENT_CODES
from handoffs._memo import PROJECTED, memo_value
from handoffs.lab._cache import LabClient
from handoffs.lab._plan import Plan
from handoffs.lab._reference import KEY_MEMBERS, ReferenceReceiver
from handoffs.receivers import (
    Admitted,
    AuthoritativeActuator,
    FunctionReceiver,
    Gate,
    Receiver,
    Ruling,
    StrictContractReceiver,
    Verdict,
)
from handoffs.receivers.models import ChatRequest, Completion, ModelReceiver

__all__ = ["Memoisable", "declared", "keyed", "member_keyer", "memo_key", "memo_value",
           "projector", "release_shared", "send_ahead", "send_batch"]


Outcome = tuple[str, str, tuple[str, ...]]
Usage = tuple[int, int, int, float]


class _Entry(cf.Future[tuple[Outcome, int, "Usage | None"]]):
    """One run-wide memo entry: the future of a decision's (outcome, latency µs, model
    usage), filled once by whoever made the entry (a deciding pass, or the call pool
    for an entry a scheduling pass sent ahead); everyone else waits on it (the
    single flight of :meth:`_Shared.entry`).

    ``counted``: whether a caller has counted its call; ``source``: the message that
    made it, kept only for a receiver whose declared ``reads`` the run checks
    (:class:`~handoffs.errors.ProjectionError` names what differs); ``hits``: hits
    seen (every :data:`_CHECK_EVERY`-th, and the first, is decided again).
    """

    counted = False
    source: Mapping[str, Any] | None = None
    hits = 0
    value: tuple[Outcome, int, Usage | None] | None = None  # the result, once filled
    ok = False  # filled with an outcome that may be reused (:func:`_memoisable`)

    def set(self, outcome: Outcome, latency: int, usage: Usage | None) -> None:
        """Fill the entry (once)."""
        self.ok = _memoisable(outcome)
        self.value = (outcome, latency, usage)
        self.set_result(self.value)

    def get(self) -> tuple[Outcome, int, Usage | None]:
        """The result: at once when filled (most memo hits), else when it is."""
        value = self.value
        return self.result() if value is None else value


class _Shared:
    """What the chunks of one run share in one process: the run-wide memo (each
    deterministic receiver's decisions by memo key, bounded), the interned memo-key
    projections, and the pool that keeps slow receivers busy across cases.
    """

    def __init__(self, plan: Plan) -> None:
        self.memo: dict[Hashable, _Entry] = {}
        self.interned: dict[Hashable, int] = {}
        self.ids = itertools.count()
        self.lock = threading.Lock()
        self.pool: cf.ThreadPoolExecutor | None = None
        # One thread makes the rulings on arrived answers, so that a call thread goes
        # from one answer straight to its next request.
        self.rulings: cf.ThreadPoolExecutor | None = None
        self.concurrency = plan.concurrency
        # scheduling passes: one at a time, in stream order (see ``scheduling``)
        self.turns = threading.Condition()
        self.expected: set[int] = set()  # handed to an executor, not yet scheduled
        self.arrived: set[int] = set()  # of those, the ones waiting for their turn
        self.busy = False

    def intern(self, projected: Hashable) -> int:
        """A small id for a memo-key projection. Ids are never reused, so bounding the
        table (clearing it) loses reuse, never soundness.
        """
        found = self.interned.get(projected)
        if found is None:
            with self.lock:
                found = self.interned.get(projected)
                if found is None:
                    if len(self.interned) >= _RUN_MEMO_LIMIT:
                        self.interned.clear()
                    found = self.interned[projected] = next(self.ids)
        return found

    def entry(self, key: Hashable) -> tuple[_Entry, bool]:
        """(the entry for ``key``, whether this caller made it and must fill it)."""
        found = self.memo.get(key)
        if found is None:
            with self.lock:
                found = self.memo.get(key)
                if found is None:
                    if len(self.memo) >= _RUN_MEMO_LIMIT:
                        self.memo.clear()  # bounded memory; the call cache keeps answers
                    made = self.memo[key] = _Entry()
                    return made, True
        return found, False

    def forget(self, key: Hashable, entry: _Entry) -> None:
        with self.lock:
            if self.memo.get(key) is entry:
                del self.memo[key]

    def take(self, entry: _Entry) -> bool:
        """Whether this caller is the first to count ``entry``'s call."""
        if entry.counted:  # only ever set, never cleared: most hits need no lock
            return False
        with self.lock:  # another caller may have counted it since
            first = not entry.counted
            entry.counted = True
            return first

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

    def expect(self, index: int) -> None:
        """Chunk ``index`` was handed to an executor (see :meth:`scheduling`)."""
        with self.turns:
            self.expected.add(index)

    def abandon(self) -> None:
        """No chunk handed over is to be waited for any longer (the run stops)."""
        with self.turns:
            self.expected &= self.arrived
            self.turns.notify_all()

    @contextlib.contextmanager
    def scheduling(self, index: int) -> Iterator[None]:
        """The turn of chunk ``index``'s scheduling pass: one pass at a time (the
        interpreter runs one thread at a time, and a pass that waits for another to
        finish its batch would only hold back both batches), in stream order among the
        chunks this process was handed (:meth:`expect`) or is running, so that the
        first chunk's calls are the first sent. A pass waits for a turn at most
        :data:`_TURN_WAIT` seconds: the order is for speed, never for correctness.
        """
        deadline = time.monotonic() + _TURN_WAIT
        with self.turns:
            self.expected.add(index)
            self.arrived.add(index)
            while (self.busy or min(self.expected) != index) \
                    and time.monotonic() < deadline:
                self.turns.wait(max(0.0, deadline - time.monotonic()))
            self.busy = True
            self.expected.discard(index)
            self.arrived.discard(index)
        try:
            yield
        finally:
            with self.turns:
                self.busy = False
                self.turns.notify_all()

    def submit(self, fn: Callable[..., Any], *args: Any) -> cf.Future[Any]:
        """Run ``fn(*args)`` on the call pool."""
        pool = self.pool
        if pool is None:
            pool = self.start()
        return pool.submit(fn, *args)

    def rule(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the ruling thread (started on first use)."""
        rulings = self.rulings
        if rulings is None:
            with self.lock:
                if self.rulings is None:
                    self.rulings = cf.ThreadPoolExecutor(
                        max_workers=1, thread_name_prefix="handoffs-rulings")
                rulings = self.rulings
        rulings.submit(fn, *args)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
        if self.rulings is not None:
            self.rulings.shutdown(wait=True)
            self.rulings = None


_RUN_MEMO_LIMIT: Final = 65_536
_TURN_WAIT: Final = 10.0
_RUNS_KEPT: Final = 8


_shared: dict[str, _Shared] = {}


def _shared_for(plan: Plan) -> _Shared:
    found = _shared.get(plan.token)
    if found is None:
        with _SHARED_LOCK:
            found = _shared.get(plan.token)
            if found is None:
                if len(_shared) >= _RUNS_KEPT:
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


def _decide(receiver: Receiver, message: Mapping[str, Any], fail: str, sample: int = 0
            ) -> tuple[tuple[str, str, tuple[str, ...]], int, tuple[int, int, int, float] | None,
                       bool]:
    """(outcome, latency µs, model usage, memoisable) of one receiver call (``sample``:
    the draw of a sampled model receiver).
    """
    started = time.perf_counter_ns()
    usage: tuple[int, int, int, float] | None = None
    try:
        if sample and isinstance(receiver, ModelReceiver):
            decision = receiver.receive(message, sample=sample)
        else:
            decision = receiver.receive(message)
        outcome = (
            str(decision.action) if decision.action is not None else fail,
            decision.verdict.value,
            tuple(r.code for r in decision.reasons),
        )
        usage = _usage(decision.record)
        ok = _memoisable(outcome)
    except Exception as exc:  # a receiver must not raise; record it as an error
        outcome = (fail, "ERROR", (f"receiver-raised:{type(exc).__name__}",))
        ok = False
    return outcome, (time.perf_counter_ns() - started) // 1000, usage, ok


def _usage(record: Mapping[str, Any]) -> tuple[int, int, int, float] | None:
    """(cached, tokens in, tokens out, latency ms) of a model decision's record."""
    if "tokens_in" in record and "cached" in record:
        return (1 if record["cached"] else 0, int(record["tokens_in"]),
                int(record["tokens_out"]), float(record.get("latency_ms", 0.0)))
    return None


def _memoisable(outcome: tuple[str, str, tuple[str, ...]]) -> bool:
    """Whether an outcome may be reused: not an error, not a failed model call."""
    return outcome[1] != "ERROR" and not TRANSIENT_CODES.intersection(outcome[2])


# The placeholder ruling of a scheduling pass's admission (see ``send_ahead``): an
# action no contract has (action values are JSON strings; a NUL byte is never one).
_PENDING: Final = Ruling(action="\x00pending", verdict=Verdict.ACCEPT)


def send_ahead(shared: _Shared, receiver: Receiver, message: Mapping[str, Any], *,
               fail: str, sample: int, entry: _Entry, batch: list[_Pending],
               scheduled: list[cf.Future[Any]]) -> None:
    """The scheduling pass's part of one slow receiver's decision, which fills ``entry``.

    A model receiver whose client the lab wrapped is run in its parts (see
    :meth:`~handoffs.receivers.models.ModelReceiver.rule_on`): its admission here, with a rule
    that only takes note of the admitted document; then the request (rendered once),
    which joins ``batch`` (:func:`send_batch`: the call cache's answer, or the call
    sent to the pool, whose thread makes the ruling when the answer arrives and fills
    the entry). No part runs twice, and the deciding pass finds the outcome. An
    admission that refuses fills the entry here, without a call. Any other receiver,
    or an admission that does not pass its rule's ruling through as the decision, is
    decided whole on the pool.
    """
    started = time.perf_counter_ns()
    client = getattr(receiver, "client", None)
    if not isinstance(receiver, ModelReceiver) or not isinstance(client, LabClient):
        scheduled.append(shared.submit(_whole, entry, receiver, message, fail, sample))
        return
    admitted: list[Admitted] = []

    def note(document: Admitted) -> Ruling:
        admitted.append(document)
        return _PENDING

    try:
        decision = receiver.gate.decide(message, rule=note, receiver=receiver.name,
                                        record=receiver.record)
    except Exception:  # an admission must not raise: decided whole, an error row
        scheduled.append(shared.submit(_whole, entry, receiver, message, fail, sample))
        return
    if not admitted:  # refused before the model: decided
        entry.set(_outcome_of(decision, fail), (time.perf_counter_ns() - started) // 1000,
                  None)
        return
    if decision.action != _PENDING.action or decision.verdict is not _PENDING.verdict \
            or decision.reasons:
        scheduled.append(shared.submit(_whole, entry, receiver, message, fail, sample))
        return
    contract = admitted[0].contract
    try:
        request = receiver.request(admitted[0].document, contract, sample=sample)
        key = client.key(request)
    except Exception as exc:  # a request that cannot be made fails closed
        _rule_on(entry, receiver, contract, exc, sample=sample, started=started)
        return
    batch.append(_Pending(entry=entry, receiver=receiver, client=client, contract=contract,
                          request=request, key=key, sample=sample,
                          spent=time.perf_counter_ns() - started))


@attrs.frozen(kw_only=True)
class _Pending:
    """A request a scheduling pass made, to send with its batch (:func:`send_batch`)."""

    entry: _Entry
    receiver: ModelReceiver
    client: LabClient
    contract: Any
    request: ChatRequest
    key: str
    sample: int
    spent: int  # ns the scheduling pass spent on it

    def rule(self, answer: Completion | BaseException, started: int) -> None:
        _rule_on(self.entry, self.receiver, self.contract, answer, sample=self.sample,
                 started=started)

    def arrived(self, future: cf.Future[Completion]) -> None:
        """The call's answer (or failure) is in: make the ruling (on the ruling thread)."""
        answer: Completion | BaseException
        try:
            answer = future.result()
        except BaseException as exc:  # a failed call is ruled on too
            answer = exc
        self.rule(answer, time.perf_counter_ns() - self.spent)


def send_batch(shared: _Shared, batch: list[_Pending],
               scheduled: list[cf.Future[Any]]) -> None:
    """Send a scheduling pass's requests: those on their way already are joined, the
    call cache is asked for the others in one look-up per client, its answers are ruled
    on at once, and the rest go to the call pool together (so that the pool is filled
    before this thread does anything else).
    """
    clients: dict[int, tuple[LabClient, list[str]]] = {}
    waiting: list[tuple[_Pending, cf.Future[Completion]]] = []
    fresh: list[_Pending] = []
    for pending in batch:
        future = pending.client.sent(pending.key)
        if future is not None:
            waiting.append((pending, future))
        else:
            fresh.append(pending)
            clients.setdefault(id(pending.client), (pending.client, []))[1].append(pending.key)
    found: dict[int, dict[str, Completion]] = {
        ident: client.cached(keys) for ident, (client, keys) in clients.items()}
    now = time.perf_counter_ns()
    for pending in fresh:
        answer = found[id(pending.client)].get(pending.key)
        if answer is None:
            waiting.append((pending, pending.client.send(pending.key, pending.request,
                                                         shared.submit)))
        else:
            pending.rule(answer, now - pending.spent)
    for pending, future in waiting:
        future.add_done_callback(functools.partial(shared.rule, pending.arrived))
        scheduled.append(future)


def _rule_on(entry: _Entry, receiver: ModelReceiver, contract: Any,
             answer: Completion | BaseException, *, sample: int, started: int) -> None:
    """Fill ``entry`` with the receiver's ruling on ``answer`` (never raises)."""
    usage = None
    try:
        ruling = receiver.rule_on(contract, answer, sample=sample)
        outcome = (ruling.action, ruling.verdict.value, tuple(r.code for r in ruling.reasons))
        usage = _usage(ruling.record)
    except Exception as exc:  # a receiver must not raise; record it as an error
        outcome = (str(contract.fail_closed_action.value), "ERROR",
                   (f"receiver-raised:{type(exc).__name__}",))
    latency = (time.perf_counter_ns() - started) // 1000
    if usage is not None and not usage[0]:  # the model's time is the call's
        latency += round(usage[3] * 1000)
    entry.set(outcome, latency, usage)


def _outcome_of(decision: Any, fail: str) -> tuple[str, str, tuple[str, ...]]:
    return (str(decision.action) if decision.action is not None else fail,
            decision.verdict.value, tuple(r.code for r in decision.reasons))


def _whole(entry: _Entry, receiver: Receiver, message: Mapping[str, Any], fail: str,
           sample: int) -> None:
    """Decide on the call pool, admission and all (fills ``entry``)."""
    outcome, latency, usage, _ = _decide(receiver, message, fail, sample)
    entry.set(outcome, latency, usage)


# ---------------------------------------------------------------------- keys


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
        if isinstance(receiver.gate, Gate):  # the gate's key keeps what the prompt shows
            return _admission_projector(receiver.gate, PROJECTED - receiver.hidden)
        return functools.partial(_model_key, receiver)
    if isinstance(receiver, FunctionReceiver | StrictContractReceiver | AuthoritativeActuator):
        return _admission_projector(receiver.gate, _reads(receiver))
    return cast(Projector, receiver.memo_key)


def member_keyer(receiver: Any, *, projection: bool = False
                 ) -> tuple[Callable[[str, Any], Hashable], frozenset[str] | None] | None:
    """When ``receiver``'s memo key (:func:`projector`) is the set of ``(name,
    contribution)`` pairs of the members it reads, ``(member, members)``: the
    contribution of one member, and the members it reads (``None``: all). The key of a
    message that differs from a keyed one in one member follows from it (the same key
    when the member is not read). That holds of a gate's key
    (:meth:`~handoffs.receivers.Gate.memo_member`), so of a model receiver's through a
    gate (:func:`projector`), and of the reference receiver's, which reads the decision
    state alone. ``None`` otherwise.
    """
    if isinstance(receiver, ReferenceReceiver):
        return receiver.memo_member, KEY_MEMBERS
    if isinstance(receiver, ModelReceiver):
        kept = PROJECTED - receiver.hidden  # identifiers its prompt shows
    elif isinstance(receiver, FunctionReceiver | StrictContractReceiver
                    | AuthoritativeActuator) and keyed(receiver, projection=projection):
        kept = _reads(receiver) & PROJECTED
    else:
        return None
    gate = receiver.gate
    if not isinstance(gate, Gate) or kept:
        return None
    member = gate.memo_member()
    return None if member is None else (member, None)


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
    """The admission's key and every member the prompt shows, by value (an admission
    other than a gate, whose key keeps only what its checks read).
    """
    admission = _admission_projector(receiver.gate, frozenset())(message)
    if admission is None:
        return None
    hidden = receiver.hidden
    return (admission, frozenset([(k, memo_value(v)) for k, v in message.items()
                                  if k not in hidden]))
