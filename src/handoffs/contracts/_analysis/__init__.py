"""Policy analysis of a contract with an SMT solver, and the search that stands in for
it when a policy holds an opaque predicate (internal; see ``analysis``).

One concern a module: ``_results`` (the answers), ``_geometry`` (the solver's view
of a contract: conditions, axes, cuts), ``_solve`` (the analyser and its queries),
``_search`` (the sampled search for opaque predicates) and ``_coverage``
(boundary coverage and the realistic-state geometry).
"""
