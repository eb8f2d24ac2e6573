"""The ``handoffs`` command line: every command, in one package.

Commands are thin: they parse arguments, call the library and format its answer.
The root group knows its commands from :data:`COMMANDS` (each a ``MODULE:ATTR``
reference in this package and its one-line help), so ``handoffs --help`` and
``handoffs --version`` load no command module, and so none of the contracts,
receivers or lab. One module per command group:

- :mod:`handoffs.cli._contracts`: ``contracts``, and the contracts every command uses
  (the configured ones, else the shipped example);
- :mod:`handoffs.cli._schema`: ``schema export``, ``schema diff``;
- :mod:`handoffs.cli._keys`: ``keys new``;
- :mod:`handoffs.cli._receipts`: ``sign``, ``grant``, ``verify``;
- :mod:`handoffs.cli._gate`: ``gate``, ``log summary``;
- :mod:`handoffs.cli._serve`: ``serve``;
- :mod:`handoffs.cli._lab`: ``lab run``, ``lab rescore``, ``lab gate``, ``lab diff``.

Exit codes: ``0`` success; ``1`` the input was read and found wanting (an invalid
receipt, a breaking diff, drifted schema files, or any other
:class:`~handoffs.HandoffsError`); ``2`` the command could not run (bad usage, an
unreadable file, an internal error). Every error is one line on stderr,
``error: <message> @ <path> [code]``; ``-v`` adds the traceback.
"""

from __future__ import annotations

from typing import Final

import click

from handoffs._version import __version__
from handoffs.cli._group import CLIState, LazyGroup, TableEntry

__all__ = ["COMMANDS", "main"]

COMMANDS: Final = {
    "contracts": TableEntry("handoffs.cli._contracts:contracts_command",
                            "List the contracts the commands use, and where each came from."),
    "schema": TableEntry("handoffs.cli._schema:schema",
                         "Export, check and diff receipt JSON Schemas."),
    "keys": TableEntry("handoffs.cli._keys:keys",
                       "Create signing keys and trust-file entries."),
    "sign": TableEntry("handoffs.cli._receipts:sign_command",
                       "Sign RECEIPT (a JSON file, or - for stdin) and print the signed "
                       "receipt."),
    "grant": TableEntry("handoffs.cli._receipts:grant_command",
                        "Issue a signed authority grant (what the policy service does) and "
                        "print it."),
    "verify": TableEntry("handoffs.cli._receipts:verify_command",
                         "Verify a signed RECEIPT: exit 0 when valid, 1 with the reason "
                         "when not."),
    "gate": TableEntry("handoffs.cli._gate:gate",
                       "Gate one RECEIPT: print the decision; exit 0 only if the receiver "
                       "may act on the proposal."),
    "log": TableEntry("handoffs.cli._gate:log",
                      "Read a gate's decision log; watch it against a release."),
    "serve": TableEntry("handoffs.cli._serve:serve",
                        "Run the gate as an HTTP service: POST /receipts, /healthz, "
                        "/readyz, /metrics."),
    "lab": TableEntry("handoffs.cli._lab:lab",
                      "Ablate until the decision changes: run experiments and gate "
                      "releases."),
}
"""Every command: its ``MODULE:ATTR`` and the one-line help the root ``--help`` shows."""


@click.group(cls=LazyGroup, table=COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="handoffs")
@click.option("-v", "--verbose", is_flag=True, help="Show tracebacks with errors.")
@click.option("--contracts", "contract_flags", multiple=True, metavar="MODULE:ATTR",
              help="Use the contracts of MODULE:ATTR (a Contract, a Registry or an iterable "
                   "of contracts; imported from the working directory). Repeatable; "
                   "overrides HANDOFFS_CONTRACTS and [tool.handoffs] contracts in "
                   "pyproject.toml. See 'handoffs contracts'.")
@click.pass_context
def main(ctx: click.Context, verbose: bool, contract_flags: tuple[str, ...]) -> None:
    """Typed, signed, decision-sufficient messages between AI agents.

    Commands that name a contract use the configured ones: --contracts, else
    HANDOFFS_CONTRACTS (comma-separated MODULE:ATTR), else [tool.handoffs] contracts
    in ./pyproject.toml, plus installed packages' 'handoffs.contracts' entry points;
    with none configured, the shipped example. 'handoffs contracts' lists them.
    """
    state = ctx.ensure_object(CLIState)
    state.verbose = verbose
    state.contract_flags = contract_flags
