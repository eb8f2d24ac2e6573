"""Interval pruning of the boundary queries (internal; see ``analysis``).

Each region of a policy (rule ``i`` decides: the earlier guards definitely false, its own
definitely true) is over-approximated by a *box*: a closed interval per numeric value
(an :class:`~handoffs.contracts.Interval` field has two, its ends) and a set of values
per boolean or enum field, narrowed from the declared domain by the guards with
interval arithmetic (HC4-style forward evaluation and backward narrowing of each
comparison). A box holds every state of its region, so when two regions' boxes cannot
meet where a boundary query needs them to (equal off the axis, within δ along it, near
the cut of an expression axis), the solver would answer unsat and is not asked: the
answers are the same, the solver does less.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from handoffs.contracts._analysis._geometry import _Axis
from handoffs.contracts._contract import Contract
from handoffs.contracts._fields import FieldKind, FieldSpec
from handoffs.contracts._policy import (
    AllOf,
    Always,
    AnyOf,
    Arith,
    Compare,
    Condition,
    Const,
    Expr,
    Field,
    Is,
    Not,
    Over,
    Under,
    _rational,
)

Span = tuple[Fraction, Fraction]  # a closed interval lo <= hi
Key = tuple[str, int]  # a numeric value: (field, 0) for a point or an interval's lo, 1 its hi


class Box:
    """A closed box over a contract's decision values (an over-approximation of a set
    of states): ``spans`` per numeric value, ``sets`` of the values a boolean or enum
    field may hold.
    """

    __slots__ = ("sets", "spans")

    def __init__(self, spans: dict[Key, Span], sets: dict[str, frozenset[Any]]) -> None:
        self.spans = spans
        self.sets = sets

    def copy(self) -> Box:
        """An independent copy."""
        return Box(dict(self.spans), dict(self.sets))

    def hull(self, other: Box) -> Box:
        """The smallest box holding both."""
        spans = {k: (min(a[0], other.spans[k][0]), max(a[1], other.spans[k][1]))
                 for k, a in self.spans.items()}
        sets = {k: a | other.sets[k] for k, a in self.sets.items()}
        return Box(spans, sets)


def _exact(value: Any) -> Fraction:
    return value if isinstance(value, Fraction) else (
        _rational(float(value)) if isinstance(value, float) else Fraction(value))


def domain_box(contract: Contract[Any, Any]) -> Box:
    """The box of the declared domain (every field's bounds and values)."""
    spans: dict[Key, Span] = {}
    sets: dict[str, frozenset[Any]] = {}
    for spec in contract.fields:
        if spec.kind is FieldKind.BOOL:
            sets[spec.name] = frozenset((False, True))
        elif spec.kind is FieldKind.ENUM:
            sets[spec.name] = frozenset(spec.domain() or ())
        else:
            span = _exact(spec.minimum or 0), _exact(spec.maximum or 0)
            if spec.kind is FieldKind.INT:  # the solver's integer bounds
                span = Fraction(-((-span[0].numerator) // span[0].denominator)), Fraction(
                    span[1].numerator // span[1].denominator)
            spans[(spec.name, 0)] = span
            if spec.kind is FieldKind.INTERVAL:
                spans[(spec.name, 1)] = span
    return Box(spans, sets)


class Pruner:
    """The region boxes of a contract's policy and the test of a boundary candidate."""

    def __init__(self, contract: Contract[Any, Any]) -> None:
        self.specs: Mapping[str, FieldSpec] = contract.field_map
        self.ranged = {s.name for s in contract.fields if s.kind is FieldKind.INTERVAL}
        box: Box | None = domain_box(contract)
        self.boxes: list[Box | None] = []  # rule i's region (last: the default's)
        for rule in contract.policy.rules:
            self.boxes.append(None if box is None else self.narrow(box, rule.when, True))
            box = None if box is None else self.narrow(box, rule.when, False)
        self.boxes.append(box)
        self._floats = [_floats(b) for b in self.boxes]
        self._keys: dict[str, list[Key]] = {}  # a field's numeric values
        for key in domain_box(contract).spans:
            self._keys.setdefault(key[0], []).append(key)
        self._apart_cache: dict[tuple[int, int], frozenset[str]] = {}
        self._values: dict[tuple[int, str], Span | None] = {}

    # narrowing ---------------------------------------------------------------------

    def narrow(self, box: Box, condition: Condition,  # noqa: PLR0911 - one per kind
               truth: bool) -> Box | None:
        """A box holding every state of ``box`` where ``condition`` is definitely
        ``truth`` (``None``: there is none).
        """
        if isinstance(condition, Always):
            return box if truth else None
        if isinstance(condition, Not):
            return self.narrow(box, condition.operand, not truth)
        if isinstance(condition, AllOf | AnyOf):
            every = truth is isinstance(condition, AllOf)  # each operand must hold
            if every:
                found: Box | None = box
                for operand in condition.operands:
                    found = None if found is None else self.narrow(found, operand, truth)
                return found
            hull: Box | None = None
            for operand in condition.operands:
                part = self.narrow(box, operand, truth)
                if part is not None:
                    hull = part if hull is None else hull.hull(part)
            return hull
        if isinstance(condition, Is):
            return self._is(box, condition, truth)
        if isinstance(condition, Over | Under):
            return self._compare(box, condition.comparison, truth)
        if isinstance(condition, Compare):
            return self._compare(box, condition, truth)
        return box  # nothing known: the whole box

    def _is(self, box: Box, condition: Is, truth: bool) -> Box | None:
        values = box.sets.get(condition.field)
        if values is None:
            return box
        spec = self.specs[condition.field]
        value = condition.value
        if spec.kind is FieldKind.BOOL and not (value is True or value is False):
            return box
        if spec.kind is FieldKind.ENUM and not (isinstance(value, enum.Enum)
                                                and value in (spec.domain() or ())):
            return box
        left = values & {value} if truth else values - {value}
        if not left:
            return None
        found = box.copy()
        found.sets[condition.field] = left
        return found

    def value(self, expr: Expr, box: Box) -> Span | None:
        """The interval holding every value (every end, for ranges) ``expr`` takes on
        ``box``; ``None`` when a divisor may be 0 (the comparison is never decided
        there, and nothing is pruned).
        """
        if isinstance(expr, Field):
            if expr.name in self.ranged:
                return box.spans[(expr.name, 0)][0], box.spans[(expr.name, 1)][1]
            return box.spans.get((expr.name, 0))
        if isinstance(expr, Const):
            return expr.exact, expr.exact
        if isinstance(expr, Arith):
            a, b = self.value(expr.left, box), self.value(expr.right, box)
            if a is None or b is None:
                return None
            return _combine(expr.op, a, b)
        return None

    def _compare(self, box: Box, compare: Compare, truth: bool) -> Box | None:
        left, right = self.value(compare.left, box), self.value(compare.right, box)
        if left is None or right is None:
            return box
        lo, hi = left[0] - right[1], left[1] - right[0]  # holds left - right, every end
        above = compare.op in (">", ">=")
        strict = compare.op in (">", "<") if truth else compare.op in (">=", "<=")
        positive = above is truth  # definitely truth: the difference is > 0 (or >= 0)
        # true '>': lo(l) - hi(r) > 0; false '>': hi(l) - lo(r) <= 0 (and mirrored)
        if positive and (hi < 0 or (strict and hi == 0)):
            return None
        if not positive and (lo > 0 or (strict and lo == 0)):
            return None
        target = (Fraction(0), hi) if positive else (lo, Fraction(0))
        reads = compare.reads()
        if reads & self.ranged:
            return self._ranged(box, compare, target, positive) if len(reads) == 1 else box
        found = box.copy()
        difference = Arith("-", compare.left, compare.right)
        return found if self._back(difference, target, found) else None

    def _ranged(self, box: Box, compare: Compare, target: Span,
                positive: bool) -> Box | None:
        """``Field(range) op Const`` (either side): the end that decides is narrowed."""
        if isinstance(compare.left, Field) and isinstance(compare.right, Const):
            name, c, sign = compare.left.name, compare.right.exact, 1
        elif isinstance(compare.right, Field) and isinstance(compare.left, Const):
            name, c, sign = compare.right.name, compare.left.exact, -1
        else:
            return box
        # sign * (field - c) lies in target at the deciding end of the field
        span = (target[0] + c, target[1] + c) if sign > 0 else (c - target[1], c - target[0])
        found = box.copy()
        lo_key, hi_key = (name, 0), (name, 1)
        # a positive difference: its low end decides (the field's low end when the field
        # is on the left, its high end when on the right); else its high end
        end = lo_key if positive is (sign > 0) else hi_key
        if not _meet(found, end, span):
            return None
        lo, hi = found.spans[lo_key], found.spans[hi_key]
        found.spans[lo_key] = (lo[0], min(lo[1], hi[1]))  # lo <= hi
        found.spans[hi_key] = (max(hi[0], lo[0]), hi[1])
        if found.spans[lo_key][0] > found.spans[lo_key][1] or (
                found.spans[hi_key][0] > found.spans[hi_key][1]):
            return None
        return found

    def _back(self, expr: Expr, span: Span,  # noqa: PLR0911, PLR0912 - one per operator
              box: Box) -> bool:
        """Narrow ``box`` so that the point-valued ``expr`` can lie in ``span``; whether
        it still can.
        """
        now = self.value(expr, box)
        if now is None:
            return True
        lo, hi = max(now[0], span[0]), min(now[1], span[1])
        if lo > hi:
            return False
        if isinstance(expr, Field):
            return _meet(box, (expr.name, 0), (lo, hi))
        if isinstance(expr, Const):
            return True
        if not isinstance(expr, Arith):
            return True
        a, b = self.value(expr.left, box), self.value(expr.right, box)
        if a is None or b is None:
            return True
        if expr.op == "+":
            return (self._back(expr.left, (lo - b[1], hi - b[0]), box)
                    and self._back(expr.right, (lo - _end(self, expr.left, box, 1),
                                                hi - _end(self, expr.left, box, 0)), box))
        if expr.op == "-":
            return (self._back(expr.left, (lo + b[0], hi + b[1]), box)
                    and self._back(expr.right, (_end(self, expr.left, box, 0) - hi,
                                                _end(self, expr.left, box, 1) - lo), box))
        if expr.op == "*":
            if not _holds_zero(b):
                quotient = _combine("/", (lo, hi), b)
                if quotient is not None and not self._back(expr.left, quotient, box):
                    return False
            a = self.value(expr.left, box) or a
            if not _holds_zero(a):
                quotient = _combine("/", (lo, hi), a)
                if quotient is not None and not self._back(expr.right, quotient, box):
                    return False
        return True  # division: forward only

    # candidates --------------------------------------------------------------------

    def meets(self, i: int, j: int, axis: _Axis) -> bool:
        """Whether a state of region ``i`` and one of region ``j`` can be a boundary
        pair along ``axis``: equal off the axis, within δ along it, both near its cut.
        """
        first, second = self.boxes[i], self.boxes[j]
        if first is None or second is None:
            return False
        if self._apart(i, j) - axis.reads:  # a field off the axis cannot be equal
            return False
        if axis.kind == "field":
            delta = _exact(axis.delta)
            return all(max(first.spans[key][0] - second.spans[key][1],
                           second.spans[key][0] - first.spans[key][1]) <= delta
                       for key in self._keys[axis.name])
        one, two = self._along(i, axis), self._along(j, axis)
        if one is None or two is None:
            return True
        delta = _exact(axis.delta)
        if max(one[0] - two[1], two[0] - one[1]) > delta:
            return False
        cut = axis.cut
        return cut is None or not any(s[0] - cut > delta or cut - s[1] > delta
                                      for s in (one, two))

    def _apart(self, i: int, j: int) -> frozenset[str]:
        """The fields on which region ``i``'s box and region ``j``'s do not meet."""
        key = (i, j) if i < j else (j, i)
        found = self._apart_cache.get(key)
        if found is None:
            first, second = self._floats[i], self._floats[j]
            names = {key[0] for key, a in first.items()
                     if a[0] > second[key][1] or second[key][0] > a[1]}
            one, two = self.boxes[i], self.boxes[j]
            assert one is not None  # noqa: S101 - live boxes only
            assert two is not None  # noqa: S101
            names.update(name for name, values in one.sets.items()
                         if not values & two.sets[name])
            found = self._apart_cache[key] = frozenset(names)
        return found

    def _along(self, i: int, axis: _Axis) -> Span | None:
        key = (i, axis.name)
        if key not in self._values:
            box = self.boxes[i]
            self._values[key] = None if box is None else self.value(axis.expr, box)
        return self._values[key]


def _floats(box: Box | None) -> dict[Key, tuple[float, float]]:
    """The box's spans as floats rounded outwards (each holds the exact span)."""
    if box is None:
        return {}
    return {key: (math.nextafter(float(lo), -math.inf), math.nextafter(float(hi), math.inf))
            for key, (lo, hi) in box.spans.items()}


def _end(pruner: Pruner, expr: Expr, box: Box, index: int) -> Fraction:
    found = pruner.value(expr, box)
    assert found is not None  # noqa: S101 - checked by the caller on the same box
    return found[index]


def _meet(box: Box, key: Key, span: Span) -> bool:
    now = box.spans[key]
    lo, hi = max(now[0], span[0]), min(now[1], span[1])
    if lo > hi:
        return False
    box.spans[key] = (lo, hi)
    return True


def _holds_zero(span: Span) -> bool:
    return span[0] <= 0 <= span[1]


def _combine(op: str, a: Span, b: Span) -> Span | None:
    if op == "+":
        return a[0] + b[0], a[1] + b[1]
    if op == "-":
        return a[0] - b[1], a[1] - b[0]
    if op == "/":
        if _holds_zero(b):
            return None
        b = (1 / b[1], 1 / b[0])
    products = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return min(products), max(products)

