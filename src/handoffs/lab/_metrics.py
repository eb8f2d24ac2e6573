"""Metrics, computed from run-log chunk records only.

An :class:`Aggregator` reads chunk records (as the runner writes them, or as
:func:`handoffs.lab.rescore` reads them back from a finished log) and keeps
running sums per strategy × perturbation: memory is bounded by the number of
strategies, perturbations and kept examples, never by the number of cases.

Per strategy × perturbation: agreement, mean and max consequence-weighted regret,
hard violations (counted apart, never averaged), governance pass rate, schema
validity, admission kept apart from *semantic* agreement, mean bytes, tokens,
receiver calls, memo hits and latency. Scoring happens here, not in the runner,
so the same decisions can be scored under another loss matrix.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Final

from handoffs._json import dumps
from handoffs.lab._chunk import EXHIBITS
from handoffs.lab._exercised import Tally, row_exercised
from handoffs.lab._runlog import expand_rows
from handoffs.lab.perturbations import Falsehood, Perturbation
from handoffs.lab.perturbations._base import Scoring
from handoffs.lab.perturbations._falsehood import Mutate

if TYPE_CHECKING:
    from handoffs.lab._experiment import Experiment
    from handoffs.lab._plan import Plan

__all__ = ["Aggregator", "falsehood_class"]

_STATE_LIMIT: Final = 100_000
_REGION_LIMIT: Final = 10_000
_FAILURE_LIMIT: Final = 1_000  # each is validated against the report schema: keep it cheap

# Row columns (see handoffs.lab._runlog.COLUMNS).
_CASE, _STRATEGY, _PERTURBATION, _LABEL, _EPOCH, _REF, _ACTION, _VERDICT = range(8)
_SEMANTIC, _DETERMINED, _BYTES, _TOKENS, _GOVERNANCE, _SCHEMA, _LATENCY, _MEMO = range(8, 16)
_FALSIFIED, _FALSEHOOD, _REASONS, _HOLDING = range(16, 20)


def _holding(row: Sequence[Any]) -> Sequence[str]:
    """The state-conditioned hard constraints that hold on the row's truth (none in a
    run log written before the column existed).
    """
    return row[_HOLDING] if len(row) > _HOLDING and row[_HOLDING] else ()


def falsehood_class(scoring: Scoring, reference: str, falsified: str,
                    holding: Sequence[str] = ()) -> str:
    """``no_effect``, ``changes_action`` or ``catastrophic`` (trusting it breaks a hard
    constraint), by the reference policy's action on the falsified state.
    """
    if falsified == reference:
        return "no_effect"
    if scoring.violations(falsified, reference, holding):
        return "catastrophic"
    return "changes_action"


def _failure_key(regret: float, order: tuple[Any, ...]) -> tuple[Any, ...]:
    """Where a disagreement stands in the report's listing: costliest first, then by
    ``order`` (unperturbed before perturbed, stream index of the case, strategy,
    perturbation, its place among the case's rows), which no chunking changes.
    """
    return (-regret, *order)


def _exact_mean(counts: Mapping[float, int], n: int) -> float:
    """The mean of values given as ``{value: count}``, rounded once (order-free)."""
    if all(float(v).is_integer() for v in counts):
        return sum(int(v) * c for v, c in counts.items()) / n
    if not all(math.isfinite(v) for v in counts):
        return sum(v * c for v, c in counts.items()) / n
    return float(sum(Fraction(v) * c for v, c in counts.items()) / n)


def _loss_ratio(survived: Mapping[float, int], trusted: Mapping[float, int]) -> float | None:
    """Survived over trusted loss, each given as ``{value: count}`` and summed exactly
    (order-free); ``None`` when nothing was trusted at a cost.
    """
    total = _exact_mean(trusted, 1) if trusted else 0.0
    if not total:
        return None
    return (_exact_mean(survived, 1) if survived else 0.0) / total


class _Acc:
    """Running sums for one strategy × perturbation.

    Regrets are kept as counts per value, so that the means do not depend on the
    order (or grouping) in which decisions arrive.
    """

    __slots__ = (
        "accepted", "admitted", "agree", "bytes_max", "bytes_sum", "calls", "cases",
        "decisions", "errors", "gov_fail", "gov_ok", "hard", "hard_by", "hits", "last_case",
        "latency", "regret_max", "regrets", "schema_n", "schema_ok", "sem_agree",
        "sem_determined", "sem_hard", "sem_n", "sem_regret_max", "sem_regrets",
        "tokens_n", "tokens_sum", "unstated", "verdicts",
    )

    def __init__(self) -> None:
        self.decisions = self.cases = self.agree = self.hard = self.gov_ok = 0
        self.gov_fail = self.schema_n = self.schema_ok = self.admitted = self.accepted = 0
        self.sem_n = self.sem_agree = self.sem_hard = self.sem_determined = 0
        self.bytes_sum = self.bytes_max = self.tokens_n = self.tokens_sum = 0
        self.calls = self.hits = self.latency = self.errors = 0
        self.regret_max = self.sem_regret_max = 0.0
        self.regrets: dict[float, int] = {}
        self.sem_regrets: dict[float, int] = {}
        self.hard_by: dict[str, int] = {}
        # (constraint, chosen, added action): decisions the constraint says nothing of
        self.unstated: dict[tuple[str, str, str], int] = {}
        self.verdicts: dict[str, int] = {"ACCEPT": 0, "ESCALATE": 0, "REJECT": 0}
        self.last_case: tuple[int, int] = (-1, -1)

    def add(self, row: Sequence[Any], chunk: int, scoring: Scoring) -> None:
        """One decision row."""
        case = (chunk, row[_CASE])
        if case != self.last_case:
            self.cases += 1
            self.last_case = case
        self.add_decisions(row, 1, scoring)
        size = row[_BYTES]
        self.bytes_sum += size
        self.bytes_max = max(self.bytes_max, size)
        if row[_TOKENS] is not None:
            self.tokens_n += 1
            self.tokens_sum += row[_TOKENS]
        if row[_MEMO]:
            self.hits += 1
        else:
            self.calls += 1
            self.latency += row[_LATENCY]

    def add_decisions(self, row: Sequence[Any], n: int, scoring: Scoring) -> None:
        """``n`` decisions alike in every column but case, bytes, tokens, latency and memo."""
        self.decisions += n
        reference, action = row[_REF], row[_ACTION]
        self.agree += n * (action == reference)
        regret = scoring.regret(action, reference)
        self.regrets[regret] = self.regrets.get(regret, 0) + n
        self.regret_max = max(self.regret_max, regret)
        broken = scoring.violations(action, reference, _holding(row))
        if broken:
            self.hard += n
            for name in broken:
                self.hard_by[name] = self.hard_by.get(name, 0) + n
        if scoring.added:
            for name in scoring.unstated(action, reference, _holding(row)):
                key = (name, action, reference)
                self.unstated[key] = self.unstated.get(key, 0) + n
        if row[_GOVERNANCE]:
            self.gov_ok += n
        else:
            self.gov_fail += n
        if row[_SCHEMA] is not None:
            self.schema_n += n
            self.schema_ok += n * bool(row[_SCHEMA])
        verdict = row[_VERDICT]
        if verdict == "ERROR":
            self.errors += n
        else:
            self.verdicts[verdict] = self.verdicts.get(verdict, 0) + n
        self.admitted += n * (verdict in ("ACCEPT", "ESCALATE"))
        self.accepted += n * (verdict == "ACCEPT")
        semantic = row[_SEMANTIC]
        if semantic is not None:
            self.sem_n += n
            self.sem_agree += n * (semantic == reference)
            sem_regret = scoring.regret(semantic, reference)
            self.sem_regrets[sem_regret] = self.sem_regrets.get(sem_regret, 0) + n
            self.sem_regret_max = max(self.sem_regret_max, sem_regret)
            self.sem_hard += n * bool(scoring.violations(semantic, reference, _holding(row)))
            self.sem_determined += n * bool(row[_DETERMINED])

    def add_stats(self, stats: Sequence[int]) -> None:
        """The per-decision sums of a template: ``[count, bytes sum, bytes max, tokens n,
        tokens sum, calls, hits, latency sum]`` (the count is added by
        :meth:`add_decisions`).
        """
        self.bytes_sum += stats[1]
        self.bytes_max = max(self.bytes_max, stats[2])
        self.tokens_n += stats[3]
        self.tokens_sum += stats[4]
        self.calls += stats[5]
        self.hits += stats[6]
        self.latency += stats[7]

    def to_json(self) -> dict[str, Any]:
        n = self.decisions
        sem = self.sem_n
        return {
            "cases": self.cases,
            "decisions": n,
            "agreement": self.agree / n,
            "mean_regret": _exact_mean(self.regrets, n),
            "max_regret": self.regret_max,
            "hard_violations": self.hard,
            "hard_violations_by_constraint": dict(sorted(self.hard_by.items())),
            "unstated_constraints": [
                {"constraint": name, "chosen": chosen, "added_action": added, "decisions": count}
                for (name, chosen, added), count in sorted(self.unstated.items())],
            "governance_pass_rate": self.gov_ok / n,
            "governance_failures": self.gov_fail,
            "schema_valid_rate": self.schema_ok / self.schema_n if self.schema_n else None,
            "admitted_rate": self.admitted / n,
            "accepted_rate": self.accepted / n,
            "verdicts": dict(self.verdicts),
            "receiver_errors": self.errors,
            "semantic_agreement": self.sem_agree / sem if sem else None,
            "semantic_mean_regret": _exact_mean(self.sem_regrets, sem) if sem else None,
            "semantic_max_regret": self.sem_regret_max if sem else None,
            "semantic_hard_violations": self.sem_hard if sem else None,
            "semantic_determined_rate": self.sem_determined / sem if sem else None,
            "mean_bytes": self.bytes_sum / n,
            "max_bytes": self.bytes_max,
            "mean_tokens": self.tokens_sum / self.tokens_n if self.tokens_n else None,
            "receiver_calls": self.calls,
            "memo_hits": self.hits,
            "mean_latency_ms": (self.latency / self.calls / 1000) if self.calls else 0.0,
        }


class _FalsehoodStats:
    __slots__ = (
        "by_class_caught",
        "by_class_survived",
        "catastrophic_survived",
        "caught",
        "equivalent",
        "evaluated",
        "loss_survived",
        "loss_trusted",
        "over_reacted",
        "refused",
        "refused_by",
        "survived",
    )

    def __init__(self) -> None:
        self.evaluated = self.caught = self.survived = self.equivalent = 0
        self.over_reacted = self.catastrophic_survived = self.refused = 0
        self.refused_by: dict[str, int] = {}
        # losses as {value: count}: their ratio does not depend on the rows' order
        self.loss_survived: dict[float, int] = {}
        self.loss_trusted: dict[float, int] = {}
        self.by_class_caught: dict[str, int] = {}
        self.by_class_survived: dict[str, int] = {}


def _status(kind: str, verdict: str, action: str, reference: str) -> str:
    if kind == "no_effect":
        return "equivalent" if action == reference else "over_reacted"
    if verdict == "ACCEPT" and action != reference:
        return "survived"
    return "caught"


class Aggregator:
    """Streaming metrics over run-log chunk records.

    Build it with :meth:`for_experiment` (or directly from a run-log header); feed
    every chunk record in order with :meth:`feed`; read the sections with
    :meth:`results`, :meth:`falsehoods`, :meth:`triggers`, :meth:`regions` and
    :meth:`injections`.
    """

    def __init__(self, *, strategies: Sequence[str], perturbations: Sequence[Perturbation],
                 targets: Sequence[Sequence[int]], scoring: Scoring,
                 example_limit: int = 100, receivers: Sequence[str] = ()) -> None:
        self.strategies = tuple(strategies)
        self.receivers = tuple(receivers) or self.strategies
        # whether each perturbation exercised each receiver (None: no record said)
        self._tally: Tally | None = None
        self.perturbations = tuple(perturbations)
        self.targets = tuple(tuple(t) for t in targets)
        self.scoring = scoring
        self.scorings = (scoring, *(p.scoring(scoring) for p in self.perturbations))
        self.example_limit = example_limit
        self._accs: dict[tuple[int, int], _Acc] = {}
        self._digest = hashlib.sha256()
        self.cases = 0
        self.calls = 0
        self.hits = 0
        # model cost per strategy: [model calls, cache hits, tokens in, tokens out, µs]
        self._usage: dict[int, list[int]] = {}
        # falsehoods
        self._mutate = {i + 1 for i, p in enumerate(self.perturbations) if isinstance(p, Mutate)}
        first = [min(self.targets[i - 1]) for i in self._mutate if self.targets[i - 1]]
        self._count_strategy = min(first) if first else -1
        self._generated = 0
        self._by_class: dict[str, int] = {}
        self._by_field: dict[str, dict[str, int]] = {}
        self._fstats: dict[int, _FalsehoodStats] = {}
        self._examples: dict[str, list[dict[str, Any]]] = {
            "catastrophic": [], "changes_action": [], "no_effect": []}
        self._examples_truncated = False
        # injections
        self._injections = {i + 1: p for i, p in enumerate(self.perturbations)
                            if isinstance(p, Falsehood)}
        self._injection_cases = {p.case_id for p in self._injections.values()}
        self._baselines: dict[tuple[str, int], str] = {}
        self._injected: dict[tuple[int, int], dict[str, Any]] = {}
        # triggers and minimal messages
        self._states: set[str] = set()
        self._trigger_fields: dict[str, int] = {}
        self._without_trigger = 0
        self._trigger_examples: list[dict[str, Any]] = []
        self._trigger_cases = 0
        self._regions: dict[str, dict[str, Any]] = {}
        self._minimal_fields = 0
        self._minimal_cases = 0
        # failures: every decision whose action differs from the reference
        self._failures: list[dict[str, Any]] = []  # without a hard violation
        self._hard_failures: list[dict[str, Any]] = []
        self._violation_memo: dict[tuple[Any, ...], tuple[str, ...]] = {}
        self._disagreements = 0
        self._failure_hard = 0
        # the listing is the _FAILURE_LIMIT first by _failure_key, whatever the chunks:
        # per list, the key past which nothing can enter any more (set when it is cut)
        self._failure_floor: dict[bool, tuple[Any, ...]] = {}
        # failing decisions seen per (strategy, perturbation): the first EXHIBITS of
        # the stream carry the message sent (every chunk keeps its own first few)
        self._exhibited: dict[tuple[int, int], int] = {}
        self._admitted_true: dict[tuple[int, int, int], bool] = {}

    @classmethod
    def for_experiment(cls, experiment: Experiment, plan: Plan,
                       scoring: Scoring | None = None) -> Aggregator:
        """An aggregator for a compiled experiment (optionally with another scoring)."""
        return cls(strategies=[s.name for s in plan.strategies],
                   perturbations=plan.perturbations, targets=plan.targets,
                   scoring=scoring or Scoring.of(plan.contract),
                   example_limit=experiment.example_limit,
                   receivers=[str(getattr(s.receiver, "name", type(s.receiver).__name__))
                              for s in plan.strategies])

    def model_cost(self) -> list[dict[str, Any]]:
        """Per strategy with a model receiver: calls, cache hits, tokens, latency."""
        out = []
        for si, (calls, hits, tokens_in, tokens_out, micros) in sorted(self._usage.items()):
            out.append({
                "strategy": self.strategies[si],
                "model_calls": calls,
                "cache_hits": hits,
                "tokens_in": tokens_in,
                "tokens_out": tokens_out,
                "latency_ms": round(micros / 1000, 3),
                "mean_latency_ms": round(micros / 1000 / calls, 3) if calls else 0.0,
            })
        return out

    # ----------------------------------------------------------------- feeding

    def feed(self, record: Mapping[str, Any]) -> None:
        """Add one chunk record."""
        chunk = int(record["chunk"])
        cases = record["cases"]
        states = record.get("states", {})
        self.cases += len(cases)
        self.calls += int(record.get("calls", 0))
        self.hits += int(record.get("hits", 0))
        for si, *usage in record.get("model", ()):
            row = self._usage.setdefault(int(si), [0, 0, 0, 0, 0])
            for i, value in enumerate(usage):
                row[i] += int(value)
        for case_id, case_digest, state_key, reference in cases:
            self._digest.update(f"{case_digest}\n".encode())
            del case_id, reference
            if len(self._states) < _STATE_LIMIT:
                self._states.add(state_key)
        self._feed_analysis(cases, states)
        exercised = record.get("exercised")
        if exercised is not None:
            if self._tally is None:
                self._tally = Tally()
            self._tally.merge(exercised)
        templates = record.get("templates")
        if templates is not None:
            # Compact (fresh from the runner): sums per distinct row, and the rows that
            # are read one by one below.
            self._feed_templates(templates, record["stats"], record["case_counts"])
            rows: Any = expand_rows(record)
        else:
            rows = record["rows"]
            for row in rows:
                si, pi = row[_STRATEGY], row[_PERTURBATION]
                acc = self._accs.get((si, pi))
                if acc is None:
                    acc = self._accs[(si, pi)] = _Acc()
                acc.add(row, chunk, self.scorings[pi])
        self._feed_rows(rows, cases)
        self._feed_failures(record, rows, cases)

    def _feed_failures(self, record: Mapping[str, Any], rows: Sequence[Sequence[Any]],
                       cases: Sequence[Any]) -> None:
        """Count every disagreement (from the distinct rows of a compact record, which
        carry their counts) and list them, row by row, up to :data:`_FAILURE_LIMIT`.
        """
        templates = record.get("templates")
        if templates is not None:
            for template, sums in zip(templates, record["stats"], strict=True):
                if template[_ACTION] != template[_REF]:
                    self._count_failure(template, sums[0])
        messages = {int(i): message for i, message in record.get("exhibits", ())}
        rules = record.get("rules", {})
        start = int(record.get("start", 0))
        for i, row in enumerate(rows):
            if row[_ACTION] == row[_REF]:
                continue
            hard = (self._count_failure(row, 1) if templates is None
                    else self._violations(row))
            seen = (row[_STRATEGY], row[_PERTURBATION])
            shown = self._exhibited.get(seen, 0)
            self._exhibited[seen] = shown + 1
            pi = row[_PERTURBATION]
            key = _failure_key(self.scorings[pi].regret(row[_ACTION], row[_REF]),
                               (pi > 0, start + row[_CASE], row[_STRATEGY], pi, i))
            floor = self._failure_floor.get(bool(hard))
            if floor is None or key < floor:
                self._list_failure(row, hard, cases,
                                   messages.get(i) if shown < EXHIBITS else None, rules,
                                   key=key)

    def _violations(self, row: Sequence[Any]) -> tuple[str, ...]:
        """The hard constraints a row's action breaks (memoised: rows repeat)."""
        holding = _holding(row)
        key = (row[_PERTURBATION], row[_ACTION], row[_REF], *holding)
        found = self._violation_memo.get(key)
        if found is None:
            found = self._violation_memo[key] = tuple(self.scorings[row[_PERTURBATION]].violations(
                row[_ACTION], row[_REF], holding))
        return found

    def _count_failure(self, row: Sequence[Any], n: int) -> tuple[str, ...]:
        hard = self._violations(row)
        self._disagreements += n
        self._failure_hard += n * bool(hard)
        return hard

    def _list_failure(self, row: Sequence[Any], hard: Sequence[str], cases: Sequence[Any],
                      message: Mapping[str, Any] | None, rules: Mapping[str, str], *,
                      key: tuple[Any, ...]) -> None:
        """List one disagreement with its case, message and the reference's rule
        (keeping the :data:`_FAILURE_LIMIT` first by ``key`` of each list).
        """
        pi = row[_PERTURBATION]
        falsehood = row[_FALSEHOOD]
        case_id, _, state_key, _ = cases[row[_CASE]]
        listed = self._hard_failures if hard else self._failures
        if len(listed) >= 2 * _FAILURE_LIMIT:
            listed.sort(key=lambda f: f["_key"])
            del listed[_FAILURE_LIMIT:]
            self._failure_floor[bool(hard)] = listed[-1]["_key"]
            if key >= listed[-1]["_key"]:
                return
        listed.append({
            "_key": key,
            "case_id": case_id,
            "strategy": self.strategies[row[_STRATEGY]],
            "perturbation": pi,
            "variant": None if row[_LABEL] is None else str(row[_LABEL]),
            "epoch": row[_EPOCH],
            "falsehood": None if falsehood is None else {
                "field": falsehood[0], "true_value": falsehood[1], "value": falsehood[2]},
            "reference_action": row[_REF],
            "action": row[_ACTION],
            "verdict": row[_VERDICT],
            "reasons": list(row[_REASONS] or ()),
            "reference_rule": rules.get(state_key),
            "hard_violations": list(hard),
            "regret": self.scorings[pi].regret(row[_ACTION], row[_REF]),
            "message": message,
        })

    def _feed_rows(self, rows: Sequence[Sequence[Any]], cases: Sequence[Any]) -> None:
        """Baselines, falsehoods and injections, row by row."""
        examples: dict[tuple[int, str], dict[str, Any]] = {}
        # whether each case's true message was admitted, by (case, strategy, epoch)
        self._admitted_true = {(row[_CASE], row[_STRATEGY], row[_EPOCH]):
                               row[_VERDICT] in ("ACCEPT", "ESCALATE")
                               for row in rows if row[_PERTURBATION] == 0}
        for row in rows:
            si, pi = row[_STRATEGY], row[_PERTURBATION]
            scoring = self.scorings[pi]
            if pi == 0:
                case_id = cases[row[_CASE]][0]
                if case_id in self._injection_cases:
                    self._baselines[(case_id, si)] = row[_ACTION]
            elif pi in self._mutate and row[_FALSIFIED] is not None:
                self._feed_falsehood(row, cases, scoring, examples)
            elif pi in self._injections and row[_EPOCH] == 0:
                self._feed_injection(row, cases, scoring)
        for example in examples.values():
            bucket = self._examples[example["class"]]
            if len(bucket) < self.example_limit:
                bucket.append(example)
            else:
                self._examples_truncated = True

    def _feed_templates(self, templates: Sequence[Sequence[Any]], stats: Sequence[Sequence[int]],
                        case_counts: Sequence[Sequence[int]]) -> None:
        """The sums of a compact chunk record: per distinct row, its count and sums."""
        for template, sums in zip(templates, stats, strict=True):
            si, pi = template[_STRATEGY], template[_PERTURBATION]
            acc = self._accs.get((si, pi))
            if acc is None:
                acc = self._accs[(si, pi)] = _Acc()
            acc.add_decisions(template, sums[0], self.scorings[pi])
            acc.add_stats(sums)
        for si, pi, count in case_counts:
            self._accs[(si, pi)].cases += count

    def _feed_falsehood(self, row: Sequence[Any], cases: Sequence[Any], scoring: Scoring,
                        examples: dict[tuple[int, str], dict[str, Any]]) -> None:
        reference, action, verdict = row[_REF], row[_ACTION], row[_VERDICT]
        falsified = row[_FALSIFIED]
        field, true_value, value = row[_FALSEHOOD]
        kind = falsehood_class(scoring, reference, falsified, _holding(row))
        si = row[_STRATEGY]
        if si == self._count_strategy and row[_EPOCH] == 0:
            self._generated += 1
            self._by_class[kind] = self._by_class.get(kind, 0) + 1
            per_field = self._by_field.setdefault(field, {})
            per_field[kind] = per_field.get(kind, 0) + 1
        stats = self._fstats.get(si)
        if stats is None:
            stats = self._fstats[si] = _FalsehoodStats()
        status = _status(kind, verdict, action, reference)
        if status == "caught" and verdict not in ("ACCEPT", "ESCALATE") and not \
                self._admitted_true.get((row[_CASE], si, row[_EPOCH]), True):
            # refused, but so was the true message: a refusal, not a catch
            status = "refused"
        stats.evaluated += 1
        if status == "refused":
            stats.refused += 1
            for reason in row[_REASONS] or ():
                code = (str(reason.get("code")) if isinstance(reason, Mapping)
                        else str(reason[0]) if isinstance(reason, list | tuple) else str(reason))
                stats.refused_by[code] = stats.refused_by.get(code, 0) + 1
        elif status == "caught":
            stats.caught += 1
            stats.by_class_caught[kind] = stats.by_class_caught.get(kind, 0) + 1
        elif status == "survived":
            stats.survived += 1
            stats.by_class_survived[kind] = stats.by_class_survived.get(kind, 0) + 1
            stats.catastrophic_survived += kind == "catastrophic"
            loss = scoring.regret(action, reference)
            stats.loss_survived[loss] = stats.loss_survived.get(loss, 0) + 1
        elif status == "equivalent":
            stats.equivalent += 1
        else:
            stats.over_reacted += 1
        if kind != "no_effect":
            loss = scoring.regret(falsified, reference)
            stats.loss_trusted[loss] = stats.loss_trusted.get(loss, 0) + 1
        key = (row[_CASE], str(row[_LABEL]))
        example = examples.get(key)
        if example is None:
            example = examples[key] = {
                "case_id": cases[row[_CASE]][0], "field": field, "true_value": true_value,
                "value": value, "class": kind, "reference_action": reference,
                "falsified_action": falsified, "outcomes": {},
            }
        example["outcomes"][self.strategies[si]] = {"action": action, "verdict": verdict,
                                                    "status": status}

    def _feed_injection(self, row: Sequence[Any], cases: Sequence[Any],
                        scoring: Scoring) -> None:
        pi, si = row[_PERTURBATION], row[_STRATEGY]
        injection = self._injections[pi]
        reference, action = row[_REF], row[_ACTION]
        field, true_value, value = row[_FALSEHOOD]
        self._injected[(pi, si)] = {
            "case_id": cases[row[_CASE]][0],
            "field": field,
            "value": value,
            "true_value": true_value,
            "strategy": self.strategies[si],
            "schema_still_valid": bool(row[_SCHEMA]) if row[_SCHEMA] is not None
            else bool(row[_GOVERNANCE]),
            "reference_action": reference,
            "baseline_action": self._baselines.get((injection.case_id, si), reference),
            "altered_action": action,
            "synthetic_loss": scoring.regret(action, reference),
            "hard_violations": list(scoring.violations(action, reference, _holding(row))),
        }

    def _feed_analysis(self, cases: Sequence[Any], states: Mapping[str, Any]) -> None:
        for case_id, _, state_key, reference in cases:
            analysis = states.get(state_key)
            if analysis is None:
                continue
            self._trigger_cases += 1
            triggers = analysis.get("triggers", [])
            fields = sorted({t["field"] for t in triggers})
            for name in fields:
                self._trigger_fields[name] = self._trigger_fields.get(name, 0) + 1
            if not triggers:
                self._without_trigger += 1
            if len(self._trigger_examples) < self.example_limit:
                self._trigger_examples.append({"case_id": case_id,
                                               "reference_action": reference,
                                               "triggers": triggers})
            minimal = analysis.get("minimal")
            if minimal is not None:
                key = dumps([minimal["action"], minimal["message"]])
                self._minimal_fields += len(minimal["fields"])
                self._minimal_cases += 1
            else:
                key = f"state:{state_key}"
            region = self._regions.get(key)
            if region is None:
                if len(self._regions) >= _REGION_LIMIT:
                    continue
                base = minimal or {"action": reference, "fields": [], "message": [],
                                   "guarantee": "1-minimal", "alternatives": 0,
                                   "region_checks": 0}
                region = self._regions[key] = {
                    "action": base["action"],
                    "fields": list(base["fields"]),
                    "message": list(base["message"]),
                    "cases": 0,
                    "example_case_id": analysis.get("example_case_id", case_id),
                    "guarantee": base["guarantee"],
                    "alternatives": base["alternatives"],
                    "region_checks": base["region_checks"],
                    "confirmed": None,
                    "receiver_calls": 0,
                    "trigger_fields": fields,
                    "duality_holds": set(fields) == set(base["fields"]),
                    "truth": analysis["truth"],
                    "example": analysis.get("example", {}),
                }
            region["cases"] += 1

    # ----------------------------------------------------------------- reading

    def case_set_digest(self) -> str:
        """SHA-256 over the case digests, one line each, in stream order."""
        return "sha256:" + self._digest.hexdigest()

    def results(self, perturbation_rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Every strategy × perturbation row, in declaration order.

        Args:
            perturbation_rows: the JSON descriptions of ``none`` and the perturbations
                (``id``, ``kind``, ``target``), index-aligned with the log.
        """
        out: list[dict[str, Any]] = []
        for pi, described in enumerate(perturbation_rows):
            for si, name in enumerate(self.strategies):
                acc = self._accs.get((si, pi))
                if acc is None:
                    continue
                scoring = self.scorings[pi].name
                exercised, exercised_cases, reason = row_exercised(
                    self._tally, si, pi, kind=str(described["kind"]),
                    receiver=self.receivers[si], cases=acc.cases,
                    scoring=None if scoring == self.scoring.name else scoring)
                out.append({
                    "strategy": name,
                    "perturbation": described["id"],
                    "kind": "rescore" if described["kind"] == "boundary"
                    and str(described["id"]).startswith("loss-changed:") else described["kind"],
                    "target": described.get("target"),
                    **acc.to_json(),
                    "exercised": exercised,
                    "exercised_cases": exercised_cases,
                    "exercised_reason": reason,
                })
        return out

    def population(self, perturbation_rows: Sequence[Mapping[str, Any]], *,
                   confidence: float) -> dict[tuple[str, str], dict[str, Any]]:
        """Every row's ``population`` figures (agreement, mean regret and hard-violation
        rate with their intervals), by ``(strategy, perturbation id)``: this aggregator's
        cases taken as independent draws of the population.
        """
        from handoffs.lab._population import population_row

        out = {}
        for (si, pi), acc in self._accs.items():
            if not acc.decisions:
                continue
            largest = max(self.scorings[pi].loss.values(), default=0.0)
            out[(self.strategies[si], str(perturbation_rows[pi]["id"]))] = population_row(
                (acc.cases, acc.decisions, acc.agree, acc.regrets, acc.hard),
                (acc.sem_n, acc.sem_agree, acc.sem_regrets, acc.sem_hard) if acc.sem_n else None,
                largest=float(largest), confidence=confidence)
        return out

    def falsehoods(self, rejected: int) -> dict[str, Any]:
        """The ``falsehoods`` section of the report."""
        strategies = []
        for si in sorted(self._fstats):
            stats = self._fstats[si]
            strategies.append({
                "strategy": self.strategies[si],
                "evaluated": stats.evaluated,
                "caught": stats.caught,
                "survived": stats.survived,
                "equivalent": stats.equivalent,
                "over_reacted": stats.over_reacted,
                "refused": stats.refused,
                "refused_by": dict(sorted(stats.refused_by.items())),
                "caught_by_class": dict(sorted(stats.by_class_caught.items())),
                "survived_by_class": dict(sorted(stats.by_class_survived.items())),
                "catastrophic_survived": stats.catastrophic_survived,
                "loss_weighted_survival": _loss_ratio(stats.loss_survived,
                                                      stats.loss_trusted),
            })
        examples = [e for kind in ("catastrophic", "changes_action", "no_effect")
                    for e in self._examples[kind]][: self.example_limit]
        total = sum(len(v) for v in self._examples.values())
        return {
            "generated": self._generated,
            "schema_rejected": rejected,
            "by_class": dict(sorted(self._by_class.items())),
            "by_field": [{"field": f, "generated": sum(c.values()), "by_class": dict(sorted(
                c.items()))} for f, c in self._by_field.items()],
            "strategies": strategies,
            "examples": examples,
            "truncated": self._examples_truncated or total > len(examples),
        }

    def triggers(self) -> dict[str, Any]:
        """The ``counterfactual_triggers`` section of the report."""
        return {
            "cases": self._trigger_cases,
            "distinct_states": len(self._states),
            "by_field": dict(self._trigger_fields),
            "without_trigger": self._without_trigger,
            "examples": list(self._trigger_examples),
            "truncated": self._trigger_cases > len(self._trigger_examples),
        }

    def regions(self) -> list[dict[str, Any]]:
        """The distinct minimal messages, most frequent first (mutable: the runner
        adds receiver confirmations).
        """
        return sorted(self._regions.values(), key=lambda r: -int(r["cases"]))

    def minimal_summary(self, field_names: Sequence[str]) -> dict[str, Any]:
        """Field-level summary of the minimal messages."""
        needed = {f for r in self._regions.values() for f in r["fields"]}
        cases = sum(int(r["cases"]) for r in self._regions.values())
        total = sum(len(r["fields"]) * int(r["cases"]) for r in self._regions.values())
        return {
            "contract_fields": list(field_names),
            "fields_ever_needed": [f for f in field_names if f in needed],
            "fields_never_needed": [f for f in field_names if f not in needed],
            "mean_fields": total / cases if cases else 0.0,
        }

    def failures(self, perturbation_rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The ``failures`` section: every decision whose action differs from the
        reference, hard violations first, each with its case, perturbation, the
        receiver's verdict and reasons, and (for the first few of each strategy ×
        perturbation) the message sent and the reference's deciding rule.
        """
        # Hard violations first (kept apart, so that a late one is still listed); in
        # each, the costliest first, then unperturbed before perturbed and stream order
        # (_failure_key): the same listing whatever the chunks and executor.
        listed = [*sorted(self._hard_failures, key=lambda f: f["_key"]),
                  *sorted(self._failures, key=lambda f: f["_key"])][:_FAILURE_LIMIT]
        ids = [str(row["id"]) for row in perturbation_rows]
        return {
            "disagreements": self._disagreements,
            "hard_violations": self._failure_hard,
            "cases": [{**{k: v for k, v in f.items() if k != "_key"},
                       "perturbation": ids[f["perturbation"]]} for f in listed],
            "truncated": self._disagreements > len(listed),
        }

    def injections(self) -> list[dict[str, Any]]:
        """Every injection record, in declaration order."""
        return [self._injected[k] for k in sorted(self._injected)]
