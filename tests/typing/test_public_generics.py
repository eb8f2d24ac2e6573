"""The public generics keep their type parameters: what a type checker infers from them.

Each ``assert_type`` is checked by mypy (``mypy --strict`` on this file, in
:func:`test_mypy_accepts_the_public_generics` and in CI's mypy step) and is a no-op at
run time, where the same lines run as ordinary tests. The lines a type checker must
refuse are in ``must_fail.py`` beside this file, each marked with the error code mypy
has to report on it (:func:`test_mypy_refuses_what_the_generics_forbid`).
"""

from __future__ import annotations

import enum
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, assert_type

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from handoffs.contracts import (
    Contract,
    DecisionContent,
    Encoder,
    GovernanceService,
    HardConstraint,
    LossMatrix,
    Receipt,
    ReceiptEncoder,
    Sender,
    Uncertainty,
    decision_field,
)
from handoffs.contracts._rules import Outcome  # reached through evaluate(), not on a face
from handoffs.contracts.policy import Field, Is, Policy, Rule
from handoffs.integrity import SigningKey
from handoffs.testing import falsehoods, receipts, states

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


class Route(enum.Enum):
    PAY = "PAY"
    HOLD = "HOLD"


@attrs.frozen
class Claim:
    amount: float = decision_field("amount", minimum=0, maximum=1000)
    flagged: bool = decision_field("flagged")


@attrs.frozen
class Dossier:
    """The sender's evidence, from which an encoder reads the decision state."""

    claim: Claim


RULES = (Rule("flagged", Is("flagged", True), Route.HOLD),
         Rule("large", Field("amount") > 500, Route.HOLD))
LOSS = LossMatrix({(Route.PAY, Route.PAY): 0.0, (Route.PAY, Route.HOLD): 10.0,
                   (Route.HOLD, Route.PAY): 1.0, (Route.HOLD, Route.HOLD): 0.0})
ROUTING = Contract(name="claim-routing", version="1.0.0", description="pay or hold a claim",
                   actions=Route, state=Claim, policy=Policy(rules=RULES, default=Route.PAY),
                   loss=LOSS, fail_closed_action=Route.HOLD,
                   counterfactual_trigger="a new flag or amount",
                   hard_constraints=(HardConstraint("no-pay-on-hold", chosen=Route.PAY,
                                                    allowed_references={Route.PAY}),))
CLAIM = Claim(amount=800.0, flagged=False)


def test_a_contract_carries_its_state_and_actions() -> None:
    assert_type(ROUTING, Contract[Claim, Route])
    assert_type(ROUTING.policy, Policy[Route])
    assert_type(ROUTING.loss, LossMatrix[Route])
    assert_type(ROUTING.hard_constraints, tuple[HardConstraint[Route], ...])
    assert_type(ROUTING.actions, type[Route])
    assert_type(ROUTING.state, type[Claim])
    assert_type(ROUTING.fail_closed_action, Route)
    assert assert_type(ROUTING.decide(CLAIM), Route) is Route.HOLD
    outcome = assert_type(ROUTING.evaluate({"flagged": True}), Outcome[Route])
    assert assert_type(outcome.action, Route | None) is Route.HOLD
    assert ROUTING.hard_violations(Route.PAY, Route.HOLD, truth=CLAIM) == ("no-pay-on-hold",)


def test_a_policy_and_its_rules_answer_in_their_action_type() -> None:
    assert_type(RULES, tuple[Rule[Route], Rule[Route]])
    assert_type(RULES[0].action, Route)
    outcome = assert_type(ROUTING.policy.evaluate({"flagged": False}), Outcome[Route])
    assert (outcome.action, outcome.determined) == (None, False)  # amount is missing


def test_a_loss_matrix_is_keyed_by_its_actions() -> None:
    assert assert_type(LOSS(Route.PAY, Route.HOLD), float) == 10.0
    cheaper = assert_type(LOSS.with_entries({(Route.PAY, Route.HOLD): 5.0}), LossMatrix[Route])
    assert cheaper(Route.PAY, Route.HOLD) == 5.0


def test_a_sender_signs_receipts_of_its_contract() -> None:
    sender = Sender(contract=ROUTING, key=SigningKey.generate(), grants=None,
                    governance=GovernanceService(sender="triage", receiver="payments",
                                                 policy_version="P-1",
                                                 valid_for=timedelta(hours=1)))
    assert_type(sender, Sender[Claim, Route])
    content = DecisionContent(proposed_action=Route.HOLD, decision_state=CLAIM)
    assert_type(content, DecisionContent[Claim, Route])
    receipt = assert_type(sender.receipt(content, case_id="claim-1", evidence_refs=["ev://1"]),
                          Receipt[Claim, Route])
    assert assert_type(receipt.proposed_action, Route) is Route.HOLD
    assert assert_type(receipt.decision_state, Claim) == CLAIM
    assert isinstance(assert_type(sender.sign(content, case_id="claim-1",
                                              evidence_refs=["ev://1"]), bytes), bytes)
    unsigned = Receipt.build(ROUTING, content, receipt.governance)
    assert assert_type(unsigned, Receipt[Claim, Route]).proof is None


def test_an_encoder_reads_its_evidence_type() -> None:
    encoder = ReceiptEncoder[Dossier, Claim, Route](contract=ROUTING,
                                                    state_of=lambda dossier: dossier.claim)
    assert_type(encoder.contract, Contract[Claim, Route])
    as_protocol: Encoder[Dossier] = encoder
    content = assert_type(as_protocol.encode(Dossier(CLAIM)), dict[str, Any])
    assert content["proposed_action"] == "HOLD"
    assert content["uncertainty"] == Uncertainty.RESOLVED.value
    # Encoder is contravariant in its evidence: one that reads any object reads a Dossier.
    anything = _Named()
    reads_dossiers: Encoder[Dossier] = anything
    assert reads_dossiers.encode(Dossier(CLAIM)) == {"evidence": "Dossier"}


@attrs.frozen
class _Named:
    name: str = "named"

    def encode(self, evidence: object) -> dict[str, Any]:
        return {"evidence": type(evidence).__name__}


@settings(max_examples=10, deadline=None)
@given(st.data())
def test_the_strategies_draw_the_contracts_types(data: st.DataObject) -> None:
    state = data.draw(assert_type(states(ROUTING), st.SearchStrategy[Claim]))
    assert isinstance(assert_type(state, Claim), Claim)
    receipt = data.draw(assert_type(receipts(ROUTING), st.SearchStrategy[Receipt[Claim, Route]]))
    assert receipt.proposed_action is ROUTING.decide(receipt.decision_state)
    false = data.draw(assert_type(falsehoods(ROUTING, CLAIM), st.SearchStrategy[Claim]))
    assert false != CLAIM


# ------------------------------------------------------------------- the type checker

# The lines of must_fail.py a type checker must refuse end in ``# E: <error code>``.
_EXPECTED = re.compile(r"#\s*E:\s*(?P<code>[a-z-]+)")
_REPORTED = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: .*\[(?P<code>[a-z-]+)\]$")


def _mypy(*files: Path) -> dict[str, list[tuple[int, str]]]:
    """``mypy --strict`` on ``files`` in a subprocess: each file's (line, code) errors.

    The cache lives in the system's temporary directory, one per checkout, so a second
    run re-checks only what changed.
    """
    checkout = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
    cache = Path(tempfile.gettempdir()) / f"handoffs-mypy-cache-{checkout}"
    env = {**os.environ, "MYPYPATH": str(ROOT / "src")}
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--show-error-codes",
         "--no-pretty", "--cache-dir", str(cache), "--config-file", str(ROOT / "pyproject.toml"),
         *map(str, files)],
        capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    assert run.returncode in (0, 1), run.stdout + run.stderr  # 2: mypy itself failed
    found: dict[str, list[tuple[int, str]]] = {str(f.relative_to(ROOT)): [] for f in files}
    for line in run.stdout.splitlines():
        match = _REPORTED.match(line)
        assert match is not None or ": note: " in line, f"unexpected mypy output: {line}"
        if match is not None:
            found[match["path"]].append((int(match["line"]), match["code"]))
    return found


@pytest.fixture(scope="module")
def reported() -> dict[str, list[tuple[int, str]]]:
    return _mypy(HERE / "test_public_generics.py", HERE / "must_fail.py")


def test_mypy_accepts_the_public_generics(reported: Mapping[str, list[Any]]) -> None:
    assert reported["tests/typing/test_public_generics.py"] == []


def test_mypy_refuses_what_the_generics_forbid(reported: Mapping[str, list[Any]]) -> None:
    lines = (HERE / "must_fail.py").read_text().splitlines()
    expected = [(number, match["code"]) for number, text in enumerate(lines, start=1)
                if (match := _EXPECTED.search(text))]
    assert len(expected) >= 10
    assert sorted(reported["tests/typing/must_fail.py"]) == expected

