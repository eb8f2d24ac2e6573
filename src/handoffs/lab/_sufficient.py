"""A sufficiency assertion for unit tests: the lab on one strategy, no perturbations.

:func:`assert_sufficient` runs the lab engine in the calling thread on one strategy
(an encoder and the receiver under test) and applies the release gate with the given
tolerances; on failure it raises ``AssertionError`` with the gate's reasons and a
table of the failing cases, read back from the run log. It needs no Hypothesis (the
cases are given); :mod:`handoffs.testing` draws cases for it.
"""

from __future__ import annotations

import concurrent.futures as cf
import enum
import json
import math
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypeVar

from handoffs._cases import GeneratedCase
from handoffs._errors import InvalidArgument
from handoffs.contracts import Contract, Encoder, GovernanceService, ReceiptEncoder
from handoffs.lab._experiment import Experiment, Strategy, Tolerances, default_state_of
from handoffs.lab._runlog import COLUMNS, read_run_log
from handoffs.lab._runner import run
from handoffs.lab._sources import IterableCases
from handoffs.lab._values import wire_value
from handoffs.receivers import Receiver

__all__ = ["assert_sufficient"]

S = TypeVar("S")
A = TypeVar("A", bound=enum.Enum)
T = TypeVar("T")

_DEFAULT_SERVICE: Final = GovernanceService(
    sender="handoffs-testing-sender",
    receiver="handoffs-testing-receiver",
    policy_version="testing",
    valid_until=datetime(9999, 12, 31, tzinfo=UTC),
)


class _Inline(cf.Executor):
    """Runs each submitted call at once, in the calling thread (no pool to start)."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> cf.Future[T]:
        future: cf.Future[T] = cf.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # delivered through the future, as a pool would
            future.set_exception(exc)
        return future


def _as_evidence(contract: Contract[Any, Any], items: Iterable[Any]) -> list[Any]:
    evidence: list[Any] = []
    for number, item in enumerate(items, start=1):
        if isinstance(item, contract.state):
            case_id = f"case-{number:06d}"
            evidence.append(GeneratedCase(case_id=case_id, state=item,
                                          evidence_refs=(f"urn:handoffs:testing:{case_id}",)))
        else:
            evidence.append(item)
    return evidence


def _cell(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, Mapping) and set(value) == {"lo", "hi"}:
        return f"[{_cell(value['lo'])}, {_cell(value['hi'])}]"
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True,
                                                          ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _text_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c)
              for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines.extend("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
                 for r in rows)
    return "\n".join(lines)


def assert_sufficient(
    contract: Contract[S, A],
    receiver: Receiver,
    cases: Iterable[Any],
    *,
    epsilon: float = 0.0,
    delta: float = 0.0,
    hard_violations: int = 0,
    encoder: Encoder[Any] | None = None,
    governance: GovernanceService | None = None,
    state_of: Callable[[Any], Any] | None = None,
    max_rows: int = 20,
) -> None:
    """Assert that ``receiver`` decides ``cases`` as the contract's reference does.

    Runs the lab engine on one strategy (``encoder`` × ``receiver``) without
    perturbations and applies the release gate with the given tolerances: the
    disagreement rate must be at most ``epsilon``, the mean consequence-weighted
    regret at most ``delta``, and hard violations at most ``hard_violations``;
    every message must also pass the governance check. On failure it raises
    ``AssertionError`` with the gate's reasons and a table of the failing cases
    (case, decision state, reference action, chosen action, verdict, regret, hard
    violations, reason codes).

    Args:
        contract: the contract; its policy is the full-evidence reference, its loss
            matrix scores regret and its hard constraints are counted apart.
        receiver: the receiver under test (a :class:`~handoffs.receivers.Receiver`).
        cases: evidence the lab can read (e.g. from :func:`handoffs.testing.cases`), or plain
            decision states of the contract (ids are made up for them).
        epsilon: tolerated disagreement rate ``1 - agreement``.
        delta: tolerated mean regret.
        hard_violations: tolerated number of hard violations.
        encoder: what writes each message (default: the contract's
            :class:`~handoffs.contracts.ReceiptEncoder`).
        governance: the governance service that stamps each message (default: a
            testing service, sender ``handoffs-testing-sender``, receiver
            ``handoffs-testing-receiver``, policy version ``testing``, valid until
            9999).
        state_of: reads the true decision state from a case (default: its
            ``state``).
        max_rows: most failing cases shown in the message.

    Raises:
        AssertionError: the receiver is not sufficient within the tolerances.
        ValueError: ``InvalidArgument`` (also a TypeError), no cases, or a receiver that is not a
            ``Receiver``.
        ExperimentError: bad tolerances (before any work starts).
    """
    if not isinstance(contract, Contract):
        raise InvalidArgument(f"expected a handoffs Contract, got {type(contract).__name__}")
    if not isinstance(receiver, Receiver):
        raise InvalidArgument(f"receiver must implement handoffs.receivers.Receiver, got "
                        f"{type(receiver).__name__}")
    evidence = _as_evidence(contract, cases)
    if not evidence:
        raise InvalidArgument("assert_sufficient needs at least one case")
    tolerances = Tolerances(agreement_epsilon=epsilon, regret_delta=delta,
                            hard_violations=hard_violations)
    reader = state_of or default_state_of
    strategy = Strategy(
        name=re.sub(r"[\s/]+", "-", str(getattr(receiver, "name", ""))) or "subject",
        encoder=encoder or ReceiptEncoder(contract=contract, state_of=reader),
        receiver=receiver,
        gated=True,
    )
    experiment = Experiment(
        name="assert-sufficient",
        contract=contract,
        cases=IterableCases(evidence, description="handoffs.lab.assert_sufficient"),
        strategies=(strategy,),
        governance=governance or _DEFAULT_SERVICE,
        state_of=reader,
        perturbations=(),
        tolerances=tolerances,
        example_limit=0,
    )
    with tempfile.TemporaryDirectory(prefix="handoffs-testing-") as folder:
        log_path = Path(folder) / "run.jsonl"
        result = run(experiment, executor=_Inline(), run_log=log_path,
                     created=datetime(2000, 1, 1, tzinfo=UTC))
        if result.exit_code == 0:
            return
        _, records = read_run_log(log_path)
        failing = _failing_rows(contract, evidence, records, reader)
    gate = result.report["gate"]
    row = next(r for r in result.report["results"] if r["perturbation"] == "none")
    summary = (
        f"{receiver.name} is not sufficient for {contract.id} on {len(evidence)} cases: "
        f"agreement {row['agreement']:.4g} (ε = {epsilon:g}), mean regret "
        f"{row['mean_regret']:.4g} (δ = {delta:g}), hard violations {row['hard_violations']} "
        f"(allowed {hard_violations})"
    )
    lines = [summary, *(f"  - {reason}" for reason in gate["reasons"])]
    if failing:
        columns = ("case", "reference", "chosen", "verdict", "regret", "hard violations",
                   "reasons", "decision state")
        shown = failing[:max_rows]
        lines += ["", _text_table(columns, shown)]
        if len(failing) > len(shown):
            lines.append(f"... and {len(failing) - len(shown)} more failing cases")
    raise AssertionError("\n".join(lines))


def _failing_rows(contract: Contract[Any, Any], evidence: Sequence[Any],
                  records: Iterable[Mapping[str, Any]], reader: Callable[[Any], Any]
                  ) -> list[tuple[str, ...]]:
    column = {name: index for index, name in enumerate(COLUMNS)}
    actions = {a.value: a for a in contract.actions}
    failing: list[tuple[str, ...]] = []
    for record in records:
        if "rows" not in record:
            continue
        start = int(record["start"])
        for row in record["rows"]:
            if row[column["perturbation"]] != 0:
                continue
            reference = str(row[column["reference"]])
            chosen = str(row[column["action"]])
            case_index = start + int(row[column["case"]])
            state = contract.view(reader(evidence[case_index]))
            if chosen in actions and reference in actions:
                regret = contract.loss(actions[chosen], actions[reference])
                violated = contract.hard_violations(actions[chosen], actions[reference],
                                                    truth=state)
            else:
                regret, violated = math.nan, ()
            if chosen == reference and not violated:
                continue
            case_id = str(record["cases"][int(row[column["case"]])][0])
            failing.append((
                case_id,
                reference,
                chosen,
                str(row[column["verdict"]]),
                _cell(regret),
                ", ".join(violated) or "-",
                ", ".join(row[column["reasons"]] or ()) or "-",
                " ".join(f"{k}={_cell(wire_value(v))}" for k, v in state.items()),
            ))
    return failing
