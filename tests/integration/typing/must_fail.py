"""Lines a type checker must refuse: each ends in ``# E: <the error code mypy reports>``.

Never imported or run (it is not a test module): ``test_public_generics.py`` runs
``mypy --strict`` on it and compares the errors, line by line, with these marks.
"""

from __future__ import annotations

import enum
from typing import Any

from hypothesis import strategies as st
from test_public_generics import CLAIM, LOSS, ROUTING, Claim, Dossier, Route

from handoffs.contracts import (
    Contract,
    DecisionContent,
    Encoder,
    LossMatrix,
    Receipt,
    ReceiptEncoder,
    Sender,
)
from handoffs.contracts.policy import Field, Policy, Rule
from handoffs.testing import states


class Colour(enum.Enum):
    RED = "RED"


class Other:
    """A state class of no contract here."""


def contracts(sender: Sender[Claim, Route], receipt: Receipt[Claim, Route]) -> None:
    _action: str = ROUTING.decide(CLAIM)  # E: assignment
    ROUTING.decide(Other())  # E: arg-type
    _sure: Route = ROUTING.evaluate(CLAIM).action  # E: assignment
    ROUTING.hard_violations(Colour.RED, Route.PAY)  # E: arg-type
    _wrong: Contract[Other, Route] = ROUTING  # E: assignment
    colours = DecisionContent(proposed_action=Colour.RED, decision_state=CLAIM)
    sender.receipt(colours, case_id="c", evidence_refs=["ev://1"])  # E: arg-type
    _state: Other = receipt.decision_state  # E: assignment


def policies() -> None:
    _held: Policy[Route] = Policy(rules=(), default=Colour.RED)  # E: arg-type
    Rule[int]  # E: type-var
    _rule: Rule[Route] = Rule("r", Field("amount") > 1, Colour.RED)  # E: arg-type
    LOSS(Route.PAY, Colour.RED)  # E: arg-type
    LossMatrix[str]  # E: type-var
    _loss: LossMatrix[Colour] = LOSS.with_entries({})  # E: assignment


def not_a_claim(dossier: Dossier) -> str:
    return "no claim"


class ReadsNumbers:
    name = "numbers"

    def encode(self, evidence: int) -> dict[str, Any]:
        return {"n": evidence}


def encoders() -> None:
    ReceiptEncoder[Dossier, Claim, Route](contract=ROUTING, state_of=not_a_claim)  # E: arg-type
    _reads: Encoder[Dossier] = ReadsNumbers()  # E: assignment
    _strategy: st.SearchStrategy[Other] = states(ROUTING)  # E: arg-type
