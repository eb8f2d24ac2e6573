"""The lab's memo keys are exact by construction (issue #34).

- A user's ``reads`` declaration (:attr:`FunctionReceiver.reads`) is not trusted by
  default: a receiver that declares too little gets exact figures anyway; with
  ``projection=True`` the engine checks the declaration on memo hits and a wrong one
  stops the run with :class:`ProjectionError`, naming the receiver and the member.
- The engine's figures equal the essay's plain loop on the essay's lab
  (``benchmarks/lab.py``), and equal the unmemoised engine (every decision made
  afresh) on generated contracts (a Hypothesis property).
"""

from __future__ import annotations

import importlib.util
import pickle
import sys
import warnings
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from handoffs.contracts.policy import Is, Over, Policy, Rule
from handoffs.examples.payment import synthetic_cases
from handoffs.examples.payment_lab import (
    decision_contract_encoder,
    payment_experiment,
    payment_gate,
)
from handoffs.lab import Experiment, ProjectionError, Strategy, _chunk, run
from handoffs.receivers import Admitted, FunctionReceiver
from worlds.tank import TANK, Grade, Valve, tank_experiment

ODD = ("1", "3", "5", "7", "9")


def peeking(admitted: Admitted) -> str:
    """Decides by the case id, which the decision state does not hold."""
    return "ESCALATE" if str(admitted.document["case_id"]).endswith(ODD) else "HOLD"


def peeking_receiver(reads: tuple[str, ...] | None) -> FunctionReceiver:
    return FunctionReceiver(peeking, gate=payment_gate(), name="peeking", prompt="p",
                            model_route="r", deterministic=True, reads=reads)


def with_peeking(reads: tuple[str, ...] | None) -> Experiment:
    experiment = payment_experiment(variants=2, profile="essay")
    strategy = Strategy(name="peeking", encoder=decision_contract_encoder(),
                        receiver=peeking_receiver(reads))
    return attrs.evolve(experiment, strategies=(*experiment.strategies, strategy))


_EFFORT = frozenset({"mean_latency_ms", "memo_hits", "receiver_calls"})


def figures(report: dict[str, Any]) -> dict[str, Any]:
    """What a report says about decisions (not how many calls or hits it took)."""
    found = {key: report[key] for key in (
        "strategy_results", "decision_field_ablation", "governance_field_ablation",
        "error_injection", "falsehoods", "failures", "counterfactual_triggers")}
    found["results"] = [{k: v for k, v in row.items() if k not in _EFFORT}
                        for row in report["results"]]
    return found


def test_a_wrong_reads_declaration_gives_exact_figures_by_default() -> None:
    wrong = run(with_peeking(("decision_state",))).report
    honest = run(with_peeking(None)).report
    assert figures(wrong) == figures(honest)
    peeked = next(r for r in wrong["strategy_results"] if r["strategy"] == "peeking")
    # odd and even case ids were told apart (a projected key would give one answer)
    assert 0 < peeked["agreement"] < 1 or peeked["mean_regret"] > 0


def test_a_wrong_reads_declaration_fails_loudly_with_projection_on() -> None:
    with pytest.raises(ProjectionError) as caught:
        run(with_peeking(("decision_state",)), projection=True)
    assert caught.value.receiver == "peeking"
    assert caught.value.fields == ("case_id",)
    assert caught.value.code == "projection-mismatch"
    assert "peeking" in str(caught.value)
    assert "case_id" in str(caught.value)
    again = pickle.loads(pickle.dumps(caught.value))  # noqa: S301 - our own bytes
    assert (again.receiver, again.fields, str(again)) == ("peeking", ("case_id",),
                                                          str(caught.value))


def test_a_right_reads_declaration_runs_with_projection_on() -> None:
    right = run(with_peeking(("decision_state", "case_id")), projection=True).report
    assert figures(right) == figures(run(with_peeking(None)).report)


# ------------------------------------------------------------ the essay's plain loop


def _benchmark() -> Any:
    path = Path(__file__).parents[2] / "benchmarks" / "lab.py"
    spec = importlib.util.spec_from_file_location("lab_benchmark", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["lab_benchmark"] = module
    spec.loader.exec_module(module)
    return module


def test_the_engine_gives_the_plain_loops_figures_on_the_essays_lab() -> None:
    bench = _benchmark()
    cases = list(synthetic_cases(variants=6))
    engine = bench.essay_figures(bench.engine_run(bench.engine_experiment(cases, 6)))
    bench.assert_identical(bench.plain_run(cases), engine)


# ------------------------------------------------------------ generated contracts

_conditions = st.one_of(
    st.sampled_from(list(Grade)).map(lambda g: Is("grade", g)),
    st.just(Is("leak", True)),
    st.integers(0, 500).map(lambda p: Over("pressure", p)),
)
_rules = st.lists(st.tuples(_conditions, st.sampled_from(list(Valve))), min_size=1,
                  max_size=4)


def _unmemoised(self: Any, slot: Any, facts: Any, si: int, memo_key: Any,  # noqa: PLR0917
                sample: int) -> tuple[int, int, int]:
    """``_Chunk._shared_outcome`` without the memo: every decision made afresh."""
    return self._call(slot, facts, si, sample)  # type: ignore[no-any-return]


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.nested_given])
@given(rules=_rules, default=st.sampled_from(list(Valve)))
def test_memoised_figures_equal_unmemoised_on_generated_contracts(
        rules: list[tuple[Any, Valve]], default: Valve) -> None:
    contract = attrs.evolve(TANK, policy=Policy(
        rules=tuple(Rule(f"r{i}", c, a) for i, (c, a) in enumerate(rules)), default=default))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        experiment = tank_experiment()
    experiment = _on(experiment, contract)
    memoised = run(experiment).report
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_chunk._Chunk, "_shared_outcome", _unmemoised)
        plain = run(experiment).report
    assert figures(memoised) == figures(plain)
    assert memoised["provenance"]["memo_hits"] > 0
    assert plain["provenance"]["memo_hits"] == 0


def _on(experiment: Experiment, contract: Any) -> Experiment:
    """``experiment`` with every part that names the tank contract on ``contract``."""
    from handoffs.contracts import ReceiptEncoder, Registry
    from handoffs.examples.payment_lab import FixedClock
    from handoffs.lab import GeneratedCases
    from handoffs.receivers import (
        AdvisoryActionReceiver,
        Gate,
        StrictContractReceiver,
        UnsafeNoProofs,
    )

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gate = Gate(identity="valve-owner", trust=UnsafeNoProofs(),
                    registry=Registry.of(contract), replay=None, clock=FixedClock())
    receipt, action = experiment.strategies
    encoder = attrs.evolve(receipt.encoder, contract=contract) \
        if isinstance(receipt.encoder, ReceiptEncoder) else receipt.encoder
    return attrs.evolve(experiment, contract=contract, cases=GeneratedCases(contract, 30, seed=2),
                        strategies=(
        attrs.evolve(receipt, encoder=encoder, receiver=StrictContractReceiver(gate)),
        attrs.evolve(action, receiver=AdvisoryActionReceiver(contract))))


# ------------------------------------------------------------ measuring messages

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.floats(allow_nan=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                 max_size=3),
    max_leaves=8)
_messages = st.dictionaries(
    st.sampled_from(["contract", "id", "decision_state", "authority", "x", "é", "\U0001f600"]),
    _json_values, max_size=5)


def _measured(measure: Any, message: dict[str, Any]) -> Any:
    try:
        return measure(message)
    except Exception as exc:
        return type(exc), getattr(exc, "code", None)


@given(messages=st.lists(_messages, min_size=1, max_size=4), shared=_json_values)
def test_a_chunks_measure_gives_the_reference_bytes(messages: list[dict[str, Any]],
                                                    shared: Any) -> None:
    from handoffs.lab._plan import Canonical, _measure

    canonical = Canonical()
    for message in [*messages, *({**m, "shared": shared} for m in messages)]:
        assert _measured(canonical.measure, message) == _measured(_measure, message)


_PATCH_MEMBERS = st.sampled_from(["decision_state", "case_id", "evidence_refs", "authority",
                                  "sender", "uncertainty", "x", "é"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(member=_PATCH_MEMBERS, value=st.one_of(st.just("REMOVED"), _json_values),
       index=st.integers(0, 13))
def test_a_patched_message_is_measured_checked_and_keyed_as_a_whole_one(
        member: str, value: Any, index: int) -> None:
    """The patch route (size from the base's, governance validity kept unless a
    governance member changed, a per-member key from the base's) gives what measuring,
    checking and keying the whole message gives, for every receiver of the essay's lab:
    the same sizes and checks, keys that stand for the same projections.
    """
    from handoffs.lab._plan import compile_plan
    from handoffs.lab.perturbations import Perturbation, Variant

    plan = compile_plan(payment_experiment(variants=2, profile="essay"))
    chunk = _chunk._Chunk(plan, [None] * len(plan.strategies))
    chunk.encode(list(synthetic_cases(2))[index:index + 1])
    si = plan.subject
    base = chunk.bases[0][si]
    new = Perturbation.REMOVED if value == "REMOVED" else value
    if new is Perturbation.REMOVED and member not in base.message:
        return
    variant = Variant.patched(base.message, member, new)

    def projection(key: Any) -> Any:
        """What a memo key stands for: an interned projection, the canonical message,
        or (a patched message's key) its base's pairs with one member's replaced.
        """
        if key[0] == "k":
            return next(p for p, i in chunk.shared.interned.items() if i == key[2])
        if key[0] == "c":
            return key
        _, under, name, contribution = key
        pairs = {pair for pair in projection(under) if pair[0] != name}
        return frozenset(pairs if contribution == _chunk._GONE
                         else {*pairs, (name, contribution)})

    def seen(measure: Any) -> Any:  # what a chunk sees of the message, or how it refuses it
        try:
            msg = measure()
            return (msg.size, msg.governance, msg.schema,
                    [projection(chunk._key(slot, msg))
                     for slot in (*chunk.slots, chunk.semantic)])
        except Exception as exc:
            return type(exc), getattr(exc, "code", None)

    assert seen(lambda: chunk._patched(variant, base, si)) == \
        seen(lambda: chunk._measured(dict(variant.message), si))
    # the checks kept by memo key (_Chunk._checked) are the checks of the message itself
    try:
        msg = chunk._patched(variant, base, si)
    except Exception:
        return
    assert (msg.governance, msg.schema) == (chunk.checks.governance_valid(variant.message),
                                            chunk.checks.schema_valid(variant.message))


_ODD = st.one_of(st.text(max_size=6), st.integers(-3, 3), st.none(), st.booleans())


def _mostly(valid: st.SearchStrategy[Any], invalid: st.SearchStrategy[Any]
            ) -> st.SearchStrategy[Any]:
    """Valid values three times in four."""
    return st.integers(0, 3).flatmap(lambda i: invalid if i == 0 else valid)


_VALID_REF = st.sampled_from(["evidence://a/1", "evidence://b", "x:y"])
_IDS = _mostly(st.sampled_from(["urn:uuid:" + "0" * 36, "urn:uuid:" + "a-" * 18]),
               st.one_of(st.sampled_from(["urn:uuid:" + "0" * 35, "urn:uuid:" + "G" * 36]),
                         _ODD))
_CASE_IDS = _mostly(st.sampled_from(["case-1", "routine-02", "a" * 128]),
                    st.one_of(st.sampled_from(["a" * 129, "-x", "a b"]), _ODD))
_REF = _mostly(_VALID_REF, st.one_of(
    st.sampled_from(["Evidence://a", "e:a b"]),
    st.fixed_dictionaries({"uri": st.sampled_from(["evidence://a", "a"]),
                           "digest": st.sampled_from(["sha256:" + "a" * 64, "sha256:a"])}),
    _ODD))
_REFS = _mostly(st.lists(_REF, min_size=1, max_size=3), st.one_of(st.just([]), _ODD))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=st.tuples(_IDS, _CASE_IDS, _REFS), second=st.tuples(_IDS, _CASE_IDS, _REFS),
       index=st.integers(0, 13))
def test_receipts_with_equal_gate_keys_get_equal_checks(
        first: tuple[Any, Any, Any], second: tuple[Any, Any, Any], index: int) -> None:
    """The chunk checks a receipt once per memo key of a gate of its contract
    (``_Chunk._checked``): two receipts whose gate keys are equal (they differ in ``id``,
    ``case_id`` or ``evidence_refs`` only as the key allows) get the same checks.
    """
    from handoffs.lab._plan import compile_plan

    plan = compile_plan(payment_experiment(variants=2, profile="essay"))
    chunk = _chunk._Chunk(plan, [None] * len(plan.strategies))
    chunk.encode(list(synthetic_cases(2))[index:index + 1])
    si = plan.subject
    slot = chunk.checked_by[si]
    assert slot is not None
    gate = slot.receiver.gate
    messages = [{**chunk.bases[0][si].message, "id": i, "case_id": c, "evidence_refs": r}
                for i, c, r in (first, second)]
    keys = [gate.memo_key(m) for m in messages]
    checks = [(chunk.checks.governance_valid(m), chunk.checks.schema_valid(m))
              for m in messages]
    event(f"equal keys: {keys[0] == keys[1]}, checks {checks[0]}")
    if keys[0] == keys[1]:
        assert checks[0] == checks[1]
