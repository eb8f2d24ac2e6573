"""``handoffs serve``: the gate as an HTTP service (Starlette and uvicorn, imported lazily)."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import signal
import socket
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from handoffs._errors import HandoffsError, MissingExtra
from handoffs.cli._common import CommandError

if TYPE_CHECKING:
    from handoffs.service import ServiceConfig

__all__ = ["JSONLogFormatter", "serve"]


def _check_exposure(config: ServiceConfig) -> None:
    """Refuse to listen beyond loopback without authentication unless ``insecure``.

    Raises:
        ConfigError: ``host`` is not a loopback address, no caller is configured and
            ``insecure`` is off.
    """
    from handoffs.service import ConfigError

    if config.callers or config.insecure:
        return
    host = config.host.strip("[]")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ConfigError(
            f"refusing to listen on {config.host} without authentication: configure "
            "[[auth.callers]] tokens, or listen on 127.0.0.1, or pass --insecure",
            json_path="$.server.host")


class JSONLogFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, event, and the event's fields."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` (its ``fields`` extra, if any, merged in)."""
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure_logging() -> None:
    """JSON lines on standard error for the service, uvicorn and the database driver."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONLogFormatter())
    for name, level in (("handoffs.service", logging.INFO), ("uvicorn", logging.INFO),
                        ("uvicorn.error", logging.INFO), ("psycopg", logging.WARNING)):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


@click.command("serve")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), metavar="TOML",
              help="Configuration file (TOML); HANDOFFS_* environment variables override it.")
@click.option("--host", help="Listen on this address (default 127.0.0.1).")
@click.option("--port", type=click.IntRange(0, 65535),
              help="Listen on this port; 0 picks a free one (logged as 'listening').")
@click.option("--log", "store_url", metavar="URL",
              help="The decision log and replay store: a SQLite path or postgresql://…")
@click.option("--insecure", is_flag=True, default=None,
              help="UNSAFE: listen beyond loopback without authentication (anyone who "
                   "reaches the port can spend receipt ids).")
def serve(*, config_path: str | None, host: str | None, port: int | None,
          store_url: str | None, insecure: bool | None) -> None:
    """Run the gate as an HTTP service: POST /receipts, /healthz, /readyz, /metrics."""
    from handoffs.service import Service, ServiceConfig

    try:
        import starlette  # noqa: F401
        import uvicorn
    except ImportError as exc:
        raise CommandError(str(MissingExtra("handoffs serve", extra="serve",
                                            module=exc.name or "starlette"))) from exc
    configure_logging()
    log = logging.getLogger("handoffs.service")
    try:
        config = ServiceConfig.load(config_path, overrides={
            "server.host": host, "server.port": port, "store.url": store_url,
            "server.insecure": insecure})
        _check_exposure(config)
        service = Service(config)
    except HandoffsError as exc:
        raise CommandError(f"{exc} [{exc.code}]") from exc
    try:
        sock = _listen(config.host, config.port)
    except OSError as exc:
        raise CommandError(f"cannot listen on {config.host}:{config.port}: "
                           f"{exc.strerror or exc} [io]") from exc
    if config.insecure and not config.callers:
        log.warning("insecure", extra={"fields": {
            "message": "no authentication: anyone who reaches the port can spend receipt ids"}})
    app = service.app()
    # httptools and uvloop when installed (the serve extra): uvicorn's "auto", under the
    # connection guard (header timeout, connection caps: Service.http_protocol).
    server = _server_class(uvicorn.Server)(uvicorn.Config(
        app, log_config=None, access_log=False, lifespan="off", loop="auto",
        http=service.http_protocol(),
        timeout_graceful_shutdown=max(1, round(config.graceful_timeout)), server_header=False,
        timeout_keep_alive=max(1, round(config.body_timeout)),
    ))
    bound = sock.getsockname()
    log.info("listening", extra={"fields": {
        "host": bound[0], "port": bound[1], "identity": config.identity,
        "store": getattr(service.store, "where", config.store_url),
        "authenticated": bool(config.callers),
        "contracts": sorted(c.id for c in service.gate.registry)}})
    started = time.monotonic()
    server.on_exit = lambda sig: _stopping(service, log, sig)
    try:
        server.run(sockets=[sock])
    finally:
        service.store.close()
        sock.close()
        log.info("stopped", extra={"fields": {"uptime_s": round(time.monotonic() - started, 3)}})


def _stopping(service: Any, log: logging.Logger, sig: int) -> None:
    service.stopping = True  # /readyz answers 503 from now on
    log.info("stopping", extra={"fields": {"signal": signal.Signals(sig).name}})


def _server_class(base: type[Any]) -> type[Any]:
    """Uvicorn's server, stopping gracefully on SIGTERM or SIGINT and then exiting 0
    (uvicorn itself re-raises the signal after its shutdown, skipping ours).
    """

    class Server(base):  # type: ignore[misc]
        on_exit: Any = None

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            previous = {sig: signal.signal(sig, self.handle_exit)
                        for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

        def handle_exit(self, sig: int, frame: Any) -> None:
            if self.on_exit is not None and not self.should_exit:
                self.on_exit(sig)
            super().handle_exit(sig, frame)

    return Server
