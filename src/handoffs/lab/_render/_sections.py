"""The report's sections as tables, one function per section.

Each section function takes the (validated) report and whether the rendering is
compact (Markdown for a pull-request comment) and returns its :class:`Table`, or
``None`` when the report has nothing for it. :data:`SECTIONS` lists them in the
order the renderings show them; a new report section (the coverage of the
decision regions, say) is one more function there.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs

from handoffs.lab._render._format import (
    COMPARISON,
    DASH,
    Table,
    counts,
    get,
    num,
    table,
    wire,
)

__all__ = ["FAILURES_LISTED", "SECTIONS", "FieldFalsehoods", "check_label", "deciding_cases",
           "falsehood_fields", "gate_checks", "witness_pair"]

FAILURES_LISTED: Final = 10
"""Failing decisions the compact (Markdown) rendering lists; the rest are counted."""

_FAILURES_HTML: Final = 500
"""Failing decisions the HTML drill-down lists; report.json lists up to 1,000."""

Section = Callable[[Mapping[str, Any], bool], "Table | None"]


def _injections(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    rows = list(report.get("injections") or ())
    if not rows and report.get("error_injection"):
        rows = [report["error_injection"]]
    return rows


@attrs.frozen
class FieldFalsehoods:
    """One field's falsehoods: complete class counts, and the subject receiver's
    outcomes on the decision-relevant ones as far as the report lists them.
    """

    field: str
    generated: int
    no_effect: int
    relevant: int
    catastrophic: int
    caught: int
    missed: int
    over_reacted: int

    @property
    def unlisted(self) -> int:
        """Decision-relevant falsehoods whose outcome the report does not list."""
        return max(self.relevant - self.caught - self.missed, 0)


def falsehood_fields(report: Mapping[str, Any]) -> tuple[str | None, list[FieldFalsehoods]]:
    """Per field, falsehood counts for the strategy whose message was falsified.

    Class counts come from ``falsehoods.by_field`` (complete). Caught and missed come
    from the listed examples, which put decision-relevant falsehoods first: they are
    complete unless more relevant falsehoods exist than the report lists (the
    difference is reported as ``unlisted``).
    """
    falsehoods = report["falsehoods"]
    evaluated = [row["strategy"] for row in falsehoods["strategies"]]
    subject = report["experiment"]["subject"]
    strategy = subject if subject in evaluated else (evaluated[0] if evaluated else None)
    outcomes: dict[str, dict[str, int]] = {}
    for example in falsehoods["examples"]:
        outcome = example["outcomes"].get(strategy) if strategy is not None else None
        if outcome is None:
            continue
        counts = outcomes.setdefault(example["field"], {})
        counts[outcome["status"]] = counts.get(outcome["status"], 0) + 1
    rows = []
    for entry in falsehoods["by_field"]:
        classes = entry["by_class"]
        counts = outcomes.get(entry["field"], {})
        rows.append(FieldFalsehoods(
            field=entry["field"],
            generated=int(entry["generated"]),
            no_effect=int(classes.get("no_effect", 0)),
            relevant=int(classes.get("changes_action", 0)) + int(classes.get("catastrophic", 0)),
            catastrophic=int(classes.get("catastrophic", 0)),
            caught=counts.get("caught", 0),
            missed=counts.get("survived", 0),
            over_reacted=counts.get("over_reacted", 0),
        ))
    return strategy, rows


def _bound(value: float) -> str:
    """An interval end; one a hair off a round number (the next float across a policy
    threshold) prints as the number with ``⁺`` or ``⁻``, so that ``[0.2⁺, 1]`` reads as
    "just above 0.2", not as a closed interval at 0.2.
    """
    shown = round(value, 4)
    if shown == value or abs(value - shown) > 1e-9:
        return num(value)
    return num(shown) + ("⁺" if value > shown else "⁻")


def _opaque_note(opaque: list[dict[str, Any]]) -> str:
    """Say which conditions the search could not look into (never silently)."""
    if not opaque:
        return ""
    items = "; ".join(f"{o['kind']} {o['condition']!r} in rule {o['rule']} hides "
                      f"{', '.join(o['fields'])}" for o in opaque)
    return f" Opaque to the search: {items}."


def _message(region: Mapping[str, Any]) -> str:
    parts = []
    for item in region["message"]:
        kind = item["representation"]
        if kind == "values" and "values" in item:
            parts.append(f"{item['field']}∈{{{', '.join(wire(v) for v in item['values'])}}}")
        elif kind == "interval" and "interval" in item:
            interval = item["interval"]
            parts.append(f"{item['field']}∈[{_bound(interval['lo'])}, {_bound(interval['hi'])}]")
        else:
            parts.append(f"{item['field']}={wire(item.get('value'))}")
    return "; ".join(parts) if parts else "(empty: the action is fixed)"


def _confirmed(region: Mapping[str, Any]) -> str:
    """Whether the confirming receiver decided on the minimal message, and if not, the
    fields it needed instead, or why the search stopped before it could say.
    """
    search = region.get("search")
    if isinstance(search, Mapping) and search.get("finished") is False:
        return f"no: the search stopped ({search.get('stopped_by')})"
    needed = region.get("receiver_fields")
    if region["confirmed"] is False and needed:
        return f"no: the receiver needs {', '.join(needed)}"
    return num(region["confirmed"])


def _control_status(checks: Mapping[tuple[Any, Any], Mapping[str, Any]],
                    row: Mapping[str, Any]) -> str:
    check = checks.get((row["strategy"], row["perturbation"]))
    if check is None:
        return DASH
    return "the control does worse" if check["passed"] else "FAILED: " + str(check["reason"])




def _deciding_cell(found: Mapping[int, list[Mapping[str, Any]]]
                   ) -> Callable[[Mapping[str, Any]], str]:
    def cell(check: Mapping[str, Any]) -> str:
        cases = found.get(id(check))
        if check["passed"] or cases is None or check["metric"] not in _CASE_METRICS:
            return DASH  # passed, or a check no single case decides (a control, a proof)
        if not cases:
            return "none listed"
        names = list(dict.fromkeys(str(c["case_id"]) for c in cases))
        shown = ", ".join(names[:_DECIDING_PER_CHECK])
        return shown + (f" and {num(len(names) - _DECIDING_PER_CHECK)} more"
                        if len(names) > _DECIDING_PER_CHECK else "")

    return cell


def gate_checks(report: Mapping[str, Any]) -> Table:
    """Every check the release gate made, each passed or failed in words, and for each
    failing check the cases that decided it (listed first under the failing decisions).
    """
    found = {id(check): cases for check, cases in deciding_cases(report)}
    return table(
        "gate-checks", "Gate checks",
        [
            ("status", False, lambda r: "passed" if r["passed"] else "FAILED"),
            ("metric", False, lambda r: r["metric"]),
            ("strategy", False, lambda r: r["strategy"] or DASH),
            ("perturbation", False, lambda r: r["perturbation"] or DASH),
            ("value", True, get("value")),
            ("threshold", False,
             lambda r: "the control does worse" if r["metric"] == "control_falsifies"
             else f"{COMPARISON.get(r['comparison'], r['comparison'])} {num(r['threshold'])}"),
            ("deciding cases", False, _deciding_cell(found)),
        ],
        report["gate"]["checks"],
        empty="The gate made no checks.",
        mark=lambda r: "pass" if r["passed"] else "fail",
    )


def _subject_mark(report: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], str]:
    subject = report["experiment"]["subject"]
    return lambda r: r["strategy"] + (" (subject)" if r["strategy"] == subject else "")


_DECIDING_PER_CHECK: Final = 3
"""Deciding cases listed first for each failing check (then round by round)."""

_ROW_METRICS: Final = frozenset({
    "agreement", "mean_regret", "max_regret", "stress_agreement", "stress_mean_regret",
    "population_hard_violations", "governance_failures"})


_CASE_METRICS: Final = _ROW_METRICS | {"hard_violations", "receiver_errors",
                                       "surviving_catastrophic_falsehoods"}
"""The checks that failing decisions decide."""


def check_label(check: Mapping[str, Any]) -> str:
    """A gate check in a few words: ``hard_violations ≤ 0 (receipt under none)``."""
    where = " under ".join(str(p) for p in (check["strategy"], check["perturbation"]) if p)
    bound = ("the control does worse" if check["metric"] == "control_falsifies" else
             f"{COMPARISON.get(check['comparison'], check['comparison'])} "
             f"{num(check['threshold'])}")
    return f"{check['metric']} {bound}" + (f" ({where})" if where else "")


def _witness_case(report: Mapping[str, Any], check: Mapping[str, Any]
                  ) -> dict[str, Any] | None:
    """A refuted row's witness as a failing decision (when it breaks a hard constraint)."""
    row = next((r for r in report["results"] if r["strategy"] == check["strategy"]
                and r["perturbation"] == check["perturbation"]), None)
    witness = (row or {}).get("witness")
    if not row or row.get("verdict") != "refuted" or not isinstance(witness, Mapping) \
            or not witness.get("hard_violations"):
        return None
    return {"case_id": witness.get("case_id") or "solver witness (not among the cases)",
            "strategy": check["strategy"], "perturbation": check["perturbation"],
            "variant": None, "falsehood": None,
            "reference_action": witness["reference_action"],
            "action": witness["received_action"], "verdict": "refuted",
            "reasons": ["solver-witness"], "reference_rule": None,
            "hard_violations": list(witness["hard_violations"]),
            "message": None if witness.get("message") is None
            else {"decision_state": witness["message"]}}


def _is_witness(case: Mapping[str, Any]) -> bool:
    return case.get("reasons") == ["solver-witness"]


def deciding_cases(report: Mapping[str, Any]) -> list[tuple[Mapping[str, Any],
                                                             list[Mapping[str, Any]]]]:
    """Each failing gate check with the listed failing decisions that decided it, most
    telling first: the row's hard violations for ``hard_violations`` (and a refuted
    row's witness), its disagreements (hard violations, then the largest regret) for
    agreement, regret and governance, the receiver's errors for ``receiver_errors``,
    the catastrophic falsehoods that survived for
    ``surviving_catastrophic_falsehoods``. A check no listed case decides (a control,
    the payload size, a proof) has none.
    """
    listed = list((report.get("failures") or {}).get("cases") or ())
    out: list[tuple[Mapping[str, Any], list[Mapping[str, Any]]]] = []
    for check in report["gate"]["checks"]:
        if check["passed"]:
            continue
        metric, strategy = check["metric"], check["strategy"]
        same = [f for f in listed if f["strategy"] == strategy
                and f["perturbation"] == check["perturbation"]]
        cases: list[Mapping[str, Any]]
        if metric == "hard_violations":
            cases = [f for f in same if f["hard_violations"]]
            found = _witness_case(report, check)
            if found is not None and not any(f["case_id"] == found["case_id"] for f in cases):
                cases.append(found)
        elif metric in _ROW_METRICS:
            cases = sorted(same, key=lambda f: (not f["hard_violations"],
                                                -(f.get("regret") or 0)))
        elif metric == "receiver_errors":
            cases = [f for f in same if any(r.startswith("receiver-raised:")
                                            for r in f["reasons"])]
        elif metric == "surviving_catastrophic_falsehoods":
            cases = [f for f in listed if f["strategy"] == strategy and f.get("falsehood")
                     and f["hard_violations"]]
        else:
            cases = []
        out.append((check, cases))
    return out


def _deciding_first(report: Mapping[str, Any], listed: Sequence[Mapping[str, Any]]
                    ) -> tuple[list[Mapping[str, Any]], dict[int, list[str]], int]:
    """``listed`` with each failing check's deciding cases first, round by round (the
    first of every check, then the second, up to :data:`_DECIDING_PER_CHECK`), then
    the rest; the checks each case decides (by ``id``); how many checks have one.
    """
    decided = [(check_label(check), cases) for check, cases in deciding_cases(report)
               if cases]
    decides: dict[int, list[str]] = {}
    for label, cases in decided:
        for case in cases:
            decides.setdefault(id(case), []).append(label)
    first: list[Mapping[str, Any]] = []
    seen: set[int] = set()
    for depth in range(_DECIDING_PER_CHECK):
        for _, cases in decided:
            if depth < len(cases) and id(cases[depth]) not in seen:
                seen.add(id(cases[depth]))
                first.append(cases[depth])
    rest = [f for f in listed if id(f) not in seen]
    return first + rest, decides, len(decided)


def _failures(report: Mapping[str, Any], compact: bool) -> Table | None:
    failures = report.get("failures")
    if failures is None:
        return None
    gated = _gated(report)
    # The gated strategies' failures first (those are what the gate judges), hard
    # violations first within each; before them, each failing check's deciding cases.
    ordered = sorted(failures["cases"],
                     key=lambda f: (f["strategy"] not in gated, not f["hard_violations"]))
    listed, decides, checks = _deciding_first(report, ordered)
    cap = max(FAILURES_LISTED, checks) if compact else max(_FAILURES_HTML, checks)
    shown = listed[:cap]
    listed_count = len(failures["cases"])
    more = failures["disagreements"] - sum(1 for f in shown if not _is_witness(f))
    where = ("in report.json" if not failures["truncated"]
             else f"(report.json lists {num(listed_count)}, the run log every one)")
    return table(
        "failures", "Failing decisions",
        [
            ("case", False, lambda r: r["case_id"]),
            ("strategy", False, lambda r: r["strategy"]),
            ("perturbation", False, _perturbation_cell),
            ("reference", False, lambda r: r["reference_action"]),
            ("chosen", False, lambda r: r["action"]),
            ("verdict", False, lambda r: r["verdict"]),
            ("decided by", False, _decided_by),
            ("hard violations", False, lambda r: ", ".join(r["hard_violations"]) or DASH),
            ("decides", False, lambda r: "; ".join(decides.get(id(r), ())) or DASH),
        ],
        shown,
        note=f"{num(failures['disagreements'])} decisions differ from the reference action, "
             f"{num(failures['hard_violations'])} of them hard violations"
             + (f"; {num(more)} more {where}." if more > 0 else ".")
             + (" The cases that decided each failing gate check come first (decides)."
                if checks else ""),
        empty="Every decision agrees with the reference action.",
        mark=lambda r: "fail" if r["hard_violations"] else "warn",
        detail=None if compact else _message_sent,
    )


def _perturbation_cell(failure: Mapping[str, Any]) -> str:
    falsehood = failure.get("falsehood")
    text = str(failure["perturbation"])
    if falsehood:
        text += (f" ({falsehood['field']}: {wire(falsehood['true_value'])} → "
                 f"{wire(falsehood['value'])})")
    elif failure.get("variant"):
        text += f" ({failure['variant']})"
    return text


def _decided_by(failure: Mapping[str, Any]) -> str:
    """The receiver's reasons (or its policy, when it accepted), and the reference's rule."""
    reasons = ", ".join(dict.fromkeys(failure["reasons"])) or "its policy on the message"
    rule = failure.get("reference_rule")
    if not rule:
        return f"receiver: {reasons}"
    # an undetermined truth is named by the cut it straddles, not as a deciding rule
    named = rule if rule.startswith(("straddles ", "misses ", "undetermined ")) \
        else f"rule {rule}"
    return f"receiver: {reasons}; reference {named}"


def _message_sent(failure: Mapping[str, Any]) -> str:
    message = failure.get("message")
    if message is None:
        return ""
    return json.dumps(message, indent=2, sort_keys=True, ensure_ascii=False)


def _gated(report: Mapping[str, Any]) -> set[str]:
    experiment = report["experiment"]
    return {s["name"] for s in experiment["strategies"] if s["gated"]} or {experiment["subject"]}


def _strategies(report: Mapping[str, Any], compact: bool) -> Table:
    del compact
    return table(
        "strategies", "Strategies",
        [
            ("strategy", False, _subject_mark(report)),
            ("agreement", True, get("agreement")),
            ("mean regret", True, get("mean_regret")),
            ("catastrophic", True, get("catastrophic_errors")),
            ("governance pass", True, get("governance_pass_rate")),
            ("mean bytes", True, get("mean_bytes", 1)),
        ],
        report["strategy_results"],
        note="Each strategy's own receiver on unperturbed messages; catastrophic = hard "
             "violations.",
        empty="No strategy results.",
    )


def _figure_columns(report: Mapping[str, Any]) -> list[tuple[str, bool, Callable[[Any], str]]]:
    """A row's figures: its cases' (named ``stress`` when the cases were generated) and
    the population's, each with its interval.
    """
    population = report["experiment"].get("population") or {}
    stress = population.get("case_figures") == "stress"
    prefix = "stress " if stress else ""
    return [
        (f"{prefix}agreement", True, _exercised(get("agreement"), NOT_EXERCISED)),
        (f"{prefix}mean regret", True, _exercised(get("mean_regret"))),
        (f"{prefix}hard violations", True, _exercised(get("hard_violations"))),
        ("population agreement", True, _exercised(_population("agreement"),
                                                  NOT_EXERCISED)),
        ("population mean regret", True, _exercised(_population("mean_regret"))),
        ("population hard-violation rate", True,
         _exercised(_population("hard_violation_rate"))),
    ]


NOT_EXERCISED = "not exercised"
"""What a figure of a row its perturbation did not exercise reads (the findings say why)."""


def _exercised(cell: Callable[[Any], str], instead: str = DASH) -> Callable[[Any], str]:
    """``cell``, or ``instead`` for a row whose perturbation exercised nothing the
    receiver reads (its figures are the unperturbed decisions').
    """
    def shown(row: Any) -> str:
        return instead if row.get("exercised") is False else cell(row)

    return shown


def _population(key: str) -> Callable[[Mapping[str, Any]], str]:
    """A population figure with its interval: ``0.992 [0.986, 0.995]``."""
    def cell(row: Mapping[str, Any]) -> str:
        population = row.get("population")
        if not population:
            return DASH
        low, high = population[f"{key}_interval"]
        return f"{num(population[key])} [{num(low)}, {num(high)}]"

    return cell


def _perturbations(report: Mapping[str, Any], compact: bool) -> Table:
    """Every strategy × perturbation row (the controls have their own table)."""
    rows = [r for r in report["results"]
            if r["kind"] != "control" and r["perturbation"] != "none"]
    hidden = 0
    if compact:
        gated = _gated(report)
        shown = [r for r in rows if r["strategy"] in gated]
        hidden, rows = len(rows) - len(shown), shown
    return table(
        "perturbations", "Perturbations",
        [
            ("strategy", False, lambda r: r["strategy"]),
            ("perturbation", False, lambda r: r["perturbation"]),
            ("kind", False, lambda r: r["kind"]),
            *_figure_columns(report),
            ("governance failures", True, get("governance_failures")),
            ("mean bytes", True, get("mean_bytes", 1)),
        ],
        rows,
        note="Each declared perturbation of the message, decided by the strategy's own "
             "receiver." + (f" {hidden} rows for ungated strategies are in the HTML report."
                            if hidden else ""),
        empty="No perturbations were declared.",
        collapsed=compact,
        mark=lambda r: "fail" if r["hard_violations"] else
        "warn" if r.get("exercised") is False else "",
    )


def _cost(report: Mapping[str, Any], compact: bool) -> Table | None:
    del compact
    cost = report.get("cost") or {}
    if not cost.get("strategies"):
        return None
    budget = cost.get("budget") or {}
    limits = ", ".join(f"{k} {v}" for k, v in budget.items() if v is not None)
    return table(
        "cost", "Model cost",
        [
            ("strategy", False, lambda r: r["strategy"]),
            ("model calls", True, get("model_calls")),
            ("cache hits", True, get("cache_hits")),
            ("tokens in", True, get("tokens_in")),
            ("tokens out", True, get("tokens_out")),
            ("mean latency ms", True, get("mean_latency_ms", 1)),
        ],
        cost["strategies"],
        note="Strategies whose receiver asks a model: calls made in this run, answers "
             "from the call cache, tokens spent and latency per call"
             + (f"; budget: {limits}" if limits else "") + ".",
    )


def _decision_ablation(report: Mapping[str, Any], compact: bool) -> Table:
    del compact
    ablation = report["decision_field_ablation"]
    spec: list[tuple[str, bool, Callable[[Any], str]]] = [
        ("removed field", False, lambda r: r["removed_field"]),
        ("agreement", True, get("agreement")),
        ("mean regret", True, get("mean_regret")),
        ("catastrophic", True, get("catastrophic_errors")),
    ]
    if any("strict_receiver_agreement" in r for r in ablation):
        spec.append(("strict agreement", True, get("strict_receiver_agreement")))
    if any("strict_receiver_catastrophic_errors" in r for r in ablation):
        spec.append(("strict catastrophic", True, get("strict_receiver_catastrophic_errors")))
    return table(
        "decision-ablation", "Decision-field ablation", spec, ablation,
        note=f"One decision field removed from the {report['experiment']['subject']} "
             "message; the benign-default receiver fills in the declared if_missing value, "
             "the strict receiver fails closed.",
        empty="No decision field was removed.",
    )


def _governance_ablation(report: Mapping[str, Any], compact: bool) -> Table:
    del compact
    return table(
        "governance-ablation", "Governance-field ablation",
        [
            ("removed field", False, lambda r: r["removed_field"]),
            ("semantic agreement", True, get("semantic_agreement")),
            ("strict agreement", True, get("strict_receiver_agreement")),
            ("governance failures", True, get("governance_failures")),
        ],
        report["governance_field_ablation"],
        note="Semantic: the reference policy on the message's decision state; strict: the "
             f"{report['experiment']['subject']} receiver, which also checks that the "
             "message is admissible.",
        empty="No governance member was removed.",
    )


def _error_injection(report: Mapping[str, Any], compact: bool) -> Table:
    del compact
    return table(
        "error-injection", "Error injection",
        [
            ("case", False, lambda r: r["case_id"]),
            ("field", False, lambda r: r["field"]),
            ("true → injected", False,
             lambda r: f"{wire(r['true_value'])} → {wire(r['value'])}"),
            ("schema still valid", False, lambda r: num(r["schema_still_valid"])),
            ("reference", False, lambda r: r["reference_action"]),
            ("baseline", False, lambda r: r["baseline_action"]),
            ("altered", False, lambda r: r["altered_action"]),
            ("loss", True, get("synthetic_loss")),
            ("hard violations", False, lambda r: ", ".join(r["hard_violations"]) or DASH),
        ],
        _injections(report),
        note="A declared schema-valid false value in one case; loss = loss(altered, "
             "reference). Passing the schema does not make a value true.",
        empty="No error was injected.",
        mark=lambda r: "fail" if r["hard_violations"] else "",
    )


def _falsehoods(report: Mapping[str, Any], compact: bool) -> Table:
    del compact
    falsehoods = report["falsehoods"]
    return table(
        "falsehoods", "Falsehoods caught and missed",
        [
            ("strategy", False, lambda r: r["strategy"]),
            ("evaluated", True, get("evaluated")),
            ("caught", True, get("caught")),
            ("missed", True, get("survived")),
            ("equivalent", True, get("equivalent")),
            ("over-reacted", True, get("over_reacted")),
            ("catastrophic missed", True, get("catastrophic_survived")),
            ("loss-weighted survival", True, get("loss_weighted_survival")),
        ],
        falsehoods["strategies"],
        note=f"{num(falsehoods['generated'])} schema-valid falsehoods "
             f"({counts(falsehoods['by_class'])}); schema rejected "
             f"{num(falsehoods['schema_rejected'])}. Missed = accepted and acted on.",
        empty="No schema-valid falsehoods were generated.",
        mark=lambda r: "fail" if r["catastrophic_survived"] else "",
    )


def _falsehoods_by_field(report: Mapping[str, Any], compact: bool) -> Table:
    del compact
    falsified, per_field = falsehood_fields(report)
    unlisted = sum(row.unlisted for row in per_field)
    return table(
        "falsehoods-by-field", "Falsehoods by field",
        [
            ("field", False, lambda r: r.field),
            ("generated", True, lambda r: num(r.generated)),
            ("no effect", True, lambda r: num(r.no_effect)),
            ("change the action", True, lambda r: num(r.relevant)),
            ("of which catastrophic", True, lambda r: num(r.catastrophic)),
            ("caught", True, lambda r: num(r.caught)),
            ("missed", True, lambda r: num(r.missed)),
        ],
        per_field,
        note=f"Caught and missed: the {falsified or 'subject'} receiver on falsehoods that "
             "would change the reference action"
             + (f"; {unlisted} of them are not listed in the report." if unlisted else "."),
        empty="No schema-valid falsehoods were generated.",
        collapsed=True,
    )


def _controls(report: Mapping[str, Any], compact: bool) -> Table:
    controls = [row for row in report["results"] if row["kind"] == "control"]
    hidden = 0
    if compact:
        gated = _gated(report)
        shown = [row for row in controls if row["strategy"] in gated]
        hidden, controls = len(controls) - len(shown), shown
    checks = {(c["strategy"], c["perturbation"]): c
              for c in report["gate"]["checks"] if c["perturbation"] is not None}
    return table(
        "controls", "Controls",
        [
            ("strategy", False, lambda r: r["strategy"]),
            ("control", False, lambda r: r["perturbation"]),
            *_figure_columns(report),
            ("gate", False, lambda r: _control_status(checks, r)),
        ],
        controls,
        note=("A control that does as well as the real message means the channel is not "
              "doing the work."
              + (f" {hidden} rows for ungated strategies are in the HTML report."
                 if hidden else "")),
        empty="No controls were declared.",
        mark=lambda r: _control_mark(checks, r),
    )


def _control_mark(checks: Mapping[tuple[Any, Any], Mapping[str, Any]],
                  row: Mapping[str, Any]) -> str:
    check = checks.get((row["strategy"], row["perturbation"]))
    if check is None:
        return ""
    return "pass" if check["passed"] else "fail"


def _minimal_messages(report: Mapping[str, Any], compact: bool) -> Table:
    del compact
    minimal = report["minimal_messages"]
    opaque = _opaque_note(minimal.get("opaque_conditions") or [])
    return table(
        "minimal-messages", "Minimal messages",
        [
            ("action", False, lambda r: r["action"]),
            ("minimal message", False, _message),
            ("cases", True, get("cases")),
            ("guarantee", False, lambda r: r["guarantee"]),
            ("confirmed", False, _confirmed),
            ("equals triggers", False, lambda r: num(r["duality_holds"])),
        ],
        minimal["regions"],
        note=f"Method {minimal['method']}; mean {num(minimal['mean_fields'], 2)} fields per "
             f"case; never needed: {', '.join(minimal['fields_never_needed']) or 'none'}."
             + opaque,
        empty="No minimal messages were computed." + opaque,
    )


def _triggers(report: Mapping[str, Any], compact: bool) -> Table:
    del compact
    triggers = report["counterfactual_triggers"]
    cases = triggers["cases"]
    note = (f"{num(cases)} cases, {num(triggers['distinct_states'])} distinct states; "
            f"{num(triggers['without_trigger'])} cases have no single-change trigger.")
    rows = [
        {"field": name, "count": count, "share": (count / cases) if cases else None}
        for name, count in sorted(triggers["by_field"].items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    return table(
        "triggers", "Counterfactual triggers",
        [
            ("field", False, lambda r: r["field"]),
            ("cases", True, get("count")),
            ("share of cases", True, get("share")),
        ],
        rows, note=note, empty=note,
    )


def _coverage(report: Mapping[str, Any], compact: bool) -> Table | None:
    """The ``coverage`` section, when the report has one: its scalar entries."""
    del compact
    coverage = report.get("coverage")
    if not isinstance(coverage, Mapping):
        return None
    rows = [(k, v) for k, v in coverage.items() if not isinstance(v, Mapping | list)]
    return table("coverage", "Coverage",
                 [("measure", False, lambda r: str(r[0]).replace("_", " ")),
                  ("value", True, lambda r: num(r[1]))],
                 rows, empty="No coverage was measured.")


def _witness(row: Mapping[str, Any]) -> str:
    witness = row.get("witness")
    if not isinstance(witness, Mapping):
        return DASH
    where = witness.get("case_id") or "not among the cases"
    broken = witness.get("hard_violations") or []
    return (f"{witness['reference_action']} -> {witness['received_action']} "
            f"(loss {num(witness['loss'])}{', breaks ' + ', '.join(broken) if broken else ''}"
            f"; case {where})")


def _verdicts(report: Mapping[str, Any], compact: bool) -> Table | None:
    """Each row's verdict (issue #33): the solver's proofs and the witnesses, which are
    cases of the run (``witness-NNN``) when the cases are generated. The compact
    rendering lists the refuted and unknown rows (what a reader acts on) and counts the
    proved and sampled ones in its note.
    """
    rows = [r for r in report["results"] if "verdict" in r]
    if not rows:
        return None
    proofs = report.get("proofs") or {}
    shown = [r for r in rows if r["verdict"] in ("refuted", "unknown")] if compact else rows
    note = (f"{proofs.get('line', '')}; a sampled row proves nothing either way"
            if proofs else "")
    return table("verdicts", "Verdicts",
                 [("strategy", False, lambda r: r["strategy"]),
                  ("perturbation", False, lambda r: r["perturbation"]),
                  ("verdict", False, lambda r: r["verdict"]),
                  ("witness: reference -> received", False, _witness)],
                 shown, note=note, empty="No row was decided by the solver.")


def _shown(value: Any) -> str:
    """A witness value in full (a witness a hair from a cut must not print as the cut)."""
    if isinstance(value, float) and math.isfinite(value):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, Mapping) and set(value) == {"lo", "hi"}:
        return f"[{_shown(value['lo'])}, {_shown(value['hi'])}]"
    return wire(value)


def witness_pair(entry: Mapping[str, Any]) -> str:
    """A decision map's witness pair in words: the true values on the map's axes and
    the values sent, with both actions and the cut crossed.
    """
    axes = [entry["x"]["field"]] + ([entry["y"]["field"]] if entry["y"] else [])
    moved = [a for a in axes if entry["state"][a] != entry["message"][a]] or axes[:1]
    state, message = entry["state"], entry["message"]
    true = ", ".join(f"{a} {_shown(state[a])}" for a in moved)
    sent = ", ".join(f"{a} {_shown(message[a])}" for a in moved)
    held = ", ".join(f"{a} {_shown(state[a])}" for a in axes if a not in moved)
    where = f" at {held}" if held else ""
    cut = entry.get("cut")
    across = f" across `{cut['condition']}` (rule {cut['rule']})" if cut else ""
    case = f"; case {entry['case_id']}" if entry.get("case_id") else ""
    return (f"true {true} ({entry['reference_action']}) → sent {sent} "
            f"({entry['received_action']}){where}{across}{case}")


def _decision_maps(report: Mapping[str, Any], compact: bool) -> Table | None:
    """Each refuted numeric perturbation's witness pair, drawn on a decision map in the
    HTML report (the compact rendering points there).
    """
    found = report.get("decision_maps")
    if not found or not found["maps"]:
        return None
    entries = list(enumerate(found["maps"], start=1))
    more = found["rows"] - sum(len(e["strategies"]) for _, e in entries)
    return table(
        "decision-maps", "Decision maps",
        [("strategy", False, lambda r: ", ".join(r[1]["strategies"])),
         ("perturbation", False, lambda r: r[1]["perturbation"]),
         ("witness pair", False, lambda r: witness_pair(r[1])),
         ("map", False, lambda r: "decision map in the HTML report" if compact
          else f"map {r[0]} below")],
        entries,
        note=("Each refuted numeric perturbation on a slice of the policy: the fields the "
              "crossed cut involves, the others held at the witness's true values, each "
              "cell coloured by the action the contract's policy gives there."
              + (f" {num(more)} more refuted numeric rows are not drawn." if more > 0
                 else "")),
    )


SECTIONS: Final[tuple[Section, ...]] = (
    _failures, _strategies, _perturbations, _cost, _decision_ablation, _governance_ablation,
    _error_injection, _falsehoods, _falsehoods_by_field, _controls, _minimal_messages,
    _triggers, _coverage, _verdicts, _decision_maps,
)
"""The sections after the verdict, in order."""
