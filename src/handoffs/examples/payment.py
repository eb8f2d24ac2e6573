"""The essay's payment case: ``payment-release`` 1.0.0 and its encoders.

An evidence specialist hands a payment case to an accountable case owner, who
chooses RELEASE, HOLD, REJECT_DUPLICATE or ESCALATE. Six boolean facts decide it,
with the essay's precedence and asymmetric loss matrix. The module also ships the
essay's synthetic case mix (four variants of seven independently decisive
scenarios) as the built-in example, and the four encodings the essay compares.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import attrs

from handoffs.contracts import (
    Contract,
    EvidenceFresh,
    GovernanceService,
    HardConstraint,
    LossMatrix,
    PolicyResolvable,
    ReceiptEncoder,
    RoleHeld,
    Uncertainty,
    decision_field,
)
from handoffs.contracts.policy import Is, Policy, Rule

__all__ = [
    "DECISION_FIELDS",
    "GOVERNANCE",
    "PAYMENT_RELEASE",
    "ActionOnlyEncoder",
    "FullRecordEncoder",
    "PaymentAction",
    "PaymentCase",
    "PaymentState",
    "RiskScoreEncoder",
    "decision_contract_encoder",
    "synthetic_cases",
]


class PaymentAction(enum.Enum):
    """What the case owner may do with a payment."""

    RELEASE = "RELEASE"
    HOLD = "HOLD"
    REJECT_DUPLICATE = "REJECT_DUPLICATE"
    ESCALATE = "ESCALATE"


@attrs.frozen
class PaymentState:
    """The six decisive facts of a payment case.

    ``if_missing`` records the *benign* value a careless receiver would assume; the
    lab's removal perturbation uses it to show what such a default costs.
    """

    identity_verified: bool = decision_field(
        "The payee's identity was verified against an authoritative source.", if_missing=True)
    screening_clear: bool = decision_field(
        "Sanctions and fraud screening returned no hit.", if_missing=True)
    duplicate_signal: bool = decision_field(
        "A payment with the same payee, amount and reference was seen before.",
        if_missing=False)
    policy_current: bool = decision_field(
        "The payment policy version the case was assessed under is the current one.",
        if_missing=True)
    evidence_conflict: bool = decision_field(
        "Two authoritative sources disagree on a decisive fact.", if_missing=False)
    high_value: bool = decision_field(
        "The amount exceeds the high-value threshold of the policy.", if_missing=False)


DECISION_FIELDS: Final = tuple(a.name for a in attrs.fields(PaymentState))

_R, _H, _D, _E = (PaymentAction.RELEASE, PaymentAction.HOLD, PaymentAction.REJECT_DUPLICATE,
                  PaymentAction.ESCALATE)

PAYMENT_RELEASE: Final = Contract(
    name="payment-release",
    version="1.0.0",
    description=(
        "An evidence specialist hands a payment case to the accountable case owner, who "
        "releases, holds, rejects it as a duplicate or escalates it."
    ),
    actions=PaymentAction,
    state=PaymentState,
    policy=Policy(
        rules=(
            Rule("identity-unverified", Is("identity_verified", False), _H),
            Rule("screening-not-clear", Is("screening_clear", False), _H),
            Rule("duplicate-signal", Is("duplicate_signal", True), _D),
            Rule("policy-stale", Is("policy_current", False), _E),
            Rule("evidence-conflict", Is("evidence_conflict", True), _E),
            Rule("high-value", Is("high_value", True), _E),
        ),
        default=_R,
        default_name="routine-release",
    ),
    loss=LossMatrix({
        (_R, _R): 0, (_H, _H): 0, (_D, _D): 0, (_E, _E): 0,
        (_E, _R): 2, (_H, _R): 4, (_D, _R): 15,
        (_R, _E): 120, (_R, _H): 100, (_R, _D): 80,
        (_H, _E): 8, (_H, _D): 25,
        (_D, _H): 35, (_D, _E): 30,
        (_E, _H): 5, (_E, _D): 6,
    }),
    hard_constraints=(
        HardConstraint(
            "unsafe-release", chosen=_R, allowed_references=frozenset({_R}),
            description="RELEASE when the reference action is not RELEASE.",
        ),
    ),
    context=(
        PolicyResolvable("PAY-7.4", on_missing="ESCALATE"),
        RoleHeld("case-owner", on_missing="REJECT"),
        EvidenceFresh("screening", max_age=timedelta(hours=24), on_missing="ESCALATE"),
    ),
    # Released before ecdsa-jcs-2019 was admitted: its schema (and so its fingerprint)
    # names eddsa-jcs-2022 alone, as checked in under schemas/payment-release/1.0.0.json.
    cryptosuites=("eddsa-jcs-2022",),
    fail_closed_action=_E,
    counterfactual_trigger=(
        "Recompute if any decision_state field, policy version, evidence status, "
        "authority or action set changes."
    ),
)
"""``payment-release`` 1.0.0, the essay's decision receipt contract."""


@attrs.frozen
class PaymentCase:
    """The evidence specialist's full record of one case (the sender's evidence X)."""

    case_id: str
    identity_verified: bool
    screening_clear: bool
    duplicate_signal: bool
    policy_current: bool
    evidence_conflict: bool
    high_value: bool
    amount: int
    counterparty: str
    history: str
    evidence_refs: tuple[str, ...]

    def state(self) -> PaymentState:
        """The decisive state the full evidence establishes."""
        return PaymentState(
            identity_verified=self.identity_verified,
            screening_clear=self.screening_clear,
            duplicate_signal=self.duplicate_signal,
            policy_current=self.policy_current,
            evidence_conflict=self.evidence_conflict,
            high_value=self.high_value,
        )

    def uncertainty(self) -> Uncertainty:
        """CONFLICT when sources disagree, else RESOLVED."""
        return Uncertainty.CONFLICT if self.evidence_conflict else Uncertainty.RESOLVED


_SCENARIOS: Final[tuple[tuple[str, dict[str, bool]], ...]] = (
    ("routine", {}),
    ("identity", {"identity_verified": False}),
    ("screening", {"screening_clear": False}),
    ("duplicate", {"duplicate_signal": True}),
    ("policy", {"policy_current": False}),
    ("conflict", {"evidence_conflict": True}),
    ("value", {"high_value": True}),
)


def synthetic_cases(variants: int = 4) -> Iterator[PaymentCase]:
    """The essay's balanced synthetic cases: ``variants`` of each of seven scenarios.

    With the default of 4 this is the essay's 28-case fixture. Larger counts keep
    the essay's message sizes (history repeats 6–9 times, cycling), so a scaled run
    measures the same work per case.
    """
    for scenario, changes in _SCENARIOS:
        for variant in range(variants):
            facts = {
                "identity_verified": True, "screening_clear": True,
                "duplicate_signal": False, "policy_current": True,
                "evidence_conflict": False, "high_value": False, **changes,
            }
            amount = (175_000 + variant * 25_000) if scenario == "value" else (
                9_000 + variant * 1_750)
            yield PaymentCase(
                case_id=f"{scenario}-{variant + 1:02d}",
                amount=amount,
                counterparty=f"Synthetic Counterparty {variant + 1}",
                history=(
                    "Synthetic history repeated to model a verbose dossier. "
                    "It is deliberately irrelevant to this declared policy. "
                ) * (6 + variant % 4),
                evidence_refs=tuple(
                    f"evidence://{scenario}/{variant + 1}/{kind}"
                    for kind in ("identity", "screening", "policy")
                ),
                **facts,
            )


GOVERNANCE: Final = GovernanceService(
    sender="evidence-specialist",
    receiver="case-owner",
    policy_version="PAY-7.4",
    valid_until=datetime(2027, 1, 1, tzinfo=UTC),
    may_decide=True,
)
"""The essay's governance stamp (its negative control lets the sender DECIDE)."""


def decision_contract_encoder() -> ReceiptEncoder[PaymentCase, PaymentState, PaymentAction]:
    """The essay's decision-contract encoding: six decisive fields plus governance."""
    return ReceiptEncoder(
        contract=PAYMENT_RELEASE, state_of=PaymentCase.state,
        uncertainty_of=PaymentCase.uncertainty,
    )


@attrs.frozen
class FullRecordEncoder:
    """Forwards the whole dossier: every case fact, the repeated history, the proposal
    and the investigation notes (the history twice).
    """

    name: str = "full_record"

    def encode(self, evidence: PaymentCase) -> dict[str, Any]:
        """Every field of the case except the governance ones, plus narrative."""
        record = attrs.asdict(evidence, recurse=False)
        del record["case_id"], record["evidence_refs"]
        record["proposed_action"] = PAYMENT_RELEASE.decide(evidence.state()).value
        record["investigation_notes"] = evidence.history * 2
        return record


@attrs.frozen
class RiskScoreEncoder:
    """Compresses the distinct reasons into one additive risk score."""

    name: str = "risk_score"

    def encode(self, evidence: PaymentCase) -> dict[str, Any]:
        """``{"risk_score": n}``: weights 35/35/45/25/25/20 per adverse fact."""
        score = (
            35 * (not evidence.identity_verified)
            + 35 * (not evidence.screening_clear)
            + 45 * evidence.duplicate_signal
            + 25 * (not evidence.policy_current)
            + 25 * evidence.evidence_conflict
            + 20 * evidence.high_value
        )
        return {"risk_score": score}


@attrs.frozen
class ActionOnlyEncoder:
    """Sends the verdict alone; whether it may be executed depends on the authority
    the governance service stamps (ADVISE or DECIDE).
    """

    name: str = "action_only"

    def encode(self, evidence: PaymentCase) -> dict[str, Any]:
        """``{"action": <reference action>}``."""
        return {"action": PAYMENT_RELEASE.decide(evidence.state()).value}
