"""Fuzzing the loader and the gate: no exception escapes, every refusal is typed.

Inputs are generated around a real signed receipt: its bytes with flips, cuts and
hostile splices (lone surrogates, deep nesting, huge or non-finite numbers, duplicate
keys, invalid UTF-8, a BOM), its parsed form with members replaced by any JSON value
or by Python objects that are not JSON (sets, bytes, tuples, NaN, cycles, non-string
keys), and free-form JSON, text and bytes. Every decision must be a typed
:class:`~handoffs.receivers.Decision` whose reasons carry codes documented on the
errors page, never ``internal-error`` or ``receiver-error`` (a caught exception is a
bug); the loader may only raise :class:`~handoffs.HandoffsError`.

The default profiles run a few hundred inputs; ``HYPOTHESIS_PROFILE=fuzz`` (CI's slow
step) runs 35,000 per test, 105,000 in all.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from handoffs import HandoffsError
from handoffs._json import dumps, loads
from handoffs.contracts import Receipt
from handoffs.receivers import Decision, MemoryReplayStore, SQLiteDecisionLog, Verdict
from worlds.gate import CONTRACT, WORLD, strict

ERRORS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "errors.md"
# Every code in the first column of the errors page's tables.
DOCUMENTED = frozenset(
    code
    for line in ERRORS_PAGE.read_text(encoding="utf-8").splitlines()
    if line.startswith("| `")
    for code in re.findall(r"`([a-z0-9-]+)`", line.split("|")[1])
)
BUGS = frozenset({"internal-error", "receiver-error"})

SIGNED = WORLD.signed("policy-01")
SIGNED_BYTES = dumps(SIGNED).encode()

HOSTILE_FRAGMENTS = (
    b'"\\ud800"', b'"\\udfff\\ud800"', b"[" * 600 + b"]" * 600, b"{" * 40, b"1e400",
    b"-1e400", b"9007199254740993", b"1.0", b"-0", b"0.1", b"NaN", b"Infinity", b'{"a":1,"a":2}',
    b'"\x00"', b"\xff\xfe", b"\xed\xa0\x80", b"\xef\xbb\xbf", b'"\\u0000"', b"null", b"true",
    b'"' + b"x" * 70_000 + b'"', b"\\", b'"', b",", b"}", b"]",
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=12,
)


class _Opaque:
    pass


def _cyclic() -> Any:
    doc = dict(SIGNED)
    doc["decision_state"] = dict(doc["decision_state"])
    doc["decision_state"]["loop"] = doc
    return doc


def _deep(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


not_json = st.sampled_from([
    {1, 2}, frozenset({"a"}), b"bytes", ("a", "tuple"), float("nan"), float("inf"), 2**80,
    -(2**64), 1.0, 3.0e20, 1e300, "\ud800", "x\udfffy", _Opaque(), {1: "int key"},
    {("t",): 1}, _deep(40), _deep(600), {"\ud800": True}, range(3), None, True, "",
]) | json_values

PATHS = [(k,) for k in SIGNED] + [("decision_state", k) for k in SIGNED["decision_state"]] + [
    ("grant", k) for k in SIGNED["grant"]] + [("proof", k) for k in SIGNED["proof"]] + [
    ("evidence_refs", 0), ("evidence_refs", 0, "digest"), ("grant", "authority", 0)]


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


@st.composite
def mutated_documents(draw: st.DrawFn, values: st.SearchStrategy[Any]) -> Any:
    """The signed receipt with one to three members replaced, removed or added."""
    doc = _copy(SIGNED)
    for _ in range(draw(st.integers(1, 3))):
        *parents, leaf = draw(st.sampled_from(PATHS))
        target: Any = doc
        try:
            for parent in parents:
                target = target[parent]
            action = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
            if action == "delete" and isinstance(target, dict):
                target.pop(leaf, None)
            elif action == "add" and isinstance(target, dict):
                target[draw(st.text(max_size=6))] = draw(values)
            else:
                target[leaf] = draw(values)
        except (KeyError, IndexError, TypeError):
            pass  # an earlier change removed or replaced the parent
    return doc


@st.composite
def mutated_bytes(draw: st.DrawFn) -> bytes:
    """The signed receipt's bytes with flips, cuts and hostile splices."""
    data = bytearray(SIGNED_BYTES)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["flip", "cut", "splice", "delete", "json"]))
        if kind == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut":
            del data[at:]
        elif kind == "delete":
            del data[at:at + draw(st.integers(1, 40))]
        elif kind == "splice":
            data[at:at] = draw(st.sampled_from(HOSTILE_FRAGMENTS))
        else:
            data[at:at] = json.dumps(draw(json_values)).encode()
    return bytes(data)


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


messages = st.one_of(
    mutated_bytes(),
    mutated_bytes().map(lambda b: b.decode("utf-8", "replace")),
    mutated_documents(json_values).map(lambda d: json.dumps(d).encode()),
    mutated_documents(json_values).map(
        lambda d: json.dumps(d, ensure_ascii=False).encode("utf-8", "surrogatepass")),
    mutated_documents(not_json),
    json_values.map(_json_bytes),
    st.binary(max_size=200),
    st.text(max_size=200),
    not_json,
)


def _typed(decision: Any) -> None:
    assert isinstance(decision, Decision)
    if decision.verdict is Verdict.REJECT:
        assert decision.reasons, decision
    found = {reason.code for reason in decision.reasons}
    assert not found & BUGS, decision.reasons
    assert found <= DOCUMENTED, sorted(found - DOCUMENTED)
    json.dumps(decision.to_json(), ensure_ascii=False).encode("utf-8")  # always encodable


RECEIVER = strict(WORLD.gate(replay=MemoryReplayStore()))


@given(messages)
def test_the_gate_never_raises_and_every_refusal_is_typed(message: Any) -> None:
    _typed(RECEIVER.receive(message))


def test_fuzz_documented_codes_are_read_from_the_errors_page() -> None:
    assert {"too-deep", "bad-signature", "replayed", "schema-invalid"} <= DOCUMENTED


@given(messages)
def test_the_gate_with_a_decision_log_never_raises(tmp_path_factory: Any, message: Any) -> None:
    _typed(_LOGGED(tmp_path_factory).receive(message))


_LOG: list[Any] = []


def _LOGGED(factory: Any) -> Any:
    if not _LOG:
        log = SQLiteDecisionLog(factory.mktemp("fuzz") / "log.sqlite")
        _LOG.append(strict(WORLD.gate(replay=log, log=log)))
    return _LOG[0]


@given(messages)
def test_the_loader_raises_only_typed_errors(message: Any) -> None:
    code = "accepted"
    try:
        doc = loads(message) if isinstance(message, bytes | str) else message
        Receipt.from_json(doc, registry=CONTRACT)
    except HandoffsError as exc:
        code = exc.code
    assert code == "accepted" or code in DOCUMENTED, code
