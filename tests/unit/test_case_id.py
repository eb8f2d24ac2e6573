"""``case_id``'s rule, stated, and ``case_id_from``, the slug helper (#23: ``'order
1842'`` escaped to escalation without saying why)."""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from handoffs.contracts import Authority, Governance
from handoffs.contracts._receipt import IDENTIFIER_RULE
from handoffs.examples import payment

PATTERN = re.compile(payment.PAYMENT_RELEASE.json_schema()["properties"]["case_id"]["pattern"])


@pytest.mark.parametrize(("text", "expected"), [
    ("order 1842", "order-1842"),
    ("order-1842", "order-1842"),
    ("Bestellung Nr. 1842 – Müller", "Bestellung-Nr.-1842-Muller"),
    ("  #1842 / refund?", "1842-/-refund"),
    ("x" * 200, "x" * 128),
    ("urn:case:42", "urn:case:42"),
])
def test_case_id_from_makes_a_valid_id(text: str, expected: str) -> None:
    assert Governance.case_id_from(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "日本", "–"])
def test_text_with_nothing_to_keep_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="no ASCII letter or digit") as caught:
        Governance.case_id_from(text)
    assert caught.value.code == "invalid-case-id"


@given(st.text())
def test_case_id_from_gives_a_valid_id_or_says_why(text: str) -> None:
    if not any(c.isascii() and c.isalnum() for c in
               unicodedata.normalize("NFKD", text)):
        with pytest.raises(ValueError, match="no ASCII letter or digit"):
            Governance.case_id_from(text)
        return
    made = Governance.case_id_from(text)
    assert PATTERN.fullmatch(made)
    assert Governance.case_id_from(made) == made  # valid ids are kept as they are


def test_an_invalid_case_id_says_the_rule_and_the_helper() -> None:
    with pytest.raises(ValueError, match=re.escape(IDENTIFIER_RULE)) as caught:
        Governance(case_id="order 1842", sender="s", receiver="r",
                   authority=Authority.ADVISE, policy_version="p1",
                   valid_until=datetime(2027, 1, 1, tzinfo=UTC), evidence_refs=())
    error = caught.value
    assert (error.code, error.json_path) == ("invalid-case-id", "$.case_id")
    assert "Governance.case_id_from('order 1842')" in error.message
