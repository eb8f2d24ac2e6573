"""The runner: identical results on every executor, memoisation, epochs, streaming,
and resuming an interrupted run from its run log.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import pytest

from handoffs.errors import UserCodeError
from handoffs.examples.payment import synthetic_cases
from handoffs.examples.payment_lab import payment_experiment
from handoffs.lab import ExperimentError, IterableCases, RunOptions, Strategy, rescore, run
from handoffs.lab._reference import ReferenceReceiver
from handoffs.lab._runlog import COLUMNS, RunLogError, read_run_log
from handoffs.lab.perturbations._controls import ConstantMessage, NoMessage
from handoffs.receivers import Decision
from inline_executor import Inline
from worlds.lab_runs import CREATED, essay, normalise, threaded_report


@pytest.fixture(scope="module")
def threaded() -> dict[str, Any]:
    return threaded_report()


def test_any_executor_and_any_worker_count(threaded: dict[str, Any]) -> None:
    inline = run(essay(), executor=Inline(), chunk_size=7, created=CREATED).report
    assert inline["provenance"]["executor"] == "Inline"
    assert normalise(inline) == normalise(threaded)
    many = run(essay(), workers=4, chunk_size=7, created=CREATED).report
    assert normalise(many) == normalise(threaded)


def test_chunk_size_does_not_change_the_figures(threaded: dict[str, Any]) -> None:
    one = run(essay(), chunk_size=1000, created=CREATED).report
    for key in ("strategy_results", "decision_field_ablation", "governance_field_ablation",
                "error_injection"):
        assert one[key] == threaded[key]


def test_run_log_format(tmp_path: Path, threaded: dict[str, Any]) -> None:
    path = tmp_path / "run.jsonl"
    report = run(essay(), chunk_size=7, run_log=path, created=CREATED).report
    header, records = read_run_log(path)
    assert header["format"] == "handoffs-lab-runlog/1"
    assert header["columns"] == list(COLUMNS)
    assert header["perturbations"][0] == "none"
    lines = list(records)
    assert [r["chunk"] for r in lines[:-1]] == [0, 1, 2, 3]
    assert lines[-1]["complete"] is True
    assert lines[-1]["case_set_digest"] == report["experiment"]["case_set_digest"]
    assert report["provenance"]["run_log"] == str(path)
    assert normalise(report) == normalise(threaded)


class Boom(Exception):
    pass


def _cases(fail_after: int | None) -> Callable[[], Iterator[Any]]:
    def factory() -> Iterator[Any]:
        for i, case in enumerate(synthetic_cases()):
            if fail_after is not None and i == fail_after:
                raise Boom
            yield case

    return factory


def test_resume_after_an_interrupted_run(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "run.jsonl"
    # Chunks are handed out once the shuffled control's window of their cases is read:
    # windows of 14 cases, so that the two chunks of the first are done when case 20
    # fails (and the uninterrupted run to compare with pairs its cases alike).
    monkeypatch.setattr("handoffs.lab._controls.SHUFFLE_WINDOW", 14)
    threaded = run(essay(), chunk_size=7, created=CREATED).report
    # Case 20 is past policy-01 (case 16), the case the essay's injection names, which
    # the runner's check of injection case ids reads up to before any chunk runs.
    broken = essay(cases=IterableCases(_cases(20), description="payment-28"))
    with pytest.raises(UserCodeError, match="Boom"):
        run(broken, executor=Inline(), chunk_size=7, run_log=path)
    _, records = read_run_log(path)
    assert [r["chunk"] for r in records] == [0, 1]
    with path.open("ab") as handle:
        handle.write(b'{"chunk": 2, "torn')  # an interrupted write
    healthy = essay(cases=IterableCases(_cases(None), description="payment-28"))
    report = run(healthy, chunk_size=7, run_log=path, resume=True, created=CREATED).report
    assert report["provenance"]["resumed_chunks"] == 2
    assert normalise(report) == normalise(threaded)
    again = run(healthy, chunk_size=7, run_log=path, resume=True, created=CREATED).report
    assert again["provenance"]["executor"] == "resumed"
    # a run resumed from a complete log decides nothing, and its cases still count for
    # coverage: the report is the uninterrupted run's
    assert threaded["coverage"]["available"] is True
    assert normalise(again) == normalise(threaded)


def test_resume_refuses_another_experiment(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    run(essay(), chunk_size=7, run_log=path)
    with pytest.raises(RunLogError, match="fingerprint"):
        run(essay(perturbations=()), chunk_size=7, run_log=path, resume=True)
    with pytest.raises(RunLogError, match="written with another"):
        run(essay(), chunk_size=14, run_log=path, resume=True)


@attrs.define
class Counting:
    """A receiver that counts its calls (thread-safe)."""

    inner: Any
    deterministic: bool
    name: str = "counting"
    calls: int = 0
    lock: threading.Lock = attrs.field(factory=threading.Lock)

    def receive(self, message: Any) -> Decision:
        with self.lock:
            self.calls += 1
        return self.inner.receive(message)  # type: ignore[no-any-return]


def _counting_experiment(*, deterministic: bool, epochs: int = 1) -> tuple[Any, Counting]:
    base = payment_experiment(profile="essay")
    receiver = Counting(ReferenceReceiver(base.contract, defaults=False), deterministic)
    subject = base.strategies[1]
    strategy = Strategy(name="counted", encoder=subject.encoder, receiver=receiver)
    experiment = attrs.evolve(base, strategies=(strategy,), subject="counted",
                              perturbations=(NoMessage(), ConstantMessage()), injections=(),
                              epochs=epochs)
    return experiment, receiver


def test_deterministic_receivers_are_memoised_on_the_canonical_message() -> None:
    experiment, receiver = _counting_experiment(deterministic=True)
    report = run(experiment, chunk_size=28).report
    # 28 distinct messages, one empty message for every case, and the constant
    # message is the first case's: already decided.
    assert receiver.calls == 28 + 1
    rows = {r["perturbation"]: r for r in report["results"]}
    assert (rows["none"]["receiver_calls"], rows["none"]["memo_hits"]) == (28, 0)
    assert (rows["no-message"]["receiver_calls"], rows["no-message"]["memo_hits"]) == (1, 27)
    assert rows["constant-message"]["memo_hits"] == 28


def test_sampled_receivers_repeat_per_epoch() -> None:
    experiment, receiver = _counting_experiment(deterministic=False, epochs=3)
    report = run(experiment, chunk_size=28).report
    assert receiver.calls == 3 * 3 * 28
    rows = {r["perturbation"]: r for r in report["results"]}
    assert rows["none"]["decisions"] == 84
    assert rows["none"]["cases"] == 28
    assert rows["none"]["memo_hits"] == 0


@attrs.frozen
class Raising:
    name: str = "raising"
    deterministic: bool = True

    def receive(self, message: Any) -> Decision:
        raise RuntimeError("receiver bug")


def test_a_raising_receiver_is_an_error_row_and_fails_the_gate() -> None:
    base = payment_experiment(profile="essay")
    strategy = attrs.evolve(base.strategies[1], receiver=Raising())
    experiment = attrs.evolve(base, strategies=(strategy,), perturbations=(), injections=())
    report = run(experiment).report
    [row] = report["results"]
    assert row["receiver_errors"] == 28
    assert row["agreement"] == 12 / 28  # errors fail closed (ESCALATE)
    assert report["gate"]["exit_code"] == 1
    assert any("receiver error" in reason for reason in report["gate"]["reasons"])


def test_cases_stream_in_bounded_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                       ) -> None:
    path = tmp_path / "run.jsonl"
    chunk = 7
    window = 2
    # the runner also reads one window of the shuffled control ahead (and two cases)
    shuffle = 10
    monkeypatch.setattr("handoffs.lab._controls.SHUFFLE_WINDOW", shuffle)

    def watched() -> Iterator[Any]:
        for i, case in enumerate(synthetic_cases(20)):
            if path.exists():
                written = path.read_bytes().count(b"\n") - 1
                assert i <= (written + window + 1) * chunk + shuffle + 2, \
                    "the runner read too far ahead"
            yield case

    # No injection: checking an injection's case id reads a re-iterable source once
    # more, up to that case, before any chunk runs (a separate pass that keeps nothing).
    experiment = essay(cases=IterableCases(watched, description="watched"), injections=())
    report = run(experiment, executor=Inline(), workers=1, chunk_size=chunk,
                 run_log=path).report
    assert report["experiment"]["cases"] == 140


def test_the_runners_threads_decide_one_chunk_at_a_time(
        threaded: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # No slow receiver: two chunks deciding at once would only contend for the
    # interpreter (and hold two chunks' cases).
    import handoffs.lab._runner as runner

    deciding, most = [0], [0]
    lock = threading.Lock()
    chunk = runner.run_chunk

    def watched(*args: Any, **kwargs: Any) -> dict[str, Any]:
        with lock:
            deciding[0] += 1
            most[0] = max(most[0], deciding[0])
        try:
            return chunk(*args, **kwargs)
        finally:
            with lock:
                deciding[0] -= 1

    monkeypatch.setattr(runner, "run_chunk", watched)
    report = run(essay(), workers=4, chunk_size=7, created=CREATED).report
    assert normalise(report) == normalise(threaded)
    assert most[0] == 1


def test_bad_arguments_are_refused_before_any_work() -> None:
    with pytest.raises(ExperimentError, match="chunk_size"):
        run(essay(), chunk_size=0)
    with pytest.raises(ExperimentError, match="workers"):
        run(essay(), workers=0)
    with pytest.raises(ExperimentError, match="resume needs"):
        run(essay(), resume=True)
    with pytest.raises(ExperimentError, match="unknown executor"):
        run(essay(), executor="fibers")
    with pytest.raises(ExperimentError, match="no cases"):
        run(essay(cases=IterableCases(list, description="none")))
    with pytest.raises(ExperimentError, match="unexpected keyword"):
        run(essay(), chunks=3)


def test_run_takes_its_options_whole_or_as_keywords(tmp_path: Path) -> None:
    """``run(e, RunOptions(...))`` is ``run(e, ...)``: the options are checked when made
    (not when a run starts), and a run given both is refused.
    """
    with pytest.raises(ExperimentError, match="max_calls must be a positive integer"):
        RunOptions(max_calls=0)
    with pytest.raises(ExperimentError, match="not both"):
        run(essay(), RunOptions(), chunk_size=4)
    created = datetime(2026, 1, 1, tzinfo=UTC)
    whole = run(essay(), RunOptions(executor=Inline(), chunk_size=8, created=created,
                                    run_log=str(tmp_path / "a.jsonl"))).report
    keywords = run(essay(), executor=Inline(), chunk_size=8, created=created,
                   run_log=tmp_path / "b.jsonl").report
    assert whole["provenance"]["run_log"] == str(tmp_path / "a.jsonl")
    assert whole["provenance"]["chunk_size"] == keywords["provenance"]["chunk_size"] == 8
    assert whole["strategy_results"] == keywords["strategy_results"]


# ------------------------------------------------------------------ fast paths


def test_receipt_ids_are_uuid5_in_the_runner_namespace() -> None:
    import uuid

    from handoffs.lab._plan import _RECEIPT_NAMESPACE, receipt_id

    for name in ("payment-release-essay/decision_contract/policy-01", "x/y/é", "a/b/"):
        experiment, strategy, case_id = name.split("/")
        assert receipt_id(experiment, strategy, case_id) == \
            f"urn:uuid:{uuid.uuid5(_RECEIPT_NAMESPACE, name)}"


def test_compact_records_feed_the_metrics_as_their_rows_do() -> None:
    from handoffs.lab._chunk import run_chunk
    from handoffs.lab._controls import paired_chunks
    from handoffs.lab._metrics import Aggregator
    from handoffs.lab._plan import compile_plan
    from handoffs.lab._runlog import expand_rows
    from handoffs.lab._runner import _constants

    experiment = payment_experiment(variants=3, profile="full")
    plan = compile_plan(experiment)
    cases = list(experiment.cases)
    [(chunk, partners)] = paired_chunks(cases, len(cases), seed=experiment.seed)
    record = run_chunk(plan, 0, 0, chunk, _constants(plan, cases[0]), partners=partners)
    compact, expanded = (Aggregator.for_experiment(experiment, plan) for _ in range(2))
    compact.feed(record)
    expanded.feed({k: v for k, v in record.items() if k not in ("templates", "stats")}
                  | {"rows": expand_rows(record)})
    rows = [{"id": p.id, "kind": p.kind, "target": p.target} for p in plan.perturbations]
    described = [{"id": "none", "kind": "baseline", "target": None}, *rows]
    assert compact.results(described) == expanded.results(described)
    assert compact.falsehoods(0) == expanded.falsehoods(0)
    assert compact.injections() == expanded.injections()
    assert len(expand_rows(record)) == sum(s[0] for s in record["stats"])


def test_the_run_log_holds_one_row_per_decision(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    report = run(essay(), chunk_size=10, run_log=path, created=CREATED).report
    _, records = read_run_log(path)
    decisions = sum(len(r["rows"]) for r in records if "rows" in r)
    assert decisions == sum(row["decisions"] for row in report["results"])
    rescored = rescore(essay(), path, loss=essay().contract.loss, name="same")
    for key in ("strategy_results", "decision_field_ablation", "governance_field_ablation"):
        assert rescored[key] == report[key]


@attrs.frozen
class Opaque:
    """A receiver without memo_key: memoised on the whole canonical message only."""

    inner: Any
    name: str = "opaque"

    @property
    def deterministic(self) -> bool:
        return bool(self.inner.deterministic)

    def receive(self, message: Any) -> Decision:
        return self.inner.receive(message)  # type: ignore[no-any-return]


def test_memo_keys_change_how_often_receivers_are_called_never_the_figures() -> None:
    base = payment_experiment(variants=2, profile="full")
    opaque = attrs.evolve(
        base, strategies=tuple(attrs.evolve(s, receiver=Opaque(s.receiver))
                               for s in base.strategies),
        semantic_receiver=Opaque(ReferenceReceiver(base.contract)))
    fast = run(base, chunk_size=14, created=CREATED).report
    slow = run(opaque, chunk_size=14, created=CREATED).report
    for key in ("strategy_results", "decision_field_ablation", "governance_field_ablation",
                "error_injection", "falsehoods", "counterfactual_triggers"):
        assert fast[key] == slow[key], key
    # an opaque wrapper hides that the receiver decides by the policy: its rows are
    # sampled, not proved (issue #33); the figures are the same
    # What an opaque receiver reads is unknown, so every row whose message changed
    # exercises it (issue #31): whether a row is exercised is not a figure.
    ignore = {"receiver_calls", "memo_hits", "mean_latency_ms", "verdict", "verdict_reason",
              "witness", "exercised", "exercised_cases", "exercised_reason"}
    assert [{k: v for k, v in r.items() if k not in ignore} for r in fast["results"]] == \
        [{k: v for k, v in r.items() if k not in ignore} for r in slow["results"]]
    assert fast["provenance"]["receiver_calls"] < slow["provenance"]["receiver_calls"]
