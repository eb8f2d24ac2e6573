"""Typed compatibility diff between two contract versions (or two receipt schemas).

:func:`diff` compares two :class:`~handoffs.contracts.Contract` versions and returns a
:class:`ContractDiff` of :class:`Finding` s; :meth:`ContractDiff.between_schemas`
compares two receipt JSON Schemas (for example the checked-in
``schemas/<name>/<version>.json`` files) over the subset our generator emits. Codes are
stable and named in the spirit of Confluent's
``Difference.Type`` and buf's rule IDs.

Every finding has a *category*:

- ``WIRE``: the set of valid receipts changes (the schema says so).
- ``DECISION``: what a receiver decides, or whether a receipt is still sufficient for
  the decision, changes, with or without a schema change (a new receiver action, a
  reordered policy, a changed loss, a new benign default, a new decision-field enum
  value).

and a *direction* (receipt schemas are closed, ``additionalProperties: false``,
everywhere):

- ``BACKWARD``: a new receiver may reject, or decide differently, a receipt written
  under the old version;
- ``FORWARD``: an old receiver may reject, or decide differently, a receipt written
  under the new version;
- ``BOTH``: both; ``NONE``: neither (descriptions only).

A finding is **breaking** when it affects ``BACKWARD`` compatibility, when it is a
``DECISION`` finding (decisions are closed-world: a receiver that lacks a branch for a
new action or enum value decides by default, the essay's unsafe benign default), or when
it opens a closed content model. Breaking findings require a *major* version bump,
other findings with a direction a *minor* one, ``NONE`` findings a *patch*.

Codes (category, usual direction):

====================================  ========  =====================================
code                                  category  direction
====================================  ========  =====================================
``CONTRACT_RENAMED``                  WIRE      BOTH
``FIELD_ADDED_REQUIRED``              WIRE      BOTH
``FIELD_ADDED_OPTIONAL``              WIRE      FORWARD
``FIELD_REMOVED``                     WIRE      BACKWARD, BOTH if it was required
``FIELD_NOW_REQUIRED``                WIRE      BACKWARD
``FIELD_NOW_OPTIONAL``                WIRE      FORWARD
``FIELD_TYPE_CHANGED``                WIRE      BOTH
``FIELD_TYPE_NARROWED``               WIRE      BACKWARD
``FIELD_TYPE_WIDENED``                WIRE      FORWARD
``FIELD_BOUNDS_NARROWED``             WIRE      BACKWARD
``FIELD_BOUNDS_WIDENED``              WIRE      FORWARD
``ENUM_VALUE_ADDED``                  DECISION  FORWARD (WIRE outside decision_state)
``ENUM_VALUE_REMOVED``                DECISION  BACKWARD (WIRE outside decision_state)
``CONST_CHANGED``                     WIRE      BOTH
``PATTERN_CHANGED``                   WIRE      BACKWARD added, FORWARD removed, BOTH
``CONTENT_MODEL_OPENED``              WIRE      FORWARD (breaking: models stay closed)
``CONTENT_MODEL_CLOSED``              WIRE      BACKWARD
``ANYOF_BRANCH_ADDED``                WIRE      FORWARD
``ANYOF_BRANCH_REMOVED``              WIRE      BACKWARD
``KEYWORD_CHANGED``                   WIRE      any other keyword; BOTH if unknown
``DESCRIPTION_CHANGED``               WIRE      NONE (DECISION for hard constraints)
``ACTION_ADDED``                      DECISION  BOTH (the scout and the pilot)
``ACTION_REMOVED``                    DECISION  BACKWARD
``POLICY_PRECEDENCE_CHANGED``         DECISION  BOTH
``POLICY_RULE_ADDED``                 DECISION  BOTH
``POLICY_RULE_REMOVED``               DECISION  BOTH
``POLICY_RULE_CHANGED``               DECISION  BOTH
``DEFAULT_CHANGED``                   DECISION  BOTH (fail_closed_action, if_missing)
``LOSS_CHANGED``                      DECISION  BOTH
``HARD_CONSTRAINT_ADDED``             DECISION  BOTH
``HARD_CONSTRAINT_REMOVED``           DECISION  BOTH
``HARD_CONSTRAINT_CHANGED``           DECISION  BOTH
``CONTEXT_DEPENDENCY_ADDED``          DECISION  BOTH
``CONTEXT_DEPENDENCY_REMOVED``        DECISION  BOTH
``CONTEXT_DEPENDENCY_CHANGED``        DECISION  BOTH
``COUNTERFACTUAL_TRIGGER_CHANGED``    DECISION  BOTH
====================================  ========  =====================================

Paths: ``WIRE`` findings name the place in a *receipt* (``$.decision_state.amount``,
``$.evidence_refs[*]``), as validation errors do. ``DECISION`` findings name the place in
the contract (``$.policy.rules.high-value``, ``$.loss.RELEASE.ESCALATE``,
``$.hard_constraints.unsafe-release``, ``$.context.role-held:case-owner``), except enum
values and ``if_missing`` defaults, which name the receipt field they concern.

One concern a module, each above the one before: ``_findings`` (codes, findings and the
version-bump rule), ``_schemas`` (the ``WIRE`` findings of two receipt schemas),
``_policies`` (the ``DECISION`` findings of two policy documents) and ``_contract_diff``
(the :class:`ContractDiff` that orders and renders them, and :func:`diff`).
"""

from __future__ import annotations

from handoffs._errors import VersionBumpError
from handoffs.contracts._diff._contract_diff import ContractDiff, diff
from handoffs.contracts._diff._findings import (
    Bump,
    Category,
    Direction,
    Finding,
    FindingCode,
    next_version,
)

__all__ = [
    "Bump",
    "Category",
    "ContractDiff",
    "Direction",
    "Finding",
    "FindingCode",
    "VersionBumpError",
    "diff",
    "next_version",
]
