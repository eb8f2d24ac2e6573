"""Signed hops carrying one receipt: keys, a trust ring, a risk contract, receipts,
chains and the carried-receipt receivers. Test modules import it from here rather than
from one another.
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from handoffs.contracts import (
    Authority,
    Contract,
    GovernanceService,
    HardConstraint,
    Interval,
    LossMatrix,
    Receipt,
    Registry,
    decision_field,
    issue_grant,
)
from handoffs.contracts.policy import Over, Policy, Rule
from handoffs.integrity import KeyRing, SigningKey
from handoffs.receivers import (
    CarriedReceiptReceiver,
    Gate,
    StrictContractReceiver,
    carry,
)
from handoffs.receivers.chains import HandoffChain, IdentityCompositionReceiver

__all__ = [
    "CONTRACT",
    "FINAL",
    "KEYS",
    "ORIGIN",
    "POLICY",
    "RELAY",
    "RING",
    "STABLE",
    "Act",
    "Risk",
    "T",
    "carrier",
    "chain",
    "chain_receiver",
    "receipt",
]


T = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
ORIGIN, RELAY, FINAL, POLICY = "origin", "relay", "final", "policy-service"
KEYS = {name: SigningKey(Ed25519PrivateKey.from_private_bytes(bytes([i + 7]) * 32))
        for i, name in enumerate((ORIGIN, RELAY, POLICY, "stranger"))}


class Act(enum.Enum):
    GO = "GO"
    STOP = "STOP"


@attrs.frozen
class Risk:
    p: Interval = decision_field("Failure probability.", minimum=0, maximum=1)


CONTRACT = Contract(
    name="risk-check", version="1.0.0", description="Stop above 0.05.",
    actions=Act, state=Risk,
    policy=Policy(rules=(Rule("risky", Over("p", 0.05), Act.STOP),), default=Act.GO),
    loss=LossMatrix({(Act.GO, Act.GO): 0, (Act.STOP, Act.STOP): 0, (Act.STOP, Act.GO): 1,
                     (Act.GO, Act.STOP): 10}),
    hard_constraints=(HardConstraint("unsafe-go", chosen=Act.GO,
                                     allowed_references=frozenset({Act.GO})),),
    fail_closed_action=Act.STOP, counterfactual_trigger="Recompute when p changes.",
)


def _ring() -> KeyRing:
    ring = KeyRing()
    for name, roles, purpose in ((ORIGIN, {"investigator"}, "assertionMethod"),
                                 (RELAY, {"investigator"}, "assertionMethod"),
                                 (POLICY, {"policy-service"}, "capabilityDelegation")):
        ring = ring.enrol(KEYS[name].public_key_multibase, controller=name, roles=roles,
                          not_before=T - timedelta(days=1), purposes={purpose})
    return ring


RING = _ring()


def receipt(lo: float = 0.01, hi: float = 0.04, *, sender: str = ORIGIN,
            case_id: str = "case-1", granted: bool = True) -> dict[str, Any]:
    until = T + timedelta(hours=4)
    service = GovernanceService(sender=sender, receiver=FINAL, policy_version="R-1",
                                valid_until=until)
    content = {"proposed_action": "GO", "decision_state": {"p": {"lo": lo, "hi": hi}},
               "uncertainty": "RESOLVED", "counterfactual_trigger": "Recompute when p changes."}
    typed = Receipt.build(CONTRACT, content, service.stamp(
        case_id=case_id, evidence_refs=["evidence://risk/1"]))
    grant = issue_grant(KEYS[POLICY], issuer=POLICY, subject=sender, audience=FINAL,
                        contract=CONTRACT, case_id=case_id, policy_version="R-1",
                        authority={Authority.ADVISE}, valid_until=until,
                        created=T - timedelta(hours=1)) if granted else None
    return typed.sign(KEYS[sender], grant=grant,
                        created=T - timedelta(minutes=50)).to_json()


def chain(pins: tuple[dict[str, Any], dict[str, Any]], *, case_id: str = "case-1",
          last: str = FINAL, notes: tuple[str, str] | None = None,
          id: str | None = None) -> dict[str, Any]:
    texts = notes or (carry("measured p", pins[0]), carry("forwarded unchanged", pins[1]))
    built = HandoffChain.start(case_id=case_id, id=id).add_hop(
        KEYS[ORIGIN], sender=ORIGIN,
        role="investigator", receiver=RELAY, authority="ADVISE",
        valid_until=T + timedelta(hours=3), transformation=texts[0],
        created=T - timedelta(minutes=40))
    built = built.add_hop(KEYS[RELAY], role="investigator", receiver=last, authority="ADVISE",
                          valid_until=T + timedelta(hours=2), transformation=texts[1],
                          created=T - timedelta(minutes=30))
    return built.to_json()


def chain_receiver(**changes: Any) -> IdentityCompositionReceiver:
    options: dict[str, Any] = {"keyring": RING, "identity": FINAL, "clock": lambda: T,
                               "required_roles": (), "single_instance": True}
    return IdentityCompositionReceiver(**{**options, **changes})


def carrier(**changes: Any) -> CarriedReceiptReceiver:
    gate = Gate(identity=FINAL, trust=RING, registry=Registry.of(CONTRACT), replay=None,
                clock=lambda: T)
    options: dict[str, Any] = {"chain_receiver": chain_receiver(),
                               "receipt_receiver": StrictContractReceiver(gate),
                               "fail_closed_action": "STOP"}
    return CarriedReceiptReceiver(**{**options, **changes})


STABLE = receipt()
