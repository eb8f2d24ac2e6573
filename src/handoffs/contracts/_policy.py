"""The receiver's reference policy: ordered rules with explicit precedence.

A policy is data, not an opaque function, so that it can be exported with the
contract, diffed between versions (a changed precedence is a finding), and searched
by the lab (counterfactual triggers, minimal messages). Conditions are evaluated in
three-valued (Kleene) logic over a *view* of the state: a field that is absent, or
an interval that straddles a threshold, makes a condition *unknown*. The first rule
whose condition is true decides; if an earlier rule is unknown the decision is
**undetermined**, and a receiver must fail closed rather than guess.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Generic, TypeVar

import attrs

from handoffs._errors import ContractDefinitionError
from handoffs.contracts._fields import Interval

__all__ = [
    "AllOf",
    "Always",
    "AnyOf",
    "Condition",
    "Is",
    "Not",
    "Outcome",
    "Over",
    "Policy",
    "Predicate",
    "Rule",
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
    """``field == value`` (for booleans and enums)."""

    field: str
    value: Any

    def evaluate(self, view: Mapping[str, Any]) -> Truth:
        got = view.get(self.field, _ABSENT)
        if got is _ABSENT:
            return None
        return bool(got == self.value)

    def reads(self) -> frozenset[str]:
        return frozenset((self.field,))

    def describe(self) -> str:
        value = self.value.value if isinstance(self.value, enum.Enum) else self.value
        return f"{self.field} is {value!r}" if not isinstance(value, bool) else (
            self.field if value else f"not {self.field}"
        )


def _bounds(value: Any) -> tuple[float, float]:
    if isinstance(value, Interval):
        return value.lo, value.hi
    return float(value), float(value)


@attrs.frozen
class _Threshold(Condition):
    """Shared shape of :class:`Over` and :class:`Under`."""

    field: str
    threshold: float
    inclusive: bool = False

    _symbols: ClassVar[tuple[str, str]] = ("", "")

    def _truth(self, lo: float, hi: float) -> Truth:
        raise NotImplementedError

    def evaluate(self, view: Mapping[str, Any]) -> Truth:
        got = view.get(self.field, _ABSENT)
        if got is _ABSENT:
            return None
        return self._truth(*_bounds(got))

    def reads(self) -> frozenset[str]:
        return frozenset((self.field,))

    def describe(self) -> str:
        return f"{self.field} {self._symbols[self.inclusive]} {self.threshold}"

    def thresholds(self) -> tuple[tuple[str, float], ...]:
        return ((self.field, self.threshold),)


@attrs.frozen
class Over(_Threshold):
    """``field > threshold`` (or ``>=`` with ``inclusive=True``).

    On an :class:`Interval` the condition is true when the whole interval is over
    the threshold, false when none of it is, and unknown when it straddles.
    """

    _symbols: ClassVar[tuple[str, str]] = (">", ">=")

    def _truth(self, lo: float, hi: float) -> Truth:
        t = self.threshold
        if (lo >= t) if self.inclusive else (lo > t):
            return True
        if (hi < t) if self.inclusive else (hi <= t):
            return False
        return None


@attrs.frozen
class Under(_Threshold):
    """``field < threshold`` (or ``<=`` with ``inclusive=True``); intervals as in :class:`Over`."""

    _symbols: ClassVar[tuple[str, str]] = ("<", "<=")

    def _truth(self, lo: float, hi: float) -> Truth:
        t = self.threshold
        if (hi <= t) if self.inclusive else (hi < t):
            return True
        if (lo > t) if self.inclusive else (lo >= t):
            return False
        return None


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


@attrs.frozen
class AllOf(Condition):
    """Conjunction in Kleene logic: false if any operand is false."""

    operands: tuple[Condition, ...]

    def evaluate(self, view: Mapping[str, Any]) -> Truth:
        result: Truth = True
        for operand in self.operands:
            truth = operand.evaluate(view)
            if truth is False:
                return False
            if truth is None:
                result = None
        return result

    def reads(self) -> frozenset[str]:
        return frozenset().union(*(o.reads() for o in self.operands))

    def describe(self) -> str:
        return " and ".join(f"({o.describe()})" for o in self.operands)

    def thresholds(self) -> tuple[tuple[str, float], ...]:
        return tuple(t for o in self.operands for t in o.thresholds())


@attrs.frozen
class AnyOf(Condition):
    """Disjunction in Kleene logic: true if any operand is true."""

    operands: tuple[Condition, ...]

    def evaluate(self, view: Mapping[str, Any]) -> Truth:
        result: Truth = False
        for operand in self.operands:
            truth = operand.evaluate(view)
            if truth is True:
                return True
            if truth is None:
                result = None
        return result

    def reads(self) -> frozenset[str]:
        return frozenset().union(*(o.reads() for o in self.operands))

    def describe(self) -> str:
        return " or ".join(f"({o.describe()})" for o in self.operands)

    def thresholds(self) -> tuple[tuple[str, float], ...]:
        return tuple(t for o in self.operands for t in o.thresholds())


@attrs.frozen
class Predicate(Condition):
    """An arbitrary Python test, for conditions the built-ins cannot express.

    The function sees the view only when every field in ``fields`` is present;
    otherwise the predicate is unknown. Prefer the declarative conditions: a
    predicate cannot be diffed beyond its ``description``.
    """

    fn: Callable[[Mapping[str, Any]], bool] = attrs.field(eq=False)
    fields: frozenset[str] = attrs.field(converter=frozenset)
    description: str

    def evaluate(self, view: Mapping[str, Any]) -> Truth:
        if any(name not in view for name in self.fields):
            return None
        return bool(self.fn(view))

    def reads(self) -> frozenset[str]:
        return self.fields

    def describe(self) -> str:
        return self.description


class _Absent:
    pass


_ABSENT: Any = _Absent()


@attrs.frozen
class Rule(Generic[A]):
    """One precedence level: when ``when`` holds, choose ``action``.

    Attributes:
        name: stable identifier (kebab-case), reported as the deciding rule.
        when: the condition.
        action: the action chosen.
    """

    name: str
    when: Condition
    action: A


@attrs.frozen
class Outcome(Generic[A]):
    """The policy's answer on one state view.

    Attributes:
        action: the chosen action, or ``None`` when undetermined.
        rule: name of the deciding rule, or of the first rule left unknown.
        determined: False when a missing field or a straddled threshold left an
            earlier rule unknown; a receiver must then fail closed.
    """

    action: A | None
    rule: str
    determined: bool


def _rules(rules: Iterable[Rule[A]]) -> tuple[Rule[A], ...]:
    return tuple(rules)


@attrs.frozen
class Policy(Generic[A]):
    """Ordered rules; the first that holds decides; ``default`` if none does.

    Attributes:
        rules: rules in precedence order (earlier wins).
        default: the action when no rule holds.
        default_name: the name reported when the default decides.
    """

    rules: tuple[Rule[A], ...] = attrs.field(converter=_rules)
    default: A
    default_name: str = "default"

    def __attrs_post_init__(self) -> None:
        names = [rule.name for rule in self.rules]
        if len(set(names)) != len(names) or self.default_name in names:
            raise ContractDefinitionError("policy rule names must be unique", code="duplicate-rule")

    def evaluate(self, view: Mapping[str, Any]) -> Outcome[A]:
        """Decide on a (possibly partial) state view, in three-valued logic."""
        for rule in self.rules:
            truth = rule.when.evaluate(view)
            if truth is True:
                return Outcome(rule.action, rule.name, True)
            if truth is None:
                return Outcome(None, rule.name, False)
        return Outcome(self.default, self.default_name, True)

    def reads(self) -> frozenset[str]:
        """Every field any rule reads."""
        return frozenset().union(*(rule.when.reads() for rule in self.rules))

    def thresholds(self) -> tuple[tuple[str, float], ...]:
        """Every numeric threshold in the rules, in precedence order."""
        return tuple(t for rule in self.rules for t in rule.when.thresholds())

    def describe(self) -> list[dict[str, str]]:
        """The precedence list as JSON-ready rows."""
        rows = [
            {"rule": r.name, "when": r.when.describe(), "action": str(r.action.value)}
            for r in self.rules
        ]
        rows.append({"rule": self.default_name, "when": "otherwise",
                     "action": str(self.default.value)})
        return rows
