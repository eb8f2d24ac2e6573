"""Compare two lab reports: what regressed, per strategy and perturbation.

:func:`diff_reports` lines up the ``results`` rows of an old and a new report by
(strategy, perturbation) and, for each, compares agreement, mean regret, hard
violations, mean bytes and mean tokens; it compares the ``coverage`` section's
numbers where both reports have one, the gate's verdict, and lists the hard
violations that are new (by case, strategy and perturbation). A change beyond
its budget (a :class:`DiffBudget`, from its keyword arguments) is a regression; a row
the new report lacks is one too (a check that vanished proves nothing).
:meth:`ReportDiff.render` writes the result as text or as Markdown for a CI comment.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs

from handoffs._errors import InvalidArgument

__all__ = ["DiffBudget", "MetricChange", "ReportDiff", "diff_reports"]

_EXACT: Final = 1e-9  # float noise: a change smaller than this is no change


def _non_negative(_: Any, attribute: attrs.Attribute[Any], value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
        raise InvalidArgument(f"{attribute.name} must be a finite number ≥ 0, got {value!r}")


@attrs.frozen
class DiffBudget:
    """How much each metric may worsen before
    :func:`~handoffs.lab.reports.diff_reports` calls it a regression (its keyword
    arguments).

    Attributes:
        agreement: agreement may fall by this much (absolute; default 0).
        regret: mean regret may rise by this much (absolute; default 0).
        hard_violations: hard violations may rise by this many (default 0).
        bytes: mean message bytes may rise by this fraction (default 0.1, 10 %).
        tokens: mean tokens may rise by this fraction (default 0.1, 10 %).
        coverage: a coverage number may fall by this much (absolute; default 0).
    """

    agreement: float = attrs.field(default=0.0, validator=_non_negative)
    regret: float = attrs.field(default=0.0, validator=_non_negative)
    hard_violations: int = attrs.field(default=0, validator=_non_negative)
    bytes: float = attrs.field(default=0.1, validator=_non_negative)
    tokens: float = attrs.field(default=0.1, validator=_non_negative)
    coverage: float = attrs.field(default=0.0, validator=_non_negative)


@attrs.frozen
class MetricChange:
    """One metric of one row, old against new.

    Attributes:
        strategy: the strategy (``None`` for a report-wide number such as coverage).
        perturbation: the perturbation id (``None`` likewise).
        metric: ``agreement``, ``mean_regret``, ``hard_violations``, ``mean_bytes``,
            ``mean_tokens``, ``coverage.<name>``, ``row`` (the row vanished),
            ``exercised`` (whether the perturbation exercised the receiver) or ``gate``.
        old: the old value (``None`` when the old report lacks it).
        new: the new value (``None`` when the new report lacks it).
        regressed: worse by more than the budget allows (a real regression).
        status: ``regressed``, ``changed``, ``expected`` (a control doing worse, as
            a control must), ``removed`` (the row is not in the new report),
            ``added``, ``not exercised`` (the new run's perturbation exercised nothing
            the receiver reads: its figures are not compared) or ``exercised`` (it
            does again).
    """

    strategy: str | None
    perturbation: str | None
    metric: str
    old: Any
    new: Any
    regressed: bool
    status: str = attrs.field(default=attrs.Factory(
        lambda self: "regressed" if self.regressed else "changed", takes_self=True))

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return attrs.asdict(self)


@attrs.frozen
class ReportDiff:
    """What changed between two reports.

    Attributes:
        changes: every metric that changed, regressions first.
        new_hard_violations: failing decisions with a hard violation in the new
            report whose (case, strategy, perturbation) the old report did not list.
        budget: the budget the changes were judged against.
    """

    changes: tuple[MetricChange, ...]
    new_hard_violations: tuple[Mapping[str, Any], ...]
    budget: DiffBudget

    @property
    def regressions(self) -> tuple[MetricChange, ...]:
        """The changes beyond the budget."""
        return tuple(c for c in self.changes if c.regressed)

    @property
    def exit_code(self) -> int:
        """0 when nothing regressed beyond the budget, else 1."""
        return 1 if self.regressions else 0

    def render(self, *, format: Literal["text", "markdown"] = "text",
               limit: int = 50) -> str:
        """The diff as plain text or Markdown (a CI comment): the verdict, then the
        changes (regressions first, at most ``limit``), then new hard violations.
        """
        return _render(self, format=format, limit=limit)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"regressed": bool(self.regressions),
                "changes": [c.to_json() for c in self.changes],
                "new_hard_violations": [dict(f) for f in self.new_hard_violations],
                "budget": attrs.asdict(self.budget)}


def _worse(metric: str, old: Any, new: Any, budget: DiffBudget) -> bool:
    """Whether ``new`` is worse than ``old`` by more than the budget allows."""
    if old is None or new is None:
        return False
    if metric == "agreement":
        return bool(old - new > budget.agreement + _EXACT)
    if metric == "mean_regret":
        return bool(new - old > budget.regret + _EXACT)
    if metric == "hard_violations":
        return bool(new - old > budget.hard_violations)
    if metric in ("mean_bytes", "mean_tokens"):
        allowed = budget.bytes if metric == "mean_bytes" else budget.tokens
        return bool(new - old > abs(old) * allowed + _EXACT)
    return bool(old - new > budget.coverage + _EXACT)  # coverage.*


_METRICS: Final = ("agreement", "mean_regret", "hard_violations", "mean_bytes", "mean_tokens")
_RAN: Final = {True: "exercised", False: "not exercised"}


def _row_changes(old: Mapping[str, Any], new: Mapping[str, Any],
                 budget: DiffBudget) -> list[MetricChange]:
    old_rows = {(r["strategy"], r["perturbation"]): r for r in old["results"]}
    new_rows = {(r["strategy"], r["perturbation"]): r for r in new["results"]}
    out = []
    for key, before in old_rows.items():
        after = new_rows.get(key)
        if after is None:  # the new run does not have it: reported, not a regression
            out.append(MetricChange(*key, "row", "present", None, regressed=False,
                                    status="removed"))
            continue
        ran = [row.get("exercised") is not False for row in (before, after)]
        if not all(ran):
            # a row its perturbation did not exercise has the unperturbed decisions'
            # figures: they are not compared; a change of whether it ran is reported
            if ran[0] != ran[1]:
                out.append(MetricChange(*key, "exercised", _RAN[ran[0]], _RAN[ran[1]],
                                        regressed=False,
                                        status="exercised" if ran[1] else "not exercised"))
            continue
        control = before.get("kind") == "control"
        for metric in _METRICS:
            a, b = before.get(metric), after.get(metric)
            if a != b and not (isinstance(a, float) and isinstance(b, float)
                               and abs(a - b) <= _EXACT):
                worse = _worse(metric, a, b, budget)
                if control and worse and metric in ("agreement", "mean_regret",
                                                    "hard_violations"):
                    # a control doing worse is what a control must do
                    out.append(MetricChange(*key, metric, a, b, regressed=False,
                                            status="expected"))
                else:
                    out.append(MetricChange(*key, metric, a, b, worse))
    for key in new_rows.keys() - old_rows.keys():
        out.append(MetricChange(*key, "row", None, "present", regressed=False,
                                status="added"))
    return out


_COVERED: Final = ("regions_witnessed", "boundaries_covered")
"""The coverage section's counts of what the cases reached: fewer is a regression (the
live regions and boundaries found are the policy's, not the cases')."""


def _coverage_changes(old: Mapping[str, Any], new: Mapping[str, Any],
                      budget: DiffBudget) -> list[MetricChange]:
    before, after = old.get("coverage"), new.get("coverage")
    if not isinstance(before, Mapping) or not isinstance(after, Mapping):
        return []
    out = []
    for name in _COVERED:
        a, b = before.get(name), after.get(name)
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b))
        if numbers and a != b:
            out.append(MetricChange(None, None, f"coverage.{name}", a, b,
                                    _worse("coverage", a, b, budget)))
    return out


def _new_hard_violations(old: Mapping[str, Any],
                         new: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    def keys(report: Mapping[str, Any]) -> set[tuple[str, str, str]]:
        cases = (report.get("failures") or {}).get("cases", ())
        return {(f["case_id"], f["strategy"], f["perturbation"])
                for f in cases if f["hard_violations"]}

    known = keys(old)
    cases = (new.get("failures") or {}).get("cases", ())
    return tuple(f for f in cases if f["hard_violations"]
                 and (f["case_id"], f["strategy"], f["perturbation"]) not in known)


def diff_reports(old: Mapping[str, Any], new: Mapping[str, Any], *,
                 agreement: float = 0.0, regret: float = 0.0, hard_violations: int = 0,
                 bytes: float = 0.1, tokens: float = 0.1, coverage: float = 0.0,
                 ) -> ReportDiff:
    """Compare two lab reports (both validated against the report schema).

    The keyword arguments are the budget: how much each metric may worsen before
    it counts as a regression.

    Args:
        old: the earlier report.
        new: the later report.
        agreement: agreement may fall by this much (absolute).
        regret: mean regret may rise by this much (absolute).
        hard_violations: hard violations may rise by this many.
        bytes: mean message bytes may rise by this fraction (default 10 %).
        tokens: mean tokens may rise by this fraction (default 10 %).
        coverage: a coverage number may fall by this much (absolute).

    Raises:
        ValueError: ``InvalidArgument``, a budget that is negative or not finite.
        ReportError: either report does not satisfy the report schema.
    """
    budget = DiffBudget(agreement=agreement, regret=regret, hard_violations=hard_violations,
                        bytes=bytes, tokens=tokens, coverage=coverage)
    from handoffs.lab._report import validate_report

    validate_report(old)
    validate_report(new)
    changes = _row_changes(old, new, budget) + _coverage_changes(old, new, budget)
    was, now = bool(old["gate"]["passed"]), bool(new["gate"]["passed"])
    if was != now:
        changes.append(MetricChange(None, None, "gate", "PASS" if was else "FAIL",
                                    "PASS" if now else "FAIL", regressed=was and not now))
    changes.sort(key=lambda c: not c.regressed)
    return ReportDiff(tuple(changes), _new_hard_violations(old, new), budget)


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        text = f"{value:.4f}".rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text
    return str(value)


_STATUS: Final = {"regressed": "REGRESSED", "changed": "changed",
                  "expected": "expected (the control does worse)", "removed": "removed",
                  "added": "added", "not exercised": "not exercised (figures not compared)",
                  "exercised": "exercised again"}


def _lines(diff: ReportDiff, limit: int) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for change in diff.changes[:limit]:
        rows.append((_STATUS[change.status],
                     change.strategy or "—", change.perturbation or "—", change.metric,
                     _cell(change.old), _cell(change.new)))
    return rows


def _render(diff: ReportDiff, *, format: Literal["text", "markdown"],
            limit: int) -> str:
    """:meth:`ReportDiff.render`."""
    regressions = len(diff.regressions)
    verdict = (f"{regressions} regression(s) beyond the budget" if regressions
               else "no regression beyond the budget")
    rows = _lines(diff, limit)
    more = len(diff.changes) - len(rows)
    header = ("status", "strategy", "perturbation", "metric", "old", "new")
    hard = [f"{f['case_id']}: {f['strategy']} under {f['perturbation']} chose {f['action']} "
            f"for {f['reference_action']} ({', '.join(f['hard_violations'])})"
            for f in diff.new_hard_violations[:limit]]
    if format == "markdown":
        out = [f"### handoffs lab diff: **{'REGRESSED' if regressions else 'OK'}** "
               f"({verdict})", ""]
        if rows:
            out += ["| " + " | ".join(header) + " |",
                    "| " + " | ".join("---" for _ in header) + " |"]
            out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |"
                    for row in rows]
        else:
            out.append("_No metric changed._")
        if more:
            out += ["", f"_{more} more changes not shown._"]
        if hard:
            out += ["", "**New hard violations:**", *(f"- {line}" for line in hard)]
        return "\n".join(out) + "\n"
    out = [f"lab diff: {verdict}"]
    out += ["  " + "  ".join(row) for row in rows]
    if more:
        out.append(f"  ... {more} more changes")
    if hard:
        out += ["new hard violations:", *(f"  {line}" for line in hard)]
    return "\n".join(out) + "\n"
