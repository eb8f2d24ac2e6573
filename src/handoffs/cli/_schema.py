"""``handoffs schema``: export, check and diff receipt JSON Schemas."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from handoffs._errors import HandoffsError
from handoffs._json import dumps, loads
from handoffs.cli._common import error_line, read_object
from handoffs.cli._contracts import cli_discovered, unknown_hint
from handoffs.cli._group import EXIT_FAILED

if TYPE_CHECKING:
    from handoffs.contracts import Contract
    from handoffs.contracts.versions import ContractDiff

__all__ = ["schema"]


@click.group("schema")
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
        _write(directory, contracts, extra, refused)
        problems = changed
    for kind, _, line, _ in problems:
        click.echo(line if kind in ("missing", "reformatted") else f"{kind}: {line}", err=True)
    if changed:
        error_line(f"{len(changed)} contract version(s) cannot be exported as they stand: a "
                   "released version never changes; publish the changes as the version "
                   "named above [released-version-changed]")
        click.get_current_context().exit(EXIT_FAILED)
    if problems:
        error_line(f"{len(problems)} file(s) missing or reformatted; run 'handoffs schema "
                    f"export {directory}' (it writes only these, and no released version "
                    "changes) [schema-drift]")
        click.get_current_context().exit(EXIT_FAILED)
    if check:
        click.echo(f"ok: {files} file(s) up to date in {directory}")


Problem = tuple[str, Path, str, bool]
"""(kind, path, line, writable) of one published file that does not match."""


def _lock_problems(directory: Path, contracts: Sequence[Contract[Any, Any]],
                   extra: Sequence[tuple[str, Path, str]]
                   ) -> tuple[list[Problem], set[str], int]:
    """Every problem, what export must not write (the ids of released versions that
    changed, the labels of changed plain schemas) and how many files are published.
    """
    from handoffs.contracts.versions import lock_problems

    problems: list[Problem] = []
    refused: set[str] = set()
    for contract in contracts:
        found = lock_problems(directory, contract)
        problems += [(p.kind, p.path, p.message, p.writable) for p in found]
        if any(not p.writable for p in found):
            refused.add(contract.id)
    for label, relative, expected in extra:
        plain = _plain_schema_problem(directory / relative, label, expected)
        if plain is not None:
            problems.append(plain)
            if not plain[3]:
                refused.add(label)
    return problems, refused, 2 * len(contracts) + len(extra)


def _plain_schema_problem(path: Path, label: str, expected: str) -> Problem | None:
    """The lock problem of a schema published without a contract (the handoff chain's)."""
    from handoffs.contracts.versions import ContractDiff

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
    found = ContractDiff.between_schemas(old, new)
    name, _, version = label.rpartition("/")
    return ("changed", path,
            f"{label} is released ({path}) and its schema changed: "
            f"{', '.join(f'{f.code} @ {f.json_path}' for f in found.findings[:3]) or 'text'}"
            f". A released version never changes: publish it as {name}/"
            f"{found.next_version(version)} (a {found.release_bump} bump)", False)


def _write(directory: Path, contracts: Sequence[Contract[Any, Any]],
           extra: Sequence[tuple[str, Path, str]], refused: set[str]) -> None:
    """Write every missing or reformatted file, except the ``refused`` ones (released
    versions that changed), saying ``wrote`` or ``unchanged`` for each.
    """
    from handoffs.contracts.versions import export_release

    for contract in contracts:
        if contract.id in refused:
            continue
        for path, wrote in export_release(directory, contract).items():
            click.echo(f"{'wrote' if wrote else 'unchanged'} {path}")
    for label, relative, expected in extra:
        if label in refused:
            continue
        path = directory / relative
        if path.is_file() and path.read_text(encoding="utf-8") == expected:
            click.echo(f"unchanged {path}")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(expected, encoding="utf-8")
        click.echo(f"wrote {path}")


def _published() -> tuple[list[Contract[Any, Any]], list[tuple[str, Path, str]]]:
    """The contracts whose schemas and policy documents are published (the configured
    ones, or with none configured the shipped example's), and the schemas published
    without a contract: (label, path under the schema directory, exact text) of the
    handoff chain's, with the shipped example.
    """
    from handoffs._schemas import render_json_schema
    from handoffs.receivers.chains import HandoffChain

    found, example = cli_discovered()
    contracts = sorted(found.registry, key=lambda c: (c.name, c.version_key))
    if not example:
        return contracts, []
    schema = HandoffChain.json_schema()
    label = str(schema["properties"]["contract"]["const"])
    name, version = label.split("/")
    return contracts, [(label, Path(name) / f"{version}.json", render_json_schema(schema))]


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
            policy = read_object(text, what="policy document")
            beside = path.with_name(path.name.removesuffix(".policy.json") + ".json")
            if not beside.is_file():
                raise click.BadParameter(f"no schema {beside} beside the policy document",
                                         param_hint=param)
            return text, read_object(beside, what="schema"), policy
        beside = path.with_name(path.name.removesuffix(".json") + ".policy.json")
        policy_beside = (read_object(beside, what="policy document") if text != "-"
                         and path.name.endswith(".json") and beside.is_file() else None)
        return text, read_object(text, what="schema"), policy_beside
    if "/" in text and not text.endswith(".json"):
        found, example = cli_discovered()
        known = found.registry.contracts.get(text)
        if known is not None:
            return text, known.json_schema(), known.policy_document()
        raise click.BadParameter(
            f"unknown contract {text!r}{unknown_hint(found, example=example)}",
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
    from handoffs.contracts.versions import ContractDiff

    (old_label, old_schema, old_policy) = _operand(old, "OLD")
    (new_label, new_schema, new_policy) = _operand(new, "NEW")
    if old_policy is not None and new_policy is not None:
        result = ContractDiff.between_policies(old_policy, new_policy, old_schema=old_schema,
                                               new_schema=new_schema)
    else:
        result = ContractDiff.between_schemas(old_schema, new_schema)
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
