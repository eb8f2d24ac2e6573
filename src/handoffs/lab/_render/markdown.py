"""The Markdown rendering: a compact pull-request comment.

It needs nothing beyond the standard library. The verdict comes first, in words,
with the findings a reader must see beside it, the gate's reasons and warnings
and every gate check; then the failing decisions (the first
:data:`~handoffs.lab._render._sections.FAILURES_LISTED`, the rest counted), the
essay's tables, every perturbation of the gated strategies, and the lab's
findings. Long tables are folded into ``<details>`` blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from handoffs.lab._render._format import Table
from handoffs.lab._render._view import View, check_report, view

__all__ = ["render_markdown"]


def _cell(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        .replace("|", "\\|").replace("\r", " ").replace("\n", " ")
    )


def _rows(table: Table) -> list[str]:
    if not table.rows:
        return [] if table.note else ["_None._"]
    align = ["---:" if numeric else "---" for numeric in table.numeric]
    lines = [
        "| " + " | ".join(_cell(c) for c in table.columns) + " |",
        "| " + " | ".join(align) + " |",
    ]
    lines.extend("| " + " | ".join(_cell(c) for c in row) + " |" for row in table.rows)
    return lines


def _section(table: Table) -> list[str]:
    body = _rows(table)
    if table.note:
        note = f"_{_cell(table.note)}_"
        body = [*body, "", note] if body else [note]
    if table.collapsed:
        return [f"<details><summary>{_cell(table.title)}</summary>", "", *body, "",
                "</details>", ""]
    return [f"#### {_cell(table.title)}", "", *body, ""]


def _verdict(content: View) -> list[str]:
    lines = [
        f"### {_cell(content.title)}: **{content.verdict}** (gate exit {content.exit_code})",
        "",
        _cell(content.subtitle),
        "",
    ]
    for finding in content.findings:
        lines.extend([f"> {_cell(finding)}", ""])
    if content.reasons:
        lines.append("**Why it failed:**")
        lines.extend(f"- {_cell(reason)}" for reason in content.reasons)
        lines.append("")
    if content.warnings:
        lines.append("**Warnings:**")
        lines.extend(f"- {_cell(warning)}" for warning in content.warnings)
        lines.append("")
    return lines


def render_markdown(report: Mapping[str, Any]) -> str:
    """A compact Markdown rendering of a lab report, for a pull-request comment.

    The first line is the verdict in words (``PASS`` or ``FAIL``, with the gate's
    exit code); the findings beside the verdict, the gate's failing reasons and
    warnings and every gate check follow, then the failing decisions, the essay's
    tables and the lab's findings.

    Args:
        report: a report following ``handoffs-lab-report/1`` (as written by the lab,
            or loaded from its JSON).

    Raises:
        ReportError: the object is not a valid ``handoffs-lab-report/1`` report.
    """
    content = view(check_report(report), compact=True)
    lines = _verdict(content)
    lines.extend(_section(content.checks))
    for table in content.tables:
        lines.extend(_section(table))
    return "\n".join(lines).rstrip("\n") + "\n"
