"""Identity composition: the handoff-chain model, its schema, builders and receiver.

Hostile cases assert the specific reason code and JSON path: broken and reordered
chains, self-approval, authority widening along a chain, and their neighbours.
"""

from __future__ import annotations

import copy
import json
import re
import warnings
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest
from jsonschema import Draft202012Validator

from handoffs._errors import (
    InvalidArgument,
    MalformedJSON,
    ProofError,
    ReceiptValidationError,
    UnknownContract,
)
from handoffs._json import digest
from handoffs._time import expired
from handoffs.contracts import ANY_AUDIENCE
from handoffs.integrity import KeyRing, SigningKey, sign
from handoffs.receivers._decision import Receiver, Step, Verdict
from handoffs.receivers._gate import UnsafeConfigurationWarning
from handoffs.receivers._replay import MemoryReplayStore
from handoffs.receivers.chains import (
    HandoffChain,
    IdentityCompositionReceiver,
    SeparationOfDuties,
)
from handoffs.receivers.chains._contract import (
    HANDOFF_CHAIN_CONTRACT,
    HANDOFF_CHAIN_SCHEMA_ID,
    HOP_PROOF_PURPOSE,
    HopRole,
)
from handoffs.receivers.chains._format import DerivedFrom, Hop
from handoffs.receivers.chains._schema import handoff_chain_schema
from worlds.chains import (
    CASE,
    CHAIN_ID,
    KEYS,
    LEDGER,
    RING,
    STANDARD,
    T,
    codes,
    make_chain,
    paths,
    places,
    receiver,
    resigned,
    with_step,
)
from worlds.chains import aged as _aged

ROOT = Path(__file__).resolve().parents[2]

# ----------------------------------------------------------------- the happy path


def test_standard_chain_is_accepted_with_roles_and_validity() -> None:
    chain = make_chain(STANDARD)
    decision = receiver().receive(chain.to_bytes())
    assert decision.verdict is Verdict.ACCEPT, decision.reasons
    assert decision.reasons == ()
    assert decision.action == "RELEASE"
    assert decision.authority == "DECIDE"
    assert decision.sender == "payments-executor"
    assert decision.step is Step.POLICY
    assert decision.receiver == "identity-composition"
    assert decision.contract == HANDOFF_CHAIN_CONTRACT
    assert decision.receipt_id == chain.id
    assert decision.record == {
        "hops": 4,
        "effective_valid_until": "2026-01-05T11:00:00Z",
        "roles": {
            "investigator": ["evidence-specialist"],
            "proposer": ["case-owner"],
            "approver": ["payments-approver"],
            "executor": [LEDGER, "payments-executor"],
        },
        "approved_action": "RELEASE",
        "chain_digest": chain.hops[-1].digest,
    }
    json.dumps(decision.to_json())  # JSON-ready


@pytest.mark.parametrize("form", ["bytes", "text", "mapping"])
def test_every_input_form_is_accepted(form: str) -> None:
    chain = make_chain(STANDARD)
    forms: dict[str, bytes | str | dict[str, Any]] = {
        "bytes": chain.to_bytes(),
        "text": json.dumps(chain.to_json(), indent=2),
        "mapping": chain.to_json(),
    }
    assert receiver().receive(forms[form]).verdict is Verdict.ACCEPT


def test_receiver_implements_the_protocol() -> None:
    r = receiver()
    assert isinstance(r, Receiver)
    assert r.name == "identity-composition"
    assert isinstance(r.replay, MemoryReplayStore)  # replay protection is on by default
    assert r.deterministic is False
    assert receiver(replay=None).deterministic is True


def test_effective_validity_includes_proof_expiry() -> None:
    spec = with_step(1, expires=T + timedelta(minutes=30))
    decision = receiver().receive(make_chain(spec).to_bytes())
    assert decision.verdict is Verdict.ACCEPT
    assert decision.record["effective_valid_until"] == "2026-01-05T10:30:00Z"


def test_narrowing_after_approval_is_allowed() -> None:
    spec = with_step(3, authority="ADVISE", action="HOLD")
    decision = receiver().receive(make_chain(spec).to_bytes())
    assert decision.verdict is Verdict.ACCEPT, decision.reasons
    assert decision.authority == "ADVISE"
    # Advice is not an action: the hop's action is reported as advice, not taken.
    assert decision.action is None
    assert decision.record["advice"] == "HOLD"
    # An ADVISE chain does not make the receiver an executor.
    assert decision.record["roles"]["executor"] == ["payments-executor"]


def test_shortest_approved_chain_proposal_straight_to_the_receiver() -> None:
    spec = [copy.deepcopy(STANDARD[1])]
    decision = receiver(required_roles={"proposer", "approver"}).receive(
        make_chain(spec).to_bytes())
    assert decision.verdict is Verdict.ACCEPT
    assert decision.authority == "ADVISE"
    assert decision.record["approved_action"] == "RELEASE"


def test_role_is_checked_at_signing_time_not_now() -> None:
    # The approver's key held the role until an hour ago; its approval predates that.
    old, new = SigningKey.generate(), SigningKey.generate()
    ring = (
        RING.enrol(old.public_key_multibase, controller="rotating-approver", roles={"approver"},
                   not_before=T - timedelta(days=30), not_after=T - timedelta(hours=1))
        .enrol(new.public_key_multibase, controller="rotating-approver", roles={"auditor"},
               not_before=T - timedelta(hours=1))
    )
    chain = HandoffChain.start(case_id=CASE)
    chain = chain.add_hop(KEYS["case-owner"], sender="case-owner", role="proposer",
                          receiver=LEDGER, authority="ADVISE", action="RELEASE",
                          valid_until=T + timedelta(hours=1), transformation="proposed",
                          created=T - timedelta(hours=3))
    accepted = chain.approve(old, created=T - timedelta(hours=2))
    decision = receiver(keyring=ring, required_roles={"proposer", "approver"}).receive(
        accepted.to_bytes())
    assert decision.verdict is Verdict.ACCEPT, decision.reasons
    assert decision.record["roles"]["approver"] == ["rotating-approver"]
    # Unless the receiver also requires the role now: the live key holds auditor only.
    decision = receiver(keyring=ring, required_roles={"proposer", "approver"},
                        require_current_roles=True).receive(accepted.to_bytes())
    assert codes(decision) == ["role-not-held"]
    assert paths(decision, "role-not-held") == ["$.hops[0].proof[1].verificationMethod"]
    assert "holds it now" in decision.reasons[0].message

    # Signed after the window closed: the key no longer stands for the approver.
    late = chain.approve(old, created=T - timedelta(minutes=5))
    decision = receiver(keyring=ring).receive(late.to_bytes())
    assert codes(decision) == ["key-not-valid"]
    assert paths(decision, "key-not-valid") == ["$.hops[0].proof[1].created"]

    # The rotated key signs fine but never held the approver role.
    rotated = chain.approve(new, created=T - timedelta(minutes=5))
    decision = receiver(keyring=ring).receive(rotated.to_bytes())
    assert codes(decision) == ["role-not-held"]
    assert paths(decision, "role-not-held") == ["$.hops[0].proof[1].verificationMethod"]


# ------------------------------------------------------------------- the typed model


def test_round_trip_through_json_and_bytes() -> None:
    chain = make_chain(STANDARD)
    assert HandoffChain.from_json(chain.to_bytes()) == chain
    assert HandoffChain.from_json(chain.to_json()) == chain
    assert HandoffChain.from_json(json.dumps(chain.to_json())) == chain


def test_hops_pin_their_parent_digest_with_proofs() -> None:
    chain = make_chain(STANDARD)
    assert chain.hops[0].derived_from is None
    for parent, child in zip(chain.hops, chain.hops[1:], strict=False):
        assert child.derived_from == DerivedFrom(digest(parent.to_json()))
        assert child.sender == parent.receiver
    proposal = chain.hops[1]
    assert len(proposal.proofs) == 2
    assert proposal.proofs[1]["previousProof"] == proposal.proofs[0]["id"]
    assert [hop.hop for hop in chain.hops] == [0, 1, 2, 3]
    assert {hop.case_id for hop in chain.hops} == {CASE}


def test_model_rejects_bad_values() -> None:
    base: dict[str, Any] = {
        "chain_id": CHAIN_ID, "hop": 0, "case_id": CASE, "role": "investigator", "sender": "a",
        "receiver": "b", "authority": "ADVISE", "valid_until": T, "derived_from": None,
        "transformation": "x",
    }
    Hop(**base)
    with pytest.raises(ValueError, match="not a valid identifier"):
        Hop(**{**base, "sender": "a\n"})
    with pytest.raises(ValueError, match=r"role must be one of .*got 'boss'") as info:
        Hop(**{**base, "role": "boss"})
    assert (info.value.code, info.value.json_path) == ("unknown-role", "$.role")
    with pytest.raises(ValueError, match="must name an action"):
        Hop(**{**base, "authority": "DECIDE"})
    with pytest.raises(ValueError, match="must name an action"):
        Hop(**{**base, "role": "proposer"})
    with pytest.raises(ValueError, match="timezone-aware"):
        Hop(**{**base, "valid_until": T.replace(tzinfo=None)})
    with pytest.raises(ValueError, match="transformation"):
        Hop(**{**base, "transformation": "x" * 501})
    with pytest.raises(ValueError, match="digest"):
        DerivedFrom("sha256:abc")
    with pytest.raises(ValueError, match="urn:uuid"):
        HandoffChain(id="chain-1", case_id=CASE)
    with pytest.raises(ValueError, match="urn:uuid"):
        Hop(**{**base, "chain_id": "chain-1"})


def test_hop_role_order() -> None:
    assert [role.rank for role in HopRole] == [0, 1, 2, 3]
    assert HopRole("approver") is HopRole.APPROVER


# ------------------------------------------------------------ strict loading, schema


def test_schema_file_matches_the_generator() -> None:
    path = ROOT / "schemas" / "handoff-chain" / "2.0.0.json"
    expected = json.dumps(handoff_chain_schema(), indent=2, ensure_ascii=False) + "\n"
    assert path.read_text(encoding="utf-8") == expected, (
        "schemas/handoff-chain/2.0.0.json drifted; regenerate it from handoff_chain_schema()"
    )


def test_the_chain_version_bump_is_the_one_the_schema_diff_requires() -> None:
    from handoffs.contracts.versions import ContractDiff

    old = json.loads((ROOT / "schemas" / "handoff-chain" / "1.0.0.json").read_text("utf-8"))
    found = ContractDiff.between_schemas(old, handoff_chain_schema())
    assert found.breaking
    assert found.required_bump == "major"
    found.check_version_bump()  # 1.0.0 → 2.0.0 is enough
    assert ("FIELD_ADDED_REQUIRED", "$.hops[*].chain_id") in {
        (f.code, f.json_path) for f in found.findings}


def _walk(schema: Any, path: str = "#") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(schema, dict):
        yield path, schema
        for key, value in schema.items():
            yield from _walk(value, f"{path}/{key}")
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            yield from _walk(value, f"{path}/{i}")


def test_schema_is_draft_2020_12_closed_and_described() -> None:
    schema = handoff_chain_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$id"] == HANDOFF_CHAIN_SCHEMA_ID == "urn:handoffs:schema:handoff-chain:2.0.0"
    for where, node in _walk(schema):
        if node.get("type") == "object" and "properties" in node:
            assert node.get("additionalProperties") is False, where
            for name, prop in node["properties"].items():
                assert prop.get("description"), f"{where}/properties/{name}"
    assert Draft202012Validator(schema).is_valid(make_chain(STANDARD).to_json())


def _doc() -> dict[str, Any]:
    return make_chain(STANDARD).to_json()


def _violations(doc: Any) -> list[str]:
    with pytest.raises(ReceiptValidationError) as info:
        HandoffChain.from_json(doc)
    assert info.value.contract == "handoff-chain"
    assert info.value.version == "2.0.0"
    return [str(v) for v in info.value.violations]


def test_loading_names_the_path_of_every_violation() -> None:
    doc = _doc()
    del doc["hops"][1]["receiver"]
    assert _violations(doc) == ["required field 'receiver' missing @ $.hops[1]"]

    doc = _doc()
    doc["hops"][2]["grant"] = {"authority": "DECIDE"}
    assert _violations(doc) == ["unknown field 'grant' @ $.hops[2]"]

    doc = _doc()
    doc["hops"][0]["authority"] = "OWN"
    assert _violations(doc) == ["expected one of ['ADVISE', 'DECIDE'], got 'OWN' @ "
                                "$.hops[0].authority"]

    doc = _doc()
    del doc["hops"][2]["action"]
    assert _violations(doc) == ["required field 'action' missing @ $.hops[2]"]


def test_loading_applies_exact_checks_the_patterns_cannot() -> None:
    doc = _doc()
    doc["hops"][1]["sender"] = "case-owner\n"
    assert _violations(doc) == ["not a valid identifier: 'case-owner\\n' @ $.hops[1].sender"]

    doc = _doc()
    doc["hops"][3]["valid_until"] = "2026-02-30T10:00:00Z"
    [violation] = _violations(doc)
    assert violation.endswith("@ $.hops[3].valid_until")

    doc = _doc()
    doc["hops"][2]["chain_id"] = doc["id"] + "\n"  # the schema's maxLength catches it
    assert _violations(doc) == [f"{doc['id'] + chr(10)!r} is too long @ $.hops[2].chain_id"]


def test_loading_refuses_bad_json_and_unknown_contracts() -> None:
    with pytest.raises(MalformedJSON, match="duplicate key 'authority'"):
        HandoffChain.from_json('{"authority": "ADVISE", "authority": "DECIDE"}')
    with pytest.raises(MalformedJSON) as info:
        HandoffChain.from_json("[]")
    assert info.value.code == "not-an-object"
    doc = _doc()
    doc["contract"] = "handoff-chain/1.1.0"
    with pytest.raises(UnknownContract, match=re.escape("unknown contract 'handoff-chain/1.1.0'")):
        HandoffChain.from_json(doc)
    del doc["contract"]
    with pytest.raises(UnknownContract) as unknown:
        HandoffChain.from_json(doc)
    assert unknown.value.code == "no-contract"


# ---------------------------------------------------------------------- builders


def test_builder_rejects_bad_arguments_before_signing() -> None:
    empty = HandoffChain.start(case_id=CASE)
    key = KEYS["case-owner"]
    args: dict[str, Any] = {
        "role": "proposer", "receiver": "x", "authority": "ADVISE", "action": "RELEASE",
        "valid_until": T, "transformation": "t", "created": T,
    }
    with pytest.raises(TypeError, match="sender="):
        empty.add_hop(key, **args)
    with pytest.raises(TypeError, match="timezone-aware"):
        empty.add_hop(key, sender="case-owner", **{**args, "created": T.replace(tzinfo=None)})
    with pytest.raises(TypeError, match="SigningKey"):
        empty.add_hop("not a key", sender="case-owner", **args)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must name an action"):
        empty.add_hop(key, sender="case-owner", **{**args, "action": None})
    with pytest.raises(ValueError, match="not a valid identifier"):
        HandoffChain.start(case_id="bad case")
    first = empty.add_hop(KEYS["evidence-specialist"], sender="evidence-specialist",
                          **{**args, "role": "investigator", "receiver": "case-owner"})
    assert first.hops[0].receiver == "case-owner"
    with pytest.raises(ValueError, match="only a proposal"):
        first.approve(KEYS["payments-approver"], created=T)
    second = first.add_hop(key, **{**args, "created": T + timedelta(minutes=1)})
    assert second.hops[1].sender == "case-owner"  # aligned by default
    assert first.hops == second.hops[:1]  # builders return new chains


# ------------------------------------------------------------ separation of duties


def test_separation_of_duties_is_deny_by_default_and_configurable() -> None:
    default = SeparationOfDuties()
    assert default.to_json() == [
        ["investigator", "approver"],
        ["proposer", "approver"],
        ["proposer", "executor"],
        ["approver", "executor"],
    ]
    relaxed = default.allowing(("executor", "proposer"))
    assert ["proposer", "executor"] not in relaxed.to_json()
    assert default.allowing() is default
    with pytest.raises(ValueError, match="not in this policy"):
        relaxed.allowing(("proposer", "executor"))
    with pytest.raises(ValueError, match="fail closed"):
        SeparationOfDuties(distinct=())
    with pytest.raises(ValueError, match="two different roles"):
        SeparationOfDuties(distinct=[("proposer", "proposer")])
    with pytest.raises(ValueError, match="not a valid HopRole"):
        SeparationOfDuties(distinct=[("proposer", "boss")])
    holders = {HopRole.PROPOSER: {"a"}, HopRole.APPROVER: {"a", "b"}}
    assert default.violations(holders) == ((HopRole.PROPOSER, HopRole.APPROVER, "a"),)


def test_receiver_configuration_is_checked_up_front() -> None:
    with pytest.raises(ProofError) as info:
        receiver(keyring=KeyRing())
    assert info.value.code == "empty-trust-store"
    with pytest.raises(ValueError, match="max_hops"):
        receiver(max_hops=33)
    with pytest.raises(ValueError, match="max_hops"):
        receiver(max_hops=0)
    with pytest.raises(ValueError, match="not a valid HopRole"):
        receiver(required_roles={"boss"})
    with pytest.raises(TypeError, match="clock"):
        receiver(clock="now")
    with pytest.raises(TypeError):
        IdentityCompositionReceiver(RING, LEDGER, lambda: T)  # type: ignore[call-arg]
    with pytest.raises(InvalidArgument, match="replay must implement ReplayStore"):
        receiver(replay="memory")


@pytest.mark.parametrize("identity", [None, "", ANY_AUDIENCE, "ledger\n"])
def test_the_audience_is_always_checked(identity: Any) -> None:
    """A chain receiver acts on the chain, so it names itself: no 'any audience' here."""
    with pytest.raises(InvalidArgument, match="identity"):
        receiver(identity=identity)
    with pytest.raises(TypeError, match="identity"):
        IdentityCompositionReceiver(keyring=RING, clock=lambda: T)  # type: ignore[call-arg]


# ------------------------------------------------------------------ hostile: parse


@pytest.mark.parametrize(
    ("message", "code", "path"),
    [
        pytest.param(b"\xff", "invalid-utf8", "$", id="not-utf8"),
        pytest.param("{", "invalid-json", "$", id="not-json"),
        pytest.param("[]", "not-an-object", "$", id="array"),
        pytest.param('{"contract": "handoff-chain/1.0.0", "contract": "x"}', "duplicate-key",
                     "$", id="duplicate-key"),
        pytest.param('{"hops": []}', "no-contract", "$.contract", id="no-contract"),
        pytest.param('{"contract": "payment-release/1.0.0"}', "unknown-contract",
                     "$.contract", id="other-contract"),
        pytest.param("[" * 100 + "]" * 100, "too-deep", "$", id="too-deep"),
    ],
)
def test_unparseable_messages_are_rejected_at_step_1(message: Any, code: str, path: str) -> None:
    decision = receiver().receive(message)
    assert decision.verdict is Verdict.REJECT
    assert decision.step is Step.PARSE
    assert codes(decision) == [code]
    assert decision.reasons[0].json_path == path


def test_non_json_objects_never_raise() -> None:
    for message in (None, 42, 1.5, ["hops"], {1: 2}, {"x": float("nan")}):
        decision = receiver().receive(message)  # type: ignore[arg-type]
        assert decision.verdict is Verdict.REJECT
        assert decision.step is Step.PARSE


def test_empty_chain() -> None:
    doc = _doc()
    doc["hops"] = []
    decision = receiver().receive(doc)
    assert codes(decision) == ["chain-empty"]
    assert decision.reasons[0].json_path == "$.hops"
    assert decision.receipt_id == doc["id"]


def test_too_long_chain() -> None:
    decision = receiver(max_hops=3).receive(make_chain(STANDARD).to_bytes())
    assert codes(decision) == ["chain-too-long"]
    assert decision.step is Step.PARSE


def test_schema_violation_names_its_path() -> None:
    doc = _doc()
    doc["hops"][1]["role"] = "owner"
    decision = receiver().receive(doc)
    assert codes(decision) == ["schema-invalid"]
    assert decision.reasons[0].json_path == "$.hops[1].role"


# --------------------------------------------------------- hostile: broken chains


def test_tampered_content_breaks_the_signature() -> None:
    doc = _doc()
    doc["hops"][2]["action"] = "HOLD"
    decision = receiver().receive(doc)
    assert decision.verdict is Verdict.REJECT
    assert decision.step is Step.PROOFS
    assert codes(decision) == ["bad-signature"]
    assert paths(decision, "bad-signature") == ["$.hops[2].proof.proofValue"]


def test_tampered_digest_without_resigning_breaks_the_signature() -> None:
    doc = _doc()
    doc["hops"][3]["derived_from"]["digest"] = "sha256:" + "0" * 64
    decision = receiver().receive(doc)
    assert codes(decision) == ["bad-signature"]


def test_insider_rewriting_a_digest_is_a_broken_chain() -> None:
    doc = _doc()
    doc["hops"][3] = resigned(doc["hops"][3], "payments-executor", created=T,
                              derived_from={"digest": "sha256:" + "0" * 64})
    decision = receiver().receive(doc)
    assert codes(decision) == ["chain-broken"]
    assert paths(decision, "chain-broken") == ["$.hops[3].derived_from"]


def test_insider_rewriting_history_breaks_every_later_link() -> None:
    # The investigator re-signs its hop with a different finding after the fact.
    doc = _doc()
    doc["hops"][0] = resigned(doc["hops"][0], "evidence-specialist",
                              created=T - timedelta(minutes=45), action="RELEASE")
    decision = receiver().receive(doc)
    assert codes(decision) == ["chain-broken"]
    assert paths(decision, "chain-broken") == ["$.hops[1].derived_from"]


def test_first_hop_must_not_name_a_parent() -> None:
    doc = _doc()
    doc["hops"][0] = resigned(doc["hops"][0], "evidence-specialist",
                              created=T - timedelta(minutes=50),
                              derived_from={"digest": "sha256:" + "1" * 64})
    decision = receiver().receive(doc)
    assert codes(decision) == ["chain-broken"]
    assert places(decision, "chain-broken") == ["$.hops[0].derived_from",
                                                "$.hops[1].derived_from"]


def test_dropped_middle_hop() -> None:
    doc = _doc()
    del doc["hops"][2]
    decision = receiver().receive(doc)
    assert decision.verdict is Verdict.REJECT
    assert decision.step is Step.PROOFS
    assert set(codes(decision)) == {"hop-order", "chain-broken", "chain-misaligned"}
    assert paths(decision, "chain-broken") == ["$.hops[2].derived_from"]
    assert paths(decision, "hop-order") == ["$.hops[2].hop"]


def test_dropped_first_hop() -> None:
    doc = _doc()
    del doc["hops"][0]
    decision = receiver().receive(doc)
    assert "chain-broken" in codes(decision)
    assert "$.hops[0].derived_from" in paths(decision, "chain-broken")
    assert "hop-order" in codes(decision)


def test_dropped_last_hop_is_addressed_to_someone_else() -> None:
    doc = _doc()
    del doc["hops"][3]
    decision = receiver().receive(doc)
    assert codes(decision) == ["wrong-audience"]
    assert decision.reasons[0].json_path == "$.hops[2].receiver"


def test_reordered_hops() -> None:
    doc = _doc()
    doc["hops"][1], doc["hops"][2] = doc["hops"][2], doc["hops"][1]
    decision = receiver().receive(doc)
    assert decision.verdict is Verdict.REJECT
    assert "hop-order" in codes(decision)
    assert {"$.hops[1].hop", "$.hops[2].hop", "$.hops[2].role"} <= set(
        places(decision, "hop-order"))
    assert len(codes(decision)) == len(set(codes(decision)))  # each code once
    assert "chain-broken" in codes(decision)


def test_misaligned_chain() -> None:
    # Hop 1 is addressed to the approver, but the next hop comes from someone else.
    spec = with_step(1, receiver="approving-investigator")
    decision = receiver().receive(make_chain(spec).to_bytes())
    assert codes(decision) == ["chain-misaligned"]
    assert decision.reasons[0].json_path == "$.hops[2].sender"


def test_wrong_audience() -> None:
    decision = receiver(identity="another-ledger").receive(make_chain(STANDARD).to_bytes())
    assert codes(decision) == ["wrong-audience"]


def test_spliced_case() -> None:
    doc = _doc()
    doc["case_id"] = "case-9999"
    decision = receiver().receive(doc)
    assert (decision.verdict, decision.step) == (Verdict.REJECT, Step.PROOFS)
    assert set(codes(decision)) == {"case-mismatch"}
    assert places(decision, "case-mismatch") == [f"$.hops[{k}].case_id" for k in range(4)]


# --------------------------------------------------------- hostile: the envelope


def test_every_hop_signs_the_envelope_id() -> None:
    chain = make_chain(STANDARD)
    assert [hop.chain_id for hop in chain.hops] == [chain.id] * 4
    assert all(raw["chain_id"] == chain.id for raw in chain.to_json()["hops"])
    # The approval signs the same hop document, chain_id included.
    approval = chain.hops[1].proofs[1]
    assert approval["previousProof"] == chain.hops[1].proofs[0]["id"]


def test_a_swapped_envelope_id_is_refused() -> None:
    doc = _doc()
    signed_for = doc["id"]
    doc["id"] = "urn:uuid:00000000-0000-4000-8000-00000000beef"
    decision = receiver().receive(doc)
    assert (decision.verdict, decision.step) == (Verdict.REJECT, Step.PROOFS)
    assert codes(decision) == ["chain-id-mismatch"]
    assert places(decision, "chain-id-mismatch") == [f"$.hops[{k}].chain_id" for k in range(4)]
    assert signed_for in decision.reasons[0].message
    assert decision.receipt_id == doc["id"]  # the decision names the id it was given


def test_an_envelope_id_rewritten_in_the_hops_breaks_their_signatures() -> None:
    doc = _doc()
    new = "urn:uuid:00000000-0000-4000-8000-00000000beef"
    doc["id"] = new
    for hop in doc["hops"]:
        hop["chain_id"] = new
    decision = receiver().receive(doc)
    assert set(codes(decision)) == {"bad-signature"}
    assert decision.step is Step.PROOFS


def test_the_last_signer_cannot_rewrap_earlier_hops_into_a_chain_of_its_own() -> None:
    doc = _doc()
    new = "urn:uuid:00000000-0000-4000-8000-00000000beef"
    doc["id"] = new
    parent = doc["hops"][2]
    doc["hops"][3] = resigned(doc["hops"][3], "payments-executor", chain_id=new,
                              created=T - timedelta(minutes=20),
                              derived_from={"digest": digest(parent)})
    decision = receiver().receive(doc)
    assert codes(decision) == ["chain-id-mismatch"]
    assert places(decision, "chain-id-mismatch") == [f"$.hops[{k}].chain_id" for k in range(3)]


def test_a_hop_from_another_chain_is_refused() -> None:
    doc, other = _doc(), _doc()
    assert doc["id"] != other["id"]
    doc["hops"][3] = other["hops"][3]
    decision = receiver().receive(doc)
    assert set(codes(decision)) == {"chain-id-mismatch", "chain-broken"}
    assert paths(decision, "chain-id-mismatch") == ["$.hops[3].chain_id"]
    assert paths(decision, "chain-broken") == ["$.hops[3].derived_from"]


def test_an_inserted_hop_is_refused() -> None:
    doc = _doc()
    doc["hops"].insert(2, copy.deepcopy(doc["hops"][1]))
    decision = receiver().receive(doc)
    assert decision.verdict is Verdict.REJECT
    assert {"hop-order", "chain-broken"} <= set(codes(decision))
    assert "$.hops[2].hop" in paths(decision, "hop-order")


def test_a_handoff_chain_1_0_0_is_refused_as_an_unknown_contract() -> None:
    """The retired version: no hop signs the envelope id, so it is never admitted."""
    hop = {"contract": "handoff-chain/1.0.0", "hop": 0, "case_id": CASE,
           "role": "proposer", "sender": "case-owner", "receiver": LEDGER,
           "authority": "ADVISE", "action": "RELEASE",
           "valid_until": "2026-01-05T11:00:00Z", "derived_from": None,
           "transformation": "proposed release"}
    signed = sign(hop, KEYS["case-owner"], purpose=HOP_PROOF_PURPOSE,
                  created=T - timedelta(minutes=5), proof_id=f"{CHAIN_ID}-proof")
    old = {"contract": "handoff-chain/1.0.0", "id": CHAIN_ID, "case_id": CASE,
           "hops": [signed]}
    decision = receiver().receive(old)
    assert (decision.verdict, decision.step, codes(decision)) == (
        Verdict.REJECT, Step.PARSE, ["unknown-contract"])
    assert decision.reasons[0].json_path == "$.contract"
    assert "envelope id is not signed" in decision.reasons[0].message
    assert "'handoff-chain/2.0.0'" in decision.reasons[0].message
    with pytest.raises(UnknownContract, match="envelope id is not signed") as info:
        HandoffChain.from_json(old)
    assert info.value.code == "unknown-contract"
    # Another unknown version says nothing of retirement.
    other = receiver().receive({**old, "contract": "handoff-chain/3.0.0"})
    assert codes(other) == ["unknown-contract"]
    assert "not signed" not in other.reasons[0].message


# ---------------------------------------------------------------- hostile: replay


def test_a_chain_is_accepted_once() -> None:
    chain = make_chain(STANDARD).to_bytes()
    r = receiver(fail_closed_action="HOLD")
    assert r.receive(chain).verdict is Verdict.ACCEPT
    again = r.receive(chain)
    assert (again.verdict, again.step, codes(again)) == (
        Verdict.REJECT, Step.PROOFS, ["replayed"])
    assert again.reasons[0].json_path == "$.id"
    assert again.action == "HOLD"
    # Parsed, as text: the same chain, the same claim.
    assert codes(r.receive(json.loads(chain))) == ["replayed"]


def test_without_a_replay_store_a_chain_is_decided_again() -> None:
    chain = make_chain(STANDARD).to_bytes()
    r = receiver(replay=None)
    assert [r.receive(chain).verdict for _ in range(3)] == [Verdict.ACCEPT] * 3


def test_two_receivers_sharing_a_sqlite_store_accept_a_chain_once(tmp_path: Path) -> None:
    from handoffs.service import open_store

    path = tmp_path / "replay.sqlite"
    chain = make_chain(STANDARD)
    one, two = open_store(path), open_store(path)  # two connections, as two processes
    try:
        first = receiver(replay=one).receive(chain.to_bytes())
        assert first.verdict is Verdict.ACCEPT
        second = receiver(replay=two).receive(chain.to_bytes())
        assert (second.verdict, codes(second)) == (Verdict.REJECT, ["replayed"])
        # The claim is the signed id and the length, apart from receipt ids.
        assert two.seen(f"handoff-chain:{chain.id}/4")
        assert not two.seen(chain.id)
    finally:
        one.close()
        two.close()
    reopened = open_store(path)  # a restart
    try:
        assert codes(receiver(replay=reopened).receive(chain.to_bytes())) == ["replayed"]
    finally:
        reopened.close()


def test_each_extension_is_a_new_message_to_its_next_receiver(tmp_path: Path) -> None:
    from handoffs.service import open_store

    store = open_store(tmp_path / "shared.sqlite")
    full = make_chain(STANDARD)
    prefix = attrs.evolve(full, hops=full.hops[:3])  # what the executor received
    try:
        executor = receiver(identity="payments-executor", replay=store)
        assert executor.receive(prefix.to_bytes()).verdict is Verdict.ACCEPT
        assert receiver(replay=store).receive(full.to_bytes()).verdict is Verdict.ACCEPT
        assert codes(executor.receive(prefix.to_bytes())) == ["replayed"]
    finally:
        store.close()


def test_only_a_chain_past_step_2_consumes_its_claim() -> None:
    store = MemoryReplayStore()
    chain = make_chain(STANDARD).to_bytes()
    misdelivered = receiver(identity="another-ledger", replay=store).receive(chain)
    assert codes(misdelivered) == ["wrong-audience"]
    assert len(store) == 0
    assert receiver(replay=store).receive(chain).verdict is Verdict.ACCEPT
    # Refused at step 5 (after the claim): claimed, as a gate claims a verified receipt.
    extended = make_chain(with_step(3, valid_until=T + timedelta(hours=6))).to_bytes()
    assert codes(receiver(replay=store).receive(extended)) == ["validity-extended"]
    assert codes(receiver(replay=store).receive(extended)) == ["replayed"]


def test_a_chain_is_claimed_until_its_earliest_expiry() -> None:
    store = MemoryReplayStore()
    chain = make_chain(STANDARD).to_bytes()
    earliest = T + timedelta(hours=1)  # the last hop's valid_until
    at: list[datetime] = [T]
    r = receiver(replay=store, clock=lambda: at[0])
    assert r.receive(chain).verdict is Verdict.ACCEPT
    at[0] = earliest - timedelta(microseconds=1)
    assert not expired(earliest, at[0])
    assert codes(r.receive(chain)) == ["replayed"]
    at[0] = earliest
    assert expired(earliest, at[0])
    assert codes(r.receive(chain)) == ["chain-expired"]  # expired, so not a replay any more
    # The store forgets the claim at the earliest expiry, not at a later hop's.
    assert store.first_seen("urn:uuid:other", expires=earliest + timedelta(hours=1),
                            now=earliest)
    assert len(store) == 1


def test_a_replay_store_outage_fails_closed(tmp_path: Path) -> None:
    import sqlite3

    from handoffs.service import open_store

    path = tmp_path / "gone.sqlite"
    store = open_store(path)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE seen")
    try:
        decision = receiver(replay=store, fail_closed_action="HOLD").receive(
            make_chain(STANDARD).to_bytes())
    finally:
        store.close()
    assert (decision.verdict, decision.step, codes(decision), decision.action) == (
        Verdict.REJECT, Step.PROOFS, ["replay-store-unavailable"], "HOLD")


def test_a_full_memory_store_fails_closed() -> None:
    # A DECIDE chain claims its id and its approval (twice): three entries.
    r = receiver(replay=MemoryReplayStore(max_entries=3))
    assert r.receive(make_chain(STANDARD).to_bytes()).verdict is Verdict.ACCEPT
    assert codes(r.receive(make_chain(STANDARD).to_bytes())) == ["replay-store-unavailable"]


def test_a_store_that_raises_anything_fails_closed() -> None:
    class BrokenStore:  # a user's store whose driver raises its own error
        def first_seen(self, receipt_id: str, *, expires: datetime, now: datetime) -> bool:
            raise OSError("disk on fire")

    decision = receiver(replay=BrokenStore()).receive(make_chain(STANDARD).to_bytes())
    assert codes(decision) == ["replay-store-unavailable"]
    assert "disk on fire" in decision.reasons[0].message


def test_back_dated_hop() -> None:
    spec = with_step(2, created=T - timedelta(hours=5))
    decision = receiver().receive(make_chain(spec).to_bytes())
    assert codes(decision) == ["hop-order"]
    assert decision.reasons[0].json_path == "$.hops[2].proof.created"


def test_second_proposal_is_out_of_order() -> None:
    spec = copy.deepcopy(STANDARD)
    spec.insert(2, {"signer": "dual-owner", "role": "proposer", "authority": "ADVISE",
                    "action": "RELEASE", "valid_until": T + timedelta(hours=3),
                    "transformation": "re-proposed"})
    spec[1].pop("approved_by")
    spec[2]["approved_by"] = "payments-approver"
    decision = receiver().receive(make_chain(spec).to_bytes())
    assert codes(decision) == ["hop-order"]
    assert decision.reasons[0].json_path == "$.hops[2].role"


def test_unknown_signer() -> None:
    stranger = SigningKey.generate()
    chain = HandoffChain.start(case_id=CASE)
    chain = chain.add_hop(stranger, sender="case-owner", role="proposer", receiver=LEDGER,
                          authority="ADVISE", action="RELEASE", valid_until=T + timedelta(hours=1),
                          transformation="proposed", created=T - timedelta(minutes=5))
    decision = receiver().receive(chain.to_bytes())
    assert codes(decision) == ["unknown-key"]
    assert decision.reasons[0].json_path == "$.hops[0].proof.verificationMethod"


def test_missing_proof() -> None:
    doc = _doc()
    doc["hops"][0].pop("proof")
    decision = receiver().receive(doc)
    assert codes(decision) == ["schema-invalid"]
    assert decision.reasons[0].json_path == "$.hops[0]"


# --------------------------------------------------- hostile: roles and identities


def test_role_claimed_in_message_text_is_not_held() -> None:
    # The investigator's key signs a hop that claims the approver role.
    spec = with_step(2, signer="evidence-specialist")
    decision = receiver().receive(make_chain(spec).to_bytes())
    assert codes(decision) == ["role-not-held"]
    assert decision.reasons[0].json_path == "$.hops[2].role"
    assert "held ['investigator']" in decision.reasons[0].message


def test_sender_must_be_the_key_controller() -> None:
    spec = with_step(3, sender="payments-executor", signer="auditor")
    decision = receiver().receive(make_chain(spec).to_bytes())
    assert set(codes(decision)) == {"sender-mismatch", "role-not-held"}
    assert paths(decision, "sender-mismatch") == ["$.hops[3].sender"]


def test_approval_by_a_key_without_the_approver_role() -> None:
    spec = with_step(1, approved_by="auditor")
    decision = receiver().receive(make_chain(spec).to_bytes())
    assert codes(decision) == ["role-not-held"]
    assert decision.reasons[0].json_path == "$.hops[1].proof[1].verificationMethod"


def test_self_approval() -> None:
    spec = copy.deepcopy(STANDARD)
    spec[1].update(signer="dual-owner", approved_by="dual-owner")
    decision = receiver().receive(make_chain(spec).to_bytes())
    assert decision.verdict is Verdict.REJECT
    assert decision.step is Step.POLICY
    assert codes(decision) == ["separation-of-duties"]
    assert decision.reasons[0].message == "'dual-owner' acts as both proposer and approver"
    assert decision.reasons[0].json_path == "$.hops[1].proof[1].verificationMethod"
    assert decision.record["roles"]["approver"] == ["dual-owner", "payments-approver"]


def test_investigator_may_not_approve() -> None:
    spec = with_step(1, approved_by="approving-investigator")
    spec[0]["signer"] = "approving-investigator"
    decision = receiver().receive(make_chain(spec).to_bytes())
    assert codes(decision) == ["separation-of-duties"]
    assert "investigator and approver" in decision.reasons[0].message
    assert decision.reasons[0].json_path == "$.hops[1].proof[1].verificationMethod"


def test_executor_may_not_be_the_proposer_unless_the_contract_allows_it() -> None:
    exec_key = SigningKey.generate()
    ring = RING.enrol(exec_key.public_key_multibase, controller="case-owner",
                      roles={"executor"}, not_before=T - timedelta(days=1))
    chain = make_chain(STANDARD[:3], audience="case-owner")
    chain = chain.add_hop(exec_key, role="executor", receiver=LEDGER, authority="DECIDE",
                          action="RELEASE", valid_until=T + timedelta(hours=1),
                          transformation="instruction", created=T - timedelta(minutes=1))
    decision = receiver(keyring=ring).receive(chain.to_bytes())
    assert codes(decision) == ["separation-of-duties"]
    assert decision.reasons[0].message == "'case-owner' acts as both proposer and executor"
    assert decision.reasons[0].json_path == "$.hops[3].sender"

    relaxed = SeparationOfDuties().allowing(("proposer", "executor"))
    decision = receiver(keyring=ring, separation_of_duties=relaxed).receive(chain.to_bytes())
    assert decision.verdict is Verdict.ACCEPT, decision.reasons


def test_receiving_a_decision_makes_the_receiver_the_executor() -> None:
    # The proposer's own service receives the approved DECIDE: it would execute it.
    decision = receiver(identity="case-owner").receive(
        make_chain(STANDARD[:3], audience="case-owner").to_bytes())
    assert codes(decision) == ["separation-of-duties"]
    assert "proposer and executor" in decision.reasons[0].message
    assert decision.reasons[0].json_path == "$.hops[2].receiver"


def test_required_role_missing() -> None:
    decision = receiver(required_roles={"investigator", "proposer", "approver"}).receive(
        make_chain(STANDARD[1:]).to_bytes())
    assert codes(decision) == ["role-missing"]
    assert decision.reasons[0].message == "the chain has no investigator"


# ------------------------------------------------------- hostile: authority widening


def test_proposer_cannot_decide_before_approval() -> None:
    spec = with_step(1, authority="DECIDE")
    decision = receiver().receive(make_chain(spec).to_bytes())
    assert codes(decision) == ["authority-widened"]
    assert decision.reasons[0].json_path == "$.hops[1].authority"


def test_investigator_cannot_decide() -> None:
    spec = with_step(0, authority="DECIDE")
    decision = receiver().receive(make_chain(spec).to_bytes())
    assert codes(decision) == ["authority-widened"]
    assert decision.reasons[0].json_path == "$.hops[0].authority"


def test_decide_without_any_approval_is_widening() -> None:
    spec = copy.deepcopy(STANDARD)
    spec[1].pop("approved_by")
    decision = receiver().receive(make_chain(spec).to_bytes())
    assert codes(decision) == ["authority-widened"]
    assert places(decision, "authority-widened") == ["$.hops[2].authority",
                                                     "$.hops[3].authority"]


def test_authority_cannot_widen_again_after_narrowing() -> None:
    spec = with_step(2, authority="ADVISE")
    decision = receiver().receive(make_chain(spec).to_bytes())
    assert codes(decision) == ["authority-widened"]
    assert decision.reasons[0].json_path == "$.hops[3].authority"


def test_decide_over_another_action_than_approved() -> None:
    spec = copy.deepcopy(STANDARD)
    spec[2]["action"] = spec[3]["action"] = "REJECT_DUPLICATE"
    decision = receiver().receive(make_chain(spec).to_bytes())
    assert codes(decision) == ["approval-not-exact"]
    assert places(decision, "approval-not-exact") == ["$.hops[2].action", "$.hops[3].action"]


def test_approval_not_chained_to_the_proposal() -> None:
    # The approver signs the proposal's content but not the proposer's proof.
    chain = make_chain(STANDARD[:2], audience=LEDGER)
    doc = chain.to_json()
    proposal = doc["hops"][1]
    proposer_proof = proposal["proof"][0]
    unchained = sign({**proposal, "proof": proposer_proof}, KEYS["payments-approver"],
                     purpose=HOP_PROOF_PURPOSE, created=T - timedelta(minutes=30),
                     proof_id="urn:uuid:00000000-0000-4000-8000-0000000000aa")
    # ``sign`` appended an unchained second proof; present exactly that.
    doc["hops"][1] = unchained
    decision = receiver().receive(doc)
    assert codes(decision) == ["approval-not-exact"]
    assert decision.reasons[0].json_path == "$.hops[1].proof[1].previousProof"


def test_approval_on_a_hop_that_is_not_the_proposal() -> None:
    chain = make_chain(STANDARD)
    doc = chain.to_json()
    hop0 = doc["hops"][0]
    doc["hops"][0] = sign(hop0, KEYS["payments-approver"], purpose=HOP_PROOF_PURPOSE,
                          created=T - timedelta(minutes=49),
                          proof_id="urn:uuid:00000000-0000-4000-8000-0000000000bb",
                          previous_proof=hop0["proof"]["id"])
    # Rebuild the digest links downstream so that only the misplaced approval is wrong.
    rebuilt = [doc["hops"][0]]
    for k, signer in ((1, "case-owner"), (2, "payments-approver"), (3, "payments-executor")):
        hop = {key: value for key, value in doc["hops"][k].items() if key != "proof"}
        hop["derived_from"] = {"digest": digest(rebuilt[-1])}
        signed = sign(hop, KEYS[signer], purpose=HOP_PROOF_PURPOSE,
                      created=T - timedelta(minutes=40 - 10 * (k - 1)),
                      proof_id=f"urn:uuid:00000000-0000-4000-8000-00000000000{k}")
        if k == 1:
            signed = sign(signed, KEYS["payments-approver"], purpose=HOP_PROOF_PURPOSE,
                          created=T - timedelta(minutes=39),
                          proof_id="urn:uuid:00000000-0000-4000-8000-0000000000cc",
                          previous_proof=signed["proof"]["id"])
        rebuilt.append(signed)
    doc["hops"] = rebuilt
    decision = receiver().receive(doc)
    assert codes(decision) == ["approval-not-exact"]
    assert paths(decision, "approval-not-exact") == ["$.hops[0].proof[1].previousProof"]


def test_stripping_the_approval_breaks_the_chain() -> None:
    doc = _doc()
    doc["hops"][1]["proof"] = doc["hops"][1]["proof"][0]
    decision = receiver().receive(doc)
    assert codes(decision) == ["chain-broken"]
    assert decision.reasons[0].json_path == "$.hops[2].derived_from"


def test_missing_approval_is_escalated() -> None:
    spec = [copy.deepcopy(STANDARD[0]), copy.deepcopy(STANDARD[1])]
    spec[1].pop("approved_by")
    decision = receiver(fail_closed_action="ESCALATE").receive(make_chain(spec).to_bytes())
    assert decision.verdict is Verdict.ESCALATE
    assert decision.admitted
    assert decision.action == "ESCALATE"
    assert decision.authority == "ADVISE"
    assert codes(decision) == ["approval-missing"]
    assert decision.record["approved_action"] is None
    # Without the approval requirement the same chain is accepted as advice.
    decision = receiver(required_roles={"proposer"}).receive(make_chain(spec).to_bytes())
    assert decision.verdict is Verdict.ACCEPT
    assert decision.action is None  # advice, not an action
    assert decision.record["advice"] == "RELEASE"


def test_widening_outranks_a_missing_approval() -> None:
    spec = [copy.deepcopy(STANDARD[1])]
    spec[0].update(authority="DECIDE")
    spec[0].pop("approved_by")
    decision = receiver(required_roles={"proposer", "approver"}).receive(
        make_chain(spec).to_bytes())
    assert decision.verdict is Verdict.REJECT
    assert codes(decision) == ["authority-widened"]


# ------------------------------------------------------------------ hostile: time


def test_extending_validity_downstream() -> None:
    spec = with_step(3, valid_until=T + timedelta(hours=6))
    decision = receiver().receive(make_chain(spec).to_bytes())
    assert codes(decision) == ["validity-extended"]
    assert decision.reasons[0].json_path == "$.hops[3].valid_until"


def test_expired_chain() -> None:
    chain = make_chain(STANDARD)
    decision = receiver(clock=lambda: T + timedelta(hours=1, seconds=1)).receive(
        chain.to_bytes())
    assert codes(decision) == ["chain-expired"]
    assert decision.reasons[0].json_path == "$.hops[3].valid_until"
    # Exactly at the instant it is expired (the one rule); just before it, valid.
    assert codes(receiver(clock=lambda: T + timedelta(hours=1)).receive(
        chain.to_bytes())) == ["chain-expired"]
    assert receiver(clock=lambda: T + timedelta(hours=1, microseconds=-1)).receive(
        chain.to_bytes()).verdict is Verdict.ACCEPT


def test_expired_approval_proof() -> None:
    chain = HandoffChain.start(case_id=CASE)
    chain = chain.add_hop(KEYS["case-owner"], sender="case-owner", role="proposer",
                          receiver=LEDGER, authority="ADVISE", action="RELEASE",
                          valid_until=T + timedelta(hours=1), transformation="proposed",
                          created=T - timedelta(minutes=30))
    chain = chain.approve(KEYS["payments-approver"], created=T - timedelta(minutes=20),
                          expires=T - timedelta(minutes=1))
    decision = receiver().receive(chain.to_bytes())
    assert codes(decision) == ["proof-expired"]
    assert decision.reasons[0].json_path == "$.hops[0].proof[1].expires"


def test_bad_clock_fails_closed() -> None:
    decision = receiver(clock=lambda: T.replace(tzinfo=None)).receive(
        make_chain(STANDARD).to_bytes())
    assert codes(decision) == ["bad-clock"]


def test_a_failing_clock_fails_closed() -> None:
    def broken() -> datetime:
        raise RuntimeError("no time")

    decision = receiver(clock=broken).receive(make_chain(STANDARD).to_bytes())
    assert decision.verdict is Verdict.REJECT
    assert codes(decision) == ["receiver-error"]


# -------------------------------------------------------------------------- docs


def test_reason_codes_in_the_docs_are_the_receivers() -> None:
    text = (ROOT / "docs" / "explanation" / "identity-composition.md").read_text("utf-8")
    documented = set(re.findall(r"^\| `([a-z-]+)` \|", text, flags=re.MULTILINE))
    package = ROOT / "src" / "handoffs" / "receivers" / "chains"
    source = "".join(p.read_text("utf-8") for p in sorted(package.glob("*.py")))
    emitted = set(re.findall(r'Reason\(\s*"([a-z-]+)"', source))
    assert emitted <= documented, emitted - documented


# ------------------------------------------------- freshness and single execution


def test_a_twenty_day_old_approval_is_stale_under_a_one_day_bound() -> None:
    message = make_chain(_aged(20)).to_bytes()
    decision = receiver(max_age=timedelta(days=1)).receive(message)
    assert (decision.verdict, decision.step) == (Verdict.REJECT, Step.PROOFS)
    assert codes(decision) == ["chain-stale"]
    assert paths(decision, "chain-stale") == ["$.hops[0].proof.created"]
    # The default bound (one day) refuses it too; a month's bound accepts it.
    assert codes(receiver().receive(message)) == ["chain-stale"]
    assert receiver(max_age=timedelta(days=30)).receive(message).verdict is Verdict.ACCEPT


def test_freshness_names_the_stale_approval() -> None:
    spec = copy.deepcopy(STANDARD)
    chain = make_chain(spec[:1], audience="case-owner")
    chain = chain.add_hop(KEYS["case-owner"], role="proposer", receiver="payments-approver",
                          authority="ADVISE", action="RELEASE",
                          valid_until=T + timedelta(hours=3), transformation="proposed",
                          created=T - timedelta(minutes=40))
    chain = chain.approve(KEYS["payments-approver"], created=T - timedelta(minutes=35))
    decision = receiver(identity="payments-approver",
                        max_age=timedelta(minutes=36)).receive(chain.to_bytes())
    assert codes(decision) == ["chain-stale"]
    # The investigator's hop (50 minutes) is the oldest proof.
    assert paths(decision, "chain-stale") == ["$.hops[0].proof.created"]
    decision = receiver(identity="payments-approver",
                        max_age=timedelta(minutes=51)).receive(chain.to_bytes())
    assert decision.verdict is Verdict.ACCEPT, decision.reasons


@pytest.mark.parametrize("bad", [timedelta(0), timedelta(seconds=-1), 3600, None])
def test_a_max_age_that_is_not_positive_is_a_typed_error(bad: Any) -> None:
    with pytest.raises(InvalidArgument, match="max_age must be a positive timedelta") as info:
        receiver(max_age=bad)
    assert info.value.json_path == "$.max_age"


def _approved_prefix() -> HandoffChain:
    """Investigator → approved proposal: what the approver holds."""
    return make_chain(STANDARD[:2], audience="payments-approver")


def _decide(chain: HandoffChain, receiver_id: str, *, minutes: int = 20) -> HandoffChain:
    return chain.add_hop(KEYS["payments-approver"], role="approver", receiver=receiver_id,
                         authority="DECIDE", action="RELEASE",
                         valid_until=T + timedelta(hours=2),
                         transformation="approved under PAY-7.4",
                         created=T - timedelta(minutes=minutes))


def test_a_second_decide_for_the_same_proposal_is_a_replay() -> None:
    store, prefix = MemoryReplayStore(), _approved_prefix()
    first = _decide(prefix, "payments-executor")
    again = _decide(prefix, "payments-executor", minutes=19)
    executor = receiver(identity="payments-executor", replay=store)
    assert executor.receive(first.to_bytes()).verdict is Verdict.ACCEPT
    # A second executor instance sharing the store: the same approval, signed anew.
    second = receiver(identity="payments-executor", replay=store)
    decision = second.receive(again.to_bytes())
    assert codes(decision) == ["replayed"]
    # The same chain at a second executor sharing the store.
    assert codes(second.receive(first.to_bytes())) == ["replayed"]


def test_a_forked_approval_is_executed_once() -> None:
    store, prefix = MemoryReplayStore(), _approved_prefix()
    to_executor = _decide(prefix, "payments-executor")

    def executed(ledger: str) -> HandoffChain:
        return to_executor.add_hop(KEYS["payments-executor"], role="executor", receiver=ledger,
                                   authority="DECIDE", action="RELEASE",
                                   valid_until=T + timedelta(hours=1),
                                   transformation="built the payment instruction",
                                   created=T - timedelta(minutes=10))

    executor = receiver(identity="payments-executor", replay=store)
    assert executor.receive(to_executor.to_bytes()).verdict is Verdict.ACCEPT
    # The executor and the ledger after it each act once on the approval ...
    ledger = receiver(identity=LEDGER, replay=store)
    assert ledger.receive(executed(LEDGER).to_bytes()).verdict is Verdict.ACCEPT
    # ... but a fork of the same approval to a second ledger is a replay.
    other = receiver(identity="second-ledger", replay=store)
    assert codes(other.receive(executed("second-ledger").to_bytes())) == ["replayed"]
    # And the approver sending the same approval straight to a ledger that keeps its own
    # store (a chain of another length: only the approval's claim catches it).
    own = receiver(identity=LEDGER, replay=MemoryReplayStore())
    assert own.receive(executed(LEDGER).to_bytes()).verdict is Verdict.ACCEPT
    direct = _decide(prefix, LEDGER, minutes=18)
    decision = own.receive(direct.to_bytes())
    assert codes(decision) == ["replayed"]
    assert paths(decision, "replayed") == ["$.hops"]
    assert "approval" in decision.reasons[0].message


def test_a_per_instance_memory_store_warns_unless_single_instance() -> None:
    with pytest.warns(UnsafeConfigurationWarning, match="second instance"):
        IdentityCompositionReceiver(keyring=RING, identity=LEDGER, clock=lambda: T)
    with pytest.warns(UnsafeConfigurationWarning):
        IdentityCompositionReceiver(keyring=RING, identity=LEDGER, clock=lambda: T,
                                    replay=MemoryReplayStore())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        IdentityCompositionReceiver(keyring=RING, identity=LEDGER, clock=lambda: T,
                                    single_instance=True)
        IdentityCompositionReceiver(keyring=RING, identity=LEDGER, clock=lambda: T, replay=None)
    with pytest.raises(InvalidArgument, match="single_instance must be True or False"):
        receiver(single_instance="yes")


def test_an_advise_acceptance_carries_no_executable_action() -> None:
    spec = with_step(3, authority="ADVISE")
    decision = receiver(fail_closed_action="HOLD").receive(make_chain(spec).to_bytes())
    assert decision.verdict is Verdict.ACCEPT
    assert decision.authority == "ADVISE"
    assert decision.action == "HOLD"  # the fail-closed action, never the hop's
    assert decision.record["advice"] == "RELEASE"
    decided = receiver().receive(make_chain(STANDARD).to_bytes())
    assert decided.action == "RELEASE"
    assert "advice" not in decided.record


def test_by_default_every_named_role_is_required() -> None:
    decision = receiver().receive(make_chain(STANDARD[1:]).to_bytes())
    assert codes(decision) == ["role-missing"]
    assert "investigator" in decision.reasons[0].message


def test_builder_misuse_is_a_typed_error_with_a_path() -> None:
    chain = make_chain(STANDARD[:1], audience="case-owner")
    with pytest.raises(InvalidArgument) as info:
        chain.add_hop(KEYS["case-owner"], role="boss", receiver="x", authority="ADVISE",
                      valid_until=T, transformation="t", created=T)
    assert (info.value.code, info.value.json_path) == ("unknown-role", "$.hops[1].role")
    with pytest.raises(InvalidArgument) as info:
        chain.add_hop(KEYS["case-owner"], role="proposer", receiver="bad receiver",
                      authority="ADVISE", action="RELEASE", valid_until=T,
                      transformation="t", created=T)
    assert (info.value.code, info.value.json_path) == ("bad-identifier", "$.hops[1].receiver")
    with pytest.raises(InvalidArgument) as info:
        chain.add_hop(KEYS["case-owner"], role="proposer", receiver="x", authority="DECIDE",
                      valid_until=T, transformation="t", created=T)
    assert (info.value.code, info.value.json_path) == ("action-missing", "$.hops[1].action")
    with pytest.raises(InvalidArgument) as info:
        chain.add_hop(KEYS["case-owner"], role="proposer", receiver="x", authority="ADVISE",
                      action="RELEASE", valid_until=T.replace(tzinfo=None),
                      transformation="t", created=T)
    assert (info.value.code, info.value.json_path) == ("naive-datetime",
                                                       "$.hops[1].valid_until")
    with pytest.raises(InvalidArgument) as info:
        chain.approve(KEYS["payments-approver"], created=T)
    assert (info.value.code, info.value.json_path) == ("not-a-proposal", "$.hops[0].role")
    with pytest.raises(InvalidArgument) as info:
        HandoffChain.start(case_id=CASE).add_hop(
            KEYS["case-owner"], role="proposer", receiver="x", authority="ADVISE",
            action="RELEASE", valid_until=T, transformation="t", created=T)
    assert (info.value.code, info.value.json_path) == ("sender-missing", "$.hops[0].sender")
