"""The service's configuration: a TOML file, then environment variables over it.

Every setting has one name; the file uses it as a key (tables ``[store]``,
``[server]``, ``[policy]``, ``[evidence]``), the environment as ``HANDOFFS_<NAME>``
(see :data:`ENVIRONMENT`). Paths in the file are relative to the file. Errors say
which key (``$.store.url``) and why, before anything starts.
"""

from __future__ import annotations

import contextlib
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

import attrs

from handoffs._discovery import load_source
from handoffs._errors import ConfigError, ContractSourceError, HandoffsError
from handoffs._json import DEFAULT_LIMITS
from handoffs.contracts import Contract, Registry

__all__ = ["ENVIRONMENT", "Caller", "ConfigError", "ServiceConfig"]


ENVIRONMENT: Final = {
    "HANDOFFS_IDENTITY": "identity",
    "HANDOFFS_TRUST": "trust",
    "HANDOFFS_CONTRACTS": "contracts",
    "HANDOFFS_ROLES": "roles",
    "HANDOFFS_READBACK": "readback",
    "HANDOFFS_POLICY_CURRENT": "policy.current",
    "HANDOFFS_POLICY_SUPERSEDED": "policy.superseded",
    "HANDOFFS_EVIDENCE_ROUTES": "evidence.routes",
    "HANDOFFS_STORE_URL": "store.url",
    "HANDOFFS_HOST": "server.host",
    "HANDOFFS_PORT": "server.port",
    "HANDOFFS_MAX_BODY_BYTES": "server.max_body_bytes",
    "HANDOFFS_INSECURE": "server.insecure",
}
"""Environment variable → setting. Lists are comma-separated; routes are
``PREFIX=URL`` pairs separated by commas."""

_LISTS: Final = {"contracts", "roles", "policy.current", "policy.superseded"}
_SHA256: Final = re.compile(r"[0-9a-f]{64}")


@attrs.frozen(kw_only=True)
class Caller:
    """One authenticated caller: a bearer token (kept as its SHA-256), the receiver
    identities it may decide for, and its rate limit.

    Attributes:
        name: the caller's name (in logs and metrics; never the token).
        token_sha256: the SHA-256 of the bearer token, 64 lowercase hex digits
            (``printf %s "$TOKEN" | sha256sum``); the token itself is not stored.
        receivers: the receiver identities this caller may post receipts to.
        rate: receipts per second allowed on average (``None``: unlimited).
        burst: receipts allowed at once above the average (the bucket's size).
    """

    name: str
    token_sha256: str
    receivers: tuple[str, ...]
    rate: float | None = None
    burst: int = 16


@attrs.frozen(kw_only=True)
class ServiceConfig:
    """Everything ``handoffs serve`` needs, validated.

    Attributes:
        identity: this receiver's identity (receipts must be addressed to it).
        trust: the key ring file (JSON).
        contracts: ``module:attribute`` specs of the contracts served.
        roles: roles held besides those the key ring gives ``identity``.
        readback: fraction of receipts read back against evidence.
        policy_current / policy_superseded: policy versions the policy service knows.
        evidence_routes: URI prefix → base URL for HTTP evidence resolution.
        evidence_timeout: seconds per evidence request.
        store_url: a SQLite path or ``postgresql://`` URL (the decision log and
            replay store).
        keep_messages: store each message's bytes too.
        retain: how long an id is kept past its receipt's validity (store clock).
        store_timeout: seconds a store call waits before failing closed.
        pool_size: PostgreSQL connections per replica.
        host / port: where to listen (port 0: any free port, logged at start).
        max_body_bytes: requests above this are refused with 413 before parsing.
        graceful_timeout: seconds in-flight requests get at shutdown.
        otel: emit OpenTelemetry metrics and spans (``None``: when installed).
        callers: the authenticated callers (``[[auth.callers]]``); empty: none is
            authenticated, and ``handoffs serve`` then binds only to loopback unless
            ``insecure``.
        insecure: serve without authentication beyond loopback (**unsafe**: anyone who
            reaches the port can spend receipt ids).
        body_timeout: seconds a client has to send the whole body (else 408).
        header_timeout: seconds a connection has to send a complete request head
            (from opening, or from the first byte of its next request); else it is
            answered 408 and closed.
        max_connections: connections open at once in this replica; a connection
            above it is answered 503 and closed at once.
        max_connections_per_address: connections open at once from one client
            address; a connection above it is answered 503 and closed at once (behind
            a reverse proxy every client shares its address: raise it to
            ``max_connections``).
        log_decisions: one JSON log line per decision (off: the store holds every
            decision; logging each costs CPU on the hot path).
        refused_retain: how long refused decision rows are kept (store clock);
            ``None``: forever.
        group_commit: seconds a PostgreSQL store gathers concurrent decisions into
            one statement when others already wait (a lone decision commits at once;
            ``store.group_commit_ms``; ``0``: none).
    """

    identity: str
    trust: Path
    contracts: tuple[str, ...]
    roles: tuple[str, ...] = ()
    readback: float = 0.0
    policy_current: tuple[str, ...] = ()
    policy_superseded: tuple[str, ...] = ()
    evidence_routes: Mapping[str, str] = attrs.field(factory=dict)
    evidence_timeout: float = 5.0
    store_url: str
    keep_messages: bool = False
    retain: timedelta = timedelta(hours=1)
    store_timeout: float = 5.0
    pool_size: int = 8
    host: str = "127.0.0.1"
    port: int = 8080
    max_body_bytes: int = DEFAULT_LIMITS.max_bytes
    graceful_timeout: float = 10.0
    otel: bool | None = None
    callers: tuple[Caller, ...] = ()
    insecure: bool = False
    body_timeout: float = 10.0
    header_timeout: float = 5.0
    max_connections: int = 256
    max_connections_per_address: int = 32
    log_decisions: bool = False
    refused_retain: timedelta | None = None
    group_commit: float = 0.001

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None,
        *,
        environ: Mapping[str, str] | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> ServiceConfig:
        """Read ``path`` (TOML, optional), then the environment, then ``overrides``.

        Args:
            path: the configuration file, or ``None`` for environment only.
            environ: the environment (default: ``os.environ``).
            overrides: settings by dotted name (``"store.url"``), e.g. from flags.

        Raises:
            ConfigError: a file that does not parse, an unknown key, a missing or bad
                setting.
        """
        return _load_config(path, environ=environ, overrides=overrides)

    def registry(self) -> Registry:
        """The contracts named by :attr:`contracts`, loaded.

        Raises:
            ConfigError: a spec does not import or names no contract.
        """
        found: list[Contract[Any, Any]] = []
        for spec in self.contracts:
            found.extend(_load_contracts(spec))
        try:
            return Registry.of(*found)
        except HandoffsError as exc:
            raise ConfigError(f"the contracts do not form a registry: {exc.message}",
                              json_path="$.contracts") from exc


def _load_contracts(spec: str) -> list[Contract[Any, Any]]:
    """The contracts ``spec`` names, loaded as the command line loads its sources
    (:func:`handoffs._discovery.load_source`: the working directory on the import path).
    """
    try:
        return list(load_source(spec, origin="the service's contracts").contracts)
    except ContractSourceError as exc:
        raise ConfigError(exc.message, json_path="$.contracts") from exc


def _flatten(document: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in document.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and name not in {"evidence.routes", "auth"}:
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def _from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    for variable, name in ENVIRONMENT.items():
        text = environ.get(variable)
        if text is None or text == "":
            continue
        if name in _LISTS:
            settings[name] = [item.strip() for item in text.split(",") if item.strip()]
        elif name == "evidence.routes":
            routes = {}
            for pair in text.split(","):
                prefix, eq, base = pair.strip().partition("=")
                if not eq or not prefix or not base:
                    raise ConfigError(f"{variable} expects PREFIX=URL pairs, got {pair!r}")
                routes[prefix] = base
            settings[name] = routes
        else:
            settings[name] = text
    return settings


_KEYS: Final = {
    "identity": "identity", "trust": "trust", "contracts": "contracts", "roles": "roles",
    "readback": "readback", "policy.current": "policy_current",
    "policy.superseded": "policy_superseded", "evidence.routes": "evidence_routes",
    "evidence.timeout": "evidence_timeout", "store.url": "store_url",
    "store.keep_messages": "keep_messages", "store.retain_seconds": "retain",
    "store.timeout": "store_timeout", "store.pool_size": "pool_size",
    "server.host": "host", "server.port": "port", "server.max_body_bytes": "max_body_bytes",
    "server.graceful_timeout": "graceful_timeout", "otel.enabled": "otel",
    "auth": "callers", "server.insecure": "insecure", "server.body_timeout": "body_timeout",
    "server.max_connections": "max_connections", "server.log_decisions": "log_decisions",
    "server.header_timeout": "header_timeout",
    "server.max_connections_per_address": "max_connections_per_address",
    "store.refused_retain_seconds": "refused_retain", "store.group_commit_ms": "group_commit",
}


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"expected a non-empty string, got {value!r}", json_path=f"$.{name}")
    return value


def _texts(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list):
        raise ConfigError(f"expected a list of strings, got {value!r}", json_path=f"$.{name}")
    return tuple(_text(name, item) for item in value)


def _number(name: str, value: Any, *, integer: bool = False, low: float = 0,
            high: float | None = None) -> Any:
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = int(value) if integer else float(value)
    number: float | None = None
    if not isinstance(value, bool) and isinstance(value, int | float) and (
        not integer or isinstance(value, int)
    ):
        number = value
    if number is None or number < low or (high is not None and number > high):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ConfigError(f"expected a{'n integer' if integer else ' number'} {bound}, "
                          f"got {value!r}", json_path=f"$.{name}")
    return value


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, str) and value.lower() in {"true", "false", "1", "0"}:
        return value.lower() in {"true", "1"}
    if not isinstance(value, bool):
        raise ConfigError(f"expected a boolean, got {value!r}", json_path=f"$.{name}")
    return value


def _routes(name: str, value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and k and isinstance(v, str) and v for k, v in value.items()
    ):
        raise ConfigError("expected a table of PREFIX = URL strings", json_path=f"$.{name}")
    return dict(value)


def _callers(name: str, value: Any) -> tuple[Caller, ...]:
    """``[[auth.callers]]`` tables: name, token_sha256, receivers, rate, burst."""
    if not isinstance(value, Mapping) or set(value) - {"callers"}:
        raise ConfigError("expected [[auth.callers]] tables only", json_path=f"$.{name}")
    entries = value.get("callers", [])
    if not isinstance(entries, list):
        raise ConfigError("expected [[auth.callers]] tables", json_path=f"$.{name}.callers")
    callers: list[Caller] = []
    for i, entry in enumerate(entries):
        where = f"{name}.callers[{i}]"
        if not isinstance(entry, Mapping):
            raise ConfigError("expected a table", json_path=f"$.{where}")
        unknown = sorted(set(entry) - {"name", "token_sha256", "receivers", "rate", "burst"})
        if unknown:
            raise ConfigError(f"unknown key {unknown[0]!r}", json_path=f"$.{where}.{unknown[0]}")
        for key in ("name", "token_sha256", "receivers"):
            if key not in entry:
                raise ConfigError(f"the key {key!r} is required", json_path=f"$.{where}.{key}")
        digest = _text(f"{where}.token_sha256", entry["token_sha256"]).lower()
        if not _SHA256.fullmatch(digest):
            raise ConfigError("expected the token's SHA-256 as 64 hex digits (not the token)",
                              json_path=f"$.{where}.token_sha256")
        rate = entry.get("rate")
        callers.append(Caller(
            name=_text(f"{where}.name", entry["name"]), token_sha256=digest,
            receivers=_texts(f"{where}.receivers", entry["receivers"]),
            rate=None if rate is None else float(_number(f"{where}.rate", rate, low=0.001)),
            burst=int(_number(f"{where}.burst", entry.get("burst", 16), integer=True, low=1)),
        ))
    names = [c.name for c in callers]
    digests = [c.token_sha256 for c in callers]
    if len(set(names)) != len(names) or len(set(digests)) != len(digests):
        raise ConfigError("each caller needs its own name and token", json_path=f"$.{name}")
    return tuple(callers)


def _relative(name: str, value: Any, base: Path) -> Any:
    """A path in the file is relative to the file (a URL is not a path)."""
    if name == "trust":
        return value if value.is_absolute() else base / value
    if "://" in value or Path(value).is_absolute():
        return value
    return str(base / value)


_CONVERTERS: Final[dict[str, Callable[[str, Any], Any]]] = {
    **dict.fromkeys(_LISTS, _texts),
    "evidence.routes": _routes,
    "readback": lambda n, v: float(_number(n, v, high=1)),
    **dict.fromkeys(("evidence.timeout", "store.timeout", "server.graceful_timeout"),
                    lambda n, v: float(_number(n, v, low=0.001))),
    "store.retain_seconds": lambda n, v: timedelta(seconds=_number(n, v)),
    "store.refused_retain_seconds": lambda n, v: timedelta(seconds=_number(n, v, low=1)),
    "store.group_commit_ms": lambda n, v: float(_number(n, v, high=100)) / 1000,
    **dict.fromkeys(("server.body_timeout", "server.header_timeout"),
                    lambda n, v: float(_number(n, v, low=0.001))),
    **dict.fromkeys(("server.max_connections", "server.max_connections_per_address"),
                    lambda n, v: int(_number(n, v, integer=True, low=1))),
    "auth": _callers,
    **dict.fromkeys(("store.pool_size", "server.max_body_bytes"),
                    lambda n, v: int(_number(n, v, integer=True, low=1))),
    "server.port": lambda n, v: int(_number(n, v, integer=True, high=65535)),
    **dict.fromkeys(("store.keep_messages", "otel.enabled", "server.insecure",
                     "server.log_decisions"), _flag),
    "trust": lambda n, v: Path(_text(n, v)),
}


def _load_config(
    path: str | os.PathLike[str] | None,
    *,
    environ: Mapping[str, str] | None,
    overrides: Mapping[str, Any] | None,
) -> ServiceConfig:
    """:meth:`ServiceConfig.load`."""
    base = Path.cwd()
    settings: dict[str, Any] = {}
    if path is not None:
        file = Path(path)
        try:
            document = tomllib.loads(file.read_text("utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read {file}: {exc.strerror or exc}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{file} is not TOML: {exc}") from exc
        base = file.resolve().parent
        settings.update(_flatten(document))
        unknown = sorted(set(settings) - set(_KEYS))
        if unknown:
            raise ConfigError(f"unknown setting {unknown[0]!r} in {file}; known: "
                              f"{', '.join(sorted(_KEYS))}", json_path=f"$.{unknown[0]}")
    from_env = _from_environment(os.environ if environ is None else environ)
    settings.update(from_env)
    settings.update({k: v for k, v in (overrides or {}).items() if v is not None})
    for required in ("identity", "trust", "contracts", "store.url"):
        if required not in settings:
            variable = next(v for v, n in ENVIRONMENT.items() if n == required)
            raise ConfigError(f"the setting {required!r} is required (or {variable})",
                              json_path=f"$.{required}")
    values: dict[str, Any] = {}
    for name, value in settings.items():
        convert: Callable[[str, Any], Any] = _CONVERTERS.get(name, _text)
        converted = convert(name, value)
        if name in {"trust", "store.url"} and name not in from_env:
            converted = _relative(name, converted, base)
        values[_KEYS[name]] = converted
    return ServiceConfig(**values)
