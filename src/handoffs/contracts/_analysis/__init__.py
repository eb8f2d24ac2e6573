"""Policy analysis of a contract with an SMT solver, and the search that stands in for
it when a policy holds an opaque predicate (internal; see ``analysis``).

One concern a module: ``_results`` (the answers), ``_geometry`` (the solver's view
of a contract: conditions, axes, cuts), ``_solve`` (the analyser and its queries),
``_search`` (the sampled search for opaque predicates) and ``_coverage``
(boundary coverage and the realistic-state geometry).
"""

from __future__ import annotations

from handoffs.contracts._analysis._coverage import (
    Coverage,
    CoverageTracker,
    certify_message,
    coverage,
    geometry,
    geometry_states,
    realistic_states,
    realistic_value,
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
)
from handoffs.contracts._analysis._solve import (
    analyse,
    equivalence,
    sufficiency,
)

__all__ = [
    "Analysis",
    "Boundary",
    "ConstraintReach",
    "Coverage",
    "CoverageTracker",
    "Cuts",
    "Equivalence",
    "MinimalSets",
    "Region",
    "Relevance",
    "Sufficiency",
    "analyse",
    "certify_message",
    "coverage",
    "equivalence",
    "geometry",
    "geometry_states",
    "realistic_states",
    "realistic_value",
    "sufficiency",
]
