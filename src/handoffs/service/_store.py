"""Open a decision log and replay store by URL."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any, Protocol, runtime_checkable

from handoffs.receivers import ReplayLog
from handoffs.receivers._log import DEFAULT_RETAIN, LogSummary, open_log

__all__ = ["DecisionStore", "open_store"]

_POSTGRES = ("postgresql://", "postgres://")


@runtime_checkable
class DecisionStore(ReplayLog, Protocol):
    """What ``handoffs serve`` needs of a store: a replay log it can probe and read."""

    def ping(self) -> None:
        """Raise :class:`~handoffs.receivers.DecisionLogError` unless the store answers."""
        ...

    def summary(self) -> LogSummary:
        """The boundary metrics over every decision in the store."""
        ...

    def close(self) -> None:
        """Release this process's connections."""
        ...


def is_postgres(url: str) -> bool:
    """True for a ``postgresql://`` (or ``postgres://``) URL."""
    return url.startswith(_POSTGRES)


def open_store(
    url: str | os.PathLike[str],
    *,
    keep_messages: bool = False,
    retain: timedelta = DEFAULT_RETAIN,
    **options: Any,
) -> DecisionStore:
    """The decision log and replay store at ``url``.

    Args:
        url: ``postgresql://user@host:port/db`` for PostgreSQL, else a SQLite file path
            (``sqlite:///path`` is accepted too); other schemes through the
            ``handoffs.stores`` entry points.
        keep_messages: also store each message's bytes.
        retain: how long an id is kept past its own ``valid_until`` (store clock).
        options: passed to the backend (``timeout``, ``pool_size``, ``busy_timeout``,
            ``prune_every``).

    Raises:
        DecisionLogError: the store cannot be opened (SQLite) or its driver is missing.
    """
    store: DecisionStore = open_log(url, keep_messages=keep_messages, retain=retain, **options)
    return store
