"""The contract fingerprint: one digest over everything that decides.

A contract version's *policy document* is everything that decides what a receiver
does with a receipt, written as plain JSON that needs no Python to read: the
receipt schema (by digest), the actions, the decision fields with what a receiver
assumes when one is absent, the policy rules in precedence order with their guards
in a declarative form, the default, the loss matrix, the hard constraints, the
declared context dependencies, the fail-closed action and the counterfactual
trigger. Its **fingerprint** is the SHA-256 of its RFC 8785 canonical form (the
document without its ``fingerprint`` member), written ``sha256:<hex>``.

Two contracts with the same id and different fingerprints decide differently on
some receipt (or may: a :class:`~handoffs.contracts.policy.Predicate` is fingerprinted by
its callable's qualified name and source digest, which can change without changing
a decision). The policy service puts the fingerprint of the contract it governs
in every authority grant it signs; a gate refuses a receipt whose grant names
another fingerprint than its own contract's (``policy-mismatch``). ``schema export``
writes the document beside each schema as ``schemas/<name>/<version>.policy.json``,
and ``schema export --check`` fails when a checked-in version's fingerprint moved.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any, Final

from handoffs._callables import callable_digest
from handoffs._json import digest
from handoffs.contracts._contract import Contract, HardConstraint
from handoffs.contracts._fields import MISSING, Interval
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
)
from handoffs.contracts._schema import to_json_schema

__all__ = [
    "POLICY_FORMAT",
    "condition_json",
    "document_fingerprint",
    "policy_document",
    "policy_fingerprint",
    "policy_path",
    "render_policy_document",
]

POLICY_FORMAT: Final = "handoffs-policy/1"
"""The ``format`` member of a policy document."""

def _value(value: Any) -> Any:
    """A field value (enum member, interval, bool, number) as JSON."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Interval):
        return {"lo": value.lo, "hi": value.hi}
    return value


def _number(value: int | float | Fraction) -> int | float | str:
    """A constant as JSON: a :class:`~fractions.Fraction` that is not a whole number is
    written ``"n/d"`` (exact), anything else as the number.
    """
    if isinstance(value, Fraction):
        return int(value) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    return value


def _expr_json(expr: Expr) -> dict[str, Any]:
    if isinstance(expr, Field):
        return {"field": expr.name}
    if isinstance(expr, Const):
        return {"const": _number(expr.exact)}
    if isinstance(expr, Arith):
        return {"arith": expr.op, "left": _expr_json(expr.left), "right": _expr_json(expr.right)}
    return {"expression": f"{type(expr).__module__}:{type(expr).__qualname__}",
            "text": expr.describe()}


def condition_json(condition: Condition) -> dict[str, Any]:  # noqa: PLR0911 - one per kind
    """A guard in declarative JSON, readable without Python.

    ``{"always": true}``; ``{"is": [field, value]}``; ``{"absent": field}`` and
    ``{"present": field}`` (an optional field known not to apply, or not);
    ``{"over": [field, threshold], "inclusive": bool}`` (``>``/``>=``) and
    ``{"under": ...}`` (``<``/``<=``);
    ``{"not": guard}``; ``{"all": [...]}`` and ``{"any": [...]}`` (Kleene logic);
    ``{"compare": op, "left": expr, "right": expr}`` with expressions ``{"field": f}``,
    ``{"const": n}`` (``"n/d"`` for an exact fraction) and ``{"arith": op, "left",
    "right"}``; ``{"predicate": description, "reads": [...], "callable": ...,
    "source": digest}`` for Python code the document cannot show.
    """
    if isinstance(condition, Always):
        return {"always": True}
    if isinstance(condition, Is):
        return {"is": [condition.field, _value(condition.value)]}
    if isinstance(condition, Absent | Present):
        return {"absent" if isinstance(condition, Absent) else "present": condition.field}
    if isinstance(condition, Over | Under):
        word = "over" if isinstance(condition, Over) else "under"
        return {word: [condition.field, condition.threshold], "inclusive": condition.inclusive}
    if isinstance(condition, Not):
        return {"not": condition_json(condition.operand)}
    if isinstance(condition, AllOf | AnyOf):
        word = "all" if isinstance(condition, AllOf) else "any"
        return {word: [condition_json(o) for o in condition.operands]}
    if isinstance(condition, Compare):
        return {"compare": condition.op, "left": _expr_json(condition.left),
                "right": _expr_json(condition.right)}
    if isinstance(condition, Predicate):
        return {"predicate": condition.description, "reads": sorted(condition.fields),
                **callable_digest(condition.fn)}
    return {"condition": f"{type(condition).__module__}:{type(condition).__qualname__}",
            "text": condition.describe(), "reads": sorted(condition.reads())}


def _constraint_json(constraint: HardConstraint[Any]) -> dict[str, Any]:
    return {
        "name": constraint.name,
        "chosen": constraint.chosen.value,
        "allowed_references": sorted(a.value for a in constraint.allowed_references),
        "when": None if constraint.when is None else constraint.when.describe(),
        "guard": None if constraint.when is None else condition_json(constraint.when),
        "description": constraint.description,
    }


def _body(contract: Contract[Any, Any]) -> dict[str, Any]:
    policy = contract.policy
    return {
        "format": POLICY_FORMAT,
        "contract": contract.id,
        "schema_digest": digest(to_json_schema(contract)),
        "actions": [a.value for a in contract.actions],
        "decision_fields": [
            {"name": s.name, "kind": s.kind.value, **({"optional": True} if s.optional else {}),
             **({} if s.if_missing is MISSING else {"if_missing": _value(s.if_missing)})}
            for s in contract.fields
        ],
        "rules": [
            {"rule": r.name, "when": r.when.describe(), "guard": condition_json(r.when),
             "action": r.action.value}
            for r in policy.rules
        ],
        "default": {"rule": policy.default_name, "action": policy.default.value},
        "loss": contract.loss.to_json(),
        "hard_constraints": [_constraint_json(h) for h in contract.hard_constraints],
        "context": [c.to_json() for c in contract.context],
        "fail_closed_action": contract.fail_closed_action.value,
        "counterfactual_trigger": contract.counterfactual_trigger,
    }


def policy_document(contract: Contract[Any, Any]) -> dict[str, Any]:
    """The contract version's policy document, its ``fingerprint`` included (see the
    module documentation for what it holds).
    """
    body = _body(contract)
    return {**body, "fingerprint": digest(body)}


def policy_fingerprint(contract: Contract[Any, Any]) -> str:
    """The contract fingerprint, ``sha256:<hex>``: a digest over everything that decides
    (schema, rules in order with their guards and thresholds, defaults, loss matrix,
    hard constraints, context dependencies, fail-closed action, counterfactual
    trigger); the ``fingerprint`` of :func:`policy_document`. Computed once per
    definition.
    """
    found = _FINGERPRINTS.get(id(contract))
    if found is None or found[0] is not contract:
        if len(_FINGERPRINTS) >= _FINGERPRINTS_LIMIT:
            _FINGERPRINTS.clear()
        found = _FINGERPRINTS[id(contract)] = (contract, digest(_body(contract)))
    return found[1]


# Keyed by the definition's identity (two definitions may share an id); the contract is
# kept in the value so that its ``id()`` cannot be reused while the entry lives.
_FINGERPRINTS: dict[int, tuple[Contract[Any, Any], str]] = {}
_FINGERPRINTS_LIMIT: Final = 4096


def document_fingerprint(document: Mapping[str, Any]) -> str:
    """The fingerprint a policy document's content gives (its ``fingerprint`` member
    left out), to check a document read from a file against the one it states.
    """
    return digest({k: v for k, v in document.items() if k != "fingerprint"})


def policy_path(root: Path, contract: Contract[Any, Any]) -> Path:
    """Where a contract version's policy document is checked in:
    ``<root>/<name>/<version>.policy.json``, beside its schema.
    """
    return root / contract.name / f"{contract.version}.policy.json"


def render_policy_document(contract: Contract[Any, Any]) -> str:
    """The exact text checked in: two-space indent, UTF-8, final newline."""
    return json.dumps(policy_document(contract), indent=2, ensure_ascii=False) + "\n"
