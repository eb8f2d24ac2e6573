"""The streaming runner: cases in chunks, on any ``concurrent.futures.Executor``.

The main process reads the case source lazily, cuts it into chunks of
``chunk_size`` cases and submits each chunk to the executor (threads by default;
local processes; a Dask cluster through ``distributed``'s ``Client.get_executor``).
At most a few chunks are in flight, and results are taken back *in stream order*,
so the run log, the metrics and every count are the same on every executor and
for any number of workers. Memory does not grow with the number of cases: the
metrics are aggregated chunk by chunk and the decisions stream to the run log.

Inside a chunk each case is encoded once per encoder; perturbations copy the
dicts they change; a deterministic receiver is memoised on the canonical message
(or on the projection a receiver declares with ``memo_key``), per chunk; a sampled
receiver is called again for every epoch. The reference policy and the per-state
analysis (counterfactual triggers, minimal messages) are memoised per process.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import functools
import hashlib
import itertools
import os
import platform
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence, Sized
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import attrs
import jsonschema_rs

from handoffs._json import canonical_bytes, digest, dumps
from handoffs.contracts._contract import Authority, Contract, LossMatrix
from handoffs.contracts._encoders import UntrustedGovernance
from handoffs.contracts._receipt import ENVELOPE_MEMBERS, GOVERNANCE_FIELDS, format_time
from handoffs.contracts._schema import schema_id, to_json_schema
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
    SUBJECT,
    CaseContext,
    Perturbation,
    Scoring,
    Variant,
    has_predicates,
)
from handoffs.lab._runlog import RunLog, RunLogError, read_run_log
from handoffs.receivers._decision import Receiver, Verdict

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
    )


# ------------------------------------------------------------------ per-process


class _Checks:
    """Compiled schema checks for one contract (jsonschema-rs, built once)."""

    def __init__(self, contract: Contract[Any, Any]) -> None:
        schema = to_json_schema(contract)
        self.receipt = jsonschema_rs.validator_for(schema)
        governance = {
            "$schema": schema["$schema"],
            "type": "object",
            "required": list(GOVERNANCE_FIELDS),
            "properties": {m: schema["properties"][m] for m in GOVERNANCE_FIELDS},
        }
        self.governance = jsonschema_rs.validator_for(governance)

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


_checks: dict[str, _Checks] = {}
_references: dict[str, Reference] = {}
_analysis: dict[tuple[str, str], dict[str, Any]] = {}


def _checks_for(contract: Contract[Any, Any]) -> _Checks:
    found = _checks.get(contract.id)
    if found is None:
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


def receipt_id(experiment: str, strategy: str, case_id: str) -> str:
    """The deterministic receipt id of one strategy's message for one case."""
    return f"urn:uuid:{uuid.uuid5(_RECEIPT_NAMESPACE, f'{experiment}/{strategy}/{case_id}')}"


class _Decider:
    """Calls receivers, memoising deterministic ones per chunk."""

    def __init__(self) -> None:
        self.memo: dict[tuple[int, Any], tuple[str, str, list[str]]] = {}
        self.calls = 0
        self.hits = 0

    def decide(self, slot: int, receiver: Receiver, message: Mapping[str, Any], key: bytes,
               *, deterministic: bool, fallback: str) -> tuple[tuple[str, str, list[str]],
                                                              int, int]:
        memo_key: Any = None
        if deterministic:
            project = getattr(receiver, "memo_key", None)
            memo_key = (slot, project(message) if callable(project) else key)
            found = self.memo.get(memo_key)
            if found is not None:
                self.hits += 1
                return found, 0, 1
        started = time.perf_counter_ns()
        try:
            decision = receiver.receive(message)
            outcome = (
                str(decision.action) if decision.action is not None else fallback,
                decision.verdict.value,
                [r.code for r in decision.reasons],
            )
        except Exception as exc:  # a receiver must not raise; record it as an error
            outcome = (fallback, "ERROR", [f"receiver-raised:{type(exc).__name__}"])
            deterministic = False
        latency = (time.perf_counter_ns() - started) // 1000
        self.calls += 1
        if deterministic:
            self.memo[memo_key] = outcome
        return outcome, int(latency), 0


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
    clash = sorted(_FORBIDDEN.intersection(content))
    if clash:
        raise UntrustedGovernance(f"encoder {strategy.name} content may not set "
                                  f"{', '.join(clash)}", json_path=f"$.{clash[0]}")
    message: dict[str, Any] = {}
    if strategy.receipts:
        message["contract"] = plan.contract.id
        message["id"] = receipt_id(plan.name, strategy.name, case_id)
    message.update(content)
    message.update(stamp)
    return message


def run_chunk(plan: Plan, index: int, start: int, cases: Sequence[Any],
              constants: Sequence[Mapping[str, Any] | None]) -> dict[str, Any]:
    """Run every strategy × perturbation on one chunk of cases; return its log record.

    Deterministic given its arguments (latencies aside), whatever the executor.
    """
    chunk = _Chunk(plan, constants)
    chunk.encode(cases)
    chunk.decide(start)
    return {
        "chunk": index,
        "start": start,
        "cases": chunk.case_rows,
        "rows": chunk.rows,
        "states": chunk.states,
        "calls": chunk.decider.calls,
        "hits": chunk.decider.hits,
    }


class _Chunk:
    """The work on one chunk: encode every case once, then decide every message."""

    def __init__(self, plan: Plan, constants: Sequence[Mapping[str, Any] | None]) -> None:
        self.plan = plan
        self.constants = constants
        self.contract = plan.contract
        self.checks = _checks_for(plan.contract)
        self.reference = _reference_for(plan.contract)
        self.decider = _Decider()
        slots: dict[int, int] = {}
        self.slots = [slots.setdefault(id(s.receiver), len(slots)) for s in plan.strategies]
        self.semantic_slot = len(slots)
        self.semantic_deterministic = bool(plan.semantic.deterministic)
        self.deterministic = [bool(s.receiver.deterministic) for s in plan.strategies]
        self.fail = str(plan.contract.fail_closed_action.value)
        self.case_rows: list[list[Any]] = []
        self.truths: list[dict[str, Any]] = []
        self.bases: list[list[_Base]] = []
        self.states: dict[str, dict[str, Any]] = {}
        self.rows: list[list[Any]] = []

    # (1) encode every case once per encoder, stamp governance once per authority.
    def encode(self, cases: Sequence[Any]) -> None:
        plan = self.plan
        for evidence in cases:
            truth = self.contract.view(plan.state_of(evidence))
            state_json = dumps({name: wire_value(value) for name, value in truth.items()})
            state_key = hashlib.sha256(state_json.encode("utf-8")).hexdigest()[:16]
            if plan.reference is not None:
                declared = plan.reference(evidence)
                ref = str(declared.value if hasattr(declared, "value") else declared)
            else:
                ref = self.reference(truth)
            case_id = str(plan.case_id_of(evidence))
            evidence_refs = tuple(plan.evidence_refs_of(evidence))
            stamps: dict[Authority, dict[str, Any]] = {}
            contents: dict[int, dict[str, Any]] = {}
            row: list[_Base] = []
            for strategy in plan.strategies:
                stamp = stamps.get(strategy.authority)
                if stamp is None:
                    stamp = stamps[strategy.authority] = plan.governance.stamp(
                        case_id=case_id, evidence_refs=evidence_refs,
                        authority=strategy.authority).to_json()
                content = contents.get(id(strategy.encoder))
                if content is None:
                    content = contents[id(strategy.encoder)] = strategy.encoder.encode(evidence)
                message = _compose(plan, strategy, content, stamp, case_id)
                key, size = _measure(message)
                row.append(_Base(
                    message, key, size, _tokens(plan, key, size),
                    self.checks.governance_valid(message),
                    self.checks.schema_valid(message) if strategy.receipts else None))
            self.bases.append(row)
            self.truths.append(truth)
            case_digest = digest(canonical_bytes(plan.case_json(evidence)))
            self.case_rows.append([case_id, case_digest, state_key, ref])
            if plan.analyse and state_key not in self.states:
                analysis = analyse_state(self.contract, state_key, truth,
                                         budget=plan.region_budget)
                self.states[state_key] = {**analysis, "example_case_id": case_id,
                                          "example": row[plan.subject].message}

    # (2) decide: every strategy unperturbed first, then under each perturbation.
    def decide(self, start: int) -> None:
        plan = self.plan
        count = len(self.bases)
        for j in range(count):
            for si in range(len(plan.strategies)):
                base = self.bases[j][si]
                self._rows(j, si, 0, Variant(base.message), base, ref=self.case_rows[j][3])
        for j in range(count):
            ctx = CaseContext(
                index=start + j, case_id=self.case_rows[j][0], truth=self.truths[j],
                reference=self.case_rows[j][3], contract=self.contract, decide=self.reference,
                neighbour=functools.partial(self._neighbour, (j - 1) % count, j),
                constant=self._constant)
            for si, strategy in enumerate(plan.strategies):
                base = self.bases[j][si]
                for pi, perturbation in enumerate(plan.perturbations, start=1):
                    if si not in plan.targets[pi - 1]:
                        continue
                    for variant in perturbation.variants(base.message, ctx, strategy.name):
                        measured = self._measure(variant, base, strategy)
                        self._rows(j, si, pi, variant, measured,
                                   ref=variant.reference or self.case_rows[j][3])

    def _neighbour(self, other: int, own: int, name: str) -> Mapping[str, Any] | None:
        if other == own:
            return None
        return self.bases[other][_strategy_index(self.plan, name)].message

    def _constant(self, name: str) -> Mapping[str, Any] | None:
        return self.constants[_strategy_index(self.plan, name)]

    def _measure(self, variant: Variant, base: _Base, strategy: Strategy) -> _Base:
        message = variant.message
        if message is base.message:
            return base
        touched = variant.touched
        patched = _patch(message, base, touched) if self.plan.tokenizer is None else None
        key, size = patched if patched is not None else _measure(message)
        if touched is not None and not touched & _GOVERNANCE:
            governance = base.governance
        else:
            governance = self.checks.governance_valid(message)
        schema: bool | None = None
        if strategy.receipts:
            schema = base.schema if touched is not None and not touched else \
                self.checks.schema_valid(message)
        return _Base(dict(message), key, size, _tokens(self.plan, key, size), governance,
                     schema)

    def _rows(self, j: int, si: int, pi: int, variant: Variant, measured: _Base, *,
              ref: str) -> None:
        plan = self.plan
        strategy = plan.strategies[si]
        message = measured.message
        schema = measured.schema
        if variant.full_validation and strategy.receipts:
            schema = self.checks.schema_valid(message)
        has_state = isinstance(message.get("decision_state"), Mapping)
        deterministic = self.deterministic[si]
        for epoch in range(1 if deterministic else plan.epochs):
            (action, verdict, reasons), latency, memo = self.decider.decide(
                self.slots[si], strategy.receiver, message, measured.key,
                deterministic=deterministic, fallback=self.fail)
            semantic: str | None = None
            determined: bool | None = None
            if has_state:
                (semantic, sem_verdict, _), _, _ = self.decider.decide(
                    self.semantic_slot, plan.semantic, message, measured.key,
                    deterministic=self.semantic_deterministic, fallback=self.fail)
                determined = sem_verdict == Verdict.ACCEPT.value
            self.rows.append([
                j, si, pi, variant.label, epoch, ref, action, verdict, semantic, determined,
                measured.size, measured.tokens, measured.governance, schema, latency, memo,
                variant.falsified,
                list(variant.falsehood) if variant.falsehood is not None else None,
                reasons,
            ])


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
                                           mp_context=multiprocessing.get_context("spawn"))
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
        run_log: where the JSON Lines run log goes (default: a temporary file that
            is removed afterwards).
        resume: continue the run log at ``run_log`` after its last complete chunk.
        progress: show a rich progress bar on stderr.
        created: timestamp recorded in the report (default: now).

    Raises:
        ExperimentError: bad arguments or an inconsistent experiment (before any work).
        RunLogError: resuming a log written by another experiment.
    """
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ExperimentError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise ExperimentError(f"workers must be a positive integer, got {workers!r}")
    if resume and run_log is None:
        raise ExperimentError("resume needs the run_log path of the interrupted run")
    plan = compile_plan(experiment)
    started = time.perf_counter()
    temporary: tempfile.TemporaryDirectory[str] | None = None
    if run_log is None:
        temporary = tempfile.TemporaryDirectory(prefix="handoffs-lab-")
        log_path = Path(temporary.name) / "run.jsonl"
    else:
        log_path = Path(run_log)
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
    try:
        log = RunLog.resume(log_path, header) if resume else RunLog.create(log_path, header)
        aggregator = Aggregator.for_experiment(experiment, plan)
        resumed = log.chunks
        if resumed:
            _, records = read_run_log(log_path)
            for record in records:
                if record.get("complete") is not True:
                    aggregator.feed(record)
        kind = "resumed"
        with log:
            if not log.complete:
                kind = _execute(experiment, plan, log, aggregator, executor=executor,
                                workers=workers, chunk_size=chunk_size, progress=progress)
        from handoffs.lab._report import build_report

        provenance = {
            "python": platform.python_version(),
            "platform": platform.platform(terse=True),
            "run_id": str(log.header.get("run_id")),
            "run_log": None if temporary is not None else str(log_path),
            "executor": kind,
            "workers": workers,
            "chunk_size": chunk_size,
            "resumed_chunks": resumed,
            "elapsed_seconds": time.perf_counter() - started,
        }
        minimal_extra = finish_minimal(experiment, plan, aggregator)
        report = build_report(experiment, plan, aggregator, provenance=provenance,
                              minimal_extra=minimal_extra, created=created)
    finally:
        if temporary is not None:
            temporary.cleanup()
    return LabRun(report=report, run_log=None if temporary is not None else log_path)


def _execute(experiment: Experiment, plan: Plan, log: RunLog, aggregator: Aggregator, *,
             executor: str | cf.Executor | None, workers: int | None, chunk_size: int,
             progress: bool) -> str:
    source = iter(experiment.cases)
    try:
        first = next(source)
    except StopIteration:
        raise ExperimentError("the case source yielded no cases", code="no-cases") from None
    constants = _constants(plan, first)
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
                   confirm: bool = True) -> dict[str, Any]:
    """Confirm each region's minimal message on the confirming receiver (one call per
    region; delta debugging when it does not confirm, or when the method is
    ``ddmin``), and check the search against exhaustive search on small contracts.
    """
    reference = _reference_for(plan.contract)
    method = experiment.minimal_method
    if method == "auto":
        method = "ddmin" if has_predicates(plan.contract.policy) else "region"
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
        hard=base.hard, name=name)
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
