"""The HTML report's plots: inline SVG drawn by matplotlib's Agg backend.

A plot is drawn only when it shows something: a panel whose values are all zero
(no regret, no hard violation) is left out, and so is a plot with no panel left.
"""

from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from handoffs._errors import MissingExtra
from handoffs.lab._render._format import num
from handoffs.lab._render._sections import falsehood_fields

__all__ = ["plots", "require"]


def require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtra(
            "the HTML report", extra="report", module=module.split(".", maxsplit=1)[0]
        ) from exc


_SVG_PROLOG: Final = re.compile(r"^.*?(?=<svg\b)", re.DOTALL)
_SVG_COMMENT: Final = re.compile(r"<!--.*?-->", re.DOTALL)
_SVG_XMLNS: Final = re.compile(r'\s+xmlns(?::\w+)?="[^"]*"')
_SVG_ID: Final = re.compile(r'\bid="([^"]+)"')
_SVG_SIZE: Final = re.compile(r'<svg\b([^>]*?)\s+width="[^"]*"\s+height="[^"]*"')

_PALETTE: Final = {
    "ink": "#1f2933",
    "muted": "#7b8794",
    "good": "#2f855a",
    "bad": "#c53030",
    "warn": "#dd6b20",
    "main": "#2b6cb0",
    "light": "#cbd2d9",
}


def _inline_svg(figure: Any, prefix: str, label: str) -> str:
    """Serialise a matplotlib figure as SVG fit for inlining into HTML.

    The XML prolog, DOCTYPE, comments and namespace declarations go (an HTML parser
    puts inline ``<svg>`` in the SVG namespace itself), ``xlink:href`` becomes
    ``href``, and every id gets ``prefix`` so that several plots in one page never
    share an id.
    """
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg",
                   metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    svg = _SVG_PROLOG.sub("", buffer.getvalue(), count=1)
    svg = _SVG_COMMENT.sub("", svg)
    svg = _SVG_XMLNS.sub("", svg)
    svg = svg.replace("xlink:href=", "href=")
    ids = set(_SVG_ID.findall(svg))
    for ident in sorted(ids, key=len, reverse=True):
        new = f"{prefix}-{ident}"
        svg = svg.replace(f'id="{ident}"', f'id="{new}"')
        svg = svg.replace(f'href="#{ident}"', f'href="#{new}"')
        svg = svg.replace(f"url(#{ident})", f"url(#{new})")
    accessible = html.escape(label, quote=True)
    svg = _SVG_SIZE.sub(lambda m: f'<svg{m[1]} role="img" aria-label="{accessible}"', svg,
                        count=1)
    return "\n".join(line.rstrip() for line in svg.strip().splitlines())


def _figure(width: float, height: float) -> Any:
    figure_module = require("matplotlib.figure")
    backend = require("matplotlib.backends.backend_agg")
    figure = figure_module.Figure(figsize=(width, height), dpi=100, layout="constrained")
    backend.FigureCanvasAgg(figure)
    return figure


def _style_axes(ax: Any) -> None:
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.grid(axis="both", color=_PALETTE["light"], linewidth=0.6)
    ax.set_axisbelow(True)


def _place_labels(figure: Any, ax: Any, points: Sequence[tuple[float, float]],
                  texts: Sequence[str], *, color: str) -> None:
    """Annotate each point, choosing for each label the first of a few offsets whose
    box overlaps no label placed before it and no point (deterministic, greedy).
    """
    # Fix the layout first, so that display coordinates stay valid while placing.
    figure.draw_without_rendering()
    figure.set_layout_engine("none")
    renderer = figure.canvas.get_renderer()
    taken: list[Any] = []
    marks = [ax.transData.transform(p) for p in points]
    candidates = ((7, 5, "left", "bottom"), (7, -5, "left", "top"),
                  (-7, 5, "right", "bottom"), (-7, -5, "right", "top"),
                  (7, 18, "left", "bottom"), (7, -18, "left", "top"))
    for point, text in zip(points, texts, strict=True):
        chosen = None
        for dx, dy, ha, va in candidates:
            label = ax.annotate(text, point, textcoords="offset points", xytext=(dx, dy),
                                ha=ha, va=va, fontsize=8, color=color)
            box = label.get_window_extent(renderer).expanded(1.05, 1.1)
            clear = not any(box.overlaps(other) for other in taken) and not any(
                box.contains(x, y) for x, y in marks)
            if clear:
                chosen = label
                break
            label.remove()
        if chosen is None:
            dx, dy, ha, va = candidates[0]
            chosen = ax.annotate(text, point, textcoords="offset points", xytext=(dx, dy),
                                 ha=ha, va=va, fontsize=8, color=color)
        taken.append(chosen.get_window_extent(renderer))


def _tick_below(value: float) -> float:
    """The largest 1-2-5 tick (1, 2, 5 times a power of ten) at or below ``value``."""
    power = 10.0 ** math.floor(math.log10(value))
    return max(m * power for m in (1, 2, 5) if m * power <= value)


def _frontier_plot(report: Mapping[str, Any]) -> str | None:
    rows = [r for r in report["strategy_results"] if r["mean_bytes"] > 0]
    if len(rows) < 2:  # one point is no frontier
        return None
    ticker = require("matplotlib.ticker")
    authority = {s["name"]: s["authority"] for s in report["experiment"]["strategies"]}
    figure = _figure(7.2, 3.9)
    ax = figure.subplots()
    _style_axes(ax)
    ax.set_xscale("log")
    lo = min(r["mean_bytes"] for r in rows)
    hi = max(r["mean_bytes"] for r in rows)
    # Start the axis just below a 1-2-5 tick, so that the cheapest strategy has a
    # labelled tick on its left.
    ax.set_xlim(_tick_below(lo / 1.3) / 1.1, hi * 2.6)
    top = max(r["mean_regret"] for r in rows) or 1.0
    ax.set_ylim(-0.08 * top, top * 1.3)
    # The frontier is drawn over strategies that keep the decision with the receiver:
    # a DECIDE sender moves the decision boundary (the essay's negative control).
    advisory = [r for r in rows if authority.get(r["strategy"], "ADVISE") == "ADVISE"]
    frontier = []
    best = math.inf
    for row in sorted(advisory, key=lambda r: (r["mean_bytes"], r["mean_regret"])):
        if row["mean_regret"] < best:
            frontier.append(row)
            best = row["mean_regret"]
    if frontier:
        xs = [r["mean_bytes"] for r in frontier] + [hi * 2.6]
        ys = [r["mean_regret"] for r in frontier] + [frontier[-1]["mean_regret"]]
        ax.step(xs, ys, where="post", color=_PALETTE["muted"], linewidth=1, linestyle="--",
                label="cost–regret frontier (ADVISE strategies)")
    for row in rows:
        hard = row["catastrophic_errors"] > 0
        moved = authority.get(row["strategy"], "ADVISE") != "ADVISE"
        color = _PALETTE["bad"] if hard else _PALETTE["main"]
        ax.scatter([row["mean_bytes"]], [row["mean_regret"]], s=56, zorder=3,
                   marker="X" if hard else "o", linewidths=1.5,
                   facecolors="none" if moved else color, edgecolors=color)
    if len(advisory) < len(rows):
        ax.scatter([], [], s=56, marker="o", facecolors="none", edgecolors=_PALETTE["main"],
                   label="sender DECIDEs (authority moved)")
    if any(r["catastrophic_errors"] > 0 for r in rows):
        ax.scatter([], [], s=56, marker="X", color=_PALETTE["bad"], label="hard violations")
    left, right = ax.get_xlim()
    ticks = [m * 10.0**k for k in range(math.floor(math.log10(left)),
                                         math.ceil(math.log10(right)) + 1)
             for m in (1, 2, 5) if left <= m * 10.0**k <= right]
    ax.xaxis.set_major_locator(ticker.FixedLocator(ticks))
    ax.xaxis.set_minor_locator(ticker.NullLocator())
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _: f"{x:g}"))
    ax.set_xlabel("mean message bytes (log scale)")
    ax.set_ylabel("mean consequence-weighted regret")
    ax.set_title("Cost–regret frontier across strategies", loc="left", fontsize=11)
    ax.legend(loc="upper right", fontsize=8, frameon=False)
    _place_labels(
        figure, ax,
        [(r["mean_bytes"], r["mean_regret"]) for r in rows],
        [f"{r['strategy']} (agreement {num(r['agreement'], 3)})" for r in rows],
        color=_PALETTE["ink"],
    )
    return _inline_svg(figure, "frontier", "Cost–regret frontier across strategies: mean "
                       "message bytes against mean regret")


def _ablation_plot(report: Mapping[str, Any]) -> str | None:
    rows = report["decision_field_ablation"]
    subject = report["experiment"]["subject"]
    results = {r["perturbation"]: r for r in report["results"] if r["strategy"] == subject}
    names = [r["removed_field"] for r in rows]
    # The subject's own (strict) receiver on the same messages, where the report has it.
    strict = [results.get(f"remove-decision-field:{name}") for name in names]
    series = [("benign-default receiver (declared if_missing)", _PALETTE["bad"],
               [float(r["mean_regret"]) for r in rows],
               [int(r["catastrophic_errors"]) for r in rows])]
    if rows and all(row is not None for row in strict):
        series.append((f"{subject}'s own receiver (fails closed)", _PALETTE["main"],
                       [float(r["mean_regret"]) for r in strict if r is not None],
                       [int(r["hard_violations"]) for r in strict if r is not None]))
    # Only panels with something to show: an all-zero panel says nothing a table does not.
    panels = [(label, index) for label, index in
              (("mean consequence-weighted regret", 2), ("hard violations", 3))
              if any(value for s in series for value in s[index])]
    if not panels:
        return None
    figure = _figure(7.2, 1.3 + 0.42 * len(rows))
    axes = figure.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    height = 0.7 / len(series)
    for ax, (label, index) in zip(axes, panels, strict=True):
        _style_axes(ax)
        ax.grid(axis="y", visible=False)
        for k, (name, color, *values) in enumerate(series):
            offset = (k - (len(series) - 1) / 2) * height
            ax.barh([i + offset for i in range(len(rows))], values[index - 2],
                    height=height, color=color, label=name if ax is axes[0] else None)
        ax.set_xlabel(label)
        if index == 3:
            ax.xaxis.get_major_locator().set_params(integer=True)
    axes[0].set_yticks(list(range(len(rows))), names, fontsize=8)
    axes[0].invert_yaxis()
    axes[0].set_title("Regret and hard violations when one decision field is removed",
                      loc="left", fontsize=11)
    figure.legend(loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    return _inline_svg(figure, "ablation", "Regret and hard violations when one decision "
                       "field is removed")


def _falsehood_plot(report: Mapping[str, Any]) -> str | None:
    strategy, rows = falsehood_fields(report)
    if not any(r.generated for r in rows):
        return None
    series = (
        ("caught", "caught", _PALETTE["good"]),
        ("missed", "missed (accepted and acted on)", _PALETTE["bad"]),
        ("unlisted", "changes the action, outcome not listed", _PALETTE["muted"]),
        ("over_reacted", "no effect, receiver over-reacted", _PALETTE["warn"]),
        ("quiet", "no effect", _PALETTE["light"]),
    )
    values = {
        "caught": [r.caught for r in rows],
        "missed": [r.missed for r in rows],
        "unlisted": [r.unlisted for r in rows],
        "over_reacted": [r.over_reacted for r in rows],
        "quiet": [max(r.no_effect - r.over_reacted, 0) for r in rows],
    }
    positions = list(range(len(rows)))
    figure = _figure(7.2, 1.2 + 0.36 * len(rows))
    ax = figure.subplots()
    _style_axes(ax)
    ax.grid(axis="y", visible=False)
    left = [0] * len(rows)
    for key, label, color in series:
        if not any(values[key]):
            continue
        ax.barh(positions, values[key], left=left, color=color, label=label)
        left = [a + b for a, b in zip(left, values[key], strict=True)]
    ax.set_yticks(positions, [r.field for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel(f"schema-valid falsehoods ({strategy or 'subject'} receiver)")
    ax.set_title("Falsehoods caught and missed, per field", loc="left", fontsize=11)
    figure.legend(loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    return _inline_svg(figure, "falsehoods", "Schema-valid falsehoods caught and missed, "
                       "per field")


def plots(report: Mapping[str, Any]) -> dict[str, str]:
    """The report's informative plots as inline SVG, by the key of their section."""
    matplotlib = require("matplotlib")
    require("matplotlib.backends.backend_agg")
    rc = {
        "svg.hashsalt": "handoffs-lab-report",
        "svg.fonttype": "none",
        "font.family": "DejaVu Sans",
        "font.size": 9,
        "path.simplify": True,
    }
    drawn: dict[str, str] = {}
    with matplotlib.rc_context(rc):
        for key, draw in (("strategies", _frontier_plot),
                          ("decision-ablation", _ablation_plot),
                          ("falsehoods", _falsehood_plot)):
            svg = draw(report)
            if svg is not None:
                drawn[key] = svg
    return drawn
