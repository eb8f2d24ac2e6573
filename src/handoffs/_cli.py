"""The ``handoffs`` command line.

Commands are thin: they parse arguments, call the library and format its answer.

Exit codes: ``0`` success; ``1`` the input was read and found wanting (an invalid
receipt, a breaking diff, drifted schema files, or any other
:class:`~handoffs.HandoffsError`); ``2`` the command could not run (bad usage, an
unreadable file, an internal error). Every error is one line on stderr,
``error: <message> @ <path> [code]``; ``-v`` adds the traceback.
"""

from __future__ import annotations

import errno
import importlib
import os
import re
import sys
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs
import click

from handoffs._errors import HandoffsError, MalformedJSON
from handoffs._json import dumps, loads

if TYPE_CHECKING:
    from handoffs._discovery import Discovered
    from handoffs.contracts._contract import Contract
    from handoffs.contracts._diff import ContractDiff
    from handoffs.contracts._registry import Registry

__all__ = ["CLIState", "main"]

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
    """

    verbose: bool = False
    contract_flags: tuple[str, ...] = ()
    discovered: Discovered | None = None


def _error_line(message: str) -> None:
    click.echo(f"error: {message}", err=True)


# Command groups that live with the part they drive, imported when they are invoked or
# listed (``handoffs --version`` and ``handoffs keys`` never load the lab). Each follows
# the rules of this module: thin, errors raised as HandoffsError or one-line click
# errors ending in their [code].
_LAZY_COMMANDS: Final = {
    "gate": "handoffs.receivers._commands:gate",
    "log": "handoffs.receivers._commands:log",
    "serve": "handoffs.service._commands:serve",
    "lab": "handoffs.lab._commands:lab",
}


class _HandoffsGroup(click.Group):
    """A click group that reports every error as one line and maps it to an exit code,
    and imports the command groups of :data:`_LAZY_COMMANDS` on first use.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command, the lazy ones included."""
        return sorted({*super().list_commands(ctx), *_LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command ``cmd_name``, importing a lazy one on first use."""
        spec = _LAZY_COMMANDS.get(cmd_name)
        if spec is not None and cmd_name not in self.commands:
            module, _, attribute = spec.partition(":")
            command = getattr(importlib.import_module(module), attribute)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

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
            return super(_HandoffsGroup, self).main(
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
    if (exc.code != "unknown-contract" or state.discovered is None
            or "known versions" in exc.message):  # the name is known; the version is not
        return ""
    from handoffs._discovery import unknown_hint

    return unknown_hint(state.discovered)


@click.group(cls=_HandoffsGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(None, "--version", package_name="handoffs", prog_name="handoffs")
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


@main.command("contracts")
@click.option("--format", "output", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format.")
def contracts_command(*, output: str) -> None:
    """List the contracts the commands use, and where each came from."""
    from handoffs._discovery import cli_discovered

    found = cli_discovered()
    rows = [{"contract": c.id, "source": s.spec, "origin": s.origin}
            for s in found.sources for c in s.contracts]
    if output == "json":
        click.echo(dumps({"examples": found.examples, "contracts": rows}, indent=2))
        return
    for row in rows:
        click.echo(f"{row['contract']}  {row['source']}  ({row['origin']})")
    if found.examples:
        click.echo("no contracts configured: using the shipped example; configure yours "
                   "with --contracts MODULE:ATTR, HANDOFFS_CONTRACTS or [tool.handoffs] "
                   "contracts in pyproject.toml", err=True)


# ------------------------------------------------------------------------ helpers


def _registry() -> Registry:
    """The contracts this command uses (see ``handoffs._discovery``)."""
    from handoffs._discovery import cli_registry

    return cli_registry()


def _read_json(path: Path | str, *, what: str) -> Any:
    """Parse a JSON file strictly; errors name the file."""
    raw = sys.stdin.buffer.read() if str(path) == "-" else Path(path).read_bytes()
    try:
        return loads(raw)
    except MalformedJSON as exc:
        raise MalformedJSON(f"{what} {path}: {exc.message}", code=exc.code,
                            json_path=exc.json_path) from exc


def _read_object(path: Path | str, *, what: str) -> dict[str, Any]:
    data = _read_json(path, what=what)
    if not isinstance(data, dict):
        raise MalformedJSON(f"{what} {path} is not a JSON object", code="not-an-object")
    return data


def _passphrase(variable: str | None) -> bytes | None:
    if variable is None:
        return None
    value = os.environ.get(variable)
    if not value:
        raise click.UsageError(f"environment variable {variable} is not set or empty")
    return value.encode("utf-8")


def _time_option(ctx: click.Context, param: click.Parameter, value: str | None
                 ) -> datetime | None:
    """Parse an RFC 3339 UTC time written with ``Z``, e.g. ``2027-01-01T00:00:00Z``."""
    if value is None:
        return None
    from handoffs.contracts._receipt import parse_time

    try:
        return parse_time(value)
    except MalformedJSON as exc:
        raise click.BadParameter(exc.message, ctx=ctx, param=param) from exc


def _items(text: str) -> list[str]:
    """Split a comma-separated option value, dropping blanks."""
    return [item.strip() for item in text.split(",") if item.strip()]


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _write_new(path: Path, data: bytes, *, private: bool = False) -> None:
    """Create ``path``; never overwrite (a key file lost to a typo is not recoverable)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    fd = os.open(path, flags, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


# ------------------------------------------------------------------------- schema


@main.group()
def schema() -> None:
    """Export, check and diff receipt JSON Schemas."""


@schema.command("export")
@click.argument("directory", required=False, default="schemas",
                type=click.Path(file_okay=False, path_type=Path))
@click.option("--check", is_flag=True,
              help="Write nothing; exit 1 listing files that are missing or changed.")
def schema_export(*, directory: Path, check: bool) -> None:
    """Write schemas/<name>/<version>.json and <version>.policy.json (the policy
    document, with the contract fingerprint) for every contract the command uses.

    A checked-in version is released and never overwritten: when its definition
    changed, export and --check fail, name the findings and the version to publish
    the change as instead.
    """
    contracts, extra = _published()
    problems, refused, files = _lock_problems(directory, contracts, extra)
    changed = [p for p in problems if not p[3]]
    if not check:
        for path, text in _export_texts(contracts, extra, directory).items():
            if path in refused:
                continue
            if path.is_file() and path.read_text(encoding="utf-8") == text:
                click.echo(f"unchanged {path}")
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            click.echo(f"wrote {path}")
        problems = changed
    for _, _, line, _ in problems:
        click.echo(line if line.split(":")[0] in ("missing", "reformatted")
                   else f"changed: {line}", err=True)
    if changed:
        _error_line(f"{len(changed)} released version(s) changed; a released version never "
                    "changes: publish the change as the new version named above "
                    "[released-version-changed]")
        click.get_current_context().exit(EXIT_FAILED)
    if problems:
        _error_line(f"{len(problems)} file(s) missing or reformatted; run 'handoffs schema "
                    f"export {directory}' (it writes only these, and no released version "
                    "changes) [schema-drift]")
        click.get_current_context().exit(EXIT_FAILED)
    if check:
        click.echo(f"ok: {files} file(s) up to date in {directory}")


Problem = tuple[str, Path, str, bool]
"""(kind, path, line, writable) of one published file that does not match."""


def _lock_problems(directory: Path, contracts: Sequence[Contract[Any, Any]],
                   extra: Sequence[tuple[str, Path, str]]
                   ) -> tuple[list[Problem], set[Path], int]:
    """Every problem, the files export must not write (released versions that changed)
    and how many files are published.
    """
    from handoffs.contracts._fingerprint import policy_path
    from handoffs.contracts._lock import lock_problems
    from handoffs.contracts._schema import schema_path

    problems: list[Problem] = []
    refused: set[Path] = set()
    for contract in contracts:
        found = lock_problems(directory, contract)
        problems += [(p.kind, p.path, p.message, p.writable) for p in found]
        if any(not p.writable for p in found):
            refused |= {schema_path(directory, contract), policy_path(directory, contract)}
    for label, relative, expected in extra:
        plain = _plain_schema_problem(directory / relative, label, expected)
        if plain is not None:
            problems.append(plain)
            if not plain[3]:
                refused.add(directory / relative)
    return problems, refused, 2 * len(contracts) + len(extra)


def _plain_schema_problem(path: Path, label: str, expected: str) -> Problem | None:
    """The lock problem of a schema published without a contract (the handoff chain's)."""
    from handoffs.contracts._diff import diff_schemas
    from handoffs.contracts._lock import next_version

    if not path.is_file():
        return ("missing", path, f"missing: {path} ({label}, not yet exported)", True)
    current = path.read_text(encoding="utf-8")
    if current == expected:
        return None
    try:
        old = loads(current)
    except HandoffsError:
        old = None
    new = loads(expected)
    if old == new:
        return ("reformatted", path, f"reformatted: {path} ({label}, same content)", True)
    if not isinstance(old, dict):
        return ("unreadable", path, f"{path} is not a JSON object; restore it from version "
                                    "control", False)
    found = diff_schemas(old, new)
    bump = found.required_bump if found.required_bump != "none" else "patch"
    name, _, version = label.rpartition("/")
    return ("changed", path,
            f"{label} is released ({path}) and its schema changed: "
            f"{', '.join(f'{f.code} @ {f.json_path}' for f in found.findings[:3]) or 'text'}"
            f". A released version never changes: publish it as {name}/"
            f"{next_version(version, bump)} (a {bump} bump)", False)


def _export_texts(contracts: Sequence[Contract[Any, Any]],
                  extra: Sequence[tuple[str, Path, str]], directory: Path) -> dict[Path, str]:
    from handoffs.contracts._fingerprint import policy_path, render_policy_document
    from handoffs.contracts._schema import render_schema, schema_path

    texts = {}
    for contract in contracts:
        texts[schema_path(directory, contract)] = render_schema(contract)
        texts[policy_path(directory, contract)] = render_policy_document(contract)
    for _, relative, expected in extra:
        texts[directory / relative] = expected
    return texts


def _published() -> tuple[list[Contract[Any, Any]], list[tuple[str, Path, str]]]:
    """The contracts whose schemas and policy documents are published (the configured
    ones, or with none configured the shipped example's), and the schemas published
    without a contract: (label, path under the schema directory, exact text) of the
    handoff chain's, with the shipped example.
    """
    from handoffs._discovery import cli_discovered
    from handoffs.contracts._schema import render_json_schema
    from handoffs.receivers._identity import HANDOFF_CHAIN_CONTRACT, handoff_chain_schema

    found = cli_discovered()
    contracts = sorted(found.registry, key=lambda c: (c.name, c.version_key))
    if not found.examples:
        return contracts, []
    name, version = HANDOFF_CHAIN_CONTRACT.split("/")
    return contracts, [(HANDOFF_CHAIN_CONTRACT, Path(name) / f"{version}.json",
                        render_json_schema(handoff_chain_schema()))]


Operand = tuple[str, dict[str, Any], dict[str, Any] | None]
"""(label, receipt schema, policy document or None) of one side of ``schema diff``."""


def _operand(text: str, param: str) -> Operand:
    """A schema file (with the policy document beside it, when there is one), a policy
    document (with the schema beside it), or the id (``name/version``) of a contract
    the command uses.
    """
    path = Path(text)
    if path.is_file() or text == "-":
        if path.name.endswith(".policy.json"):
            policy = _read_object(text, what="policy document")
            beside = path.with_name(path.name.removesuffix(".policy.json") + ".json")
            if not beside.is_file():
                raise click.BadParameter(f"no schema {beside} beside the policy document",
                                         param_hint=param)
            return text, _read_object(beside, what="schema"), policy
        beside = path.with_name(path.name.removesuffix(".json") + ".policy.json")
        found = (_read_object(beside, what="policy document")
                 if text != "-" and path.name.endswith(".json") and beside.is_file() else None)
        return text, _read_object(text, what="schema"), found
    if "/" in text and not text.endswith(".json"):
        registry = _registry()
        known = registry.contracts.get(text)
        if known is not None:
            from handoffs.contracts._fingerprint import policy_document
            from handoffs.contracts._schema import to_json_schema

            return text, to_json_schema(known), policy_document(known)
        from handoffs._discovery import cli_discovered, unknown_hint

        raise click.BadParameter(f"unknown contract {text!r}{unknown_hint(cli_discovered())}",
                                 param_hint=param)
    raise click.BadParameter(f"{text!r} is neither a schema file nor a contract id "
                             "like payment-release/1.0.0", param_hint=param)


def _render_text(result: ContractDiff) -> str:
    count = len(result.findings)
    if not count:
        return f"{result.old} → {result.new}: no differences"
    verdict = "breaking" if result.breaking else "compatible"
    lines = [f"{result.old} → {result.new}: {verdict}, required bump "
             f"{result.required_bump}, {count} finding{'s' if count != 1 else ''}"]
    lines += [f"  {finding}" for finding in result.findings]
    return "\n".join(lines)


@schema.command("diff")
@click.argument("old")
@click.argument("new")
@click.option("--format", "output", type=click.Choice(["text", "json", "markdown"]),
              default="text", show_default=True, help="Report format.")
@click.option("--check-version", is_flag=True,
              help="Exit 1 only when NEW's version does not bump OLD's enough.")
def schema_diff(*, old: str, new: str, output: str, check_version: bool) -> None:
    """Compare OLD and NEW: schema files or contract ids like payment-release/1.0.0.

    Contract ids, and schema files with their policy document beside them
    (<version>.policy.json, written by 'schema export'), give wire and decision
    findings (rules, thresholds, order, loss, constraints, context); a schema file
    alone gives wire findings only (and says so on stderr). Exits 1 on a breaking
    change, a rule change included (or, with --check-version, on an insufficient
    version bump).
    """
    from handoffs.contracts._diff import diff_policies, diff_schemas

    (old_label, old_schema, old_policy) = _operand(old, "OLD")
    (new_label, new_schema, new_policy) = _operand(new, "NEW")
    if old_policy is not None and new_policy is not None:
        result = diff_policies(old_policy, new_policy, old_schema=old_schema,
                               new_schema=new_schema)
    else:
        result = diff_schemas(old_schema, new_schema)
        lacking = old_label if old_policy is None else new_label
        click.echo(f"note: no policy document beside {lacking}: wire findings only, "
                   "decisions not compared", err=True)
    if output == "json":
        click.echo(dumps(result.to_json(), indent=2))
    elif output == "markdown":
        click.echo(result.to_markdown(), nl=False)
    else:
        click.echo(_render_text(result))
    if check_version:
        result.check_version_bump()
    elif result.breaking:
        click.get_current_context().exit(EXIT_FAILED)


# --------------------------------------------------------------------------- keys


@main.group()
def keys() -> None:
    """Create signing keys and trust-file entries."""


@keys.command("new")
@click.option("--controller", required=True, help="Identity of the agent holding the key.")
@click.option("--roles", default="", help="Comma-separated roles, e.g. proposer,policy-service.")
@click.option("--purposes", default="assertionMethod", show_default=True,
              help="Comma-separated proof purposes; a policy service's grant key needs "
                   "capabilityDelegation.")
@click.option("--out", "prefix", type=click.Path(dir_okay=False, path_type=Path),
              help="Write PREFIX.pem and PREFIX.key.json (default: the controller name).")
@click.option("--trust", type=click.Path(dir_okay=False, path_type=Path),
              help="Also enrol the key in this trust file (created if missing).")
@click.option("--passphrase-env", metavar="VAR",
              help="Encrypt the PEM with the passphrase in environment variable VAR.")
@click.option("--not-before", metavar="RFC3339", callback=_time_option,
              help="First instant the key may sign (default: now).")
def keys_new(*, controller: str, roles: str, purposes: str, prefix: Path | None, trust: Path | None,
             passphrase_env: str | None, not_before: datetime | None) -> None:
    """Generate an Ed25519 key: a private PEM and its key-ring (trust file) entry."""
    from handoffs.contracts._keys import KeyRing, SigningKey

    passphrase = _passphrase(passphrase_env)
    key = SigningKey.generate()
    ring = KeyRing().enrol(key.public_key_multibase, controller=controller,
                           roles=_items(roles), purposes=_items(purposes),
                           not_before=not_before or _now())
    entry = ring.entries[0]
    if trust is not None:
        existing = (KeyRing.from_json(_read_object(trust, what="trust file"))
                    if trust.exists() else KeyRing())
        updated = existing.with_key(entry)
    base = prefix if prefix is not None else Path(controller)
    pem_path = base.with_name(base.name + ".pem")
    entry_path = base.with_name(base.name + ".key.json")
    entry_text = dumps(entry.to_json(), indent=2) + "\n"
    for path in (pem_path, entry_path):
        if path.exists():  # check both before writing either: no half-made key pair
            raise FileExistsError(errno.EEXIST, "File exists", str(path))
    _write_new(pem_path, key.to_pem(passphrase), private=True)
    _write_new(entry_path, entry_text.encode("utf-8"))
    if trust is not None:
        trust.write_text(dumps(updated.to_json(), indent=2) + "\n", encoding="utf-8")
        click.echo(f"enrolled {entry.verification_method} in {trust}", err=True)
    click.echo(f"wrote {pem_path} (private, keep it secret) and {entry_path}", err=True)
    click.echo(entry_text, nl=False)


# ------------------------------------------------------------------- sign, verify


@main.command("sign")
@click.argument("receipt", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--key", "key_path", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The sender's private key (PEM).")
@click.option("--grant", "grant_path",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The policy service's signed authority grant (JSON).")
@click.option("--passphrase-env", metavar="VAR",
              help="Decrypt the PEM with the passphrase in environment variable VAR.")
@click.option("--created", metavar="RFC3339", callback=_time_option,
              help="Proof creation time (default: now).")
def sign_command(*, receipt: str, key_path: Path, grant_path: Path | None,
                 passphrase_env: str | None, created: datetime | None) -> None:
    """Sign RECEIPT (a JSON file, or - for stdin) and print the signed receipt."""
    from handoffs.contracts._keys import SigningKey
    from handoffs.contracts._receipt import Receipt
    from handoffs.contracts._signing import sign_receipt

    key = SigningKey.from_pem(key_path.read_bytes(), _passphrase(passphrase_env))
    loaded = Receipt.from_json(_read_object(receipt, what="receipt"), registry=_registry())
    grant = _read_object(grant_path, what="grant") if grant_path is not None else None
    signed = sign_receipt(loaded, key, grant=grant, created=created or _now())
    click.echo(dumps(signed.to_json(), indent=2))


@main.command("grant")
@click.option("--key", "key_path", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The policy service's private key (PEM; its key-ring entry needs the "
                   "policy-service role and the capabilityDelegation purpose).")
@click.option("--issuer", required=True, help="Identity of the policy service.")
@click.option("--subject", required=True, help="The sender the grant is for.")
@click.option("--audience", required=True, help="The one receiver the sender may address.")
@click.option("--contract", "contract_id", required=True, metavar="NAME/VERSION",
              help="The contract version the grant covers, e.g. payment-release/1.0.0.")
@click.option("--case", "case_id", required=True, help="The case the grant covers.")
@click.option("--policy-version", required=True, help="The policy version in force.")
@click.option("--authority", default="ADVISE", show_default=True,
              help="Comma-separated authorities the sender may claim (ADVISE, DECIDE).")
@click.option("--roles", default="", help="Comma-separated roles the subject holds.")
@click.option("--valid-until", required=True, metavar="RFC3339", callback=_time_option,
              help="No receipt under this grant may be valid later.")
@click.option("--passphrase-env", metavar="VAR",
              help="Decrypt the PEM with the passphrase in environment variable VAR.")
@click.option("--created", metavar="RFC3339", callback=_time_option,
              help="Proof creation time (default: now).")
def grant_command(*, key_path: Path, issuer: str, subject: str, audience: str,
                  contract_id: str, case_id: str, policy_version: str, authority: str,
                  roles: str, valid_until: datetime, passphrase_env: str | None,
                  created: datetime | None) -> None:
    """Issue a signed authority grant (what the policy service does) and print it."""
    from handoffs.contracts._contract import Authority
    from handoffs.contracts._keys import SigningKey
    from handoffs.contracts._signing import issue_grant

    contract = _registry().by_id(contract_id, json_path="--contract")
    try:
        allowed = [Authority(item) for item in _items(authority)]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--authority") from exc
    key = SigningKey.from_pem(key_path.read_bytes(), _passphrase(passphrase_env))
    document = issue_grant(
        key, issuer=issuer, subject=subject, audience=audience, contract=contract,
        case_id=case_id, policy_version=policy_version, authority=allowed,
        roles=_items(roles), valid_until=valid_until, created=created or _now(),
    )
    click.echo(dumps(document, indent=2))


@main.command("verify")
@click.argument("receipt", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--trust", "trust_path", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The key ring (trust file) to verify against.")
@click.option("--as", "receiver", metavar="RECEIVER",
              help="Verify as this receiver: the receipt must be addressed to it.")
@click.option("--any-audience", is_flag=True,
              help="Do not check the audience (an auditor's or a relay's choice); "
                   "either this or --as is required.")
@click.option("--now", metavar="RFC3339", callback=_time_option,
              help="Verification time (default: now).")
def verify_command(*, receipt: str, trust_path: Path, receiver: str | None,
                   any_audience: bool, now: datetime | None) -> None:
    """Verify a signed RECEIPT: exit 0 when valid, 1 with the reason when not."""
    from handoffs.contracts._keys import KeyRing
    from handoffs.contracts._signing import ANY_AUDIENCE, verify_receipt

    if (receiver is None) == (not any_audience):
        raise click.UsageError("name the receiver with --as RECEIVER, or choose "
                               "--any-audience explicitly (exactly one of them)")
    ring = KeyRing.from_json(_read_object(trust_path, what="trust file"))
    document = _read_object(receipt, what="receipt")
    verified = verify_receipt(document, ring, registry=_registry(), now=now or _now(),
                              audience=ANY_AUDIENCE if receiver is None else receiver)
    got = verified.receipt
    click.echo(f"valid: {got.id} ({got.contract}) from {got.sender} to {got.receiver}, "
               f"signed by {verified.signer.controller}")

