"""The essay's remedy, end to end through the lab: schema-valid falsehoods survive a
strict receiver that trusts structure, and a receiver that reads the decisive claims
back against the authoritative evidence catches them."""

from __future__ import annotations

import warnings
from collections.abc import Hashable
from typing import Any

import attrs

from handoffs.contracts import EvidenceRef
from handoffs.examples.payment import PAYMENT_RELEASE, synthetic_cases
from handoffs.examples.payment_lab import (
    DECISION_TIME,
    CurrentPolicies,
    FixedClock,
    payment_experiment,
)
from handoffs.lab import Experiment, Strategy, run
from handoffs.lab.perturbations._falsehood import Mutate
from handoffs.receivers import (
    Gate,
    ResolvedEvidence,
    StrictContractReceiver,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
)
from handoffs.receivers._services import EvidenceError

# The truth each synthetic source asserts, by the case it belongs to.
_TRUTH = {case.case_id: case for case in synthetic_cases()}
_CLAIMS = {
    "identity": ("identity_verified",),
    "screening": ("screening_clear", "duplicate_signal"),
    "policy": ("policy_current", "evidence_conflict", "high_value"),
}


@attrs.frozen
class AuthoritativeRecords:
    """Resolves ``evidence://<scenario>/<variant>/<kind>`` to what that source asserts."""

    def resolve(self, ref: EvidenceRef) -> ResolvedEvidence:
        try:
            _, path = ref.uri.split("://", 1)
            scenario, variant, kind = path.split("/")
            case = _TRUTH[f"{scenario}-{int(variant):02d}"]
            fields = _CLAIMS[kind]
        except (ValueError, KeyError) as exc:
            raise EvidenceError(f"no record behind {ref.uri!r}") from exc
        return ResolvedEvidence(
            content=ref.uri.encode(), observed_at=DECISION_TIME,
            claims={name: getattr(case, name) for name in fields},
        )

    def memo_key(self, ref: EvidenceRef) -> Hashable:
        return ref.uri  # the claims differ per source, so key on the source itself


def _reading_receiver() -> StrictContractReceiver:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeConfigurationWarning)
        gate = Gate(
            identity="case-owner", trust=UnsafeNoProofs(), registry=PAYMENT_RELEASE,
            roles={"case-owner"}, policy_service=CurrentPolicies({"PAY-7.4"}),
            evidence=AuthoritativeRecords(),
            replay=None, clock=FixedClock(), readback=1.0,
        )
    return StrictContractReceiver(gate, name="reads-back")


def _experiment() -> Experiment:
    base = payment_experiment(profile="essay")
    subject = next(s for s in base.strategies if s.name == "decision_contract")
    reading = Strategy(name="decision_contract", encoder=subject.encoder,
                       receiver=_reading_receiver(), gated=True)
    return attrs.evolve(
        base, name="payment-readback", strategies=(reading,),
        perturbations=(Mutate(members=()),),
        injections=(),
    )


def _falsehoods(report: dict[str, Any]) -> dict[str, Any]:
    (row,) = report["falsehoods"]["strategies"]
    return row


def test_readback_catches_every_decision_relevant_falsehood() -> None:
    trusting = _falsehoods(run(payment_experiment()).report)
    reading = _falsehoods(run(_experiment()).report)
    # The same 168 single-field boolean falsehoods are sent to both receivers.
    assert reading["evaluated"] == 168
    # Structure alone catches none of them: 92 change the action, 24 catastrophically.
    assert (trusting["caught"], trusting["survived"], trusting["catastrophic_survived"]) \
        == (0, 92, 24)
    # Reading the decisive claims back against the sources catches them all, and none
    # slips through, catastrophic or not.
    assert (reading["caught"], reading["survived"], reading["catastrophic_survived"]) \
        == (92, 0, 0)
    assert reading["caught_by_class"] == {"catastrophic": 24, "changes_action": 68}
    # A false claim that would not have changed the action is refused too (the lab
    # counts it as over-reaction against the reference action): 52 of the 76.
    assert (reading["over_reacted"], reading["equivalent"]) == (52, 24)
