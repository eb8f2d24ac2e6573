"""Watch a released handoff: compare production decisions with the release's baselines.

The essay's monitoring list, read against what was approved: "a sudden reduction in
message size may be a regression if it comes from omitted state". A
:class:`Profile` summarises a decision log (the message size distribution, the
refusal-reason mix, the missing-field, expired, readback-disagreement, escalation and
decided-otherwise rates, the counterfactual-trigger distribution); ``handoffs lab gate
--baseline-log`` records the profile of the released handoff's own decisions (its
acceptance run: staging, canary or shadow traffic) in the release artefact, with the
:class:`Budgets` it declares; ``handoffs log watch`` profiles production the same way
and reports every :class:`Shift` with its evidence. The same budgets export as
Prometheus alerting rules over the service's metrics (:func:`prometheus_rules`).

One profile function reads both logs, so the release and production are measured
alike (a lab report's message sizes are of unsigned messages, not comparable with a
gate's signed receipts).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

from handoffs._codes import EXPIRED_CODES
from handoffs._errors import HandoffsError

__all__ = [
    "BASELINES_FORMAT",
    "Budgets",
    "Profile",
    "Shift",
    "WatchError",
    "compare",
    "overrules",
    "profile_log",
    "profile_rows",
    "prometheus_rules",
    "read_baselines",
    "release_baselines",
]

BASELINES_FORMAT: Final = "handoffs-watch-baselines/1"
"""The ``format`` of a release artefact's ``baselines`` section."""



class WatchError(HandoffsError, ValueError):
    """The watch cannot compare: a log of another contract version than the release,
    an empty log, a release without baselines (codes ``watch-contract-mismatch``,
    ``watch-empty-log``, ``watch-no-baselines``, ``watch-bad-release``).
    """

    code = "watch-bad-release"


def _quantile(ordered: Sequence[int], q: float) -> float:
    """The ``q`` quantile of ``ordered`` (linear interpolation between ranks)."""
    if not ordered:
        return math.nan
    position = q * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@attrs.frozen
class Profile:
    """The boundary metrics of a set of decisions.

    Attributes:
        contracts: the contract ids (``name/version``) the decisions name.
        decisions: how many decisions.
        message_bytes: ``mean``, ``p10``, ``p50``, ``p90``, ``max`` of the message sizes.
        refused / escalated: decisions with verdict REJECT / ESCALATE.
        reasons: refused or escalated decisions carrying each reason code.
        missing_field / expired: refused decisions with ``missing-field`` / an expiry code.
        readback_sampled / readback_disagreements: decisions read back, and of those
            the ones that disagreed with the evidence.
        decided_otherwise: accepted decisions whose action is not the proposal
            (see :func:`overrules`); ``None`` when no accepted decision records its
            proposal (every one predates the log's ``proposed_action`` column).
        triggers: decisions per counterfactual-trigger text.
        unproposed: accepted decisions that record no proposal (log rows written
            before the ``proposed_action`` column): left out of the decided-otherwise
            rate's denominator.
    """

    contracts: tuple[str, ...]
    decisions: int
    message_bytes: Mapping[str, float]
    refused: int
    escalated: int
    reasons: Mapping[str, int]
    missing_field: int
    expired: int
    readback_sampled: int
    readback_disagreements: int
    decided_otherwise: int | None
    triggers: Mapping[str, int]
    unproposed: int = 0

    def rate(self, count: int | None) -> float | None:
        """``count`` per decision (``None`` for ``None`` or no decisions)."""
        if count is None or not self.decisions:
            return None
        return count / self.decisions

    @property
    def decided_otherwise_rate(self) -> float | None:
        """Overruled decisions per decision that could be measured (every decision
        but the :attr:`unproposed` ones); ``None`` when none could.
        """
        measured = self.decisions - self.unproposed
        if self.decided_otherwise is None or measured <= 0:
            return None
        return self.decided_otherwise / measured

    @property
    def readback_disagreement_rate(self) -> float | None:
        """Disagreements per decision read back (``None`` when none was)."""
        if not self.readback_sampled:
            return None
        return self.readback_disagreements / self.readback_sampled

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (what the release artefact's ``baselines.profile`` holds)."""
        return {
            "contracts": list(self.contracts), "decisions": self.decisions,
            "message_bytes": dict(self.message_bytes), "refused": self.refused,
            "escalated": self.escalated, "reasons": dict(self.reasons),
            "missing_field": self.missing_field, "expired": self.expired,
            "readback_sampled": self.readback_sampled,
            "readback_disagreements": self.readback_disagreements,
            "decided_otherwise": self.decided_otherwise, "triggers": dict(self.triggers),
            "unproposed": self.unproposed,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, where: str = "baselines.profile"
                  ) -> Profile:
        """The profile :meth:`to_json` wrote.

        Raises:
            WatchError: ``watch-bad-release``, a member is missing or of the wrong type.
        """
        try:
            return cls(
                contracts=tuple(str(c) for c in data["contracts"]),
                decisions=int(data["decisions"]),
                message_bytes={str(k): float(v) for k, v in data["message_bytes"].items()},
                refused=int(data["refused"]), escalated=int(data["escalated"]),
                reasons={str(k): int(v) for k, v in data["reasons"].items()},
                missing_field=int(data["missing_field"]), expired=int(data["expired"]),
                readback_sampled=int(data["readback_sampled"]),
                readback_disagreements=int(data["readback_disagreements"]),
                decided_otherwise=(None if data["decided_otherwise"] is None
                                   else int(data["decided_otherwise"])),
                triggers={str(k): int(v) for k, v in data["triggers"].items()},
                # absent from a release written before the column: every decision measured
                unproposed=int(data.get("unproposed", 0)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise WatchError(f"the release's {where} is malformed: {type(exc).__name__}: "
                             f"{exc}", code="watch-bad-release", json_path=f"$.{where}"
                             ) from exc


def overrules(row: Mapping[str, Any]) -> bool | None:
    """Whether a decision-log row decided otherwise than the sender proposed: an
    accepted decision whose ``action`` is not its ``proposed_action``. ``False`` for
    every other verdict (an escalation or a refusal decides nothing against the
    proposal; the escalation rate counts escalations), ``None`` for an accepted row
    that records no proposal (written before the log's ``proposed_action`` column).

    The one definition: the release's baseline (``lab gate --baseline-log``) and the
    production profile (``log watch``) both count with it.
    """
    if row.get("verdict") != "ACCEPT":
        return False
    proposal = row.get("proposed_action")
    if proposal is None:
        return None
    return bool(row.get("action") != proposal)


def profile_rows(rows: Iterable[Mapping[str, Any]]) -> Profile:
    """The :class:`Profile` of decision-log rows (as ``rows()`` of the SQLite log or
    the PostgreSQL store returns them).
    """
    contracts: set[str] = set()
    sizes: list[int] = []
    verdicts: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    triggers: Counter[str] = Counter()
    missing = expired = sampled = disagreed = 0
    overruled = unproposed = accepted = 0
    for row in rows:
        if row.get("contract"):
            contracts.add(f"{row['contract']}/{row.get('version') or ''}")
        sizes.append(int(row["message_bytes"]))
        verdict = str(row["verdict"])
        verdicts[verdict] += 1
        codes = {str(r["code"]) for r in row.get("reasons") or ()}
        if verdict != "ACCEPT":
            reasons.update(codes)
        if verdict == "REJECT":
            missing += "missing-field" in codes
            expired += bool(codes.intersection(EXPIRED_CODES))
        if row.get("readback") is not None:
            sampled += 1
            disagreed += row["readback"] == "disagree"
        if row.get("counterfactual_trigger") is not None:
            triggers[str(row["counterfactual_trigger"])] += 1
        accepted += verdict == "ACCEPT"
        otherwise = overrules(row)
        if otherwise is None:
            unproposed += 1  # a row written before the proposed_action column
        else:
            overruled += otherwise
    sizes.sort()
    summary = ({"mean": sum(sizes) / len(sizes), "p10": _quantile(sizes, 0.1),
                "p50": _quantile(sizes, 0.5), "p90": _quantile(sizes, 0.9),
                "max": float(sizes[-1])} if sizes else {})
    return Profile(
        contracts=tuple(sorted(contracts)), decisions=len(sizes), message_bytes=summary,
        refused=verdicts["REJECT"], escalated=verdicts["ESCALATE"],
        reasons=dict(sorted(reasons.items())), missing_field=missing, expired=expired,
        readback_sampled=sampled, readback_disagreements=disagreed,
        decided_otherwise=overruled if sizes and (unproposed < accepted or not accepted)
        else None,
        triggers=dict(triggers.most_common()), unproposed=unproposed)


def profile_log(url: str, *, last: int | None = None) -> Profile:
    """The :class:`Profile` of a decision log (a SQLite file or a ``postgresql://`` URL):
    all of its decisions, or the ``last`` ones.

    Raises:
        WatchError: ``watch-empty-log``, no SQLite log at ``url``.
        DecisionLogError: the store cannot be read.
    """
    from pathlib import Path

    from handoffs.service import open_store

    if "://" not in url and not Path(url).is_file():
        raise WatchError(f"no decision log at {url}", code="watch-empty-log",
                         json_path="$.log")
    store: Any = open_store(url)  # the SQLite log or the PostgreSQL store: both read rows
    try:
        count = store.count() if last is None else last
        return profile_rows(store.rows(limit=max(count, 1)) if count else ())
    finally:
        store.close()


def _fraction(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            0 <= value <= 1):
        raise WatchError(f"budget {name} must be a number from 0 to 1, got {value!r}",
                         code="watch-bad-budget", json_path=f"$.baselines.budgets.{name}")
    return float(value)


@attrs.frozen
class Budgets:
    """What production may move away from the release before the watch fails.

    Every budget is a fraction: a relative change for the message size, an absolute
    rise of a rate over the release's for the rest, the total-variation distance for
    the trigger distribution.

    Attributes:
        message_bytes_drop: the mean message size may fall this fraction below the
            release's (omitted state shrinks messages).
        message_bytes_rise: ... or rise this fraction above it.
        missing_field_rate: missing-field refusals per decision may rise this much.
        expired_rate: expired refusals per decision may rise this much.
        readback_disagreement_rate: disagreeing readbacks per readback may rise this much.
        escalation_rate: escalations per decision may rise this much.
        decided_otherwise_rate: accepted decisions that overrule the proposal, per
            decision, may rise this much.
        refusal_reason_rate: any one refusal reason per decision may rise this much.
        trigger_shift: the trigger distributions may differ by this total variation.
    """

    message_bytes_drop: float = attrs.field(default=0.2, converter=float)
    message_bytes_rise: float = attrs.field(default=0.5, converter=float)
    missing_field_rate: float = attrs.field(default=0.01, converter=float)
    expired_rate: float = attrs.field(default=0.02, converter=float)
    readback_disagreement_rate: float = attrs.field(default=0.05, converter=float)
    escalation_rate: float = attrs.field(default=0.1, converter=float)
    decided_otherwise_rate: float = attrs.field(default=0.1, converter=float)
    refusal_reason_rate: float = attrs.field(default=0.05, converter=float)
    trigger_shift: float = attrs.field(default=0.25, converter=float)

    def __attrs_post_init__(self) -> None:
        for name, value in attrs.asdict(self).items():
            _fraction(value, name)

    def to_json(self) -> dict[str, float]:
        """JSON-ready form."""
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Budgets:
        """Budgets by name (missing ones take their defaults).

        Raises:
            WatchError: ``watch-bad-budget``, an unknown name or a value outside [0, 1].
        """
        known = {field.name for field in attrs.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise WatchError(f"unknown budget {unknown[0]!r}; the budgets are "
                             f"{', '.join(sorted(known))}", code="watch-bad-budget",
                             json_path=f"$.baselines.budgets.{unknown[0]}")
        return cls(**{name: _fraction(value, name) for name, value in data.items()})

    def replace(self, changes: Mapping[str, Any]) -> Budgets:
        """These budgets with ``changes`` (checked as :meth:`from_json` does)."""
        return Budgets.from_json({**self.to_json(), **changes})


def release_baselines(profile: Profile, budgets: Budgets | None = None) -> dict[str, Any]:
    """The ``baselines`` section of a release artefact: the released handoff's
    :class:`Profile` and the declared :class:`Budgets`.
    """
    return {"format": BASELINES_FORMAT, "profile": profile.to_json(),
            "budgets": (budgets or Budgets()).to_json()}


def read_baselines(release: Mapping[str, Any]) -> tuple[Profile, Budgets]:
    """The profile and budgets of a release artefact.

    Raises:
        WatchError: ``watch-no-baselines`` (the artefact records none: it was written
            without ``--baseline-log``), ``watch-bad-release`` (malformed).
    """
    baselines = release.get("baselines")
    if baselines is None:
        raise WatchError(
            "the release records no baselines (baselines.profile): write it with "
            "'handoffs lab gate REPORT --baseline-log LOG', LOG the decisions of the "
            "released handoff's acceptance run", code="watch-no-baselines",
            json_path="$.baselines")
    if not isinstance(baselines, Mapping) or baselines.get("format") != BASELINES_FORMAT:
        raise WatchError(f"the release's baselines are not {BASELINES_FORMAT}",
                         code="watch-bad-release", json_path="$.baselines.format")
    profile = Profile.from_json(baselines.get("profile") or {})
    if not profile.decisions:
        raise WatchError("the release's baseline profile holds no decisions",
                         code="watch-no-baselines", json_path="$.baselines.profile.decisions")
    return profile, Budgets.from_json(baselines.get("budgets") or {})


@attrs.frozen
class Shift:
    """One metric, released against production.

    Attributes:
        metric: its name (a :class:`Budgets` name).
        released / production: the metric's value in each (``None``: not measured).
        budget: how far it may move.
        crossed: whether it moved further (the watch exits 1).
        evidence: the numbers behind it, in words.
    """

    metric: str
    released: float | None
    production: float | None
    budget: float
    crossed: bool
    evidence: str

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return attrs.asdict(self)

    def line(self) -> str:
        """``SHIFT metric: evidence`` (crossed), ``ok metric: ...`` or ``unmeasured``."""
        label = ("SHIFT" if self.crossed else
                 "unmeasured" if self.production is None or self.released is None else "ok")
        return f"{label} {self.metric}: {self.evidence}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _rise(metric: str, released: float | None, production: float | None, budget: float,
          *, what: str, counts: str) -> Shift:
    if released is None or production is None:
        return Shift(metric, released, production, budget, crossed=False,
                     evidence=f"{what}: not measured ({counts})")
    crossed = production - released > budget
    return Shift(metric, released, production, budget, crossed=crossed, evidence=(
        f"{what} {_pct(production)} in production against {_pct(released)} released "
        f"({counts}); budget +{_pct(budget)}"))


def _overruled(released: Profile, production: Profile) -> str:
    """The decided-otherwise counts, or which log records no proposal."""
    sides = (("production", production), ("released", released))
    unrecorded = [name for name, p in sides if p.decided_otherwise_rate is None]
    if unrecorded:
        return (f"the {' and the '.join(unrecorded)} decision log records no proposal: its "
                "rows predate the proposed_action column")
    return " against ".join(
        f"{p.decided_otherwise} of {p.decisions - p.unproposed}"
        + (f" ({p.unproposed} older rows without a proposal left out)" if p.unproposed
           else "") for _, p in sides)


def _sizes(summary: Mapping[str, float]) -> str:
    return ", ".join(f"{k} {summary[k]:.0f} B" for k in ("mean", "p10", "p50", "p90", "max")
                     if k in summary)


def compare(released: Profile, production: Profile, budgets: Budgets) -> list[Shift]:
    """Every metric of ``production`` against ``released``, each a :class:`Shift`.

    Raises:
        WatchError: ``watch-empty-log`` (no production decisions),
            ``watch-contract-mismatch`` (the log's decisions name a contract version the
            release is not of).
    """
    if not production.decisions:
        raise WatchError("the production log holds no decisions to compare",
                         code="watch-empty-log", json_path="$.decisions")
    other = sorted(set(production.contracts) - set(released.contracts))
    if other:
        raise WatchError(
            f"the log holds decisions of {', '.join(other)}, the release is of "
            f"{', '.join(released.contracts) or 'no contract'}: watch a log of the "
            "released version (or write a release for this one)",
            code="watch-contract-mismatch", json_path="$.contract")
    shifts = []
    base_mean, mean = released.message_bytes["mean"], production.message_bytes["mean"]
    change = (mean - base_mean) / base_mean if base_mean else 0.0
    crossed = change < -budgets.message_bytes_drop or change > budgets.message_bytes_rise
    shifts.append(Shift("message_bytes", base_mean, mean, budgets.message_bytes_drop,
                        crossed=crossed, evidence=(
        f"messages {'shrank' if change < 0 else 'grew'} {abs(100 * change):.1f}%: "
        f"production {_sizes(production.message_bytes)}; released "
        f"{_sizes(released.message_bytes)}; budget -{_pct(budgets.message_bytes_drop)} / "
        f"+{_pct(budgets.message_bytes_rise)}")))

    def counted(attribute: str) -> str:
        return (f"{getattr(production, attribute)} of {production.decisions} against "
                f"{getattr(released, attribute)} of {released.decisions}")

    shifts.append(_rise("missing_field_rate", released.rate(released.missing_field),
                        production.rate(production.missing_field), budgets.missing_field_rate,
                        what="missing-field refusals", counts=counted("missing_field")))
    shifts.append(_rise("expired_rate", released.rate(released.expired),
                        production.rate(production.expired), budgets.expired_rate,
                        what="expired refusals", counts=counted("expired")))
    shifts.append(_rise(
        "readback_disagreement_rate", released.readback_disagreement_rate,
        production.readback_disagreement_rate, budgets.readback_disagreement_rate,
        what="readback disagreement",
        counts=f"{production.readback_disagreements} of {production.readback_sampled} read back "
        f"against {released.readback_disagreements} of {released.readback_sampled}"))
    shifts.append(_rise("escalation_rate", released.rate(released.escalated),
                        production.rate(production.escalated), budgets.escalation_rate,
                        what="escalations", counts=counted("escalated")))
    shifts.append(_rise(
        "decided_otherwise_rate", released.decided_otherwise_rate,
        production.decided_otherwise_rate, budgets.decided_otherwise_rate,
        what="accepted decisions that overrule the proposal",
        counts=_overruled(released, production)))
    rises = {code: (production.reasons.get(code, 0) / production.decisions
                    - released.reasons.get(code, 0) / released.decisions)
             for code in {*production.reasons, *released.reasons}}
    worst = max(rises, key=lambda code: (rises[code], code), default=None)
    mix = "; ".join(f"{code} {production.reasons.get(code, 0)}/{production.decisions} "
                    f"against {released.reasons.get(code, 0)}/{released.decisions}"
                    for code in sorted(rises, key=lambda c: -rises[c])[:5]) or "no refusals"
    shifts.append(Shift(
        "refusal_reason_rate", 0.0 if worst is None else
        released.reasons.get(worst, 0) / released.decisions,
        0.0 if worst is None else production.reasons.get(worst, 0) / production.decisions,
        budgets.refusal_reason_rate,
        crossed=worst is not None and rises[worst] > budgets.refusal_reason_rate,
        evidence=f"refusal reasons (production against released): {mix}; budget "
                 f"+{_pct(budgets.refusal_reason_rate)} per reason"))
    shifts.append(_triggers(released, production, budgets.trigger_shift))
    return shifts


def _triggers(released: Profile, production: Profile, budget: float) -> Shift:
    base_total, total = sum(released.triggers.values()), sum(production.triggers.values())
    if not base_total or not total:
        return Shift("trigger_shift", None if not base_total else 0.0,
                     None if not total else 0.0, budget, crossed=False,
                     evidence="trigger distribution: not measured (no triggers recorded in "
                              f"{'the release' if not base_total else 'production'})")
    texts = {*released.triggers, *production.triggers}
    distance = 0.5 * sum(abs(production.triggers.get(t, 0) / total
                             - released.triggers.get(t, 0) / base_total) for t in texts)
    new = sorted(set(production.triggers) - set(released.triggers))
    return Shift("trigger_shift", 0.0, distance, budget, crossed=distance > budget,
                 evidence=f"trigger distribution moved {_pct(distance)} (total variation) "
                          f"over {len(texts)} text(s), {len(new)} new in production; "
                          f"budget {_pct(budget)}")


def prometheus_rules(released: Profile, budgets: Budgets, *, contract: str,
                     window: str = "1h", hold: str = "10m") -> dict[str, Any]:
    """Prometheus alerting rules over the service's metrics (``/metrics``) for the same
    budgets: a rule per rate the service counts, each firing when production crosses
    the release's value plus its budget over ``window``, for ``hold``. (The trigger
    distribution is not a service metric: the watch reads it from the log. The
    decided-otherwise rule compares with the release's rate when its log recorded
    proposals, else with 0.) JSON is YAML: write it to a ``.yml`` rules file.
    """
    def per_decision(counter: str) -> str:
        return (f"sum(rate({counter}[{window}])) / "
                f"sum(rate(handoffs_decisions_total[{window}]))")

    mean = released.message_bytes["mean"]
    low, high = mean * (1 - budgets.message_bytes_drop), mean * (1 + budgets.message_bytes_rise)
    size = (f"sum(rate(handoffs_message_bytes_sum[{window}])) / "
            f"sum(rate(handoffs_message_bytes_count[{window}]))")
    rules = [
        ("HandoffsMessagesShrank", f"{size} < {low:.6g}",
         f"mean message size below {low:.0f} B (released mean {mean:.0f} B, budget "
         f"-{_pct(budgets.message_bytes_drop)}): omitted state shrinks messages"),
        ("HandoffsMessagesGrew", f"{size} > {high:.6g}",
         f"mean message size above {high:.0f} B (released mean {mean:.0f} B)"),
    ]
    for name, counter, count, budget, what in (
            ("HandoffsMissingFieldRefusalsRose", "handoffs_missing_field_rejections_total",
             released.missing_field, budgets.missing_field_rate, "missing-field refusals"),
            ("HandoffsExpiredRefusalsRose", "handoffs_expired_messages_total",
             released.expired, budgets.expired_rate, "expired refusals")):
        limit = count / released.decisions + budget
        rules.append((name, f"{per_decision(counter)} > {limit:.6g}",
                      f"{what} per decision above {_pct(limit)} (released "
                      f"{_pct(count / released.decisions)}, budget +{_pct(budget)})"))
    overruled = (released.decided_otherwise_rate or 0.0) + budgets.decided_otherwise_rate
    rules.append(("HandoffsDecidedOtherwiseRose",
                  f"{per_decision('handoffs_decided_otherwise_total')} > {overruled:.6g}",
                  f"accepted decisions that overrule the proposal, per decision, above "
                  f"{_pct(overruled)} (released "
                  f"{_pct(released.decided_otherwise_rate)})"))
    escalation = released.escalated / released.decisions + budgets.escalation_rate
    rules.append(("HandoffsEscalationsRose",
                  f"sum(rate(handoffs_decisions_total{{verdict=\"ESCALATE\"}}[{window}])) / "
                  f"sum(rate(handoffs_decisions_total[{window}])) > {escalation:.6g}",
                  f"escalations per decision above {_pct(escalation)} (released "
                  f"{_pct(released.escalated / released.decisions)})"))
    disagreement = (released.readback_disagreement_rate or 0.0) + \
        budgets.readback_disagreement_rate
    rules.append(("HandoffsReadbackDisagreementRose",
                  f"sum(rate(handoffs_readback_total{{result=\"disagree\"}}[{window}])) / "
                  f"sum(rate(handoffs_readback_total[{window}])) > {disagreement:.6g}",
                  f"readback disagreement above {_pct(disagreement)} (released "
                  f"{_pct(released.readback_disagreement_rate)})"))
    return {"groups": [{"name": f"handoffs-watch {contract}", "rules": [
        {"alert": name, "expr": expr, "for": hold,
         "labels": {"severity": "warning", "contract": contract},
         "annotations": {"summary": summary}}
        for name, expr, summary in rules]}]}
