"""The handover every adapter routes on, without any framework."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from adapter_world import (
    EXPIRED,
    Replayer,
    World,
    case_ref,
    content_for,
    make_sender,
    tamper,
    with_governance,
)
from handoffs import MissingExtra
from handoffs.adapters import Case, case_of, hand_over
from handoffs.adapters._handover import admit, require
from handoffs.contracts import Governance, Sender
from handoffs.contracts._receipt import IDENTIFIER_RULE
from handoffs.receivers import StrictContractReceiver, Verdict


def test_a_genuine_receipt_is_accepted_and_carried(signer: Sender[Any, Any],
                                                   receiver: StrictContractReceiver) -> None:
    handover = hand_over(content_for("routine-01"), signer=signer, receiver=receiver,
                         case=case_ref("routine-01"))
    assert handover.accepted
    assert handover.refused_by is None
    assert handover.decision.action == "RELEASE"
    assert handover.receipt is not None
    assert handover.receipt["authority"] == "ADVISE"
    assert handover.receipt["case_id"] == "routine-01"
    assert handover.receipt["proof"]["proofPurpose"] == "assertionMethod"
    text = json.loads(handover.to_text())
    assert text["handoff"] == "accepted"


def test_the_next_model_gets_the_content_and_a_reference_not_the_proofs(
        signer: Sender[Any, Any], receiver: StrictContractReceiver) -> None:
    """Regression (#23): every handoff handed ~2 kB of grant and proof to the next
    model; it gets the content (with the stamped governance) and the receipt's id and
    the digest of the exact bytes the gate verified."""
    handover = hand_over(content_for("routine-01"), signer=signer, receiver=receiver,
                         case=case_ref("routine-01"))
    assert handover.receipt is not None
    assert handover.message is not None
    text = json.loads(handover.to_text())
    assert text["content"] == {key: value for key, value in handover.receipt.items()
                               if key not in {"grant", "proof", "id", "contract"}}
    assert text["content"]["authority"] == "ADVISE"
    assert text["receipt"] == {
        "id": handover.receipt["id"], "contract": handover.receipt["contract"],
        "digest": "sha256:" + hashlib.sha256(handover.message).hexdigest()}
    assert '"proof"' not in handover.to_text()
    assert '"grant"' not in handover.to_text()


@pytest.mark.parametrize("form", ["bytes", "text", "dict"])
def test_admit_takes_bytes_text_or_a_parsed_receipt_and_never_raises(
        form: str, signer: Sender[Any, Any],
        make_receiver: Callable[..., StrictContractReceiver]) -> None:
    """Regression (#23): ``admit()`` raised ``AttributeError`` on a dict receipt after
    the gate had accepted it."""
    signed = signer.sign(content_for("routine-01"), case_id="routine-01",
                         evidence_refs=case_ref("routine-01").evidence_refs)
    message = {"bytes": signed, "text": signed.decode(), "dict": json.loads(signed)}[form]
    handover = admit(message, receiver=make_receiver())
    assert handover.accepted
    assert handover.receipt == json.loads(signed)
    assert handover.message is not None
    assert json.loads(handover.message) == json.loads(signed)
    for junk in ({"not": "a receipt"}, b"\xff", 42, None):
        refused = admit(junk, receiver=make_receiver())  # type: ignore[arg-type]
        assert not refused.accepted
        assert refused.receipt is None


def test_content_as_json_text_is_parsed(signer: Sender[Any, Any],
                                        receiver: StrictContractReceiver) -> None:
    handover = hand_over(json.dumps(content_for("duplicate-02")), signer=signer,
                         receiver=receiver, case=case_ref("duplicate-02"))
    assert handover.accepted
    assert handover.decision.action == "REJECT_DUPLICATE"


@pytest.mark.parametrize(("content", "code", "path"), [
    (with_governance(content_for("routine-01")), "untrusted-governance", "$.authority"),
    ({**content_for("routine-01"), "receiver": "anyone"}, "untrusted-governance",
     "$.receiver"),
    ("[1, 2]", "not-an-object", "$"),
    ("{not json", "invalid-json", "$"),
    ({**content_for("routine-01"), "proposed_action": "PAY_TWICE"}, "schema-invalid",
     "$.proposed_action"),
])
def test_the_sender_refuses_what_a_model_may_not_write(
        signer: Sender[Any, Any], receiver: StrictContractReceiver, content: Any, code: str,
        path: str | None) -> None:
    handover = hand_over(content, signer=signer, receiver=receiver, case=case_ref("routine-01"))
    assert handover.refused_by == "sender"
    assert handover.message is None
    assert handover.receipt is None
    assert handover.decision.verdict is Verdict.REJECT
    assert handover.decision.action == "ESCALATE"  # the contract's fail-closed action
    (reason,) = handover.decision.reasons
    assert reason.code == code
    if path is not None:
        assert reason.json_path == path


def test_refusals_by_the_gate(world: World, signer: Sender[Any, Any],
                              make_receiver: Callable[..., StrictContractReceiver],
                              replayer: Replayer) -> None:
    content, case = content_for("routine-01"), case_ref("routine-01")
    tampered = hand_over(content, signer=signer, receiver=make_receiver(), case=case,
                         transport=tamper)
    assert (tampered.refused_by, tampered.decision.reasons[0].code) == ("gate", "bad-signature")
    assert tampered.receipt is None

    receiver = make_receiver()
    first = hand_over(content, signer=signer, receiver=receiver, case=case, transport=replayer)
    again = hand_over(content, signer=signer, receiver=receiver, case=case, transport=replayer)
    assert first.accepted
    assert again.decision.reasons[0].code == "replayed"

    elsewhere = hand_over(content, signer=make_sender(world, receiver="case-owner-2"),
                          receiver=make_receiver(), case=case)
    assert elsewhere.decision.reasons[0].code == "wrong-audience"

    late = hand_over(content, signer=signer, receiver=make_receiver(at=EXPIRED), case=case)
    assert late.decision.reasons[0].code == "receipt-expired"


def test_case_of_reads_attributes_keys_or_a_case() -> None:
    class Context:
        case_id = "x-1"
        evidence_refs = ("evidence://x/1",)

    expected = Case("x-1", ("evidence://x/1",))
    assert case_of(Context()) == expected
    assert case_of({"case_id": "x-1", "evidence_refs": ["evidence://x/1"]}) == expected
    assert case_of(expected) is expected
    with pytest.raises(TypeError, match="names no case"):
        case_of(object())


def test_a_missing_framework_is_a_missing_extra() -> None:
    with pytest.raises(MissingExtra, match=r"pip install 'handoffs\[demo\]'") as caught:
        require("no_such_framework_for_handoffs", extra="demo", feature="the demo adapter")
    assert isinstance(caught.value, ImportError)
    assert caught.value.module == "no_such_framework_for_handoffs"


def test_a_case_id_off_the_rule_is_an_explained_refusal(
        signer: Sender[Any, Any], receiver: StrictContractReceiver) -> None:
    """Regression (#23): ``case_id='order 1842'`` escalated without saying why; the
    refusal names the member, the rule and the helper that makes a valid id."""
    refs = case_ref("routine-01").evidence_refs
    handover = hand_over(content_for("routine-01"), signer=signer, receiver=receiver,
                         case=Case(case_id="order 1842", evidence_refs=refs))
    assert handover.refused_by == "sender"
    (reason,) = handover.decision.reasons
    assert (reason.code, reason.json_path) == ("invalid-case-id", "$.case_id")
    assert IDENTIFIER_RULE in reason.message
    assert "case_id_from('order 1842')" in reason.message
    fixed = hand_over(content_for("routine-01"), signer=signer, receiver=receiver,
                      case=Case(case_id=Governance.case_id_from("order 1842"), evidence_refs=refs))
    assert fixed.message is not None  # signed


class Referring:
    """A receiver contract of the user's own: the strict receiver's decision, but it
    refers every admitted receipt (ESCALATE), as a receiver that wants a human does."""

    name, deterministic = "referring", True

    def __init__(self, inner: StrictContractReceiver) -> None:
        self.inner = inner

    def receive(self, message: Any) -> Any:
        decision = self.inner.receive(message)
        return attrs.evolve(decision, verdict=Verdict.ESCALATE) if decision.admitted \
            else decision


@pytest.mark.parametrize("mode", ["refuse", "continue"])
def test_the_ruling_decides_the_outcome(signer: Sender[Any, Any],
                                        make_receiver: Callable[..., StrictContractReceiver],
                                        mode: str) -> None:
    from adapter_world import OVERRULED_CASE, overruled_content

    case = case_ref(OVERRULED_CASE)
    agreed = hand_over(content_for(OVERRULED_CASE), signer=signer, receiver=make_receiver(),
                       case=case, overruled=mode)
    assert (agreed.outcome, agreed.overruled, agreed.accepted) == ("accepted", False, True)
    assert agreed.ruling == {"action": "HOLD", "proposed_action": "HOLD", "overruled": False}
    overruled = hand_over(overruled_content(), signer=signer, receiver=make_receiver(),
                          case=case, overruled=mode)
    assert overruled.overruled
    assert overruled.decision.reasons == ()  # the gate's decision is untouched
    if mode == "refuse":
        assert (overruled.outcome, overruled.accepted, overruled.refused_by) == (
            "decided-otherwise", False, "gate")
        assert overruled.reasons[0].code == "decided-otherwise"
        assert (overruled.content, overruled.reference) == (None, None)
    else:
        assert (overruled.outcome, overruled.accepted) == ("overruled", True)
        assert overruled.reasons == ()
        assert overruled.content is not None
        assert overruled.content["overruled_proposal"] == "RELEASE"
        assert "proposed_action" not in overruled.content
    # An escalation is never continued: the route is the refusal's, decided-otherwise.
    referred = hand_over(content_for(OVERRULED_CASE), signer=signer,
                         receiver=Referring(make_receiver()), case=case, overruled=mode)
    assert (referred.outcome, referred.accepted) == ("decided-otherwise", False)
    assert "escalated" in referred.reasons[0].message
    with pytest.raises(ValueError, match="on_overruled"):
        hand_over(content_for(OVERRULED_CASE), signer=signer, receiver=make_receiver(),
                  case=case, overruled="ignore")


@pytest.mark.parametrize("nothing", [None, "", b"  "])
def test_nothing_is_no_receipt(receiver: StrictContractReceiver, nothing: Any) -> None:
    handover = admit(nothing, receiver=receiver)
    assert [r.code for r in handover.decision.reasons] == ["no-receipt"]
    assert handover.refused_by == "gate"
