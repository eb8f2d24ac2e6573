"""Receipts: Hypothesis round trips and strict loading with exact errors."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given

from handoffs._json import MAX_SAFE_INTEGER, JSONLimits, canonical_bytes, dumps
from handoffs.contracts import (
    DecisionContent,
    Interval,
    MalformedJSON,
    Receipt,
    ReceiptValidationError,
    UnknownContract,
)
from handoffs.examples.payment import (
    GOVERNANCE,
    PAYMENT_RELEASE,
    decision_contract_encoder,
    synthetic_cases,
)
from worlds.receipts import (
    PUMP,
    REGISTRY,
    Mode,
    PumpState,
    Step,
    receipts,
)

# --------------------------------------------------- a contract with every kind


@given(receipts(PAYMENT_RELEASE))
def test_payment_receipts_round_trip(receipt: Receipt[Any, Any]) -> None:
    assert Receipt.from_json(receipt.to_bytes(), registry=PAYMENT_RELEASE) == receipt
    assert Receipt.from_json(dumps(receipt.to_json(), indent=2), registry=REGISTRY) == receipt


@given(receipts(PUMP))
def test_receipts_with_every_field_kind_round_trip(receipt: Receipt[Any, Any]) -> None:
    loaded = Receipt.from_json(receipt.to_bytes(), registry=REGISTRY)
    assert loaded == receipt
    assert loaded.to_bytes() == receipt.to_bytes()
    assert Receipt.from_json(json.loads(receipt.to_bytes()), registry=REGISTRY) == receipt


def test_the_essays_cases_round_trip_through_the_governance_service() -> None:
    encoder = decision_contract_encoder()
    for case in synthetic_cases():
        receipt = Receipt.build(PAYMENT_RELEASE, encoder.encode(case),
                                GOVERNANCE.stamp(case_id=case.case_id,
                                                 evidence_refs=case.evidence_refs))
        assert Receipt.from_json(receipt.to_bytes(), registry=PAYMENT_RELEASE) == receipt
        assert receipt.proposed_action is PAYMENT_RELEASE.decide(case.state())


# --------------------------------------------------------------- strict loading


def _document() -> dict[str, Any]:
    case = next(iter(synthetic_cases()))
    receipt = Receipt.build(
        PAYMENT_RELEASE, decision_contract_encoder().encode(case),
        GOVERNANCE.stamp(case_id=case.case_id, evidence_refs=case.evidence_refs),
        id="urn:uuid:00000000-0000-4000-8000-000000000001",
    )
    return receipt.to_json()


DOC = _document()


def _load_error(doc: dict[str, Any]) -> ReceiptValidationError:
    with pytest.raises(ReceiptValidationError) as info:
        Receipt.from_json(json.dumps(doc), registry=PAYMENT_RELEASE)
    assert info.value.code == "schema-invalid"
    assert (info.value.contract, info.value.version) == ("payment-release", "1.0.0")
    return info.value


def _with(**changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(DOC)
    for path, value in changes.items():
        *parents, last = path.split("__")
        target = doc
        for part in parents:
            target = target[part]
        if value is _DELETE:
            del target[last]
        else:
            target[last] = value
    return doc


_DELETE = object()


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"extra": 1}, ["unknown field 'extra' @ $"]),
        ({"decision_state__extra": True}, ["unknown field 'extra' @ $.decision_state"]),
        ({"decision_state__policy_current": "yes"},
         ["expected a boolean, got 'yes' @ $.decision_state.policy_current"]),
        ({"decision_state__high_value": _DELETE},
         ["required field 'high_value' missing @ $.decision_state"]),
        ({"decision_state": _DELETE}, ["required field 'decision_state' missing @ $"]),
        ({"decision_state__high_value": 1},
         ["expected a boolean, got 1 @ $.decision_state.high_value"]),
        ({"proposed_action": "FREEZE"},
         ["expected one of ['RELEASE', 'HOLD', 'REJECT_DUPLICATE', 'ESCALATE'], got 'FREEZE' "
          "@ $.proposed_action"]),
        ({"authority": "advise"}, ["expected one of ['ADVISE', 'DECIDE'], got 'advise' "
                                   "@ $.authority"]),
        ({"evidence_refs": []}, ["[] should be non-empty @ $.evidence_refs"]),
        ({"valid_until": "2026-13-45T00:00:00Z"},
         ["invalid time '2026-13-45T00:00:00Z': month must be in 1..12 @ $.valid_until"]),
    ],
    ids=["unknown-key", "unknown-state-key", "wrong-type", "missing-field", "missing-state",
         "int-for-bool", "unknown-action", "enum-case", "no-evidence", "impossible-date"],
)
def test_strict_loading_names_each_violation(changes: dict[str, Any], expected: list[str]
                                             ) -> None:
    error = _load_error(_with(**changes))
    assert [str(v) for v in error.violations] == expected
    assert f"{error.message} @ {error.json_path}" == expected[0]


def test_every_violation_is_reported_best_first() -> None:
    doc = _with(decision_state__policy_current="yes", authority="MAYBE",
                decision_state__high_value=_DELETE, extra=True, valid_until="tomorrow")
    error = _load_error(doc)
    assert [str(v) for v in error.violations] == [
        "expected a boolean, got 'yes' @ $.decision_state.policy_current",
        "expected one of ['ADVISE', 'DECIDE'], got 'MAYBE' @ $.authority",
        "required field 'high_value' missing @ $.decision_state",
        "'tomorrow' does not match '^\\\\d{4}-\\\\d{2}-\\\\d{2}T\\\\d{2}:\\\\d{2}:\\\\d{2}"
        "(\\\\.\\\\d{1,6})?Z$' @ $.valid_until",
        "unknown field 'extra' @ $",
    ]
    assert error.json_path == "$.decision_state.policy_current"
    assert str(error) == ("expected a boolean, got 'yes' @ $.decision_state.policy_current "
                          "(and 4 more)")


def _raw(extra_member: str) -> str:
    """The document's JSON text with one more member spliced in before the final brace."""
    return json.dumps(DOC)[:-1] + ", " + extra_member + "}"


@pytest.mark.parametrize(
    ("text", "code", "match"),
    [
        (_raw('"notes": "a", "notes": "b"'), "duplicate-key", "duplicate key 'notes'"),
        (_raw('"notes": NaN'), "non-finite-number", "NaN is not JSON"),
        (_raw('"notes": Infinity'), "non-finite-number", "Infinity is not JSON"),
        (_raw('"notes": -Infinity'), "non-finite-number", "-Infinity is not JSON"),
        (_raw('"notes": 1e400'), "non-finite-number", "overflows a double"),
        (_raw(f'"notes": {MAX_SAFE_INTEGER + 1}'), "integer-out-of-range",
         r"9007199254740992 is outside"),
        (_raw(f'"notes": {-MAX_SAFE_INTEGER - 1}'), "integer-out-of-range", "outside"),
        (_raw('"notes": ' + "[" * 40 + "]" * 40), "too-deep", "deeper than 32 levels"),
        ("[]", "not-an-object", "must be a JSON object"),
        (json.dumps(DOC)[:-1], "invalid-json", "invalid JSON"),
        (b"\xff" + json.dumps(DOC).encode(), "invalid-utf8", "not UTF-8"),
    ],
    ids=["duplicate-key", "nan", "infinity", "minus-infinity", "overflow", "int-2^53",
         "int-minus-2^53", "too-deep", "array", "truncated", "bad-utf8"],
)
def test_malformed_bytes_are_refused(text: str | bytes, code: str, match: str) -> None:
    with pytest.raises(MalformedJSON, match=match) as info:
        Receipt.from_json(text, registry=PAYMENT_RELEASE)
    assert (info.value.code, info.value.json_path) == (code, "$")


def test_largest_safe_integer_parses_and_then_fails_the_schema() -> None:
    error = _load_error_raw(_raw(f'"notes": {MAX_SAFE_INTEGER}'))
    assert [str(v) for v in error.violations] == [
        "expected a string, got 9007199254740991 @ $.notes"]


def _load_error_raw(text: str) -> ReceiptValidationError:
    with pytest.raises(ReceiptValidationError) as info:
        Receipt.from_json(text, registry=PAYMENT_RELEASE)
    return info.value


def test_too_large_is_refused_before_parsing() -> None:
    text = json.dumps(DOC)
    with pytest.raises(MalformedJSON, match="exceeds the limit of 100 bytes") as info:
        Receipt.from_json(text, limits=JSONLimits(max_bytes=100), registry=PAYMENT_RELEASE)
    assert info.value.code == "too-large"
    with pytest.raises(MalformedJSON, match=f"is {len(text)} bytes, the limit is 100") as info:
        Receipt.from_json(text.encode(), limits=JSONLimits(max_bytes=100),
                          registry=PAYMENT_RELEASE)
    assert info.value.code == "too-large"


@pytest.mark.parametrize(
    ("contract", "code", "message"),
    [
        ("payment-release/9.9.9", "unknown-contract",
         "unknown contract 'payment-release/9.9.9'; known versions: 1.0.0 @ $.contract"),
        ("other/1.0.0", "unknown-contract", "unknown contract 'other/1.0.0' @ $.contract"),
        (_DELETE, "no-contract", "the message names no contract @ $.contract"),
        (7, "no-contract", "the message names no contract @ $.contract"),
    ],
    ids=["unknown-version", "unknown-contract", "no-contract", "not-a-string"],
)
def test_wrong_contract_or_unknown_version_is_refused(contract: Any, code: str, message: str
                                                      ) -> None:
    with pytest.raises(UnknownContract) as info:
        Receipt.from_json(json.dumps(_with(contract=contract)), registry=PAYMENT_RELEASE)
    assert (info.value.code, info.value.json_path, str(info.value)) == (code, "$.contract",
                                                                         message)


def test_a_receipt_for_a_contract_the_registry_lacks_is_unknown() -> None:
    receipt = Receipt.build(
        PUMP,
        DecisionContent(Step.STOP, PumpState(Mode.AUTO, 3, 80.5, Interval(0.1, 0.2), True)),
        GOVERNANCE.stamp(case_id="pump-1", evidence_refs=["evidence://pump/1"]),
    )
    with pytest.raises(UnknownContract, match=r"'pump-receipts/1\.0\.0'"):
        Receipt.from_json(receipt.to_bytes(), registry=PAYMENT_RELEASE)
    assert Receipt.from_json(receipt.to_bytes(), registry=REGISTRY) == receipt


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ({"failure_probability": {"lo": 0.5, "hi": 0.2}},
         "interval lower bound 0.5 exceeds upper bound 0.2 @ "
         "$.decision_state.failure_probability"),
        ({"failure_probability": {"lo": 0.1}},
         "required field 'hi' missing @ $.decision_state.failure_probability"),
        ({"failure_probability": {"lo": 0.1, "hi": 1.5}},
         "1.5 is above the maximum 1.0 @ $.decision_state.failure_probability.hi"),
        ({"cycles": 2.5}, "expected an integer, got 2.5 @ $.decision_state.cycles"),
        ({"cycles": -1}, "-1 is below the minimum 0 @ $.decision_state.cycles"),
        ({"mode": "auto"},
         "expected one of ['AUTO', 'MANUAL', 'OFF'], got 'auto' @ $.decision_state.mode"),
        ({"temperature": True}, "expected a number, got true @ $.decision_state.temperature"),
    ],
    ids=["interval-reversed", "interval-incomplete", "interval-out-of-bounds", "int-fraction",
         "int-below", "enum-case", "bool-for-float"],
)
def test_every_field_kind_is_checked(state: dict[str, Any], expected: str) -> None:
    receipt = Receipt.build(
        PUMP,
        DecisionContent(Step.STOP, PumpState(Mode.AUTO, 3, 80.5, Interval(0.1, 0.2), True)),
        GOVERNANCE.stamp(case_id="pump-1", evidence_refs=["evidence://pump/1"]),
    )
    doc = receipt.to_json()
    doc["decision_state"].update(state)
    with pytest.raises(ReceiptValidationError) as info:
        Receipt.from_json(canonical_bytes(doc), registry=REGISTRY)
    assert [str(v) for v in info.value.violations] == [expected]
    assert (info.value.contract, info.value.version) == ("pump-receipts", "1.0.0")


def test_notes_are_bounded_by_the_contract() -> None:
    error = _load_error(_with(notes="x" * 2001))
    assert [v.json_path for v in error.violations] == ["$.notes"]
    assert error.violations[0].validator == "maxLength"
