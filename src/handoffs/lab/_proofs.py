"""Proved verdicts: each result row's perturbation decided with the solver.

For a contract whose policy is declarative and a strategy whose receiver decides by
that policy (the strict contract receiver, the reference receivers, or a receiver
that declares ``decides_by_policy``), a perturbation with a symbolic form
(:meth:`~handoffs.lab.perturbations.Perturbation.symbolic`) is decided over the whole
declared domain: the row is ``proved`` (no state where the receiver's action, the
loss or a hard constraint differs from the reference), ``refuted`` (a witness: the
state, the perturbed message, both actions, the loss and the hard violations, each
computed by the perturbation's and the receiver's own code) or ``unknown`` (the
solver's time limit, or the hard deadline of the worker process). Anything else is
``sampled``: an opaque predicate, a model or user receiver, a perturbation without a
symbolic form. Nothing sampled is ever reported as proved.

The solver runs in a forked worker process stopped at a hard deadline (z3's own
limit is soft); where ``fork`` is not available it runs in-process under the
solver's time limit and its watchdog. Witness states join the case set of every
strategy when the cases are generated (:class:`~handoffs.lab.GeneratedCases`), so
that every receiver is asked exactly where the decision can move.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from handoffs._errors import HandoffsError
from handoffs._solver import fresh_context
from handoffs.contracts import Contract
from handoffs.contracts.analysis import (
    DropField,
    ProofAnswer,
    SymbolicForm,
    prove_form,
    undecidable,
)
from handoffs.lab._reference import ReferenceReceiver
from handoffs.lab._values import wire_value
from handoffs.lab.perturbations._base import CaseContext, Perturbation, Scoring

__all__ = ["VERDICTS", "Proofs", "RowProof", "prove_plan", "receiver_semantics",
           "with_witnesses"]

SEMANTICS: Final = ("strict", "benign-defaults", "three-valued")
"""How a receiver that decides by the contract's policy reads a perturbed state."""

VERDICTS: Final = ("proved", "refuted", "unknown", "sampled")
"""A result row's verdict."""

DEFAULT_QUERY_MS: Final = 5000
"""The solver's time limit per row."""
DEFAULT_DEADLINE_S: Final = 120.0
"""The hard deadline of the worker process for every row of a run."""


def receiver_semantics(receiver: Any) -> str | None:
    """How ``receiver`` decides by the contract's policy (one of ``strict``,
    ``benign-defaults``, ``three-valued``), or ``None`` (it does not, as far as the lab
    can tell: its rows are sampled).

    A receiver of your own that recomputes the contract's policy from the decision
    state declares it with a ``decides_by_policy`` attribute naming its semantics.
    """
    from handoffs.receivers import StrictContractReceiver

    if isinstance(receiver, StrictContractReceiver):
        return "strict"
    if isinstance(receiver, ReferenceReceiver):
        return "benign-defaults" if receiver.defaults else "three-valued"
    declared = getattr(receiver, "decides_by_policy", None)
    return declared if declared in SEMANTICS else None


@attrs.frozen
class RowProof:
    """One row's verdict.

    Attributes:
        verdict: ``proved``, ``refuted``, ``unknown`` or ``sampled``.
        reason: why (for ``unknown`` and ``sampled``), or what was proved.
        witness: for ``refuted``, the JSON witness (state, message, actions, loss,
            hard violations, and ``case_id`` when it joined the cases).
        seconds: solver CPU time.
        admission: the proof assumes the receiver admits (``True``) or refuses
            (``False``) every perturbed message; checked against the row afterwards.
            ``None``: no assumption.
    """

    verdict: str
    reason: str
    witness: Mapping[str, Any] | None = None
    seconds: float = 0.0
    admission: bool | None = None
    state: Mapping[str, Any] | None = attrs.field(default=None, eq=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The row's ``verdict``, ``verdict_reason`` and ``witness``."""
        return {"verdict": self.verdict, "verdict_reason": self.reason,
                "witness": None if self.witness is None else dict(self.witness)}


def _sampled(reason: str) -> RowProof:
    return RowProof("sampled", reason)


def state_json(state: Mapping[str, Any]) -> dict[str, Any]:
    """A state in its JSON form (enums by value, intervals as ``lo``/``hi``)."""
    return {name: wire_value(value) for name, value in state.items()}


def _wire_state(contract: Contract[Any, Any], state: Mapping[str, Any]) -> dict[str, Any]:
    return {s.name: wire_value(state[s.name]) for s in contract.fields}


class _Concrete:
    """A row's receiver and perturbation run by their own code on one true state."""

    def __init__(self, contract: Contract[Any, Any], perturbation: Perturbation | None, *,
                 semantics: str, strategy: str, refused: bool, admission: bool) -> None:
        self.admission = admission
        self.contract = contract
        self.perturbation = perturbation
        self.semantics = semantics
        self.strategy = strategy
        self.refused = refused
        base = Scoring.of(contract)
        self.scoring = base if perturbation is None else perturbation.scoring(base)
        self.receiver = ReferenceReceiver(contract, defaults=semantics == "benign-defaults")

    def outcome(self, state: Mapping[str, Any]) -> dict[str, Any] | None:
        """The witness JSON when the receiver's action, loss or hard violations differ
        from the reference's on ``state``; else ``None``.
        """
        contract = self.contract
        reference = str(contract.decide(contract.state(**state)).value)
        message: dict[str, Any] = {"decision_state": _wire_state(contract, state),
                                   "policy_version": "current"}
        sent: Mapping[str, Any] | None = message
        if self.perturbation is not None:
            ctx = CaseContext(index=0, case_id="witness", truth=state, reference=reference,
                              contract=contract,
                              decide=lambda view: str(contract.decide(
                                  contract.state(**view)).value),
                              neighbour=lambda _: None, constant=lambda _: None)
            variants = list(self.perturbation.variants(message, ctx, self.strategy))
            if variants:
                sent = variants[0].message
                if variants[0].reference is not None:
                    reference = variants[0].reference
            elif not self.admission:
                return None  # the perturbation does not apply to this state
        decision_state = sent.get("decision_state") if isinstance(sent, Mapping) else None
        if self.refused or (self.semantics == "strict" and (
                not isinstance(decision_state, Mapping)
                or set(decision_state) != set(contract.field_map))):
            got = str(contract.fail_closed_action.value)
        else:
            got = str(self.receiver.receive({"decision_state": decision_state}).action)
        holding = tuple(h.name for h in contract.hard_constraints
                        if h.when is not None and h.when.evaluate(state) is not False)
        try:
            loss = self.scoring.regret(got, reference)
        except HandoffsError:
            loss = None
        violations = self.scoring.violations(got, reference, holding)
        own = set(self.scoring.violations(reference, reference, holding))
        if got == reference and not loss and not set(violations) - own:
            return None
        incomplete = (isinstance(decision_state, Mapping)
                      and set(decision_state) != set(contract.field_map))
        return {"state": state_json(state),
                "message": None if decision_state is None else dict(decision_state),
                "refused": self.refused or (self.semantics == "strict" and incomplete),
                "reference_action": reference, "received_action": got, "loss": loss,
                "hard_violations": list(violations)}


def _hard(scoring: Scoring, contract: Contract[Any, Any]) -> list[tuple[str, str,
                                                                          frozenset[str], Any]]:
    when = {h.name: h.when for h in contract.hard_constraints}
    return [(name, chosen, allowed, when.get(name)) for name, chosen, allowed in scoring.hard]


def _prove_row(task: _Task, contract: Contract[Any, Any], timeout_ms: int) -> RowProof:
    perturbation, form, semantics = task.perturbation, task.form, task.semantics
    strategy, refused = task.strategy, task.refused
    concrete = _Concrete(contract, perturbation, semantics=semantics, strategy=strategy,
                         refused=refused, admission=form.admission)
    answer: ProofAnswer = prove_form(
        contract, form, semantics, loss=concrete.scoring.loss,
        hard=_hard(concrete.scoring, contract),
        confirm=lambda state: concrete.outcome(state) is not None,
        timeout_ms=timeout_ms, refused=refused)
    admission = None if semantics != "strict" else not (
        refused or any(isinstance(c, DropField) for c in form.changes))
    if answer.status == "proved":
        return RowProof("proved", "no state of the declared domain changes the decision, "
                                  "the loss or a hard constraint", seconds=answer.seconds,
                        admission=admission)
    if answer.status == "unknown" or answer.state is None:
        return RowProof("unknown", answer.reason, seconds=answer.seconds,
                        admission=admission)
    witness = concrete.outcome(answer.state)
    return RowProof("refuted", "a state of the declared domain where the receiver's "
                               "decision differs from the reference",
                    witness=witness, seconds=answer.seconds, admission=admission,
                    state=answer.state)


@attrs.frozen
class _Task:
    key: tuple[str, str]
    perturbation: Perturbation | None
    form: SymbolicForm
    semantics: str
    strategy: str
    refused: bool


def _run_tasks(contract: Contract[Any, Any], tasks: Sequence[_Task],
               timeout_ms: int) -> dict[tuple[str, str], RowProof]:
    """Every task's proof, on a fresh z3 main context: the witnesses z3 answers then
    do not depend on what the process asked before (a forked worker inherits its
    parent's context).
    """
    out: dict[tuple[str, str], RowProof] = {}
    done: dict[tuple[Any, ...], RowProof] = {}
    with fresh_context():
        for task in tasks:
            memo = (id(task.perturbation), task.semantics, task.refused)
            if memo not in done:
                try:
                    done[memo] = _prove_row(task, contract, timeout_ms)
                except (ValueError, TypeError, HandoffsError) as exc:
                    done[memo] = RowProof("sampled",
                                          f"the symbolic form does not compile: {exc}")
            out[task.key] = done[memo]
    return out


def _worker(connection: Any, contract: Contract[Any, Any], tasks: Sequence[_Task],
            timeout_ms: int) -> None:  # pragma: no cover - runs in the forked child
    try:
        found = _run_tasks(contract, tasks, timeout_ms)
        connection.send(("ok", found))
    except BaseException as exc:  # reported to the parent
        connection.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        connection.close()


def _run_with_deadline(contract: Contract[Any, Any], tasks: Sequence[_Task],
                       timeout_ms: int, deadline_s: float
                       ) -> dict[tuple[str, str], RowProof]:
    """The tasks in a forked worker stopped at ``deadline_s``: every row it did not
    answer is ``unknown``.
    """
    if not tasks:
        return {}
    try:
        context = multiprocessing.get_context("fork")
    except ValueError:  # pragma: no cover - no fork (Windows): in-process, watchdog only
        return _run_tasks(contract, tasks, timeout_ms)
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_worker, args=(send, contract, tasks, timeout_ms),
                              daemon=True, name="handoffs-proofs")
    process.start()
    send.close()
    try:
        if receive.poll(deadline_s):
            try:
                status, payload = receive.recv()
            except EOFError:
                status, payload = "error", "the proof worker died"
        else:
            status, payload = "deadline", None
    finally:
        if process.is_alive():
            process.kill()
        process.join()
        receive.close()
    if status == "ok":
        return dict(payload)
    reason = (f"the proof worker's hard deadline ({deadline_s:g} s) passed"
              if status == "deadline" else f"the proof worker failed: {payload}")
    return {t.key: RowProof("unknown", reason) for t in tasks}


@attrs.frozen
class Proofs:
    """Every row's verdict for one plan, with the witness states to add as cases.

    Attributes:
        rows: ``(strategy, perturbation id)`` → :class:`RowProof`.
        seconds: CPU seconds the proofs took (wall time of the worker).
    """

    rows: Mapping[tuple[str, str], RowProof]
    seconds: float = 0.0
    _contract: Any = attrs.field(default=None, eq=False, repr=False)
    _tasks: Mapping[tuple[str, str], _Task] = attrs.field(factory=dict, eq=False, repr=False)
    _timeout_ms: int = DEFAULT_QUERY_MS

    def witness_states(self) -> tuple[Mapping[str, Any], ...]:
        """The refuted rows' witness states, each once, in row order."""
        seen: list[Mapping[str, Any]] = []
        for proof in self.rows.values():
            if proof.state is not None and proof.state not in seen:
                seen.append(proof.state)
        return tuple(seen)

    def annotate(self, results: list[dict[str, Any]],
                 witness_cases: Mapping[str, str] | None = None) -> None:
        """Add ``verdict``, ``verdict_reason`` and ``witness`` to every result row,
        checking each proof's admission assumption against the row (a strict receiver
        admits every perturbed message, or refuses every one: its admission reads no
        decision-state value).
        """
        cases = dict(witness_cases or {})
        checked = [self._checked(row) for row in results]
        # the rows whose receiver refused every perturbed message: their proofs of
        # the refusal, in one worker
        refusals = [found for found in checked if isinstance(found, _Task)]
        refused = _run_with_deadline(self._contract, refusals, self._timeout_ms,
                                     DEFAULT_DEADLINE_S)
        for row, found in zip(results, checked, strict=True):
            proof = attrs.evolve(refused[found.key], admission=False) \
                if isinstance(found, _Task) else found
            out = proof.to_json()
            if out["witness"] is not None:
                digest = _state_key(out["witness"]["state"])
                out["witness"]["case_id"] = cases.get(digest)
            row.update(out)

    def _checked(self, row: Mapping[str, Any]) -> RowProof | _Task:
        """A row's proof checked against what the run saw its receiver admit, or the
        task that proves the refusal when the receiver refused every perturbed message
        the proof assumed admitted.
        """
        key = (row["strategy"], row["perturbation"])
        proof = self.rows.get(key) or _sampled("no symbolic form for this row")
        if proof.admission is None or proof.verdict == "sampled":
            return proof
        admitted = row.get("admitted_rate")
        if proof.admission and admitted == 1:
            return proof
        if not proof.admission and admitted == 0:
            return proof
        task = self._tasks.get(key)
        if admitted == 0 and task is not None and task.form.admission and proof.admission:
            return attrs.evolve(task, refused=True)
        return _sampled(f"the receiver admitted {admitted!r} of the perturbed messages; "
                        "the proof assumed it admits all or none")


def _state_key(state: Any) -> str:
    from handoffs._json import dumps

    return str(dumps(state))


def witness_case_ids(contract: Contract[Any, Any], states: Sequence[Mapping[str, Any]],
                     prefix: str = "witness") -> dict[str, str]:
    """The case id each witness state gets (``witness-001``, ...), by state."""
    return {_state_key(state_json(s)): f"{prefix}-{i + 1:03d}" for i, s in enumerate(states)}


def _form(perturbation: Perturbation | None, contract: Contract[Any, Any]
          ) -> SymbolicForm | None:
    if perturbation is None:
        return SymbolicForm(admission=True)
    return perturbation.symbolic(contract)


def prove_plan(plan: Any, *, timeout_ms: int = DEFAULT_QUERY_MS,
               deadline_s: float = DEFAULT_DEADLINE_S) -> Proofs:
    """Decide every (strategy, perturbation) row of a compiled plan that can be decided.

    Args:
        plan: the compiled plan (its contract, strategies and prepared perturbations).
        timeout_ms: the solver's time limit per row.
        deadline_s: the worker process's hard deadline for all rows.
    """
    contract: Contract[Any, Any] = plan.contract
    started = time.perf_counter()
    rows: dict[tuple[str, str], RowProof] = {}
    tasks: dict[tuple[str, str], _Task] = {}
    reason = undecidable(contract)
    entries: list[tuple[Perturbation | None, tuple[int, ...]]] = [
        (None, tuple(range(len(plan.strategies))))]
    entries += list(zip(plan.perturbations, plan.targets, strict=True))
    for perturbation, targets in entries:
        pid = "none" if perturbation is None else perturbation.id
        form = _form(perturbation, contract)
        for si in targets:
            strategy = plan.strategies[si]
            key = (strategy.name, pid)
            semantics = receiver_semantics(strategy.receiver)
            if reason:
                rows[key] = _sampled(reason)
            elif semantics is None:
                rows[key] = _sampled("the receiver does not decide by the contract's policy")
            elif form is None:
                rows[key] = _sampled("the perturbation declares no symbolic form")
            elif semantics == "strict" and not strategy.receipts:
                rows[key] = _sampled("the strategy does not send contract receipts")
            else:
                tasks[key] = _Task(key, perturbation, form, semantics, strategy.name, False)
    rows.update(_run_with_deadline(contract, list(tasks.values()), timeout_ms, deadline_s))
    return Proofs(rows=rows, seconds=time.perf_counter() - started, contract=contract,
                  tasks=tasks, timeout_ms=timeout_ms)


def with_witnesses(experiment: Any, proofs: Proofs) -> Any:
    """``experiment`` with the proofs' witness states added to its generated cases (an
    experiment whose cases are not generated is returned as it is: its case source
    builds its own evidence, and the report marks which witnesses are among them).
    """
    from handoffs.lab._sources import GeneratedCases

    states = proofs.witness_states()
    cases = experiment.cases
    if not states or not isinstance(cases, GeneratedCases):
        return experiment
    return attrs.evolve(experiment, cases=attrs.evolve(cases, witnesses=states))


def report_verdicts(results: list[dict[str, Any]], proofs: Proofs | None,
                    experiment: Any) -> dict[str, Any]:
    """Annotate the result rows with their verdicts; the report's ``proofs`` summary."""
    from handoffs.lab._sources import GeneratedCases

    found = proofs if proofs is not None else Proofs(rows={})
    cases = experiment.cases
    states = cases.witnesses if isinstance(cases, GeneratedCases) else ()
    found.annotate(results, witness_case_ids(found._contract, states))
    counts = {v: sum(1 for r in results if r["verdict"] == v) for v in VERDICTS}
    return {"counts": counts, "witness_cases": len(states),
            "line": ", ".join(f"{n} {v}" for v, n in counts.items())}


def proof_checks(row: Mapping[str, Any], where: str, tolerances: Any) -> list[dict[str, Any]]:
    """The gate's checks of one gated row's verdict: a refuted row whose witness breaks
    a hard constraint fails ``hard_violations`` whatever the sample says; with
    ``require_proof``, a row ``unknown`` or ``sampled`` (or without a verdict, from an
    older report) fails ``proof``.
    """
    checks: list[dict[str, Any]] = []
    verdict = row.get("verdict")
    witness = row.get("witness") or {}
    broken = list(witness.get("hard_violations") or ())
    if verdict == "refuted" and len(broken) > tolerances.hard_violations:
        checks.append({"metric": "hard_violations", "strategy": row["strategy"],
                       "perturbation": row["perturbation"], "comparison": "<=",
                       "threshold": tolerances.hard_violations, "value": len(broken),
                       "passed": False,
                       "reason": f"{where}: refuted with a witness that breaks "
                                 f"{', '.join(broken)} (reference "
                                 f"{witness.get('reference_action')}, received "
                                 f"{witness.get('received_action')})"})
    if tolerances.require_proof:
        proved = verdict in ("proved", "refuted")
        checks.append({"metric": "proof", "strategy": row["strategy"],
                       "perturbation": row["perturbation"], "comparison": ">=",
                       "threshold": 1, "value": 1 if proved else 0, "passed": proved,
                       "reason": f"{where}: verdict {verdict or 'missing'}"
                                 + ("" if proved else
                                    f" ({row.get('verdict_reason') or 'no proof'}); "
                                    "require_proof asks for proved or refuted")})
    return checks


def extend_coverage(coverage: dict[str, Any], results: Sequence[Mapping[str, Any]]) -> None:
    """Count the refuted perturbations' change regions in the report's coverage: each
    is witnessed when a case lies in it (its witness is among the cases, or the row
    measured a changed decision, loss or hard violation); ``complete`` only when each
    is, and the line names what is missing.
    """
    if not coverage.get("available"):
        return
    refuted: dict[str, bool] = {}
    for row in results:
        if row.get("verdict") != "refuted":
            continue
        witness = row.get("witness") or {}
        seen = (witness.get("case_id") is not None or row["agreement"] < 1
                or row["mean_regret"] > 0 or row["hard_violations"] > 0)
        refuted[row["perturbation"]] = refuted.get(row["perturbation"], False) or seen
    missed = [p for p, seen in refuted.items() if not seen]
    coverage["refuted_perturbations"] = len(refuted)
    coverage["refuted_witnessed"] = len(refuted) - len(missed)
    coverage["missed_perturbations"] = missed
    if not refuted:
        return
    head, _, tail = str(coverage["line"]).partition("; the cases miss")
    line = f"{head}, refuted perturbations {len(refuted) - len(missed)}/{len(refuted)} witnessed"
    if missed or tail:
        named = [*([tail.split(": ", 1)[1]] if tail else []), *missed[:2]]
        line += f"; the cases miss: {'; '.join(named)}"
    coverage["line"] = line
    coverage["complete"] = bool(coverage.get("complete")) and not missed
