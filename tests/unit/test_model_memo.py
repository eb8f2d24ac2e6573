"""A model receiver's memo key: reused only when nothing its prompt shows differs, and,
through a gate, derived member by member as the lab derives a patched message's key
(:func:`handoffs.lab._memo.member_keyer`; ``_Chunk._key``).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from handoffs.examples.payment import DECISION_FIELDS, PAYMENT_RELEASE
from handoffs.examples.payment_lab import payment_gate
from handoffs.lab._memo import member_keyer, memo_key
from handoffs.receivers import GovernanceChecker
from handoffs.receivers.models import ChatRequest, Completion, ModelReceiver
from worlds.gate import WORLD

BASES = [WORLD.unsigned(case_id) for case_id in ("policy-01", "routine-02", "value-03")]
REMOVED = object()


class Recording:
    """A chat client that answers from the prompt's text and keeps every request."""

    def __init__(self) -> None:
        self.requests: list[ChatRequest] = []

    def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        action = ("RELEASE", "HOLD", "ESCALATE")[len(request.messages[-1][1]) % 3]
        return Completion(content=f'{{"action": "{action}"}}')


def _receiver(admission: str) -> ModelReceiver:
    gate = payment_gate() if admission == "gate" else GovernanceChecker(PAYMENT_RELEASE,
                                                                      required=())
    return ModelReceiver(gate=gate, client=Recording(), model_route="test/model")


states = st.fixed_dictionaries({name: st.one_of(st.booleans(), st.just(1), st.just("yes"))
                                for name in DECISION_FIELDS})
values = st.one_of(
    states,
    st.sampled_from(["ADVISE", "DECIDE", "VETO", 1, 1.0, True, None, "", "RELEASE", "BURN",
                     "PAY-7.4", "PAY-7.3", "case-owner", "payments", "2026-01-01T00:00:00Z",
                     "urn:uuid:00000000-0000-4000-8000-000000000009", "urn:uuid:XYZ",
                     "policy-77", "bad id", [], ["evidence://policy/7/screening"],
                     ["evidence://policy/7/identity", "not a uri"], {"a": [1, {"b": 2}]}]),
)
members = st.sampled_from(["id", "case_id", "evidence_refs", "decision_state", "authority",
                           "receiver", "sender", "policy_version", "valid_until",
                           "proposed_action", "contract", "notes", "extra"])
patches = st.lists(st.tuples(members, st.one_of(values, st.just(REMOVED))), max_size=3)


def _patched(message: dict[str, Any], name: str, value: Any) -> dict[str, Any]:
    changed = dict(message)
    if value is REMOVED:
        changed.pop(name, None)
    else:
        changed[name] = value
    return changed


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    message = dict(draw(st.sampled_from(BASES)))
    for name, value in draw(patches):
        message = _patched(message, name, value)
    return message


def _derived(key: frozenset[tuple[str, Hashable]], name: str, value: Any,
             member: Any) -> frozenset[tuple[str, Hashable]]:
    """The key of the message with member ``name`` set to ``value`` (or removed), from
    the original's key: its pairs with ``name``'s replaced.
    """
    kept = {pair for pair in key if pair[0] != name}
    if value is not REMOVED:
        kept.add((name, member(name, value)))
    return frozenset(kept)


@given(message=messages(), name=members, value=st.one_of(values, st.just(REMOVED)))
def test_a_patched_message_key_follows_from_its_base_key(message: dict[str, Any], name: str,
                                                          value: Any) -> None:
    receiver = _receiver("gate")
    keyer = member_keyer(receiver)
    assert keyer is not None
    member, read = keyer
    assert read is None  # the prompt shows every member but the identifiers
    key = memo_key(receiver, message)
    assert isinstance(key, frozenset)
    assert _derived(key, name, value, member) == memo_key(receiver,
                                                          _patched(message, name, value))


def _asked(receiver: ModelReceiver, message: dict[str, Any]) -> tuple[Any, ...]:
    """The decision's outcome and the request the model was sent (if any)."""
    client = receiver.client
    assert isinstance(client, Recording)
    client.requests.clear()
    decision = receiver.receive(message)
    sent = tuple(request.body() for request in client.requests)
    return decision.verdict, decision.action, tuple(r.code for r in decision.reasons), sent


@pytest.mark.parametrize("admission", ["gate", "governance checker"])
@given(first=messages(), second=messages(), how=st.sampled_from(["drawn", "twin", "patched"]),
       patch=st.tuples(members, st.one_of(values, st.just(REMOVED))))
def test_equal_model_keys_mean_equal_prompts(admission: str, first: dict[str, Any],
                                             second: dict[str, Any], how: str,
                                             patch: tuple[str, Any]) -> None:
    receiver = _receiver(admission)
    if how == "twin":  # the same message with other valid identifiers
        second = dict(first, id="urn:uuid:00000000-0000-4000-8000-000000000042",
                      case_id="policy-42")
    elif how == "patched":  # the same message but for one member
        second = _patched(first, *patch)
    key = memo_key(receiver, first)
    if key is not None and key == memo_key(receiver, second):
        assert _asked(receiver, first) == _asked(receiver, second)


@pytest.mark.parametrize("admission", ["gate", "governance checker"])
def test_a_shown_member_that_differs_is_a_new_key(admission: str) -> None:
    receiver = _receiver(admission)
    one = WORLD.unsigned("policy-01")
    for name, value in (("notes", "another note"), ("proposed_action", "HOLD"),
                        ("authority", "DECIDE")):
        assert memo_key(receiver, one) != memo_key(receiver, dict(one, **{name: value}))
    # the identifiers are hidden from the prompt: another valid one keeps the key
    other = dict(one, id="urn:uuid:00000000-0000-4000-8000-000000000042")
    assert memo_key(receiver, one) == memo_key(receiver, other)


def test_only_a_gate_admission_keys_member_by_member() -> None:
    assert member_keyer(_receiver("governance checker")) is None
