"""The handoff-chain world, shared by the chain tests: signers with roles and fixed keys,
their key ring, the essay's standard chain (investigator, proposer with an approver,
approver, executor, ledger) and builders over it.

Test modules import it from here (``from worlds.chains import STANDARD, make_chain``)
rather than from another test module; it imports public names only.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from handoffs.integrity import KeyRing, SigningKey, sign
from handoffs.receivers import Decision
from handoffs.receivers.chains import HandoffChain, IdentityCompositionReceiver

__all__ = ["CASE", "CHAIN_ID", "KEYS", "LEDGER", "RING", "ROLES", "STANDARD", "T", "aged",
           "codes", "make_chain", "paths", "places", "receiver", "resigned", "with_step"]

HOP_PROOF_PURPOSE = "assertionMethod"  # the purpose every hop proof is made for

T = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
CASE = "case-1842"
CHAIN_ID = "urn:uuid:0b1c7e52-4f0a-4d3e-9c9b-5a1e2d3c4b5a"
LEDGER = "ledger-service"

ROLES: dict[str, set[str]] = {
    "evidence-specialist": {"investigator"},
    "second-investigator": {"investigator"},
    "case-owner": {"proposer"},
    "dual-owner": {"proposer", "approver"},
    "payments-approver": {"approver"},
    "approving-investigator": {"investigator", "approver"},
    "payments-executor": {"executor"},
    "auditor": {"auditor"},
}
KEYS = {
    name: SigningKey(Ed25519PrivateKey.from_private_bytes(bytes([i + 1]) * 32))
    for i, name in enumerate(ROLES)
}


def _ring() -> KeyRing:
    ring = KeyRing()
    for name, roles in ROLES.items():
        ring = ring.enrol(
            KEYS[name].public_key_multibase,
            controller=name,
            roles=roles,
            not_before=T - timedelta(days=30),
        )
    return ring


RING = _ring()

# The canonical chain: investigator → proposer (approved) → approver → executor → ledger.
STANDARD: list[dict[str, Any]] = [
    {"signer": "evidence-specialist", "role": "investigator", "authority": "ADVISE",
     "action": "ESCALATE", "valid_until": T + timedelta(hours=4),
     "transformation": "reconciled the ledger and the bank statement"},
    {"signer": "case-owner", "role": "proposer", "authority": "ADVISE", "action": "RELEASE",
     "valid_until": T + timedelta(hours=3), "transformation": "proposed release",
     "approved_by": "payments-approver"},
    {"signer": "payments-approver", "role": "approver", "authority": "DECIDE",
     "action": "RELEASE", "valid_until": T + timedelta(hours=2),
     "transformation": "approved under PAY-7.4"},
    {"signer": "payments-executor", "role": "executor", "authority": "DECIDE",
     "action": "RELEASE", "valid_until": T + timedelta(hours=1),
     "transformation": "built the payment instruction"},
]


def make_chain(spec: list[dict[str, Any]], *, audience: str = LEDGER) -> HandoffChain:
    """Build a chain from step dicts; each hop is addressed to the next step's signer."""
    chain = HandoffChain.start(case_id=CASE)
    for i, original in enumerate(spec):
        step = dict(original)
        signer = step.pop("signer")
        approver = step.pop("approved_by", None)
        created = step.pop("created", T - timedelta(minutes=50 - 10 * i))
        default_receiver = spec[i + 1].get("sender", spec[i + 1]["signer"]) if i + 1 < len(
            spec) else audience
        step.setdefault("receiver", default_receiver)
        step.setdefault("sender", signer)
        chain = chain.add_hop(KEYS[signer], created=created, **step)
        if approver is not None:
            chain = chain.approve(KEYS[approver], created=created + timedelta(minutes=1))
    return chain


def receiver(**options: Any) -> IdentityCompositionReceiver:
    options.setdefault("keyring", RING)
    options.setdefault("identity", LEDGER)
    options.setdefault("clock", lambda: T)
    options.setdefault("single_instance", True)
    return IdentityCompositionReceiver(**options)


def codes(decision: Decision) -> list[str]:
    return [reason.code for reason in decision.reasons]


def paths(decision: Decision, code: str) -> list[str]:
    return [reason.json_path for reason in decision.reasons if reason.code == code]


def places(decision: Decision, code: str) -> list[str]:
    """Every place a code was found: each code is reported once, at its first place,
    and its message names the others."""
    (reason,) = [reason for reason in decision.reasons if reason.code == code]
    return [reason.json_path, *re.findall(r"\((\$[^)]*)\)", reason.message)]


def with_step(index: int, **changes: Any) -> list[dict[str, Any]]:
    spec = copy.deepcopy(STANDARD)
    spec[index].update(changes)
    return spec


def resigned(
    hop: Mapping[str, Any], signer: str, *, created: datetime, **changes: Any
) -> dict[str, Any]:
    """An insider re-signs a hop it controls, with ``changes`` applied."""
    doc = {key: value for key, value in hop.items() if key != "proof"}
    doc.update(changes)
    return sign(doc, KEYS[signer], purpose=HOP_PROOF_PURPOSE, created=created,
                proof_id="urn:uuid:00000000-0000-4000-8000-000000000001")


def aged(days: int) -> list[dict[str, Any]]:
    """STANDARD, every proof made ``days`` days ago, hops valid for a year."""
    spec = copy.deepcopy(STANDARD)
    for i, step in enumerate(spec):
        step["created"] = T - timedelta(days=days, minutes=50 - 10 * i)
        step["valid_until"] = T + timedelta(days=365, hours=-i)
    return spec
