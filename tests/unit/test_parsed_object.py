"""What the parser learned travels with the parsed document (issue #29 item 3): a
:class:`handoffs._json.ParsedObject` carries ``plain`` (the fast canonical form covers
every part) and ``valid_for`` (the contract whose schema it passed), so that no
``encode=`` or ``valid=`` flag runs beside a document from one part to another.
"""

from __future__ import annotations

import inspect

import pytest
import rfc8785

from handoffs._errors import MalformedJSON, ReceiptValidationError
from handoffs._json import ParsedObject, canonical_bytes, load_object, parse_object
from handoffs.contracts import Receipt
from handoffs.contracts._signing import verify_receipt
from handoffs.examples.payment import PAYMENT_RELEASE
from handoffs.integrity import verify


@pytest.mark.parametrize(("text", "plain"), [
    (b'{"a":[1,"x"],"b":{"c":null}}', True),
    (b'{"a":1.5}', False),  # JCS writes floats otherwise
    ('{"a":"\U0001f600"}'.encode(), False),  # JCS sorts past the BMP by UTF-16 units
])
def test_the_parser_says_plain_and_canonical_bytes_reads_it(text: bytes, plain: bool) -> None:
    parsed = parse_object(text)
    assert type(parsed) is ParsedObject
    assert parsed.plain is plain
    assert parsed.valid_for is None
    assert canonical_bytes(parsed) == rfc8785.dumps(dict(parsed))
    member = parsed.member(parsed.get("b"))
    if member is not None:
        assert type(member) is ParsedObject
        assert member.plain is plain


def test_a_mapping_is_checked_under_the_limits_it_is_given() -> None:
    parsed = parse_object({"a": [1, 2]})
    assert (type(parsed), parsed.plain) == (ParsedObject, True)
    with pytest.raises(MalformedJSON) as info:
        parse_object({"a": float("nan")})
    assert info.value.code == "non-finite-number"
    with pytest.raises(MalformedJSON) as info:
        parse_object(b"[1]")
    assert info.value.code == "not-an-object"
    assert load_object(parsed, what="x") is parsed  # as its parser checked it


def test_the_schema_a_document_passed_travels_with_it() -> None:
    document = parse_object(b'{"contract": "payment-release/1.0.0"}')
    with pytest.raises(ReceiptValidationError):
        PAYMENT_RELEASE.validate(document)
    assert document.valid_for is None  # refused: nothing learned
    from worlds.gate import WORLD, raw

    signed = parse_object(raw(WORLD.signed()))
    PAYMENT_RELEASE.validate(signed)
    assert signed.valid_for is PAYMENT_RELEASE


def test_no_flag_crosses_a_part_boundary() -> None:
    """The public verifications take the document and what to check, nothing about how
    to canonicalise it or whether it was validated before."""
    for function in (verify, verify_receipt, Receipt.verify):
        parameters = set(inspect.signature(function).parameters)
        assert not parameters & {"encode", "valid", "plain", "canonicalise"}, function
