"""``handoffs schema``: export, check and diff receipt JSON Schemas."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from handoffs._json import dumps
from handoffs.cli._common import error_line, read_object
from handoffs.cli._contracts import cli_discovered, unknown_hint
from handoffs.cli._group import EXIT_FAILED

if TYPE_CHECKING:
    from handoffs.contracts._contract import Contract
    from handoffs.contracts._diff import ContractDiff

__all__ = ["schema"]


@click.group("schema")
def schema() -> None:
    """Export, check and diff receipt JSON Schemas."""


@schema.command("export")
@click.argument("directory", required=False, default="schemas",
                type=click.Path(file_okay=False, path_type=Path))
@click.option("--check", is_flag=True,
              help="Write nothing; exit 1 listing files that are missing or drifted.")
def schema_export(*, directory: Path, check: bool) -> None:
    """Write schemas/<name>/<version>.json for every contract the command uses."""
    problems: list[str] = []
    published = _published_schemas()
    for label, relative, expected in published:
        path = directory / relative
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if check:
            if current is None:
                problems.append(f"missing: {path} ({label})")
            elif current != expected:
                problems.append(f"drifted: {path} ({label})")
            continue
        if current == expected:
            click.echo(f"unchanged {path}")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(expected, encoding="utf-8")
            click.echo(f"wrote {path}")
    if problems:
        for line in problems:
            click.echo(line, err=True)
        error_line(f"{len(problems)} schema file(s) out of date; run 'handoffs schema "
                    f"export {directory}' [schema-drift]")
        click.get_current_context().exit(EXIT_FAILED)
    if check:
        click.echo(f"ok: {len(published)} schema file(s) up to date in {directory}")


def _published_schemas() -> list[tuple[str, Path, str]]:
    """(label, path under the schema directory, exact text) of every published schema:
    the configured contracts', or with none configured the shipped example's and the
    handoff chain's (the schemas this project publishes).
    """
    from handoffs.contracts._schema import render_json_schema, render_schema, schema_path
    from handoffs.receivers._identity import HANDOFF_CHAIN_CONTRACT, handoff_chain_schema

    found, example = cli_discovered()
    rows = [
        (contract.id, schema_path(Path(), contract), render_schema(contract))
        for contract in sorted(found.registry, key=lambda c: (c.name, c.version_key))
    ]
    if not example:
        return rows
    name, version = HANDOFF_CHAIN_CONTRACT.split("/")
    rows.append((HANDOFF_CHAIN_CONTRACT, Path(name) / f"{version}.json",
                 render_json_schema(handoff_chain_schema())))
    return rows


def _operand(text: str, param: str) -> Contract[Any, Any] | dict[str, Any]:
    """A schema file path or the id (``name/version``) of a contract the command uses."""
    path = Path(text)
    if path.is_file() or text == "-":
        return read_object(text, what="schema")
    if "/" in text and not text.endswith(".json"):
        found, example = cli_discovered()
        known = found.registry.contracts.get(text)
        if known is not None:
            return known
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

    Two contract ids give wire and decision findings; a schema file gives wire
    findings only. Exits 1 on a breaking change (or, with --check-version, on an
    insufficient version bump).
    """
    from handoffs.contracts._contract import Contract
    from handoffs.contracts._diff import diff, diff_schemas
    from handoffs.contracts._schema import to_json_schema

    before, after = _operand(old, "OLD"), _operand(new, "NEW")
    if isinstance(before, Contract) and isinstance(after, Contract):
        result = diff(before, after)
    else:
        result = diff_schemas(
            to_json_schema(before) if isinstance(before, Contract) else before,
            to_json_schema(after) if isinstance(after, Contract) else after,
        )
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
