"""Open a decision log and replay store by URL.

A SQLite path (or ``sqlite:///path``) opens the receivers'
:class:`~handoffs.receivers.SQLiteDecisionLog`; any other scheme the store registered
for it in the :data:`STORE_ENTRY_POINTS` group (``postgresql://``: the PostgreSQL store
of :mod:`handoffs.service.postgres`). Opening by URL is the service's and the command
line's concern: the receivers take a store object and never open one by name.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any, Final, Protocol, runtime_checkable

from handoffs._logs import DEFAULT_RETAIN, DecisionLogError, LogSummary
from handoffs.receivers import ReplayLog, SQLiteDecisionLog

__all__ = ["DecisionStore", "open_store"]

_POSTGRES = ("postgresql://", "postgres://")

STORE_ENTRY_POINTS: Final = "handoffs.stores"
"""Entry-point group naming a store class per URL scheme (``postgresql`` → the
PostgreSQL store of ``handoffs.service``), so that the receivers never import it."""


@runtime_checkable
class DecisionStore(ReplayLog, Protocol):
    """What ``handoffs serve`` needs of a store: a replay log it can probe and read."""

    def ping(self) -> None:
        """Raise :class:`~handoffs.errors.DecisionLogError` unless the store answers."""
        ...

    def summary(self) -> LogSummary:
        """The boundary metrics over every decision in the store."""
        ...

    def close(self) -> None:
        """Release this process's connections."""
        ...


def _open_log(url: str | os.PathLike[str], **options: Any) -> Any:
    """The decision log and replay store at ``url``: a SQLite file path (or
    ``sqlite:///path``), or ``scheme://…`` served by the store registered for that
    scheme in the :data:`STORE_ENTRY_POINTS` group (``postgresql://`` with the
    ``postgres`` extra).

    Raises:
        DecisionLogError: no store is installed for the scheme, or it cannot be opened.
    """
    text = os.fspath(url)
    scheme, sep, _ = text.partition("://")
    if not sep or scheme == "sqlite":
        return SQLiteDecisionLog(text.removeprefix("sqlite://"), **options)
    from importlib.metadata import entry_points

    found = entry_points(group=STORE_ENTRY_POINTS).select(name=scheme)
    if not found:
        hint = " (pip install 'handoffs[postgres]')" if scheme.startswith("postgres") else ""
        raise DecisionLogError(f"no decision log is installed for {scheme}:// URLs{hint}")
    try:
        factory = next(iter(found)).load()
    except ImportError as exc:
        raise DecisionLogError(f"the {scheme}:// store cannot be loaded: {exc}") from exc
    return factory(text, **options)


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
    store: DecisionStore = _open_log(url, keep_messages=keep_messages, retain=retain, **options)
    return store
