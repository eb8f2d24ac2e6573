"""The newcomer's pump (issue 8): three actions decided by p·h, where p is a certified
interval and h a number, plus a calibration flag.

Two spellings of the same policy: the arithmetic expression ``Field(p) * Field(h) > 2``
and an opaque :class:`Predicate` that returns ``None`` when the interval straddles.
Shared by the policy-language tests (contract, gate and lab).
"""

from __future__ import annotations

import enum
import warnings
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Final

import attrs

from handoffs.contracts import (
    Contract,
    GovernanceService,
    HardConstraint,
    Interval,
    LossMatrix,
    Receipt,
    ReceiptEncoder,
    Registry,
    decision_field,
)
from handoffs.contracts.policy import Condition, Field, Is, Policy, Predicate, Rule
from handoffs.receivers import (
    Gate,
    StrictContractReceiver,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
)

NOW: Final = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


class Act(enum.Enum):
    CONTINUE = "CONTINUE"
    REDUCE_LOAD = "REDUCE_LOAD"
    STOP = "STOP"


@attrs.frozen
class PumpState:
    failure_probability: Interval = decision_field(
        "Certified probability that the pump fails in the next window.", minimum=0, maximum=1)
    consequence: float = decision_field("What a failure costs.", minimum=0, maximum=100)
    calibrated: bool = decision_field("The estimator's calibration record is current.")


RISK: Final = Field("failure_probability") * Field("consequence")


def expression(t: float) -> Condition:
    """``p * h > t`` declaratively."""
    return t < RISK


def predicate(t: float) -> Condition:
    """``p * h > t`` as an opaque predicate that says ``None`` when it cannot tell."""

    def test(view: Mapping[str, Any]) -> bool | None:
        p, h = view["failure_probability"], view["consequence"]
        if p.lo * h > t:
            return True
        if p.hi * h <= t:
            return False
        return None

    return Predicate(test, fields={"failure_probability", "consequence"},
                     description=f"failure_probability * consequence > {t:g}")


def contract(risk_over: Callable[[float], Condition] = expression, *,
             version: str = "1.0.0") -> Contract[PumpState, Act]:
    c, r, s = Act.CONTINUE, Act.REDUCE_LOAD, Act.STOP
    loss = {(a, a): 0.0 for a in Act}
    loss.update({(r, c): 1, (s, c): 2, (c, r): 5, (s, r): 1, (c, s): 20, (r, s): 10})
    return Contract(
        name="pump-maintenance",
        version=version,
        description="A reliability analyst hands p and h to the loop controller.",
        actions=Act,
        state=PumpState,
        policy=Policy(rules=(
            Rule("uncalibrated", Is("calibrated", False), s),
            Rule("stop", risk_over(2), s),
            Rule("reduce-load", risk_over(1), r),
        ), default=c, default_name="continue"),
        loss=LossMatrix(loss),
        hard_constraints=(
            HardConstraint("unsafe-continue", chosen=c, allowed_references={c}),
            HardConstraint("no-continue-when-likely", chosen=c,
                           when=Field("failure_probability") > 0.3,
                           description="Never CONTINUE when p > 0.3."),
        ),
        fail_closed_action=s,
        counterfactual_trigger="Recompute if p, h or the calibration changes.",
    )


EXPRESSION: Final = contract(expression)
PREDICATE: Final = contract(predicate)

STRADDLING: Final = PumpState(Interval(0.0, 0.08), 60.0, True)
"""p ∈ [0, 0.08], h = 60: p·h ∈ [0, 4.8] straddles 2 (and 1)."""


@attrs.frozen
class Case:
    case_id: str
    state: PumpState

    @property
    def evidence_refs(self) -> tuple[str, ...]:
        return (f"evidence://pump/{self.case_id}",)


def cases() -> Iterator[Case]:
    """Thirty calibrated estimates: p centred on 0.005 … 0.095 (width 0.01), h ∈ {10, 30, 60}."""
    n = 0
    for h in (10.0, 30.0, 60.0):
        for k in range(10):
            centre = 0.005 + 0.01 * k
            lo, hi = round(centre - 0.005, 6), round(centre + 0.005, 6)
            n += 1
            yield Case(f"case-{n:02d}", PumpState(Interval(lo, hi), h, True))


GOVERNANCE: Final = GovernanceService(
    sender="reliability-analyst", receiver="loop-controller", policy_version="MAINT-2",
    valid_until=datetime(2027, 1, 1, tzinfo=UTC),
)


def clock() -> datetime:
    return NOW


def state_of(case: Case) -> PumpState:
    return case.state


def controller(c: Contract[Any, Any]) -> StrictContractReceiver:
    """The loop controller. **Unsafe by declaration:** the synthetic receipts carry no
    proofs (the step under test is (5) policy), so its gate uses UnsafeNoProofs.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeConfigurationWarning)
        gate = Gate(identity="loop-controller", trust=UnsafeNoProofs(),
                    registry=Registry.of(c), replay=None, clock=clock)
    return StrictContractReceiver(gate)


def encoder(c: Contract[Any, Any]) -> ReceiptEncoder[Case, PumpState, Act]:
    return ReceiptEncoder(contract=c, state_of=state_of, name="receipt")


def receipt_json(c: Contract[Any, Any], state: PumpState, case_id: str = "case-x") -> str:
    case = Case(case_id, state)
    content = encoder(c).encode(case)
    return Receipt.build(c, content, GOVERNANCE.stamp(
        case_id=case_id, evidence_refs=case.evidence_refs)).to_json()
