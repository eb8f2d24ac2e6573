"""Human-readable renderings of a lab report: Markdown and one self-contained HTML file.

:func:`render_markdown` writes a compact pull-request comment: the gate's verdict
with its reasons, then the essay's tables (strategies, decision-field ablation,
governance-field ablation, error injection), falsehoods caught and missed,
controls, minimal messages and the distribution of counterfactual triggers. It
needs nothing beyond the standard library.

:func:`render_html` writes the same content as one HTML file that opens offline:
inline CSS, no scripts, no external fonts or images, and plots embedded as inline
SVG drawn by matplotlib's Agg backend (the cost–regret frontier across strategies,
per-field ablation regret and hard violations, falsehoods caught and missed per
field). It needs the ``report`` extra (jinja2 and matplotlib); without it the call
raises :class:`MissingExtra`.

Both renderings are deterministic: the same report gives the same text, byte for
byte (SVG ids come from a fixed salt; no dates are written except those already
in the report).
"""

from __future__ import annotations

import html
import io
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from typing import Any, Final

import attrs

from handoffs._errors import MissingExtra

__all__ = ["MissingExtra", "render_html", "render_markdown"]

_DASH: Final = "—"
_COMPARISON: Final = {"<=": "≤", ">=": "≥", "<": "<", ">": ">"}


# --------------------------------------------------------------------------- formatting


def _num(value: Any, places: int = 4) -> str:
    """Numbers as the essay prints them: at most ``places`` decimals, no trailing zeros."""
    if value is None:
        return _DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        text = f"{round(value, places):.{places}f}".rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text
    return str(value)


def _wire(value: Any) -> str:
    """A JSON value (a field value in the report) in its compact wire form."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return _num(value)
    if isinstance(value, Mapping) and set(value) == {"lo", "hi"}:
        return f"[{_wire(value['lo'])}, {_wire(value['hi'])}]"
    return json.dumps(value, sort_keys=True, separators=(",", ": "), ensure_ascii=False)


def _counts(counts: Mapping[str, Any]) -> str:
    if not counts:
        return _DASH
    return ", ".join(f"{key.replace('_', ' ')} {_num(value)}" for key, value in counts.items())


@attrs.frozen
class _Table:
    """One table of the rendering: a title, column headers and formatted cells."""

    key: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: tuple[bool, ...]
    note: str = ""
    collapsed: bool = False


def _table(
    key: str,
    title: str,
    spec: Sequence[tuple[str, bool, Callable[[Any], str]]],
    items: Iterable[Any],
    *,
    note: str = "",
    empty: str = "None.",
    collapsed: bool = False,
) -> _Table:
    items = list(items)
    return _Table(
        key=key,
        title=title,
        columns=tuple(name for name, _, _ in spec),
        rows=tuple(tuple(cell(item) for _, _, cell in spec) for item in items),
        numeric=tuple(numeric for _, numeric, _ in spec),
        # A note explains rows; without rows, say what is missing instead.
        note=note if items else empty,
        collapsed=collapsed,
    )


def _get(key: str, places: int = 4) -> Callable[[Mapping[str, Any]], str]:
    return lambda item: _num(item.get(key), places)


# --------------------------------------------------------------------------- the view


@attrs.frozen
class _View:
    """Everything both renderers show, already formatted."""

    title: str
    passed: bool
    exit_code: int
    verdict: str
    subtitle: str
    reasons: tuple[str, ...]
    warnings: tuple[str, ...]
    tables: tuple[_Table, ...]
    facts: tuple[tuple[str, str], ...]
    provenance: tuple[tuple[str, str], ...]


def _check_report(report: Any) -> Mapping[str, Any]:
    from handoffs.lab._report import validate_report

    validate_report(report)
    checked: Mapping[str, Any] = report
    return checked


def _injections(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    rows = list(report.get("injections") or ())
    if not rows and report.get("error_injection"):
        rows = [report["error_injection"]]
    return rows


@attrs.frozen
class _FieldFalsehoods:
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


def _falsehood_fields(report: Mapping[str, Any]) -> tuple[str | None, list[_FieldFalsehoods]]:
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
        rows.append(_FieldFalsehoods(
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
        return _num(value)
    return _num(shown) + ("⁺" if value > shown else "⁻")


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
            parts.append(f"{item['field']}∈{{{', '.join(_wire(v) for v in item['values'])}}}")
        elif kind == "interval" and "interval" in item:
            interval = item["interval"]
            parts.append(f"{item['field']}∈[{_bound(interval['lo'])}, {_bound(interval['hi'])}]")
        else:
            parts.append(f"{item['field']}={_wire(item.get('value'))}")
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
    return _num(region["confirmed"])


def _view(report: Mapping[str, Any], *, compact: bool) -> _View:
    experiment = report["experiment"]
    gate = report["gate"]
    provenance = report["provenance"]
    subject = experiment["subject"]
    passed = bool(gate["passed"])
    tables: list[_Table] = []

    tables.append(_table(
        "strategies", "Strategies",
        [
            ("strategy", False,
             lambda r: r["strategy"] + (" (subject)" if r["strategy"] == subject else "")),
            ("agreement", True, _get("agreement")),
            ("mean regret", True, _get("mean_regret")),
            ("catastrophic", True, _get("catastrophic_errors")),
            ("governance pass", True, _get("governance_pass_rate")),
            ("mean bytes", True, _get("mean_bytes", 1)),
        ],
        report["strategy_results"],
        note="Each strategy's own receiver on unperturbed messages; catastrophic = hard "
             "violations.",
        empty="No strategy results.",
    ))

    cost = report.get("cost") or {}
    if cost.get("strategies"):
        budget = cost.get("budget") or {}
        limits = ", ".join(f"{k} {v}" for k, v in budget.items() if v is not None)
        tables.append(_table(
            "cost", "Model cost",
            [
                ("strategy", False, lambda r: r["strategy"]),
                ("model calls", True, _get("model_calls")),
                ("cache hits", True, _get("cache_hits")),
                ("tokens in", True, _get("tokens_in")),
                ("tokens out", True, _get("tokens_out")),
                ("mean latency ms", True, _get("mean_latency_ms", 1)),
            ],
            cost["strategies"],
            note="Strategies whose receiver asks a model: calls made in this run, answers "
                 "from the call cache, tokens spent and latency per call"
                 + (f"; budget: {limits}" if limits else "") + ".",
        ))

    ablation = report["decision_field_ablation"]
    spec: list[tuple[str, bool, Callable[[Any], str]]] = [
        ("removed field", False, lambda r: r["removed_field"]),
        ("agreement", True, _get("agreement")),
        ("mean regret", True, _get("mean_regret")),
        ("catastrophic", True, _get("catastrophic_errors")),
    ]
    if any("strict_receiver_agreement" in r for r in ablation):
        spec.append(("strict agreement", True, _get("strict_receiver_agreement")))
    if any("strict_receiver_catastrophic_errors" in r for r in ablation):
        spec.append(("strict catastrophic", True, _get("strict_receiver_catastrophic_errors")))
    tables.append(_table(
        "decision-ablation", "Decision-field ablation", spec, ablation,
        note=f"One decision field removed from the {subject} message; the benign-default "
             "receiver fills in the declared if_missing value, the strict receiver fails "
             "closed.",
        empty="No decision field was removed.",
    ))

    tables.append(_table(
        "governance-ablation", "Governance-field ablation",
        [
            ("removed field", False, lambda r: r["removed_field"]),
            ("semantic agreement", True, _get("semantic_agreement")),
            ("strict agreement", True, _get("strict_receiver_agreement")),
            ("governance failures", True, _get("governance_failures")),
        ],
        report["governance_field_ablation"],
        note="Semantic: the reference policy on the message's decision state; strict: the "
             f"{subject} receiver, which also checks that the message is admissible.",
        empty="No governance member was removed.",
    ))

    tables.append(_table(
        "error-injection", "Error injection",
        [
            ("case", False, lambda r: r["case_id"]),
            ("field", False, lambda r: r["field"]),
            ("true → injected", False,
             lambda r: f"{_wire(r['true_value'])} → {_wire(r['value'])}"),
            ("schema still valid", False, lambda r: _num(r["schema_still_valid"])),
            ("reference", False, lambda r: r["reference_action"]),
            ("baseline", False, lambda r: r["baseline_action"]),
            ("altered", False, lambda r: r["altered_action"]),
            ("loss", True, _get("synthetic_loss")),
            ("hard violations", False, lambda r: ", ".join(r["hard_violations"]) or _DASH),
        ],
        _injections(report),
        note="A declared schema-valid false value in one case; loss = loss(altered, "
             "reference). Passing the schema does not make a value true.",
        empty="No error was injected.",
    ))

    falsehoods = report["falsehoods"]
    tables.append(_table(
        "falsehoods", "Falsehoods caught and missed",
        [
            ("strategy", False, lambda r: r["strategy"]),
            ("evaluated", True, _get("evaluated")),
            ("caught", True, _get("caught")),
            ("missed", True, _get("survived")),
            ("equivalent", True, _get("equivalent")),
            ("over-reacted", True, _get("over_reacted")),
            ("catastrophic missed", True, _get("catastrophic_survived")),
            ("loss-weighted survival", True, _get("loss_weighted_survival")),
        ],
        falsehoods["strategies"],
        note=f"{_num(falsehoods['generated'])} schema-valid falsehoods "
             f"({_counts(falsehoods['by_class'])}); schema rejected "
             f"{_num(falsehoods['schema_rejected'])}. Missed = accepted and acted on.",
        empty="No schema-valid falsehoods were generated.",
    ))
    falsified, per_field = _falsehood_fields(report)
    unlisted = sum(row.unlisted for row in per_field)
    tables.append(_table(
        "falsehoods-by-field", "Falsehoods by field",
        [
            ("field", False, lambda r: r.field),
            ("generated", True, lambda r: _num(r.generated)),
            ("no effect", True, lambda r: _num(r.no_effect)),
            ("change the action", True, lambda r: _num(r.relevant)),
            ("of which catastrophic", True, lambda r: _num(r.catastrophic)),
            ("caught", True, lambda r: _num(r.caught)),
            ("missed", True, lambda r: _num(r.missed)),
        ],
        per_field,
        note=f"Caught and missed: the {falsified or 'subject'} receiver on falsehoods that "
             "would change the reference action"
             + (f"; {unlisted} of them are not listed in the report." if unlisted else "."),
        empty="No schema-valid falsehoods were generated.",
        collapsed=True,
    ))

    controls = [row for row in report["results"] if row["kind"] == "control"]
    gated = {s["name"] for s in experiment["strategies"] if s["gated"]} or {subject}
    hidden = 0
    if compact:
        shown = [row for row in controls if row["strategy"] in gated]
        hidden = len(controls) - len(shown)
        controls = shown
    control_checks = {
        (check["strategy"], check["perturbation"]): check
        for check in gate["checks"] if check["perturbation"] is not None
    }
    tables.append(_table(
        "controls", "Controls",
        [
            ("strategy", False, lambda r: r["strategy"]),
            ("control", False, lambda r: r["perturbation"]),
            ("agreement", True, _get("agreement")),
            ("mean regret", True, _get("mean_regret")),
            ("hard violations", True, _get("hard_violations")),
            ("gate", False, lambda r: _control_status(control_checks, r)),
        ],
        controls,
        note=("A control that does as well as the real message means the channel is not "
              "doing the work."
              + (f" {hidden} rows for ungated strategies are in the HTML report."
                 if hidden else "")),
        empty="No controls were declared.",
    ))

    minimal = report["minimal_messages"]
    tables.append(_table(
        "minimal-messages", "Minimal messages",
        [
            ("action", False, lambda r: r["action"]),
            ("minimal message", False, _message),
            ("cases", True, _get("cases")),
            ("guarantee", False, lambda r: r["guarantee"]),
            ("confirmed", False, _confirmed),
            ("equals triggers", False, lambda r: _num(r["duality_holds"])),
        ],
        minimal["regions"],
        note=f"Method {minimal['method']}; mean {_num(minimal['mean_fields'], 2)} fields per "
             f"case; never needed: {', '.join(minimal['fields_never_needed']) or 'none'}."
             + _opaque_note(minimal.get("opaque_conditions") or []),
        empty="No minimal messages were computed."
              + _opaque_note(minimal.get("opaque_conditions") or []),
    ))

    triggers = report["counterfactual_triggers"]
    cases = triggers["cases"]
    trigger_note = (f"{_num(cases)} cases, {_num(triggers['distinct_states'])} distinct states; "
                    f"{_num(triggers['without_trigger'])} cases have no single-change trigger.")
    trigger_rows = [
        {"field": name, "count": count, "share": (count / cases) if cases else None}
        for name, count in sorted(triggers["by_field"].items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    tables.append(_table(
        "triggers", "Counterfactual triggers",
        [
            ("field", False, lambda r: r["field"]),
            ("cases", True, _get("count")),
            ("share of cases", True, _get("share")),
        ],
        trigger_rows,
        note=trigger_note,
        empty=trigger_note,
    ))

    tables.append(_table(
        "gate-checks", "Gate checks",
        [
            ("metric", False, lambda r: r["metric"]),
            ("strategy", False, lambda r: r["strategy"] or _DASH),
            ("perturbation", False, lambda r: r["perturbation"] or _DASH),
            ("value", True, _get("value")),
            ("threshold", False,
             lambda r: f"{_COMPARISON.get(r['comparison'], r['comparison'])} "
                       f"{_num(r['threshold'])}"),
            ("passed", False, lambda r: "✅" if r["passed"] else "❌"),
        ],
        gate["checks"],
        empty="The gate made no checks.",
        collapsed=True,
    ))

    verdict = "PASS" if passed else "FAIL"
    title = f"handoffs lab: {experiment['name']}"
    coverage = report.get("coverage")
    subtitle = (
        f"{experiment['contract']} · {_num(experiment['cases'])} cases · subject "
        f"{subject} · gate exit {gate['exit_code']}"
        + (f" · coverage: {coverage['line']}" if coverage else "")
    )
    covered = () if not coverage or (coverage.get("complete", True) and not coverage.get(
        "dead_rules")) else (f"policy coverage: {coverage['line']}",)
    facts = (
        ("contract", experiment["contract"]),
        ("schema", experiment["schema_id"]),
        ("cases", f"{_num(experiment['cases'])} ({experiment['case_source']})"),
        ("case set digest", experiment["case_set_digest"]),
        ("epochs", _num(experiment["epochs"])),
    )
    prov = (
        ("handoffs", provenance["handoffs_version"]),
        ("python", f"{provenance['python']} on {provenance['platform']}"),
        ("run", provenance["run_id"]),
        ("created", provenance["created"]),
        ("executor", f"{provenance['executor']} × {_num(provenance['workers'])} workers, "
                     f"chunks of {_num(provenance['chunk_size'])}"),
        ("receiver calls", f"{_num(provenance['receiver_calls'])} "
                           f"(memo hits {_num(provenance['memo_hits'])})"),
        ("elapsed", f"{_num(provenance['elapsed_seconds'], 2)} s"),
    )
    return _View(
        title=title,
        passed=passed,
        exit_code=int(gate["exit_code"]),
        verdict=verdict,
        subtitle=subtitle,
        reasons=tuple(gate["reasons"]),
        warnings=(*gate["warnings"], *covered),
        tables=tuple(tables),
        facts=facts,
        provenance=prov,
    )


def _control_status(checks: Mapping[tuple[Any, Any], Mapping[str, Any]],
                    row: Mapping[str, Any]) -> str:
    check = checks.get((row["strategy"], row["perturbation"]))
    if check is None:
        return _DASH
    return "✅ fails as it should" if check["passed"] else "❌ " + str(check["reason"])


# --------------------------------------------------------------------------- Markdown


def _md_cell(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        .replace("|", "\\|").replace("\r", " ").replace("\n", " ")
    )


def _md_table(table: _Table) -> list[str]:
    if not table.rows:
        return [] if table.note else ["_None._"]
    align = ["---:" if numeric else "---" for numeric in table.numeric]
    lines = [
        "| " + " | ".join(_md_cell(c) for c in table.columns) + " |",
        "| " + " | ".join(align) + " |",
    ]
    lines.extend("| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows)
    return lines


def render_markdown(report: Mapping[str, Any]) -> str:
    """A compact Markdown rendering of a lab report, for a pull-request comment.

    The first line is the verdict (pass or fail, with the gate's exit code); the
    gate's failing reasons and warnings follow, then the essay's tables and the
    lab's findings. Long tables (falsehoods by field, every gate check) are folded
    into ``<details>`` blocks.

    Args:
        report: a report following ``handoffs-lab-report/1`` (as written by the lab,
            or loaded from its JSON).

    Raises:
        ReportError: the object is not a valid ``handoffs-lab-report/1`` report.
    """
    view = _view(_check_report(report), compact=True)
    mark = "✅" if view.passed else "❌"
    lines = [
        f"### {mark} {_md_cell(view.title)} — **{view.verdict}**",
        "",
        _md_cell(view.subtitle),
        "",
    ]
    if view.reasons:
        lines.append("**Why it failed:**")
        lines.extend(f"- {_md_cell(reason)}" for reason in view.reasons)
        lines.append("")
    if view.warnings:
        lines.append("**Warnings:**")
        lines.extend(f"- {_md_cell(warning)}" for warning in view.warnings)
        lines.append("")
    for table in view.tables:
        body = _md_table(table)
        if table.note:
            note = f"_{_md_cell(table.note)}_"
            body = [*body, "", note] if body else [note]
        if table.collapsed:
            lines.extend([f"<details><summary>{_md_cell(table.title)}</summary>", "",
                          *body, "", "</details>", ""])
        else:
            lines.extend([f"#### {_md_cell(table.title)}", "", *body, ""])
    return "\n".join(lines).rstrip("\n") + "\n"


# --------------------------------------------------------------------------- plots


def _require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtra(
            "the HTML report", extra="report", module=module.split(".", maxsplit=1)[0]
        ) from exc


_SVG_PROLOG: Final = re.compile(r"^.*?(?=<svg\b)", re.DOTALL)
_SVG_COMMENT: Final = re.compile(r"<!--.*?-->", re.DOTALL)
_SVG_XMLNS: Final = re.compile(r'\s+xmlns(?::\w+)?="[^"]*"')
_SVG_ID: Final = re.compile(r'\bid="([^"]+)"')
_SVG_SIZE: Final = re.compile(r'<svg\b([^>]*?)\s+width="[^"]*"\s+height="[^"]*"')

_PALETTE: Final = {
    "ink": "#1f2933",
    "muted": "#7b8794",
    "good": "#2f855a",
    "bad": "#c53030",
    "warn": "#dd6b20",
    "main": "#2b6cb0",
    "light": "#cbd2d9",
}


def _inline_svg(figure: Any, prefix: str, label: str) -> str:
    """Serialise a matplotlib figure as SVG fit for inlining into HTML.

    The XML prolog, DOCTYPE, comments and namespace declarations go (an HTML parser
    puts inline ``<svg>`` in the SVG namespace itself), ``xlink:href`` becomes
    ``href``, and every id gets ``prefix`` so that several plots in one page never
    share an id.
    """
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg",
                   metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    svg = _SVG_PROLOG.sub("", buffer.getvalue(), count=1)
    svg = _SVG_COMMENT.sub("", svg)
    svg = _SVG_XMLNS.sub("", svg)
    svg = svg.replace("xlink:href=", "href=")
    ids = set(_SVG_ID.findall(svg))
    for ident in sorted(ids, key=len, reverse=True):
        new = f"{prefix}-{ident}"
        svg = svg.replace(f'id="{ident}"', f'id="{new}"')
        svg = svg.replace(f'href="#{ident}"', f'href="#{new}"')
        svg = svg.replace(f"url(#{ident})", f"url(#{new})")
    accessible = html.escape(label, quote=True)
    svg = _SVG_SIZE.sub(lambda m: f'<svg{m[1]} role="img" aria-label="{accessible}"', svg,
                        count=1)
    return "\n".join(line.rstrip() for line in svg.strip().splitlines())


def _figure(width: float, height: float) -> Any:
    figure_module = _require("matplotlib.figure")
    backend = _require("matplotlib.backends.backend_agg")
    figure = figure_module.Figure(figsize=(width, height), dpi=100, layout="constrained")
    backend.FigureCanvasAgg(figure)
    return figure


def _style_axes(ax: Any) -> None:
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.grid(axis="both", color=_PALETTE["light"], linewidth=0.6)
    ax.set_axisbelow(True)


def _place_labels(figure: Any, ax: Any, points: Sequence[tuple[float, float]],
                  texts: Sequence[str], *, color: str) -> None:
    """Annotate each point, choosing for each label the first of a few offsets whose
    box overlaps no label placed before it and no point (deterministic, greedy).
    """
    # Fix the layout first, so that display coordinates stay valid while placing.
    figure.draw_without_rendering()
    figure.set_layout_engine("none")
    renderer = figure.canvas.get_renderer()
    taken: list[Any] = []
    marks = [ax.transData.transform(p) for p in points]
    candidates = ((7, 5, "left", "bottom"), (7, -5, "left", "top"),
                  (-7, 5, "right", "bottom"), (-7, -5, "right", "top"),
                  (7, 18, "left", "bottom"), (7, -18, "left", "top"))
    for point, text in zip(points, texts, strict=True):
        chosen = None
        for dx, dy, ha, va in candidates:
            label = ax.annotate(text, point, textcoords="offset points", xytext=(dx, dy),
                                ha=ha, va=va, fontsize=8, color=color)
            box = label.get_window_extent(renderer).expanded(1.05, 1.1)
            clear = not any(box.overlaps(other) for other in taken) and not any(
                box.contains(x, y) for x, y in marks)
            if clear:
                chosen = label
                break
            label.remove()
        if chosen is None:
            dx, dy, ha, va = candidates[0]
            chosen = ax.annotate(text, point, textcoords="offset points", xytext=(dx, dy),
                                 ha=ha, va=va, fontsize=8, color=color)
        taken.append(chosen.get_window_extent(renderer))


def _tick_below(value: float) -> float:
    """The largest 1-2-5 tick (1, 2, 5 times a power of ten) at or below ``value``."""
    power = 10.0 ** math.floor(math.log10(value))
    return max(m * power for m in (1, 2, 5) if m * power <= value)


def _frontier_plot(report: Mapping[str, Any]) -> str | None:
    rows = [r for r in report["strategy_results"] if r["mean_bytes"] > 0]
    if not rows:
        return None
    ticker = _require("matplotlib.ticker")
    authority = {s["name"]: s["authority"] for s in report["experiment"]["strategies"]}
    figure = _figure(7.2, 3.9)
    ax = figure.subplots()
    _style_axes(ax)
    ax.set_xscale("log")
    lo = min(r["mean_bytes"] for r in rows)
    hi = max(r["mean_bytes"] for r in rows)
    # Start the axis just below a 1-2-5 tick, so that the cheapest strategy has a
    # labelled tick on its left.
    ax.set_xlim(_tick_below(lo / 1.3) / 1.1, hi * 2.6)
    top = max(r["mean_regret"] for r in rows) or 1.0
    ax.set_ylim(-0.08 * top, top * 1.3)
    # The frontier is drawn over strategies that keep the decision with the receiver:
    # a DECIDE sender moves the decision boundary (the essay's negative control).
    advisory = [r for r in rows if authority.get(r["strategy"], "ADVISE") == "ADVISE"]
    frontier = []
    best = math.inf
    for row in sorted(advisory, key=lambda r: (r["mean_bytes"], r["mean_regret"])):
        if row["mean_regret"] < best:
            frontier.append(row)
            best = row["mean_regret"]
    if frontier:
        xs = [r["mean_bytes"] for r in frontier] + [hi * 2.6]
        ys = [r["mean_regret"] for r in frontier] + [frontier[-1]["mean_regret"]]
        ax.step(xs, ys, where="post", color=_PALETTE["muted"], linewidth=1, linestyle="--",
                label="cost–regret frontier (ADVISE strategies)")
    for row in rows:
        hard = row["catastrophic_errors"] > 0
        moved = authority.get(row["strategy"], "ADVISE") != "ADVISE"
        color = _PALETTE["bad"] if hard else _PALETTE["main"]
        ax.scatter([row["mean_bytes"]], [row["mean_regret"]], s=56, zorder=3,
                   marker="X" if hard else "o", linewidths=1.5,
                   facecolors="none" if moved else color, edgecolors=color)
    if len(advisory) < len(rows):
        ax.scatter([], [], s=56, marker="o", facecolors="none", edgecolors=_PALETTE["main"],
                   label="sender DECIDEs (authority moved)")
    if any(r["catastrophic_errors"] > 0 for r in rows):
        ax.scatter([], [], s=56, marker="X", color=_PALETTE["bad"], label="hard violations")
    left, right = ax.get_xlim()
    ticks = [m * 10.0**k for k in range(math.floor(math.log10(left)),
                                         math.ceil(math.log10(right)) + 1)
             for m in (1, 2, 5) if left <= m * 10.0**k <= right]
    ax.xaxis.set_major_locator(ticker.FixedLocator(ticks))
    ax.xaxis.set_minor_locator(ticker.NullLocator())
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _: f"{x:g}"))
    ax.set_xlabel("mean message bytes (log scale)")
    ax.set_ylabel("mean consequence-weighted regret")
    ax.set_title("Cost–regret frontier across strategies", loc="left", fontsize=11)
    ax.legend(loc="upper right", fontsize=8, frameon=False)
    _place_labels(
        figure, ax,
        [(r["mean_bytes"], r["mean_regret"]) for r in rows],
        [f"{r['strategy']} (agreement {_num(r['agreement'], 3)})" for r in rows],
        color=_PALETTE["ink"],
    )
    return _inline_svg(figure, "frontier", "Cost–regret frontier across strategies: mean "
                       "message bytes against mean regret")


def _ablation_plot(report: Mapping[str, Any]) -> str | None:
    rows = report["decision_field_ablation"]
    if not rows:
        return None
    subject = report["experiment"]["subject"]
    results = {r["perturbation"]: r for r in report["results"] if r["strategy"] == subject}
    names = [r["removed_field"] for r in rows]
    benign_regret = [float(r["mean_regret"]) for r in rows]
    benign_hard = [int(r["catastrophic_errors"]) for r in rows]
    # The subject's own (strict) receiver on the same messages, where the report has it.
    strict = [results.get(f"remove-decision-field:{name}") for name in names]
    has_strict = all(row is not None for row in strict)
    figure = _figure(7.2, 1.3 + 0.42 * len(rows))
    regret_ax, hard_ax = figure.subplots(1, 2, sharey=True)
    height = 0.38 if has_strict else 0.7
    upper = [i - height / 2 if has_strict else i for i in range(len(rows))]
    lower = [i + height / 2 for i in range(len(rows))]
    for ax in (regret_ax, hard_ax):
        _style_axes(ax)
        ax.grid(axis="y", visible=False)
    regret_ax.barh(upper, benign_regret, height=height, color=_PALETTE["bad"],
                   label="benign-default receiver (declared if_missing)")
    hard_ax.barh(upper, benign_hard, height=height, color=_PALETTE["bad"])
    if has_strict:
        regret_ax.barh(lower, [float(r["mean_regret"]) for r in strict if r is not None],
                       height=height, color=_PALETTE["main"],
                       label=f"{subject}'s own receiver (fails closed)")
        hard_ax.barh(lower, [int(r["hard_violations"]) for r in strict if r is not None],
                     height=height, color=_PALETTE["main"])
    regret_ax.set_yticks(list(range(len(rows))), names, fontsize=8)
    regret_ax.invert_yaxis()
    regret_ax.set_xlabel("mean consequence-weighted regret")
    hard_ax.set_xlabel("hard violations")
    hard_ax.xaxis.get_major_locator().set_params(integer=True)
    regret_ax.set_title("Regret and hard violations when one decision field is removed",
                        loc="left", fontsize=11)
    figure.legend(loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    return _inline_svg(figure, "ablation", "Regret and hard violations when one decision "
                       "field is removed")


def _falsehood_plot(report: Mapping[str, Any]) -> str | None:
    strategy, rows = _falsehood_fields(report)
    if not rows:
        return None
    series = (
        ("caught", "caught", _PALETTE["good"]),
        ("missed", "missed (accepted and acted on)", _PALETTE["bad"]),
        ("unlisted", "changes the action, outcome not listed", _PALETTE["muted"]),
        ("over_reacted", "no effect, receiver over-reacted", _PALETTE["warn"]),
        ("quiet", "no effect", _PALETTE["light"]),
    )
    values = {
        "caught": [r.caught for r in rows],
        "missed": [r.missed for r in rows],
        "unlisted": [r.unlisted for r in rows],
        "over_reacted": [r.over_reacted for r in rows],
        "quiet": [max(r.no_effect - r.over_reacted, 0) for r in rows],
    }
    positions = list(range(len(rows)))
    figure = _figure(7.2, 1.2 + 0.36 * len(rows))
    ax = figure.subplots()
    _style_axes(ax)
    ax.grid(axis="y", visible=False)
    left = [0] * len(rows)
    for key, label, color in series:
        if not any(values[key]):
            continue
        ax.barh(positions, values[key], left=left, color=color, label=label)
        left = [a + b for a, b in zip(left, values[key], strict=True)]
    ax.set_yticks(positions, [r.field for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel(f"schema-valid falsehoods ({strategy or 'subject'} receiver)")
    ax.set_title("Falsehoods caught and missed, per field", loc="left", fontsize=11)
    figure.legend(loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    return _inline_svg(figure, "falsehoods", "Schema-valid falsehoods caught and missed, "
                       "per field")


def _plots(report: Mapping[str, Any]) -> dict[str, str]:
    matplotlib = _require("matplotlib")
    _require("matplotlib.backends.backend_agg")
    rc = {
        "svg.hashsalt": "handoffs-lab-report",
        "svg.fonttype": "none",
        "font.family": "DejaVu Sans",
        "font.size": 9,
        "path.simplify": True,
    }
    plots: dict[str, str] = {}
    with matplotlib.rc_context(rc):
        for key, draw in (("strategies", _frontier_plot),
                          ("decision-ablation", _ablation_plot),
                          ("falsehoods", _falsehood_plot)):
            svg = draw(report)
            if svg is not None:
                plots[key] = svg
    return plots


# --------------------------------------------------------------------------- HTML


@cache
def _environment() -> Any:
    jinja2 = _require("jinja2")
    return jinja2.Environment(
        loader=jinja2.PackageLoader("handoffs.lab", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_html(report: Mapping[str, Any]) -> str:
    """One self-contained HTML page for a lab report.

    The page needs no network: CSS is inline, there is no JavaScript, and the plots
    (cost–regret frontier, per-field ablation regret and hard violations, falsehoods
    caught and missed per field) are inline SVG. The same report always renders to
    the same text.

    Args:
        report: a report following ``handoffs-lab-report/1``.

    Raises:
        ReportError: the object is not a valid ``handoffs-lab-report/1`` report.
        MissingExtra: jinja2 or matplotlib is not installed
            (``pip install 'handoffs[report]'``).
    """
    checked = _check_report(report)
    environment = _environment()
    markup = _require("markupsafe")
    view = _view(checked, compact=False)
    plots = {key: markup.Markup(svg) for key, svg in _plots(checked).items()}
    template = environment.get_template("report.html.j2")
    html: str = template.render(view=view, plots=plots)
    return html
