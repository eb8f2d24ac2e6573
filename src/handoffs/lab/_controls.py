"""Falsifying baselines: read a lab report's controls the way the essay reads them.

Before a relay is optimised, controls test whether it does useful work at all:

- **no message**: what does the receiver decide from its local context alone?
- **shuffled message**: does the content matter, or only that another call produced a
  message?
- **constant message**: does the receiver read the channel at all?
- **authority** (the negative control): does an action-only message succeed only
  because the sender was given the decision?

:func:`read_baselines` turns a report's numbers into those readings, per strategy.
Each reading states the measured figures next to two comparisons: the strategy's own
baseline (the message as encoded) and, when the experiment that made the report is
given, the agreement a receiver would reach if it decided correctly for *whatever* message
it was handed (the fail-closed action for an empty one). A control that meets the
release thresholds *falsifies* the architecture, exactly as the release gate counts it.
"""

from __future__ import annotations

import collections
import itertools
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

import attrs

from handoffs._errors import ExperimentError, NoSuchReading
from handoffs.lab._experiment import Experiment

__all__ = [
    "AUTHORITATIVE_SENDER",
    "CONTROLS",
    "SHUFFLE_WINDOW",
    "AuthorityReading",
    "Baselines",
    "ControlExpectations",
    "ControlReading",
    "NoSuchReading",
    "Partners",
    "SenderClaimReading",
    "control_expectations",
    "paired_chunks",
    "read_baselines",
    "shuffle_cycle",
]


CONTROLS: Final = ("no-message", "shuffled-message", "constant-message")
"""The perturbation ids of the three falsifying controls."""
AUTHORITATIVE_SENDER: Final = "authoritative-sender"
"""The perturbation id of the sender claiming DECIDE authority."""

_QUESTIONS: Final = {
    "no-message": "What does the receiver decide from its local context alone?",
    "shuffled-message": "Does the content matter, or only that another call produced a "
                        "message?",
    "constant-message": "Does the receiver read the channel at all?",
}
_EXACT: Final = 1e-12


# -------------------------------------------------------------------- the shuffle

SHUFFLE_WINDOW: Final = 1024
"""Cases per window of the shuffled control.

The case stream is cut into consecutive windows of this many cases (a last window of
a single case joins the one before). Within each window every case gets the message
of another case of the same window, along one random cycle through the window drawn
from the experiment's seed and the window's number (:func:`shuffle_cycle`). The
pairing is so a function of the experiment, its seed and its cases alone: never of
the chunk size, the executor or the worker count. A run reads at most one window (and
two cases) ahead of the chunks it hands out, so its memory stays bounded; an
experiment of up to 1,025 cases is a single window: one cycle through all its cases.
"""


def shuffle_cycle(count: int, *, seed: int, window: int = 0) -> tuple[int, ...]:
    """Whose message each of ``count`` cases of one window gets under the shuffled
    control: ``cycle[i]``, an offset in the window.

    The pairing is one cycle through all ``count`` cases, drawn uniformly (Sattolo's
    algorithm) from a generator seeded by ``seed`` and the window's number: no case
    gets its own message and every message is sent exactly once, so the control sees
    the messages the strategy sends, paired with the wrong cases. Fewer than two
    cases: no pairing (``()``).
    """
    if count < 2:
        return ()
    # a string seed is hashed (SHA-512): the same cycle on every platform and version
    rng = random.Random(f"handoffs-shuffle:{seed}:{window}")  # noqa: S311 - reproducible pairing, not a secret
    cycle = list(range(count))
    for i in range(count - 1, 0, -1):
        k = rng.randrange(i)
        cycle[i], cycle[k] = cycle[k], cycle[i]
    return tuple(cycle)


@attrs.frozen
class Partners:
    """Whose message each case of one chunk gets under the shuffled control: data
    decided before the chunk is handed out (:func:`paired_chunks`), so the chunk needs
    nothing from the chunks beside it.

    Attributes:
        start: the stream index of the chunk's first case.
        indices: per case of the chunk, the stream index of the case whose message it
            gets (``None``: the run has a single case, nobody to pair with).
        evidence: the evidence of each partner outside the chunk, by stream index.
    """

    start: int
    indices: tuple[int | None, ...]
    evidence: Mapping[int, Any]

    def partner(self, j: int, cases: Sequence[Any]) -> tuple[int, Any] | None:
        """``(stream index, evidence)`` of the partner of the chunk's case ``j``
        (``cases`` are the chunk's), or ``None`` when it has none.
        """
        index = self.indices[j]
        if index is None:
            return None
        at = index - self.start
        return index, cases[at] if 0 <= at < len(cases) else self.evidence[index]


def _windows(stream: Iterator[Any], size: int) -> Iterator[list[Any]]:
    """Consecutive windows of ``size`` cases; a lone last case joins the one before."""
    current = list(itertools.islice(stream, size))
    while current:
        ahead = list(itertools.islice(stream, 2))
        if len(ahead) == 1:  # the last case, alone: it joins this window
            current += ahead
            ahead = []
        yield current
        current = ahead + list(itertools.islice(stream, size - len(ahead)))


def paired_chunks(cases: Iterable[Any], chunk_size: int, *, seed: int,
                  window: int | None = None) -> Iterator[tuple[list[Any], Partners]]:
    """Cut a case stream into chunks of ``chunk_size`` cases (the last may be
    shorter), each with its :class:`Partners` under the shuffled control.

    The pairing is :func:`shuffle_cycle` over windows of ``window`` cases (default
    :data:`SHUFFLE_WINDOW`), whatever the chunk size. A chunk is handed out once the
    windows of all its cases have been read; the evidence of cases is kept until
    every case of their window has been handed out.

    Raises:
        ExperimentError: a chunk size below 1 or a window below 2.
    """
    size = SHUFFLE_WINDOW if window is None else window
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ExperimentError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    if not isinstance(size, int) or size < 2:
        raise ExperimentError(f"the shuffle window must be an integer of at least 2, got "
                              f"{size!r}")
    ready: collections.deque[Any] = collections.deque()  # read, not yet handed out
    start = 0  # the stream index of ready[0]
    partner: dict[int, int | None] = {}
    known: dict[int, Any] = {}  # evidence of the windows not wholly handed out
    low = 0  # the lowest index in known
    ends: list[int] = []  # where each window held in known ends
    read = 0
    for number, cases_of in enumerate(_windows(iter(cases), size)):
        cycle = shuffle_cycle(len(cases_of), seed=seed, window=number)
        for k, case in enumerate(cases_of):
            known[read + k] = case
            partner[read + k] = read + cycle[k] if cycle else None
        read += len(cases_of)
        ends.append(read)
        ready.extend(cases_of)
        while len(ready) >= chunk_size:
            chunk = [ready.popleft() for _ in range(chunk_size)]
            yield chunk, _partners(start, chunk_size, partner, known)
            start += chunk_size
            while ends and ends[0] <= start:  # a window wholly handed out
                for i in range(low, ends[0]):
                    del known[i]
                low = ends.pop(0)
    if ready:
        yield list(ready), _partners(start, len(ready), partner, known)


def _partners(start: int, count: int, partner: dict[int, int | None],
              known: Mapping[int, Any]) -> Partners:
    """The :class:`Partners` of the ``count`` cases from stream index ``start``."""
    indices = tuple(partner.pop(i) for i in range(start, start + count))
    return Partners(start=start, indices=indices,
                    evidence={p: known[p] for p in indices
                              if p is not None and not start <= p < start + count})


def _pct(value: float) -> str:
    return f"{value:.1%}"


def _num(value: float) -> str:
    return f"{value:.4g}"


# ------------------------------------------------------------------- expectations


@attrs.frozen(kw_only=True)
class ControlExpectations:
    """The agreement a receiver would reach under each control if it decided correctly
    for whichever case's message it was handed.

    Attributes:
        cases: cases in the experiment.
        no_message: share of cases whose reference is the contract's fail-closed
            action (an empty message can only fail closed).
        shuffled: share of cases whose reference equals that of the case whose message
            they receive under the shuffled control (:func:`paired_chunks`; ``None``
            for a single case, which nobody can be paired with).
        constant: share of cases whose reference equals that of the first case, whose
            message every case receives.
    """

    cases: int
    no_message: float
    shuffled: float | None
    constant: float

    def for_control(self, control: str) -> float | None:
        """The expectation for a control id (``None`` for an unknown id)."""
        return {"no-message": self.no_message, "shuffled-message": self.shuffled,
                "constant-message": self.constant}.get(control)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"cases": self.cases, "no-message": self.no_message,
                "shuffled-message": self.shuffled, "constant-message": self.constant}


def control_expectations(experiment: Experiment) -> ControlExpectations:
    """Compute :class:`~handoffs.lab._controls.ControlExpectations` from an experiment's
    cases, paired under the shuffled control as a run pairs them (:func:`paired_chunks`,
    from the experiment's seed).

    Raises:
        ExperimentError: no cases.
    """
    contract = experiment.contract
    fail = str(contract.fail_closed_action.value)
    references: list[str] = []
    for evidence in experiment.cases:
        if experiment.reference is not None:
            declared = experiment.reference(evidence)
            references.append(str(getattr(declared, "value", declared)))
        else:
            references.append(str(contract.decide(experiment.state_of(evidence)).value))
    if not references:
        raise ExperimentError("the case source yielded no cases", code="no-cases")
    shuffled_same = shuffled_total = 0
    for chunk, partners in paired_chunks(references, len(references), seed=experiment.seed):
        for j, reference in enumerate(chunk):
            found = partners.partner(j, chunk)
            if found is not None:
                shuffled_total += 1
                shuffled_same += reference == found[1]
    total = len(references)
    return ControlExpectations(
        cases=total,
        no_message=sum(r == fail for r in references) / total,
        shuffled=shuffled_same / shuffled_total if shuffled_total else None,
        constant=sum(r == references[0] for r in references) / total,
    )


# ----------------------------------------------------------------------- readings


@attrs.frozen(kw_only=True)
class ControlReading:
    """One strategy under one falsifying control.

    Attributes:
        strategy: the strategy.
        control: the control's perturbation id.
        question: what the control asks.
        agreement / mean_regret / hard_violations: measured under the control.
        baseline_agreement / baseline_mean_regret: the strategy without perturbation.
        if_followed: the agreement expected if the receiver decided correctly for
            whatever message it got (``None`` without expectations).
        falsifies: the control meets the release thresholds, so the message is not
            doing the work.
        unchanged: the control changed neither agreement nor regret: the receiver's
            decisions do not depend on the message.
        follows_content: the measured agreement equals ``if_followed`` (``None``
            without expectations).
        reading: the answer, in words, from the numbers.
    """

    strategy: str
    control: str
    question: str
    agreement: float
    mean_regret: float
    hard_violations: int
    baseline_agreement: float
    baseline_mean_regret: float
    if_followed: float | None
    falsifies: bool
    unchanged: bool
    follows_content: bool | None
    reading: str

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return attrs.asdict(self)


@attrs.frozen(kw_only=True)
class AuthorityReading:
    """The negative control: two strategies with the same encoder, one advising and
    one deciding.

    Attributes:
        encoder: the shared encoder.
        advise / decide: the ADVISE and the DECIDE strategy.
        advise_agreement / decide_agreement: their agreement without perturbation.
        advise_bytes / decide_bytes: their mean payload bytes.
        decide_hard_violations_under_controls: hard violations of the DECIDE strategy
            under each control (an actuator executes a wrong verdict too).
        reading: what the comparison shows, in words.
    """

    encoder: str
    advise: str
    decide: str
    advise_agreement: float
    decide_agreement: float
    advise_bytes: float
    decide_bytes: float
    decide_hard_violations_under_controls: Mapping[str, int]
    reading: str

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        out = attrs.asdict(self)
        out["decide_hard_violations_under_controls"] = dict(
            self.decide_hard_violations_under_controls)
        return out


@attrs.frozen(kw_only=True)
class SenderClaimReading:
    """One strategy when the sender claims DECIDE authority (``authoritative-sender``).

    Attributes:
        strategy: the strategy.
        agreement: agreement without perturbation.
        claimed_agreement: agreement when the sender claims DECIDE.
        changed: whether the claim changed any decision metric.
        reading: what it shows, in words.
    """

    strategy: str
    agreement: float
    claimed_agreement: float
    changed: bool
    reading: str

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return attrs.asdict(self)


def _tuple(value: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class Baselines:
    """Every control reading of one report.

    Attributes:
        experiment: the experiment name.
        cases: the number of cases.
        expectations: the control expectations used, if any.
        controls: one reading per strategy × control present in the report.
        authority: one reading per ADVISE/DECIDE pair of strategies sharing an encoder.
        sender_claims: one reading per strategy run under ``authoritative-sender``.
    """

    experiment: str
    cases: int
    expectations: ControlExpectations | None
    controls: tuple[ControlReading, ...] = attrs.field(converter=_tuple)
    authority: tuple[AuthorityReading, ...] = attrs.field(converter=_tuple)
    sender_claims: tuple[SenderClaimReading, ...] = attrs.field(converter=_tuple)

    def control(self, strategy: str, control: str) -> ControlReading:
        """The reading of ``strategy`` under ``control``.

        Raises:
            NoSuchReading: the report has no reading of ``strategy`` under ``control``
                (a ``KeyError``); the message lists the readings it has.
        """
        for reading in self.controls:
            if reading.strategy == strategy and reading.control == control:
                return reading
        held = ", ".join(f"{r.strategy} under {r.control}" for r in self.controls) or "none"
        raise NoSuchReading(
            f"no reading of strategy {strategy!r} under control {control!r} in the "
            f"report of {self.experiment!r} (its readings: {held})", json_path="$.controls")

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "experiment": self.experiment,
            "cases": self.cases,
            "expectations": None if self.expectations is None else self.expectations.to_json(),
            "controls": [r.to_json() for r in self.controls],
            "authority": [r.to_json() for r in self.authority],
            "sender_claims": [r.to_json() for r in self.sender_claims],
        }


def _control_text(control: str, *, agreement: float, regret: float, hard: int,
                  baseline: float, falsifies: bool, unchanged: bool,
                  expected: float | None) -> str:
    figures = f"agreement {_pct(agreement)}, mean regret {_num(regret)}, {hard} hard " \
              f"violation(s), against {_pct(baseline)} with the message"
    if unchanged:
        if falsifies:
            return (f"Unchanged ({figures}): the receiver decides as well without the "
                    "message's content, so this channel does no work and the "
                    "architecture is falsified.")
        return (f"Unchanged ({figures}): this receiver's decisions do not depend on the "
                "message at all.")
    if falsifies:
        return (f"The control meets the release thresholds ({figures}): the message is "
                "not what makes the decision.")
    if control == "no-message":
        text = (f"Without a message: {figures}. Local context alone does not decide "
                "these cases.")
        if expected is not None and abs(agreement - expected) < _EXACT:
            text += (f" The {_pct(agreement)} it keeps is exactly the share of cases whose "
                     "reference is the fail-closed action: it infers nothing, it refers.")
        return text
    if control == "shuffled-message":
        text = (f"With another case's message: {figures}. The content, not the extra "
                "call, carries the decision.")
        if expected is not None and abs(agreement - expected) < _EXACT:
            text += (f" The {_pct(agreement)} equals the share of cases whose neighbour "
                     "needs the same action: the receiver follows what it is handed, and "
                     "the shuffle can reveal no more than the neighbours differ.")
        elif expected is not None:
            text += (f" A receiver following the content would agree on {_pct(expected)}; "
                     "this one treats mismatched messages differently.")
        return text
    text = f"With one constant message: {figures}. The receiver reads the channel and acts " \
           "on it."
    if expected is not None and abs(agreement - expected) < _EXACT:
        text += (f" The {_pct(agreement)} is exactly the share of cases that need the "
                 "constant message's action.")
    if hard:
        text += " It acts on the message even where that breaks a hard constraint."
    return text


def _rows(report: Mapping[str, Any]) -> dict[tuple[str, str], Mapping[str, Any]]:
    return {(r["strategy"], r["perturbation"]): r for r in report["results"]}


def _meets(row: Mapping[str, Any], tolerances: Mapping[str, Any]) -> bool:
    floor = 1 - float(tolerances["agreement_epsilon"])
    return bool(row["agreement"] >= floor
                and row["mean_regret"] <= float(tolerances["regret_delta"]))


def _control_readings(report: Mapping[str, Any], names: Sequence[str],
                      expectations: ControlExpectations | None) -> list[ControlReading]:
    rows = _rows(report)
    tolerances = report["experiment"]["tolerances"]
    readings = []
    for strategy in names:
        base = rows.get((strategy, "none"))
        if base is None:
            continue
        for control in CONTROLS:
            row = rows.get((strategy, control))
            if row is None:
                continue
            expected = None if expectations is None else expectations.for_control(control)
            unchanged = (abs(row["agreement"] - base["agreement"]) < _EXACT
                         and abs(row["mean_regret"] - base["mean_regret"]) < _EXACT
                         and row["hard_violations"] == base["hard_violations"])
            falsifies = _meets(row, tolerances)
            readings.append(ControlReading(
                strategy=strategy, control=control, question=_QUESTIONS[control],
                agreement=row["agreement"], mean_regret=row["mean_regret"],
                hard_violations=row["hard_violations"],
                baseline_agreement=base["agreement"],
                baseline_mean_regret=base["mean_regret"],
                if_followed=expected, falsifies=falsifies, unchanged=unchanged,
                follows_content=None if expected is None
                else abs(row["agreement"] - expected) < _EXACT,
                reading=_control_text(control, agreement=row["agreement"],
                                      regret=row["mean_regret"],
                                      hard=row["hard_violations"],
                                      baseline=base["agreement"], falsifies=falsifies,
                                      unchanged=unchanged, expected=expected),
            ))
    return readings


def _authority_readings(report: Mapping[str, Any], names: Sequence[str]
                        ) -> list[AuthorityReading]:
    rows = _rows(report)
    described = [s for s in report["experiment"]["strategies"] if s["name"] in names]
    readings = []
    for advise in described:
        if advise["authority"] != "ADVISE":
            continue
        for decide in described:
            if decide["authority"] != "DECIDE" or decide["encoder"] != advise["encoder"]:
                continue
            a = rows.get((advise["name"], "none"))
            d = rows.get((decide["name"], "none"))
            if a is None or d is None:
                continue
            under = {c: int(rows[(decide["name"], c)]["hard_violations"])
                     for c in CONTROLS if (decide["name"], c) in rows}
            text = (f"The same {advise['encoder']} message (mean {_num(a['mean_bytes'])} "
                    f"against {_num(d['mean_bytes'])} bytes) agrees on "
                    f"{_pct(a['agreement'])} when the receiver must decide and on "
                    f"{_pct(d['agreement'])} when the sender decides and the receiver "
                    "executes. The message did not improve; the decision moved to the "
                    "sender, and the receiver's accountable judgement disappeared.")
            worst = max(under.values(), default=0)
            if worst:
                text += (f" An actuator executes a wrong verdict as readily as a right "
                         f"one: up to {worst} hard violation(s) under the controls.")
            readings.append(AuthorityReading(
                encoder=str(advise["encoder"]), advise=str(advise["name"]),
                decide=str(decide["name"]), advise_agreement=a["agreement"],
                decide_agreement=d["agreement"], advise_bytes=a["mean_bytes"],
                decide_bytes=d["mean_bytes"], decide_hard_violations_under_controls=under,
                reading=text,
            ))
    return readings


def _claim_readings(report: Mapping[str, Any], names: Sequence[str]
                    ) -> list[SenderClaimReading]:
    rows = _rows(report)
    authority = {s["name"]: s["authority"] for s in report["experiment"]["strategies"]}
    readings = []
    for strategy in names:
        base = rows.get((strategy, "none"))
        claimed = rows.get((strategy, AUTHORITATIVE_SENDER))
        if base is None or claimed is None:
            continue
        changed = not (abs(base["agreement"] - claimed["agreement"]) < _EXACT
                       and abs(base["mean_regret"] - claimed["mean_regret"]) < _EXACT
                       and base["hard_violations"] == claimed["hard_violations"])
        if authority.get(strategy) == "DECIDE":
            text = (f"The sender already decides for this strategy (agreement "
                    f"{_pct(base['agreement'])}); claiming DECIDE again changes nothing.")
        elif changed:
            text = (f"Claiming DECIDE moves agreement from {_pct(base['agreement'])} to "
                    f"{_pct(claimed['agreement'])}: this receiver defers to the sender's "
                    "claimed authority.")
        else:
            text = (f"Claiming DECIDE changes nothing (agreement {_pct(base['agreement'])}): "
                    "this receiver does not let the sender's claim replace its own rule.")
        readings.append(SenderClaimReading(strategy=strategy, agreement=base["agreement"],
                                           claimed_agreement=claimed["agreement"],
                                           changed=changed, reading=text))
    return readings


def read_baselines(report: Mapping[str, Any], *, strategies: Sequence[str] | None = None,
                   experiment: Experiment | None = None) -> Baselines:
    """Read the falsifying controls and the authority negative control of a report.

    Args:
        report: a lab report (``report.json``).
        strategies: the strategies to read (default: every strategy of the report).
        experiment: the experiment the report was run from; its cases give what each
            control would give a receiver that follows whatever message it gets
            (:class:`~handoffs.lab._controls.ControlExpectations`, paired as the run
            paired them), and each reading adds that comparison.

    Raises:
        ExperimentError: a named strategy is not in the report, or the experiment's
            cases are not the report's.
    """
    expectations = None if experiment is None else control_expectations(experiment)
    known = [s["name"] for s in report["experiment"]["strategies"]]
    names = list(known) if strategies is None else list(strategies)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ExperimentError(f"strategies {unknown} are not in the report; known: {known}")
    if expectations is not None and expectations.cases != report["experiment"]["cases"]:
        raise ExperimentError(f"the expectations cover {expectations.cases} cases, the report "
                              f"{report['experiment']['cases']}")
    return Baselines(
        experiment=str(report["experiment"]["name"]),
        cases=int(report["experiment"]["cases"]),
        expectations=expectations,
        controls=_control_readings(report, names, expectations),
        authority=_authority_readings(report, names),
        sender_claims=_claim_readings(report, names),
    )
