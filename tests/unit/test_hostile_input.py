"""Hostile input: every receiver decides whatever it is given, with the exact reason.

Bytes, text, parsed objects and arbitrary Python objects, with and without a decision
log: deep and cyclic objects, oversize and shared sub-objects, non-string keys, sets,
lone surrogates, non-finite numbers, integral floats. No receiver raises, every
decision's JSON encodes to UTF-8, every decision of a logging gate is logged, and the
command line exits 0 or 1 (never 2) on a receipt's content.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from handoffs._errors import HandoffsError, InvalidArgument, MalformedJSON
from handoffs._json import canonical_bytes, check_value, dumps, loads
from handoffs.contracts import Receipt
from handoffs.examples import payment
from handoffs.receivers import Decision, SQLiteDecisionLog, Step, StrictContractReceiver, Verdict
from handoffs.receivers.chains import HandoffChain
from worlds.gate import WORLD, codes, raw

R, P = Verdict.REJECT, Step.PARSE


def _deep(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _cyclic() -> dict[str, Any]:
    doc = WORLD.signed("policy-01")
    doc["decision_state"]["self"] = doc
    return doc


def _with(member: str, value: Any) -> Callable[[], dict[str, Any]]:
    def build() -> dict[str, Any]:
        doc = WORLD.signed("policy-01")
        doc[member] = value
        return doc
    return build


_BLOCK = "x" * 65536

# (id, build the parsed object, expected reason codes). Each is also sent as bytes when
# it can be written as JSON at all.
PARSED: list[tuple[str, Callable[[], Any], list[str]]] = [
    ("deep-500-array", _with("notes", _deep(500)), ["too-deep"]),
    ("deep-300-array", _with("notes", _deep(300)), ["too-deep"]),
    ("cyclic-object", _cyclic, ["too-deep"]),
    ("64-MiB-shared", _with("notes", [_BLOCK] * 1024), ["too-large"]),
    ("2-MiB-string", _with("notes", "y" * (2 * 1024 * 1024)), ["too-large"]),
    ("non-string-key", _with("decision_state", {1: True}), ["invalid-json"]),
    ("set-value", _with("evidence_refs", {"evidence://a"}), ["invalid-json"]),
    ("bytes-value", _with("notes", b"raw"), ["invalid-json"]),
    ("object-value", _with("notes", object()), ["invalid-json"]),
    ("nan", _with("notes", math.nan), ["non-finite-number"]),
    ("huge-int", _with("notes", 2**60), ["integer-out-of-range"]),
    ("huge-whole-float", _with("notes", 2.0**60), ["integer-out-of-range"]),
    ("surrogate-in-contract", _with("contract", "payment-release/1.0.0\ud800"),
     ["lone-surrogate"]),
    ("surrogate-in-id", _with("id", "urn:uuid:\udfff"), ["lone-surrogate"]),
    ("surrogate-key", _with("decision_state", {"\ud800": True}), ["lone-surrogate"]),
]

NOT_OBJECTS: list[Any] = [None, 42, 1.5, True, [], ["a"], {"a", "b"}, object(), b"", "",
                          bytearray(b"[1]"), memoryview(b"null"), Decision]


def _receiver(tmp_path: Path | None = None) -> tuple[StrictContractReceiver,
                                                     SQLiteDecisionLog | None]:
    if tmp_path is None:
        return StrictContractReceiver(WORLD.gate(replay=None)), None
    store = SQLiteDecisionLog(tmp_path / "log.sqlite")
    return StrictContractReceiver(WORLD.gate(log=store, replay=store)), store


def _encodable(decision: Decision) -> None:
    text = dumps(decision.to_json())
    text.encode("utf-8")  # strict: a lone surrogate would raise here
    assert json.loads(text)["verdict"] == decision.verdict.value


@pytest.mark.parametrize("logged", [False, True], ids=["no-log", "sqlite-log"])
@pytest.mark.parametrize(("build", "expected"), [(b, e) for _, b, e in PARSED],
                         ids=[name for name, _, _ in PARSED])
def test_parsed_input_gets_the_limits_and_codes_of_bytes(
    tmp_path: Path, logged: bool, build: Callable[[], Any], expected: list[str]
) -> None:
    receiver, store = _receiver(tmp_path if logged else None)
    decision = receiver.receive(build())
    assert (decision.verdict, decision.step, codes(decision)) == (R, P, expected)
    _encodable(decision)
    if store is not None:
        assert store.summary().decisions == 1  # logged, and nothing else went wrong
        store.close()


@pytest.mark.parametrize(("name", "text", "expected"), [
    ("deep-300", '{"a":' + "[" * 300 + "]" * 300 + "}", "too-deep"),
    ("escaped-lone-high", '{"contract":"\\ud800"}', "lone-surrogate"),
    ("escaped-lone-low-in-id", '{"id":"a\\udc00b"}', "lone-surrogate"),
    ("escaped-lone-key", '{"\\ud800":1}', "lone-surrogate"),
    ("reversed-pair", '{"id":"\\udc00\\ud800"}', "lone-surrogate"),
])
def test_bytes_and_text_are_refused_with_the_same_codes(
    tmp_path: Path, name: str, text: str, expected: str
) -> None:
    for logged in (False, True):
        receiver, store = _receiver(tmp_path if logged else None)
        for message in (text.encode(), text):
            decision = receiver.receive(message)
            assert (decision.verdict, decision.step, codes(decision)) == (R, P, [expected])
            _encodable(decision)
        if store is not None:
            assert store.summary().decisions == 2
            store.close()


def test_a_lone_surrogate_as_a_code_point_in_text_is_refused() -> None:
    receiver, _ = _receiver()
    decision = receiver.receive('{"contract": "x\ud800"}')
    assert codes(decision) == ["lone-surrogate"]
    _encodable(decision)


def test_an_escaped_surrogate_pair_is_one_character() -> None:
    assert loads(b'{"a":"\\ud83d\\ude00"}') == {"a": "\U0001f600"}


@pytest.mark.parametrize("message", NOT_OBJECTS, ids=lambda m: type(m).__name__)
def test_anything_that_is_not_an_object_is_refused(tmp_path: Path, message: Any) -> None:
    receiver, store = _receiver(tmp_path)
    decision = receiver.receive(message)
    assert (decision.verdict, decision.step) == (R, P)
    assert codes(decision) in (["not-an-object"], ["invalid-json"])
    _encodable(decision)
    assert store is not None
    assert store.summary().decisions == 1
    store.close()


def test_the_same_receipt_is_accepted_as_bytes_text_and_object() -> None:
    doc = WORLD.signed("policy-01")
    seen = set()
    for message in (raw(doc), raw(doc).decode(), doc, bytearray(raw(doc))):
        decision = StrictContractReceiver(WORLD.gate(replay=None)).receive(message)
        seen.add((decision.verdict, tuple(codes(decision))))
    assert len(seen) == 1
    assert next(iter(seen))[0] is not R


# -------------------------------------------------------------- the library functions


def test_check_value_says_plain_exactly_as_the_fast_path() -> None:
    assert check_value({"a": [1, "b", None, True]}) is True
    assert check_value({"a": 1.5}) is False
    assert check_value({"\U0001f600": 1}) is False
    assert check_value(("a",)) is True


@pytest.mark.parametrize(("build", "expected"), [(b, e) for _, b, e in PARSED],
                         ids=[name for name, _, _ in PARSED])
def test_receipt_from_json_and_validate_raise_only_typed_errors(
    build: Callable[[], Any], expected: list[str]
) -> None:
    doc = build()
    with pytest.raises(MalformedJSON) as loaded:
        Receipt.from_json(doc, registry=payment.PAYMENT_RELEASE)
    assert loaded.value.code == expected[0]
    with pytest.raises(MalformedJSON) as validated:
        payment.PAYMENT_RELEASE.validate(doc)
    assert validated.value.code == expected[0]
    with pytest.raises(MalformedJSON) as chain:
        HandoffChain.from_json(doc)
    assert chain.value.code == expected[0]


def test_receipt_from_json_refuses_lone_surrogates_in_bytes() -> None:
    text = dumps(WORLD.signed("policy-01")).replace('"case-owner"', '"case-\\ud800owner"', 1)
    with pytest.raises(MalformedJSON, match="lone surrogate") as caught:
        Receipt.from_json(text.encode(), registry=payment.PAYMENT_RELEASE)
    assert caught.value.code == "lone-surrogate"


def test_receipt_from_json_refuses_a_non_object_argument() -> None:
    with pytest.raises(MalformedJSON) as caught:
        Receipt.from_json(42, registry=payment.PAYMENT_RELEASE)  # type: ignore[arg-type]
    assert caught.value.code == "not-an-object"


def test_bad_arguments_raise_invalid_argument_which_is_both_builtins() -> None:
    from handoffs.receivers import MemoryReplayStore

    with pytest.raises(InvalidArgument) as caught:
        MemoryReplayStore(max_entries=0)
    assert isinstance(caught.value, HandoffsError)
    assert isinstance(caught.value, TypeError)
    assert isinstance(caught.value, ValueError)
    assert caught.value.code == "invalid-argument"


def test_canonical_bytes_of_a_checked_value_always_encodes() -> None:
    doc = WORLD.signed("policy-01")
    check_value(doc)
    assert loads(canonical_bytes(doc)) == doc


# ------------------------------------------------------------------ the command line


def _hostile_files(tmp_path: Path) -> dict[str, bytes]:
    signed = dumps(WORLD.signed("policy-01"))
    return {
        "surrogate-contract": signed.replace('"payment-release/', '"\\ud800payment-release/',
                                             1).encode(),
        "surrogate-id": signed.replace('"id":"urn:uuid:', '"id":"\\udfffurn:uuid:', 1).encode(),
        "deep": ('{"a":' + "[" * 300 + "]" * 300 + "}").encode(),
        "deep-500": ("[" * 500 + "]" * 500).encode(),
        "integral-float": signed.replace('"authority":"ADVISE"', '"authority":"ADVISE",'
                                         '"hop":1.0', 1).encode(),
        "64-MiB": b'{"notes":"' + b"z" * (64 * 1024 * 1024) + b'"}',
        "not-json": b"\xff\xfe",
        "array": b"[1, 2]",
    }


def test_the_cli_never_exits_2_on_a_hostile_receipt(tmp_path: Path) -> None:
    from handoffs.cli import main
    from handoffs.integrity import SigningKey

    files = _hostile_files(tmp_path)

    trust = tmp_path / "trust.json"
    trust.write_text(json.dumps(WORLD.keyring.to_json()))
    key = tmp_path / "key.pem"
    key.write_bytes(SigningKey.generate().to_pem())
    when = "2026-06-01T12:01:00Z"
    for name, content in files.items():
        path = tmp_path / f"{name}.json"
        path.write_bytes(content)
        for args in (
            ["gate", str(path), "--trust", str(trust), "--as", "case-owner", "--now", when],
            ["gate", str(path), "--trust", str(trust), "--as", "case-owner", "--now", when,
             "--log", str(tmp_path / "log.sqlite")],
            ["verify", str(path), "--trust", str(trust), "--as", "case-owner", "--now", when],
            ["sign", str(path), "--key", str(key), "--created", when],
        ):
            result = CliRunner().invoke(main, args)
            assert result.exit_code == 1, (name, args[0], result.output)
            assert "internal error" not in result.output, (name, args[0], result.output)


# ------------------------------------------------------------------ integral floats


def test_integral_floats_are_integers_as_json_schema_and_jcs_say() -> None:
    from worlds.chains import STANDARD, make_chain, receiver

    wire = make_chain(STANDARD).to_json()
    as_floats = json.loads(json.dumps(wire))
    for hop in as_floats["hops"]:
        hop["hop"] = float(hop["hop"])  # what an A2A data part (protobuf Value) delivers
    assert canonical_bytes(as_floats) == canonical_bytes(wire)  # the same signed bytes
    chain = HandoffChain.from_json(as_floats)
    assert [hop.hop for hop in chain.hops] == [0, 1, 2, 3]
    assert all(type(hop.hop) is int for hop in chain.hops)
    decision = receiver().receive(as_floats)
    assert (decision.verdict, codes(decision)) == (receiver().receive(wire).verdict, [])
    assert decision.verdict is Verdict.ACCEPT


@pytest.mark.parametrize("value", [1.5, math.inf, "1", True, None])
def test_a_non_integral_hop_number_is_a_typed_error(value: Any) -> None:
    from worlds.chains import STANDARD, make_chain, receiver

    wire = make_chain(STANDARD).to_json()
    wire["hops"][1]["hop"] = value
    with pytest.raises(MalformedJSON if value is math.inf else HandoffsError) as caught:
        HandoffChain.from_json(wire)
    assert caught.value.code in ("schema-invalid", "non-finite-number")
    decision = receiver().receive(wire)
    assert decision.verdict is R
    assert codes(decision)[0] in ("schema-invalid", "non-finite-number")
    assert "receiver-error" not in codes(decision)


# Builtin exceptions the library may raise itself, each for a protocol that names it:
# NotImplementedError in the abstract methods of a Protocol or base class, AttributeError
# in a module's __getattr__ (PEP 562: hasattr() and lazy imports rely on it),
# KeyError in a __getitem__ (the mapping protocol: str.format_map asks for it),
# AssertionError in handoffs.testing (a generator's self-check) and in
# handoffs.lab.assert_sufficient (a test assertion), and
# FileExistsError in the CLI, which refuses to overwrite a key file the way the OS
# refuses it two lines later (both end as the CLI's "[io]" error line).
_BUILTIN_RAISES_ALLOWED = {
    "NotImplementedError": None,
    "AttributeError": "__getattr__",
    "KeyError": "__getitem__",
    "AssertionError": ("testing.py", "assert_sufficient"),
    "FileExistsError": "keys_new",
}


def _bare_builtin_raises(root: Path) -> list[str]:
    """``path:line name`` of every ``raise`` of a builtin exception class under ``root``
    that the protocols above do not ask for.
    """
    import ast
    import builtins

    names = {name for name, value in vars(builtins).items()
             if isinstance(value, type) and issubclass(value, BaseException)}
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = [n for n in ast.walk(tree)
                     if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        for node in ast.walk(tree):
            if not isinstance(node, ast.Raise) or node.exc is None:
                continue
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = getattr(exc, "id", None)
            if name not in names:
                continue
            allowed = _BUILTIN_RAISES_ALLOWED.get(name, "-")
            inside = {f.name for f in functions
                      if f.lineno <= node.lineno <= (f.end_lineno or f.lineno)}
            places = allowed if isinstance(allowed, tuple) else (allowed,)
            if allowed is None or any(a == path.name or a in inside for a in places):
                continue
            found.append(f"{path.relative_to(root)}:{node.lineno} {name}")
    return sorted(found)


def test_the_library_raises_no_bare_builtin_errors() -> None:
    """Every error the library raises is a HandoffsError (the errors page says so): no
    ``raise ValueError(...)``, ``KeyError``, ``RuntimeError``... anywhere in src/.
    """
    root = Path(__file__).resolve().parents[2] / "src" / "handoffs"
    assert _bare_builtin_raises(root) == []


def test_the_bare_raise_scan_finds_what_it_forbids(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text(
        "def f(d):\n    if not d:\n        raise KeyError('x')\n    raise RuntimeError\n"
        "def __getattr__(name):\n    raise AttributeError(name)\n"
        "def g():\n    raise AttributeError('not the module protocol')\n"
        "class P:\n    def m(self):\n        raise NotImplementedError\n"
        "    def __getitem__(self, name):\n        raise KeyError(name)\n",
        encoding="utf-8")
    assert _bare_builtin_raises(tmp_path) == [
        "bad.py:3 KeyError", "bad.py:4 RuntimeError", "bad.py:8 AttributeError"]
