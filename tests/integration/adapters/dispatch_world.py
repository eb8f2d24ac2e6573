"""A user's own contract, keys and gate for the A2A and MCP adapter tests.

``parcel-dispatch`` is defined here, in the tests, as a user would define it in their
agent code (the library ships no knowledge of it). It has an integer field, so that
an A2A data part (a protobuf ``Value``: every number a double) is exercised for real.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from handoffs._json import dumps, loads
from handoffs.contracts import (
    Contract,
    GovernanceService,
    GrantIssuer,
    HardConstraint,
    LossMatrix,
    Registry,
    RoleHeld,
    Sender,
    decision_field,
)
from handoffs.contracts.policy import Is, Over, Policy, Rule
from handoffs.integrity import KeyRing, SigningKey
from handoffs.receivers import Gate, InMemoryEvidenceResolver, ResolvedEvidence


class Dispatch(enum.Enum):
    """What the dispatch desk may do with a parcel route."""

    DISPATCH = "DISPATCH"
    HOLD = "HOLD"
    ESCALATE = "ESCALATE"


@attrs.frozen
class DispatchState:
    """The decisive facts of one route."""

    address_verified: bool = decision_field("Every address on the route was verified.")
    hazardous: bool = decision_field("The load includes hazardous goods.")
    stops: int = decision_field("Number of stops on the route.", minimum=1, maximum=20)


D, H, E = Dispatch.DISPATCH, Dispatch.HOLD, Dispatch.ESCALATE

PARCEL_DISPATCH = Contract(
    name="parcel-dispatch",
    version="1.0.0",
    description="A route planner hands a parcel route to the dispatch desk.",
    actions=Dispatch,
    state=DispatchState,
    policy=Policy(
        rules=(
            Rule("unverified-address", Is("address_verified", False), H),
            Rule("hazardous-load", Is("hazardous", True), E),
            Rule("long-route", Over("stops", 8), E),
        ),
        default=D,
        default_name="routine-dispatch",
    ),
    loss=LossMatrix({
        (D, D): 0, (H, H): 0, (E, E): 0,
        (D, H): 40, (D, E): 60, (H, D): 5, (H, E): 5, (E, D): 2, (E, H): 2,
    }),
    hard_constraints=(
        HardConstraint("unsafe-dispatch", chosen=D, allowed_references={D},
                       description="DISPATCH when the reference action is not DISPATCH."),
    ),
    context=(RoleHeld("dispatch-desk", on_missing="REJECT"),),
    fail_closed_action=E,
    counterfactual_trigger="Recompute if an address, the load or the route changes.",
)
REGISTRY = Registry.of(PARCEL_DISPATCH)

SENDER, RECEIVER, SERVICE = "dispatcher", "dispatch-desk", "policy-service"
T0 = datetime(2026, 6, 1, 12, tzinfo=UTC)
NOW = T0 + timedelta(minutes=1)
POLICY = "DSP-1"
EVIDENCE = ("evidence://routes/r-1/manifest",)
CASE_ID = "route-1"


@attrs.frozen
class World:
    """Keys, the receiver's trust ring, signed receipts and gates."""

    service_key: SigningKey = attrs.field(factory=SigningKey.generate)
    sender_key: SigningKey = attrs.field(factory=SigningKey.generate)

    @property
    def ring(self) -> KeyRing:
        since = T0 - timedelta(days=30)
        return (
            KeyRing()
            .enrol(self.service_key.public_key_multibase, controller=SERVICE,
                   roles=["policy-service"], purposes=["capabilityDelegation"], not_before=since)
            .enrol(self.sender_key.public_key_multibase, controller=SENDER,
                   roles=["proposer"], not_before=since)
        )

    def content(self, **state: Any) -> dict[str, Any]:
        """The semantic part a sender (or its model) writes."""
        facts = {"address_verified": True, "hazardous": False, "stops": 3, **state}
        return {
            "proposed_action": PARCEL_DISPATCH.decide(DispatchState(**facts)).value,
            "decision_state": facts,
            "uncertainty": "RESOLVED",
            "counterfactual_trigger": PARCEL_DISPATCH.counterfactual_trigger,
        }

    def sender(self, *, receiver: str = RECEIVER,
               valid_for: timedelta = timedelta(hours=1)) -> Sender[Any, Any]:
        """The route planner's sender, configured once, at a fixed instant."""
        return Sender(
            contract=PARCEL_DISPATCH, key=self.sender_key,
            governance=GovernanceService(sender=SENDER, receiver=receiver,
                                         policy_version=POLICY, valid_for=valid_for),
            grants=GrantIssuer(key=self.service_key, issuer=SERVICE), clock=lambda: T0,
        )

    def signed_bytes(self, *, receiver: str = RECEIVER,
                     valid_for: timedelta = timedelta(hours=1),
                     content: Mapping[str, Any] | None = None, **state: Any) -> bytes:
        """A genuine signed receipt, as the sender's code produces it."""
        return self.sender(receiver=receiver, valid_for=valid_for).sign(
            content or self.content(**state), case_id=CASE_ID, evidence_refs=EVIDENCE)

    def bad_receipt(self, name: str) -> bytes:
        """A receipt the gate must refuse: ``tampered``, ``wrong-audience``, ``expired``."""
        if name == "tampered":
            doc = dict(loads(self.signed_bytes()))
            doc["decision_state"] = {**doc["decision_state"], "hazardous": False, "stops": 2}
            return dumps(doc).encode()
        if name == "wrong-audience":
            return self.signed_bytes(receiver="another-desk")
        if name == "expired":
            return self.signed_bytes(valid_for=timedelta(seconds=30))
        raise ValueError(name)

    def gate(self, **options: Any) -> Gate:
        """The receiver's gate, at a fixed instant one minute after signing."""
        config: dict[str, Any] = {
            "identity": RECEIVER,
            "trust": self.ring,
            "roles": {"dispatch-desk"},
            "registry": REGISTRY,
            "evidence": InMemoryEvidenceResolver({
                uri: ResolvedEvidence(content=b"manifest", observed_at=T0) for uri in EVIDENCE
            }),
            "clock": lambda: NOW,
        }
        config.update(options)
        return Gate(**config)


WORLD = World()
