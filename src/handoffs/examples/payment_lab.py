"""The built-in experiment: the essay's payment-release laboratory, declared with the
generic engine.

Five strategies over the essay's 28 synthetic cases (four variants of seven
scenarios): the full record, the decision contract, a risk score, an advisory
action-only message and the authoritative action-only negative control, each with
the receiver the essay describes, built from :mod:`handoffs.receivers`. The
messages are unsigned, as in the essay, so the receipt gate runs with the **unsafe**
:class:`~handoffs.receivers.UnsafeNoProofs`; this module declares that explicitly
and silences the warning only for that one construction.

``profile="essay"`` runs exactly the essay's interventions (six decision-field and
seven governance-field ablations and the injected error); ``profile="full"`` (the
default) adds every standard perturbation, an added action, a changed loss matrix
and a lossy relay.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Hashable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import attrs

from handoffs._errors import HandoffsError, InvalidArgument
from handoffs.contracts import Authority, EvidenceRef, Governance, Registry
from handoffs.contracts.policy import Is
from handoffs.examples.payment import (
    GOVERNANCE,
    PAYMENT_RELEASE,
    ActionOnlyEncoder,
    FullRecordEncoder,
    PaymentAction,
    PaymentCase,
    RiskScoreEncoder,
    decision_contract_encoder,
    synthetic_cases,
)
from handoffs.lab import Experiment, IterableCases, Strategy, Tolerances
from handoffs.lab.perturbations import (
    ActionAdded,
    Falsehood,
    LossChanged,
    Perturbation,
    Relay,
    RemoveDecisionField,
    RemoveGovernanceField,
    select_perturbations,
)
from handoffs.receivers import (
    AdvisoryActionReceiver,
    AuthoritativeActuator,
    FullRecordReceiver,
    Gate,
    GovernanceChecker,
    Receiver,
    ResolvedEvidence,
    ScoreReceiver,
    StrictContractReceiver,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
)

__all__ = [
    "ASSUMPTIONS",
    "CLAIMS_VERIFIED_UPSTREAM",
    "DECISION_TIME",
    "CurrentPolicies",
    "FixedClock",
    "SyntheticEvidence",
    "actuator",
    "advisory_receiver",
    "full_record_receiver",
    "payment_experiment",
    "payment_gate",
    "payment_perturbations",
    "payment_strategies",
    "score_receiver",
    "strict_receiver",
]

DECISION_TIME: Final = datetime(2026, 6, 1, tzinfo=UTC)
"""The fixed instant the lab's receivers decide at (receipts are valid until 2027)."""

ASSUMPTIONS: Final = {
    "case_mix": "Four synthetic variants for each of seven independently decisive scenarios.",
    "receiver": "Advisory messages are recomputed; signed DECIDE messages are executed.",
    "loss": "Synthetic asymmetric matrix; unsafe release costs more than unnecessary escalation.",
}
"""The essay's assumptions block, word for word."""

CLAIMS_VERIFIED_UPSTREAM: Final = (
    "the essay's receivers act on what a well-formed receipt says; its payment claims are "
    "checked before release by readback of the cited evidence (schema-valid is not "
    "truth-valid)")
"""The built-in experiment's waiver of the bound on surviving catastrophic falsehoods."""


@attrs.frozen
class FixedClock:
    """A clock that always reads ``instant`` (deterministic, picklable)."""

    instant: datetime = DECISION_TIME

    def __call__(self) -> datetime:
        """The fixed instant."""
        return self.instant


def _versions(value: Iterable[str]) -> frozenset[str]:
    if isinstance(value, str):
        return frozenset((value,))
    return frozenset(value)


@attrs.frozen
class CurrentPolicies:
    """A policy service that knows ``current`` (all current) and ``superseded`` versions."""

    current: frozenset[str] = attrs.field(converter=_versions)
    superseded: frozenset[str] = attrs.field(default=frozenset(), converter=_versions)

    def resolve(self, version: str) -> bool | None:
        """Current if in ``current``, superseded if in ``superseded``, else unknown."""
        if version in self.current:
            return True
        return False if version in self.superseded else None


@attrs.frozen
class SyntheticEvidence:
    """Resolves the synthetic ``evidence://`` references of the essay's cases.

    Every such reference resolves to its URI as content, observed ``age`` before
    the decision time, with no claims (no readback). Other schemes are unresolvable.
    """

    observed_at: datetime = DECISION_TIME - timedelta(hours=1)
    scheme: str = "evidence://"

    def resolve(self, ref: EvidenceRef) -> ResolvedEvidence:
        """The synthetic evidence behind ``ref``.

        Raises:
            HandoffsError: ``evidence-unresolved``, the reference is not a synthetic
                ``evidence://`` URI (the gate reports any exception from a resolver as
                ``evidence-unresolved``).
        """
        if not ref.uri.startswith(self.scheme):
            raise HandoffsError(f"no synthetic evidence for {ref.uri!r}",
                                code="evidence-unresolved")
        return ResolvedEvidence(content=ref.uri.encode("utf-8"), observed_at=self.observed_at)

    def memo_key(self, ref: EvidenceRef) -> Hashable:
        """What a gate sees of :meth:`resolve`: whether it resolves, and whether a
        pinned digest matches the content (the URI itself); the observation time is
        fixed and there are no claims.
        """
        if not ref.uri.startswith(self.scheme):
            return False
        if ref.digest is None:
            return True
        content = "sha256:" + hashlib.sha256(ref.uri.encode("utf-8")).hexdigest()
        return ("pinned", ref.digest == content)


def payment_gate() -> Gate:
    """The case owner's gate for the lab's unsigned receipts.

    **Unsafe by declaration:** the essay's messages carry no proofs, so the gate uses
    :class:`~handoffs.receivers.UnsafeNoProofs`. Every other step runs: schema,
    audience, expiry (against a fixed clock), context (policy PAY-7.4 current, the
    case-owner role, fresh screening evidence) and evidence resolution. Replay
    protection is off so that the same message always gets the same decision.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeConfigurationWarning)
        return Gate(
            identity="case-owner",
            registry=Registry.of(PAYMENT_RELEASE),
            trust=UnsafeNoProofs(),
            roles={"case-owner"},
            policy_service=CurrentPolicies({"PAY-7.4"}),
            evidence=SyntheticEvidence(),
            replay=None,
            clock=FixedClock(),
        )


def strict_receiver() -> StrictContractReceiver:
    """The essay's ``receive_contract``: recompute the policy from verified state."""
    return StrictContractReceiver(payment_gate())


def full_record_receiver() -> FullRecordReceiver:
    """The essay's ``receive_full``."""
    return FullRecordReceiver(PAYMENT_RELEASE)


def score_receiver() -> ScoreReceiver:
    """The essay's ``receive_score``: RELEASE under 20, else ESCALATE."""
    return ScoreReceiver(PAYMENT_RELEASE, threshold=20, below=PaymentAction.RELEASE,
                         at_or_above=PaymentAction.ESCALATE)


def advisory_receiver() -> AdvisoryActionReceiver:
    """The essay's ``receive_action_advisory``: refuse the bare verdict."""
    return AdvisoryActionReceiver(PAYMENT_RELEASE)


def actuator() -> AuthoritativeActuator:
    """The essay's ``receive_action_authoritative``: governance present, DECIDE executed."""
    return AuthoritativeActuator(GovernanceChecker(PAYMENT_RELEASE, required=Governance.FIELDS))


def payment_strategies() -> tuple[Strategy, ...]:
    """The essay's five strategies, in the essay's order."""
    action_only = ActionOnlyEncoder()
    receivers: tuple[Receiver, ...] = (
        full_record_receiver(), strict_receiver(), score_receiver(), advisory_receiver(),
        actuator(),
    )
    return (
        Strategy(name="full_record", encoder=FullRecordEncoder(), receiver=receivers[0]),
        Strategy(name="decision_contract", encoder=decision_contract_encoder(),
                 receiver=receivers[1], gated=True),
        Strategy(name="risk_score", encoder=RiskScoreEncoder(), receiver=receivers[2]),
        Strategy(name="action_only_advisory", encoder=action_only, receiver=receivers[3]),
        Strategy(name="action_only_authoritative", encoder=action_only, receiver=receivers[4],
                 authority=Authority.DECIDE),
    )


def payment_perturbations(profile: str = "full") -> tuple[Perturbation, ...]:
    """The perturbations of the built-in experiment.

    ``"essay"``: the essay's six decision-field and seven governance-field
    ablations. ``"full"``: every standard perturbation plus an added action
    (HUMAN_REVIEW for high-value cases), a changed loss matrix (costly referrals)
    and a relay whose first hop drops the decision state.
    """
    if profile == "essay":
        return (*(RemoveDecisionField(s.name) for s in PAYMENT_RELEASE.fields),
                *(RemoveGovernanceField(m) for m in Governance.FIELDS))
    if profile != "full":
        raise InvalidArgument(f"profile must be 'full' or 'essay', got {profile!r}")
    r, h, d, e = ("RELEASE", "HOLD", "REJECT_DUPLICATE", "ESCALATE")
    extra: Iterable[Perturbation] = (
        ActionAdded(action="HUMAN_REVIEW", when=Is("high_value", True), before="high-value",
                    loss={(r, "HUMAN_REVIEW"): 120, (h, "HUMAN_REVIEW"): 8,
                          (d, "HUMAN_REVIEW"): 30, (e, "HUMAN_REVIEW"): 3},
                    default_loss=5),
        LossChanged(name="costly-referrals", entries={(e, r): 10, (h, r): 20}),
        Relay(hops=2, drop=("decision_state",)),
    )
    return select_perturbations(PAYMENT_RELEASE, extra=tuple(extra))


def payment_experiment(*, variants: int = 4, profile: str = "full",
                       tolerances: Tolerances | None = None) -> Experiment:
    """The essay's release experiment on ``7 × variants`` synthetic cases.

    Args:
        variants: variants per scenario (4 gives the essay's 28 cases).
        profile: ``"full"`` (default) or ``"essay"`` (only the essay's interventions).
        tolerances: release thresholds (default: ε = δ = 0, no hard violation, on
            the decision contract without perturbation).
    """
    if not isinstance(variants, int) or variants < 1:
        raise InvalidArgument(f"variants must be a positive integer, got {variants!r}")
    cases: Any = IterableCases(lambda: synthetic_cases(variants),
                               description=f"python:synthetic_cases(variants={variants})")
    return Experiment(
        name="payment-release-essay",
        description="The essay's synthetic message-ablation laboratory: five handoff "
                    "strategies on balanced payment cases under an asymmetric loss.",
        contract=PAYMENT_RELEASE,
        cases=cases,
        strategies=payment_strategies(),
        governance=GOVERNANCE,
        state_of=PaymentCase.state,
        subject="decision_contract",
        perturbations=payment_perturbations(profile),
        injections=(Falsehood(case_id="policy-01", field="policy_current", value=True),),
        tolerances=tolerances or Tolerances(claims_verified_upstream=CLAIMS_VERIFIED_UPSTREAM),
        assumptions=ASSUMPTIONS,
    )
