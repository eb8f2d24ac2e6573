"""The gate as a service: stores shared by replicas, ``handoffs serve``, metrics.

- :func:`open_store` opens a decision log and replay store by URL: a file path for
  :class:`~handoffs.receivers.SQLiteDecisionLog` (one host), ``postgresql://…`` for
  :class:`~handoffs.service.postgres.PostgresDecisionLog` (any number of replicas;
  the ``postgres`` extra).
- ``handoffs serve`` (the ``serve`` extra: Starlette and uvicorn) runs a gate behind
  HTTP; see the how-to "Run the gate as a service". :meth:`ServiceConfig.load` reads
  its configuration (TOML, then ``HANDOFFS_*`` variables: a :class:`ServiceConfig`,
  with its authenticated callers), :class:`Service` builds the gate,
  store and metrics from it, and :meth:`Service.app` is the ASGI application, for
  embedding in another server.

The service depends on :mod:`handoffs.receivers`; the receivers never import it.
"""

from handoffs._moved import moved_from
from handoffs.service._app import Service
from handoffs.service._config import Caller, ConfigError, ServiceConfig
from handoffs.service._store import DecisionStore, open_store

__all__ = [
    "Caller",
    "ConfigError",
    "DecisionStore",
    "Service",
    "ServiceConfig",
    "open_store",
]

# A name that left this face since 0.1.0 raises an ImportError naming its new place.
__getattr__ = moved_from(__name__)
