"""The credit-limit contract's lab experiment (strict receiver, generated cases) and the
enum merges and roundings that do and do not change its decisions. Test modules import
it from here rather than from one another.
"""

from __future__ import annotations

import warnings
from datetime import UTC, datetime
from typing import Any

from credit_limit import CREDIT_LIMIT
from handoffs.contracts import GovernanceService, ReceiptEncoder, Registry
from handoffs.lab import Experiment, GeneratedCases, Population, Strategy, Tolerances
from handoffs.receivers import (
    Gate,
    StrictContractReceiver,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
)
from worlds import TEST_DRAWS

__all__ = [
    "HARMFUL",
    "HARMLESS",
    "ROUNDINGS",
    "credit_experiment",
    "governance_for",
    "state_of",
    "strict_receiver",
]


HARMFUL = ("merge-enum-values:decision_state.employment_status:UNEMPLOYED->EMPLOYED",
           "merge-enum-values:decision_state.employment_status:RETIRED->UNEMPLOYED")
HARMLESS = "merge-enum-values:decision_state.employment_status:SELF_EMPLOYED->EMPLOYED"
ROUNDINGS = ("round-numeric:credit_score:55", "round-numeric:monthly_debt:2000",
             "round-numeric:monthly_income:4990", "round-numeric:months_since_delinquency:60")


def strict_receiver(contract: Any, identity: str) -> StrictContractReceiver:
    """A strict receiver. **Unsafe by declaration:** lab receipts carry no proofs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeConfigurationWarning)
        gate = Gate(identity=identity, trust=UnsafeNoProofs(), registry=Registry.of(contract),
                    replay=None, clock=lambda: datetime(2026, 6, 1, tzinfo=UTC))
    return StrictContractReceiver(gate)


def governance_for(receiver: str) -> GovernanceService:
    return GovernanceService(sender="intake", receiver=receiver, policy_version="V-1",
                             valid_until=datetime(2027, 1, 1, tzinfo=UTC))


def state_of(case: Any) -> Any:
    return case.state


def credit_experiment(seed: int, perturbations: Any, *, gate: tuple[str, ...] = (),
                      receiver: Any = None, draws: int = TEST_DRAWS,
                      **tolerances: Any) -> Experiment:
    return Experiment(
        name="credit", contract=CREDIT_LIMIT,
        cases=GeneratedCases(CREDIT_LIMIT, 60, seed=seed),
        population=Population(draws=draws, seed=seed),
        strategies=(Strategy(name="receipt",
                             receiver=receiver or strict_receiver(CREDIT_LIMIT, "desk"),
                             encoder=ReceiptEncoder(contract=CREDIT_LIMIT, state_of=state_of,
                                                    name="receipt"),
                             receipts=True, gated=True),),
        governance=governance_for("desk"), perturbations=tuple(perturbations),
        tolerances=Tolerances(controls_must_fail=False, gate_perturbations=("none", *gate),
                              **tolerances))
