"""A lab report after the run: check it, render it, compare two, release on it.

:func:`validate_report` checks a ``report.json`` against the published schema
(a ``bad-report`` error when it does not hold); :func:`render_markdown` and
:func:`render_html` turn it into a page, and :func:`findings` says what a reader must
see beside its verdict; :func:`diff_reports` compares two runs within
a budget (its keyword arguments) and returns what changed (``.render()`` writes it as text or
Markdown); :func:`evaluate_gate` is the
release gate, and :func:`release_artefact` makes the release artefact (signed when given
a key; :func:`handoffs.integrity.verify` with ``purpose="assertionMethod"`` checks it).
"""

from handoffs.lab._diff import DiffBudget, MetricChange, ReportDiff, diff_reports
from handoffs.lab._release import evaluate_gate, gated_strategies, release_artefact
from handoffs.lab._render import render_html, render_markdown
from handoffs.lab._render._view import findings
from handoffs.lab._report import validate_report
from handoffs.lab._topology import render_topology_html, render_topology_markdown

__all__ = [
    "DiffBudget",
    "MetricChange",
    "ReportDiff",
    "diff_reports",
    "evaluate_gate",
    "findings",
    "gated_strategies",
    "release_artefact",
    "render_html",
    "render_markdown",
    "render_topology_html",
    "render_topology_markdown",
    "validate_report",
]
