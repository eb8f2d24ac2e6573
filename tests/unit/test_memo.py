"""Memoising receivers on a projection of the message: the keys the lab derives from
receivers' declarations (:func:`handoffs.lab._memo.memo_key`).

Soundness: two messages with equal keys get the same verdict, action and reason codes,
checked on generated messages whose per-case identifiers (receipt id, case id,
evidence references) are valid or not, with everything else valid or not too.
Member-wise: the key of a message changed in one member follows from the original's
key and that member's contribution (what the lab relies on to key perturbed messages
without building them).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from handoffs.examples import payment
from handoffs.examples.payment_lab import (
    DECISION_TIME,
    CurrentPolicies,
    FixedClock,
    SyntheticEvidence,
    actuator,
    advisory_receiver,
    full_record_receiver,
    score_receiver,
    strict_receiver,
)
from handoffs.lab._memo import memo_key, memo_value
from handoffs.lab._reference import ReferenceReceiver
from handoffs.receivers import (
    AuthoritativeActuator,
    Decision,
    Gate,
    GovernanceChecker,
    HTTPEvidenceResolver,
    MemoryReplayStore,
    SQLiteDecisionLog,
    StrictContractReceiver,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
)
from worlds.gate import CONTRACT, WORLD

BASES = [WORLD.unsigned(case_id) for case_id in ("policy-01", "routine-02", "value-03",
                                                  "duplicate-04")]


def unsafe_gate(**options: Any) -> Gate:
    config: dict[str, Any] = {
        "identity": "case-owner", "trust": UnsafeNoProofs(), "registry": CONTRACT,
        "roles": {"case-owner"},
        "policy_service": CurrentPolicies({"PAY-7.4"}), "evidence": SyntheticEvidence(),
        "replay": None, "clock": FixedClock(),
    }
    config.update(options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeConfigurationWarning)
        return Gate(**config)


RECEIVERS: dict[str, Callable[[], Any]] = {
    "strict (lab gate)": strict_receiver,
    "strict, readback of every receipt": lambda: StrictContractReceiver(unsafe_gate(
        readback=1.0)),
    "strict, readback of a sample (by id)": lambda: StrictContractReceiver(unsafe_gate(
        readback=0.5)),
    "strict, in-memory evidence": lambda: StrictContractReceiver(WORLD.unsafe_gate(
        replay=None)),
    "strict, no evidence resolver": lambda: StrictContractReceiver(unsafe_gate(evidence=None)),
    "actuator (governance checker)": actuator,
    "actuator (gate)": lambda: AuthoritativeActuator(unsafe_gate()),
    "actuator (audience)": lambda: AuthoritativeActuator(GovernanceChecker(
        CONTRACT, identity="case-owner")),
    "score": score_receiver,
    "advisory": advisory_receiver,
    "full record": full_record_receiver,
    "reference, benign defaults": lambda: ReferenceReceiver(CONTRACT),
    "reference, three-valued": lambda: ReferenceReceiver(CONTRACT, defaults=False),
}


def outcome(decision: Decision) -> tuple[Any, ...]:
    return decision.verdict, decision.action, tuple(r.code for r in decision.reasons)


uuids = st.uuids().map(lambda u: f"urn:uuid:{u}")
bad_ids = st.sampled_from(["urn:uuid:XYZ", "", "urn:uuid:0000", "x" * 50, 7, None, True])
ids = st.one_of(uuids, bad_ids)
case_ids = st.one_of(st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True),
                     st.sampled_from(["bad id", "a\n", "", "é", 3, None, ["x"]]))
uris = st.one_of(
    st.builds(lambda kind, n, what: f"evidence://{kind}/{n}/{what}",
              st.sampled_from(["policy", "routine", "value"]), st.integers(1, 999),
              st.sampled_from(["identity", "screening", "policy"])),
    st.sampled_from(["https://example.org/screening/1", "not a uri", "ftp:screening", ""]),
)
digests = st.one_of(st.just("sha256:" + "0" * 64), st.text("0123456789abcdef", min_size=64,
                                                          max_size=64).map("sha256:".__add__))
refs = st.one_of(
    uris,
    st.builds(lambda u, d: {"uri": u, "digest": d}, uris, digests),
    st.builds(lambda u: {"uri": u}, uris),
    st.integers(),
)
ref_lists = st.one_of(st.lists(refs, min_size=0, max_size=4), st.none(), st.just("evidence://x"))
states = st.fixed_dictionaries({name: st.one_of(st.booleans(), st.just(1), st.just("yes"))
                                for name in payment.DECISION_FIELDS})
other_members = st.fixed_dictionaries({}, optional={
    "authority": st.sampled_from(["ADVISE", "DECIDE", "VETO", 1]),
    "receiver": st.sampled_from(["case-owner", "payments", ""]),
    "sender": st.sampled_from(["evidence-specialist", "", None]),
    "policy_version": st.sampled_from(["PAY-7.4", "PAY-7.3", "PAY 7"]),
    "valid_until": st.sampled_from(["2027-01-01T00:00:00Z", "2026-01-01T00:00:00Z",
                                    "2027-13-01T00:00:00Z", "soon"]),
    "proposed_action": st.sampled_from(["RELEASE", "ESCALATE", "BURN"]),
    "decision_state": states,
    "action": st.sampled_from(["RELEASE", "HOLD", "NOPE"]),
    "risk_score": st.sampled_from([0, 19, 20, 45, 19.5, True, "20"]),
    "identity_verified": st.booleans(),
    "extra": st.just("member"),
})
identifiers = st.fixed_dictionaries({"id": ids, "case_id": case_ids, "evidence_refs": ref_lists})
valid_identifiers = st.fixed_dictionaries({
    "id": uuids, "case_id": st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True),
    "evidence_refs": st.lists(st.sampled_from(["evidence://policy/7/screening",
                                               "evidence://policy/8/identity",
                                               "evidence://value/9/screening"]),
                              min_size=1, max_size=3)})


def _twin(member: str, value: Any, number: int) -> Any:
    """Another identifier of the same kind: what a memo key may not tell apart."""
    if member == "id" and isinstance(value, str) and len(value) == 45:
        return f"urn:uuid:00000000-0000-4000-8000-{number:012d}"
    if member == "case_id" and isinstance(value, str) and value[:1].isalpha() \
            and value.isascii() and value.replace("-", "").isalnum() and value.islower():
        return f"{value}-{number}"
    if member == "evidence_refs" and isinstance(value, list):
        return [_twin("ref", item, number) for item in value]
    if member == "ref" and isinstance(value, str) and value.startswith("evidence://"):
        kind, _, what = value.removeprefix("evidence://").split("/")
        return f"evidence://{kind}/{number}/{what}"
    return value


@st.composite
def message_pairs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two messages that share every member but (some of) their identifiers: either
    twins (other identifiers of the same kinds) or drawn independently.
    """
    base = dict(draw(st.sampled_from(BASES)))
    if draw(st.booleans()):  # else: a valid receipt apart from its identifiers
        base.update(draw(other_members))
        for name in draw(st.sets(st.sampled_from(sorted(base)), max_size=2)):
            del base[name]
    first, second = dict(base), dict(base)
    first.update(draw(st.one_of(identifiers, valid_identifiers)))
    if draw(st.booleans()):
        number = draw(st.integers(100, 999))
        second.update({k: _twin(k, v, number) for k, v in first.items()
                       if k in ("id", "case_id", "evidence_refs")})
    else:
        second.update({k: v for k, v in draw(identifiers).items() if draw(st.booleans())})
    return first, second


@pytest.mark.parametrize("name", sorted(RECEIVERS))
@given(pair=message_pairs())
def test_equal_memo_keys_mean_equal_decisions(name: str,
                                              pair: tuple[dict[str, Any], dict[str, Any]]
                                              ) -> None:
    receiver = RECEIVERS[name]()
    first, second = pair
    key = memo_key(receiver, first)
    if key is None:  # only a message refused at parse as not JSON data has no key
        decision = receiver.receive(first)
        assert (decision.step, decision.reasons[0].code) in {
            (1, code) for code in ("integer-out-of-range", "non-finite-number", "invalid-json",
                                   "too-deep", "too-large", "lone-surrogate")}
        return
    if key == memo_key(receiver, second):
        assert outcome(receiver.receive(first)) == outcome(receiver.receive(second))


@pytest.mark.parametrize("name", sorted(RECEIVERS))
@given(pair=message_pairs(), member=st.sampled_from(
    ["id", "case_id", "evidence_refs", "decision_state", "authority", "receiver", "risk_score",
     "action", "extra", "valid_until"]), value=st.one_of(ids, case_ids, ref_lists, states),
    remove=st.booleans())
def test_memo_keys_are_member_wise(name: str, pair: tuple[dict[str, Any], dict[str, Any]],
                                   member: str, value: Any, remove: bool) -> None:
    receiver = RECEIVERS[name]()
    first, second = pair
    if memo_key(receiver, first) != memo_key(receiver, second):
        return  # nothing to derive from
    assert memo_key(receiver, first) == memo_key(receiver, dict(first))  # not the object
    patched = []
    for message in (first, second):
        changed = dict(message)
        if remove:
            changed.pop(member, None)
        else:
            changed[member] = value
        patched.append(changed)
    if remove and (member in first) != (member in second):
        return  # the keys differ only where the messages do
    assert memo_key(receiver, patched[0]) == memo_key(receiver, patched[1])


def test_messages_differing_only_in_valid_identifiers_share_a_key() -> None:
    receiver = strict_receiver()
    one = WORLD.unsigned("policy-01")
    other = dict(one, id="urn:uuid:00000000-0000-4000-8000-000000000009", case_id="policy-99",
                 evidence_refs=["evidence://policy/99/identity", "evidence://policy/99/screening",
                                "evidence://policy/99/policy"])
    assert memo_key(receiver, one) == memo_key(receiver, other)
    assert outcome(receiver.receive(one)) == outcome(receiver.receive(other))
    # ...but not when a reference stops naming the screening evidence freshness needs.
    stale = dict(other, evidence_refs=["evidence://policy/99/identity",
                                       "evidence://policy/99/other"])
    assert memo_key(receiver, one) != memo_key(receiver, stale)
    assert outcome(receiver.receive(stale)) != outcome(receiver.receive(one))


def test_a_sampled_readback_keeps_the_receipt_id() -> None:
    receiver = StrictContractReceiver(unsafe_gate(readback=0.5))
    one = WORLD.unsigned("policy-01")
    other = dict(one, id="urn:uuid:00000000-0000-4000-8000-000000000009")
    assert memo_key(receiver, one) != memo_key(receiver, other)


@pytest.mark.parametrize("gate", [
    lambda tmp: WORLD.gate(replay=None),  # proofs cover every byte
    lambda tmp: unsafe_gate(replay=MemoryReplayStore()),  # replays are refused
    lambda tmp: unsafe_gate(log=SQLiteDecisionLog(tmp / "log.sqlite")),  # every call logs
    lambda tmp: unsafe_gate(evidence=HTTPEvidenceResolver(  # a resolver without memo_key
        routes={"evidence://": "https://evidence.example/"})),
], ids=["proofs", "replay-store", "decision-log", "http-evidence"])
def test_gates_whose_decisions_depend_on_more_than_the_message_have_no_key(
        gate: Callable[[Any], Gate], tmp_path: Any) -> None:
    receiver = StrictContractReceiver(gate(tmp_path))
    message = WORLD.unsigned("policy-01")
    assert memo_key(receiver, message) is None


def test_a_replay_is_never_memoised() -> None:
    receiver = StrictContractReceiver(unsafe_gate(replay=MemoryReplayStore()))
    message = WORLD.unsigned("policy-01")
    assert not receiver.deterministic
    first, again = receiver.receive(message), receiver.receive(message)
    assert outcome(first) != outcome(again)
    assert [r.code for r in again.reasons] == ["replayed"]


def test_time_dependent_checkers_and_raw_input_have_no_key() -> None:
    checker = GovernanceChecker(CONTRACT, clock=lambda: DECISION_TIME + timedelta(days=1))
    assert memo_key(AuthoritativeActuator(checker), WORLD.unsigned()) is None
    assert memo_key(strict_receiver(), b"{}") is None
    assert memo_key(actuator(), "{}") is None


def test_synthetic_evidence_key_follows_its_answer() -> None:
    from handoffs.contracts import EvidenceRef

    resolver = SyntheticEvidence()
    uri = "evidence://policy/1/screening"
    content = resolver.resolve(EvidenceRef(uri)).digest
    assert resolver.memo_key(EvidenceRef(uri)) == resolver.memo_key(EvidenceRef(uri + "x"))
    assert resolver.memo_key(EvidenceRef(uri, content)) == ("pinned", True)
    assert resolver.memo_key(EvidenceRef(uri, "sha256:" + "0" * 64)) == ("pinned", False)
    assert resolver.memo_key(EvidenceRef("https://x/y")) is False


def test_memo_values_tell_json_types_apart() -> None:
    values: list[Any] = [True, 1, 1.0, "1", None, [1], (1,), {"a": 1}, {"a": True},
                         {"a": [1]}, {"a": [True]}, [{"a": 1}], [[1]], 0, False, ""]
    keys = [memo_value(v) for v in values]
    assert len(set(keys)) == len(values)
    assert memo_value({"a": 1, "b": 2}) != memo_value({"b": 2, "a": 1})  # order is kept
    assert memo_value([{}]) != memo_value([{}]) or memo_value([{}]) == memo_value([{}])


def test_the_gate_owns_its_memo_key_and_the_lab_asks_it() -> None:
    gate = unsafe_gate()
    one = WORLD.unsigned("policy-01")
    other = dict(one, id="urn:uuid:00000000-0000-4000-8000-000000000009")
    assert gate.memo_key(one) is not None
    assert gate.memo_key(one) == gate.memo_key(other)  # a valid id: only its validity counts
    assert gate.memo_key(one) != gate.memo_key(dict(one, authority="DECIDE"))
    # The lab's key of a strict receiver is the gate's own (its rule reads no identifier).
    assert memo_key(StrictContractReceiver(gate), one) == gate.memo_key(one)
    assert WORLD.gate(replay=None).memo_key(one) is None  # proofs cover every byte
