"""What the commands share: reading JSON files, option parsers, one-line errors.

Errors a command raises are :class:`~handoffs.HandoffsError` (exit 1, or 2 for a bad
contract source), :class:`CommandError` (exit 2) or click's usage errors; the root
group prints each as one line ending in its ``[code]``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from handoffs._errors import HandoffsError, MalformedJSON
from handoffs._json import DEFAULT_LIMITS, loads

__all__ = [
    "CommandError",
    "comma_items",
    "error_line",
    "one_line_errors",
    "passphrase_from_env",
    "read_bounded",
    "read_json",
    "read_object",
    "time_option",
    "write_new",
]


class CommandError(click.ClickException):
    """A one-line configuration or usage error (exit status 2); the message ends in its
    ``[code]``.
    """

    exit_code = 2

    def show(self, file: Any = None) -> None:
        """Print ``error: <message>`` on one line, no traceback."""
        click.echo(f"error: {self.format_message()}", err=True)


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn configuration errors into one :class:`CommandError` line:
    ``<message> @ <path> [<code>]``.
    """
    try:
        yield
    except click.ClickException:
        raise
    except HandoffsError as exc:
        raise CommandError(f"{exc} [{exc.code}]") from exc
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        raise CommandError(f"{exc.strerror or exc}{where} [io]") from exc
    except (ValueError, TypeError) as exc:
        raise CommandError(f"{exc} [usage]") from exc


def error_line(message: str) -> None:
    """Print ``error: <message>`` on stderr."""
    click.echo(f"error: {message}", err=True)


def read_bounded(path: str, what: str, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of ``path`` (``-``: stdin): enough for the parser to
    refuse an input over ``limit`` (``too-large``) without reading the rest of it (a
    pipe of zeros, a symlink to ``/dev/zero``).

    Raises:
        CommandError: the file cannot be read (``[io]``).
    """
    if path == "-":
        return sys.stdin.buffer.read(limit + 1)
    try:
        with Path(path).open("rb") as handle:
            return handle.read(limit + 1)
    except OSError as exc:
        raise CommandError(f"cannot read {what} {path}: {exc.strerror or exc} [io]") from exc


def read_json(path: Path | str, *, what: str) -> Any:
    """Parse a JSON file (``-`` for stdin) strictly, reading at most the parser's byte
    limit + 1 (a larger input is refused ``too-large``); errors name the file.
    """
    raw = read_bounded(str(path), what, DEFAULT_LIMITS.max_bytes)
    try:
        return loads(raw)
    except MalformedJSON as exc:
        raise MalformedJSON(f"{what} {path}: {exc.message}", code=exc.code,
                            json_path=exc.json_path) from exc


def read_object(path: Path | str, *, what: str) -> dict[str, Any]:
    """Parse a JSON file that must hold an object; errors name the file."""
    data = read_json(path, what=what)
    if not isinstance(data, dict):
        raise MalformedJSON(f"{what} {path} is not a JSON object", code="not-an-object")
    return data


def passphrase_from_env(variable: str | None) -> bytes | None:
    """The passphrase in environment variable ``variable`` (``None``: no passphrase)."""
    if variable is None:
        return None
    value = os.environ.get(variable)
    if not value:
        raise click.UsageError(f"environment variable {variable} is not set or empty")
    return value.encode("utf-8")


def time_option(ctx: click.Context, param: click.Parameter, value: str | None
                ) -> datetime | None:
    """Parse an RFC 3339 UTC time written with ``Z``, e.g. ``2027-01-01T00:00:00Z``."""
    if value is None:
        return None
    from handoffs._time import parse_time

    try:
        return parse_time(value)
    except MalformedJSON as exc:
        raise click.BadParameter(exc.message, ctx=ctx, param=param) from exc


def comma_items(text: str) -> list[str]:
    """Split a comma-separated option value, dropping blanks."""
    return [item.strip() for item in text.split(",") if item.strip()]


def write_new(path: Path, data: bytes, *, private: bool = False) -> None:
    """Create ``path``; never overwrite (a key file lost to a typo is not recoverable)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    fd = os.open(path, flags, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def load_signer(key_path: Path | None, signer_spec: str | None,
                passphrase_env: str | None) -> Any:
    """The :class:`~handoffs.integrity.Signer` of ``--key`` (a PEM: Ed25519 or P-256,
    the key picks its suite) or ``--signer`` (``module:attribute`` naming a Signer, or
    a callable that returns one: a KMS or an HSM through
    :class:`~handoffs.integrity.CallableSigner`); exactly one of them.
    """
    from handoffs.integrity import Signer, load_signing_key

    if (key_path is None) == (signer_spec is None):
        raise click.UsageError("give the signing key as exactly one of --key PEM or "
                               "--signer MODULE:ATTRIBUTE")
    if key_path is not None:
        return load_signing_key(key_path.read_bytes(), passphrase_from_env(passphrase_env))
    assert signer_spec is not None  # noqa: S101 - checked above
    module_name, sep, attribute = signer_spec.partition(":")
    if not sep or not module_name or not attribute:
        raise click.BadParameter(f"expected MODULE:ATTRIBUTE, got {signer_spec!r}",
                                 param_hint="--signer")
    import importlib

    try:
        found: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise click.BadParameter(f"cannot import {signer_spec!r}: {exc}",
                                 param_hint="--signer") from exc
    if not isinstance(found, Signer) and callable(found):
        try:
            found = found()
        except Exception as exc:  # the user's factory: any failure is named
            raise click.BadParameter(f"calling {signer_spec!r} with no arguments failed: "
                                     f"{type(exc).__name__}: {exc}",
                                     param_hint="--signer") from exc
    if not isinstance(found, Signer):
        raise click.BadParameter(f"{signer_spec!r} is not a Signer (cryptosuite, "
                                 f"verification_method, sign), nor returns one: "
                                 f"{type(found).__name__}", param_hint="--signer")
    return found
