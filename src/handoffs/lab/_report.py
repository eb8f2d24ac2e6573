"""The JSON report: built from the aggregated run log, validated against its schema.

``report.json`` holds the essay's printed table under the essay's own keys
(``assumptions``, ``strategy_results``, ``decision_field_ablation``,
``governance_field_ablation``, ``error_injection``) beside the richer results:
every strategy × perturbation row, every failing decision with its case, the
falsehoods, the counterfactual triggers, the minimal messages, the release gate
and the release artefact. Its JSON Schema
(Draft 2020-12) ships as ``handoffs/lab/report.schema.json``; :func:`validate_report`
checks a report against it. The essay's rounding (4 places) applies only to the
essay-keyed decision-field ablation; every other number keeps full precision.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib import resources
from typing import TYPE_CHECKING, Any, Final

import jsonschema_rs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import relevance

from handoffs import __version__
from handoffs._errors import ReportError, Violation
from handoffs._json import digest
from handoffs._time import format_time
from handoffs.lab._maps import decision_maps
from handoffs.lab._population import DEFAULT_CONFIDENCE, Population
from handoffs.lab._proofs import Proofs, extend_coverage, prove_plan, report_verdicts
from handoffs.lab._release import evaluate_gate, release_artefact
from handoffs.lab._sources import GeneratedCases
from handoffs.lab._values import wire_value
from handoffs.lab.perturbations import RemoveDecisionField, RemoveGovernanceField
from handoffs.lab.perturbations._falsehood import Mutate

if TYPE_CHECKING:
    from handoffs.lab._experiment import Experiment
    from handoffs.lab._metrics import Aggregator
    from handoffs.lab._plan import Plan

__all__ = ["REPORT_FORMAT", "ReportError", "build_report", "report_schema", "validate_report"]

REPORT_FORMAT: Final = "handoffs-lab-report/1"

_DEFAULT_ASSUMPTIONS: Final = {
    "receiver": "Each strategy's receiver is frozen; the semantic receiver applies the "
                "contract's reference policy with declared defaults.",
    "loss": "The contract's declared loss matrix; hard constraints are counted apart.",
}


@functools.cache
def report_schema() -> dict[str, Any]:
    """The report's JSON Schema (Draft 2020-12)."""
    text = resources.files("handoffs.lab").joinpath("report.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@functools.cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(report_schema())


@functools.cache
def _fast_validator() -> Any:
    return jsonschema_rs.validator_for(report_schema())


def validate_report(report: Any) -> None:
    """Raise :class:`~handoffs.errors.ReportError` unless ``report`` satisfies the
    report schema.

    The compiled validator (jsonschema-rs) answers whether it does; python-jsonschema
    describes the violations of a report that does not (as for receipts).
    """
    try:
        if _fast_validator().is_valid(report):
            return
    except (ValueError, TypeError):  # not JSON data: python-jsonschema says where
        pass
    validator = _validator()
    errors = sorted(validator.iter_errors(report), key=relevance)
    if errors:
        raise ReportError([Violation(e.json_path, "/".join(map(str, e.absolute_schema_path)),
                                     e.message, str(e.validator)) for e in errors])


def _perturbation_rows(plan: Plan) -> list[dict[str, Any]]:
    none = {"id": "none", "kind": "baseline", "target": None,
            "description": "The message as encoded.", "strategies": None}
    return [none, *(p.to_json() for p in plan.perturbations)]


def _experiment_section(experiment: Experiment, plan: Plan, aggregator: Aggregator
                        ) -> dict[str, Any]:
    contract = plan.contract
    gated = {s.name for s in experiment.gated_strategies()}
    strategies = []
    for strategy in plan.strategies:
        row = strategy.to_json()
        row["gated"] = strategy.name in gated
        strategies.append(row)
    return {
        "name": experiment.name,
        "description": experiment.description or contract.description,
        "contract": contract.id,
        "schema_id": contract.schema_id,
        "schema_digest": digest(contract.json_schema()),
        "contract_digest": digest(contract.describe()),
        "policy_fingerprint": contract.policy_fingerprint(),
        "case_set_digest": aggregator.case_set_digest(),
        "case_source": experiment.cases.description,
        "cases": aggregator.cases,
        "epochs": experiment.epochs,
        "subject": plan.strategies[plan.subject].name,
        "strategies": strategies,
        "perturbations": _perturbation_rows(plan),
        "tolerances": experiment.tolerances.to_json(),
        "actions": [a.value for a in contract.actions],
        "fail_closed_action": contract.fail_closed_action.value,
        "loss": [{"chosen": c, "reference": r, "loss": v}
                 for (c, r), v in sorted(aggregator.scoring.loss.items())],
        "hard_constraints": [h.to_json() for h in contract.hard_constraints],
        "decision_fields": [
            {"name": s.name, "kind": s.kind.value, "description": s.description,
             "if_missing": None if s.fails_closed else wire_value(s.if_missing),
             "optional": s.optional}
            for s in contract.fields
        ],
    }


def attach_population(results: Sequence[dict[str, Any]], aggregator: Aggregator,
                      perturbation_rows: Sequence[Mapping[str, Any]],
                      population: tuple[Aggregator, Population] | None, *,
                      contract: Any, cases: Any) -> dict[str, Any]:
    """Give every results row its ``population`` figures (``None`` for a row the
    population's draws cannot have: an injection into a named case) and, when the cases
    were generated, its ``stress`` figures; return the report's ``experiment.population``.
    """
    if population is None:
        drawn, confidence = aggregator, DEFAULT_CONFIDENCE
        described: dict[str, Any] = {"source": "cases", "draws": aggregator.cases,
                                     "seed": None, "confidence": confidence,
                                     "distribution": None}
    else:
        drawn, confidence = population[0], population[1].confidence
        described = population[1].to_json(contract)
    figures = drawn.population(perturbation_rows, confidence=confidence)
    stress = isinstance(cases, GeneratedCases)
    described["case_figures"] = "stress" if stress else "sample"
    for row in results:
        row["population"] = figures.get((row["strategy"], row["perturbation"]))
        row["stress"] = ({"agreement": row["agreement"], "mean_regret": row["mean_regret"],
                          "hard_violations": row["hard_violations"], "cases": row["cases"]}
                         if stress else None)
    return described


def essay_tables(results: Sequence[Mapping[str, Any]], *, strategies: Sequence[str],
                 subject: str, decision_fields: Sequence[str],
                 governance_fields: Sequence[str]) -> dict[str, Any]:
    """The essay's table under its own keys, from the results rows."""
    rows = {(r["strategy"], r["perturbation"]): r for r in results}
    strategy_results = []
    for name in strategies:
        row = rows.get((name, "none"))
        if row is None:
            continue
        strategy_results.append({
            "strategy": name,
            "agreement": row["agreement"],
            "mean_regret": row["mean_regret"],
            "catastrophic_errors": row["hard_violations"],
            "governance_pass_rate": row["governance_pass_rate"],
            "mean_bytes": row["mean_bytes"],
        })
    decision = []
    for field in decision_fields:
        row = rows.get((subject, f"remove-decision-field:{field}"))
        if row is None or row["semantic_agreement"] is None:
            continue
        decision.append({
            "removed_field": field,
            "agreement": round(row["semantic_agreement"], 4),
            "mean_regret": round(row["semantic_mean_regret"], 4),
            "catastrophic_errors": row["semantic_hard_violations"],
            "strict_receiver_agreement": row["agreement"],
            "strict_receiver_catastrophic_errors": row["hard_violations"],
        })
    governance = []
    for field in governance_fields:
        row = rows.get((subject, f"remove-governance-field:{field}"))
        if row is None:
            continue
        governance.append({
            "removed_field": field,
            "semantic_agreement": row["semantic_agreement"]
            if row["semantic_agreement"] is not None else 0.0,
            "strict_receiver_agreement": row["agreement"],
            "governance_failures": row["governance_failures"],
        })
    return {"strategy_results": strategy_results, "decision_field_ablation": decision,
            "governance_field_ablation": governance}


def build_report(experiment: Experiment, plan: Plan, aggregator: Aggregator, *,
                 provenance: Mapping[str, Any], minimal_extra: Mapping[str, Any],
                 created: datetime | None = None,
                 cost: Mapping[str, Any] | None = None,
                 coverage: Mapping[str, Any] | None = None,
                 proofs: Proofs | None = None,
                 population: tuple[Aggregator, Population] | None = None) -> dict[str, Any]:
    """Assemble ``report.json`` from a fed aggregator, evaluate the gate, attach the
    release artefact, and validate the whole against the report schema.

    ``population``: the aggregator of the population's draws and the population; without
    it the run's own cases are the sample the population figures are rates over.

    Raises:
        ReportError: the assembled report does not satisfy the schema (a bug).
    """
    created_at = created or datetime.now(UTC)
    results = aggregator.results(_perturbation_rows(plan))
    verdicts = report_verdicts(results, proofs if proofs is not None else prove_plan(plan),
                               experiment)
    figures = attach_population(results, aggregator, _perturbation_rows(plan), population,
                                contract=plan.contract, cases=experiment.cases)
    subject = plan.strategies[plan.subject].name
    tables = essay_tables(
        results,
        strategies=[s.name for s in plan.strategies],
        subject=subject,
        decision_fields=[p.field for p in plan.perturbations
                         if isinstance(p, RemoveDecisionField)],
        governance_fields=[p.field for p in plan.perturbations
                           if isinstance(p, RemoveGovernanceField)],
    )
    injections = aggregator.injections()
    first = next((i for i in injections if i["strategy"] == subject),
                 injections[0] if injections else None)
    rejected = sum(p.schema_rejected for p in plan.perturbations if isinstance(p, Mutate))
    regions = []
    for region in aggregator.regions():
        regions.append({k: v for k, v in region.items() if k not in ("truth", "example")})
    assumptions = {
        "cases": aggregator.cases,
        "case_mix": experiment.assumptions.get("case_mix", experiment.cases.description),
        "receiver": experiment.assumptions.get("receiver", _DEFAULT_ASSUMPTIONS["receiver"]),
        "loss": experiment.assumptions.get("loss", _DEFAULT_ASSUMPTIONS["loss"]),
    }
    report: dict[str, Any] = {
        "report_format": REPORT_FORMAT,
        "experiment": _experiment_section(experiment, plan, aggregator),
        "provenance": {
            "handoffs_version": __version__,
            **provenance,
            "created": format_time(created_at),
            "receiver_calls": aggregator.calls,
            "memo_hits": aggregator.hits,
            "rescored_with": None if aggregator.scoring.name == "contract"
            else aggregator.scoring.name,
        },
        "assumptions": assumptions,
        **tables,
        "error_injection": first,
        "injections": injections,
        "results": results,
        "falsehoods": aggregator.falsehoods(rejected),
        "failures": aggregator.failures(_perturbation_rows(plan)),
        "counterfactual_triggers": aggregator.triggers(),
        "minimal_messages": {
            "method": minimal_extra["method"],
            "confirming_receiver": minimal_extra["confirming_receiver"],
            **aggregator.minimal_summary([s.name for s in plan.contract.fields]),
            "regions": regions,
            "exhaustive_check": minimal_extra["exhaustive_check"],
            "receiver_calls": minimal_extra["receiver_calls"],
            "opaque_conditions": minimal_extra.get("opaque_conditions", []),
            **({"certification": minimal_extra["certification"]}
               if "certification" in minimal_extra else {}),
        },
    }
    strategies = aggregator.model_cost()
    totals = {k: sum(row[k] for row in strategies)
              for k in ("model_calls", "cache_hits", "tokens_in", "tokens_out")}
    extra = dict(cost or {})
    report["cost"] = {
        "strategies": strategies,
        "totals": {**totals, "latency_ms": round(sum(r["latency_ms"] for r in strategies), 3)},
        "cache": extra.get("cache"),
        "budget": extra.get("budget", {"max_calls": None, "max_tokens": None}),
        "concurrency": extra.get("concurrency"),
    }
    report["experiment"]["population"] = figures
    if coverage is not None:
        report["coverage"] = dict(coverage)
        extend_coverage(report["coverage"], results)
    report["proofs"] = verdicts
    report["decision_maps"] = decision_maps(plan.contract, results)
    report["gate"] = evaluate_gate(report, experiment.tolerances)
    report["release"] = release_artefact(report, created=created_at)
    validate_report(report)
    return report
