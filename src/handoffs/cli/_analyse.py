"""``handoffs contracts analyse``: a contract's decision regions, from the policy
analysis (:mod:`handoffs.contracts.analysis`; z3 from the ``lab`` extra).
"""

from __future__ import annotations

from typing import Any

import click

from handoffs._json import dumps
from handoffs.cli._common import error_line, one_line_errors
from handoffs.cli._contracts import cli_registry
from handoffs.cli._group import EXIT_FAILED

__all__ = ["analyse_command"]


def _value(value: Any) -> str:
    if isinstance(value, dict) and set(value) == {"lo", "hi"}:
        return f"[{value['lo']:g}, {value['hi']:g}]"
    return str(value)


def _state(state: dict[str, Any] | None) -> str:
    if state is None:
        return "-"
    return " ".join(f"{k}={_value(v)}" for k, v in state.items())


def _text(data: dict[str, Any]) -> list[str]:
    lines = [f"{data['contract']} ({data['method']}, {data['timeout_ms']} ms per query)",
             "regions:"]
    for region in data["regions"]:
        extra = (f"witness {_state(region['witness'])}" if region["status"] == "live"
                 else f"shadowed by {', '.join(region['shadowed_by']) or 'nothing'}"
                 if region["status"] == "dead" else "undecided")
        lines.append(f"  {region['rule']} -> {region['action']}: {region['status']}; {extra}")
    lines.append(f"dead rules: {', '.join(data['dead_rules']) or 'none'}")
    relevant = [r["field"] for r in data["relevance"] if r["relevant"]]
    unknown = [r["field"] for r in data["relevance"] if r["relevant"] is None]
    lines.append(f"relevant fields: {', '.join(relevant) or 'none'}"
                 + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
    minimal = data["minimal_sets"]
    sets = "; ".join("{" + ", ".join(s) + "}" for s in minimal["sets"]) or "none"
    lines.append(f"minimal sufficient sets ({minimal['status']}): {sets}")
    lines.append("cut points:")
    for cut in data["cuts"]:
        points = ", ".join(f"{p:g}" for p in cut["points"]) or "none"
        surfaces = "; ".join(
            f"{s['condition']}" + (f" (band {s['band'][0]:g} .. {s['band'][1]:g})"
                                   if s["band"] else "") for s in cut["surfaces"])
        lines.append(f"  {cut['field']}: {points}" + (f"; surfaces: {surfaces}"
                                                     if surfaces else "")
                     + f"; widest interval clear of the points {cut['widest']:g}")
    for reach in data["constraints"]:
        under = ", ".join(r["reference"] for r in reach["applies_under"]) or "no action"
        lines.append(f"hard constraint {reach['constraint']} ({reach['chosen']}): applies "
                     f"under {under}")
    lines.append(f"boundaries: {len(data['boundaries'])} pairs")
    if data["unknown"]:
        lines.append(f"unknown queries: {len(data['unknown'])}")
    return lines


@click.command("analyse")
@click.argument("contract_id", required=False, metavar="[ID]")
@click.option("--json", "as_json", is_flag=True, help="Print the analysis as JSON.")
@click.option("--strict", is_flag=True,
              help="Exit 1 when a rule is dead (shadowed) or a query was left unknown.")
@click.option("--timeout-ms", type=click.IntRange(min=1), default=5000, show_default=True,
              help="Time limit of each solver query; an undecided query is 'unknown'.")
def analyse_command(*, contract_id: str | None, as_json: bool, strict: bool,
                    timeout_ms: int) -> None:
    """Print a contract's decision regions, dead rules, relevant fields, cut points and
    minimal sufficient field sets (every configured contract when ID is omitted).
    """
    with one_line_errors():
        from handoffs.contracts.analysis import analyse

        registry = cli_registry()
        contracts = ([registry.by_id(contract_id, json_path="ID")] if contract_id
                     else list(registry))
        results = [analyse(c, timeout_ms=timeout_ms) for c in contracts]
    documents = [r.to_json() for r in results]
    if as_json:
        click.echo(dumps(documents[0] if contract_id else documents, indent=2))
    else:
        click.echo("\n\n".join("\n".join(_text(d)) for d in documents))
    failed = False
    for result in results:
        for warning in result.warnings:
            dead = warning.startswith("dead rule") or "undecided" in warning
            if strict and dead:
                error_line(f"{result.contract}: {warning} [dead-rule]"
                           if warning.startswith("dead rule")
                           else f"{result.contract}: {warning} [unknown]")
                failed = True
            else:
                click.echo(f"warning: {result.contract}: {warning}", err=True)
    if failed:
        click.get_current_context().exit(EXIT_FAILED)
