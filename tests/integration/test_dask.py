"""The built-in payment experiment on a real Dask cluster gives the threaded run's report."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

distributed = pytest.importorskip("distributed")

from handoffs.examples.payment_lab import payment_experiment  # noqa: E402
from handoffs.lab import run  # noqa: E402 - after the skip guard
from handoffs.lab.dask import dask_executor  # noqa: E402

CREATED = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

# Keys whose values depend on the run, not on the cases: wall-clock latency, and how
# many receiver calls the run-wide memo of each worker process saved.
VOLATILE = frozenset({"mean_latency_ms", "receiver_calls", "memo_hits"})


def figures(report: dict[str, Any]) -> dict[str, Any]:
    """The report without its provenance block and timing figures."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip({k: v for k, v in report.items() if k != "provenance"})


@pytest.fixture(scope="module")
def threaded() -> dict[str, Any]:
    return run(payment_experiment(), created=CREATED, chunk_size=8).report


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    # The scheduler's health endpoint goes to a free loopback port: its default,
    # 8787, may be taken on a shared machine (and the warning would fail the test).
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None,
                                  scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}
                                  ) as local:
        yield local
    assert local.status.name == "closed"


def test_local_cluster_of_processes_matches_the_threaded_run(
        cluster: Any, threaded: dict[str, Any]) -> None:
    with distributed.Client(cluster) as client:
        executor = client.get_executor(pure=False)
        report = run(payment_experiment(), executor=executor, created=CREATED,
                     chunk_size=8).report
        assert len(client.scheduler_info()["workers"]) == 2
    assert report["provenance"]["executor"] == "ClientExecutor"
    assert figures(report) == figures(threaded)
    assert report["strategy_results"] == threaded["strategy_results"]
    assert report["gate"]["passed"] is True


def test_dask_executor_helper_on_an_existing_cluster(
        cluster: Any, threaded: dict[str, Any]) -> None:
    with dask_executor(cluster.scheduler_address) as executor:
        report = run(payment_experiment(), executor=executor, created=CREATED,
                     chunk_size=8).report
    assert figures(report) == figures(threaded)
    # Only the helper's client was closed: the cluster still serves clients.
    with distributed.Client(cluster) as client:
        assert len(client.scheduler_info()["workers"]) == 2


def test_dask_executor_helper_starts_and_closes_a_local_cluster(
        threaded: dict[str, Any]) -> None:
    with dask_executor(n_workers=1, processes=False) as executor:
        report = run(payment_experiment(), executor=executor, created=CREATED,
                     chunk_size=8).report
        client = executor._client  # type: ignore[attr-defined]
        cluster = client.cluster
    assert figures(report) == figures(threaded)
    assert client.status == "closed"
    assert cluster.status.name == "closed"


@pytest.mark.parametrize("options", [{"n_workers": 0}, {"threads_per_worker": 0}])
def test_dask_executor_rejects_bad_sizes(options: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="positive integer"), dask_executor(**options):
        pass  # pragma: no cover - never entered
