"""The decision map of a refuted numeric perturbation, as inline SVG written by hand.

One map (a ``decision_maps`` entry of the report, see :mod:`handoffs.lab._maps`) is a
grid of cells coloured by the action the contract's policy gives there (runs of equal
cells in a row are one rectangle, each carrying its action in ``data-action``), the
cut the perturbation crossed (``class="cut"``), the witness's true state
(``class="witness-state"``, a filled dot, or a bar for an interval) and the message
sent (``class="witness-message"``, a ring, or a bar), joined by an arrow, with the
axes and a legend. No script, no external reference; ids carry the map's number so
that several maps share a page. The same map always gives the same text.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from handoffs.lab._maps import CODES, UNDETERMINED
from handoffs.lab._render._format import num

__all__ = ["draw_map"]

_W: Final = 760
_LEFT: Final = 78
_TOP: Final = 14
_PLOT_W: Final = 400
_PLOT_H: Final = 300
_STRIP_H: Final = 44
_LEGEND_X: Final = _LEFT + _PLOT_W + 22
_INK: Final = "#1f2933"
_MUTED: Final = "#616e7c"
_BAD: Final = "#c53030"
_FILLS: Final = ("#9ecae1", "#fdae6b", "#a1d99b", "#bcbddc", "#fc9272", "#fdd0a2",
                 "#c7e9c0", "#dadaeb", "#fcbba1", "#c6dbef", "#d9d9d9", "#ffeda0")


def _fill(action: str, actions: Sequence[str], prefix: str) -> str:
    if action == UNDETERMINED:
        return f"url(#{prefix}-open)"
    index = actions.index(action) if action in actions else len(actions)
    return _FILLS[index % len(_FILLS)]


def _edges(values: Sequence[float], lo: float, hi: float, integer: bool) -> list[float]:
    """Cell edges around each sampled value (half a step beyond an integer axis's ends)."""
    if len(values) == 1:
        return [values[0] - 0.5, values[0] + 0.5]
    if integer and all(float(v).is_integer() for v in values) and \
            values[1] - values[0] == 1:
        return [v - 0.5 for v in values] + [values[-1] + 0.5]
    return [lo + (hi - lo) * i / len(values) for i in range(len(values) + 1)]


def _nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    span = hi - lo
    if span <= 0:
        return [lo]
    raw = span / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step) * step
    ticks = []
    value = first
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    return ticks


def _f(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


class _Scale:
    def __init__(self, edges: Sequence[float], start: float, length: float, *,
                 flip: bool) -> None:
        self.lo, self.hi = edges[0], edges[-1]
        self.start, self.length, self.flip = start, length, flip

    def __call__(self, value: float) -> float:
        share = 0.0 if self.hi == self.lo else (value - self.lo) / (self.hi - self.lo)
        share = min(max(share, 0.0), 1.0)
        return self.start + (1 - share if self.flip else share) * self.length


def _value(point: Any) -> tuple[float, float, float]:
    """A marker's centre and extent: ``(centre, lo, hi)``."""
    if isinstance(point, Mapping):
        lo, hi = float(point["lo"]), float(point["hi"])
        return (lo + hi) / 2, lo, hi
    return float(point), float(point), float(point)


def _text(x: float, y: float, text: str, *, anchor: str = "start", size: int = 11,
          color: str = _INK, extra: str = "") -> str:
    return (f'<text x="{_f(x)}" y="{_f(y)}" font-size="{size}" fill="{color}" '
            f'text-anchor="{anchor}"{extra}>{html.escape(text)}</text>')


def _cells(entry: Mapping[str, Any], xs: _Scale, ys: _Scale | None, *,
           edges: tuple[Sequence[float], Sequence[float]], actions: Sequence[str],
           prefix: str) -> list[str]:
    x_edges, y_edges = edges
    labels = entry["actions"]
    out = []
    for r, row in enumerate(entry["grid"]):
        if ys is None:
            top, bottom = float(_TOP), float(_TOP + _STRIP_H)
        else:
            top, bottom = ys(y_edges[r + 1]), ys(y_edges[r])
        start = 0
        for c in range(1, len(row) + 1):
            if c < len(row) and row[c] == row[start]:
                continue
            action = labels[CODES.index(row[start])]
            left, right = xs(x_edges[start]), xs(x_edges[c])
            out.append(f'<rect class="cell" data-action="{html.escape(action, quote=True)}" '
                       f'x="{_f(left)}" y="{_f(top)}" width="{_f(right - left + 0.3)}" '
                       f'height="{_f(bottom - top + 0.3)}" '
                       f'fill="{_fill(action, actions, prefix)}"/>')
            start = c
    return out


def _axis(entry: Mapping[str, Any], scale: _Scale, *, vertical: bool, height: float
          ) -> list[str]:
    out = []
    for tick in _nice_ticks(scale.lo, scale.hi):
        at = scale(tick)
        if vertical:
            out.append(f'<line x1="{_LEFT - 4}" y1="{_f(at)}" x2="{_LEFT}" y2="{_f(at)}" '
                       f'stroke="{_MUTED}"/>')
            out.append(_text(_LEFT - 7, at + 4, num(tick), anchor="end", size=10,
                             color=_MUTED))
        else:
            base = _TOP + height
            out.append(f'<line x1="{_f(at)}" y1="{_f(base)}" x2="{_f(at)}" '
                       f'y2="{_f(base + 4)}" stroke="{_MUTED}"/>')
            out.append(_text(at, base + 16, num(tick), anchor="middle", size=10,
                             color=_MUTED))
    name = entry["field"] + (" (interval midpoint)" if entry["kind"] == "interval" else "")
    if vertical:
        mid = _TOP + height / 2
        out.append(_text(18, mid, name, anchor="middle",
                         extra=f' transform="rotate(-90 18 {_f(mid)})"'))
    else:
        out.append(_text(_LEFT + _PLOT_W / 2, _TOP + height + 34, name, anchor="middle"))
    return out


def _marker(kind: str, point_x: Any, point_y: Any, *, xs: _Scale, ys: _Scale | None,
            strip_y: float) -> list[str]:
    cx, x_lo, x_hi = _value(point_x)
    if ys is None or point_y is None:
        cy, y_lo, y_hi = strip_y, strip_y, strip_y
        px_lo, px_hi = (strip_y, strip_y)
    else:
        centre, y_lo, y_hi = _value(point_y)
        cy, px_lo, px_hi = ys(centre), ys(y_lo), ys(y_hi)
    x, left, right = xs(cx), xs(x_lo), xs(x_hi)
    color = _INK if kind == "state" else _BAD
    out = [f'<g class="witness-{kind}">']
    if right - left > 1:  # an interval: a bar over its extent
        offset = -3 if kind == "state" else 3
        out.append(f'<line x1="{_f(left)}" y1="{_f(cy + offset)}" x2="{_f(right)}" '
                   f'y2="{_f(cy + offset)}" stroke="{color}" stroke-width="3"/>')
        for end in (left, right):
            out.append(f'<line x1="{_f(end)}" y1="{_f(cy + offset - 5)}" x2="{_f(end)}" '
                       f'y2="{_f(cy + offset + 5)}" stroke="{color}" stroke-width="2"/>')
    if abs(px_hi - px_lo) > 1:
        out.append(f'<line x1="{_f(x)}" y1="{_f(px_lo)}" x2="{_f(x)}" y2="{_f(px_hi)}" '
                   f'stroke="{color}" stroke-width="3"/>')
    if kind == "state":
        out.append(f'<circle cx="{_f(x)}" cy="{_f(cy)}" r="4.5" fill="{_INK}" '
                   'stroke="#ffffff" stroke-width="1.5"/>')
    else:
        out.append(f'<circle cx="{_f(x)}" cy="{_f(cy)}" r="8" fill="none" stroke="{_BAD}" '
                   'stroke-width="2.5"/>')
    out.append("</g>")
    return out


def _legend(entry: Mapping[str, Any], actions: Sequence[str], prefix: str,
            fail_closed: str) -> list[str]:
    out = []
    y = _TOP + 6
    for action in entry["actions"]:
        label = (f"undetermined (fails closed: {fail_closed})" if action == UNDETERMINED
                 else action)
        out.append(f'<rect x="{_LEGEND_X}" y="{y}" width="14" height="14" '
                   f'fill="{_fill(action, actions, prefix)}" stroke="{_MUTED}" '
                   'stroke-width="0.5"/>')
        out.append(_text(_LEGEND_X + 20, y + 11, label, size=11))
        y += 20
    y += 6
    out.append(f'<circle cx="{_LEGEND_X + 7}" cy="{y + 7}" r="4.5" fill="{_INK}"/>')
    out.append(_text(_LEGEND_X + 20, y + 11, f"true state ({entry['reference_action']})",
                     size=11))
    y += 20
    out.append(f'<circle cx="{_LEGEND_X + 7}" cy="{y + 7}" r="6" fill="none" '
               f'stroke="{_BAD}" stroke-width="2.5"/>')
    out.append(_text(_LEGEND_X + 20, y + 11, f"message sent ({entry['received_action']})",
                     size=11))
    if entry.get("cut"):
        y += 20
        out.append(f'<line x1="{_LEGEND_X}" y1="{y + 7}" x2="{_LEGEND_X + 14}" y2="{y + 7}" '
                   f'stroke="{_INK}" stroke-width="2.5"/>')
        out.append(_text(_LEGEND_X + 20, y + 11, f"cut (rule {entry['cut']['rule']})",
                         size=11))
    return out


def draw_map(entry: Mapping[str, Any], number: int, actions: Sequence[str],
             label: str) -> str:
    """One decision map as an inline ``<svg>`` element.

    Args:
        entry: one entry of the report's ``decision_maps.maps``.
        number: the map's number in the page (ids and the pattern use it).
        actions: the experiment's actions, in order (each keeps its colour across maps).
        label: the accessible name (``aria-label``).
    """
    prefix = f"decision-map-{number}"
    x_axis, y_axis = entry["x"], entry["y"]
    height = _PLOT_H if y_axis is not None else _STRIP_H
    x_edges = _edges(x_axis["values"], x_axis["lo"], x_axis["hi"], x_axis["kind"] == "integer")
    xs = _Scale(x_edges, _LEFT, _PLOT_W, flip=False)
    y_edges: list[float] = []
    ys: _Scale | None = None
    if y_axis is not None:
        y_edges = _edges(y_axis["values"], y_axis["lo"], y_axis["hi"], y_axis["kind"] == "integer")
        ys = _Scale(y_edges, _TOP, _PLOT_H, flip=True)
    legend_rows = len(entry["actions"]) + 3
    total_h = max(_TOP + height + 46, _TOP + 20 * legend_rows + 20)
    parts = [
        f'<svg class="decision-map" viewBox="0 0 {_W} {_f(total_h)}" width="{_W}" '
        f'height="{_f(total_h)}" role="img" aria-label="{html.escape(label, quote=True)}" '
        'font-family="system-ui, sans-serif">',
        f"<title>{html.escape(label)}</title>",
        f'<defs><pattern id="{prefix}-open" width="6" height="6" '
        'patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        '<rect width="6" height="6" fill="#f5f7fa"/>'
        f'<line x1="0" y1="0" x2="0" y2="6" stroke="{_MUTED}" stroke-width="1.2"/>'
        "</pattern>"
        f'<marker id="{prefix}-arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        f'<path d="M0,0 L10,5 L0,10 z" fill="{_BAD}"/></marker></defs>',
        '<g class="cells">',
        *_cells(entry, xs, ys, edges=(x_edges, y_edges), actions=actions, prefix=prefix),
        "</g>",
        f'<rect x="{_LEFT}" y="{_TOP}" width="{_PLOT_W}" height="{height}" fill="none" '
        f'stroke="{_MUTED}" stroke-width="1"/>',
        *_axis(x_axis, xs, vertical=False, height=height),
    ]
    if y_axis is not None and ys is not None:
        parts += _axis(y_axis, ys, vertical=True, height=height)
    cut = entry.get("cut")
    if cut and cut["segments"]:
        parts.append('<g class="cut">')
        for segment in cut["segments"]:
            points = " ".join(
                f"{_f(xs(px))},{_f(_TOP + i * height if ys is None else ys(py))}"
                for i, (px, py) in enumerate(segment))
            parts.append(f'<polyline points="{points}" fill="none" stroke="{_INK}" '
                         'stroke-width="2.5" stroke-linejoin="round"/>')
        parts.append("</g>")
    strip_y = _TOP + height / 2
    field_x = x_axis["field"]
    field_y = y_axis["field"] if y_axis is not None else None
    state, message = entry["state"], entry["message"]
    sx, sy = _value(state[field_x])[0], (_value(state[field_y])[0] if field_y else None)
    mx, my = _value(message[field_x])[0], (_value(message[field_y])[0] if field_y else None)
    start = (xs(sx), ys(sy) if ys is not None and sy is not None else strip_y)
    end = (xs(mx), ys(my) if ys is not None and my is not None else strip_y)
    if math.dist(start, end) > 12:
        shrink = 9 / math.dist(start, end)
        tip = (end[0] - (end[0] - start[0]) * shrink, end[1] - (end[1] - start[1]) * shrink)
        parts.append(f'<line class="witness-shift" x1="{_f(start[0])}" y1="{_f(start[1])}" '
                     f'x2="{_f(tip[0])}" y2="{_f(tip[1])}" stroke="{_BAD}" '
                     f'stroke-width="1.5" marker-end="url(#{prefix}-arrow)"/>')
    parts += _marker("state", state[field_x], state.get(field_y) if field_y else None,
                     xs=xs, ys=ys, strip_y=strip_y)
    parts += _marker("message", message[field_x],
                     message.get(field_y) if field_y else None, xs=xs, ys=ys, strip_y=strip_y)
    parts += _legend(entry, actions, prefix, entry.get("fail_closed_action", ""))
    parts.append("</svg>")
    return "\n".join(parts)
