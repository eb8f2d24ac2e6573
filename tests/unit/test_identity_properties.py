"""Property tests for the identity-composition receiver over generated chains.

Valid chains of 1–6 hops (random roles, keys, expiries, narrowing points) are
accepted, and their effective validity is the earliest expiry in the chain. One
random corruption of such a chain — drop a hop, swap two hops, tamper a digest,
re-sign a hop with a key lacking its role, widen authority, extend validity,
self-approve, misalign a hop, and a few more — is never accepted, and the decision
names the matching reason code.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import event, given
from hypothesis import strategies as st

from handoffs._json import digest
from handoffs._time import format_time
from handoffs.integrity import KeyRing, SigningKey, sign
from handoffs.receivers._decision import Decision, Verdict
from handoffs.receivers.chains import HandoffChain, IdentityCompositionReceiver
from handoffs.receivers.chains._contract import HANDOFF_CHAIN_CONTRACT, HOP_PROOF_PURPOSE

NOW = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
CASE = "case-7"
LEDGER = "ledger"
ACTIONS = ("RELEASE", "HOLD", "ESCALATE", "REJECT_DUPLICATE")

ROLES: dict[str, frozenset[str]] = {
    "inv-a": frozenset({"investigator"}),
    "inv-b": frozenset({"investigator"}),
    "inv-c": frozenset({"investigator"}),
    "prop-a": frozenset({"proposer"}),
    "prop-b": frozenset({"proposer", "approver"}),  # may approve, never its own proposal
    "appr-a": frozenset({"approver"}),
    "appr-b": frozenset({"approver"}),
    "exec-a": frozenset({"executor"}),
    "exec-b": frozenset({"executor"}),
    "outsider": frozenset({"auditor"}),
}
KEYS = {
    name: SigningKey(Ed25519PrivateKey.from_private_bytes(bytes([0x40 + i]) * 32))
    for i, name in enumerate(ROLES)
}
RING = KeyRing()
for _name, _roles in ROLES.items():
    RING = RING.enrol(KEYS[_name].public_key_multibase, controller=_name, roles=_roles,
                      not_before=NOW - timedelta(days=30))

CHAIN_ID = "urn:uuid:6f1c2a52-0d7e-4c43-9a59-1d4ad3e4b7a1"
# One receiver for every generated chain, all under one id: no replay store (the replay
# tests in test_identity.py give each chain a receiver with its own).
# Generated chains may lack investigators: proposer and approval are required here.
RECEIVER = IdentityCompositionReceiver(keyring=RING, identity=LEDGER, clock=lambda: NOW,
                                       replay=None, required_roles={"proposer", "approver"})


def by_role(role: str) -> list[str]:
    return [name for name, roles in ROLES.items() if role in roles and name != "prop-b"]


# --------------------------------------------------------------------- chain specs


@attrs.frozen
class Approval:
    signer: str
    created: datetime
    expires: datetime | None


@attrs.frozen
class HopSpec:
    """What one hop says and who signs it; the wire form is built from a list of these."""

    signer: str
    role: str
    authority: str
    action: str | None
    valid_until: datetime
    created: datetime
    expires: datetime | None
    approval: Approval | None = None
    receiver: str | None = None  # default: the next hop's signer, or the audience
    derived_override: str | None = None


def build(specs: list[HopSpec], *, audience: str = LEDGER) -> dict[str, Any]:
    """Sign every hop as its signer would, linking digests, approvals chained."""
    hops: list[dict[str, Any]] = []
    for k, spec in enumerate(specs):
        receiver = spec.receiver or (specs[k + 1].signer if k + 1 < len(specs) else audience)
        doc: dict[str, Any] = {
            "contract": HANDOFF_CHAIN_CONTRACT, "chain_id": CHAIN_ID, "hop": k, "case_id": CASE,
            "role": spec.role,
            "sender": spec.signer, "receiver": receiver, "authority": spec.authority,
            "valid_until": format_time(spec.valid_until),
            "derived_from": None if k == 0 else {"digest": digest(hops[-1])},
            "transformation": f"hop {k} by {spec.signer}",
        }
        if spec.action is not None:
            doc["action"] = spec.action
        if spec.derived_override is not None:
            doc["derived_from"] = {"digest": spec.derived_override}
        signed = sign(doc, KEYS[spec.signer], purpose=HOP_PROOF_PURPOSE, created=spec.created,
                      expires=spec.expires, proof_id=f"urn:uuid:hop-{k}")
        if spec.approval is not None:
            signed = sign(signed, KEYS[spec.approval.signer], purpose=HOP_PROOF_PURPOSE,
                          created=spec.approval.created, expires=spec.approval.expires,
                          proof_id=f"urn:uuid:approval-{k}", previous_proof=f"urn:uuid:hop-{k}")
        hops.append(signed)
    return {"contract": HANDOFF_CHAIN_CONTRACT, "id": CHAIN_ID, "case_id": CASE, "hops": hops}


def proposal_index(specs: list[HopSpec]) -> int:
    return next(k for k, spec in enumerate(specs) if spec.role == "proposer")


def earliest_expiry(specs: list[HopSpec]) -> datetime:
    times = [spec.valid_until for spec in specs]
    times += [spec.expires for spec in specs if spec.expires is not None]
    times += [s.approval.expires for s in specs if s.approval and s.approval.expires]
    return min(times)


def ceilings(specs: list[HopSpec]) -> list[str]:
    """The authority each hop may claim in a valid chain (before it)."""
    result, ceiling = [], "ADVISE"
    for spec in specs:
        result.append(ceiling)
        ceiling = "DECIDE" if spec.approval is not None else spec.authority
    return result


_expiry = st.one_of(st.none(), st.integers(1, 3000).map(lambda m: NOW + timedelta(minutes=m)))


@st.composite
def valid_specs(draw: st.DrawFn, *, approved: bool = True) -> list[HopSpec]:
    """A valid chain: investigators, a proposal (approved), approver and executor hops."""
    n_inv = draw(st.integers(0, 3))
    investigators = draw(st.permutations(by_role("investigator")))[:n_inv]
    signers = [(name, "investigator") for name in investigators]
    signers.append((draw(st.sampled_from(["prop-a", "prop-b"])), "proposer"))
    if draw(st.booleans()):
        signers.append((draw(st.sampled_from(by_role("approver"))), "approver"))
    if draw(st.booleans()):
        signers.append((draw(st.sampled_from(by_role("executor"))), "executor"))
    proposal = n_inv
    after = len(signers) - proposal - 1
    decide_hops = draw(st.integers(0, after)) if approved else 0
    proposed = draw(st.sampled_from(ACTIONS))

    specs: list[HopSpec] = []
    created = NOW - timedelta(hours=6)
    valid_until = NOW + timedelta(minutes=draw(st.integers(1, 2000)))
    for k, (signer, role) in enumerate(signers):
        created += timedelta(minutes=draw(st.integers(0, 30)))
        if k:
            valid_until = max(valid_until - timedelta(minutes=draw(st.integers(0, 120))),
                              NOW + timedelta(minutes=1))
        if k < proposal:
            authority, action = "ADVISE", draw(st.sampled_from([None, *ACTIONS]))
        elif k == proposal:
            authority, action = "ADVISE", proposed
        elif k - proposal <= decide_hops:
            authority, action = "DECIDE", proposed
        else:
            authority, action = "ADVISE", draw(st.sampled_from([None, *ACTIONS]))
        approval = None
        if k == proposal and approved:
            approval_created = created + timedelta(minutes=draw(st.integers(0, 5)))
            approval = Approval(draw(st.sampled_from(by_role("approver"))), approval_created,
                                draw(_expiry))
        specs.append(HopSpec(signer, role, authority, action, valid_until, created,
                             draw(_expiry), approval))
        if approval is not None:
            created = approval.created
    return specs


def codes(decision: Decision) -> list[str]:
    return [reason.code for reason in decision.reasons]


# --------------------------------------------------------------- valid chains pass


@given(valid_specs())
def test_valid_chains_are_accepted_with_the_earliest_expiry(specs: list[HopSpec]) -> None:
    event(f"{len(specs)} hops")
    decision = RECEIVER.receive(build(specs))
    assert decision.verdict is Verdict.ACCEPT, decision.reasons
    assert 1 <= len(specs) <= 6
    assert decision.record["effective_valid_until"] == format_time(earliest_expiry(specs))
    # An ADVISE acceptance is advice: no executable action.
    decide = specs[-1].authority == "DECIDE"
    assert decision.action == (specs[-1].action if decide else None)
    assert decision.record.get("advice") == (None if decide else specs[-1].action)
    assert decision.authority == specs[-1].authority
    roles = decision.record["roles"]
    for spec in specs:
        assert spec.signer in roles[spec.role]
    assert specs[proposal_index(specs)].approval is not None
    assert roles["approver"] == sorted(
        {s.signer for s in specs if s.role == "approver"}
        | {s.approval.signer for s in specs if s.approval}
    )


@given(valid_specs(approved=False))
def test_unapproved_proposals_are_escalated_or_accepted_as_advice(specs: list[HopSpec]) -> None:
    message = build(specs)
    decision = RECEIVER.receive(message)
    assert decision.verdict is Verdict.ESCALATE
    assert codes(decision) == ["approval-missing"]
    advisory = attrs.evolve(RECEIVER, required_roles={"proposer"})
    assert advisory.receive(message).verdict is Verdict.ACCEPT


@given(valid_specs())
def test_the_builders_make_the_same_chains(specs: list[HopSpec]) -> None:
    chain = HandoffChain.start(case_id=CASE, id=CHAIN_ID)
    for k, spec in enumerate(specs):
        chain = chain.add_hop(
            KEYS[spec.signer], sender=spec.signer if k == 0 else None, role=spec.role,
            receiver=specs[k + 1].signer if k + 1 < len(specs) else LEDGER,
            authority=spec.authority, action=spec.action, valid_until=spec.valid_until,
            transformation=f"hop {k}", created=spec.created, expires=spec.expires)
        if spec.approval is not None:
            chain = chain.approve(KEYS[spec.approval.signer], created=spec.approval.created,
                                  expires=spec.approval.expires)
    built, manual = RECEIVER.receive(chain.to_bytes()), RECEIVER.receive(build(specs))
    assert built.verdict is manual.verdict is Verdict.ACCEPT
    assert {**built.record, "chain_digest": None} == {**manual.record, "chain_digest": None}


# ---------------------------------------------------------------- one corruption

Corruption = Callable[[st.DataObject, list[HopSpec]], tuple[dict[str, Any], str, Decision | None]]


def _drop(data: st.DataObject, specs: list[HopSpec]) -> tuple[dict[str, Any], str, None]:
    message = build(specs)
    n = len(specs)
    i = data.draw(st.integers(0, n - 1), label="drop")
    del message["hops"][i]
    expected = "chain-empty" if n == 1 else "wrong-audience" if i == n - 1 else "chain-broken"
    return message, expected, None


def _swap(data: st.DataObject, specs: list[HopSpec]) -> tuple[dict[str, Any], str, None]:
    message = build(specs)
    i, j = sorted(data.draw(st.lists(st.integers(0, len(specs) - 1), min_size=2, max_size=2,
                                     unique=True), label="swap"))
    hops = message["hops"]
    hops[i], hops[j] = hops[j], hops[i]
    return message, "hop-order", None


def _tamper_digest(data: st.DataObject, specs: list[HopSpec]) -> tuple[dict[str, Any], str, None]:
    k = data.draw(st.integers(0, len(specs) - 1), label="hop")
    fake = "sha256:" + data.draw(st.text("0123456789abcdef", min_size=64, max_size=64))
    specs = copy.copy(specs)
    specs[k] = attrs.evolve(specs[k], derived_override=fake)
    return build(specs), "chain-broken", None


def _lacking_role(data: st.DataObject, specs: list[HopSpec]) -> tuple[dict[str, Any], str, None]:
    specs = copy.copy(specs)
    k = data.draw(st.integers(0, len(specs) - 1), label="hop")
    p = proposal_index(specs)
    if k == p and data.draw(st.booleans(), label="the approval"):
        approval = specs[p].approval
        assert approval is not None
        signer = data.draw(st.sampled_from(
            [name for name, roles in ROLES.items() if "approver" not in roles]))
        specs[p] = attrs.evolve(specs[p], approval=attrs.evolve(approval, signer=signer))
    else:
        signer = data.draw(st.sampled_from(
            [name for name, roles in ROLES.items() if specs[k].role not in roles]))
        specs[k] = attrs.evolve(specs[k], signer=signer)
    return build(specs), "role-not-held", None


def _widen(data: st.DataObject, specs: list[HopSpec]) -> tuple[dict[str, Any], str, None]:
    candidates = [k for k, ceiling in enumerate(ceilings(specs)) if ceiling == "ADVISE"]
    k = data.draw(st.sampled_from(candidates), label="hop")
    specs = copy.copy(specs)
    specs[k] = attrs.evolve(specs[k], authority="DECIDE",
                            action=specs[k].action or data.draw(st.sampled_from(ACTIONS)))
    return build(specs), "authority-widened", None


def _extend(data: st.DataObject, specs: list[HopSpec]) -> tuple[dict[str, Any], str, None]:
    k = data.draw(st.integers(1, len(specs) - 1), label="hop")
    longer = specs[k - 1].valid_until + timedelta(minutes=data.draw(st.integers(1, 600)))
    specs = copy.copy(specs)
    specs[k] = attrs.evolve(specs[k], valid_until=longer)
    return build(specs), "validity-extended", None


def _self_approve(data: st.DataObject, specs: list[HopSpec]) -> tuple[dict[str, Any], str, None]:
    p = proposal_index(specs)
    approval = specs[p].approval
    assert approval is not None
    specs = copy.copy(specs)
    specs[p] = attrs.evolve(specs[p], signer="prop-b",
                            approval=attrs.evolve(approval, signer="prop-b"))
    return build(specs), "separation-of-duties", None


def _misalign(data: st.DataObject, specs: list[HopSpec]) -> tuple[dict[str, Any], str, None]:
    k = data.draw(st.integers(0, len(specs) - 2), label="hop")
    other = data.draw(st.sampled_from([n for n in ROLES if n != specs[k + 1].signer]))
    specs = copy.copy(specs)
    specs[k] = attrs.evolve(specs[k], receiver=other)
    return build(specs), "chain-misaligned", None


def _strip_approval(data: st.DataObject, specs: list[HopSpec]) -> tuple[dict[str, Any], str, None]:
    message = build(specs)
    p = proposal_index(specs)
    message["hops"][p]["proof"] = message["hops"][p]["proof"][0]
    if p == len(specs) - 1:
        return message, "approval-missing", None
    return message, "chain-broken", None


def _change_action(data: st.DataObject, specs: list[HopSpec]) -> tuple[dict[str, Any], str, None]:
    decided = [k for k, spec in enumerate(specs) if spec.authority == "DECIDE"]
    k = data.draw(st.sampled_from(decided), label="hop")
    action = data.draw(st.sampled_from([a for a in ACTIONS if a != specs[k].action]))
    specs = copy.copy(specs)
    specs[k] = attrs.evolve(specs[k], action=action)
    return build(specs), "approval-not-exact", None


def _expire(data: st.DataObject, specs: list[HopSpec]) -> tuple[dict[str, Any], str, Decision]:
    later = earliest_expiry(specs) + timedelta(seconds=data.draw(st.integers(1, 86_400)))
    proofs_expired = any(
        expires is not None and expires < later
        for spec in specs
        for expires in (spec.expires, spec.approval.expires if spec.approval else None)
    )
    late = attrs.evolve(RECEIVER, clock=lambda: later)
    return {}, "proof-expired" if proofs_expired else "chain-expired", late.receive(build(specs))


def _audience(data: st.DataObject, specs: list[HopSpec]) -> tuple[dict[str, Any], str, None]:
    return build(specs, audience=data.draw(st.sampled_from(sorted(ROLES)))), "wrong-audience", None


def _splice_case(data: st.DataObject, specs: list[HopSpec]) -> tuple[dict[str, Any], str, None]:
    message = build(specs)
    message["case_id"] = "case-8"
    return message, "case-mismatch", None


def _rename(data: st.DataObject, specs: list[HopSpec]) -> tuple[dict[str, Any], str, None]:
    message = build(specs)
    message["id"] = "urn:uuid:" + str(data.draw(st.uuids(), label="id"))
    return message, "chain-id-mismatch", None


def applicable(specs: list[HopSpec]) -> list[Corruption]:
    found: list[Corruption] = [
        _drop, _tamper_digest, _lacking_role, _widen, _self_approve, _strip_approval,
        _expire, _audience, _splice_case, _rename,
    ]
    if len(specs) > 1:
        found += [_swap, _extend, _misalign]
    if any(spec.authority == "DECIDE" for spec in specs):
        found.append(_change_action)
    return found


@given(valid_specs(), st.data())
def test_one_corruption_is_never_accepted(specs: list[HopSpec], data: st.DataObject) -> None:
    corrupt = data.draw(st.sampled_from(applicable(specs)), label="corruption")
    event(f"{corrupt.__name__.lstrip('_')} on {len(specs)} hops")
    message, expected, decided = corrupt(data, specs)
    decision = decided if decided is not None else RECEIVER.receive(message)
    assert decision.verdict is not Verdict.ACCEPT
    assert expected in codes(decision), (corrupt.__name__, decision.reasons)
    if expected == "approval-missing":
        assert decision.verdict is Verdict.ESCALATE
    else:
        assert decision.verdict is Verdict.REJECT


_LEAVES = st.sampled_from(["role", "sender", "receiver", "authority", "valid_until",
                           "transformation", "case_id", "contract", "action", "chain_id"])


@given(valid_specs(), st.data())
def test_any_change_to_a_signed_hop_is_refused(specs: list[HopSpec], data: st.DataObject) -> None:
    message = build(specs)
    hop = message["hops"][data.draw(st.integers(0, len(specs) - 1), label="hop")]
    name = data.draw(_LEAVES.filter(lambda n: n in hop), label="member")
    hop[name] = hop[name] + data.draw(st.sampled_from(["x", "0", " ", "\n"]))
    decision = RECEIVER.receive(message)
    assert decision.verdict is Verdict.REJECT
    assert {"bad-signature", "schema-invalid"} & set(codes(decision))


@given(st.one_of(st.binary(max_size=200), st.text(max_size=200),
                 st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                              lambda inner: st.lists(inner, max_size=4)
                              | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                              max_leaves=20)))
def test_arbitrary_input_never_raises_and_is_never_accepted(message: Any) -> None:
    decision = RECEIVER.receive(message)
    assert decision.verdict is Verdict.REJECT
    assert decision.reasons
