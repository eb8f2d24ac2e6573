"""``handoffs lab``: run experiments and gate releases from the command line.

``handoffs lab run [EXPERIMENT.toml]`` runs an experiment (the built-in payment
experiment without an argument), prints the essay's table and the gate's verdict,
and writes ``report.json`` (always), ``report.md`` and ``report.html`` and the
run log to ``--out``. ``handoffs lab gate REPORT.json`` re-evaluates the release
gate on a report, optionally under another budget, and writes (and signs) the
release artefact. ``handoffs lab diff OLD.json NEW.json`` says what regressed
between two reports.

Exit codes: 0 the gate passed (``diff``: nothing regressed beyond the budget); 1 it
failed (``diff``: a regression); 2 the command could not run.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

import click

from handoffs._errors import HandoffsError, MalformedJSON, MissingExtra
from handoffs._json import JSONLimits, dumps, loads
from handoffs.cli._contracts import cli_registry
from handoffs.cli._group import EXIT_USAGE
from handoffs.lab import Experiment, ExperimentError, Tolerances, load_experiment, rescore, run
from handoffs.lab.reports import (
    evaluate_gate,
    findings,
    gated_strategies,
    release_artefact,
    render_html,
    render_markdown,
    validate_report,
)

__all__ = ["lab"]

_REPORT_LIMITS: Final = JSONLimits(max_bytes=1 << 28, max_depth=64)
_RENDERERS: Final = (("report.md", render_markdown), ("report.html", render_html))


class _CannotRun(click.ClickException):
    """The command could not run (exit code 2)."""

    exit_code = EXIT_USAGE


_EXECUTORS: Final = ("threads", "processes", "dask")
"""The executors ``handoffs.lab.run`` creates by name (pinned to the runner's list by
tests/unit/test_lab_cli.py): the choices of ``--executor``."""

_LAB_EXTRA: Final = ("hypothesis", "rich")
"""What the ``lab`` extra installs: Hypothesis draws cases and falsehoods, rich prints."""


@click.group("lab")
def lab() -> None:
    """Ablate until the decision changes: run experiments and gate releases."""
    for module in _LAB_EXTRA:
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:  # an import hook refused it: as good as absent
            found = False
        if not found:
            missing = MissingExtra("handoffs lab", extra="lab", module=module)
            raise _CannotRun(f"{missing.message} [{missing.code}]")


def _console() -> Any:
    from rich.console import Console

    return Console(file=sys.stdout, width=max(120, Console(file=sys.stdout).width),
                   soft_wrap=True)


def _num(value: Any, places: int = 4) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    return f"{value:.{places}f}".rstrip("0").rstrip(".") if isinstance(value, float) \
        else str(value)


def print_summary(report: Mapping[str, Any]) -> None:
    """Print the essay's table, the controls and falsehoods, and the gate's verdict."""
    from rich.table import Table

    console = _console()
    experiment = report["experiment"]
    console.print(f"[bold]{experiment['name']}[/bold]: {experiment['contract']}, "
                  f"{experiment['cases']} cases, {len(report['results'])} strategy × "
                  "perturbation rows")
    population = experiment.get("population") or {}
    stress = population.get("case_figures") == "stress"
    table = Table(title=f"Strategies (over the {experiment['cases']} "
                        f"{'generated (stress)' if stress else 'experiment'} cases)",
                  title_justify="left")
    for column in ("strategy", "agreement", "mean regret", "catastrophic", "governance",
                   "mean bytes"):
        table.add_column(column, justify="left" if column == "strategy" else "right")
    for row in report["strategy_results"]:
        table.add_row(row["strategy"], _num(row["agreement"]), _num(row["mean_regret"]),
                      _num(row["catastrophic_errors"]), _num(row["governance_pass_rate"]),
                      _num(row["mean_bytes"], 2))
    console.print(table)
    table = Table(title="Decision-field ablation (benign-default receiver; strict receiver)",
                  title_justify="left")
    for column in ("removed field", "agreement", "mean regret", "catastrophic",
                   "strict agreement"):
        table.add_column(column, justify="left" if column == "removed field" else "right")
    for row in report["decision_field_ablation"]:
        table.add_row(row["removed_field"], _num(row["agreement"]), _num(row["mean_regret"]),
                      _num(row["catastrophic_errors"]),
                      _num(row.get("strict_receiver_agreement")))
    console.print(table)
    table = Table(title="Governance-field ablation", title_justify="left")
    for column in ("removed field", "semantic", "strict receiver", "governance failures"):
        table.add_column(column, justify="left" if column == "removed field" else "right")
    for row in report["governance_field_ablation"]:
        table.add_row(row["removed_field"], _num(row["semantic_agreement"]),
                      _num(row["strict_receiver_agreement"]), _num(row["governance_failures"]))
    console.print(table)
    injection = report["error_injection"]
    if injection is not None:
        console.print(
            f"Error injection: {injection['case_id']} {injection['field']} = "
            f"{dumps(injection['value'])}: schema still valid "
            f"{_num(injection['schema_still_valid'])}, reference "
            f"{injection['reference_action']}, baseline {injection['baseline_action']}, "
            f"altered {injection['altered_action']}, loss {_num(injection['synthetic_loss'])}")
    _print_population(console, report, stress=stress)
    for strategy in report["falsehoods"]["strategies"]:
        console.print(
            f"Falsehoods for {strategy['strategy']}: {strategy['evaluated']} sent: "
            f"{strategy['caught']} caught, {strategy['survived']} survived "
            f"({strategy['catastrophic_survived']} catastrophic), "
            f"{strategy['over_reacted']} over-reacted, "
            f"{strategy['equivalent']} equivalent"
            + (f", {strategy['refused']} refused with the true message too "
               f"({', '.join(f'{k} {v}' for k, v in strategy['refused_by'].items())})"
               if strategy.get("refused") else ""))
    minimal = report["minimal_messages"]
    console.print(f"Minimal messages: {len(minimal['regions'])} regions, mean "
                  f"{_num(minimal['mean_fields'], 2)} of {len(minimal['contract_fields'])} "
                  "fields")
    gate = report["gate"]
    verdict = "[green]PASS[/green]" if gate["passed"] else "[red]FAIL[/red]"
    console.print(f"Release gate: {verdict} ({len(gate['checks'])} checks"
                  f"{_catastrophic_suffix(report)})" + _waived(gate))
    for reason in gate["reasons"]:
        console.print(f"  - {reason}", markup=False)
    for warning in gate["warnings"]:
        console.print(f"  warning: {warning}", markup=False)
    for finding in findings(report):
        console.print(f"  {finding}", markup=False)


def _catastrophic_suffix(report: Mapping[str, Any]) -> str:
    """``; 10 catastrophic decision(s): prose_relay (not gated)`` for the verdict line."""
    gated = set(gated_strategies(report))
    made = [(row["strategy"], row["catastrophic_errors"]) for row in report["strategy_results"]
            if row["catastrophic_errors"]]
    if not made:
        return ""
    total = sum(count for _, count in made)
    named = ", ".join(f"{name} {count}" + ("" if name in gated else " (not gated)")
                      for name, count in made)
    return f"; {total} catastrophic decision(s): {named}"


def _waived(gate: Mapping[str, Any]) -> str:
    """The waivers the gate applied, for the verdict line."""
    waivers = gate.get("waivers") or ()
    return "".join(f"; waived: {w}" for w in waivers)


def _print_population(console: Any, report: Mapping[str, Any], *, stress: bool) -> None:
    """The gated strategies' rows: the cases' figures beside the population's, each
    population figure with its interval.
    """
    from rich.table import Table

    experiment = report["experiment"]
    population = experiment.get("population") or {}
    gated = set(gated_strategies(report))
    rows = [r for r in report["results"] if r["strategy"] in gated and r.get("population")]
    if not rows:
        return
    source = (f"{population.get('draws')} independent draws" if population.get("source")
              == "drawn" else "the experiment's cases")
    table = Table(title=f"Population ({source}, {population.get('confidence', 0.95):.0%} "
                        "intervals) beside " + ("stress (the generated cases)" if stress
                                                 else "the cases"),
                  title_justify="left")
    prefix = "stress" if stress else "cases"
    for column in ("strategy", "perturbation", f"{prefix} agreement",
                   "population agreement", f"{prefix} mean regret", "population mean regret",
                   "population hard-violation rate"):
        table.add_column(column, justify="left" if column in ("strategy", "perturbation")
                         else "right")

    def with_interval(figures: Mapping[str, Any], key: str) -> str:
        low, high = figures[f"{key}_interval"]
        return f"{_num(figures[key])} [{_num(low)}, {_num(high)}]"

    for row in rows:
        figures = row["population"]
        if row.get("exercised") is False:  # the findings below say why
            table.add_row(row["strategy"], row["perturbation"], "not exercised",
                          "not exercised", "—", "—", "—")
            continue
        table.add_row(row["strategy"], row["perturbation"], _num(row["agreement"]),
                      with_interval(figures, "agreement"), _num(row["mean_regret"]),
                      with_interval(figures, "mean_regret"),
                      with_interval(figures, "hard_violation_rate"))
    console.print(table)


def _write_report(report: Mapping[str, Any], out: Path, *, also: tuple[str, ...] = ()
                  ) -> None:
    """Write report.json and its renderings, print the summary and what was written."""
    (out / "report.json").write_text(dumps(report, indent=2) + "\n", encoding="utf-8")
    notes = _write_renderings(report, out)
    print_summary(report)
    for note in notes:
        click.echo(f"note: {note}", err=True)
    written = [name for name in ("report.json", "report.md", "report.html", *also)
               if (out / name).is_file()]
    click.echo(f"wrote {', '.join(str(out / name) for name in written)}", err=True)


def _write_renderings(report: Mapping[str, Any], out: Path) -> list[str]:
    """Write report.md and report.html; return notes on what an absent extra skipped."""
    notes: list[str] = []
    for filename, render in _RENDERERS:
        try:
            text = render(report)
        except MissingExtra as exc:  # the report extra (jinja2, matplotlib) is absent
            notes.append(f"{filename} skipped: {exc.message}")
            continue
        (out / filename).write_text(text, encoding="utf-8")
    return notes


@lab.command("run")
@click.argument("experiment", required=False,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("handoffs-report"), show_default=True,
              help="Directory for report.json, report.md, report.html and run.jsonl.")
@click.option("--executor", type=click.Choice(_EXECUTORS), default="threads",
              show_default=True, help="Where the chunks run.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Worker count (default: the executor's).")
@click.option("--chunk-size", type=click.IntRange(min=1), default=256, show_default=True,
              help="Cases per work unit.")
@click.option("--resume", is_flag=True, help="Continue the run log in --out after an "
              "interruption.")
@click.option("--no-progress", is_flag=True, help="Do not show a progress bar.")
@click.option("--cache", "cache_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="The model call cache (SQLite; default: "
              "run.jsonl.calls.sqlite in --out, so a resumed run asks nothing twice).")
@click.option("--no-cache", is_flag=True, help="Do not cache model calls on disk.")
@click.option("--refresh", is_flag=True, help="Ask the models again (replace cached "
              "answers).")
@click.option("--max-calls", type=click.IntRange(min=1), default=None,
              help="Budget: model calls in this run (then receivers fail closed).")
@click.option("--max-tokens", type=click.IntRange(min=1), default=None,
              help="Budget: model tokens (in + out) in this run.")
@click.option("--concurrency", type=click.IntRange(min=1), default=None,
              help="Model calls in flight at once (default: the receivers' own).")
@click.option("--strict", is_flag=True,
              help="Exit 1 when the contract has a dead (shadowed) rule, even if the "
                   "release gate passes.")
@click.pass_context
def run_command(  # noqa: PLR0917 - click passes every option as a parameter
    ctx: click.Context, experiment: Path | None, out: Path, executor: str,
    workers: int | None, chunk_size: int, resume: bool, no_progress: bool,
    cache_path: Path | None, no_cache: bool, refresh: bool, max_calls: int | None,
    max_tokens: int | None, concurrency: int | None, strict: bool,
) -> None:
    """Run EXPERIMENT (a TOML file; default: the built-in payment experiment)."""
    if no_cache and (cache_path is not None or refresh):
        raise click.UsageError("--no-cache excludes --cache and --refresh")
    from handoffs.lab import is_topology_file

    if experiment is not None and is_topology_file(experiment):  # [[edge]]: a topology
        if resume or strict:
            raise click.UsageError("--resume and --strict apply to one experiment, not to "
                                   "a topology ([[edge]] tables)")
        try:
            code = _run_topology_file(experiment, out, executor=executor, workers=workers,
                                     chunk_size=chunk_size, max_calls=max_calls,
                                     max_tokens=max_tokens, concurrency=concurrency,
                                     cache=False if no_cache else cache_path, refresh=refresh)
        except HandoffsError as exc:
            raise _CannotRun(f"{exc} [{exc.code}]") from exc
        ctx.exit(code)
    try:
        declared = _declared(experiment)
        out.mkdir(parents=True, exist_ok=True)
        progress = not no_progress and sys.stderr.isatty()
        result = run(declared, executor=executor, workers=workers, chunk_size=chunk_size,
                     run_log=out / "run.jsonl", resume=resume, progress=progress,
                     cache=False if no_cache else cache_path, refresh=refresh,
                     max_calls=max_calls, max_tokens=max_tokens, concurrency=concurrency)
    except HandoffsError as exc:  # a bad declaration, log, extra or encoder: cannot run
        raise _CannotRun(f"{exc} [{exc.code}]") from exc
    report = result.report
    _write_report(report, out, also=("run.jsonl",))
    dead = (report.get("coverage") or {}).get("dead_rules") or []
    if strict and dead:
        click.echo(f"error: {report['experiment']['contract']} has dead rules: "
                   f"{', '.join(dead)} [dead-rule]", err=True)
        ctx.exit(1)
    ctx.exit(result.exit_code)


def _loss_entries(path: Path) -> dict[tuple[str, str], float]:
    """Read a loss matrix file: rows ``{chosen, reference, loss}`` as a JSON list or a
    TOML ``[[loss]]`` array of tables.
    """
    if path.suffix == ".toml":
        import tomllib

        try:
            rows: Any = tomllib.loads(path.read_text(encoding="utf-8")).get("loss")
        except tomllib.TOMLDecodeError as exc:
            raise _CannotRun(f"loss {path}: invalid TOML: {exc} [invalid-toml]") from exc
    else:
        try:
            rows = loads(path.read_bytes())
        except HandoffsError as exc:
            raise _CannotRun(f"loss {path}: {exc} [{exc.code}]") from exc
    if not isinstance(rows, list) or not rows:
        raise _CannotRun(f"loss {path}: expected a non-empty list of {{chosen, reference, "
                         f"loss}} rows [bad-loss]")
    entries: dict[tuple[str, str], float] = {}
    for index, row in enumerate(rows):
        try:
            key = (str(row["chosen"]), str(row["reference"]))
            value = row["loss"]
        except (KeyError, TypeError) as exc:
            raise _CannotRun(f"loss {path}: row {index} needs chosen, reference and loss "
                             f"[bad-loss]") from exc
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _CannotRun(f"loss {path}: row {index}: loss must be a number [bad-loss]")
        entries[key] = float(value)
    return entries


def _declared(experiment: Path | None) -> Experiment:
    """The experiment a command runs: EXPERIMENT, or the built-in (the essay's)."""
    if experiment is None:
        from handoffs.examples.payment_lab import payment_experiment

        return payment_experiment()
    return load_experiment(experiment, registry=cli_registry())


@lab.command("rescore")
@click.argument("experiment", required=False,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--run-log", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The finished run's run.jsonl.")
@click.option("--loss", "loss_path", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The new loss matrix: a .json list or a .toml [[loss]] array of "
                   "{chosen, reference, loss} rows.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("handoffs-rescored"), show_default=True,
              help="Directory for the re-scored report.json, report.md and report.html.")
@click.pass_context
def rescore_command(ctx: click.Context, experiment: Path | None, run_log: Path,
                    loss_path: Path, out: Path) -> None:
    """Re-score a finished run under another loss matrix, calling no receiver.

    EXPERIMENT is the TOML the run was made from (default: the built-in payment
    experiment); the run log must belong to it.
    """
    entries = _loss_entries(loss_path)
    try:
        declared = _declared(experiment)
        report = rescore(declared, run_log, loss=entries, name=loss_path.stem)
    except HandoffsError as exc:
        raise _CannotRun(f"{exc} [{exc.code}]") from exc
    out.mkdir(parents=True, exist_ok=True)
    _write_report(report, out)
    ctx.exit(int(report["gate"]["exit_code"]))


def _receivers_now(report: Mapping[str, Any], experiment_path: Path | None
                   ) -> dict[str, dict[str, Any]] | None:
    """Each strategy's receiver fingerprint as the experiment is now, or ``None`` when
    the experiment is unknown (a user's report without --experiment).
    """
    try:
        if experiment_path is None:
            declared = _declared(None)
            if declared.name != report["experiment"]["name"]:
                return None
        else:
            declared = _declared(experiment_path)
    except HandoffsError as exc:
        raise _CannotRun(f"{exc} [{exc.code}]") from exc
    return {s.name: s.to_json()["receiver_fingerprint"] for s in declared.strategies}


def _budget(values: Sequence[str], base: Tolerances) -> Tolerances:
    merged: dict[str, Any] = base.to_json()
    for value in values:
        path = Path(value)
        if "=" not in value and path.suffix in (".toml", ".json"):
            if path.suffix == ".toml":
                import tomllib

                try:
                    table = tomllib.loads(path.read_text(encoding="utf-8"))
                except tomllib.TOMLDecodeError as exc:
                    raise _CannotRun(f"budget {path}: invalid TOML: {exc}") from exc
                table = table.get("tolerances", table)
            else:
                table = loads(path.read_bytes())
            if not isinstance(table, dict):
                raise _CannotRun(f"budget {path} is not a table")
            merged.update(table)
            continue
        key, sep, raw = value.partition("=")
        if not sep:
            raise _CannotRun(f"--budget {value!r}: use KEY=VALUE or a .toml/.json file")
        try:
            merged[key.strip()] = loads(raw) if raw.strip() else None
        except MalformedJSON:
            merged[key.strip()] = raw
    try:
        return Tolerances.from_json(merged)
    except ExperimentError as exc:
        raise _CannotRun(str(exc)) from exc


def _watch_baselines(log: str | None, budgets: tuple[str, ...], *, contract: str
                     ) -> dict[str, Any] | None:
    """The artefact's ``baselines``: the profile of ``log`` and the declared budgets."""
    if log is None:
        if budgets:
            raise _CannotRun("--watch-budget declares budgets for baselines: give "
                             "--baseline-log too")
        return None
    from handoffs.cli._watch import parse_budgets
    from handoffs.cli._watching import Budgets, profile_log, release_baselines

    try:
        declared = Budgets().replace(parse_budgets(budgets))
        profile = profile_log(log)
    except HandoffsError as exc:
        raise _CannotRun(f"--baseline-log {log}: {exc} [{exc.code}]") from exc
    if not profile.decisions:
        raise _CannotRun(f"--baseline-log {log} holds no decisions [watch-empty-log]")
    if set(profile.contracts) != {contract}:
        raise _CannotRun(f"--baseline-log {log} holds decisions of "
                         f"{', '.join(profile.contracts) or 'no contract'}, the report is of "
                         f"{contract} [watch-contract-mismatch]")
    return release_baselines(profile, declared)


@lab.command("gate")
@click.argument("report_path", metavar="REPORT.json",
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--budget", "budgets", multiple=True, metavar="KEY=VALUE|FILE",
              help="Override a tolerance (e.g. regret_delta=0.5, gate_perturbations=\"...\"), "
                   "or read [tolerances] from a .toml/.json file. Repeatable.")
@click.option("--artefact", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the release artefact here (only when asked, and never when the "
                   "gate fails).")
@click.option("--sign-key", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="PEM Ed25519 private key: sign the artefact with an "
                                 "eddsa-jcs-2022 proof.")
@click.option("--experiment", "experiment_path",
              type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="The experiment TOML the report was made from, as it is now: a release "
                   "whose receivers changed since the run (fingerprints differ) fails. "
                   "Default: the built-in experiment for its own reports; else unchecked.")
@click.option("--allow-stale-receiver", is_flag=True,
              help="Let a stale release pass (the change is printed as a warning).")
@click.option("--baseline-log", metavar="DB|URL", default=None,
              help="The decision log of the released handoff's acceptance run (SQLite file "
                   "or postgresql://…): its profile is recorded as the artefact's baselines, "
                   "what 'handoffs log watch' compares production with.")
@click.option("--watch-budget", "watch_budgets", multiple=True, metavar="NAME=VALUE",
              help="Declare a watch budget with the baselines (e.g. message_bytes_drop=0.2, "
                   "missing_field_rate=0.01). Repeatable.")
@click.pass_context
def gate_command(ctx: click.Context, *, report_path: Path, budgets: tuple[str, ...],
                 artefact: Path | None, sign_key: Path | None, experiment_path: Path | None,
                 allow_stale_receiver: bool, baseline_log: str | None,
                 watch_budgets: tuple[str, ...]) -> None:
    """Evaluate the release gate on REPORT.json; exit 0 pass, 1 fail, 2 error.

    The receivers are fingerprinted as they are now (--experiment, or the built-in
    experiment for its own reports) and compared with those the report measured: a
    stale release fails unless --allow-stale-receiver.
    """
    try:
        report = loads(report_path.read_bytes(), limits=_REPORT_LIMITS)
        validate_report(report)
    except HandoffsError as exc:
        raise _CannotRun(f"{report_path}: {exc}") from exc
    tolerances = _budget(budgets, Tolerances.from_json(report["experiment"]["tolerances"]))
    ran = [p["id"] for p in report["experiment"]["perturbations"]]
    unknown = [g for g in tolerances.gate_perturbations if g not in ran]
    if unknown:
        raise _CannotRun(f"gate_perturbations names perturbations the run did not apply: "
                         f"{unknown}; {report_path} holds {ran}")
    updated = {**report,
               "experiment": {**report["experiment"], "tolerances": tolerances.to_json()}}
    receivers = _receivers_now(report, experiment_path)
    gate = updated["gate"] = evaluate_gate(updated, tolerances, receivers=receivers,
                                           allow_stale_receiver=allow_stale_receiver)
    if receivers is None:
        gate["warnings"].append("receiver fingerprints not checked: pass --experiment with "
                                "the experiment the report was made from")
    key = None
    if sign_key is not None:
        from handoffs.integrity import SigningKey

        try:
            key = SigningKey.from_pem(sign_key.read_bytes())
        except HandoffsError as exc:
            raise _CannotRun(f"{sign_key}: {exc}") from exc
    console = _console()
    verdict = "[green]PASS[/green]" if gate["passed"] else "[red]FAIL[/red]"
    console.print(f"Release gate: {verdict} ({len(gate['checks'])} checks)" + _waived(gate))
    for check in gate["checks"]:
        mark = "ok  " if check["passed"] else "FAIL"
        console.print(f"  {mark} {check['reason']}", markup=False)
    for warning in gate["warnings"]:
        console.print(f"  warning: {warning}", markup=False)
    if artefact is not None and gate["passed"]:
        document = release_artefact(updated, key=key, baselines=_watch_baselines(
            baseline_log, watch_budgets, contract=str(report["experiment"]["contract"])))
        artefact.write_text(dumps(document, indent=2) + "\n", encoding="utf-8")
        click.echo(f"wrote {artefact}", err=True)
    elif artefact is not None:
        click.echo(f"no release artefact written to {artefact}: the gate failed", err=True)
    ctx.exit(gate["exit_code"])



def _read_report(path: Path) -> Mapping[str, Any]:
    try:
        report: Mapping[str, Any] = loads(path.read_bytes(), limits=_REPORT_LIMITS)
        validate_report(report)
    except HandoffsError as exc:
        raise _CannotRun(f"{path}: {exc}") from exc
    return report


@lab.command("diff")
@click.argument("old_path", metavar="OLD.json",
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("new_path", metavar="NEW.json",
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "output", type=click.Choice(["text", "markdown", "json"]),
              default="text", show_default=True,
              help="text for a terminal, markdown for a CI comment, json for tools.")
@click.option("--budget-agreement", type=click.FloatRange(min=0), default=0.0,
              show_default=True, help="Agreement may fall by this much (absolute).")
@click.option("--budget-regret", type=click.FloatRange(min=0), default=0.0,
              show_default=True, help="Mean regret may rise by this much (absolute).")
@click.option("--budget-hard-violations", type=click.IntRange(min=0), default=0,
              show_default=True, help="Hard violations may rise by this many.")
@click.option("--budget-bytes", type=click.FloatRange(min=0), default=0.1,
              show_default=True, help="Mean message bytes may rise by this fraction.")
@click.option("--budget-tokens", type=click.FloatRange(min=0), default=0.1,
              show_default=True, help="Mean tokens may rise by this fraction.")
@click.option("--budget-coverage", type=click.FloatRange(min=0), default=0.0,
              show_default=True, help="A coverage number may fall by this much.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True,
              help="Changes shown (regressions first).")
@click.pass_context
def diff_command(ctx: click.Context, old_path: Path, new_path: Path, output: str,  # noqa: PLR0917 - click passes every option
                 budget_agreement: float, budget_regret: float, budget_hard_violations: int,
                 budget_bytes: float, budget_tokens: float, budget_coverage: float,
                 limit: int) -> None:
    """What regressed from OLD.json to NEW.json, per strategy and perturbation.

    Compares agreement, mean regret, hard violations, mean bytes and tokens of every
    strategy × perturbation row, the coverage numbers and the gate's verdict, and
    lists new hard violations by case. Exit 0 when nothing regressed beyond the
    budget, 1 when something did, 2 when a report cannot be read.
    """
    from handoffs.lab.reports import diff_reports

    diff = diff_reports(_read_report(old_path), _read_report(new_path),
                        agreement=budget_agreement, regret=budget_regret,
                        hard_violations=budget_hard_violations, bytes=budget_bytes,
                        tokens=budget_tokens, coverage=budget_coverage)
    if output == "json":
        click.echo(dumps(diff.to_json(), indent=2))
    else:
        shape: Literal["text", "markdown"] = "markdown" if output == "markdown" else "text"
        click.echo(diff.render(format=shape, limit=limit), nl=False)
    ctx.exit(diff.exit_code)


def _run_topology_file(path: Path, out: Path, **options: Any) -> int:
    """``handoffs lab run TOPOLOGY.toml`` (a file with ``[[edge]]`` tables): run every
    edge's local experiment and the end-to-end experiment, write ``topology.json``,
    ``topology.md`` and ``topology.html`` (the rows side by side) and each run's own
    report under ``<run>/``, print the rows; return the topology gate's exit code
    (0 every row passes, 1 one fails).

    Raises:
        HandoffsError: a bad declaration (the caller reports it as "cannot run").
    """
    from rich.table import Table

    from handoffs.lab import load_topology, run_topology
    from handoffs.lab.reports import render_topology_html, render_topology_markdown

    report = run_topology(load_topology(path), **options).report
    out.mkdir(parents=True, exist_ok=True)
    for label, sub in report["reports"].items():
        folder = out / sub["experiment"]["name"]
        folder.mkdir(exist_ok=True)
        (folder / "report.json").write_text(dumps(sub, indent=2) + "\n", encoding="utf-8")
        for note in _write_renderings(sub, folder):
            click.echo(f"note: {label}: {note}", err=True)
    (out / "topology.json").write_text(dumps(report, indent=2) + "\n", encoding="utf-8")
    (out / "topology.md").write_text(render_topology_markdown(report), encoding="utf-8")
    (out / "topology.html").write_text(render_topology_html(report), encoding="utf-8")
    console = _console()
    table = Table(title=f"Topology {report['name']}: each edge and end to end",
                  title_justify="left")
    for column in ("scope", "edge", "reference", "agreement", "mean regret", "hard", "gate"):
        table.add_column(column, justify="right" if column in {"agreement", "mean regret",
                                                               "hard"} else "left")
    for row in report["rows"]:
        table.add_row(row["scope"], row["edge"], row["reference"], f"{row['agreement']:.3f}",
                      f"{row['mean_regret']:.3f}", str(row["hard_violations"]),
                      "PASS" if row["gate"]["passed"] else "FAIL")
    console.print(table)
    verdict = "[green]PASS[/green]" if report["gate"]["passed"] else "[red]FAIL[/red]"
    console.print(f"Topology gate: {verdict} ({len(report['rows'])} rows)")
    for reason in report["gate"]["reasons"]:
        console.print(f"  - {reason}", markup=False)
    for edge, fields in report["needed_downstream"].items():
        for field, consumers in fields.items():
            console.print(f"  {edge}: {field} is read downstream by {', '.join(consumers)}",
                          markup=False)
    click.echo(f"wrote {out / 'topology.json'}, {out / 'topology.md'}, "
               f"{out / 'topology.html'}", err=True)
    return int(report["gate"]["exit_code"])
