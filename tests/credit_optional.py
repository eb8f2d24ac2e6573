"""The credit-limit contract with an optional decision field (issue 33, item 5).

As :mod:`credit_limit` (its actions, statuses, rules, loss and constraint, taken
from there), but "never delinquent" is no sentinel: the months since the last
delinquency are ``int | None``, ``None`` meaning the applicant was never
delinquent (known not to apply), and the rule "delinquency < 12 months -> REFER" is
false on it. The employment status is optional too (``None``: not disclosed because
it does not apply, a student), with a rule that refers an absent status. Shared by
the optional-field tests; not part of the library.
"""

from __future__ import annotations

from typing import Final

import attrs

from credit_limit import CREDIT_LIMIT, CreditAction, Employment
from handoffs.contracts import Contract, decision_field
from handoffs.contracts.policy import Absent, Policy, Rule, Under

__all__ = ["CREDIT_OPTIONAL", "CreditAction", "CreditState", "Employment"]


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


# credit-limit's rules, with "no-status" after "unemployed" (the fifth)
_RULES = CREDIT_LIMIT.policy.rules
CREDIT_OPTIONAL: Final = Contract(
    name="credit-optional",
    version="1.0.0",
    description="A credit-limit decision with optional decision fields.",
    actions=CreditAction,
    state=CreditState,
    policy=Policy(
        rules=(*_RULES[:5],
               Rule("no-status", Absent("employment_status") & Under("credit_score", 700),
                    CreditAction.REFER_TO_HUMAN),
               *_RULES[5:]),
        default=CreditAction.APPROVE,
        default_name="approve",
    ),
    loss=CREDIT_LIMIT.loss,
    fail_closed_action=CreditAction.REFER_TO_HUMAN,
    counterfactual_trigger=CREDIT_LIMIT.counterfactual_trigger,
    hard_constraints=CREDIT_LIMIT.hard_constraints,
)
