"""Decision maps: each refuted numeric perturbation's witness on a slice of the policy.

A refuted row whose witness changes one or two numeric decision fields (a rounding, a
widened interval, a perturbation of your own that moves a number) gets a map: a grid
over the fields the crossed cut involves, every other field held at the witness's
true value, each cell labelled with the action the contract's own policy
(:meth:`~handoffs.contracts.Contract.evaluate`) gives there (``undetermined`` where a
straddled interval leaves it open: a receiver fails closed). The cut is the first
policy comparison whose truth the perturbation changed, in the first rule where the
true state and the message part ways; it is drawn as the points where its two sides
are equal. A cut over one field is drawn against the numeric field along which the
decision varies most in the slice (a 1-D strip when the policy reads no other).

The maps are data in ``report.json`` (``decision_maps``); the HTML report draws them
(:mod:`handoffs.lab._render._map`). Sampling is bounded: at most :data:`CELLS` ×
:data:`CELLS` evaluations a map and :data:`MAPS_LIMIT` maps a report (rows that share
a witness share its map).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any, Final

from handoffs.contracts import Contract, FieldKind, FieldSpec, Interval
from handoffs.contracts.policy import Arith, Compare, walk_conditions

__all__ = ["CELLS", "CODES", "MAPS_LIMIT", "UNDETERMINED", "decision_maps", "reference_rule",
           "straddled_cut"]

CELLS: Final = 60
"""Cells along each axis of a map (fewer for an integer field with fewer values)."""
MAPS_LIMIT: Final = 24
"""Maps a report draws; rows beyond are counted in its note."""
UNDETERMINED: Final = "undetermined"
"""A cell where the policy is undetermined (the receiver fails closed)."""
CODES: Final = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
"""A cell's action as one character: its index in the map's ``actions``."""
_CUT_POINTS: Final = 121
_PROBE: Final = 12

_NUMERIC: Final = (FieldKind.INT, FieldKind.FLOAT, FieldKind.INTERVAL)


def _leaf_compare(condition: Any) -> Compare | None:
    if isinstance(condition, Compare):
        return condition
    comparison = getattr(condition, "comparison", None)
    return comparison if isinstance(comparison, Compare) else None


def _leaves(condition: Any) -> list[tuple[Any, Compare]]:
    return [(c, found) for c in walk_conditions(condition)
            if (found := _leaf_compare(c)) is not None]


def crossed_cut(contract: Contract[Any, Any], truth: Mapping[str, Any],
                sent: Mapping[str, Any], fields: Sequence[str]) -> tuple[str, Compare] | None:
    """The rule and comparison where ``truth`` and ``sent`` (typed views) part ways: the
    first rule whose truth differs between them, and in it the first comparison reading
    one of ``fields`` whose truth differs; ``None`` when no rule does.
    """
    for rule in contract.policy.rules:
        if rule.when.evaluate(truth) == rule.when.evaluate(sent):
            continue
        for _, compare in _leaves(rule.when):
            if compare.reads() & set(fields) and \
                    compare.evaluate(truth) != compare.evaluate(sent):
                return rule.name, compare
        return None
    return None


def straddled_cut(contract: Contract[Any, Any], view: Mapping[str, Any]) -> str | None:
    """Where the policy is undetermined on ``view``: ``straddles `<cut>` (rule <name>)``,
    naming the comparison left unknown in the first rule left unknown (or the fields
    missing there); ``None`` when the policy decides.
    """
    for rule in contract.policy.rules:
        truth = rule.when.evaluate(view)
        if truth is True:
            return None
        if truth is False:
            continue
        for condition, compare in _leaves(rule.when):
            if compare.evaluate(view) is not None:
                continue
            missing = sorted(n for n in compare.reads() if n not in view)
            if missing:
                return (f"misses {', '.join(missing)} for `{condition.describe()}` "
                        f"(rule {rule.name})")
            return f"straddles `{condition.describe()}` (rule {rule.name})"
        missing = sorted(n for n in rule.when.reads() if n not in view)
        what = f"misses {', '.join(missing)}" if missing else "leaves undetermined"
        return f"{what} for `{rule.when.describe()}` (rule {rule.name})"
    return None


def reference_rule(contract: Contract[Any, Any], view: Mapping[str, Any]) -> str:
    """The policy's deciding rule on a true state, or, where the policy is undetermined
    there, the cut it straddles (:func:`straddled_cut`): what a report names beside a
    reference action.
    """
    outcome = contract.evaluate(view)
    if outcome.determined:
        return outcome.rule
    return straddled_cut(contract, view) or f"undetermined at rule {outcome.rule}"


def _typed(contract: Contract[Any, Any], state: Mapping[str, Any]) -> dict[str, Any] | None:
    view: dict[str, Any] = {}
    for spec in contract.fields:
        if spec.name not in state:
            continue
        value = state[spec.name]
        try:
            view[spec.name] = None if value is None else spec.read(value)
        except (ValueError, TypeError):
            return None
    return view


def _centre(value: Any) -> float:
    return (float(value.lo) + float(value.hi)) / 2 if isinstance(value, Interval) \
        else float(value)


def _axis_values(spec: FieldSpec) -> list[float]:
    lo, hi = float(spec.minimum or 0), float(spec.maximum or 0)
    if spec.kind is FieldKind.INT and hi - lo + 1 <= CELLS:
        return [float(v) for v in range(int(lo), int(hi) + 1)]
    step = (hi - lo) / CELLS
    return [lo + step * (i + 0.5) for i in range(CELLS)]


def _placed(spec: FieldSpec, centre: float, half: float) -> Any:
    lo, hi = float(spec.minimum or 0), float(spec.maximum or 0)
    if spec.kind is FieldKind.INT:
        return int(min(max(round(centre), lo), hi))
    if spec.kind is FieldKind.INTERVAL:
        return Interval(max(centre - half, lo), min(centre + half, hi))
    return min(max(centre, lo), hi)


def _label(contract: Contract[Any, Any], view: Mapping[str, Any]) -> str:
    outcome = contract.evaluate(view)
    return UNDETERMINED if outcome.action is None else str(outcome.action.value)


def _half(value: Any) -> float:
    return (float(value.hi) - float(value.lo)) / 2 if isinstance(value, Interval) else 0.0


def _variation(contract: Contract[Any, Any], base: Mapping[str, Any], x: FieldSpec,
               y: FieldSpec) -> int:
    """How often the action changes between neighbouring cells of a coarse grid."""
    xs = _axis_values(x)[:: max(len(_axis_values(x)) // _PROBE, 1)]
    ys = _axis_values(y)[:: max(len(_axis_values(y)) // _PROBE, 1)]
    hx, hy = _half(base[x.name]), _half(base[y.name])
    grid = [[_label(contract, {**base, x.name: _placed(x, vx, hx), y.name: _placed(y, vy, hy)})
             for vx in xs] for vy in ys]
    changes = sum(a != b for row in grid for a, b in itertools.pairwise(row))
    return changes + sum(a != b for r0, r1 in itertools.pairwise(grid)
                         for a, b in zip(r0, r1, strict=True))


def _second_axis(contract: Contract[Any, Any], base: Mapping[str, Any], x: FieldSpec,
                 compare: Compare | None) -> FieldSpec | None:
    read = contract.policy.reads()
    numeric = [s for s in contract.fields if s.kind in _NUMERIC and s.name != x.name
               and s.name in read and base.get(s.name) is not None]
    if compare is not None:
        shared = [s for s in numeric if s.name in compare.reads()]
        if shared:
            return shared[0]
    if not numeric:
        return None
    rules = {s.name: sum(s.name in r.when.reads() for r in contract.policy.rules)
             for s in numeric}
    return max(numeric, key=lambda s: (_variation(contract, base, x, s), rules[s.name],
                                       -numeric.index(s)))


def _solve(compare: Compare, name: str, view: Mapping[str, Fraction]) -> float | None:
    try:
        value = Arith("-", compare.left, compare.right).solve(name, Fraction(0), view)
        return None if value is None else float(value)
    except (ZeroDivisionError, OverflowError, ValueError):
        return None


def _exact(value: Any) -> Fraction | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, Interval):
        value = _centre(value)
    if isinstance(value, int | float):
        return Fraction(value)
    return None


def _cut_segments(compare: Compare, base: Mapping[str, Any], x: FieldSpec,
                  y: FieldSpec | None) -> list[list[list[float]]]:
    """The points where the comparison's two sides are equal, in the slice: a vertical
    line per cut of ``x`` when it reads no ``y``, else a polyline (solved for ``y``
    along ``x``, or for ``x`` along ``y``), broken where it leaves the map.
    """
    view = {n: v for n in compare.reads() if (v := _exact(base.get(n))) is not None}
    x_lo, x_hi = float(x.minimum or 0), float(x.maximum or 0)
    y_lo, y_hi = (0.0, 1.0) if y is None else (float(y.minimum or 0), float(y.maximum or 0))
    if y is None or y.name not in compare.reads():
        if not compare.invertible(x.name):
            return []
        value = _solve(compare, x.name, {k: v for k, v in view.items() if k != x.name})
        if value is None or not x_lo <= value <= x_hi:
            return []
        return [[[value, y_lo], [value, y_hi]]]
    along, solve, lo, hi = (x, y, x_lo, x_hi) if compare.invertible(y.name) else (
        y, x, y_lo, y_hi)
    if not compare.invertible(solve.name):
        return []
    s_lo, s_hi = float(solve.minimum or 0), float(solve.maximum or 0)
    segments: list[list[list[float]]] = []
    current: list[list[float]] = []
    for i in range(_CUT_POINTS):
        at = lo + (hi - lo) * i / (_CUT_POINTS - 1)
        others = {k: v for k, v in view.items() if k not in (x.name, y.name)}
        found = _solve(compare, solve.name, {**others, along.name: Fraction(at)})
        if found is None or not s_lo <= found <= s_hi or not math.isfinite(found):
            if len(current) > 1:
                segments.append(current)
            current = []
            continue
        current.append([at, found] if along is x else [found, at])
    if len(current) > 1:
        segments.append(current)
    return segments


def _axis_json(spec: FieldSpec, values: Sequence[float], half: float) -> dict[str, Any]:
    return {"field": spec.name, "kind": spec.kind.value, "lo": float(spec.minimum or 0),
            "hi": float(spec.maximum or 0), "values": list(values), "half_width": half}


def _point(value: Any) -> Any:
    if isinstance(value, Interval):
        return {"lo": float(value.lo), "hi": float(value.hi)}
    return float(value)


def _map(contract: Contract[Any, Any], row: Mapping[str, Any]) -> dict[str, Any] | None:
    witness = row.get("witness")
    if not isinstance(witness, Mapping) or not isinstance(witness.get("message"), Mapping):
        return None
    truth = _typed(contract, witness["state"])
    sent = _typed(contract, witness["message"])
    if truth is None or sent is None:
        return None
    moved = [s for s in contract.fields if s.kind in _NUMERIC
             and truth.get(s.name) is not None and sent.get(s.name) is not None
             and truth[s.name] != sent[s.name]]
    others = [s for s in contract.fields if s.kind not in _NUMERIC
              and truth.get(s.name) != sent.get(s.name)]
    if not moved or len(moved) > 2 or others:
        return None
    x = moved[0]
    crossed = crossed_cut(contract, truth, sent, [s.name for s in moved])
    compare = crossed[1] if crossed else None
    y = moved[1] if len(moved) == 2 else _second_axis(contract, truth, x, compare)
    hx, hy = _half(truth[x.name]), (_half(truth[y.name]) if y is not None else 0.0)
    xs = _axis_values(x)
    ys: list[float | None] = list(_axis_values(y)) if y is not None else [None]
    labels: list[str] = []
    grid: list[list[int]] = []
    for vy in ys:
        cells: list[int] = []
        for vx in xs:
            view = {**truth, x.name: _placed(x, vx, hx)}
            if y is not None and vy is not None:
                view[y.name] = _placed(y, vy, hy)
            label = _label(contract, view)
            if label not in labels:
                labels.append(label)
            cells.append(labels.index(label))
        grid.append(cells)
    order = [str(a.value) for a in contract.actions if str(a.value) in labels]
    order += [label for label in labels if label not in order]
    remap = {labels.index(label): order.index(label) for label in labels}
    axes = [x.name] if y is None else [x.name, y.name]
    return {
        "strategies": [row["strategy"]],
        "perturbation": row["perturbation"],
        "x": _axis_json(x, xs, hx),
        "y": None if y is None else _axis_json(y, _axis_values(y), hy),
        "held": {k: v for k, v in witness["state"].items() if k not in axes},
        "actions": order,
        "fail_closed_action": str(contract.fail_closed_action.value),
        "grid": ["".join(CODES[remap[c]] for c in cells) for cells in grid],
        "cut": None if crossed is None else {
            "rule": crossed[0], "condition": compare.describe() if compare else "",
            "segments": [] if compare is None else _cut_segments(compare, truth, x, y)},
        "state": {name: _point(truth[name]) for name in axes},
        "message": {name: _point(sent[name]) for name in axes},
        "reference_action": witness["reference_action"],
        "received_action": witness["received_action"],
        "case_id": witness.get("case_id"),
    }


def decision_maps(contract: Contract[Any, Any], results: Sequence[Mapping[str, Any]]
                  ) -> dict[str, Any]:
    """The report's ``decision_maps``: a map per refuted numeric witness (rows with the
    same perturbation and witness share one), up to :data:`MAPS_LIMIT`, and how many
    refuted numeric rows there were.
    """
    maps: list[dict[str, Any]] = []
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    rows = 0
    for row in results:
        if row.get("verdict") != "refuted" or not contract.policy.rules:
            continue
        witness = row.get("witness") or {}
        key = (row["perturbation"], repr(witness.get("state")), repr(witness.get("message")))
        if key in seen:
            seen[key]["strategies"].append(row["strategy"])
            rows += 1
            continue
        if len(maps) >= MAPS_LIMIT or len(contract.actions.__members__) + 1 > len(CODES):
            if _movable(contract, row):
                rows += 1
            continue
        drawn = _map(contract, row)
        if drawn is None:
            continue
        rows += 1
        seen[key] = drawn
        maps.append(drawn)
    return {"maps": maps, "rows": rows, "cells": CELLS}


def _movable(contract: Contract[Any, Any], row: Mapping[str, Any]) -> bool:
    witness = row.get("witness") or {}
    state, message = witness.get("state") or {}, witness.get("message") or {}
    return any(s.kind in _NUMERIC and state.get(s.name) != message.get(s.name)
               for s in contract.fields)
