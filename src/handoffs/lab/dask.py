"""Run lab experiments on a Dask cluster (the ``dask`` extra).

The lab runner accepts any :class:`concurrent.futures.Executor`; this module makes
one from a Dask ``distributed`` cluster and closes everything it opened::

    from handoffs.lab import run
    from handoffs.lab.dask import dask_executor

    with dask_executor(n_workers=4) as executor:        # a LocalCluster of processes
        report = run(experiment, executor=executor).report

    with dask_executor("tcp://scheduler:8786") as executor:   # an existing cluster
        report = run(experiment, executor=executor).report

The executor submits with ``pure=False``: Dask would otherwise merge identical
calls, which is wrong for a sampled receiver unless the epoch is part of the call.
Results are identical to a threaded run: the runner takes chunks back in stream
order, whatever executes them, and hands each chunk the data it needs from other chunks
(the shuffled control's partners), so neither the chunk size nor the worker count
changes a figure (receiver-call and memo-hit counts and latencies aside: each worker
process keeps its own memo).

``LocalCluster(processes=True)`` starts its workers with ``spawn``: a script that
uses it needs an ``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

from handoffs._errors import InvalidArgument, MissingExtra

__all__ = ["dask_executor"]

_QUIET_SCHEDULER: Final = {"dashboard": False, "dashboard_address": "127.0.0.1:0"}


def _distributed() -> Any:
    try:
        import distributed
    except ImportError as exc:
        raise MissingExtra("running the lab on Dask", extra="dask",
                           module="distributed") from exc
    return distributed


@contextmanager
def dask_executor(
    address: str | None = None,
    *,
    n_workers: int = 2,
    threads_per_worker: int = 1,
    processes: bool = True,
) -> Iterator[cf.Executor]:
    """A ``concurrent.futures.Executor`` backed by a Dask cluster, closed on exit.

    Args:
        address: scheduler address of an existing cluster (e.g.
            ``"tcp://10.0.0.5:8786"``); ``None`` starts a ``LocalCluster``, which is
            closed on exit. An existing cluster is left running; only the client
            this call opened is closed.
        n_workers: workers of the local cluster (ignored with ``address``).
        threads_per_worker: threads per local worker (ignored with ``address``).
        processes: local workers as processes (``True``) or threads in this process
            (ignored with ``address``).

    Yields:
        the executor (``Client.get_executor(pure=False)``).

    Raises:
        MissingExtra: ``distributed`` is not installed (``pip install 'handoffs[dask]'``).
        ValueError: ``InvalidArgument`` (also a TypeError), ``n_workers`` or ``threads_per_worker``
            below 1.
    """
    if not isinstance(n_workers, int) or n_workers < 1:
        raise InvalidArgument(f"n_workers must be a positive integer, got {n_workers!r}")
    if not isinstance(threads_per_worker, int) or threads_per_worker < 1:
        raise InvalidArgument(
            f"threads_per_worker must be a positive integer, got {threads_per_worker!r}")
    distributed = _distributed()
    cluster: Any = None
    if address is None:
        cluster = distributed.LocalCluster(
            n_workers=n_workers,
            threads_per_worker=threads_per_worker,
            processes=processes,
            dashboard_address=None,
            # No dashboard; the scheduler's health endpoint on a free loopback port
            # (its default, 8787, may be taken by another cluster).
            scheduler_kwargs=_QUIET_SCHEDULER,
        )
    try:
        client = distributed.Client(address if cluster is None else cluster)
        try:
            yield client.get_executor(pure=False)
        finally:
            client.close()
    finally:
        if cluster is not None:
            cluster.close()
