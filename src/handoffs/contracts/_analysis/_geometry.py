"""The solver's view of a contract: its conditions, numeric axes, the Z3 wrapper, the
rounding of a model back into a state, and the cuts of its numeric surfaces (internal;
see ``analysis``).
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any, Final

import attrs

from handoffs.contracts._analysis._results import _DIGITS, Cuts, State, Surface
from handoffs.contracts._contract import Contract
from handoffs.contracts._fields import FieldKind, FieldSpec, Interval
from handoffs.contracts._policy import (
    Arith,
    Compare,
    Condition,
    Const,
    Expr,
    Field,
    NotApplicable,
    Predicate,
    _rational,
)
from handoffs.contracts._rules import (
    arithmetic_conditions,
    walk_conditions,
)


def _conditions(contract: Contract[Any, Any]) -> list[Condition]:
    found = [rule.when for rule in contract.policy.rules]
    found += [h.when for h in contract.hard_constraints if h.when is not None]
    return found


def _opaque(condition: Condition) -> bool:
    return any(isinstance(c, Predicate) for c in walk_conditions(condition))


def _numeric(spec: FieldSpec) -> bool:
    return spec.kind in (FieldKind.INT, FieldKind.FLOAT, FieldKind.INTERVAL)


def _span(spec: FieldSpec) -> float:
    return float(spec.maximum or 0) - float(spec.minimum or 0)


@attrs.frozen
class _Axis:
    name: str
    kind: str  # "field" | "expression"
    expr: Expr
    reads: frozenset[str]
    delta: float
    cut: Fraction | None = None  # an expression's compared constant (0 for a difference)


def _field_delta(spec: FieldSpec, ratio: float) -> float:
    if spec.kind is FieldKind.INT:
        return 1.0
    return _tidy(max(_span(spec) * ratio, 1e-12))


def _tidy(delta: float) -> float:
    """δ as a short decimal (``1e-4``, not ``9.999999999999999e-05``)."""
    return float(f"{delta:.12g}")


_SLACK: Final = 1 + 1e-6  # float rounding of a state's value near its cut


def _axes(contract: Contract[Any, Any], conditions: Sequence[Condition],
          ratio: float) -> list[_Axis]:
    axes: dict[str, _Axis] = {}
    reads = frozenset().union(*(c.reads() for c in conditions)) if conditions else frozenset()
    for spec in contract.fields:
        if spec.name in reads and _numeric(spec):
            axes[spec.name] = _Axis(spec.name, "field", Field(spec.name),
                                    frozenset((spec.name,)), _field_delta(spec, ratio))
    ranges = {s.name: Interval(float(s.minimum or 0), float(s.maximum or 0))
              for s in contract.fields if _numeric(s)}
    for condition in conditions:
        for compare in arithmetic_conditions(condition):
            if len(compare.reads()) < 2:
                continue
            if isinstance(compare.right, Const):
                expr, cut = compare.left, compare.right.exact
            else:
                expr, cut = Arith("-", compare.left, compare.right), Fraction(0)
            text = expr.describe()
            if text in axes:
                continue
            found = expr.bounds(ranges)
            width = float(found[1] - found[0]) if found is not None else 1.0
            axes[text] = _Axis(text, "expression", expr, expr.reads(),
                               _tidy(max(width * ratio, 1e-12)), cut)
    return list(axes.values())


def _point(value: Any) -> Fraction:
    if isinstance(value, Interval):
        return (_rational(float(value.lo)) + _rational(float(value.hi))) / 2
    return _rational(float(value)) if isinstance(value, float) else Fraction(value)


def axis_value(expr: Expr, state: State) -> Fraction | None:
    """The value of an axis expression on a state (an interval's midpoint for a range);
    ``None`` when a field it reads is missing or absent.
    """
    try:
        found = expr.bounds(state)
    except NotApplicable:
        return None
    if found is None:
        return None
    return (found[0] + found[1]) / 2


_GRACE_S: Final = 0.05
"""How long past its time limit a query runs before the watchdog interrupts it, and how
often it interrupts again until the query returns."""


class _Watchdog:
    """Interrupts the z3 context of a query past its time limit, again and again until
    the query returns: the time limit z3 cannot lose.

    z3's own ``timeout`` cancels a query once, from a timer thread, and that one cancel
    is lost when it lands before the solver sets up its resource limit
    (``reslimit::push`` clears it) or before a sub-solver attaches its own limit (nlsat
    under the nonlinear arithmetic solver): the query then runs unbounded (seen with
    ``timeout_ms=1`` on a loaded machine, for minutes in big-number arithmetic).
    ``Context.interrupt()`` cancels the context's limit and every limit attached to it
    at that moment, so repeating it reaches whatever the query runs by then. It is
    polled where the timeout is: code that polls nothing still runs to its end.
    """

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # the thread does not fork

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._due: dict[int, tuple[float, Any]] = {}
        self._fired: set[int] = set()
        self._count = 0
        self._thread: threading.Thread | None = None
        self._wakes: float | None = None  # when the thread wakes (None: when notified)

    def arm(self, context: Any, seconds: float) -> int:
        """Watch a query on ``context`` that may run ``seconds``; its token."""
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="handoffs-z3-watchdog")
                self._thread.start()
            self._count += 1
            due = time.monotonic() + seconds
            self._due[self._count] = (due, context)
            if self._wakes is None or due < self._wakes:  # else it wakes early enough
                self._cond.notify()
            return self._count

    def disarm(self, token: int) -> bool:
        """Stop watching (no interrupt for ``token`` follows); whether it interrupted."""
        with self._cond:
            del self._due[token]
            fired = token in self._fired
            self._fired.discard(token)
            return fired

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                due = min((at for at, _ in self._due.values()), default=None)
                if due is None or due > now:
                    self._wakes = due
                    self._cond.wait(None if due is None else due - now)
                    continue
                for token, (at, context) in list(self._due.items()):
                    if at <= now:
                        context.interrupt()
                        self._fired.add(token)
                        self._due[token] = (now + _GRACE_S, context)


_WATCHDOG: Final = _Watchdog()


class _Solver:
    """One z3 solver with the time limit, counting undecided queries."""

    def __init__(self, z3: Any, timeout_ms: int, unknown: list[str]) -> None:
        self.z3 = z3
        self.solver = z3.Solver()
        self.solver.set("timeout", int(timeout_ms))
        self.limit = timeout_ms / 1000 + _GRACE_S
        self.unknown = unknown

    def add(self, *formulas: Any) -> None:
        self.solver.add(*formulas)

    def _solve(self, *assumptions: Any) -> Any:
        """``solver.check``, interrupted by the watchdog past the time limit."""
        token = _WATCHDOG.arm(self.solver.ctx, self.limit)
        try:
            return self.solver.check(*assumptions)
        finally:
            if _WATCHDOG.disarm(token):
                # An interrupt that landed as the query returned leaves the context
                # cancelled (the next push would fail): a check clears it.
                self.z3.Solver(ctx=self.solver.ctx).check()

    def check(self, what: str, *formulas: Any) -> tuple[str, Any]:
        self.solver.push()
        try:
            self.solver.add(*formulas)
            result = self._solve()
            if result == self.z3.sat:
                return "sat", self.solver.model()
            if result == self.z3.unsat:
                return "unsat", None
            self.unknown.append(what)
            return "unknown", None
        finally:
            self.solver.pop()

    def assuming(self, what: str, assumptions: Sequence[Any]) -> tuple[str, Any]:
        """Check what the solver holds under ``assumptions`` (literals): nothing is
        added or removed, so what it learned stays for the next check.
        """
        result = self._solve(*assumptions)
        if result == self.z3.sat:
            return "sat", self.solver.model()
        if result == self.z3.unsat:
            return "unsat", None
        self.unknown.append(what)
        return "unknown", None

    def core(self, what: str, assumptions: Sequence[Any]) -> tuple[str, list[Any]]:
        result = self._solve(*assumptions)
        if result == self.z3.unsat:
            return "unsat", list(self.solver.unsat_core())
        if result == self.z3.sat:
            return "sat", []
        self.unknown.append(what)
        return "unknown", []


def _round_state(contract: Contract[Any, Any], raw: Mapping[str, Any], digits: int) -> dict[
        str, Any]:
    state: dict[str, Any] = {}
    for spec in contract.fields:
        value = raw[spec.name]
        if value is None:  # an optional field, absent
            pass
        elif spec.kind is FieldKind.FLOAT:
            value = _clip(spec, _decimal(value, digits))
        elif spec.kind is FieldKind.INTERVAL:
            lo, hi = (_clip(spec, _decimal(v, digits)) for v in value)
            value = Interval(min(lo, hi), max(lo, hi))
        state[spec.name] = value
    return state


def _decimal(exact: Fraction, digits: int) -> float:
    return float(f"{float(exact):.{digits}g}")


def _clip(spec: FieldSpec, value: float) -> float:
    return min(max(value, float(spec.minimum or 0)), float(spec.maximum or 0))


def _materialise(contract: Contract[Any, Any], raws: Sequence[Mapping[str, Any]],
                 check: Callable[[Sequence[State]], bool]) -> tuple[State, ...] | None:
    """Model values as float states that the library's own evaluator confirms: the
    shortest decimal rounding (6 to 17 digits) for which ``check`` holds.
    """
    for digits in _DIGITS:
        states = tuple(_round_state(contract, raw, digits) for raw in raws)
        if check(states):
            return states
    return None


# ---------------------------------------------------------------------- the analysis




def _at_cut(expr: Expr, cut: float, delta: float, state: State) -> bool:
    """The expression's value on ``state`` (an interval for ranges) is within δ of
    ``cut``.
    """
    try:
        found = expr.bounds(state)
    except NotApplicable:  # an absent field: the expression has no value
        return False
    return found is not None and (float(found[0]) - delta * _SLACK <= cut
                                  <= float(found[1]) + delta * _SLACK)




def _surface_cuts(compare: Compare, name: str, bounds: Mapping[str, Interval]) -> list[float]:
    """The cut of ``name`` at every corner of the other fields' bounds; where a corner
    has none (``p = 0`` in ``p * h = 500``), just inside it, so that a cut that runs
    off to infinity there reaches the field's bound.
    """
    if not compare.invertible(name):
        return []
    difference = Arith("-", compare.left, compare.right)
    others = sorted(compare.reads() - {name})
    found: list[float] = []
    for corner in itertools.product(*((0, 1) for _ in others)):
        point: dict[str, Fraction] = {}
        inside: dict[str, Fraction] = {}
        for other, end in zip(others, corner, strict=True):
            lo, hi = (_rational(float(v)) for v in (bounds[other].lo, bounds[other].hi))
            nudge = (hi - lo) / 10**9
            point[other] = hi if end else lo
            inside[other] = hi - nudge if end else lo + nudge
        for view in (point, inside):
            value = difference.solve(name, Fraction(0), view)
            if value is not None:
                try:
                    found.append(float(value))
                except OverflowError:
                    found.append(math.inf if value > 0 else -math.inf)
                break
    return found


def _cuts(contract: Contract[Any, Any]) -> list[Cuts]:
    conditions = _conditions(contract)
    found: list[Cuts] = []
    bounds = {s.name: Interval(float(s.minimum or 0), float(s.maximum or 0))
              for s in contract.fields if _numeric(s)}
    for spec in contract.fields:
        if not _numeric(spec):
            continue
        lo, hi = float(spec.minimum or 0), float(spec.maximum or 0)
        points: set[float] = set()
        surfaces: list[Surface] = []
        for condition in conditions:
            for name, t in condition.thresholds():
                if name == spec.name and lo < t < hi:
                    points.add(float(t))
            for compare in arithmetic_conditions(condition):
                if spec.name not in compare.reads() or len(compare.reads()) < 2:
                    continue
                cuts = _surface_cuts(compare, spec.name, bounds)
                band = None
                if cuts:
                    b_lo, b_hi = max(min(cuts), lo), min(max(cuts), hi)
                    band = (b_lo, b_hi) if b_lo <= b_hi else None
                surface = Surface(compare.describe(),
                                  tuple(sorted(compare.reads() - {spec.name})), band)
                if surface not in surfaces:
                    surfaces.append(surface)
        ordered = sorted(points)
        edges = [lo, *ordered, hi]
        cells = tuple(itertools.pairwise(edges))
        if not points and not surfaces and spec.name not in contract.policy.reads():
            continue
        found.append(Cuts(spec.name, tuple(ordered), tuple(surfaces), cells,
                          max((b - a for a, b in cells), default=0.0)))
    return found


