"""The compiled helpers change no byte and no verdict.

orjson parses canonical bytes and writes the canonical form of plain values; based58
(optional) decodes base58btc. Each is checked here against the reference it stands in
for — the hooked standard-library parser, ``rfc8785`` and the pure-Python base58
decoder — over generated JSON (Unicode, escapes, big integers, floats) and hostile
bytes, and the fallback without them is run through the same properties.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
import rfc8785
from hypothesis import assume, given
from hypothesis import strategies as st

from handoffs import HandoffsError
from handoffs import _json as hj
from handoffs._json import canonical_bytes, canonical_bytes_plain, jcs_plain, loads_plain
from handoffs.integrity import _base58
from handoffs.integrity._base58 import _B58_ALPHABET, b58encode

SAFE = 2**53 - 1

keys = st.text(max_size=6) | st.sampled_from(["a", "b", "é", "\u2028", "\x7f", "\U0001f600",
                                              "\ufb01", "\ue000", "\\", '"', "\n"])
scalars = (
    st.none() | st.booleans()
    | st.integers(-SAFE, SAFE) | st.integers() | st.sampled_from([SAFE, -SAFE, SAFE + 1])
    | st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([1.0, -0.0, 1e21, 1e-7])
    | st.text(max_size=12)
    | st.sampled_from(["\x00", "\x1f\x7f", "\u2028\u2029", "\\u0041", "é", "\U0001f600", "\ud800"])
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(keys, inner, max_size=4), max_leaves=16)


def _same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (1, 1.0 and True differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float):
        return repr(a) == repr(b)
    return bool(a == b)


def _outcome(parse: Any, raw: bytes) -> tuple[str, Any]:
    try:
        return "ok", parse(raw)
    except HandoffsError as exc:
        return "error", exc.code


@pytest.fixture
def stdlib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hj, "_orjson", None)


def _reference(raw: bytes) -> tuple[str, Any]:
    saved, hj._orjson = hj._orjson, None
    try:
        return _outcome(loads_plain, raw)
    finally:
        hj._orjson = saved


def _agree(raw: bytes) -> None:
    fast, reference = _outcome(loads_plain, raw), _reference(raw)
    assert fast[0] == reference[0], (fast, reference)
    if fast[0] == "error":
        assert fast[1] == reference[1]
        return
    (value, plain), (expected, expected_plain) = fast[1], reference[1]
    assert _same(value, expected)
    assert plain <= expected_plain  # the fast flag may only be more careful


@given(values)
def test_orjson_parse_agrees_with_the_strict_parser_on_canonical_bytes(value: Any) -> None:
    try:
        raw = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        assume(False)
    _agree(raw)


@given(values, st.sampled_from([None, 1]), st.booleans())
def test_orjson_parse_agrees_on_other_spellings(value: Any, indent: int | None,
                                                 ascii_only: bool) -> None:
    _agree(json.dumps(value, indent=indent, ensure_ascii=ascii_only)
           .encode("utf-8", "surrogatepass"))


@given(values, st.data())
def test_orjson_parse_agrees_on_damaged_bytes(value: Any, data: st.DataObject) -> None:
    raw = bytearray(json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                               sort_keys=True).encode("utf-8", "surrogatepass"))
    at = data.draw(st.integers(0, len(raw)))
    raw[at:at] = data.draw(st.sampled_from(
        [b'"', b",", b"{", b"[", b"\\ud800", b"1e400", b"9007199254740992", b'"k":1,"k":2',
         b"\xff", b"\xed\xa0\x80", b" ", b"NaN", b".5", b"-0", b"01"]))
    _agree(bytes(raw))


@pytest.mark.parametrize("raw", [
    b'{"a":1,"a":1}', b'{"a":[1,{"b":2,"b":2}]}', b"[9007199254740991]",
    b"[9007199254740992]", b"[-9007199254740992]", b"[18446744073709551616]", b"[1e400]",
    b'["\\ud800"]', b'["\\udc00"]', b'{"\\ud800":1}', b'["\\ud83d\\ude00"]', b"\xef\xbb\xbf{}",
    b"[" * 33 + b"]" * 33, b"[" * 32 + b"]" * 32, b'["[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["]',
    b"[1.0]", b"1.5", b'{"a":"x,1.5"}', b"[1e-7]", b'{"a":NaN}', b"[0.1]", b"{}", b"[]",
])
def test_orjson_parse_agrees_on_the_edges(raw: bytes) -> None:
    _agree(raw)


def test_canonical_senders_take_the_fast_path() -> None:
    raw = orjson.dumps({"b": [1, "x"], "a": {"c": None}}, option=orjson.OPT_SORT_KEYS)
    assert hj._fast_loads(raw, 32) == ({"a": {"c": None}, "b": [1, "x"]}, True)
    assert hj._fast_loads(b'{"b":1, "a":2}', 32) is None  # not canonical: stdlib parses
    assert hj._fast_loads(b'{"a":1,"a":1}', 32) is None
    assert hj._fast_loads(b"[9007199254740992]", 32) is None
    assert hj._fast_loads(b'{"a":1.5}', 32) == ({"a": 1.5}, False)


@pytest.mark.parametrize(("raw", "plain"), [
    # A digest's hex after "sha256:" looks like a float token but is inside a string.
    (b'{"digest":"sha256:228ee085c9","uri":"evidence://a/1e5"}', True),
    (b'{"a":"x:1.5","b":"y,2e3","c":["[3.5"]}', False),  # look-alikes: the careful answer
    (b'{"a":1,"b":[2,-3],"c":{"d":0}}', True),
    (b'{"a":1.5}', False), (b'{"a":[1,2.5]}', False), (b'{"a":[-0.0]}', False),
    (b'{"a":{"b":1e+16}}', False), (b'{"a":[1,1e-7]}', False), (b'[0.5]', False),
    (b'{"k":"sha256:1","n":-1.5}', False),
    # a number only after an array's comma (none after '":' or '['): still looked at
    (b'{"a":["x",1.5]}', False), (b'{"a":["x",2]}', True),
])
def test_the_plain_flag_tells_floats_from_their_look_alikes(raw: bytes, plain: bool) -> None:
    value, fast_plain = loads_plain(raw)
    assert orjson.dumps(value, option=orjson.OPT_SORT_KEYS) == raw  # the fast path ran
    assert fast_plain is plain
    if fast_plain:
        assert canonical_bytes_plain(value) == rfc8785.dumps(value)


@given(values)
def test_the_plain_flag_is_exact_without_look_alikes(value: Any) -> None:
    # Without a float-shaped token inside a string, the fast flag is the parser's own.
    try:
        raw = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        assume(False)
    strings = [s for s in _strings(value) if hj._FLOAT_TOKEN.search(s.encode())]
    assume(not strings)
    fast, reference = _outcome(loads_plain, raw), _reference(raw)
    assume(fast[0] == "ok")
    assert fast[1][1] == reference[1][1]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [*value, *(s for item in value.values() for s in _strings(item))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


@given(values)
def test_orjson_canonical_form_is_rfc8785_on_plain_values(value: Any) -> None:
    assume(jcs_plain(value))
    try:
        expected = rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, UnicodeEncodeError):
        with pytest.raises(HandoffsError):
            canonical_bytes(value)
        return
    assert canonical_bytes(value) == expected
    assert orjson.dumps(value, option=orjson.OPT_SORT_KEYS) == expected


@given(values)
def test_canonical_bytes_are_rfc8785_with_and_without_orjson(value: Any) -> None:
    with_orjson = _outcome(canonical_bytes, value)
    saved, hj._orjson = hj._orjson, None
    try:
        without = _outcome(canonical_bytes, value)
    finally:
        hj._orjson = saved
    assert with_orjson == without
    if with_orjson[0] == "ok":
        assert with_orjson[1] == rfc8785.dumps(value)


@given(values)
def test_parsed_plain_documents_canonicalise_as_rfc8785(value: Any) -> None:
    try:
        raw = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        parsed, plain = loads_plain(raw)
    except (orjson.JSONEncodeError, TypeError, HandoffsError):
        assume(False)
    if plain:
        assert canonical_bytes_plain(parsed) == rfc8785.dumps(parsed)


def test_floats_never_take_the_orjson_canonical_path() -> None:
    # orjson writes 1.0 where JCS writes 1, and 1e-07 style differences exist.
    assert orjson.dumps(1.0) != rfc8785.dumps(1.0)
    assert canonical_bytes({"a": 1.0, "b": 1e21}) == rfc8785.dumps({"a": 1.0, "b": 1e21})


def test_a_document_exactly_at_the_depth_limit_takes_the_orjson_parse() -> None:
    assert hj._fast_loads(b'{"a":[1]}', 2) == ({"a": [1]}, True)
    assert hj._fast_loads(b'{"a":[1]}', 1) is None  # deeper than the limit: strict parser


def test_text_within_the_bmp_is_plain_and_past_it_is_not() -> None:
    assert loads_plain('{"a":"é"}'.encode()) == ({"a": "é"}, True)
    assert loads_plain('{"a":"\U0001f600"}'.encode()) == ({"a": "\U0001f600"}, False)


@pytest.mark.usefixtures("stdlib")
def test_the_stdlib_fallback_parses_and_canonicalises_alike() -> None:
    assert hj._fast_loads(b"{}", 32) is None
    assert loads_plain(b'{"a":[1,"x"]}') == ({"a": [1, "x"]}, True)
    assert canonical_bytes({"b": 1, "a": "é"}) == rfc8785.dumps({"b": 1, "a": "é"})


# ---------------------------------------------------------------------------- base58

alphabet_text = st.text(alphabet=_B58_ALPHABET, max_size=100)


@given(st.binary(max_size=80))
def test_base58_encoding_agrees_with_pure_python(data: bytes) -> None:
    assert b58encode(data) == _base58._b58encode_python(data)


@given(alphabet_text | st.text(max_size=20))
def test_base58_decoding_agrees_with_pure_python(text: str) -> None:
    expected = (_base58._b58decode_python(text) if _base58._B58_CHARS.issuperset(text)
                else None)
    assert _base58._b58decode_or_none(text) == expected


@pytest.mark.parametrize("text", ["", "1", "11", "z", "1z", "2" * 88, "0", "O", "I", "l",
                                  "é", "1\u0661"])
def test_base58_edges(text: str) -> None:
    saved = _base58._based58
    try:
        fast = _base58._b58decode_or_none(text)
        _base58._based58 = None
        assert _base58._b58decode_or_none(text) == fast
    finally:
        _base58._based58 = saved


def test_the_pure_python_base58_fallback_is_in_use_without_based58(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_base58, "_based58", None)
    assert b58encode(b"\0\0\x01") == "112"
    assert _base58._b58decode_or_none("112") == b"\0\0\x01"


def test_orjson_writes_every_bmp_character_as_jcs_does() -> None:
    """Why simple text may hold any character of the Basic Multilingual Plane: orjson
    escapes and sorts every one as RFC 8785 does; past the BMP, keys sort otherwise.
    """
    chars = [chr(c) for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]
    values = ["x" + ch for ch in chars]
    assert orjson.dumps(values) == rfc8785.dumps(values)
    keys = dict.fromkeys(reversed(chars), 0)
    assert orjson.dumps(keys, option=orjson.OPT_SORT_KEYS) == rfc8785.dumps(keys)
    astral = {"\uffff": 0, "\U0001f600": 0}
    assert orjson.dumps(astral, option=orjson.OPT_SORT_KEYS) != rfc8785.dumps(astral)
