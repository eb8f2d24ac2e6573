"""``handoffs log watch``: production decisions against the release that was approved.

``handoffs log watch LOG --release RELEASE`` profiles the decision log ``LOG`` (a SQLite
file or a ``postgresql://`` URL) and compares it with the baselines the release
artefact records (``handoffs lab gate --baseline-log``): the message size distribution,
the refusal-reason mix, the missing-field, expired, readback-disagreement, escalation
and decided-otherwise rates, and the counterfactual-trigger distribution. It prints each
metric with its evidence and exits 1 when a budget is crossed (0 otherwise, 2 when it
cannot compare). ``--prometheus-rules FILE`` writes the same budgets as Prometheus
alerting rules over the service's metrics.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from handoffs._errors import HandoffsError, MalformedJSON
from handoffs._json import JSONLimits, dumps, loads
from handoffs.cli._common import CommandError, one_line_errors

__all__ = ["parse_budgets", "watch"]

_RELEASE_LIMITS = JSONLimits(max_bytes=1 << 28, max_depth=64)
"""A release artefact's limits (its ablation record grows with the experiment)."""


def parse_budgets(values: Sequence[str]) -> dict[str, float]:
    """``NAME=VALUE`` pairs as budgets (checked by the budgets themselves).

    Raises:
        HandoffsError: ``watch-bad-budget``, a pair that is not ``NAME=NUMBER``.
    """
    out: dict[str, float] = {}
    for value in values:
        name, sep, number = value.partition("=")
        try:
            if not sep:
                raise ValueError(value)
            out[name.strip()] = float(number)
        except ValueError as exc:
            raise HandoffsError(f"budget {value!r}: use NAME=NUMBER",
                                code="watch-bad-budget", json_path="--budget") from exc
    return out


def _release(path: Path) -> Mapping[str, Any]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CommandError(f"cannot read the release {path}: {exc.strerror or exc} [io]"
                           ) from exc
    try:
        document = loads(data, limits=_RELEASE_LIMITS)
    except MalformedJSON as exc:
        raise CommandError(f"the release {path} is not JSON: {exc} [{exc.code}]") from exc
    if not isinstance(document, Mapping) or not str(
            document.get("artefact_format", "")).startswith("handoffs-release/"):
        raise CommandError(f"{path} is not a release artefact (handoffs lab gate writes one) "
                           "[watch-bad-release]")
    return document


@click.command("watch")
@click.argument("log_url", metavar="LOG", required=False)
@click.option("--release", "release_path", required=True, metavar="RELEASE",
              type=click.Path(dir_okay=False, path_type=Path),
              help="The release artefact 'handoffs lab gate --baseline-log' wrote.")
@click.option("--budget", "budgets", multiple=True, metavar="NAME=VALUE",
              help="Override a budget the release declares (e.g. message_bytes_drop=0.1). "
                   "Repeatable.")
@click.option("--last", type=click.IntRange(min=1), default=None,
              help="Watch only the last N decisions (default: the whole log).")
@click.option("--json", "as_json", is_flag=True, help="Print the shifts as JSON.")
@click.option("--prometheus-rules", "rules_path", metavar="FILE",
              type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the budgets as Prometheus alerting rules over the service's "
                   "metrics (YAML); LOG is then optional.")
@click.option("--window", default="1h", show_default=True,
              help="The rules' rate window (a Prometheus duration).")
@click.option("--for", "hold", default="10m", show_default=True,
              help="How long a rule's condition holds before it fires.")
def watch(*, log_url: str | None, release_path: Path, budgets: tuple[str, ...],
          last: int | None, as_json: bool, rules_path: Path | None, window: str,
          hold: str) -> None:
    """Compare the decisions of LOG with RELEASE's baselines; exit 1 on a crossed budget.

    LOG is a SQLite decision log or a postgresql:// URL. Every metric is printed with
    its evidence: SHIFT (its budget is crossed), ok, or unmeasured (the log does not
    record it). Exit 0 when no budget is crossed, 1 when one is, 2 when the comparison
    cannot run (a log of another contract version, an empty log, a release without
    baselines).
    """
    from handoffs.cli._watching import compare, profile_log, prometheus_rules, read_baselines

    if log_url is None and rules_path is None:
        raise CommandError("give LOG to watch, or --prometheus-rules FILE [usage]")
    release = _release(release_path)
    with one_line_errors():
        released, declared = read_baselines(release)
        declared = declared.replace(parse_budgets(budgets))
    if rules_path is not None:
        rules = prometheus_rules(released, declared, contract=str(release.get("contract")),
                                 window=window, hold=hold)
        # JSON is YAML: promtool and Prometheus read it as a rules file.
        rules_path.write_text(json.dumps(rules, indent=2) + "\n", encoding="utf-8")
        click.echo(f"wrote {rules_path}", err=True)
    if log_url is None:
        return
    with one_line_errors():
        production = profile_log(log_url, last=last)
        shifts = compare(released, production, declared)
    crossed = [shift for shift in shifts if shift.crossed]
    if as_json:
        click.echo(dumps({"release": str(release_path), "log": log_url,
                          "decisions": production.decisions,
                          "crossed": [shift.metric for shift in crossed],
                          "shifts": [shift.to_json() for shift in shifts]}, indent=2))
    else:
        click.echo(f"{production.decisions} decision(s) of "
                   f"{', '.join(production.contracts)} against the release of "
                   f"{release.get('contract')} ({released.decisions} decision(s)):")
        for shift in shifts:
            click.echo(f"  {shift.line()}")
        click.echo(f"{len(crossed)} budget(s) crossed"
                   + (f": {', '.join(s.metric for s in crossed)}" if crossed else ""))
    raise SystemExit(1 if crossed else 0)
