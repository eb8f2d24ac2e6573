"""Human-readable renderings of a lab report: Markdown and one self-contained HTML file.

One room per concern: :mod:`._format` (numbers, wire values, tables),
:mod:`._sections` (each report section as a table), :mod:`._view` (the verdict
block and the order of sections, shared by both formats), :mod:`.markdown`,
:mod:`.html` and :mod:`._plots` (the HTML report's inline SVG).
"""

from __future__ import annotations

from handoffs._errors import MissingExtra
from handoffs.lab._render.html import render_html
from handoffs.lab._render.markdown import render_markdown

__all__ = ["MissingExtra", "render_html", "render_markdown"]
