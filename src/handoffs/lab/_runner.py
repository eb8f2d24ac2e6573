"""The streaming runner: cases in chunks, on any ``concurrent.futures.Executor``.

The main process reads the case source lazily, cuts it into chunks of
``chunk_size`` cases and submits each chunk (:func:`~handoffs.lab._chunk.run_chunk`)
to the executor (threads by default; local processes; a Dask cluster through
``distributed``'s ``Client.get_executor``). At most a few chunks are in flight, and
results are taken back *in stream order*, so the run log, the metrics and every
figure are the same on every executor and for any number of workers (receiver call
and memo-hit counts aside: the memo is run-wide in each process). Memory does not
grow with the number of cases: the metrics are aggregated chunk by chunk and the
decisions stream to the run log (if one is written).

Model receivers get their client wrapped for the run (call cache, budget; see
:mod:`handoffs.lab._cache`), and their calls a pool (:mod:`handoffs.lab._memo`).
The plan is in :mod:`handoffs.lab._plan`, the work on a chunk in
:mod:`handoffs.lab._chunk`.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import itertools
import os
import platform
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence, Sized
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import attrs

from handoffs._callables import qualified_name
from handoffs._errors import ExperimentError, HandoffsError, UserCodeError
from handoffs._time import format_time
from handoffs.contracts import LossMatrix
from handoffs.lab._cache import Budget, CallCache, LabClient, close_connections
from handoffs.lab._chunk import run_chunk
from handoffs.lab._controls import paired_chunks
from handoffs.lab._experiment import Experiment
from handoffs.lab._memo import _shared_for, keyed, memo_key, release_shared
from handoffs.lab._messages import sampled
from handoffs.lab._metrics import Aggregator
from handoffs.lab._minimal import exhaustive_minimum
from handoffs.lab._plan import Plan, _compose, _reference_for, compile_plan, fingerprint
from handoffs.lab._population import Population, population_of
from handoffs.lab._proofs import prove_plan, with_witnesses
from handoffs.lab._runlog import RunLog, RunLogError, read_run_log
from handoffs.lab._search import search_receiver
from handoffs.lab._usercode import case_id_of, encoded, evidence_refs_of
from handoffs.lab.perturbations import Falsehood
from handoffs.lab.perturbations._base import Scoring
from handoffs.receivers import Receiver
from handoffs.receivers.models import ModelReceiver

__all__ = ["EXECUTORS", "Executed", "LabRun", "Plan", "RunOptions", "RunPlan", "compile_plan",
           "execute", "plan_run", "report_run", "rescore", "run", "run_chunk"]


EXECUTORS: Final = ("threads", "processes", "dask")
"""Executor names the runner can create itself."""


@attrs.frozen
class LabRun:
    """The outcome of :func:`~handoffs.lab.run`: the report and where the run log lives."""

    report: dict[str, Any]
    run_log: Path | None

    @property
    def exit_code(self) -> int:
        """The release gate's exit code (0 pass, 1 fail)."""
        return int(self.report["gate"]["exit_code"])


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


def _positive(_: object, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                              or value < 1):
        raise ExperimentError(f"{attribute.name} must be a positive integer, got {value!r}")


def _optional_path(value: Path | str | None) -> Path | None:
    return None if value is None else Path(value)


@attrs.frozen(kw_only=True)
class RunOptions:
    """How :func:`~handoffs.lab.run` runs an experiment (every keyword of ``run``).

    Checked when made: a bad value raises :class:`ExperimentError` before any work.

    Attributes:
        executor: ``"threads"`` (default), ``"processes"`` (started with ``spawn``:
            a script needs an ``if __name__ == "__main__":`` guard), ``"dask"`` (a
            local cluster; needs the ``dask`` extra), or any
            ``concurrent.futures.Executor`` (e.g. from
            :func:`handoffs.lab.dask.dask_executor`), which the caller keeps
            ownership of. Process and Dask executors need a picklable experiment.
        workers: worker count for an executor the runner creates.
        chunk_size: cases per work unit (the figures do not depend on it; a run
            log is resumed with the chunk size it was written with).
        run_log: where the JSON Lines run log goes (default: none is written; the
            report is built from the decisions as they stream in).
        resume: continue the run log at ``run_log`` after its last complete chunk.
        progress: show a rich progress bar on stderr.
        created: timestamp recorded in the report (default: now).
        cache: the call cache of model receivers (a ``CallCache`` or its SQLite
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
        projection: trust users' declarations of what a receiver reads
            (:attr:`~handoffs.receivers.FunctionReceiver.reads`) for its memo key, and
            check them: a sample of memo hits is decided again without the memo, and
            one that differs stops the run (``ProjectionError``, naming the receiver
            and the members the declaration left out). By default such a receiver is
            memoised on the whole canonical message, whatever it declares.
    """

    executor: str | cf.Executor | None = None
    workers: int | None = attrs.field(default=None, validator=_positive)
    chunk_size: int = 256
    run_log: Path | None = attrs.field(default=None, converter=_optional_path)
    resume: bool = False
    progress: bool = False
    created: datetime | None = None
    cache: CallCache | Path | str | bool | None = None
    refresh: bool = False
    max_calls: int | None = attrs.field(default=None, validator=_positive)
    max_tokens: int | None = attrs.field(default=None, validator=_positive)
    concurrency: int | None = attrs.field(default=None, validator=_positive)
    projection: bool = attrs.field(default=False, converter=bool)

    def __attrs_post_init__(self) -> None:
        chunk_size = self.chunk_size
        if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
            raise ExperimentError(
                f"chunk_size must be a positive integer, got {chunk_size!r}")
        if self.resume and self.run_log is None:
            raise ExperimentError("resume needs the run_log path of the interrupted run")


def run(experiment: Experiment, options: RunOptions | None = None, /,
        **keywords: Any) -> LabRun:
    """Run an experiment and build its report, in three steps (``plan_run``:
    compile, prove and check before any work; ``execute``: the chunks, the
    population's draws, the minimal messages; ``report_run``).

    Args:
        experiment: the experiment.
        options: how to run it (:class:`RunOptions`), or none and ...
        **keywords: ... its fields as keywords
            (``run(experiment, chunk_size=64, run_log="run.jsonl")``), not both.

    Raises:
        ExperimentError: bad options or an inconsistent experiment (before any work).
        RunLogError: resuming a log written by another experiment.
    """
    if options is None:
        try:
            options = RunOptions(**keywords)
        except TypeError as exc:  # an unknown keyword
            raise ExperimentError(f"run: {exc}") from None
    elif keywords:
        raise ExperimentError("run takes a RunOptions or keywords, not both")
    elif not isinstance(options, RunOptions):
        raise ExperimentError(f"run's options must be a RunOptions, got {options!r}")
    return report_run(execute(plan_run(experiment, options)))


@attrs.frozen
class RunPlan:
    """What :func:`plan_run` decided before any case runs: the compiled plan with its
    proofs, the run log's header, the checked case stream, the call cache and budget.
    """

    experiment: Experiment
    options: RunOptions
    plan: Plan
    proofs: Any
    header: dict[str, Any]
    first: Any
    stream: Iterator[Any]
    tracker: Any
    calls: CallCache | None
    budget: Budget


def plan_run(experiment: Experiment, options: RunOptions) -> RunPlan:
    """Compile and check everything a run needs, before any work or file is touched:
    the plan and its proofs, the header that names the run, the case source (it
    yields a case; every injected falsehood names one of its cases).
    """
    plan = attrs.evolve(compile_plan(experiment), keep_rows=options.run_log is not None,
                        token=str(uuid.uuid4()), projection=options.projection)
    proofs = prove_plan(plan)
    experiment = with_witnesses(experiment, proofs)
    models = any(isinstance(r, ModelReceiver) for r in (
        *(s.receiver for s in plan.strategies), plan.semantic, experiment.confirming))
    calls = _call_cache(options.cache, options.run_log, refresh=options.refresh) \
        if models else None
    budget = Budget(run=plan.token, max_calls=options.max_calls,
                    max_tokens=options.max_tokens, cache=calls)
    header = {
        "run_id": f"urn:uuid:{uuid.uuid4()}",
        "experiment": experiment.name,
        "contract": plan.contract.id,
        "fingerprint": fingerprint(experiment, plan, chunk_size=options.chunk_size),
        "chunk_size": options.chunk_size,
        "created": format_time(options.created or datetime.now(UTC)),
        "strategies": [s.name for s in plan.strategies],
        "perturbations": list(plan.perturbation_ids),
        "epochs": plan.epochs,
    }
    # The case source is checked before the run log is opened: a run refused here
    # (no cases, an injection naming a case the source lacks) leaves any log as it was.
    first, stream = _cases(experiment, plan)
    tracker, stream = _coverage_tracker(experiment, stream)
    return RunPlan(experiment=experiment, options=options, plan=plan, proofs=proofs,
                   header=header, first=first, stream=stream, tracker=tracker,
                   calls=calls, budget=budget)


@attrs.frozen
class Executed:
    """What :func:`execute` measured: the aggregated decisions and what the report
    records of how they were made.
    """

    planned: RunPlan
    plan: Plan
    aggregator: Aggregator
    population: tuple[Aggregator, Population] | None
    minimal_extra: Any
    log_header: Mapping[str, Any]
    kind: str
    resumed: int
    undecided: Iterator[Any]
    elapsed: float


def execute(planned: RunPlan) -> Executed:
    """Open (or resume) the run log, wire model receivers for the run, decide every
    case in chunks on the executor, then the population's draws and the minimal
    messages' confirmation.
    """
    options, experiment = planned.options, planned.experiment
    started = time.perf_counter()
    log_path = options.run_log
    if log_path is None:
        log = RunLog.discarding(planned.header)
    else:
        log = RunLog.resume(log_path, planned.header) if options.resume \
            else RunLog.create(log_path, planned.header)
    # a run resumed from a complete log decides nothing; its cases still count for coverage
    undecided = planned.stream if log.complete else iter(())
    plan, confirming = _wired(planned.plan, experiment.confirming, planned.calls,
                              planned.budget, options.concurrency)
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
        with log:
            if not log.complete:
                kind = _execute(experiment, plan, log, aggregator, first=planned.first,
                                stream=planned.stream, executor=options.executor,
                                workers=options.workers, chunk_size=options.chunk_size,
                                progress=options.progress)
        drawn = population_of(experiment)
        population = None if drawn is None else _population(
            experiment, plan, drawn, planned.header, executor=options.executor,
            workers=options.workers, chunk_size=options.chunk_size)
        minimal_extra = finish_minimal(experiment, plan, aggregator, receiver=confirming)
    finally:
        _release(plan, confirming)
    return Executed(planned=planned, plan=plan, aggregator=aggregator,
                    population=population, minimal_extra=minimal_extra,
                    log_header=dict(log.header), kind=kind, resumed=resumed,
                    undecided=undecided, elapsed=time.perf_counter() - started)


def report_run(executed: Executed) -> LabRun:
    """The report of an executed run: figures, gate, provenance, cost and coverage."""
    from handoffs.lab._report import build_report

    planned = executed.planned
    options, experiment = planned.options, planned.experiment
    provenance = {
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "run_id": str(executed.log_header.get("run_id")),
        "run_log": None if options.run_log is None else str(options.run_log),
        "executor": executed.kind,
        "workers": options.workers,
        "chunk_size": options.chunk_size,
        "resumed_chunks": executed.resumed,
        "elapsed_seconds": executed.elapsed,
    }
    calls = planned.calls
    cost = {
        "cache": None if calls is None else {"path": str(calls.path),
                                            "refresh": bool(options.refresh)},
        "budget": {"max_calls": options.max_calls, "max_tokens": options.max_tokens},
        "concurrency": executed.plan.concurrency if executed.plan.prefetch else None,
    }
    coverage = _coverage_section(experiment, planned.tracker, executed.undecided)
    report = build_report(experiment, executed.plan, executed.aggregator,
                          provenance=provenance, minimal_extra=executed.minimal_extra,
                          created=options.created, cost=cost, coverage=coverage,
                          proofs=planned.proofs, population=executed.population)
    return LabRun(report=report, run_log=options.run_log)


def _population(experiment: Experiment, plan: Plan, population: Population,
                header: Mapping[str, Any], *, executor: str | cf.Executor | None,
                workers: int | None, chunk_size: int) -> tuple[Aggregator, Population]:
    """The plan run over the population's independent draws (no run log: the draws
    are a function of the population's seed), for the rows' population figures.
    """
    drawn = attrs.evolve(plan, keep_rows=False, analyse=False, token=str(uuid.uuid4()))
    cases = population.cases(plan.contract)
    aggregator = Aggregator.for_experiment(experiment, drawn)
    stream = iter(cases)
    first = next(stream)
    try:
        with RunLog.discarding(dict(header)) as log:
            _execute(attrs.evolve(experiment, cases=cases), drawn, log, aggregator,
                     first=first, stream=itertools.chain([first], stream),
                     executor=executor, workers=workers, chunk_size=chunk_size,
                     progress=False)
    finally:
        release_shared(drawn.token)
    return aggregator, population


def _coverage_tracker(experiment: Experiment, stream: Iterator[Any]
                      ) -> tuple[Any, Iterator[Any]]:
    """A tracker of the cases' coverage of the policy's geometry and the stream that
    feeds it, or ``None`` and the stream as it was when the analysis cannot run (z3
    missing: the report says so).
    """
    from handoffs.contracts.analysis import geometry

    tracker = geometry(experiment.contract).tracker()
    if tracker is None:
        return None, stream
    return tracker, _tracked(stream, tracker, experiment.state_of, experiment.contract)


def _tracked(stream: Iterator[Any], tracker: Any, state_of: Any,
             contract: Any) -> Iterator[Any]:
    for case in stream:
        try:
            view = contract.view(state_of(case))
        except (HandoffsError, AttributeError, KeyError, TypeError, ValueError):
            view = None  # the chunk reports the bad case; it covers nothing
        if view is not None:
            tracker.feed(view)
        yield case


def _coverage_section(experiment: Experiment, tracker: Any,
                      undecided: Iterator[Any]) -> dict[str, Any]:
    """The report's ``coverage``: regions and boundaries the cases cover, or why not;
    ``undecided`` are cases the run did not read (they pass the tracker all the same).
    """
    from handoffs.contracts.analysis import geometry

    found = geometry(experiment.contract)
    if tracker is None or found.analysis is None:
        return {"available": False, "line": f"coverage not measured: {found.reason}"}
    for _ in undecided:
        pass
    return dict(tracker.result().to_json())


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
            client = LabClient(inner=receiver.client,
                               fingerprint=receiver.fingerprint(),
                               receiver=receiver.name, cache=cache,
                               budget=budget if budget.limited else None)
            found = wrapped[id(receiver)] = attrs.evolve(receiver, client=client)
        return found

    strategies = tuple(attrs.evolve(s, receiver=wire(s.receiver)) if
                       isinstance(s.receiver, ModelReceiver) else s for s in plan.strategies)
    slow = [s.receiver for s in strategies
            if isinstance(getattr(s.receiver, "max_in_flight", None), int)]
    prefetch = any(r.deterministic or sampled(r) for r in slow)
    width = concurrency or max([int(getattr(r, "max_in_flight", 8)) for r in slow], default=8)
    return (attrs.evolve(plan, strategies=strategies, semantic=wire(plan.semantic),
                         prefetch=prefetch, concurrency=width), wire(confirming))


def _cases(experiment: Experiment, plan: Plan) -> tuple[Any, Iterator[Any]]:
    """The first case and the stream of all cases, once the source has been checked
    (it yields a case; every injected falsehood names one of its cases).
    """
    source = iter(experiment.cases)
    try:
        first = next(source)
    except StopIteration:
        raise ExperimentError("the case source yielded no cases", code="no-cases") from None
    except Exception as exc:
        raise _source_error(experiment.cases, 0, exc) from exc
    return first, _guarded(experiment.cases, _check_injected_cases(
        plan, experiment.cases, itertools.chain([first], source), source), start=1)


def _source_error(cases: Any, read: int, exc: Exception) -> Exception:
    """A case source that raised, named with how far it got (the library's own
    errors, such as a bad line of a JSON Lines file, already say where).
    """
    if isinstance(exc, HandoffsError):
        return exc
    name = getattr(cases, "description", None) or qualified_name(cases)
    return UserCodeError(role="case source", callable_name=str(name), case_id=None,
                         error=exc, at=f"while reading case {read + 1}")


def _guarded(cases: Any, stream: Iterator[Any], *, start: int) -> Iterator[Any]:
    """``stream``, with a failure of the case source named (:class:`UserCodeError`)."""
    read = start - 1
    try:
        for case in stream:
            read += 1
            yield case
    except Exception as exc:
        raise _source_error(cases, read, exc) from exc


def _execute(experiment: Experiment, plan: Plan, log: RunLog, aggregator: Aggregator, *,
             first: Any, stream: Iterator[Any], executor: str | cf.Executor | None,
             workers: int | None, chunk_size: int, progress: bool) -> str:
    constants = _constants(plan, first)
    if plan.prefetch:
        _warm(plan, constants)
    # the shuffled control's pairing is the stream's, decided here whatever the chunks
    chunks = paired_chunks(stream, chunk_size, seed=experiment.seed)
    skipped = sum(len(done) for done, _ in itertools.islice(chunks, log.chunks))
    if skipped != log.cases:
        raise ExperimentError(f"the case source has {skipped} cases but the run log already "
                              f"covers {log.cases}", code="run-log-mismatch")
    total = len(experiment.cases) if isinstance(experiment.cases, Sized) else None
    bar = _progress(progress, total)
    if bar is not None and log.cases:
        bar.update(bar.task_ids[0], completed=log.cases)
    pool, close, kind = _executor(executor, workers)
    # Chunks in flight: on the runner's own threads one at a time, unless slow
    # receivers' scheduling passes should run ahead. The interpreter runs one chunk's
    # work at a time whatever the window, and each chunk in flight holds its cases:
    # more add memory (+12% peak RSS from 280 to 2,800 cases in benchmarks/lab.py with
    # many, +4% with two), and two threads deciding at once contend for the
    # interpreter lock (3-5% more process CPU than one: the engine of
    # benchmarks/lab.py on 2,800 cases, both windows alternated in one process).
    # Processes and clusters get two per worker.
    window = 1 if kind == "threads" and not plan.prefetch \
        else max(2, 2 * (workers or os.cpu_count() or 1))
    pending: collections.deque[cf.Future[dict[str, Any]]] = collections.deque()
    index, start = log.chunks, log.cases

    def collect(future: cf.Future[dict[str, Any]]) -> None:
        record = future.result()
        log.append(record)
        aggregator.feed(record)
        if bar is not None:
            bar.update(bar.task_ids[0], advance=len(record["cases"]))

    shared = _shared_for(plan)
    try:
        for chunk, partners in chunks:
            shared.expect(index)  # its scheduling pass takes its turn in stream order
            pending.append(pool.submit(run_chunk, plan, index, start, chunk, constants,
                                       partners=partners))
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
        shared.abandon()
        raise
    finally:
        close()
        if bar is not None:
            bar.stop()
    return kind


def _check_injected_cases(plan: Plan, cases: Any, stream: Iterator[Any],
                          source: Iterator[Any]) -> Iterator[Any]:
    """Refuse, before any case runs, an injection that names a case the source does
    not yield; return the stream to run.

    A re-iterable source is read once more for its case ids (stopping when every
    named case is found); a one-shot iterator is read ahead instead, and the cases
    read are run from memory. A source that fails while it is read is not judged
    here: the run meets the same failure where it occurs (after the chunks before it,
    so that the run log can be resumed).
    """
    wanted = set(plan.injection_cases)
    if not wanted:
        return stream
    fresh = iter(cases)
    one_shot = fresh is source
    scan: Iterator[Any] = stream if one_shot else fresh
    ahead: list[Any] = []
    failure: Exception | None = None
    try:
        for case in scan:
            if one_shot:
                ahead.append(case)
            wanted.discard(case_id_of(plan.case_id_of, case))
            if not wanted:
                break
    except Exception as exc:  # the user's source may raise anything; the run re-meets it
        failure = exc
    finally:
        if not one_shot:
            close = getattr(fresh, "close", None)
            if callable(close):
                close()
    if failure is not None:
        return _then_raise(ahead, failure) if one_shot else stream
    if wanted:
        named = [p.id for p in plan.perturbations
                 if isinstance(p, Falsehood) and p.case_id in wanted]
        description = getattr(cases, "description", type(cases).__name__)
        raise ExperimentError(f"injection {named[0]} names case {sorted(wanted)[0]!r}, which "
                              f"the case source ({description}) does not yield",
                              code="unknown-case")
    return itertools.chain(ahead, source) if one_shot else stream


def _then_raise(cases: list[Any], failure: Exception) -> Iterator[Any]:
    """The cases read ahead of a one-shot source, then the failure that stopped it."""
    yield from cases
    raise failure


def _warm(plan: Plan, constants: Sequence[Mapping[str, Any] | None]) -> None:
    """Build the receivers' memo projections (compiled validators and the like) once,
    here, rather than while the first calls of slow receivers wait for them.
    """
    for strategy, message in zip(plan.strategies, constants, strict=True):
        if message is not None and keyed(strategy.receiver, projection=plan.projection):
            memo_key(strategy.receiver, message, projection=plan.projection)


def _constants(plan: Plan, first: Any) -> list[Mapping[str, Any] | None]:
    constants: list[Mapping[str, Any] | None] = []
    case_id = case_id_of(plan.case_id_of, first)
    refs = evidence_refs_of(plan.evidence_refs_of, first, case_id)
    for strategy in plan.strategies:
        stamp = plan.governance.stamp(case_id=case_id, evidence_refs=refs,
                                      authority=strategy.authority).to_json()
        constants.append(_compose(plan, strategy, encoded(strategy, first, case_id), stamp,
                                  case_id))
    return constants


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
        method = "ddmin" if plan.contract.policy.has_predicates() else "region"
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
            region["search"] = None
        region["duality_holds"] = set(region["trigger_fields"]) == set(region["fields"])
        region["certificate"] = _certificate(plan.contract, region)
        if exhaustive:
            truth = {spec.name: spec.read(truth_wire[spec.name])
                     for spec in plan.contract.fields}
            size, sets = exhaustive_minimum(reference, truth)
            checked += 1
            if len(region["fields"]) != size or tuple(region["fields"]) not in sets:
                exhaustive_ok = False
    methods = {r["certificate"]["method"] for r in aggregator.regions()}
    return {
        "method": method,
        "certification": "sampled" if "sampled" in methods else "unknown"
        if "unknown" in methods else "certified",
        "opaque_conditions": plan.contract.policy.opaque_conditions(),
        "confirming_receiver": str(getattr(receiver, "name", type(receiver).__name__)),
        "receiver_calls": calls,
        "exhaustive_check": {
            "performed": bool(checked),
            "agrees": exhaustive_ok if checked else None,
            "states_checked": checked,
        },
    }


def _certificate(contract: Any, region: Mapping[str, Any]) -> dict[str, Any]:
    """The policy analysis's check of a region's minimal message and trigger fields at
    its example state (see ``Geometry.certify_message`` in ``handoffs.contracts.analysis``).
    """
    from handoffs.contracts.analysis import geometry

    truth = {spec.name: spec.read(region["truth"][spec.name])
             for spec in contract.fields}
    return geometry(contract).certify_message(truth, region["fields"],
                                              region["trigger_fields"])


def _confirm_region(region: dict[str, Any], experiment: Experiment, plan: Plan,
                    receiver: Receiver, method: str) -> int:
    """Confirm (or, for ``ddmin``, search) one region on ``receiver`` within the
    per-search budget; return the receiver calls spent. A search that stopped early
    confirms nothing, and under ``ddmin`` claims no minimal message: every field stays
    (``guarantee`` ``unfinished``); ``region["search"]`` says why it stopped.
    """
    names = [s.name for s in plan.contract.fields]
    search = search_receiver(receiver, region["example"], region["action"], names,
                             method=method, fields=region["fields"],
                             max_calls=experiment.minimal_max_calls,
                             max_tokens=experiment.minimal_max_tokens)
    region["search"] = search.to_json()
    region["confirmed"] = search.confirmed
    region["receiver_calls"] = search.calls
    found = None if search.fields is None else list(search.fields)
    if method == "ddmin":
        region["fields"] = found if found is not None else list(names)
        region["message"] = [{"field": n, "representation": "exact",
                              "value": region["truth"][n]} for n in region["fields"]]
        region["guarantee"] = "1-minimal" if search.finished else "unfinished"
        region["receiver_fields"] = found
    else:
        region["receiver_fields"] = None if search.confirmed else found
    return search.calls


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
        loss: the new loss matrix (a :class:`~handoffs.contracts.LossMatrix`, or entries keyed by
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
