"""The HTML rendering: one self-contained file that opens offline.

Inline CSS, no scripts, no external fonts or images; plots are inline SVG (see
:mod:`handoffs.lab._render._plots`). The verdict is a word on a coloured badge,
the gate checks sit beside it, and the failing decisions form a drill-down table
whose rows fold out the message that was sent. It needs the ``report`` extra
(jinja2 and matplotlib); without it the call raises :class:`MissingExtra`.

The rendering is deterministic: the same report gives the same text, byte for
byte (SVG ids come from a fixed salt; no dates are written except those already
in the report).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from handoffs._errors import MissingExtra
from handoffs.lab._render._map import draw_map
from handoffs.lab._render._plots import plots, require
from handoffs.lab._render._sections import witness_pair
from handoffs.lab._render._view import check_report, view

__all__ = ["MissingExtra", "render_html"]


@cache
def environment() -> Any:
    """The jinja2 environment over the package's templates (autoescaping)."""
    jinja2 = require("jinja2")
    return jinja2.Environment(
        loader=jinja2.PackageLoader("handoffs.lab", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def decision_map_figures(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Each decision map of the report as inline SVG with its caption."""
    found = report.get("decision_maps") or {"maps": []}
    actions = report["experiment"]["actions"]
    out = []
    for number, entry in enumerate(found["maps"], start=1):
        caption = (f"Map {number}: {entry['perturbation']} "
                   f"({', '.join(entry['strategies'])}): {witness_pair(entry)}.")
        out.append((draw_map(entry, number, actions, caption), caption))
    return out


def render_html(report: Mapping[str, Any]) -> str:
    """One self-contained HTML page for a lab report.

    The page needs no network: CSS is inline, there is no JavaScript, and the plots
    (cost–regret frontier, per-field ablation regret and hard violations, falsehoods
    caught and missed per field; each only when it has something to show) are
    inline SVG. The same report always renders to the same text.

    Args:
        report: a report following ``handoffs-lab-report/1``.

    Raises:
        ReportError: the object is not a valid ``handoffs-lab-report/1`` report.
        MissingExtra: jinja2 or matplotlib is not installed
            (``pip install 'handoffs[report]'``).
    """
    checked = check_report(report)
    templates = environment()
    markup = require("markupsafe")
    content = view(checked, compact=False)
    figures = {key: markup.Markup(svg) for key, svg in plots(checked).items()}
    maps = {"decision-maps": [
        (markup.Markup(svg), caption) for svg, caption in decision_map_figures(checked)]}
    template = templates.get_template("report.html.j2")
    text: str = template.render(view=content, plots=figures, maps=maps)
    return text
