"""Strict JSON in, canonical JSON out: RFC 8785 equality and the parser's limits."""

from __future__ import annotations

import json
import math
import random
import re
from typing import Any

import pytest
import rfc8785
from hypothesis import example, given
from hypothesis import strategies as st

from handoffs._json import (
    DEFAULT_LIMITS,
    MAX_SAFE_INTEGER,
    JSONLimits,
    canonical_bytes,
    canonical_bytes_plain,
    canonical_size,
    check_value,
    digest,
    dumps,
    jcs_plain,
    loads,
    loads_plain,
)
from handoffs.contracts import MalformedJSON

# Keys and strings mix ASCII, BMP, astral-plane characters and control characters,
# where UTF-16 ordering (JCS) and code-point ordering (Python) disagree.
characters = st.characters(codec="utf-8", exclude_categories=["Cs"])
astral = st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF, codec="utf-8")
controls = st.characters(max_codepoint=0x1F)
texts = st.text(st.one_of(characters, astral, controls), max_size=12)
edge_ints = st.sampled_from([0, -1, 1, MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER,
                             MAX_SAFE_INTEGER - 1, 2**31, -(2**31), 2**32])
ints = st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER) | edge_ints
# Whole floats in (2^53 − 1, 1e21) are refused on purpose (see below); all others are
# canonicalised exactly as rfc8785 does.
floats = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda f: not MAX_SAFE_INTEGER < abs(f) < 1e21
)
scalars = st.none() | st.booleans() | ints | floats | texts
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=20,
)
# Values without floats take the fast path; test it on its own so it is exercised.
no_floats = st.recursive(
    st.none() | st.booleans() | ints | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
@example({"\U0001f600": 1, "\ufb33": 2, "a": 3})
@example({"\u20ac": "\x00\x1f\u2028", "\U00010000": [MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER]})
@example([1e21, 1e-7, -0.0, 5e-324, 1.7976931348623157e308])
def test_canonical_bytes_equal_rfc8785(value: Any) -> None:
    assert canonical_bytes(value) == rfc8785.dumps(value)


@given(no_floats)
def test_fast_path_equals_rfc8785(value: Any) -> None:
    assert canonical_bytes(value) == rfc8785.dumps(value)


@given(st.dictionaries(texts, json_values, min_size=1, max_size=6), st.randoms())
def test_canonical_form_ignores_key_order(value: dict[str, Any], rnd: random.Random) -> None:
    items = list(value.items())
    rnd.shuffle(items)
    assert canonical_bytes(dict(items)) == canonical_bytes(value)


@given(json_values, st.sampled_from([None, 0, 2, 4]))
def test_canonical_form_ignores_whitespace(value: Any, indent: int | None) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=bool(indent))
    assert canonical_bytes(loads(text)) == canonical_bytes(value)


safe_floats = st.floats(-(2.0**53), 2.0**53, exclude_min=True, exclude_max=True)
safe_values = st.recursive(
    st.none() | st.booleans() | ints | safe_floats | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=20,
)


@given(safe_values)
def test_strict_parser_round_trips_canonical_bytes(value: Any) -> None:
    assert canonical_bytes(loads(canonical_bytes(value))) == canonical_bytes(value)


@pytest.mark.parametrize("number", [2.0**53, -(2.0**60), 9.99e20])
def test_floats_written_as_unsafe_integer_literals_are_refused(number: float) -> None:
    # JCS would write them as digit strings the strict parser refuses, so the canonical
    # bytes could not be read back: refuse them when canonicalising instead.
    with pytest.raises(MalformedJSON) as info:
        canonical_bytes({"x": number})
    assert info.value.code == "integer-out-of-range"


def test_floats_beyond_1e21_use_exponent_form_and_parse_back() -> None:
    value = {"x": 1e21}
    assert canonical_bytes(value) == b'{"x":1e+21}'
    assert loads(canonical_bytes(value)) == value


def test_astral_keys_sort_by_utf16_code_units() -> None:
    # U+1F600 is D83D DE00 in UTF-16, so it sorts before U+FB33 (JCS), not after.
    assert canonical_bytes({"\ufb33": 1, "\U0001f600": 2}) == (
        '{"\U0001f600":2,"\ufb33":1}'.encode()
    )


@pytest.mark.parametrize(
    ("value", "code"),
    [
        (float("nan"), "non-finite-number"),
        ([float("inf")], "non-finite-number"),
        (MAX_SAFE_INTEGER + 1, "integer-out-of-range"),
        ({"a": -(2**60)}, "integer-out-of-range"),
        ("\ud800", "invalid-json"),
        ({1: "non-string key"}, "invalid-json"),
        ({"a": object()}, "invalid-json"),
    ],
    ids=["nan", "infinity", "2^53", "-2^60", "lone-surrogate", "int-key", "object"],
)
def test_values_jcs_cannot_represent_are_refused(value: Any, code: str) -> None:
    with pytest.raises(MalformedJSON) as info:
        canonical_bytes(value)
    assert info.value.code == code


def test_digest_names_its_algorithm() -> None:
    assert digest({"b": 1, "a": 2}) == digest({"a": 2, "b": 1})
    assert digest(b"") == ("sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b"
                           "7852b855")


def test_dumps_is_sorted_utf8_and_refuses_nan() -> None:
    assert dumps({"b": "é", "a": 1}) == '{"a":1,"b":"é"}'
    with pytest.raises(ValueError, match="Out of range float"):
        dumps(float("nan"))


# ---------------------------------------------------------------- parser limits


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ('{"a": 1, "a": 2}', "duplicate-key"),
        ('{"x": {"a": 1, "a": 1}}', "duplicate-key"),
        ("NaN", "non-finite-number"),
        ("[Infinity]", "non-finite-number"),
        ('{"a": -Infinity}', "non-finite-number"),
        ("1e309", "non-finite-number"),
        ("9007199254740992", "integer-out-of-range"),
        ("-9007199254740992", "integer-out-of-range"),
        ("1" * 400, "integer-out-of-range"),
        ("{'a': 1}", "invalid-json"),
        ("[1,]", "invalid-json"),
        ("", "invalid-json"),
    ],
)
def test_parser_refuses_non_ijson(text: str, code: str) -> None:
    with pytest.raises(MalformedJSON) as info:
        loads(text)
    assert (info.value.code, info.value.json_path) == (code, "$")


def test_integers_at_the_edge_parse() -> None:
    assert loads(f"[{MAX_SAFE_INTEGER}, {-MAX_SAFE_INTEGER}]") == [MAX_SAFE_INTEGER,
                                                                   -MAX_SAFE_INTEGER]


def test_depth_limit_is_exact() -> None:
    limit = DEFAULT_LIMITS.max_depth
    assert loads("[" * limit + "]" * limit) is not None
    with pytest.raises(MalformedJSON, match=f"deeper than {limit} levels") as info:
        loads("[" * (limit + 1) + "]" * (limit + 1))
    assert info.value.code == "too-deep"


def test_brackets_inside_strings_do_not_count_as_depth() -> None:
    text = json.dumps({"s": "[{" * 100 + '\\"' + "]}" * 100})
    assert loads(text)["s"].startswith("[{[{")


def test_size_limit_counts_utf8_bytes() -> None:
    limits = JSONLimits(max_bytes=10)
    assert loads('"éééé"', limits=limits) == "éééé"  # 10 bytes
    with pytest.raises(MalformedJSON) as info:
        loads('"ééééé"', limits=limits)  # 12 bytes, 7 characters
    assert info.value.code == "too-large"
    with pytest.raises(MalformedJSON) as info:
        loads('"ééééé"'.encode(), limits=limits)
    assert info.value.code == "too-large"


def test_bytes_must_be_utf8_and_a_bom_is_ignored() -> None:
    with pytest.raises(MalformedJSON, match="not UTF-8") as info:
        loads(b'"\xc3\x28"')
    assert info.value.code == "invalid-utf8"
    assert loads("\ufeff[1]".encode()) == [1]


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        JSONLimits(max_bytes=0)


# The canonical size, and the parser's word that a document is plain.

with_surrogates = st.text(st.characters(codec=None, min_codepoint=0xD800, max_codepoint=0xDFFF)
                          | characters, max_size=6)
unusual = st.recursive(
    scalars | st.integers() | with_surrogates | st.sampled_from([float("nan"), 2.0**60]),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(texts | with_surrogates, inner, max_size=4)
    | st.dictionaries(st.integers(), inner, min_size=1, max_size=2),
    max_leaves=12,
)


@given(st.one_of(json_values, unusual))
@example("x" * 63 + '"')
@example("x" * 64 + "\x7f")
@example("y" * 100 + "\\")
@example({"a" * 70: ["b" * 80, {"\n": 1}]})
@example({"": math.inf, "0": 9007199254740992.0})  # two errors: the whole value's is named
def test_canonical_size_is_the_length_of_the_canonical_bytes(value: Any) -> None:
    try:
        expected: int | str = len(canonical_bytes(value))
    except MalformedJSON as refused:
        expected = refused.code  # canonical_size names the same error
    try:
        found: int | str = canonical_size(value)
    except MalformedJSON as refused:
        found = refused.code
    assert found == expected


_nested: list[Any] = []
_nested.append({"x": _nested})


@pytest.mark.parametrize(
    ("value", "limits", "code", "path"),
    [
        ({"a": [1, {"b": math.nan}]}, DEFAULT_LIMITS, "non-finite-number", "$.a[1].b"),
        ([[0, 2**53]], DEFAULT_LIMITS, "integer-out-of-range", "$[0][1]"),
        ({"k": ("x", {"\ud800": 1})}, DEFAULT_LIMITS, "lone-surrogate", "$.k[1]"),
        ({"k": ["\udfff"]}, DEFAULT_LIMITS, "lone-surrogate", "$.k[0]"),
        ({"a": {"b": {1: 2}}}, DEFAULT_LIMITS, "invalid-json", "$.a.b"),
        ({"a.b": [{"c": {1, 2}}]}, DEFAULT_LIMITS, "invalid-json", "$.a.b[0].c"),
        (_nested, JSONLimits(max_depth=4), "too-deep", "$[0].x[0].x"),
        ({"a": "x" * 20}, JSONLimits(max_bytes=10), "too-large", "$"),
    ],
)
def test_check_value_names_the_offending_value(value: Any, limits: JSONLimits, code: str,
                                                path: str) -> None:
    with pytest.raises(MalformedJSON) as info:
        check_value(value, limits=limits)
    assert (info.value.code, info.value.json_path) == (code, path)


def _paths(value: Any, path: str, depth: int) -> list[tuple[str, int, Any]]:
    """Every node of ``value`` (to depth 8): (JSON path, depth, node)."""
    found = [(path, depth, value)]
    if depth < 8 and isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, f"{path}.{key}", depth + 1)
    elif depth < 8 and isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found += _paths(item, f"{path}[{i}]", depth + 1)
    return found


def _at_fault(code: str, node: Any, depth: int, limits: JSONLimits) -> bool:
    surrogate = "[\ud800-\udfff]"
    if code == "lone-surrogate":
        return (isinstance(node, str) and re.search(surrogate, node) is not None) or (
            isinstance(node, dict)
            and any(isinstance(k, str) and re.search(surrogate, k) for k in node))
    if code == "integer-out-of-range":
        return (isinstance(node, int) and abs(node) > MAX_SAFE_INTEGER) or (
            isinstance(node, float) and MAX_SAFE_INTEGER < abs(node) < 1e21)
    if code == "non-finite-number":
        return isinstance(node, float) and not math.isfinite(node)
    if code == "too-deep":
        return isinstance(node, dict | list | tuple) and depth >= limits.max_depth
    if code == "invalid-json":
        return (isinstance(node, dict) and not all(isinstance(k, str) for k in node)) or (
            not isinstance(node, dict | list | tuple | str | int | float | type(None)))
    return code == "too-large"


@given(unusual, st.integers(1, 6))
def test_check_value_paths_name_a_value_at_fault(value: Any, max_depth: int) -> None:
    limits = JSONLimits(max_depth=max_depth)
    try:
        check_value(value, limits=limits)
    except MalformedJSON as refused:
        code, path = refused.code, refused.json_path
    else:
        return
    assert any(_at_fault(code, node, depth, limits)
               for where, depth, node in _paths(value, "$", 0) if where == path)


@given(json_values, st.booleans(), st.sampled_from([None, 2]))
@example({"é": 1.5}, False, None)
@example({"\U0001f600": 1, "\ufb33": 2}, True, None)
def test_a_plain_document_canonicalises_without_checks(value: Any, ascii_only: bool,
                                                        indent: int | None) -> None:
    text = json.dumps({"v": value}, ensure_ascii=ascii_only, indent=indent)
    try:
        document, plain = loads_plain(text)
    except MalformedJSON:
        return  # a float the strict parser refuses
    assert document == loads(text)
    expected = not _has_float(document) and not _has_astral(document)
    if "\\\\u" in text:  # an escaped backslash before "u" may look like an escape
        assert plain <= expected
    else:
        assert plain == expected
    if plain:
        assert jcs_plain(document)
        assert canonical_bytes_plain(document) == canonical_bytes(document)
        for part in document["v"].values() if isinstance(document["v"], dict) else ():
            assert canonical_bytes_plain(part) == canonical_bytes(part)


def _has_astral(value: Any) -> bool:
    """A key or string holds a character past the BMP (JCS sorts those keys otherwise)."""
    if isinstance(value, str):
        return any(ord(c) > 0xFFFF for c in value)
    if isinstance(value, dict):
        return any(_has_astral(k) or _has_astral(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_astral(v) for v in value)
    return False


def _has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_float(v) for v in value)
    return False
