"""The receiver's reference policy: ordered rules with explicit precedence.

A policy is data, not an opaque function, so that it can be exported with the
contract, diffed between versions (a changed precedence is a finding), and searched
by the lab (counterfactual triggers, minimal messages). Conditions are evaluated in
three-valued (Kleene) logic over a *view* of the state: a field that is absent, or
an interval that straddles a threshold, makes a condition *unknown*. The first rule
whose condition is true decides; if an earlier rule is unknown the decision is
**undetermined**, and a receiver must fail closed rather than guess.

An *optional* field (declared ``T | None``) can hold ``None``: the fact is known not
to apply. That is a value, not an unknown: :class:`Absent` and :class:`Present` test
for it, and every other condition on an absent value is **false** (``Is`` never
matches ``None``; a comparison, or any arithmetic, reading an absent field is false,
so both ``Under("months", 12)`` and ``Over("months", 12)`` are false, and
``Not(Under(...))`` is true). A missing field (the key is not in the view) is still
unknown, as before.

Numeric conditions can be written as arithmetic over fields,
``Field("failure_probability") * Field("consequence") > 2``, evaluated with exact
interval arithmetic (see :class:`Expr`): an interval result that straddles the
comparison leaves the condition unknown, like a straddled :class:`Over`.
"""

from __future__ import annotations

import enum
import functools
import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from fractions import Fraction
from typing import Any, ClassVar, Final, TypeVar

import attrs

from handoffs._errors import ContractDefinitionError, PolicyError
from handoffs.contracts._fields import Interval

__all__ = [
    "Absent",
    "AllOf",
    "Always",
    "AnyOf",
    "Arith",
    "Compare",
    "Condition",
    "Const",
    "Expr",
    "Field",
    "Is",
    "Not",
    "Over",
    "Predicate",
    "Present",
    "Under",
]

A = TypeVar("A", bound=enum.Enum)

# Three-valued truth: True, False, or None for unknown.
Truth = bool | None


class Condition:
    """Base of policy conditions. Subclasses are frozen attrs classes."""

    def evaluate(self, view: Mapping[str, Any]) -> Truth:
        """Truth of the condition on a (possibly partial) state view."""
        raise NotImplementedError

    def reads(self) -> frozenset[str]:
        """Names of the decision fields the condition reads."""
        raise NotImplementedError

    def describe(self) -> str:
        """Human-readable form, used in reports and exported contracts."""
        raise NotImplementedError

    def thresholds(self) -> tuple[tuple[str, float], ...]:
        """Numeric thresholds ``(field, value)`` the condition compares against."""
        return ()

    def cuts(self, view: Mapping[str, Any]) -> tuple[tuple[str, float], ...]:
        """Values ``(field, value)`` at which the truth may change when that field alone
        varies and every other field keeps its value in ``view`` (an interval at either
        end). For :class:`Over` and :class:`Under` these are the thresholds; for an
        arithmetic ``Compare`` they depend on the other fields (``p * h > 2`` cuts
        ``p`` at ``2 / h``). The lab searches these cells.
        """
        return self.thresholds()

    def __invert__(self) -> Condition:
        return Not(self)

    def __and__(self, other: Condition) -> Condition:
        return AllOf((self, other))

    def __or__(self, other: Condition) -> Condition:
        return AnyOf((self, other))


@attrs.frozen
class Always(Condition):
    """A condition that always holds (a catch-all rule)."""

    def evaluate(self, view: Mapping[str, Any]) -> Truth:
        return True

    def reads(self) -> frozenset[str]:
        return frozenset()

    def describe(self) -> str:
        return "always"


@attrs.frozen
class Is(Condition):
    """``field == value`` (for booleans and enums). False on an absent (``None``) value
    of an optional field; test for absence with :class:`Absent`.
    """

    field: str
    value: Any = attrs.field()

    @value.validator
    def _check_value(self, _: attrs.Attribute[Any], value: Any) -> None:
        if value is None:
            raise ContractDefinitionError(
                f"Is({self.field!r}, None): test an optional field's absence with "
                f"Absent({self.field!r})", code="bad-condition")

    def evaluate(self, view: Mapping[str, Any]) -> Truth:
        got = view.get(self.field, _ABSENT)
        if got is _ABSENT:
            return None
        return bool(got == self.value)  # None (absent) equals no value

    def reads(self) -> frozenset[str]:
        return frozenset((self.field,))

    def describe(self) -> str:
        value = self.value.value if isinstance(self.value, enum.Enum) else self.value
        return f"{self.field} is {value!r}" if not isinstance(value, bool) else (
            self.field if value else f"not {self.field}"
        )


@attrs.frozen
class Absent(Condition):
    """The optional field holds ``None``: the fact is known not to apply.

    True when the view holds ``None``, false when it holds a value, unknown when the
    field is missing from the view. The contract refuses it on a field that is not
    declared ``T | None``.
    """

    field: str

    def evaluate(self, view: Mapping[str, Any]) -> Truth:
        got = view.get(self.field, _ABSENT)
        if got is _ABSENT:
            return None
        return got is None

    def reads(self) -> frozenset[str]:
        return frozenset((self.field,))

    def describe(self) -> str:
        return f"{self.field} is absent"


@attrs.frozen
class Present(Condition):
    """The optional field holds a value (the negation of :class:`Absent`: unknown when
    the field is missing from the view).
    """

    field: str

    def evaluate(self, view: Mapping[str, Any]) -> Truth:
        got = view.get(self.field, _ABSENT)
        if got is _ABSENT:
            return None
        return got is not None

    def reads(self) -> frozenset[str]:
        return frozenset((self.field,))

    def describe(self) -> str:
        return f"{self.field} is present"


def _comparison(self: _Threshold) -> Compare:
    return Compare(Field(self.field), self._ops[self.inclusive], Const(self.threshold))


@attrs.frozen
class _Threshold(Condition):
    """Shared shape of :class:`Over` and :class:`Under`: sugar for a :class:`Compare` of
    a field with a constant, which evaluates it (one statement of the semantics).
    """

    field: str
    threshold: float
    inclusive: bool = False
    _compare: Compare = attrs.field(init=False, repr=False, eq=False, hash=False,
                                    default=attrs.Factory(_comparison, takes_self=True))

    _ops: ClassVar[tuple[str, str]] = ("", "")

    @property
    def comparison(self) -> Compare:
        """The :class:`Compare` this condition stands for (``Field(f) > threshold``)."""
        return self._compare

    def evaluate(self, view: Mapping[str, Any]) -> Truth:
        return self._compare.evaluate(view)

    def reads(self) -> frozenset[str]:
        return frozenset((self.field,))

    def describe(self) -> str:
        return self._compare.describe()

    def thresholds(self) -> tuple[tuple[str, float], ...]:
        return ((self.field, self.threshold),)


@attrs.frozen
class Over(_Threshold):
    """``field > threshold`` (or ``>=`` with ``inclusive=True``).

    On an :class:`~handoffs.contracts.Interval` the condition is true when the whole
    interval is over the threshold, false when none of it is, and unknown when it
    straddles. It is ``Compare(Field(field), ">", Const(threshold))`` (its
    ``comparison``), written as a threshold.
    """

    _ops: ClassVar[tuple[str, str]] = (">", ">=")


@attrs.frozen
class Under(_Threshold):
    """``field < threshold`` (or ``<=`` with ``inclusive=True``); intervals as in :class:`Over`."""

    _ops: ClassVar[tuple[str, str]] = ("<", "<=")


@attrs.frozen
class Not(Condition):
    """Negation (unknown stays unknown)."""

    operand: Condition

    def evaluate(self, view: Mapping[str, Any]) -> Truth:
        truth = self.operand.evaluate(view)
        return None if truth is None else not truth

    def reads(self) -> frozenset[str]:
        return self.operand.reads()

    def describe(self) -> str:
        return f"not ({self.operand.describe()})"

    def thresholds(self) -> tuple[tuple[str, float], ...]:
        return self.operand.thresholds()

    def cuts(self, view: Mapping[str, Any]) -> tuple[tuple[str, float], ...]:
        return self.operand.cuts(view)


@attrs.frozen
class _Junction(Condition):
    """A Kleene connective: :attr:`_DECIDES` if any operand is, else unknown if any
    operand is unknown, else ``not _DECIDES``.
    """

    operands: tuple[Condition, ...]
    _DECIDES: ClassVar[bool]
    _WORD: ClassVar[str]

    def evaluate(self, view: Mapping[str, Any]) -> Truth:
        result: Truth = not self._DECIDES
        for operand in self.operands:
            truth = operand.evaluate(view)
            if truth is self._DECIDES:
                return truth
            if truth is None:
                result = None
        return result

    def reads(self) -> frozenset[str]:
        return frozenset().union(*(o.reads() for o in self.operands))

    def describe(self) -> str:
        return f" {self._WORD} ".join(f"({o.describe()})" for o in self.operands)

    def thresholds(self) -> tuple[tuple[str, float], ...]:
        return tuple(t for o in self.operands for t in o.thresholds())

    def cuts(self, view: Mapping[str, Any]) -> tuple[tuple[str, float], ...]:
        return tuple(t for o in self.operands for t in o.cuts(view))


@attrs.frozen
class AllOf(_Junction):
    """Conjunction in Kleene logic: false if any operand is false."""

    _DECIDES: ClassVar[bool] = False
    _WORD: ClassVar[str] = "and"


@attrs.frozen
class AnyOf(_Junction):
    """Disjunction in Kleene logic: true if any operand is true."""

    _DECIDES: ClassVar[bool] = True
    _WORD: ClassVar[str] = "or"


@attrs.frozen
class Predicate(Condition):
    """An arbitrary Python test, for conditions the built-ins cannot express.

    The function sees the view only when every field in ``fields`` is in it;
    otherwise the predicate is unknown. An optional field known not to apply is in
    the view, as ``None``: the function must handle it. It must return ``True``,
    ``False`` or ``None`` (undetermined, e.g. an interval that straddles its
    threshold). Anything else,
    truthy or not (``0``, ``"yes"``, a NumPy bool), and any exception it raises, is a
    :class:`~handoffs.contracts.policy.PolicyError` (``predicate-result``, ``predicate-raised``): a
    gate fails closed on it, and nothing is ever read as ``False``.

    Prefer the declarative conditions and arithmetic expressions (``Field("p") *
    Field("h") > 2``): a predicate cannot be diffed beyond its ``description``, and
    the lab cannot search inside it (it reports which analyses it had to skip).
    """

    fn: Callable[[Mapping[str, Any]], bool | None] = attrs.field(eq=False)
    fields: frozenset[str] = attrs.field(converter=frozenset)
    description: str

    def evaluate(self, view: Mapping[str, Any]) -> Truth:
        if any(name not in view for name in self.fields):
            return None
        try:
            result = self.fn(view)
        except Exception as exc:
            raise PolicyError(
                f"predicate {self.description!r} raised {type(exc).__name__}: {exc}",
                code="predicate-raised",
            ) from exc
        if result is True or result is False or result is None:
            return result
        raise PolicyError(
            f"predicate {self.description!r} returned {result!r} "
            f"({type(result).__name__}); expected True, False or None",
            code="predicate-result",
        )

    def reads(self) -> frozenset[str]:
        return self.fields

    def describe(self) -> str:
        return self.description


# -------------------------------------------------------------------- arithmetic

Number = int | float | Fraction
Bounds = tuple[Fraction, Fraction]

_OPS: Final = ("+", "-", "*", "/")
_PRECEDENCE: Final = {"+": 1, "-": 1, "*": 2, "/": 2}
_COMPARISONS: Final = (">", ">=", "<", "<=")


@functools.lru_cache(maxsize=65_536)
def _rational(value: float) -> Fraction:
    """A float as the decimal number its shortest round-trip form spells (0.1 is 1/10)."""
    return Fraction(repr(value))


def _exact(value: Any, name: str) -> Bounds:
    """The exact bounds of a field's value (a number or an
    :class:`~handoffs.contracts.Interval`).
    """
    if isinstance(value, Interval):
        return _rational(float(value.lo)), _rational(float(value.hi))
    if isinstance(value, bool) or not isinstance(value, int | float | Fraction):
        raise PolicyError(
            f"arithmetic on field {name!r} needs a number or an interval, got "
            f"{type(value).__name__} {value!r}", code="not-a-number", json_path=f"$.{name}")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise PolicyError(f"field {name!r} is not finite: {value!r}", code="not-a-number",
                              json_path=f"$.{name}")
        exact = _rational(value)
    else:
        exact = Fraction(value)
    return exact, exact


def _combine(op: str, a: Bounds, b: Bounds) -> Bounds | None:
    """Exact interval arithmetic; ``None`` when dividing by an interval that holds 0."""
    if op == "+":
        return a[0] + b[0], a[1] + b[1]
    if op == "-":
        return a[0] - b[1], a[1] - b[0]
    if op == "/":
        if b[0] <= 0 <= b[1]:
            return None
        b = (1 / b[1], 1 / b[0])
    products = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return min(products), max(products)


def _operand(value: Expr | Number) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float | Fraction):
        raise ContractDefinitionError(
            f"an arithmetic operand must be a Field, a number or an expression, got "
            f"{type(value).__name__} {value!r}", code="bad-expression")
    return Const(value)


class Expr:
    """Base of arithmetic expressions over numeric and interval decision fields.

    Build them from :class:`Field` and numbers with ``+ - * /``, and compare them with
    ``> >= < <=`` to get a ``Compare`` condition, usable wherever a condition is
    (rules, hard constraints)::

        Field("failure_probability") * Field("consequence") > 2

    **Interval semantics.** A field holding an :class:`~handoffs.contracts.Interval`
    stands for every value in it; the expression's value is the interval of every result (sound: for
    any points inside the operand intervals, the point result lies inside). A
    comparison is true when it holds for the whole result interval, false when it
    holds nowhere, and unknown when the interval straddles it. Division by an
    interval that contains 0 (including exactly 0) is unbounded, so every comparison
    on it is unknown: the decision is undetermined and a receiver fails closed; it
    is never an error and never a guess.

    **No rounding.** Arithmetic is exact over rationals (:class:`fractions.Fraction`);
    a float is read as the decimal number its shortest ``repr`` spells, the number the
    JSON on the wire says (``0.05 * 40 > 2`` is false, as a reader expects; binary
    floating point would say true). Results are exact; only cut points reported to
    the lab are rounded to the nearest float.

    Where a field occurs more than once (``p * (1 - p)``) the interval can be wider
    than the true range, so the condition can be unknown where a finer analysis would
    decide: the error is always on the fail-closed side.
    """

    def bounds(self, view: Mapping[str, Any]) -> Bounds | None:
        """The exact interval of values on ``view``; ``None`` when a field is missing
        or a divisor interval holds 0.

        A field that holds ``None`` (an optional field known not to apply) raises the
        internal ``NotApplicable`` signal: the expression has no value, and a
        comparison over it is false.
        """
        raise NotImplementedError

    def reads(self) -> frozenset[str]:
        """Names of the fields the expression reads."""
        raise NotImplementedError

    def describe(self) -> str:
        """Human-readable form (``failure_probability * consequence``)."""
        raise NotImplementedError

    def occurrences(self, name: str) -> int:
        """How often the expression reads ``name``."""
        raise NotImplementedError

    def solve(self, name: str, target: Fraction, view: Mapping[str, Fraction]) -> Fraction | None:
        """The value of ``name`` (read once) making the expression equal ``target`` when
        every other field has the point value in ``view``; ``None`` if there is none.
        """
        raise NotImplementedError

    def _precedence(self) -> int:
        return 3

    def __add__(self, other: Expr | Number) -> Expr:
        return Arith("+", self, _operand(other))

    def __radd__(self, other: Expr | Number) -> Expr:
        return Arith("+", _operand(other), self)

    def __sub__(self, other: Expr | Number) -> Expr:
        return Arith("-", self, _operand(other))

    def __rsub__(self, other: Expr | Number) -> Expr:
        return Arith("-", _operand(other), self)

    def __mul__(self, other: Expr | Number) -> Expr:
        return Arith("*", self, _operand(other))

    def __rmul__(self, other: Expr | Number) -> Expr:
        return Arith("*", _operand(other), self)

    def __truediv__(self, other: Expr | Number) -> Expr:
        return Arith("/", self, _operand(other))

    def __rtruediv__(self, other: Expr | Number) -> Expr:
        return Arith("/", _operand(other), self)

    def __neg__(self) -> Expr:
        return Arith("-", Const(0), self)

    def __gt__(self, other: Expr | Number) -> Compare:
        return Compare(self, ">", _operand(other))

    def __ge__(self, other: Expr | Number) -> Compare:
        return Compare(self, ">=", _operand(other))

    def __lt__(self, other: Expr | Number) -> Compare:
        return Compare(self, "<", _operand(other))

    def __le__(self, other: Expr | Number) -> Compare:
        return Compare(self, "<=", _operand(other))


@attrs.frozen(order=False)
class Field(Expr):
    """A numeric or interval decision field in an arithmetic expression.

    ``==`` on a :class:`Field` is plain equality of the expression objects; test a
    field's value with :class:`Is`.
    """

    name: str

    def bounds(self, view: Mapping[str, Any]) -> Bounds | None:
        got = view.get(self.name, _ABSENT)
        if got is _ABSENT:
            return None
        if got is None:
            raise NotApplicable(self.name)
        return _exact(got, self.name)

    def reads(self) -> frozenset[str]:
        return frozenset((self.name,))

    def describe(self) -> str:
        return self.name

    def occurrences(self, name: str) -> int:
        return int(name == self.name)

    def solve(self, name: str, target: Fraction, view: Mapping[str, Fraction]) -> Fraction | None:
        return target if name == self.name else None


def _const_value(value: Number) -> Number:
    if isinstance(value, bool) or not isinstance(value, int | float | Fraction):
        raise ContractDefinitionError(f"a constant must be a number, got {value!r}",
                                      code="bad-expression")
    if isinstance(value, float) and not math.isfinite(value):
        raise ContractDefinitionError(f"a constant must be finite, got {value!r}",
                                      code="bad-expression")
    return value


@attrs.frozen(order=False)
class Const(Expr):
    """A numeric constant (``int``, ``float`` or :class:`fractions.Fraction`)."""

    value: Number = attrs.field(converter=_const_value)

    @property
    def exact(self) -> Fraction:
        """The constant as an exact rational."""
        return _exact(self.value, "constant")[0]

    def bounds(self, view: Mapping[str, Any]) -> Bounds | None:
        exact = self.exact
        return exact, exact

    def reads(self) -> frozenset[str]:
        return frozenset()

    def describe(self) -> str:
        return str(self.value)

    def occurrences(self, name: str) -> int:
        return 0

    def solve(self, name: str, target: Fraction, view: Mapping[str, Fraction]) -> Fraction | None:
        return None


def _check_op(_: Any, __: Any, value: str) -> None:
    if value not in _OPS:
        raise ContractDefinitionError(f"unknown arithmetic operator {value!r}; use {_OPS}",
                                      code="bad-expression")


def _point(expr: Expr, view: Mapping[str, Fraction]) -> Fraction | None:
    found = expr.bounds(view)
    return None if found is None else found[0]


@attrs.frozen(order=False)
class Arith(Expr):
    """``left op right`` for ``op`` in ``+ - * /``; build it with the operators."""

    op: str = attrs.field(validator=_check_op)
    left: Expr
    right: Expr

    def bounds(self, view: Mapping[str, Any]) -> Bounds | None:
        a = self.left.bounds(view)
        b = self.right.bounds(view)
        if a is None or b is None:
            return None
        return _combine(self.op, a, b)

    def reads(self) -> frozenset[str]:
        return self.left.reads() | self.right.reads()

    def _precedence(self) -> int:
        return _PRECEDENCE[self.op]

    def describe(self) -> str:
        mine = self._precedence()
        left = self.left.describe()
        right = self.right.describe()
        if self.left._precedence() < mine:
            left = f"({left})"
        if self.right._precedence() < mine or (self.right._precedence() == mine
                                               and self.op in "-/"):
            right = f"({right})"
        return f"{left} {self.op} {right}"

    def occurrences(self, name: str) -> int:
        return self.left.occurrences(name) + self.right.occurrences(name)

    def solve(self, name: str, target: Fraction, view: Mapping[str, Fraction]) -> Fraction | None:
        in_left = self.left.occurrences(name) > 0
        inner, other = (self.left, self.right) if in_left else (self.right, self.left)
        value = _point(other, view)
        if value is None:
            return None
        op = self.op
        if op == "+":
            goal = target - value
        elif op == "-":
            goal = target + value if in_left else value - target
        elif op == "*":
            if value == 0:
                return None
            goal = target / value
        elif in_left:  # inner / value = target
            if value == 0:
                return None
            goal = target * value
        else:  # value / inner = target
            if target == 0:
                return None
            goal = value / target
        return inner.solve(name, goal, view)


def _check_comparison(_: Any, __: Any, value: str) -> None:
    if value not in _COMPARISONS:
        raise ContractDefinitionError(f"unknown comparison {value!r}; use {_COMPARISONS}",
                                      code="bad-expression")


def _corners(names: Iterable[str], view: Mapping[str, Any]) -> Iterator[dict[str, Fraction]]:
    axes: list[tuple[str, tuple[Fraction, ...]]] = []
    for name in sorted(names):
        got = view.get(name, _ABSENT)
        if got is _ABSENT or got is None:
            return
        lo, hi = _exact(got, name)
        axes.append((name, (lo,) if lo == hi else (lo, hi)))
    for combination in itertools.product(*(values for _, values in axes)):
        yield dict(zip((name for name, _ in axes), combination, strict=True))


@attrs.frozen
class Compare(Condition):
    """``left op right`` for ``op`` in ``> >= < <=``, in interval semantics.

    Build it by comparing an :class:`Expr` (``Field("p") * Field("h") > 2``). True when
    the comparison holds for every value the operands allow, false when it holds for
    none or when a field it reads is absent (``None``, an optional field known not to
    apply), unknown when it holds for some (a straddling interval), when a field is
    missing from the view, or when a divisor interval contains 0. A field that holds neither a
    number nor an :class:`~handoffs.contracts.Interval` raises
    :class:`~handoffs.contracts.policy.PolicyError` (``not-a-number``).
    """

    left: Expr
    op: str = attrs.field(validator=_check_comparison)
    right: Expr

    def evaluate(self, view: Mapping[str, Any]) -> Truth:
        try:
            a = self.left.bounds(view)
            b = self.right.bounds(view)
        except NotApplicable:  # an absent field: the comparison does not hold
            return False
        if a is None or b is None:
            return None
        lo, hi = a[0] - b[1], a[1] - b[0]  # the difference, compared with 0
        if self.op == ">":
            return True if lo > 0 else False if hi <= 0 else None
        if self.op == ">=":
            return True if lo >= 0 else False if hi < 0 else None
        if self.op == "<":
            return True if hi < 0 else False if lo >= 0 else None
        return True if hi <= 0 else False if lo > 0 else None

    def reads(self) -> frozenset[str]:
        return self.left.reads() | self.right.reads()

    def describe(self) -> str:
        return f"{self.left.describe()} {self.op} {self.right.describe()}"

    def invertible(self, name: str) -> bool:
        """Whether the cut points of ``name`` can be solved for (it occurs once)."""
        return (self.left.occurrences(name) + self.right.occurrences(name)) == 1

    def cuts(self, view: Mapping[str, Any]) -> tuple[tuple[str, float], ...]:
        """For each field read once: the values where ``left = right`` when every other
        field is at an end of its value in ``view`` (every corner). A field another
        field's absence leaves unsolvable gets no cut.
        """
        difference = Arith("-", self.left, self.right)
        found: list[tuple[str, float]] = []
        reads = self.reads()
        for name in sorted(reads):
            if not self.invertible(name):
                continue
            for corner in _corners(reads - {name}, view):
                value = difference.solve(name, Fraction(0), corner)
                if value is None:
                    continue
                try:
                    cut = float(value)
                except OverflowError:  # beyond every float (p near 0 in h = 2 / p)
                    continue
                found.append((name, cut))
        return tuple(dict.fromkeys(found))

    def thresholds(self) -> tuple[tuple[str, float], ...]:
        """The cuts of a field compared with constants alone (``Field("p") * 40 > 2``
        has ``("p", 0.05)``); cuts that depend on other fields are in :meth:`cuts`.
        """
        return tuple((name, t) for name, t in self.cuts({}) if self.reads() == {name})


class NotApplicable(Exception):
    """Raised by :meth:`Expr.bounds` when a field it reads holds ``None`` (an optional
    field known not to apply); :class:`Compare` reads it as false.
    """

    def __init__(self, field: str) -> None:
        super().__init__(f"{field} is absent (known not to apply)")
        self.field = field


class _Absent:
    pass


_ABSENT: Any = _Absent()
