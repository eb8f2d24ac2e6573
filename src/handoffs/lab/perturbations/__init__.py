"""Perturbations: generic interventions on the message between sender and receiver.

Every perturbation works for any contract; none knows about payments. The families,
one module each:

- **ablation**: remove one decision field (a benign-default receiver then assumes the
  field's declared ``if_missing`` value) or one governance member;
- **coarsening**: merge enum values, round or widen numbers, shorten evidence
  references;
- **falsehood**: schema-valid values that differ from the truth, generated from the
  contract (finite domains enumerated, numbers drawn with Hypothesis and boundary
  values), each re-validated with ``jsonschema``; declared injections into named
  cases;
- **control**: no message, a message shuffled across cases, a constant message;
- **boundary**: an action added to the action set, the loss matrix changed, the
  policy version changed, an authoritative sender, a relay through k hops with
  re-encoding at each hop.

A perturbation yields :class:`Variant` s of one strategy's message for one case.
Messages are plain dicts; variants copy only what they change. To write one of your
own, subclass :class:`Perturbation` and declare it with :func:`declare_perturbation`;
its :meth:`~Perturbation.change` answers a new value or a marker such as
``Perturbation.UNCHANGED`` (see the how-to "Write a perturbation of your own")::

    from handoffs.lab.perturbations import Perturbation, declare_perturbation
"""

from handoffs.lab.perturbations._ablation import RemoveDecisionField, RemoveGovernanceField
from handoffs.lab.perturbations._base import (
    CaseContext,
    Declaration,
    Perturbation,
    Scoring,
    Variant,
    declare_perturbation,
)
from handoffs.lab.perturbations._boundary import ActionAdded, LossChanged
from handoffs.lab.perturbations._falsehood import Falsehood
from handoffs.lab.perturbations._registry import select_perturbations, standard_perturbations
from handoffs.lab.perturbations._relay import Relay

__all__ = [
    "ActionAdded",
    "CaseContext",
    "Declaration",
    "Falsehood",
    "LossChanged",
    "Perturbation",
    "Relay",
    "RemoveDecisionField",
    "RemoveGovernanceField",
    "Scoring",
    "Variant",
    "declare_perturbation",
    "select_perturbations",
    "standard_perturbations",
]
