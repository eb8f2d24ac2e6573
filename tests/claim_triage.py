"""A four-action claim-triage contract shaped like issue 18's (the tests' example).

PAY / PARTIAL_PAY / INVESTIGATE / DENY. A claim is investigated when
``fraud_probability * claim_amount > 500`` (the expected fraud loss in EUR), where
the probability is a certified interval; it is denied when the policy has lapsed or
the coverage excludes the loss; partially paid under a partial coverage or above the
limit. Shared by the analysis and lab tests; not part of the library.
"""

from __future__ import annotations

import enum
from typing import Final

import attrs

from handoffs.contracts import (
    Contract,
    Field,
    HardConstraint,
    Interval,
    Is,
    LossMatrix,
    Over,
    Policy,
    Rule,
    decision_field,
)

__all__ = ["CLAIM_TRIAGE", "WITH_DEAD_RULE", "ClaimAction", "ClaimState", "Coverage",
           "claim_triage"]


class ClaimAction(enum.Enum):
    """What the claims handler does."""

    PAY = "PAY"
    PARTIAL_PAY = "PARTIAL_PAY"
    INVESTIGATE = "INVESTIGATE"
    DENY = "DENY"


class Coverage(enum.Enum):
    """How the policy covers the loss."""

    FULL = "FULL"
    PARTIAL = "PARTIAL"
    EXCLUDED = "EXCLUDED"


@attrs.frozen
class ClaimState:
    """The decisive facts of an insurance claim."""

    fraud_probability: Interval = decision_field(
        "Certified probability that the claim is fraudulent.", minimum=0.0, maximum=1.0)
    claim_amount: float = decision_field(
        "Amount claimed, in EUR.", minimum=0.0, maximum=100_000.0)
    coverage: Coverage = decision_field("How the policy covers the loss.")
    policy_active: bool = decision_field("The insurance policy is in force.")


def claim_triage(*, investigate_over: float = 500.0, partial_over: float = 10_000.0,
                 version: str = "1.0.0",
                 dead_rule: bool = False) -> Contract[ClaimState, ClaimAction]:
    """The contract, with its two thresholds adjustable (for version comparisons), and
    with ``dead_rule`` a rule that the partial-coverage rule shadows.
    """
    dead = (Rule("small-partial", Is("coverage", Coverage.PARTIAL) & ~Over("claim_amount", 100),
                 ClaimAction.PAY),) if dead_rule else ()
    loss = {(c, r): 0.0 if c is r else 1.0 for c in ClaimAction for r in ClaimAction}
    loss.update({(ClaimAction.PAY, ClaimAction.INVESTIGATE): 20.0,
                 (ClaimAction.PAY, ClaimAction.DENY): 50.0,
                 (ClaimAction.PARTIAL_PAY, ClaimAction.DENY): 30.0,
                 (ClaimAction.DENY, ClaimAction.PAY): 10.0})
    return Contract(
        name="claim-triage",
        version=version,
        description="Triage of an insurance claim.",
        actions=ClaimAction,
        state=ClaimState,
        policy=Policy(
            rules=(
                Rule("lapsed", ~Is("policy_active", True), ClaimAction.DENY),
                Rule("excluded", Is("coverage", Coverage.EXCLUDED), ClaimAction.DENY),
                Rule("likely-fraud",
                     Field("fraud_probability") * Field("claim_amount") > investigate_over,
                     ClaimAction.INVESTIGATE),
                Rule("partial-coverage", Is("coverage", Coverage.PARTIAL),
                     ClaimAction.PARTIAL_PAY),
                *dead,
                Rule("over-limit", Over("claim_amount", partial_over), ClaimAction.PARTIAL_PAY),
            ),
            default=ClaimAction.PAY,
            default_name="pay",
        ),
        loss=LossMatrix(loss),
        fail_closed_action=ClaimAction.INVESTIGATE,
        counterfactual_trigger="a change in fraud probability, amount, coverage or status",
        hard_constraints=(
            HardConstraint("no-pay-when-fraud-likely", chosen=ClaimAction.PAY,
                           allowed_references=frozenset({ClaimAction.PAY}),
                           when=Field("fraud_probability") * Field("claim_amount") > 500.0),
        ),
    )


CLAIM_TRIAGE: Final = claim_triage()
WITH_DEAD_RULE: Final = claim_triage(dead_rule=True, version="0.9.0")
