"""The payment world of the adapter tests: keys, trust, evidence, a signer, and the
attacks (tamper, replay) the gate must refuse. Imported by ``conftest.py`` and the
adapter test modules (``from adapter_world import ...``); it imports no framework.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from handoffs.adapters import Case
from handoffs.contracts import (
    ENVELOPE_MEMBERS,
    GOVERNANCE_FIELDS,
    Authority,
    Contract,
    KeyRing,
    Receipt,
    SigningKey,
    UntrustedGovernance,
    issue_grant,
    payment,
    sign_receipt,
)
from handoffs.receivers import (
    Gate,
    InMemoryEvidenceResolver,
    InMemoryPolicyService,
    Readback,
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
_PROTECTED = frozenset(GOVERNANCE_FIELDS) | frozenset(ENVELOPE_MEMBERS)


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
class GrantSigner:
    """The sender side by hand: the policy service's grant, then the sender's proof.

    Governance (sender, receiver, authority, policy version, validity) comes from this
    object's configuration only.
    """

    world: World
    receiver: str = "case-owner"
    contract: Contract[Any, Any] = CONTRACT

    def sign(self, content: Mapping[str, Any], *, case_id: str,
             evidence_refs: Sequence[str]) -> bytes:
        clash = sorted(_PROTECTED.intersection(content))
        if clash:
            raise UntrustedGovernance(f"content may not set {', '.join(clash)}",
                                      json_path=f"$.{clash[0]}")
        governance = attrs.evolve(payment.GOVERNANCE, receiver=self.receiver,
                                  valid_until=VALID_UNTIL)
        unsigned = Receipt.build(self.contract, content,
                                 governance.stamp(case_id=case_id, evidence_refs=evidence_refs))
        grant = issue_grant(
            self.world.service_key, issuer="policy-service", subject="evidence-specialist",
            audience=self.receiver, contract=self.contract, case_id=case_id,
            policy_version="PAY-7.4", authority=[Authority.ADVISE], valid_until=GRANT_UNTIL,
            created=NOW,
        )
        return sign_receipt(unsigned, self.world.sender_key, grant=grant,
                            created=NOW).to_bytes()


def strict_receiver(world: World, *, identity: str = "case-owner",
                    at: datetime = NOW + timedelta(minutes=1)) -> StrictContractReceiver:
    """The case owner's strict receiver behind a fresh gate (and replay store)."""
    return StrictContractReceiver(Gate(
        identity=identity, trust=world.trust, roles={identity},
        policy_service=InMemoryPolicyService({"PAY-7.4": True}),
        evidence=world.evidence, readback=Readback.ALWAYS, clock=lambda: at,
    ))


EXPIRED = VALID_UNTIL + timedelta(seconds=1)
"""A receiver clock after every receipt's ``valid_until``."""


def content_for(case_id: str) -> dict[str, Any]:
    """What a well-behaved evidence model writes for a case: the semantic part only."""
    return payment.decision_contract_encoder().encode(CASES[case_id])


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
