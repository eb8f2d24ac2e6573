"""The root group's machinery: a command table loaded lazily, and one-line errors.

:class:`LazyGroup` lists and describes its commands from a table of
``MODULE:ATTR`` references with their one-line help, so ``handoffs --help`` and
``handoffs --version`` import no command module (and so none of the contracts,
receivers or lab); a command's module is imported when the command is invoked or
its own ``--help`` is asked for. Errors leave as one line and an exit code, as
:mod:`handoffs.cli` describes.
"""

from __future__ import annotations

import pkgutil
import re
import sys
import traceback
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import attrs
import click

from handoffs._errors import HandoffsError

if TYPE_CHECKING:
    from handoffs._discovery import Discovered

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "CLIState", "LazyGroup", "TableEntry"]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130


@attrs.define
class CLIState:
    """Per-invocation state shared with every command through ``ctx.obj``.

    Attributes:
        verbose: show tracebacks with errors (``-v``).
        contract_flags: the ``--contracts`` values.
        discovered: the contracts the command uses (found on first use).
        example: whether those are the shipped example (nothing was configured).
        unknown_hint: what an ``unknown contract`` error adds: the contracts in use and
            how to add yours (set with ``discovered``).
    """

    verbose: bool = False
    contract_flags: tuple[str, ...] = ()
    discovered: Discovered | None = None
    example: bool = False
    unknown_hint: str = ""


class TableEntry(NamedTuple):
    """One row of the command table.

    Attributes:
        target: where the command lives, ``MODULE:ATTR``.
        summary: its one-line help, shown by the root ``--help`` without importing it
            (a test holds it equal to the command's own).
    """

    target: str
    summary: str


def _error_line(message: str) -> None:
    click.echo(f"error: {message}", err=True)


class LazyGroup(click.Group):
    """A click group whose commands come from a table and are imported on first use;
    it reports every error as one line and maps it to an exit code.
    """

    def __init__(self, *args: Any, table: Mapping[str, TableEntry] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.table: Mapping[str, TableEntry] = table or {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command, those of the table included (none is imported)."""
        return sorted({*super().list_commands(ctx), *self.table})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command ``cmd_name``, importing its module on first use."""
        entry = self.table.get(cmd_name)
        if entry is not None and cmd_name not in self.commands:
            command = pkgutil.resolve_name(entry.target)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from the table's help lines, importing no command."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            entry = self.table.get(name)
            if entry is None:
                command = self.commands[name]
                if command.hidden:
                    continue
                rows.append((name, command.get_short_help_str(limit)))
            else:
                summary = click.Command(name, help=entry.summary).get_short_help_str(limit)
                rows.append((name, summary))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the CLI; in standalone mode exit with 0, 1 or 2 (see the module docs)."""
        state = extra.setdefault("obj", CLIState())

        def invoke() -> Any:
            return super(LazyGroup, self).main(
                args=args, prog_name=prog_name, complete_var=complete_var,
                standalone_mode=False, windows_expand_args=windows_expand_args, **extra,
            )

        if not standalone_mode:
            return invoke()
        try:
            result = invoke()
        except Exception as exc:  # every error leaves as one line and an exit code
            sys.exit(_report(exc, state if isinstance(state, CLIState) else CLIState()))
        sys.exit(result if isinstance(result, int) else EXIT_OK)


_ENDS_WITH_CODE = re.compile(r"\[[a-z0-9-]+\]$")


def _report(exc: Exception, state: CLIState) -> int:
    """Print ``exc`` as one line (plus the traceback with ``-v``); return the exit code."""
    code = EXIT_USAGE
    if type(exc).__name__ == "NoArgsIsHelpError":  # a group run bare: show its help
        click.echo(exc.format_message(), err=True)  # type: ignore[attr-defined]
        return code
    if isinstance(exc, click.UsageError):
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        line = f"{exc.format_message()}{hint} [usage]"
    elif isinstance(exc, click.ClickException):
        message = exc.format_message()
        line = message if _ENDS_WITH_CODE.search(message) else f"{message} [usage]"
    elif isinstance(exc, click.Abort):
        line, code = "aborted [interrupted]", EXIT_INTERRUPTED
    elif isinstance(exc, HandoffsError):
        line, code = f"{exc}{_hint(exc, state)} [{exc.code}]", EXIT_FAILED
        if exc.code == "bad-contract-source":
            code = EXIT_USAGE  # the command could not run: its configuration is bad
    elif isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        line = f"{exc.strerror or exc}{where} [io]"
    else:
        line = (f"internal error: {type(exc).__name__}: {exc} [internal]"
                + ("" if state.verbose else " (rerun with -v for the traceback)"))
    if state.verbose and not isinstance(exc, click.ClickException | click.Abort):
        traceback.print_exception(exc, file=sys.stderr)
    _error_line(line)
    return code


def _hint(exc: HandoffsError, state: CLIState) -> str:
    """After ``unknown contract``: which contracts the command uses, and how to add yours."""
    if exc.code != "unknown-contract" or "known versions" in exc.message:
        return ""  # not an unknown contract, or the name is known and the version is not
    return state.unknown_hint
