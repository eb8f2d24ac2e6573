"""Behaviours of the gate's one check path that the fused path's differential tests
(``tests/test_fused.py``, removed with that path in issue 20) pinned and no other test
does: the three input forms agree at the size limit, JSON that is not an object is
refused at parse whatever its form, and a receipt another writer spelled with a float
JCS writes otherwise still verifies (the parser's plain flag sends it the reference
canonical way).
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

import test_sender as pump
from handoffs._errors import HandoffsError
from handoffs._json import JSONLimits, loads
from handoffs.receivers import StrictContractReceiver, Verdict
from worlds.gate import WORLD, raw

FORMS = ("bytes", "text", "parsed")


def _form(message: bytes, form: str) -> Any:
    try:
        return {"bytes": lambda: message, "text": lambda: message.decode("utf-8"),
                "parsed": lambda: loads(message)}[form]()
    except (UnicodeDecodeError, HandoffsError):
        return None


@pytest.mark.parametrize("form", ["bytes", "text"])
@pytest.mark.parametrize("margin", [0, 1])
def test_a_receipt_at_the_size_limit_is_admitted_and_one_byte_over_refused(
        margin: int, form: str) -> None:
    message = raw(WORLD.signed())
    gate = WORLD.gate(limits=JSONLimits(max_bytes=len(message) - margin))
    decision = StrictContractReceiver(gate).receive(_form(message, form))
    if margin:
        assert [r.code for r in decision.reasons] == ["too-large"]
        assert decision.step == 1
    else:
        assert decision.step > 2  # past the proofs


@pytest.mark.parametrize("form", ["bytes", "text"])
@pytest.mark.parametrize("message", [b"[]", b'["payment-release/1.0.0"]', b'"receipt"', b"1",
                                     b"null", b"true"])
def test_json_that_is_not_an_object_is_refused_at_parse(message: bytes, form: str) -> None:
    decision = StrictContractReceiver(WORLD.gate()).receive(_form(message, form))
    assert (decision.verdict, decision.step) == (Verdict.REJECT, 1)
    assert [r.code for r in decision.reasons] == ["not-an-object"]


@pytest.mark.parametrize("form", FORMS)
def test_a_receipt_another_writer_spelled_with_floats_still_verifies(form: str) -> None:
    """``0.0`` is ``0`` in JCS, which the sender signed; orjson writes ``0.0``."""
    signed = loads(pump.sender().sign(pump.content(lo=0.0), case_id="pump-7",
                                      evidence_refs=pump.REFS))
    signed["decision_state"]["failure_probability"]["lo"] = 0.0
    text = orjson.dumps(signed, option=orjson.OPT_SORT_KEYS)
    assert b'"lo":0.0' in text
    decision = StrictContractReceiver(pump.gate()).receive(copy.deepcopy(_form(text, form)))
    assert decision.verdict is Verdict.ACCEPT, decision


@pytest.mark.parametrize("form", FORMS)
def test_a_float_free_receipt_of_a_contract_with_numbers_is_admitted(form: str) -> None:
    message = pump.sender().sign(pump.content(lo=0, hi=0), case_id="pump-7",
                                 evidence_refs=pump.REFS)
    assert b'"failure_probability":{"hi":0,"lo":0}' in message
    decision = StrictContractReceiver(pump.gate()).receive(_form(message, form))
    assert decision.verdict is Verdict.ACCEPT, decision
