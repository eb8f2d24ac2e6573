"""The rule language: a contract's reference policy, its rules and conditions.

A :class:`Policy` is an ordered list of :class:`Rule` s (a name, a
:class:`Condition` over the decision state, the action it chooses) and a default;
the first rule that holds decides::

    from handoffs.contracts.policy import Is, Policy, Rule

    POLICY = Policy([Rule("unverified", Is("verified", False), Action.ESCALATE)],
                    default=Action.APPROVE)

Conditions: :class:`Is` (a field equals a value), :class:`Over` and :class:`Under`
(numeric thresholds), :class:`Absent` and :class:`Present` (an optional field, declared
``T | None``, is or is not known not to apply; every other condition on an absent
value is false), :class:`AllOf`, :class:`AnyOf`, :class:`Not`, and
:class:`Predicate` for a test the built-ins cannot express; :class:`Field` names a
field inside a condition. :meth:`Policy.evaluate` returns an outcome: the action, the
rule that decided, and whether the view determined it.
:meth:`Contract.policy_fingerprint() <handoffs.contracts.Contract.policy_fingerprint>`
pins the policy's meaning (:meth:`~handoffs.contracts.Contract.policy_document` is the
canonical document it digests); :class:`PolicyError` is a policy that cannot decide.
"""

from handoffs._errors import PolicyError
from handoffs.contracts._policy import (
    Absent,
    AllOf,
    AnyOf,
    Arith,
    Compare,
    Condition,
    Expr,
    Field,
    Is,
    Not,
    Over,
    Predicate,
    Present,
    Under,
)
from handoffs.contracts._rules import Outcome, Policy, Rule, walk_conditions

__all__ = [
    "Absent",
    "AllOf",
    "AnyOf",
    "Arith",
    "Compare",
    "Condition",
    "Expr",
    "Field",
    "Is",
    "Not",
    "Outcome",
    "Over",
    "Policy",
    "PolicyError",
    "Predicate",
    "Present",
    "Rule",
    "Under",
    "walk_conditions",
]
