"""A policy's rules: ordered, the first that holds decides (see ``_policy`` for the
conditions and arithmetic they are built from), and the walks over their conditions
that the analysis, the fingerprint and the lab share.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

import attrs

from handoffs._errors import ContractDefinitionError
from handoffs.contracts._policy import (
    AllOf,
    AnyOf,
    Compare,
    Condition,
    Not,
    Predicate,
)

__all__ = ["Outcome", "Policy", "Rule", "arithmetic_conditions", "walk_conditions"]

A = TypeVar("A", bound=enum.Enum)


def walk_conditions(condition: Condition) -> Iterator[Condition]:
    """``condition`` and every condition inside it (through ``Not``/``AllOf``/``AnyOf``),
    outermost first: the one walk the analysis, the lab and the cut search share.
    """
    yield condition
    if isinstance(condition, Not):
        yield from walk_conditions(condition.operand)
    elif isinstance(condition, AllOf | AnyOf):
        for operand in condition.operands:
            yield from walk_conditions(operand)


def arithmetic_conditions(condition: Condition) -> Iterator[Compare]:
    """Every ``Compare`` inside ``condition`` (through ``Not``/``AllOf``/``AnyOf``)."""
    return (c for c in walk_conditions(condition) if isinstance(c, Compare))


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
        """Every constant numeric threshold in the rules, in precedence order.

        A comparison over two fields (``p * h > 500``) has no constant threshold: its
        cut is a surface. :func:`handoffs.contracts.analysis.analyse` gives the cut
        surfaces and the boundary pairs on either side of them; the lab's generated
        cases and :func:`handoffs.testing.states` use those.
        """
        return tuple(t for rule in self.rules for t in rule.when.thresholds())

    def has_predicates(self) -> bool:
        """Whether any rule uses an opaque :class:`Predicate` (no exact analysis can look
        inside it; the lab searches instead).
        """
        return any(isinstance(c, Predicate)
                   for rule in self.rules for c in walk_conditions(rule.when))

    def has_arithmetic(self) -> bool:
        """Whether any rule compares an arithmetic expression (``Field("p") * Field("h")
        > 2``).
        """
        return any(isinstance(c, Compare)
                   for rule in self.rules for c in walk_conditions(rule.when))

    def opaque_conditions(self) -> list[dict[str, Any]]:
        """The conditions whose cells cannot be derived exactly, with the fields they hide:
        every :class:`Predicate`, and each arithmetic comparison for the fields it reads
        more than once (no cut point can be solved for them). The lab's report lists
        them, so that an analysis that had to fall back is never silent.
        """
        found: list[dict[str, Any]] = []
        for rule in self.rules:
            for condition in walk_conditions(rule.when):
                if isinstance(condition, Predicate):
                    fields = sorted(condition.fields)
                    kind = "predicate"
                elif isinstance(condition, Compare):
                    fields = sorted(n for n in condition.reads() if not condition.invertible(n))
                    kind = "expression"
                else:
                    continue
                if fields:
                    found.append({"rule": rule.name, "kind": kind,
                                  "condition": condition.describe(), "fields": fields})
        return found

    def describe(self) -> list[dict[str, str]]:
        """The precedence list as JSON-ready rows."""
        rows = [
            {"rule": r.name, "when": r.when.describe(), "action": str(r.action.value)}
            for r in self.rules
        ]
        rows.append({"rule": self.default_name, "when": "otherwise",
                     "action": str(self.default.value)})
        return rows
