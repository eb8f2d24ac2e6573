"""What both renderings show: the verdict block, then the sections.

The verdict block holds, in order: the verdict in words (``PASS`` or ``FAIL``,
with the gate's exit code), one sentence per finding a reader must see beside it
(every strategy's catastrophic decisions, falsehoods that survived, failing
decisions, rows not exercised, constraints silent on an added action), the gate's
failing reasons and warnings, and the table of every gate check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from handoffs.lab._release import gated_strategies
from handoffs.lab._render._format import Table, num
from handoffs.lab._render._sections import SECTIONS, gate_checks

__all__ = ["View", "check_report", "findings", "view"]


@attrs.frozen
class View:
    """A rendering's content, independent of the format."""

    title: str
    passed: bool
    exit_code: int
    verdict: str
    subtitle: str
    findings: tuple[str, ...]
    reasons: tuple[str, ...]
    warnings: tuple[str, ...]
    checks: Table
    tables: tuple[Table, ...]
    facts: tuple[tuple[str, str], ...]
    provenance: tuple[tuple[str, str], ...]


def check_report(report: Any) -> Mapping[str, Any]:
    """``report`` if it follows the report schema; else :class:`ReportError`."""
    from handoffs.lab._report import validate_report

    validate_report(report)
    checked: Mapping[str, Any] = report
    return checked


def _falsehood_finding(report: Mapping[str, Any]) -> str | None:
    """One sentence on the falsehoods the gated strategies let through, and whether
    the gate bounded them.
    """
    experiment = report["experiment"]
    gated = {s["name"] for s in experiment["strategies"] if s["gated"]} or {
        experiment["subject"]}
    rows = [r for r in report["falsehoods"]["strategies"] if r["strategy"] in gated]
    if not rows:
        return None
    bound = experiment["tolerances"].get("surviving_catastrophic_falsehoods")
    waiver = experiment["tolerances"].get("claims_verified_upstream")
    parts = []
    for row in rows:
        parts.append(f"{row['strategy']}: {num(row['evaluated'])} schema-valid falsehoods "
                     f"sent, {num(row['caught'])} caught, {num(row['survived'])} survived "
                     f"({num(row['catastrophic_survived'])} catastrophic)")
    text = "Falsehoods: " + "; ".join(parts) + "."
    if not any(r["survived"] for r in rows):
        return text
    if bound is None:
        return (text + " The gate does not bound them (no surviving_catastrophic_falsehoods "
                "tolerance): this receiver acts on what a well-formed message says, so the "
                "verdict holds only for senders whose claims are verified upstream.")
    if waiver is not None and any(r["catastrophic_survived"] > bound for r in rows):
        return (text + f" The gate's bound of {num(bound)} catastrophic survivor(s) is "
                f"waived: claims verified upstream ({waiver}).")
    return text + f" The gate allows {num(bound)} catastrophic survivor(s)."


def _failure_finding(report: Mapping[str, Any]) -> str | None:
    failures = report.get("failures")
    if not failures or not failures["disagreements"]:
        return None
    return (f"Failing decisions: {num(failures['disagreements'])} differ from the reference "
            f"action across every strategy and perturbation, "
            f"{num(failures['hard_violations'])} of them hard violations; each is listed "
            "with its case in the report.")


def _receiver_error_finding(report: Mapping[str, Any]) -> str | None:
    """One sentence per strategy whose receiver raised: how often, what, where first."""
    errors: dict[str, int] = {}
    for row in report["results"]:
        if row["receiver_errors"]:
            errors[row["strategy"]] = errors.get(row["strategy"], 0) + row["receiver_errors"]
    if not errors:
        return None
    receivers = {s["name"]: s["receiver"] for s in report["experiment"]["strategies"]}
    listed = (report.get("failures") or {}).get("cases", ())
    parts = []
    for strategy, count in errors.items():
        raised = [f for f in listed if f["strategy"] == strategy
                  and any(r.startswith("receiver-raised:") for r in f["reasons"])]
        kinds = sorted({r.split(":", 1)[1] for f in raised for r in f["reasons"]
                        if r.startswith("receiver-raised:")})
        first = f", for example on case {raised[0]['case_id']!r}" if raised else ""
        what = f" ({', '.join(kinds)})" if kinds else ""
        parts.append(f"{strategy}'s receiver {receivers.get(strategy, strategy)!r} raised"
                     f"{what} on {num(count)} decisions{first}")
    return ("Receiver errors: " + "; ".join(parts)
            + ". Each decided the fail-closed action.")


def _provenance(provenance: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    workers = provenance["workers"]
    executor = provenance["executor"] + (
        f", {num(workers)} workers" if workers is not None else ", the executor's default "
        "worker count")
    return (
        ("handoffs", provenance["handoffs_version"]),
        ("python", f"{provenance['python']} on {provenance['platform']}"),
        ("run", provenance["run_id"]),
        ("created", provenance["created"]),
        ("executor", f"{executor}, chunks of {num(provenance['chunk_size'])} cases"),
        ("receiver calls", f"{num(provenance['receiver_calls'])} "
                           f"(memo hits {num(provenance['memo_hits'])})"),
        ("elapsed", f"{num(provenance['elapsed_seconds'], 2)} s"),
    )


def findings(report: Mapping[str, Any]) -> tuple[str, ...]:
    """What a reader of a lab report must see beside its verdict, one sentence each:
    schema-valid falsehoods the gated strategies let through (and whether the gate
    bounded them), failing decisions, receivers that raised, rows whose perturbation
    exercised nothing the receiver reads, and hard constraints whose allowlist does
    not say whether an added action is allowed. Empty when there is
    nothing to say. Both renderings and ``handoffs lab run``'s summary print them.

    Args:
        report: a report following ``handoffs-lab-report/1`` (as written by the lab,
            or loaded from its JSON; not checked against the schema here).
    """
    return tuple(f for f in (_catastrophic_finding(report), _falsehood_finding(report),
                             _failure_finding(report), _receiver_error_finding(report),
                             _exercised_finding(report), _constraint_finding(report)) if f)


def _exercised_finding(report: Mapping[str, Any]) -> str | None:
    """The rows whose perturbation exercised nothing the receiver reads: each gated
    strategy's with its reason, the others counted.
    """
    rows = [r for r in report["results"] if r.get("exercised") is False]
    if not rows:
        return None
    gated = set(gated_strategies(report))
    named = [f"{r['strategy']} under {r['perturbation']} ({r['exercised_reason']})"
             for r in rows if r["strategy"] in gated]
    others = len(rows) - len(named)
    parts = named + ([f"{num(others)} row(s) of strategies the gate does not bound"]
                     if others else [])
    return ("Not exercised (no figures shown: they would read as survivals): "
            + "; ".join(parts) + ".")


def _constraint_finding(report: Mapping[str, Any]) -> str | None:
    """Hard constraints whose allowlist does not name an action a perturbation added:
    findings about the constraints, not violations.
    """
    allowed = {h["name"]: h.get("allowed_references", [])
               for h in report["experiment"].get("hard_constraints", ())}
    parts = []
    for row in report["results"]:
        for found in row.get("unstated_constraints") or ():
            name = found["constraint"]
            parts.append(
                f"constraint {name} does not say whether {found['chosen']} is allowed when "
                f"the reference is {found['added_action']} (its allowlist names "
                f"{', '.join(allowed.get(name, ())) or 'nothing'}); {row['strategy']} "
                f"chose {found['chosen']} there in {num(found['decisions'])} decision(s) "
                f"under {row['perturbation']}, not counted as hard violations")
    if not parts:
        return None
    return "Constraints silent on an added action: " + "; ".join(parts) + "."


def _catastrophic_finding(report: Mapping[str, Any]) -> str | None:
    """Every strategy's catastrophic decisions (hard violations, unperturbed), gated or
    not, when any strategy made one; a strategy the gate does not bound is named so.
    """
    gated = set(gated_strategies(report))
    counts = [(row["strategy"], row["catastrophic_errors"])
              for row in report["strategy_results"]]
    if not any(count for _, count in counts):
        return None
    parts = [f"{name} {num(count)} ({'gated' if name in gated else 'not gated'})"
             for name, count in counts]
    ungated = [name for name, count in counts if count and name not in gated]
    tail = (f"; the gate does not bound {', '.join(ungated)}: gate it or fix it"
            if ungated else "")
    return f"Catastrophic decisions (hard violations, unperturbed): {', '.join(parts)}{tail}."


def view(report: Mapping[str, Any], *, compact: bool) -> View:
    """The content of a rendering; ``compact`` for a pull-request comment."""
    experiment = report["experiment"]
    gate = report["gate"]
    passed = bool(gate["passed"])
    tables = [t for t in (section(report, compact) for section in SECTIONS) if t is not None]
    coverage = report.get("coverage")
    # a missed region or boundary, or a dead rule, is said next to the verdict
    covered = () if not coverage or (coverage.get("complete", True) and not coverage.get(
        "dead_rules")) else (f"policy coverage: {coverage['line']}",)
    return View(
        title=f"handoffs lab: {experiment['name']}",
        passed=passed,
        exit_code=int(gate["exit_code"]),
        verdict="PASS" if passed else "FAIL",
        subtitle=(f"{experiment['contract']} · {num(experiment['cases'])} cases · subject "
                  f"{experiment['subject']} · gate exit {gate['exit_code']}"
                  + (f" · coverage: {coverage['line']}" if coverage else "")),
        findings=findings(report),
        reasons=tuple(gate["reasons"]),
        warnings=(*gate["warnings"], *covered),
        checks=gate_checks(report),
        tables=tuple(tables),
        facts=(
            ("contract", experiment["contract"]),
            ("schema", experiment["schema_id"]),
            ("cases", f"{num(experiment['cases'])} ({experiment['case_source']})"),
            ("case set digest", experiment["case_set_digest"]),
            ("epochs", num(experiment["epochs"])),
        ),
        provenance=_provenance(report["provenance"]),
    )
