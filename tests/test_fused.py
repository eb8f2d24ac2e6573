"""The gate's fused accept path never admits what the reference path refuses.

For canonical bytes or text the gate's step (1) takes an exact fast parse (a plain
parsed dict is copied through its canonical text) and step (2) a fused accept
path (:func:`handoffs.contracts._signing._verify_receipt_fast`); anything the fused
path does not accept goes the reference way, which gives the reason. These tests run
both ways on the hostile suite and on mutated, re-signed receipts, in each of the three
forms, and require the same decision, and require the fused path itself to take the
standard receipt, at every boundary instant, so that a check made stricter there does
not go unnoticed.
"""

from __future__ import annotations

import collections
import copy
import enum
import math
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

import test_sender as pump
from handoffs._errors import HandoffsError, MalformedJSON
from handoffs._json import canonical_bytes, canonical_bytes_plain, dumps, loads
from handoffs.contracts._keys import KeyRing
from handoffs.contracts._proofs import CLOCK_SKEW, sign
from handoffs.contracts._signing import (
    VerifiedReceipt,
    _verify_receipt,
    _verify_receipt_fast,
)
from handoffs.receivers import Decision, Gate, Readback, StrictContractReceiver
from test_gate import CASES, CONTRACT, NOW, RECEIVER, SENDER, SERVICE, T0, WORLD, raw
from test_hostile import HOSTILE, SIGNED_GRANT_DEFECTS

MAX_AGE = CONTRACT.max_proof_age
_STANDARD = {"type", "cryptosuite", "created", "verificationMethod", "proofPurpose",
             "proofValue"}


def _reference(gate: Gate) -> Gate:
    """The same gate without the fast parse (and so without the fused path)."""
    object.__setattr__(gate, "_plans", {})
    return gate


def _both(message: Any, **options: Any) -> tuple[Decision, Decision]:
    options.setdefault("readback", Readback.ALWAYS)
    fast = StrictContractReceiver(WORLD.gate(**options)).receive(copy.deepcopy(message))
    slow = StrictContractReceiver(_reference(WORLD.gate(**options))).receive(message)
    return fast, slow


FORMS = ("bytes", "text", "parsed")


def _form(message: bytes, form: str) -> Any:
    """``message`` as bytes, as text or as the parsed object (``None``: it has none)."""
    try:
        return {"bytes": lambda: message, "text": lambda: message.decode("utf-8"),
                "parsed": lambda: loads(message)}[form]()
    except (UnicodeDecodeError, HandoffsError):
        return None


def _fused(doc: dict[str, Any], ring: KeyRing | None = None, now: Any = NOW,
           audience: str = RECEIVER) -> VerifiedReceipt | HandoffsError | None:
    try:
        return _verify_receipt_fast(doc, ring or WORLD.keyring, contract=CONTRACT, now=now,
                                    audience=audience, max_age=MAX_AGE)
    except HandoffsError as exc:  # a signature that does not verify
        return exc


def _verified(doc: dict[str, Any], ring: KeyRing | None = None, now: Any = NOW,
              audience: str = RECEIVER) -> VerifiedReceipt | HandoffsError:
    try:
        plain = canonical_bytes(doc) == canonical_bytes_plain(doc)
        return _verify_receipt(doc, ring or WORLD.keyring, now=now, registry=CONTRACT,
                               audience=audience, require_grant=True,
                               encode=canonical_bytes_plain if plain else canonical_bytes,
                               valid=False)
    except HandoffsError as exc:
        return exc


def _standard(doc: dict[str, Any]) -> bool:
    """The shape the fused path takes: one standard proof each, grant members typed."""
    grant = doc.get("grant")
    return (type(doc.get("proof")) is dict and set(doc["proof"]) == _STANDARD
            and type(grant) is dict and type(grant.get("proof")) is dict
            and set(grant["proof"]) == _STANDARD
            and type(grant.get("authority")) is list
            and all(type(a) is str for a in grant["authority"])
            and type(grant.get("roles", [])) is list
            and all(type(r) is str for r in grant.get("roles", [])))


def _agree(doc: dict[str, Any], **context: Any) -> None:
    """The fused path accepts exactly when the reference does (for the standard shape),
    and then with the reference's result; otherwise it declines.
    """
    fused = _fused(doc, **context)
    reference = _verified(doc, **context)
    if isinstance(fused, HandoffsError):  # only a signature: the reference's refusal
        assert isinstance(reference, HandoffsError)
        assert fused.code in ("bad-signature", "grant-invalid")
        assert (type(fused), fused.code, fused.json_path, str(fused)) == (
            type(reference), reference.code, reference.json_path, str(reference))
    elif fused is not None:
        assert fused == reference
    elif _standard(doc):
        assert isinstance(reference, HandoffsError), "the fused path declined a good receipt"


# ---------------------------------------------------------------- decisions agree


@pytest.fixture
def reference_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The gate's calls of its reference proofs path (``_verify_receipt``, still run)."""
    import handoffs.receivers._gate as gate_module

    calls: list[str] = []
    real = gate_module._verify_receipt

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append("reference")
        return real(*args, **kwargs)

    monkeypatch.setattr(gate_module, "_verify_receipt", counted)
    return calls


@pytest.mark.parametrize(("name", "form"), [
    (name, form) for name in sorted(HOSTILE) for form in FORMS
    if _form(HOSTILE[name][0](), form) is not None  # not UTF-8, or no JSON value
])
def test_a_hostile_message_gets_the_reference_decision(name: str, form: str) -> None:
    build, options, *_ = HOSTILE[name]
    fast, slow = _both(_form(build(), form), **options)
    assert fast == slow


@pytest.mark.parametrize("form", FORMS)
def test_every_form_of_a_standard_receipt_takes_the_fused_path(
        form: str, reference_calls: list[str]) -> None:
    for case_id in sorted(CASES):
        decision = StrictContractReceiver(WORLD.gate()).receive(
            _form(raw(WORLD.signed(case_id)), form))
        assert decision.step > 2, decision
    assert reference_calls == []


@pytest.mark.parametrize("name", sorted(SIGNED_GRANT_DEFECTS))
def test_a_defective_signed_grant_gets_the_reference_decision(name: str) -> None:
    change, *_ = SIGNED_GRANT_DEFECTS[name]
    grant = WORLD.grant()
    grant.pop("proof")
    change(grant)
    signed = sign(grant, WORLD.service_key, purpose="capabilityDelegation", created=T0)
    fast, slow = _both(raw(WORLD.signed("policy-01", grant=signed)))
    assert fast == slow
    assert fast.reasons[0].code == "grant-invalid"


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_the_fused_path_itself_admits_every_standard_receipt(case_id: str) -> None:
    doc = loads(raw(WORLD.signed(case_id)))
    fused = _fused(doc)
    assert fused is not None
    assert fused == _verified(doc)
    fast, slow = _both(raw(doc))
    assert fast == slow
    assert fast.readback == "agree"


# ---------------------------------------------------------------- boundary instants
# Each is the last instant (or the edge) at which the receipt is still good: the fused
# path must take it itself, and refuse one microsecond beyond.
_US = timedelta(microseconds=1)


def test_created_at_most_the_clock_skew_in_the_future() -> None:
    now = T0 - CLOCK_SKEW
    doc = loads(raw(WORLD.signed()))
    assert _fused(doc, now=now) is not None
    assert _fused(doc, now=now - _US) is None
    _agree(doc, now=now - _US)


def test_proof_age_just_below_the_bound() -> None:
    doc = loads(raw(WORLD.signed()))
    assert _fused(doc, now=T0 + MAX_AGE - _US) is not None
    assert _fused(doc, now=T0 + MAX_AGE) is None
    assert isinstance(_verified(doc, now=T0 + MAX_AGE), HandoffsError)


@pytest.mark.parametrize("member", ["receipt", "grant"])
def test_valid_until_one_microsecond_after_now(member: str) -> None:
    until = NOW + _US
    grant = WORLD.grant(valid_until=until if member == "grant" else T0 + timedelta(hours=2))
    doc = loads(raw(WORLD.signed(grant=grant, valid_until=until)))
    assert _fused(doc) is not None
    assert _fused(doc, now=until) is None
    _agree(doc, now=until)


def test_receipt_valid_exactly_as_long_as_its_grant() -> None:
    until = T0 + timedelta(hours=2)
    doc = loads(raw(WORLD.signed(valid_until=until)))
    assert _fused(doc) is not None
    longer = loads(raw(WORLD.signed(valid_until=until + _US)))
    assert _fused(longer) is None
    _agree(longer)


def _ring(**window: Any) -> KeyRing:
    ring = KeyRing().enrol(WORLD.service_key.public_key_multibase, controller=SERVICE,
                           roles=["policy-service"], not_before=T0 - timedelta(days=1),
                           purposes=["capabilityDelegation"])
    return ring.enrol(WORLD.sender_key.public_key_multibase, controller=SENDER,
                      roles=["proposer"], **window)


def test_key_window_edges() -> None:
    doc = loads(raw(WORLD.signed()))
    assert _fused(doc, _ring(not_before=T0, not_after=T0 + _US)) is not None
    for ring in (_ring(not_before=T0 + _US), _ring(not_before=T0 - _US, not_after=T0)):
        assert _fused(doc, ring) is None
        _agree(doc, ring=ring)


def test_revocation_edge() -> None:
    doc = loads(raw(WORLD.signed()))
    vm = WORLD.sender_key.verification_method
    ring = _ring(not_before=T0 - timedelta(days=1))
    assert _fused(doc, ring.revoke(vm, at=NOW + _US)) is not None
    assert _fused(doc, ring.revoke(vm, at=NOW)) is None
    _agree(doc, ring=ring.revoke(vm, at=NOW))


def test_the_grant_issuer_needs_the_policy_service_role() -> None:
    doc = loads(raw(WORLD.signed()))
    ring = KeyRing(tuple(
        e if e.controller != SERVICE else type(e)(
            verification_method=e.verification_method,
            public_key_multibase=e.public_key_multibase, controller=SERVICE,
            roles=["auditor"], not_before=e.not_before, purposes=e.purposes)
        for e in WORLD.keyring))
    assert _fused(doc, ring) is None
    _agree(doc, ring=ring)


def test_audience_is_checked() -> None:
    doc = loads(raw(WORLD.signed()))
    assert _fused(doc, audience="payments") is None
    _agree(doc, audience="payments")


# ---------------------------------------------------------------- mutated receipts

_TEXT = st.sampled_from(["", "x", SENDER, RECEIVER, SERVICE, "rogue-agent", "policy-01",
                         "routine-01", "PAY-7.4", "PAY-7.3", "ADVISE", "DECIDE",
                         CONTRACT.id, "payment-release/9.9.9", "AuthorityGrant",
                         "2026-06-01T12:01:00Z", "2026-06-01T13:00:00Z"])
_VALUE = st.one_of(
    _TEXT, st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2),
    st.lists(_TEXT, max_size=3), st.lists(st.integers(0, 2), max_size=2),
    st.dictionaries(_TEXT, _TEXT, max_size=2),
)
_GRANT_MEMBERS = ["type", "id", "issuer", "subject", "audience", "contract", "case_id",
                  "policy_version", "authority", "roles", "valid_until", "scope", "@context"]
_PROOF_MEMBERS = ["type", "cryptosuite", "created", "verificationMethod", "proofPurpose",
                  "proofValue", "id", "expires", "domain", "challenge", "previousProof"]
_RECEIPT_MEMBERS = ["case_id", "sender", "receiver", "authority", "policy_version",
                    "valid_until", "counterfactual_trigger", "notes"]
# The honest instant most often, then every edge on both sides.
_INSTANTS = st.sampled_from([
    T0, T0, T0, T0, T0, T0, T0 - _US, NOW + CLOCK_SKEW, NOW + CLOCK_SKEW + _US,
    NOW - MAX_AGE, NOW - MAX_AGE + _US, T0 - timedelta(days=30), T0 - timedelta(days=30) - _US])
_UNTIL = st.sampled_from([NOW, NOW + _US, *[T0 + timedelta(hours=1)] * 5,
                          T0 + timedelta(hours=2), T0 + timedelta(hours=2) + _US])


_HOW_MANY = st.sampled_from([0, 0, 0, 0, 1, 1, 2])


def _change(target: dict[str, Any], member: str, value: Any, delete: bool) -> None:
    if delete:
        target.pop(member, None)
    else:
        target[member] = value


@st.composite
def _mutated(draw: st.DrawFn) -> dict[str, Any]:
    """A receipt whose grant and members are changed before signing (both proofs
    verify), and whose proofs may be changed after.
    """
    case_id = draw(st.sampled_from(sorted(CASES)))
    grant = WORLD.grant(case_id, valid_until=draw(_UNTIL))
    grant.pop("proof")
    changes = [(draw(st.sampled_from(_GRANT_MEMBERS)), draw(_VALUE), draw(st.booleans()))
               for _ in range(draw(_HOW_MANY))]
    for member, value, delete in changes:
        if member != "@context":  # sign() refuses it: added after signing
            _change(grant, member, value, delete)
    grant_key = draw(st.sampled_from([WORLD.service_key, WORLD.service_key,
                                      WORLD.sender_key]))
    grant = sign(grant, grant_key, purpose=draw(st.sampled_from(
        ["capabilityDelegation", "capabilityDelegation", "assertionMethod"])),
        created=draw(_INSTANTS))
    for member, value, delete in changes:
        if member == "@context":
            _change(grant, member, value, delete)
    doc = WORLD.unsigned(case_id, valid_until=draw(_UNTIL))
    doc["grant"] = grant
    for _ in range(draw(_HOW_MANY)):
        _change(doc, draw(st.sampled_from(_RECEIPT_MEMBERS)), draw(_TEXT), draw(st.booleans()))
    key = draw(st.sampled_from([WORLD.sender_key, WORLD.sender_key, WORLD.rogue_key]))
    doc = sign(doc, key, created=draw(_INSTANTS))
    for _ in range(draw(_HOW_MANY)):
        where = draw(st.sampled_from([doc["proof"], doc["grant"]["proof"]]))
        _change(where, draw(st.sampled_from(_PROOF_MEMBERS)), draw(_VALUE), draw(st.booleans()))
    return doc


@given(_mutated())
def test_a_mutated_receipt_gets_the_reference_decision(doc: dict[str, Any]) -> None:
    message = dumps(doc).encode()
    fast, slow = _both(message)
    assert fast == slow
    assert _both(message.decode("utf-8")) == (fast, slow)
    try:
        parsed = loads(message)
    except HandoffsError:
        return
    assert _both(parsed) == (fast, slow)
    event(f"{fast.verdict.name} at step {int(fast.step)}: "
          f"{fast.reasons[0].code if fast.reasons else ''}")
    if isinstance(parsed, dict) and fast.step > 1:  # schema-valid: the fused path's input
        _agree(copy.deepcopy(parsed))


# ---------------------------------------------------------------- schemas without numbers

_STRING = {"type": "string"}
_CLOSED = {"type": "object", "properties": {"a": {"type": "boolean"}},
           "additionalProperties": False}


@pytest.mark.parametrize(("schema", "numbers"), [
    ({}, True),
    (True, True),
    (False, False),
    (_STRING, False),
    ({"type": "integer"}, True),
    ({"type": "number"}, True),
    ({"type": ["string", "null"]}, False),
    ({"type": ["string", "integer"]}, True),
    ({"type": []}, True),
    ({"enum": ["a", "b", None, True]}, False),
    ({"enum": ["a", 1]}, True),
    ({"enum": [["a"], {"b": 1.5}]}, True),
    ({"const": "a"}, False),
    ({"const": 1}, True),
    ({"const": {"a": [True, "b"]}}, False),
    (_CLOSED, False),
    ({**_CLOSED, "additionalProperties": True}, True),
    ({"type": "object", "properties": {"a": _STRING}}, True),
    ({**_CLOSED, "additionalProperties": _STRING}, False),
    ({**_CLOSED, "properties": {"a": {"type": "integer"}}}, True),
    ({**_CLOSED, "patternProperties": {"^x": {"type": "number"}}}, True),
    ({**_CLOSED, "patternProperties": {"^x": _STRING}}, False),
    ({"type": "array", "items": _STRING}, False),
    ({"type": "array"}, True),
    ({"type": "array", "items": _STRING, "prefixItems": [{"type": "integer"}]}, True),
    ({"type": ["array", "object"], "items": _STRING, "additionalProperties": False}, False),
    ({"type": ["array", "object"], "items": _STRING}, True),
    ({"anyOf": [_STRING, {"type": "boolean"}]}, False),
    ({"anyOf": [_STRING, {"type": "number"}]}, True),
    ({"oneOf": [_STRING, {}]}, True),
    ({"anyOf": []}, True),
    ({"allOf": [{}, _STRING]}, False),
    ({"allOf": [{}, {"type": "integer"}]}, True),
    ({"type": "integer", "enum": ["a"]}, False),
    ({"$ref": "#/$defs/text"}, False),
    ({"$ref": "#/$defs/missing"}, True),
    ({"$ref": "#/$defs/loop"}, True),
    ({"$ref": "https://example.org/text"}, True),
])
def test_a_schema_admits_numbers_unless_certainly_not(schema: Any, numbers: bool) -> None:
    from handoffs.contracts._schema import _admits_numbers

    root = {"$defs": {"text": _STRING, "loop": {"$ref": "#/$defs/loop"}}}
    assert _admits_numbers(root, schema, frozenset()) is numbers


def test_the_payment_receipt_holds_numbers_only_in_its_grant() -> None:
    from handoffs.contracts._schema import numbers_outside

    assert numbers_outside(CONTRACT, "grant") is False
    assert numbers_outside(CONTRACT, "decision_state") is True  # the grant is open


# ---------------------------------------------------------------- the exact fast parse


def test_the_fast_parse_keeps_the_size_limit() -> None:
    from handoffs._json import JSONLimits, exact_loads

    text = b'{"a":"' + b"x" * 20 + b'"}'
    assert exact_loads(text, limits=JSONLimits(max_bytes=len(text))) == ({"a": "x" * 20}, True)
    assert exact_loads(text, limits=JSONLimits(max_bytes=len(text) - 1)) is None
    assert exact_loads(bytearray(text)) is None  # type: ignore[arg-type]


def test_the_fast_parse_keeps_the_depth_limit() -> None:
    from handoffs._json import JSONLimits, exact_loads

    assert exact_loads(b"[[[]]]", limits=JSONLimits(max_depth=3)) == ([[[]]], True)
    assert exact_loads(b"[[[]]]", limits=JSONLimits(max_depth=2)) is None
    mixed = b'{"a":[{}]}'  # both kinds of bracket count
    assert exact_loads(mixed, limits=JSONLimits(max_depth=3)) == ({"a": [{}]}, True)
    assert exact_loads(mixed, limits=JSONLimits(max_depth=2)) is None


def test_simple_text_holds_no_character_past_the_bmp() -> None:
    from handoffs._json import exact_loads

    assert exact_loads(b'{"a":"\\n"}') == ({"a": "\n"}, True)
    assert exact_loads(b'{"a":"\\u0001"}') == ({"a": "\x01"}, True)
    assert exact_loads('{"a":"é — ’"}'.encode()) == ({"a": "é — ’"}, True)
    assert exact_loads('{"a":"\uffff"}'.encode()) == ({"a": "\uffff"}, True)
    assert exact_loads('{"a":"😀"}'.encode()) == ({"a": "😀"}, False)
    assert exact_loads('{"😀":1,"\uffff":2}'.encode()) is None  # orjson's order, not JCS's
    assert exact_loads('{"\uffff":2,"😀":1}'.encode()) == ({"\uffff": 2, "😀": 1}, False)
    assert exact_loads(b'{"a":1.5}') == ({"a": 1.5}, True)  # floats: the caller's to rule out


class _Colour(enum.Enum):
    RED = "red"


class _Word(enum.StrEnum):
    RED = "red"


def _cycle() -> dict[str, Any]:
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    return cycle


_NOT_COPIED = {  # each a parsed value check_value refuses, or not shown plain this way
    "a tuple": lambda: {"a": (1, 2)},
    "a set": lambda: {"a": {1}},
    "bytes": lambda: {"a": b"x"},
    "a non-string key": lambda: {1: "a"},
    "a lone surrogate": lambda: {"a": "\ud800"},
    "a lone surrogate key": lambda: {"\udfff": 1},
    "an integer beyond 2^53": lambda: {"a": 2**53},
    "NaN": lambda: {"a": math.nan},
    "infinity": lambda: {"a": -math.inf},
    "a cycle": _cycle,
    "a datetime": lambda: {"a": datetime(2026, 1, 1, tzinfo=UTC)},
    "a UUID": lambda: {"a": uuid.UUID(int=1)},
    "an enum member": lambda: {"a": _Colour.RED},
    "a dict subclass": lambda: {"a": collections.OrderedDict(b=1)},
    "a str subclass key": lambda: {_Word.RED: 1},
    "an object": lambda: {"a": object()},
    "deeper than the limit": lambda: {"a": [[[[]]]]},
}


@pytest.mark.parametrize("name", sorted(_NOT_COPIED))
def test_a_parsed_value_outside_json_is_not_copied(name: str) -> None:
    from handoffs._json import JSONLimits, exact_copy

    assert exact_copy(_NOT_COPIED[name](), limits=JSONLimits(max_depth=4)) is None


def test_a_value_exactly_as_deep_as_the_limit_is_copied() -> None:
    from handoffs._json import JSONLimits, exact_copy

    assert exact_copy({"a": [[[]]]}, limits=JSONLimits(max_depth=4)) == (
        {"a": [[[]]]}, True, b'{"a":[[[]]]}')


def test_a_copy_is_exactly_typed_and_its_text_canonical() -> None:
    from handoffs._json import exact_copy

    value = {"b": [1, True, None, "x", {"c": 1.5}], "a": _Word.RED}
    copied = exact_copy(value)
    assert copied is not None
    copy_, simple, text = copied
    assert copy_ == value
    assert type(copy_["a"]) is str
    assert simple
    assert text == b'{"a":"red","b":[1,true,null,"x",{"c":1.5}]}'


@pytest.mark.parametrize("value", [{"a": [0, 1, 2]}, 0])
def test_a_copy_stays_within_check_value_s_size_estimate(value: Any) -> None:
    """check_value counts 17 bytes for an integer (``0``: 17 times its text): a copy
    is made only when that estimate cannot exceed the limit, so the fast way never
    admits what it refuses.
    """
    from handoffs._json import JSONLimits, check_value, exact_copy

    text = orjson.dumps(value)
    refused = 0
    for limit in range(len(text), 17 * len(text) + 2):
        limits = JSONLimits(max_bytes=limit)
        try:
            check_value(value, limits=limits)
        except MalformedJSON:
            refused += 1
            assert exact_copy(value, limits=limits) is None, limit
    assert refused  # the text fits where the estimate does not
    assert exact_copy(value, limits=JSONLimits(max_bytes=17 * len(text))) is not None


@pytest.mark.parametrize("form", ["bytes", "text"])
@pytest.mark.parametrize("margin", [0, 1])
def test_a_receipt_over_the_gate_s_size_limit_gets_the_reference_decision(
        margin: int, form: str) -> None:
    from handoffs._json import JSONLimits

    message = raw(WORLD.signed())
    limits = JSONLimits(max_bytes=len(message) - margin)
    fast, slow = _both(_form(message, form), limits=limits)
    assert fast == slow
    assert (fast.reasons[0].code if fast.reasons else None) == (
        "too-large" if margin else None)


@pytest.mark.parametrize("form", ["bytes", "text"])
def test_a_receipt_of_exactly_the_size_limit_takes_the_fused_path(
        form: str, reference_calls: list[str]) -> None:
    from handoffs._json import JSONLimits

    message = raw(WORLD.signed())
    gate = WORLD.gate(limits=JSONLimits(max_bytes=len(message)))
    assert StrictContractReceiver(gate).receive(_form(message, form)).step > 2
    assert reference_calls == []


# ---------------------------------------------------------------- validly signed defects
# Each defect is signed by the key that should sign it, so only the check in question
# stands between it and admission: the fused path must decline it (and the reference
# path refuse it), or take it with the reference's result.


def _service_grant(**changes: Any) -> dict[str, Any]:
    grant = WORLD.grant()
    grant.pop("proof")
    for member, value in changes.items():
        if value is _DELETE:
            grant.pop(member)
        else:
            grant[member] = value
    return sign(grant, WORLD.service_key, purpose="capabilityDelegation", created=T0)


_DELETE = object()
GRANT_EDITS: dict[str, dict[str, Any]] = {
    "authority-null": {"authority": None},
    "authority-text": {"authority": "ADVISE"},
    "authority-unknown-beside": {"authority": ["ADVISE", "OWN"]},
    "authority-number": {"authority": [1]},
    "authority-empty": {"authority": []},
    "roles-null": {"roles": None},
    "roles-numbers": {"roles": [1]},
    "roles-text": {"roles": "ab"},
    "roles-absent": {"roles": _DELETE},
    "roles-held": {"roles": ["proposer"]},
    "id-empty": {"id": ""},
    "issuer-other": {"issuer": "someone-else"},
    "audience-other": {"audience": "payments"},
    "contract-other": {"contract": "payment-release/9.9.9"},
    "valid-until-text": {"valid_until": "tomorrow"},
    "valid-until-absent": {"valid_until": _DELETE},
    "type-absent": {"type": _DELETE},
    "member-unknown": {"scope": "all"},
}


@pytest.mark.parametrize("name", sorted(GRANT_EDITS))
def test_a_signed_grant_edit_is_decided_as_the_reference_decides(name: str) -> None:
    message = raw(WORLD.signed(grant=_service_grant(**GRANT_EDITS[name])))
    fast, slow = _both(message)
    assert fast == slow
    _agree(loads(message))


def _proof_for(document: dict[str, Any], key: Any, *, value: Any = None,
               **config: Any) -> dict[str, Any]:
    """``document`` with one proof by ``key`` over exactly the given configuration."""
    import hashlib

    from handoffs.contracts._keys import b58encode

    unsecured = {k: v for k, v in document.items() if k != "proof"}
    options = {"type": "DataIntegrityProof", "cryptosuite": "eddsa-jcs-2022",
               "created": "2026-06-01T12:00:00Z", "verificationMethod": key.verification_method,
               **config}
    signature = key.sign(hashlib.sha256(canonical_bytes(options)).digest()
                         + hashlib.sha256(canonical_bytes(unsecured)).digest())
    proof_value = "z" + b58encode(signature) if value is None else value(signature)
    return {**unsecured, "proof": {**options, "proofValue": proof_value}}


def _b58(data: bytes) -> str:
    from handoffs.contracts._keys import b58encode

    return b58encode(data)


PROOF_EDITS: dict[str, tuple[dict[str, Any], Any]] = {
    "type": ({"type": "Ed25519Signature2020"}, None),
    "cryptosuite": ({"cryptosuite": "eddsa-rdfc-2022"}, None),
    "purpose": ({"proofPurpose": "assertionMethod"}, None),
    "method-not-text": ({"verificationMethod": ["did:key:x"]}, None),
    "created-not-a-time": ({"created": "yesterday"}, None),
    "created-number": ({"created": 5}, None),
    "value-prefix": ({}, lambda s: "u" + _b58(s)),
    "value-short": ({}, lambda s: "z" + _b58(s[:63])),
    "value-long": ({}, lambda s: "z" + _b58(b"\x01" + s)),
    "value-leading-zero": ({}, lambda s: "z1" + _b58(s)),
    "value-alphabet": ({}, lambda s: "z" + _b58(s)[:-1] + "0"),
    "value-not-text": ({}, lambda s: 7),
    "value-over-the-bound": ({}, lambda s: "z" + "1" * 30 + _b58(s)),
    "expires": ({"expires": "2026-06-01T12:30:00Z"}, None),
    "id": ({"id": "urn:uuid:1"}, None),
}


def _both_purposes() -> KeyRing:
    """The ring with the service key allowed to assert too (so only the proof's own
    purpose tells a grant proof from a receipt proof).
    """
    ring = KeyRing().enrol(WORLD.service_key.public_key_multibase, controller=SERVICE,
                           roles=["policy-service"], not_before=T0 - timedelta(days=1),
                           purposes=["capabilityDelegation", "assertionMethod"])
    return ring.enrol(WORLD.sender_key.public_key_multibase, controller=SENDER,
                      roles=["proposer"], not_before=T0 - timedelta(days=1))


@pytest.mark.parametrize("name", sorted(PROOF_EDITS))
def test_a_validly_signed_grant_proof_edit_is_decided_as_the_reference_decides(
        name: str) -> None:
    config, value = PROOF_EDITS[name]
    grant = WORLD.grant()
    options = {"proofPurpose": "capabilityDelegation", **config}
    grant = _proof_for(grant, WORLD.service_key, value=value, **options)
    message = raw(WORLD.signed(grant=grant))
    fast, slow = _both(message, trust=_both_purposes())
    assert fast == slow
    assert fast.verdict.name == ("ACCEPT" if name in ("expires", "id") else "REJECT")
    _agree(loads(message), ring=_both_purposes())


@pytest.mark.parametrize("name", sorted(PROOF_EDITS))
def test_a_validly_signed_receipt_proof_edit_is_declined_or_agreed(name: str) -> None:
    config, value = PROOF_EDITS[name]
    doc = WORLD.signed()
    options = {"proofPurpose": "assertionMethod", **config}
    if name == "purpose":
        options["proofPurpose"] = "capabilityDelegation"
    doc = _proof_for(doc, WORLD.sender_key, value=value, **options)
    fast, slow = _both(raw(doc))
    assert fast == slow
    _agree(loads(raw(doc)), ring=_both_purposes())  # the schema's checks not assumed


def test_a_key_that_may_not_serve_the_purpose() -> None:
    doc = loads(raw(WORLD.signed()))
    ring = KeyRing().enrol(WORLD.service_key.public_key_multibase, controller=SERVICE,
                           roles=["policy-service"], not_before=T0 - timedelta(days=1),
                           purposes=["capabilityDelegation"])
    ring = ring.enrol(WORLD.sender_key.public_key_multibase, controller=SENDER,
                      roles=["proposer"], not_before=T0 - timedelta(days=1),
                      purposes=["capabilityDelegation"])
    assert _fused(doc, ring) is None
    _agree(doc, ring=ring)


def test_a_bad_grant_signature_under_a_good_receipt_signature() -> None:
    doc = WORLD.unsigned()
    grant = WORLD.grant()
    grant["authority"] = ["ADVISE", "DECIDE"]  # after the policy service signed it
    doc["grant"] = grant
    doc = loads(raw(sign(doc, WORLD.sender_key, created=T0)))
    refused = _fused(doc)
    assert isinstance(refused, HandoffsError)
    assert (refused.code, refused.json_path) == ("grant-invalid", "$.grant.proof.proofValue")
    _agree(doc)
    fast, slow = _both(raw(doc))
    assert fast == slow
    assert fast.reasons[0].code == "grant-invalid"


@pytest.mark.parametrize(("forged", "verifies", "code"), [
    (None, 2, None), ("receipt", 1, "bad-signature"), ("grant", 2, "grant-invalid")])
def test_a_forged_signature_costs_no_verify_twice(monkeypatch: pytest.MonkeyPatch,
                                                  forged: str | None, verifies: int,
                                                  code: str | None) -> None:
    """The fused path refuses a signature that fails itself (the reference's very
    refusal), so a forgery costs the gate no more verifies than a good receipt."""
    from handoffs.contracts import _proofs

    doc = loads(raw(WORLD.signed()))
    if forged == "receipt":
        value = doc["proof"]["proofValue"]
        doc["proof"]["proofValue"] = value[:-2] + ("22" if value[-2:] != "22" else "33")
    elif forged == "grant":  # after the policy service signed it; the sender signs it all
        doc = WORLD.unsigned()
        doc["grant"] = {**WORLD.grant(), "authority": ["ADVISE", "DECIDE"]}
        doc = loads(raw(sign(doc, WORLD.sender_key, created=T0)))
    calls: list[str] = []
    real = _proofs._ed25519_verify

    def counting(*args: Any, **kwargs: Any) -> None:
        calls.append(kwargs["who"])
        real(*args, **kwargs)

    monkeypatch.setattr(_proofs, "_ed25519_verify", counting)
    decision = StrictContractReceiver(WORLD.gate(readback=Readback.ALWAYS)).receive(raw(doc))
    assert len(calls) == verifies
    assert [r.code for r in decision.reasons][:1] == ([] if code is None else [code])


def test_any_audience_is_an_explicit_choice() -> None:
    from handoffs.contracts._signing import ANY_AUDIENCE

    doc = loads(raw(WORLD.signed()))
    fused = _verify_receipt_fast(doc, WORLD.keyring, contract=CONTRACT, now=NOW,
                                 audience=ANY_AUDIENCE, max_age=MAX_AGE)
    assert fused is not None
    assert fused == _verified(doc, audience=ANY_AUDIENCE)  # type: ignore[arg-type]


def test_a_grant_with_context_after_signing() -> None:
    grant = WORLD.grant()
    grant["@context"] = ["https://www.w3.org/ns/credentials/v2"]
    message = raw(WORLD.signed(grant=grant))
    fast, slow = _both(message)
    assert fast == slow
    _agree(loads(message))


# ---------------------------------------------------------------- the forms of step (1)


@pytest.mark.parametrize("form", ["bytes", "text"])
@pytest.mark.parametrize("message", [b"[]", b'["payment-release/1.0.0"]', b'"receipt"', b"1",
                                     b"null", b"true"])
def test_json_that_is_not_an_object_is_refused_the_reference_way(message: bytes,
                                                                 form: str) -> None:
    fast, slow = _both(_form(message, form))
    assert fast == slow
    assert [r.code for r in fast.reasons] == ["not-an-object"]


@pytest.mark.parametrize("form", FORMS)
def test_a_receipt_another_writer_spelled_with_floats_still_verifies(form: str) -> None:
    """A float that JCS writes otherwise (``0.0`` is ``0``) takes the reference path,
    whose canonical form is what the sender signed; the fused path's would not be.
    """
    signed = loads(pump.sender().sign(pump.content(lo=0.0), case_id="pump-7",
                                      evidence_refs=pump.REFS))
    signed["decision_state"]["failure_probability"]["lo"] = 0.0  # JCS: 0, the same bytes
    message = _form(orjson.dumps(signed, option=orjson.OPT_SORT_KEYS), form)
    assert b'"lo":0.0' in orjson.dumps(signed, option=orjson.OPT_SORT_KEYS)
    fast = StrictContractReceiver(pump.gate()).receive(copy.deepcopy(message))
    slow = StrictContractReceiver(_reference(pump.gate())).receive(message)
    assert fast == slow
    assert fast.verdict.name == "ACCEPT", fast


@pytest.mark.parametrize("form", FORMS)
def test_a_float_free_receipt_of_a_contract_with_numbers_takes_the_fused_path(
        form: str, reference_calls: list[str]) -> None:
    message = pump.sender().sign(pump.content(lo=0, hi=0), case_id="pump-7",
                                 evidence_refs=pump.REFS)
    assert b'"failure_probability":{"hi":0,"lo":0}' in message  # no float in it
    decision = StrictContractReceiver(pump.gate()).receive(_form(message, form))
    assert decision.verdict.name == "ACCEPT", decision
    assert reference_calls == []


def test_without_orjson_nothing_is_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    import handoffs._json as hj

    monkeypatch.setattr(hj, "_orjson", None)
    assert hj.exact_copy({"a": 1}) is None
    assert hj.exact_loads(b'{"a":1}') is None


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(("notes", "fused"), [
    ("Identity verified — screening clear; the customer’s file is complete.", True),
    ("Prüfung bestätigt: 日本語のメモ", True),
    ("a control character \x07 and a line separator \u2028", True),
    ("past the BMP: 😀", False),
])
def test_a_receipt_with_text_beyond_ascii_is_decided_the_fused_way_unless_past_the_bmp(
        notes: str, fused: bool, form: str, reference_calls: list[str]) -> None:
    message = _form(raw(WORLD.signed("policy-01", notes=notes)), form)
    fast = StrictContractReceiver(WORLD.gate(readback=Readback.ALWAYS)).receive(message)
    assert reference_calls == ([] if fused else ["reference"])
    assert fast == _both(message)[1]  # the reference decision
    assert fast.step > 2, fast


def test_oversize_text_is_refused_without_a_copy() -> None:
    import tracemalloc

    from handoffs._json import JSONLimits

    limits = JSONLimits(max_bytes=1 << 20)
    text = '{"notes":"' + "x" * (2 << 20) + '"}'
    receiver = StrictContractReceiver(WORLD.gate(limits=limits))
    tracemalloc.start()
    try:
        decision = receiver.receive(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [r.code for r in decision.reasons] == ["too-large"]
    assert peak < len(text) // 4, peak  # not encoded to bytes first
