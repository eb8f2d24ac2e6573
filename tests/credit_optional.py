"""The credit-limit contract with an optional decision field (issue 33, item 5).

As :mod:`tests.credit_limit`, but "never delinquent" is no sentinel: the months since
the last delinquency are ``int | None``, ``None`` meaning the applicant was never
delinquent (known not to apply), and the rule "delinquency < 12 months -> REFER" is
false on it. The employment status is optional too (``None``: not disclosed because
it does not apply, a student), with a rule that refers an absent status. Shared by
the optional-field tests; not part of the library.
"""

from __future__ import annotations

import enum
from typing import Final

import attrs

from handoffs.contracts import Contract, HardConstraint, LossMatrix, decision_field
from handoffs.contracts.policy import Absent, Field, Is, Policy, Rule, Under

__all__ = ["CREDIT_OPTIONAL", "CreditAction", "CreditState", "Employment"]


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
    months_since_delinquency: int | None = decision_field(
        "Months since the last delinquency.", minimum=0, maximum=600, if_missing=None)
    employment_status: Employment | None = decision_field("Employment status.")


_LOSS = {(c, r): 0.0 if c is r else 5.0 for c in CreditAction for r in CreditAction}
_LOSS.update({(CreditAction.APPROVE, CreditAction.REFER_TO_HUMAN): 40.0,
              (CreditAction.APPROVE, CreditAction.DECLINE): 100.0,
              (CreditAction.DECLINE, CreditAction.APPROVE): 10.0})
_RATIO = Field("monthly_debt") / Field("monthly_income")

CREDIT_OPTIONAL: Final = Contract(
    name="credit-optional",
    version="1.0.0",
    description="A credit-limit decision with optional decision fields.",
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
            Rule("no-status", Absent("employment_status") & Under("credit_score", 700),
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
