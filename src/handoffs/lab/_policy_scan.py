"""What the lab cannot see through in a policy: opaque predicates and arithmetic
expressions (the minimal-message search falls back for them, and the report says so).
"""

from __future__ import annotations

from typing import Any

from handoffs.contracts._policy import Compare, walk_conditions
from handoffs.contracts.policy import Policy, Predicate

__all__ = ["has_arithmetic", "has_predicates", "opaque_conditions"]


def has_predicates(policy: Policy[Any]) -> bool:
    """Whether any rule uses an opaque :class:`Predicate` (no exact region search)."""
    return any(isinstance(c, Predicate)
               for rule in policy.rules for c in walk_conditions(rule.when))


def has_arithmetic(policy: Policy[Any]) -> bool:
    """Whether any rule compares an arithmetic expression (:class:`Compare`)."""
    return any(isinstance(c, Compare) for rule in policy.rules for c in walk_conditions(rule.when))


def opaque_conditions(policy: Policy[Any]) -> list[dict[str, Any]]:
    """The conditions whose cells the lab cannot derive, with the fields they hide:
    every :class:`Predicate`, and each :class:`Compare` for the fields it reads more
    than once (no cut point can be solved for them). The report lists them, so that an
    analysis that had to fall back is never silent.
    """
    found: list[dict[str, Any]] = []
    for rule in policy.rules:
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
