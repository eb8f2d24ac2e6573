"""A credit-limit contract shaped like issue 33's (the proofs tests' example).

APPROVE / DECLINE / REFER_TO_HUMAN, rules in order: bankruptcy → DECLINE, score < 580
→ DECLINE, debt / income > 0.43 → DECLINE, delinquency < 12 months → REFER,
UNEMPLOYED → REFER, debt / income > 0.36 → REFER, score < 680 → REFER, else APPROVE.
An enum value with a rule a later rule does not shadow everywhere (UNEMPLOYED), a
ratio rule, and an override flag (bankruptcy, with a hard constraint). Shared by the
proofs tests; not part of the library.
"""

from __future__ import annotations

import enum
from typing import Final

import attrs

from handoffs.contracts import Contract, HardConstraint, LossMatrix, decision_field
from handoffs.contracts.policy import Field, Is, Policy, Rule, Under

__all__ = ["CREDIT_LIMIT", "CreditAction", "CreditState", "Employment"]


class CreditAction(enum.Enum):
    """What the credit desk does."""

    APPROVE = "APPROVE"
    DECLINE = "DECLINE"
    REFER_TO_HUMAN = "REFER_TO_HUMAN"


class Employment(enum.Enum):
    """The applicant's employment status."""

    EMPLOYED = "EMPLOYED"
    SELF_EMPLOYED = "SELF_EMPLOYED"
    UNEMPLOYED = "UNEMPLOYED"
    RETIRED = "RETIRED"


@attrs.frozen
class CreditState:
    """The decisive facts of a credit-limit application."""

    bankruptcy: bool = decision_field("A bankruptcy is on file.", if_missing=False)
    credit_score: int = decision_field("Credit score.", minimum=300, maximum=850)
    monthly_debt: float = decision_field("Monthly debt payments, EUR.", minimum=0.0,
                                         maximum=20_000.0)
    monthly_income: float = decision_field("Monthly income, EUR.", minimum=100.0,
                                           maximum=50_000.0)
    months_since_delinquency: int = decision_field(
        "Months since the last delinquency (600: never).", minimum=0, maximum=600)
    employment_status: Employment = decision_field("Employment status.")


_LOSS = {(c, r): 0.0 if c is r else 5.0 for c in CreditAction for r in CreditAction}
_LOSS.update({(CreditAction.APPROVE, CreditAction.REFER_TO_HUMAN): 40.0,
              (CreditAction.APPROVE, CreditAction.DECLINE): 100.0,
              (CreditAction.DECLINE, CreditAction.APPROVE): 10.0})
_RATIO = Field("monthly_debt") / Field("monthly_income")

CREDIT_LIMIT: Final = Contract(
    name="credit-limit",
    version="1.0.0",
    description="A credit-limit decision.",
    actions=CreditAction,
    state=CreditState,
    policy=Policy(
        rules=(
            Rule("bankruptcy", Is("bankruptcy", True), CreditAction.DECLINE),
            Rule("low-score", Under("credit_score", 580), CreditAction.DECLINE),
            Rule("over-indebted", _RATIO > 0.43, CreditAction.DECLINE),
            Rule("recent-delinquency", Under("months_since_delinquency", 12),
                 CreditAction.REFER_TO_HUMAN),
            Rule("unemployed", Is("employment_status", Employment.UNEMPLOYED),
                 CreditAction.REFER_TO_HUMAN),
            Rule("high-ratio", _RATIO > 0.36, CreditAction.REFER_TO_HUMAN),
            Rule("fair-score", Under("credit_score", 680), CreditAction.REFER_TO_HUMAN),
        ),
        default=CreditAction.APPROVE,
        default_name="approve",
    ),
    loss=LossMatrix(_LOSS),
    fail_closed_action=CreditAction.REFER_TO_HUMAN,
    counterfactual_trigger="a change in score, ratio, delinquency, employment or bankruptcy",
    hard_constraints=(
        HardConstraint("no-approval-on-bankruptcy", chosen=CreditAction.APPROVE,
                       allowed_references=frozenset({CreditAction.APPROVE}),
                       when=Is("bankruptcy", True)),
    ),
)
