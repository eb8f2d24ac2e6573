"""``handoffs lab run TOPOLOGY.toml``: a file with ``[[edge]]`` tables runs every edge's
local experiment and the end-to-end experiment (:mod:`handoffs.lab._topology`), writes
``topology.json``, ``topology.md`` and ``topology.html`` (the rows side by side) and each
run's own report under ``<run>/``, prints the rows and exits with the topology gate's
code (0 every row passes, 1 one fails).
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from handoffs._json import dumps

__all__ = ["is_topology_file", "run_topology_file"]


def is_topology_file(path: Path) -> bool:
    """Whether an experiment file declares a topology (``[[edge]]`` tables); a file
    that does not parse is left to the experiment loader, which says why.
    """
    try:
        return "edge" in tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False


def run_topology_file(path: Path, out: Path, *, console: Any,
                      write_renderings: Callable[[Mapping[str, Any], Path], list[str]],
                      **options: Any) -> int:
    """Run the topology in ``path``, write its reports to ``out`` (each run's own
    renderings by ``write_renderings``), print its rows on ``console``; return the
    exit code.

    Raises:
        HandoffsError: a bad declaration (the caller reports it as "cannot run").
    """
    from rich.table import Table

    from handoffs.lab import load_topology, run_topology

    result = run_topology(load_topology(path), **options)
    report = result.report
    out.mkdir(parents=True, exist_ok=True)
    for label, sub in report["reports"].items():
        folder = out / sub["experiment"]["name"]
        folder.mkdir(exist_ok=True)
        (folder / "report.json").write_text(dumps(sub, indent=2) + "\n", encoding="utf-8")
        for note in write_renderings(sub, folder):
            click.echo(f"note: {label}: {note}", err=True)
    (out / "topology.json").write_text(dumps(report, indent=2) + "\n", encoding="utf-8")
    (out / "topology.md").write_text(result.markdown(), encoding="utf-8")
    (out / "topology.html").write_text(result.html(), encoding="utf-8")
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
