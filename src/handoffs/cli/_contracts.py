"""The contracts the commands use, and ``handoffs contracts``, which lists them.

The configured contracts come from :func:`handoffs._discovery.discover` (the
``--contracts`` flags, ``HANDOFFS_CONTRACTS``, ``[tool.handoffs] contracts``,
entry points); with none configured the command line uses its shipped example,
``payment-release/1.0.0``, and says so. A configured source never mixes with it:
list ``handoffs.examples.payment:PAYMENT_RELEASE`` to use both.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

import click

from handoffs._discovery import ENV_VAR, ContractSource, Discovered, discover
from handoffs._json import dumps
from handoffs.cli._group import CLIState
from handoffs.contracts import Registry

__all__ = ["SHIPPED_EXAMPLE", "cli_discovered", "cli_registry", "contracts_command",
           "unknown_hint"]

SHIPPED_EXAMPLE: Final = "handoffs.examples.payment:PAYMENT_RELEASE"
"""The contract the commands use when none is configured, as ``MODULE:ATTR``."""


def _shipped_example() -> Discovered:
    from handoffs.examples.payment import PAYMENT_RELEASE

    return Discovered.from_sources([ContractSource(
        spec=SHIPPED_EXAMPLE, origin="shipped example", contracts=(PAYMENT_RELEASE,))])


def cli_discovered() -> tuple[Discovered, bool]:
    """The contracts of the running ``handoffs`` command and whether they are the shipped
    example, discovered once per run from its ``--contracts`` flags (kept in the root
    context's state) and the environment.
    """
    ctx = click.get_current_context(silent=True)
    state = ctx.find_root().obj if ctx is not None else None
    if not isinstance(state, CLIState):
        state = CLIState()
    if state.discovered is None:
        found = discover(state.contract_flags)
        state.example = not found.sources
        state.discovered = _shipped_example() if state.example else found
        state.unknown_hint = unknown_hint(state.discovered, example=state.example)
    return state.discovered, state.example


def cli_registry() -> Registry:
    """The registry of the running ``handoffs`` command (see :func:`cli_discovered`)."""
    return cli_discovered()[0].registry


def unknown_hint(discovered: Discovered, *, example: bool) -> str:
    """What to say after ``unknown contract``: what is configured, and how to add yours."""
    known = ", ".join(sorted(discovered.registry.contracts)) or "none"
    where = " (the shipped example: nothing is configured)" if example else ""
    return (f"; known: {known}{where}; add yours with --contracts MODULE:ATTR, "
            f"{ENV_VAR} or [tool.handoffs] contracts (see 'handoffs contracts')")


class _ContractsGroup(click.Group):
    """``handoffs contracts`` lists; its subcommands load on first use."""

    _LAZY: Final = MappingProxyType({"analyse": "handoffs.cli._analyse:analyse_command"})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = self._LAZY.get(cmd_name)
        if target is not None and cmd_name not in self.commands:
            import pkgutil

            self.add_command(pkgutil.resolve_name(target), cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group("contracts", cls=_ContractsGroup, invoke_without_command=True)
@click.option("--format", "output", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format.")
@click.pass_context
def contracts_command(ctx: click.Context, *, output: str) -> None:
    """List the contracts the commands use, and where each came from.

    'handoffs contracts analyse [ID]' prints a contract's decision regions.
    """
    if ctx.invoked_subcommand is not None:
        return
    found, example = cli_discovered()
    rows = [{"contract": c.id, "source": s.spec, "origin": s.origin}
            for s in found.sources for c in s.contracts]
    if output == "json":
        click.echo(dumps({"examples": example, "contracts": rows}, indent=2))
        return
    for row in rows:
        click.echo(f"{row['contract']}  {row['source']}  ({row['origin']})")
    if example:
        click.echo("no contracts configured: using the shipped example; configure yours "
                   "with --contracts MODULE:ATTR, HANDOFFS_CONTRACTS or [tool.handoffs] "
                   "contracts in pyproject.toml", err=True)
