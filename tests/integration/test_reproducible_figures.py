"""Reproducible figures (issue 31, item 8): one experiment and seed give the same
``report.json`` on threads, worker processes and a real Dask ``LocalCluster`` (threads
and processes), whatever the chunk size and the worker count.

The experiment is the triage contract of the population tests over generated cases, with
drawn population figures, the three falsifying controls, a falsehood generator, a
widened interval and a removed override flag. The shuffled control's windows are cut to
13 cases here (the pairing is decided in the main process, so the patch reaches every
executor), so that the pairing spans several windows, a lone last case joins its window,
and chunks carry partners that other chunks hold, on every executor.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Final

import pytest

from handoffs.lab import GeneratedCases, run
from handoffs.lab._population import Population
from handoffs.lab.perturbations._registry import perturbation_from_json
from triage_lab import TRIAGE, triage_experiment

CREATED: Final = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
WINDOW: Final = 13
# What depends on the run, not on the cases: wall-clock latency, and how many decisions
# the run-wide memo of each worker process saved.
VOLATILE: Final = frozenset({"mean_latency_ms", "receiver_calls", "memo_hits"})


def experiment() -> Any:
    perturbations = tuple(perturbation_from_json(d, contract=TRIAGE) for d in (
        {"kind": "no-message"}, {"kind": "shuffled-message"}, {"kind": "constant-message"},
        {"kind": "widen-interval", "field": "sepsis_risk", "width": 0.2},
        {"kind": "remove-decision-field", "field": "airway_compromised"},
        {"kind": "mutate"},
    ))
    return triage_experiment(cases=GeneratedCases(TRIAGE, 30, seed=5), seed=5,
                             population=Population(draws=40, seed=5),
                             perturbations=perturbations)


def figures(report: dict[str, Any]) -> dict[str, Any]:
    """The report without its provenance block and the run's own counts and timings."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    # through JSON, as report.json is written: the comparison is of what a reader gets
    return strip({k: v for k, v in json.loads(json.dumps(report)).items()
                  if k != "provenance"})


@pytest.fixture(scope="module")
def windows() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("handoffs.lab._controls.SHUFFLE_WINDOW", WINDOW)
        yield


@pytest.fixture(scope="module")
def reference(windows: None) -> dict[str, Any]:
    return run(experiment(), chunk_size=256, created=CREATED).report


def _rows(report: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["strategy"], r["perturbation"]): r for r in report["results"]}


def test_the_reference_run_has_every_row_the_comparison_needs(
        reference: dict[str, Any]) -> None:
    rows = _rows(reference)
    shuffled = rows[("receipt", "shuffled-message")]
    # every case is shuffled (30 cases in windows of 13, 13 and 4), population included
    assert shuffled["cases"] == shuffled["decisions"] == 30
    assert shuffled["population"]["draws"] == 40
    assert reference["experiment"]["population"]["source"] == "drawn"
    assert reference["falsehoods"]["generated"] > 0
    assert reference["failures"]["cases"]


@pytest.mark.parametrize(("chunk_size", "workers"), [(1, 1), (7, 4)])
def test_threads(reference: dict[str, Any], chunk_size: int, workers: int) -> None:
    report = run(experiment(), chunk_size=chunk_size, workers=workers,
                 created=CREATED).report
    assert figures(report) == figures(reference)


def test_processes(reference: dict[str, Any]) -> None:
    report = run(experiment(), executor="processes", workers=2, chunk_size=5,
                 created=CREATED).report
    assert report["provenance"]["executor"] == "processes"
    assert figures(report) == figures(reference)


@pytest.mark.parametrize(("processes", "chunk_size"), [(False, 3), (True, 16)])
def test_dask_local_cluster(reference: dict[str, Any], processes: bool,
                            chunk_size: int) -> None:
    pytest.importorskip("distributed")
    from handoffs.lab.dask import dask_executor

    with dask_executor(n_workers=2, processes=processes) as executor:
        report = run(experiment(), executor=executor, chunk_size=chunk_size,
                     created=CREATED).report
    assert report["provenance"]["executor"] == "ClientExecutor"
    assert figures(report) == figures(reference)
