"""The one admission pipeline: the receivers that admit messages share its engine and
its refusal type, and the engine turns whatever a stage raises into a typed,
fail-closed decision.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from handoffs.receivers import Decision, Reason, Step, Verdict, _carried, _gate
from handoffs.receivers._carried import carried_receipt
from handoffs.receivers._pipeline import Pipeline, Refusal, Run, Stage
from handoffs.receivers.chains import _receiver as _chain_receiver
from worlds.carried import STABLE, carrier, chain
from worlds.chains import STANDARD, make_chain
from worlds.chains import receiver as identity_receiver
from worlds.gate import WORLD, raw, strict

# Each receiver: its module (holding its _PIPELINE), a way to decide one good message,
# its fail-closed action, and the code of a decision on an unexpected exception.
RECEIVERS: dict[str, tuple[Any, Callable[[], Decision], str, str]] = {
    "gate": (_gate, lambda: strict(WORLD.gate()).receive(raw(WORLD.signed())),
             "ESCALATE", "internal-error"),
    "carried": (_carried, lambda: carrier().receive(
        carried_receipt(STABLE, chain((STABLE, STABLE)))), "STOP", "receiver-error"),
    "identity": (_chain_receiver, lambda: identity_receiver(fail_closed_action="HOLD").receive(
        make_chain(STANDARD).to_bytes()), "HOLD", "receiver-error"),
}


def _replace_stage(monkeypatch: pytest.MonkeyPatch, module: Any, index: int,
                   check: Callable[[Any, Any], None]) -> Stage[Any, Any]:
    pipeline: Pipeline[Any, Any] = module._PIPELINE
    stages = list(pipeline.stages)
    replaced = stages[index]
    stages[index] = attrs.evolve(replaced, check=check)
    monkeypatch.setattr(module, "_PIPELINE", attrs.evolve(pipeline, stages=tuple(stages)))
    return replaced


@pytest.mark.parametrize("name", sorted(RECEIVERS))
def test_every_receiver_accepts_through_its_pipeline(name: str) -> None:
    _, decide, _, _ = RECEIVERS[name]
    assert decide().verdict is Verdict.ACCEPT


@pytest.mark.parametrize("name", sorted(RECEIVERS))
def test_an_unexpected_exception_in_any_stage_is_a_typed_fail_closed_reject(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, decide, fail_closed, crash = RECEIVERS[name]
    for index in range(len(module._PIPELINE.stages)):
        def boom(owner: Any, run: Any, _: Any = None) -> None:
            raise ZeroDivisionError("division by zero")

        with monkeypatch.context() as patch:
            _replace_stage(patch, module, index, boom)
            decision = decide()
        assert (decision.verdict, decision.action) == (Verdict.REJECT, fail_closed), index
        assert [(r.code, r.message) for r in decision.reasons] == [
            (crash, "unexpected ZeroDivisionError: division by zero")]
        # The gate reports the stage that failed; the chain receivers, step (1).
        stage = module._PIPELINE.stages[index]
        assert decision.step is (stage.step if name == "gate" else Step.PARSE)


@pytest.mark.parametrize("name", sorted(RECEIVERS))
def test_a_refusal_from_any_receivers_stage_is_its_decision(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, decide, fail_closed, _ = RECEIVERS[name]
    reason = Reason("policy-not-current", "refer it", Step.CONTEXT, "$.policy_version")

    def refer(owner: Any, run: Any, _: Any = None) -> None:
        raise Refusal(Verdict.ESCALATE, [reason], record={"why": "test"})

    last = len(module._PIPELINE.stages) - 1
    stage = _replace_stage(monkeypatch, module, last, refer)
    decision = decide()
    assert (decision.verdict, decision.action, decision.reasons) == (
        Verdict.ESCALATE, fail_closed, (reason,))
    assert (decision.step, decision.record["why"]) == (stage.step, "test")


@pytest.mark.parametrize("name", sorted(RECEIVERS))
def test_stages_are_plain_functions_bound_to_their_steps(name: str) -> None:
    # A bound method would be allocated for every decision on the accept path.
    stages = RECEIVERS[name][0]._PIPELINE.stages
    assert all(inspect.isfunction(stage.check) for stage in stages)
    steps = [stage.step for stage in stages]
    assert (Step.PARSE in steps, steps[-1]) == (True, Step.POLICY)


def _settles(owner: Any, run: Run, _: Any = None) -> None:
    run.settle(Verdict.ACCEPT, "GO")


def test_a_pipeline_whose_stages_settle_nothing_fails_closed() -> None:
    def passes(owner: Any, run: Run, _: Any = None) -> None:
        return None

    run = Run("r", "STOP")
    decision = Pipeline((Stage(Step.PARSE, "parse", passes),), crash="internal-error").run(
        None, run)
    assert (decision.verdict, decision.action, [r.code for r in decision.reasons]) == (
        Verdict.REJECT, "STOP", ["internal-error"])


def test_a_refusal_names_the_sender_only_after_step_2() -> None:
    def proofs(owner: Any, run: Run, _: Any = None) -> None:
        run.sender, run.authority, run.trigger = "s", "ADVISE", "t"

    def refuse(owner: Any, run: Run, _: Any = None) -> None:
        raise Refusal(Verdict.REJECT, [Reason("replayed", "seen", Step.PROOFS)])

    seen = []
    for late in (Step.PROOFS, Step.CONTEXT):
        pipeline = Pipeline((Stage(Step.PROOFS, "proofs", proofs),
                             Stage(late, "later", refuse)), crash="internal-error")
        decision = pipeline.run(None, Run("r", "STOP"))
        seen.append((decision.sender, decision.authority, decision.counterfactual_trigger))
    assert seen == [(None, None, None), ("s", "ADVISE", "t")]
    accepted = Pipeline((Stage(Step.PROOFS, "proofs", proofs),
                         Stage(Step.POLICY, "policy", _settles)), crash="x").run(
        None, Run("r", "STOP"))
    assert (accepted.verdict, accepted.action, accepted.sender) == (Verdict.ACCEPT, "GO", "s")


def test_a_refusal_gives_a_reason() -> None:
    with pytest.raises(ValueError, match="at least one reason"):
        Refusal(Verdict.REJECT, [])
