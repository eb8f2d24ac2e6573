"""The compiler from a contract's declarative policy to z3 formulas (internal).

Each condition compiles to two formulas over a state's variables, *definitely true*
and *definitely false*, mirroring the three-valued (Kleene) evaluator of
:mod:`handoffs.contracts._policy` exactly: an :class:`Interval` field is two reals
``lo <= hi``, arithmetic is the evaluator's interval arithmetic (products of interval
ends through ``min``/``max``, a divisor interval holding 0 leaves the comparison
unknown), and a decision that an unknown rule leaves open is the contract's
fail-closed action, as :meth:`Contract.decide` makes it. An optional field (``T |
None``) is a presence boolean beside its value, the value pinned to a canonical one
(the lower bound, the first enum value, false) when absent so that equal states have
equal variables; :class:`Absent` reads the presence, and every other condition reading
an absent field is definitely false, as the evaluator makes it. An opaque
:class:`~handoffs.contracts.policy.Predicate` cannot compile: :class:`Opaque` is raised and
the analysis falls back to search.

Only :mod:`handoffs.contracts._analysis._solve` imports this module, and only when an
analysis runs: z3 is never imported by the core.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import z3  # type: ignore[import-untyped]

from handoffs._errors import InvalidArgument
from handoffs.contracts._contract import Contract
from handoffs.contracts._fields import FieldKind, FieldSpec, Interval
from handoffs.contracts._policy import (
    Absent,
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
    Predicate,
    Present,
    Under,
    _rational,
)

__all__ = ["Decision", "Opaque", "Pair", "StateVars", "decimal_value"]

Term = Any  # a z3 arithmetic or boolean term


class Opaque(Exception):
    """A condition holds an opaque :class:`Predicate` (arbitrary Python)."""


def _real(value: float | int | Fraction) -> Term:
    exact = value if isinstance(value, Fraction) else (
        _rational(float(value)) if isinstance(value, float) else Fraction(value))
    return z3.RealVal(f"{exact.numerator}/{exact.denominator}")


class StateVars:
    """The z3 variables of one decision state (``prefix`` keeps two states apart)."""

    def __init__(self, specs: Sequence[FieldSpec], prefix: str) -> None:
        self.specs = {spec.name: spec for spec in specs}
        self.vars: dict[str, tuple[Term, ...]] = {}
        self.present: dict[str, Term] = {}  # optional fields: true when a value is held
        self.domain: list[Term] = []
        for spec in specs:
            name = f"{prefix}{spec.name}"
            if spec.kind is FieldKind.BOOL:
                self.vars[spec.name] = (z3.Bool(name),)
            elif spec.kind is FieldKind.ENUM:
                v = z3.Int(name)
                self.vars[spec.name] = (v,)
                self.domain += [v >= 0, v < len(spec.domain() or ())]
            elif spec.kind is FieldKind.INTERVAL:
                lo, hi = z3.Real(name + ".lo"), z3.Real(name + ".hi")
                self.vars[spec.name] = (lo, hi)
                self.domain += [lo <= hi, lo >= _real(spec.minimum or 0),
                                hi <= _real(spec.maximum or 0)]
            else:
                v = z3.Int(name) if spec.kind is FieldKind.INT else z3.Real(name)
                self.vars[spec.name] = (v,)
                if spec.kind is FieldKind.INT:
                    self.domain += [v >= z3.IntVal(_ceil(spec.minimum)),
                                    v <= z3.IntVal(_floor(spec.maximum))]
                else:
                    self.domain += [v >= _real(spec.minimum or 0), v <= _real(spec.maximum or 0)]
            if spec.optional:
                flag = z3.Bool(name + ".present")
                self.present[spec.name] = flag
                self.domain.append(z3.Or(flag, z3.And(*self._canonical(spec))))

    def _canonical(self, spec: FieldSpec) -> list[Term]:
        """The value an absent field's variables hold (one absent state, one model)."""
        terms = self.vars[spec.name]
        if spec.kind is FieldKind.BOOL:
            return [z3.Not(terms[0])]
        if spec.kind is FieldKind.ENUM:
            return [terms[0] == 0]
        if spec.kind is FieldKind.INT:
            return [terms[0] == z3.IntVal(_ceil(spec.minimum))]
        return [t == _real(spec.minimum or 0) for t in terms]

    def presence(self, name: str) -> Term | None:
        """The field's presence boolean, or ``None`` when it is not optional."""
        return self.present.get(name)

    def pin(self, name: str, value: Any) -> list[Term]:
        """Formulas holding the field at a Python value of the state (``None``: absent)."""
        spec = self.specs[name]
        terms = self.vars[name]
        flag = self.present.get(name)
        if value is None:
            if flag is None:
                raise InvalidArgument(f"{name} is not optional and cannot be None")
            return [z3.Not(flag)]
        out: list[Term] = [] if flag is None else [flag]
        if spec.kind is FieldKind.BOOL:
            return [*out, terms[0] == z3.BoolVal(bool(value))]
        if spec.kind is FieldKind.ENUM:
            wires = [_wire(v) for v in spec.domain() or ()]
            return [*out, terms[0] == wires.index(_wire(value))]
        if spec.kind is FieldKind.INT:
            return [*out, terms[0] == int(value)]
        if spec.kind is FieldKind.INTERVAL:
            return [*out, terms[0] == _real(float(value.lo)), terms[1] == _real(float(value.hi))]
        return [*out, terms[0] == _real(float(value))]

    def bounds(self, name: str) -> tuple[Term, Term]:
        """The field's value as a pair of real terms ``(lo, hi)`` (equal for points)."""
        terms = self.vars[name]
        spec = self.specs[name]
        if spec.kind is FieldKind.INT:
            real = z3.ToReal(terms[0])
            return real, real
        if len(terms) == 2:
            return terms[0], terms[1]
        return terms[0], terms[0]

    def equal(self, other: StateVars, names: Sequence[str]) -> list[Term]:
        """The fields ``names`` hold the same value (or are both absent) in both states."""
        return [*(a == b for name in names
                  for a, b in zip(self.vars[name], other.vars[name], strict=True)),
                *(self.present[name] == other.present[name] for name in names
                  if name in self.present)]

    def value(self, model: Any, name: str) -> Any:
        """The field's value in a z3 model, as the Python value of the state."""
        spec = self.specs[name]
        terms = self.vars[name]
        flag = self.present.get(name)
        if flag is not None and not z3.is_true(model.eval(flag, model_completion=True)):
            return None
        if spec.kind is FieldKind.BOOL:
            return z3.is_true(model.eval(terms[0], model_completion=True))
        if spec.kind is FieldKind.ENUM:
            index = model.eval(terms[0], model_completion=True).as_long()
            return (spec.domain() or ())[index]
        if spec.kind is FieldKind.INT:
            return model.eval(terms[0], model_completion=True).as_long()
        exact = [_fraction(model.eval(t, model_completion=True)) for t in terms]
        return exact[0] if len(exact) == 1 else (exact[0], exact[1])


def _wire(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def _ceil(value: float | None) -> int:
    exact = _rational(float(value or 0))
    return -((-exact.numerator) // exact.denominator)


def _floor(value: float | None) -> int:
    exact = _rational(float(value or 0))
    return exact.numerator // exact.denominator


def _fraction(value: Any) -> Fraction:
    if z3.is_rational_value(value):  # "n/d" or "n": one call into z3, not four
        return Fraction(value.as_string())
    if z3.is_algebraic_value(value):  # an irrational root: its decimal approximation
        return Fraction(value.as_decimal(20).rstrip("?"))
    return Fraction(str(value))


def decimal_value(exact: Fraction, digits: int) -> float:
    """``exact`` rounded to ``digits`` significant decimal digits, as a float."""
    return float(f"{float(exact):.{digits}g}")


def _min(*terms: Term) -> Term:
    result = terms[0]
    for t in terms[1:]:
        result = z3.If(t < result, t, result)
    return result


def _max(*terms: Term) -> Term:
    result = terms[0]
    for t in terms[1:]:
        result = z3.If(t > result, t, result)
    return result


class Decision:
    """A compiled policy over one state: region formulas and the action term."""

    def __init__(self, contract: Contract[Any, Any], state: StateVars,
                 action_index: Mapping[str, int]) -> None:
        self.contract = contract
        self.state = state
        self.action_index = action_index
        self.regions: list[Term] = []       # rule i decides (last: the default)
        self.undetermined: list[Term] = []  # rule i is the first unknown rule
        earlier_false: list[Term] = []
        for rule in contract.policy.rules:
            true, false = self.condition(rule.when)
            prefix = z3.And(*earlier_false) if earlier_false else z3.BoolVal(True)
            self.regions.append(z3.And(prefix, true))
            self.undetermined.append(z3.And(prefix, z3.Not(true), z3.Not(false)))
            earlier_false.append(false)
        self.regions.append(z3.And(*earlier_false) if earlier_false else z3.BoolVal(True))
        self.guards_false = earlier_false
        fail_closed = z3.IntVal(action_index[contract.fail_closed_action.value])
        action: Term = z3.IntVal(action_index[contract.policy.default.value])
        for rule, region, open_ in reversed(list(zip(contract.policy.rules, self.regions,
                                                     self.undetermined, strict=False))):
            action = z3.If(region, z3.IntVal(action_index[rule.action.value]),
                           z3.If(open_, fail_closed, action))
        self.action = action
        self.open = z3.Or(*self.undetermined) if self.undetermined else z3.BoolVal(False)

    # ------------------------------------------------------------------ conditions

    def condition(self, condition: Condition) -> tuple[Term, Term]:  # noqa: PLR0911 - one per kind
        """``(definitely true, definitely false)`` of ``condition`` on the state."""
        if isinstance(condition, Always):
            return z3.BoolVal(True), z3.BoolVal(False)
        if isinstance(condition, Is):
            return self._is(condition)
        if isinstance(condition, Absent | Present):
            absent, present = self._absent(condition.field)
            return (absent, present) if isinstance(condition, Absent) else (present, absent)
        if isinstance(condition, Over | Under):  # sugar for a Compare
            return self._compare(condition.comparison)
        if isinstance(condition, Not):
            true, false = self.condition(condition.operand)
            return false, true
        if isinstance(condition, AllOf | AnyOf):
            parts = [self.condition(o) for o in condition.operands]
            trues = [p[0] for p in parts]
            falses = [p[1] for p in parts]
            if isinstance(condition, AllOf):
                return _and(trues), _or(falses)
            return _or(trues), _and(falses)
        if isinstance(condition, Compare):
            return self._compare(condition)
        if isinstance(condition, Predicate):
            raise Opaque(condition.description)
        raise Opaque(type(condition).__name__)

    def _absent(self, name: str) -> tuple[Term, Term]:
        """``(definitely absent, definitely present)`` of a field."""
        flag = self.state.presence(name)
        if flag is None:
            return z3.BoolVal(False), z3.BoolVal(True)
        return z3.Not(flag), flag

    def _is(self, condition: Is) -> tuple[Term, Term]:
        true, false = self._is_value(condition)
        if self.state.presence(condition.field) is None:
            return true, false
        absent, present = self._absent(condition.field)
        return z3.And(present, true), z3.Or(absent, false)

    def _is_value(self, condition: Is) -> tuple[Term, Term]:
        spec = self.state.specs[condition.field]
        term = self.state.vars[condition.field][0]
        if spec.kind is FieldKind.BOOL:
            if condition.value is True or condition.value is False:
                equal = term == z3.BoolVal(condition.value)
                return equal, z3.Not(equal)
        elif spec.kind is FieldKind.ENUM:
            domain = list(spec.domain() or ())
            if isinstance(condition.value, enum.Enum) and condition.value in domain:
                equal = term == z3.IntVal(domain.index(condition.value))
                return equal, z3.Not(equal)
        else:
            lo, hi = self.state.bounds(condition.field)
            if isinstance(condition.value, int | float) and not isinstance(condition.value,
                                                                          bool):
                if spec.kind is FieldKind.INTERVAL:  # an Interval never equals a number
                    return z3.BoolVal(False), z3.BoolVal(True)
                equal = lo == _real(condition.value)
                return equal, z3.Not(equal)
            if isinstance(condition.value, Interval) and spec.kind is FieldKind.INTERVAL:
                equal = z3.And(lo == _real(condition.value.lo), hi == _real(condition.value.hi))
                return equal, z3.Not(equal)
        return z3.BoolVal(False), z3.BoolVal(True)  # a value the field never holds

    def expression(self, expr: Expr) -> tuple[Term, Term, Term]:
        """``(lo, hi, defined)`` of ``expr`` in the evaluator's interval arithmetic."""
        if isinstance(expr, Field):
            lo, hi = self.state.bounds(expr.name)
            return lo, hi, z3.BoolVal(True)
        if isinstance(expr, Const):
            value = _real(expr.exact)
            return value, value, z3.BoolVal(True)
        if isinstance(expr, Arith):
            a_lo, a_hi, a_ok = self.expression(expr.left)
            b_lo, b_hi, b_ok = self.expression(expr.right)
            ok = z3.And(a_ok, b_ok)
            point_a = a_lo is a_hi
            point_b = b_lo is b_hi
            if expr.op == "+":
                return (*_same(a_lo + b_lo, a_hi + b_hi, point_a and point_b), ok)
            if expr.op == "-":
                return (*_same(a_lo - b_hi, a_hi - b_lo, point_a and point_b), ok)
            if expr.op == "/":
                ok = z3.And(ok, z3.Not(z3.And(b_lo <= 0, b_hi >= 0)))
                if point_b:
                    b_lo = b_hi = 1 / b_lo
                else:
                    b_lo, b_hi = 1 / b_hi, 1 / b_lo
            if point_a and point_b:
                product = a_lo * b_lo
                return product, product, ok
            products = (a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi)
            return _min(*products), _max(*products), ok
        raise Opaque(type(expr).__name__)

    def _compare(self, condition: Compare) -> tuple[Term, Term]:
        true, false = self._compare_values(condition)
        optional = sorted(n for n in condition.reads() if self.state.presence(n) is not None)
        if not optional:
            return true, false
        checks = [self._absent(name) for name in optional]
        absent = _or([a for a, _ in checks])
        present = _and([p for _, p in checks])
        return z3.And(present, true), z3.Or(absent, false)

    def _compare_values(self, condition: Compare) -> tuple[Term, Term]:
        a_lo, a_hi, a_ok = self.expression(condition.left)
        b_lo, b_hi, b_ok = self.expression(condition.right)
        ok = z3.And(a_ok, b_ok)
        lo, hi = a_lo - b_hi, a_hi - b_lo
        op = condition.op
        if op == ">":
            true, false = lo > 0, hi <= 0
        elif op == ">=":
            true, false = lo >= 0, hi < 0
        elif op == "<":
            true, false = hi < 0, lo >= 0
        else:
            true, false = hi <= 0, lo > 0
        return z3.And(ok, true), z3.And(ok, false)


def _same(lo: Term, hi: Term, point: bool) -> tuple[Term, Term]:
    return (lo, lo) if point else (lo, hi)


def _and(terms: list[Term]) -> Term:
    return z3.And(*terms) if terms else z3.BoolVal(True)


def _or(terms: list[Term]) -> Term:
    return z3.Or(*terms) if terms else z3.BoolVal(False)


class Pair:
    """Two states of one contract over shared variables names ``a.`` and ``b.``."""

    def __init__(self, contract: Contract[Any, Any], action_index: Mapping[str, int]) -> None:
        self.a = StateVars(contract.fields, "a.")
        self.b = StateVars(contract.fields, "b.")
        self.decide_a = Decision(contract, self.a, action_index)
        self.decide_b = Decision(contract, self.b, action_index)
