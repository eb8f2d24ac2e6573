"""The gate's world, shared by the receiver tests: keys, a trust ring, signed receipts of
the essay's payment cases, their evidence, and gates over them.

Test modules import it from here (``from worlds.gate import WORLD, raw``) rather than
from another test module; it imports public names only.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from handoffs._json import dumps
from handoffs.contracts import Authority, EvidenceRef, Governance, Receipt, issue_grant
from handoffs.examples import payment
from handoffs.integrity import KeyRing, SigningKey, sign
from handoffs.receivers import (
    Decision,
    Gate,
    InMemoryEvidenceResolver,
    InMemoryPolicyService,
    ResolvedEvidence,
    StrictContractReceiver,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
)

__all__ = ["ALL_EVIDENCE", "CASES", "CONTRACT", "ENCODER", "NOW", "RECEIVER", "SENDER",
           "SERVICE", "T0", "WORLD", "World", "codes", "evidence_for", "raw", "ref", "strict"]

T0 = datetime(2026, 6, 1, 12, tzinfo=UTC)
NOW = T0 + timedelta(minutes=1)
CONTRACT = payment.PAYMENT_RELEASE
CASES = {case.case_id: case for case in payment.synthetic_cases()}
ENCODER = payment.decision_contract_encoder()
SENDER, RECEIVER, SERVICE = "evidence-specialist", "case-owner", "policy-service"
_CLAIMS = {
    "identity": ("identity_verified",),
    "screening": ("screening_clear", "duplicate_signal"),
    "policy": ("policy_current", "evidence_conflict", "high_value"),
}


def evidence_for(case: payment.PaymentCase, *, observed_at: datetime = T0 - timedelta(hours=1),
                 claims: bool = True) -> dict[str, ResolvedEvidence]:
    """The authoritative records behind a case's three evidence references."""
    documents = {}
    for uri in case.evidence_refs:
        kind = uri.rsplit("/", 1)[1]
        facts = {name: getattr(case, name) for name in _CLAIMS[kind]} if claims else None
        documents[uri] = ResolvedEvidence(
            content=f"record {uri}".encode(), observed_at=observed_at, claims=facts
        )
    return documents


ALL_EVIDENCE = {uri: ev for case in CASES.values() for uri, ev in evidence_for(case).items()}


@attrs.frozen
class World:
    """Keys, a trust ring and builders for signed receipts and gates."""

    service_key: SigningKey = attrs.field(factory=SigningKey.generate)
    sender_key: SigningKey = attrs.field(factory=SigningKey.generate)
    rogue_key: SigningKey = attrs.field(factory=SigningKey.generate)
    stranger_key: SigningKey = attrs.field(factory=SigningKey.generate)

    @property
    def keyring(self) -> KeyRing:
        since = T0 - timedelta(days=30)
        return (
            KeyRing()
            .enrol(self.service_key.public_key_multibase, controller=SERVICE,
                   roles=["policy-service"], not_before=since, purposes=["capabilityDelegation"])
            .enrol(self.sender_key.public_key_multibase, controller=SENDER,
                   roles=["proposer"], not_before=since)
            .enrol(self.rogue_key.public_key_multibase, controller="rogue-agent",
                   roles=["proposer"], not_before=since)
        )

    def grant(
        self,
        case_id: str = "policy-01",
        *,
        authority: tuple[Authority, ...] = (Authority.ADVISE,),
        valid_until: datetime = T0 + timedelta(hours=2),
        subject: str = SENDER,
        audience: str = RECEIVER,
        policy_version: str = "PAY-7.4",
        key: SigningKey | None = None,
        contract: Any = CONTRACT,
    ) -> dict[str, Any]:
        return issue_grant(
            key or self.service_key, issuer=SERVICE, subject=subject, audience=audience,
            contract=contract, case_id=case_id, policy_version=policy_version,
            authority=authority, valid_until=valid_until, created=T0,
        )

    def unsigned(
        self,
        case_id: str = "policy-01",
        *,
        authority: str = "ADVISE",
        sender: str = SENDER,
        receiver: str = RECEIVER,
        policy_version: str = "PAY-7.4",
        valid_until: datetime = T0 + timedelta(hours=1),
        evidence_refs: tuple[Any, ...] | None = None,
        notes: str | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        case = CASES[case_id]
        governance = Governance(
            case_id=case_id, sender=sender, receiver=receiver, authority=Authority(authority),
            policy_version=policy_version, valid_until=valid_until,
            evidence_refs=case.evidence_refs if evidence_refs is None else evidence_refs,
        )
        doc = Receipt.build(CONTRACT, ENCODER.encode(case), governance).to_json()
        if state:
            doc["decision_state"].update(state)
        if notes is not None:
            doc["notes"] = notes
        return doc

    def signed(
        self,
        case_id: str = "policy-01",
        *,
        grant: dict[str, Any] | str | None = "auto",
        grant_authority: tuple[Authority, ...] | None = None,
        key: SigningKey | None = None,
        created: datetime = T0,
        expires: datetime | None = None,
        mutate: Callable[[dict[str, Any]], None] | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        doc = self.unsigned(case_id, **fields)
        if grant == "auto":
            authority = grant_authority or (Authority(doc["authority"]),)
            grant = self.grant(case_id, authority=authority,
                               policy_version=doc["policy_version"])
        if grant is not None:
            doc["grant"] = grant
        if mutate is not None:
            mutate(doc)
        return sign(doc, key or self.sender_key, purpose="assertionMethod", created=created,
                    expires=expires)

    def gate(self, **options: Any) -> Gate:
        config: dict[str, Any] = {
            "identity": RECEIVER,
            "trust": self.keyring,
            "registry": CONTRACT,
            "roles": {"case-owner"},
            "policy_service": InMemoryPolicyService({"PAY-7.4": True, "PAY-7.3": False}),
            "evidence": InMemoryEvidenceResolver(ALL_EVIDENCE),
            "clock": lambda: NOW,
        }
        config.update(options)
        return Gate(**config)

    def unsafe_gate(self, **options: Any) -> Gate:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnsafeConfigurationWarning)
            return self.gate(trust=UnsafeNoProofs(), **options)


WORLD = World()


def raw(doc: Mapping[str, Any]) -> bytes:
    return dumps(doc).encode()


def strict(gate: Gate) -> StrictContractReceiver:
    return StrictContractReceiver(gate)


def codes(decision: Decision) -> list[str]:
    return [reason.code for reason in decision.reasons]


def ref(uri: str) -> EvidenceRef:
    """An evidence reference to ``uri``."""
    return EvidenceRef(uri)
