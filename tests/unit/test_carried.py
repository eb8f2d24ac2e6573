"""Carried receipts: one stable signed receipt through a signed handoff chain (essay,
Part IV, "every hop carries a stable decision receipt and adds a new signed
transformation"). Refusals assert the reason code and its JSON path.
"""

from __future__ import annotations

import copy
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest

from handoffs._json import digest
from handoffs.contracts import (
    Registry,
)
from handoffs.receivers import (
    Gate,
    Receiver,
    Step,
    StrictContractReceiver,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
    Verdict,
)
from handoffs.receivers._carried import (
    CARRY_PIN,
    carried_receipt,
    carry,
    receipt_pin,
)
from handoffs.receivers.chains import HandoffChain
from worlds.carried import (
    CONTRACT,
    FINAL,
    KEYS,
    ORIGIN,
    RELAY,
    RING,
    STABLE,
    T,
    carrier,
    chain,
    chain_receiver,
    receipt,
)


def test_a_stable_receipt_through_signed_hops_is_decided_from_the_receipt() -> None:
    receiver = carrier()
    assert isinstance(receiver, Receiver)
    assert not receiver.deterministic  # the chain receiver keeps a replay store
    assert carrier(chain_receiver=chain_receiver(replay=None)).deterministic
    decision = receiver.receive(carried_receipt(STABLE, chain((STABLE, STABLE))))
    assert (decision.verdict, decision.action, decision.reasons) == (Verdict.ACCEPT, "GO", ())
    assert decision.receiver == "carried-receipt"
    assert decision.record["receipt_digest"] == digest(STABLE)
    assert decision.record["carried_by"] == [ORIGIN, RELAY]
    assert decision.record["chain_digest"].startswith("sha256:")
    assert decision.record["rule"] == "default"


def test_the_decision_is_the_receivers_own() -> None:
    risky = receipt(0.06, 0.09)
    decision = carrier().receive(carried_receipt(risky, chain((risky, risky))))
    assert (decision.verdict, decision.action) == (Verdict.ACCEPT, "STOP")


def test_an_undetermined_receipt_escalates() -> None:
    open_ = receipt(0.03, 0.07)
    decision = carrier().receive(carried_receipt(open_, chain((open_, open_))))
    assert (decision.verdict, decision.action) == (Verdict.ESCALATE, "STOP")
    assert [(r.code, r.json_path) for r in decision.reasons] == [
        ("undetermined", "$.receipt.decision_state")]


def test_bytes_are_parsed_with_limits() -> None:
    from handoffs._json import canonical_bytes

    message = canonical_bytes(carried_receipt(STABLE, chain((STABLE, STABLE))))
    assert carrier().receive(message).verdict is Verdict.ACCEPT
    assert carrier().receive(b'{"receipt": 1, "receipt": 2}').reasons[0].code == "duplicate-key"


@pytest.mark.parametrize(("message", "paths"), [
    ([], ["$"]),
    ({"receipt": STABLE}, ["$.chain"]),
    ({"receipt": "x", "chain": []}, ["$.receipt", "$.chain"]),
])
def test_shape(message: Any, paths: list[str]) -> None:
    decision = carrier().receive(message)
    assert (decision.verdict, decision.action, decision.step) == (
        Verdict.REJECT, "STOP", Step.PARSE)
    assert [(r.code, r.json_path) for r in decision.reasons] == [
        ("carrier-invalid", p) for p in paths]


def test_a_re_encoded_receipt_is_not_the_carried_one() -> None:
    relayed = receipt(0.045, 0.045, sender=RELAY)
    decision = carrier().receive(carried_receipt(relayed, chain((STABLE, relayed))))
    assert decision.verdict is Verdict.REJECT
    assert [(r.code, r.json_path) for r in decision.reasons] == [
        ("receipt-unattributed", "$.receipt.sender"),
        ("receipt-not-carried", "$.chain.hops[0].transformation"),
    ]


def test_every_hop_must_pin_the_receipt() -> None:
    message = carried_receipt(STABLE, chain((STABLE, STABLE),
                                            notes=(carry("measured p", STABLE), "forwarded")))
    decision = carrier().receive(message)
    assert [(r.code, r.json_path) for r in decision.reasons] == [
        ("receipt-not-carried", "$.chain.hops[1].transformation")]
    assert "pins no receipt" in decision.reasons[0].message


def test_a_changed_receipt_fails_its_proof() -> None:
    changed = copy.deepcopy(STABLE)
    changed["decision_state"]["p"] = {"lo": 0.001, "hi": 0.002}
    decision = carrier().receive(carried_receipt(changed, chain((changed, changed))))
    assert decision.verdict is Verdict.REJECT
    assert decision.step is Step.PROOFS
    assert decision.reasons[0].json_path.startswith("$.receipt")


def test_case_mismatch() -> None:
    other = receipt(case_id="case-2")
    decision = carrier().receive(carried_receipt(other, chain((other, other))))
    assert [(r.code, r.json_path) for r in decision.reasons] == [
        ("case-mismatch", "$.receipt.case_id")]


def test_chain_refusals_are_passed_on_at_their_path() -> None:
    decision = carrier().receive(carried_receipt(STABLE, chain((STABLE, STABLE),
                                                               last="elsewhere")))
    assert decision.verdict is Verdict.REJECT
    assert ("wrong-audience", "$.chain.hops[1].receiver") in [
        (r.code, r.json_path) for r in decision.reasons]


def test_chain_escalation_is_passed_on() -> None:
    approval = carrier(chain_receiver=chain_receiver(required_roles={"approver"}))
    decision = approval.receive(carried_receipt(STABLE, chain((STABLE, STABLE))))
    assert (decision.verdict, decision.action) == (Verdict.ESCALATE, "STOP")
    assert [(r.code, r.json_path) for r in decision.reasons] == [
        ("approval-missing", "$.chain.hops")]
    proposal = carrier(chain_receiver=chain_receiver(required_roles={"proposer"}))
    decision = proposal.receive(carried_receipt(STABLE, chain((STABLE, STABLE))))
    assert (decision.verdict, decision.action) == (Verdict.REJECT, "STOP")
    assert [r.code for r in decision.reasons] == ["role-missing"]


def test_a_relay_without_a_grant_cannot_pose_as_the_originator() -> None:
    own = receipt(0.045, 0.045, sender=RELAY, granted=False)
    built = HandoffChain.start(case_id="case-1").add_hop(
        KEYS[RELAY], sender=RELAY,
        role="investigator", receiver=FINAL, authority="ADVISE",
        valid_until=T + timedelta(hours=1), transformation=carry("mine", own),
        created=T - timedelta(minutes=5))
    decision = carrier().receive(carried_receipt(own, built.to_json()))
    assert [(r.code, r.json_path) for r in decision.reasons] == [
        ("grant-missing", "$.receipt.grant")]


def test_a_carried_message_is_accepted_once() -> None:
    receiver = carrier()  # the chain receiver's store; the receipt gate keeps none here
    message = carried_receipt(STABLE, chain((STABLE, STABLE)))
    assert receiver.receive(message).verdict is Verdict.ACCEPT
    again = receiver.receive(message)
    assert (again.verdict, again.action, again.step) == (Verdict.REJECT, "STOP", Step.PROOFS)
    assert [(r.code, r.json_path) for r in again.reasons] == [("replayed", "$.chain.id")]


def test_one_shared_sqlite_store_claims_the_chain_and_the_receipt_apart(
    tmp_path: Path,
) -> None:
    """Chain and receipt share a store and even an id: each is claimed once, apart."""
    from handoffs.service import open_store

    store = open_store(tmp_path / "replay.sqlite")
    try:
        gate = Gate(identity=FINAL, trust=RING, registry=Registry.of(CONTRACT),
                    replay=store, clock=lambda: T)
        receiver = carrier(chain_receiver=chain_receiver(replay=store),
                           receipt_receiver=StrictContractReceiver(gate))
        same_id = chain((STABLE, STABLE), id=STABLE["id"])
        first = receiver.receive(carried_receipt(STABLE, same_id))
        assert (first.verdict, first.reasons) == (Verdict.ACCEPT, ())
        assert store.seen(STABLE["id"])
        assert store.seen(f"handoff-chain:{STABLE['id']}/2")
        # The same message again: the chain is the replay (checked first).
        again = receiver.receive(carried_receipt(STABLE, same_id))
        assert [(r.code, r.json_path) for r in again.reasons] == [("replayed", "$.chain.id")]
        # The receipt re-carried in a fresh chain, signed again by the same hops: the
        # chain is new, the receipt is the replay.
        rewrapped = receiver.receive(carried_receipt(STABLE, chain((STABLE, STABLE))))
        assert (rewrapped.verdict, rewrapped.action) == (Verdict.REJECT, "STOP")
        assert [(r.code, r.json_path) for r in rewrapped.reasons] == [
            ("replayed", "$.receipt.id")]
    finally:
        store.close()


def test_carry_and_pin() -> None:
    note = carry("forwarded", STABLE)
    assert note == f"forwarded [{CARRY_PIN} {receipt_pin(STABLE)}]"
    assert receipt_pin(STABLE) == digest(STABLE)
    with pytest.raises(ValueError, match="already pins"):
        carry(note, STABLE)


def test_construction_fails_closed() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeConfigurationWarning)
        unsafe = Gate(identity=FINAL, trust=UnsafeNoProofs(), registry=Registry.of(CONTRACT))
    with pytest.raises(ValueError, match="does not verify proofs"):
        carrier(receipt_receiver=StrictContractReceiver(unsafe))
    elsewhere = Gate(identity="someone-else", trust=RING, registry=Registry.of(CONTRACT))
    with pytest.raises(ValueError, match="both must be this receiver"):
        carrier(receipt_receiver=StrictContractReceiver(elsewhere))
    with pytest.raises(TypeError, match="IdentityCompositionReceiver"):
        carrier(chain_receiver=object())
    with pytest.raises(TypeError, match="Receiver protocol"):
        carrier(receipt_receiver=object())
    with pytest.raises(ValueError, match="action identifier"):
        carrier(fail_closed_action="")


def test_an_internal_failure_fails_closed() -> None:
    @attrs.frozen
    class Broken:
        name: str = "broken"
        deterministic: bool = True

        def receive(self, message: Any) -> Any:
            raise RuntimeError("boom")

    decision = carrier(receipt_receiver=Broken()).receive(
        carried_receipt(STABLE, chain((STABLE, STABLE))))
    assert (decision.verdict, decision.action) == (Verdict.REJECT, "STOP")
    assert [r.code for r in decision.reasons] == ["receiver-error"]
