"""The payment world of the adapter tests: keys, trust, evidence, a signer, and the
attacks (tamper, replay) the gate must refuse. Imported by ``conftest.py`` and the
adapter test modules (``from adapter_world import ...``); it imports no framework.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from handoffs.adapters import Case
from handoffs.contracts import Contract, Governance, GovernanceService, Sender, issue_grant
from handoffs.examples import payment
from handoffs.integrity import KeyRing, SigningKey
from handoffs.receivers import (
    Gate,
    InMemoryEvidenceResolver,
    InMemoryPolicyService,
    ResolvedEvidence,
    StrictContractReceiver,
)

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
VALID_UNTIL = datetime(2027, 1, 1, tzinfo=UTC)
"""Every receipt's expiry (the governance service's)."""
GRANT_UNTIL = datetime(2027, 6, 1, tzinfo=UTC)
"""The grants' expiry, later: a receipt expires before its grant."""
CONTRACT = payment.PAYMENT_RELEASE
CASES = {case.case_id: case for case in payment.synthetic_cases()}


@attrs.frozen
class World:
    """Keys, trust and evidence shared by the sender and the receiver of a test."""

    service_key: SigningKey
    sender_key: SigningKey
    trust: KeyRing
    evidence: InMemoryEvidenceResolver


def make_world() -> World:
    service_key, sender_key = SigningKey.generate(), SigningKey.generate()
    trust = (
        KeyRing()
        .enrol(service_key.public_key_multibase, controller="policy-service",
               roles=["policy-service"], purposes=["capabilityDelegation"],
               not_before=NOW - timedelta(days=30))
        .enrol(sender_key.public_key_multibase, controller="evidence-specialist",
               roles=["proposer"], not_before=NOW - timedelta(days=30))
    )
    records = {}
    for case in CASES.values():
        facts = attrs.asdict(case.state())
        for ref in case.evidence_refs:
            records[ref] = ResolvedEvidence(content=f"record {ref}".encode(),
                                            observed_at=NOW - timedelta(hours=2),
                                            claims=facts)
    return World(service_key=service_key, sender_key=sender_key, trust=trust,
                 evidence=InMemoryEvidenceResolver(records))


@attrs.frozen
class CaseGrants:
    """The policy service, granting authority for the life of the case: its grants
    outlast any one receipt (so an expired receipt is refused as such)."""

    key: SigningKey

    def grant(self, governance: Governance, *, contract: Contract[Any, Any],
              now: datetime) -> dict[str, Any]:
        return issue_grant(
            self.key, issuer="policy-service", subject=governance.sender,
            audience=governance.receiver, contract=contract, case_id=governance.case_id,
            policy_version=governance.policy_version, authority=[governance.authority],
            valid_until=GRANT_UNTIL, created=now)


def make_sender(world: World, *, receiver: str = "case-owner") -> Sender[Any, Any]:
    """The evidence specialist's sender: governance from its configuration only."""
    return Sender(
        contract=CONTRACT, key=world.sender_key,
        governance=GovernanceService(sender="evidence-specialist", receiver=receiver,
                                     policy_version="PAY-7.4", valid_until=VALID_UNTIL),
        grants=CaseGrants(world.service_key), clock=lambda: NOW)


def strict_receiver(world: World, *, identity: str = "case-owner",
                    at: datetime = NOW + timedelta(minutes=1)) -> StrictContractReceiver:
    """The case owner's strict receiver behind a fresh gate (and replay store)."""
    return StrictContractReceiver(Gate(
        identity=identity, trust=world.trust, registry=payment.PAYMENT_RELEASE,
        roles={identity}, policy_service=InMemoryPolicyService({"PAY-7.4": True}),
        evidence=world.evidence, readback=1.0, clock=lambda: at,
    ))


EXPIRED = VALID_UNTIL + timedelta(seconds=1)
"""A receiver clock after every receipt's ``valid_until``."""


def content_for(case_id: str) -> dict[str, Any]:
    """What a well-behaved evidence model writes for a case: the semantic part only, every
    member of the strict content schema present (``notes`` null)."""
    return {**payment.decision_contract_encoder().encode(CASES[case_id]), "notes": None}


def reference_action(case_id: str) -> str:
    """The action the full evidence calls for."""
    return str(CONTRACT.decide(CASES[case_id].state()).value)


def case_ref(case_id: str) -> Case:
    return Case(case_id=case_id, evidence_refs=CASES[case_id].evidence_refs)


def with_governance(content: Mapping[str, Any]) -> dict[str, Any]:
    """The model's content plus governance it has no business writing."""
    return {**content, "authority": "DECIDE", "valid_until": "2099-01-01T00:00:00Z"}


def tamper(message: bytes) -> bytes:
    """A man in the middle raises the authority of a signed receipt."""
    document = json.loads(message)
    document["authority"] = "DECIDE"
    return json.dumps(document).encode()


class Replayer:
    """A transport that captures the first receipt and delivers it again afterwards."""

    def __init__(self) -> None:
        self.captured: bytes | None = None

    def __call__(self, message: bytes) -> bytes:
        if self.captured is None:
            self.captured = message
        return self.captured


OVERRULED_CASE = "identity-01"
"""A case whose policy decides HOLD (the identity is not verified)."""
OVERRULED_PROPOSAL = "RELEASE"
"""What the sender proposes for :data:`OVERRULED_CASE`: the gate admits the receipt and
decides otherwise (HOLD), as ``handoffs gate``'s exit 3."""


def overruled_content() -> dict[str, Any]:
    """A true decision state of :data:`OVERRULED_CASE` with the proposal RELEASE."""
    return {**content_for(OVERRULED_CASE), "proposed_action": OVERRULED_PROPOSAL}


def answer_the_proposal(handover: Mapping[str, Any]) -> str:
    """A stand-in model (a test double for the remote model provider) that answers the
    proposal wherever the handover shows one, else the ruling's action: the naive reader
    issue #28 found."""
    content = handover.get("content") or {}
    if "proposed_action" in content:
        return str(content["proposed_action"])
    ruling = handover.get("ruling") or {}
    return str(ruling.get("action") or handover["decision"]["action"])
