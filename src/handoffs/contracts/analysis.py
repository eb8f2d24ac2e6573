"""Policy analysis: exact decision regions of a contract, with an SMT solver.

A release gate is only as good as the cases it runs. This module asks a solver
questions *with witnesses* about a contract's declarative policy (its rules in
order, the default, the hard constraints) and answers each one exactly:

- every rule's **region** (its guard and no earlier guard) with a witness state, or
  **dead** with a minimal set of earlier rules that shadow it;
- each **hard constraint**: under which reference actions it can apply;
- **boundaries**: pairs of states at most δ apart, on one field or on the value of
  a product or sum a guard compares, that get different actions;
- **relevance** of each field, **minimal sufficient field sets** (a proof that no
  two states equal on the set decide differently, or a counterexample pair), and
  each numeric field's **cut points**, cut surfaces and the widest interval that
  avoids a cut;
- **version equivalence** of two contracts: equal everywhere, or a state where they
  differ with both actions and the loss under each;
- **perturbations**: a perturbation's :class:`SymbolicForm` (merged enum values,
  rounded numbers, widened intervals, dropped fields, a new reference policy) composed
  with the policy; the lab proves or refutes each result row with it (see
  :meth:`handoffs.lab.perturbations.Perturbation.symbolic`).

**Why z3.** Guards such as ``Field("fraud_probability") * Field("claim_amount") >
500`` are nonlinear in real numbers; z3's ``nlsat`` procedure decides such
polynomial constraints exactly, while a branch-and-bound interval evaluator can only
approximate a product's cut surface. z3 also gives exact rational witnesses, which
the analysis rounds to short decimals and then confirms with the library's own
three-valued evaluator (the one receivers use), so every state reported is checked
by the code it describes. ``z3-solver`` is in the ``lab`` extra and imported only
when an analysis runs; the contracts core never imports it.

**Time limits.** Each query has a time limit (``timeout_ms``). A query the solver
cannot decide in time is reported as ``unknown`` and listed in
:attr:`Analysis.unknown`: it is never read as covered, dead, sufficient or minimal.

**Opaque predicates.** A :class:`~handoffs.contracts.policy.Predicate` is arbitrary Python
and cannot be compiled. For a policy that holds one, :func:`analyse` searches
instead (seeded draws, one-field moves and bisection to within δ) and labels every
result ``sampled``: unreached regions are unknown, not dead; no set is claimed
minimal; an equivalence search can find a difference but never prove equality.

Example::

    from handoffs.contracts.analysis import analyse

    report = analyse(MY_CONTRACT, timeout_ms=2000)
    for region in report.regions:
        print(region.rule, region.status, region.witness)
    print(report.to_json()["dead_rules"])
"""

from __future__ import annotations

from handoffs.contracts._analysis._coverage import (
    Coverage,
    CoverageTracker,
    Geometry,
    Transition,
    coverage,
    geometry,
)
from handoffs.contracts._analysis._perturbed import (
    DropField,
    MergeValues,
    ProofAnswer,
    RoundValue,
    SymbolicForm,
    WidenValue,
    perturbed_state,
    prove_form,
    undecidable,
)
from handoffs.contracts._analysis._results import (
    Analysis,
    Boundary,
    ConstraintReach,
    Cuts,
    Equivalence,
    MinimalSets,
    Region,
    Relevance,
    Sufficiency,
    Surface,
)
from handoffs.contracts._analysis._solve import (
    analyse,
    equivalence,
    minimal_sets,
    sufficiency,
)

__all__ = [
    "Analysis",
    "Boundary",
    "ConstraintReach",
    "Coverage",
    "CoverageTracker",
    "Cuts",
    "DropField",
    "Equivalence",
    "Geometry",
    "MergeValues",
    "MinimalSets",
    "ProofAnswer",
    "Region",
    "Relevance",
    "RoundValue",
    "Sufficiency",
    "Surface",
    "SymbolicForm",
    "Transition",
    "WidenValue",
    "analyse",
    "coverage",
    "equivalence",
    "geometry",
    "minimal_sets",
    "perturbed_state",
    "prove_form",
    "sufficiency",
    "undecidable",
]
