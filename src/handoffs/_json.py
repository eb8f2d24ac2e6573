"""Strict JSON in, canonical JSON out.

Parsing follows I-JSON (RFC 7493) as the receipt profile needs it: duplicate object
names, ``NaN``/``Infinity`` and integers outside ±(2^53 − 1) are errors, and size and
nesting depth are capped *before* anything else looks at the document.

Canonical form is RFC 8785 (JCS), computed by the ``rfc8785`` package. A fast path
uses orjson's sorted-key encoder (or, without orjson, the standard library's) when the
two are provably byte-equal (no floats, no astral-plane object keys, no lone
surrogates); ``tests/unit/test_json.py`` and ``tests/unit/test_compiled.py`` check the equality
as Hypothesis properties over every JSON value the contracts allow.

Parsing bytes tries orjson first and keeps its result only when the bytes are exactly
orjson's own sorted-key serialisation of what it parsed (what a sender that sends
canonical JSON sends): see :func:`_fast_loads` for why that is exact. Anything else
is parsed by the hooked standard-library parser, which gives the precise error.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import re
import threading
from collections.abc import Mapping
from typing import Any, Final

import attrs
import rfc8785

from handoffs._errors import MalformedJSON

try:
    _orjson: Any = importlib.import_module("orjson")
except ImportError:  # pragma: no cover - a dependency; tests force the fallback
    _orjson = None

__all__ = [
    "DEFAULT_LIMITS",
    "MAX_SAFE_INTEGER",
    "JSONLimits",
    "ParsedObject",
    "canonical_bytes",
    "canonical_bytes_plain",
    "canonical_size",
    "check_value",
    "digest",
    "dumps",
    "float_free",
    "jcs_plain",
    "load_object",
    "loads",
    "loads_plain",
    "parse_object",
]

MAX_SAFE_INTEGER: Final = 2**53 - 1
# A tuple, not ``bytes | bytearray | memoryview``: the union is built at every call.
_BINARY: Final = (bytes, bytearray, memoryview)


@attrs.frozen
class JSONLimits:
    """Bounds applied to every parsed document.

    Attributes:
        max_bytes: largest accepted document, in bytes of UTF-8.
        max_depth: deepest accepted nesting of arrays and objects.
    """

    max_bytes: int = attrs.field(default=1_048_576, validator=attrs.validators.gt(0))
    max_depth: int = attrs.field(default=32, validator=attrs.validators.gt(0))


DEFAULT_LIMITS: Final = JSONLimits()


def _reject_constant(name: str) -> Any:
    raise MalformedJSON(f"non-finite number {name} is not JSON", code="non-finite-number")


_FLOATS = threading.local()  # counts floats parsed, per thread (see loads_plain)


def _parse_float(text: str) -> float:
    _FLOATS.count = getattr(_FLOATS, "count", 0) + 1
    value = float(text)
    if not math.isfinite(value):
        raise MalformedJSON(
            f"number {text} overflows a double", code="non-finite-number"
        )
    return value


def _parse_int(text: str) -> int:
    # Length check first: int() on a huge digit string is itself a cost.
    if len(text) > 17 or abs(value := int(text)) > MAX_SAFE_INTEGER:
        raise MalformedJSON(
            f"integer {text[:24]} is outside ±(2^53 − 1)", code="integer-out-of-range"
        )
    return value


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise MalformedJSON(f"duplicate key {key!r}", code="duplicate-key")
            seen.add(key)
    return obj


_FAST_ENCODER: Final = json.JSONEncoder(
    ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
)

_DECODER: Final = json.JSONDecoder(
    object_pairs_hook=_no_duplicates,
    parse_constant=_reject_constant,
    parse_float=_parse_float,
    parse_int=_parse_int,
)


def _depth_exceeds(text: str, max_depth: int) -> bool:
    """Scan brackets outside strings; cheap, and runs before the recursive parser."""
    if text.count("[") + text.count("{") <= max_depth:
        return False
    depth = 0
    in_string = False
    escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > max_depth:
                return True
        elif ch in "]}":
            depth -= 1
    return False


# orjson's canonical form: sorted keys, and integers within ±(2^53 − 1) or an error.
_ORJSON_STRICT: Final = (
    _orjson.OPT_SORT_KEYS | _orjson.OPT_STRICT_INTEGER if _orjson is not None else 0
)
# A number token with a fraction or an exponent after ":", "," or "[" in text without
# whitespace: the only way a float appears inside orjson's output (it never writes a
# float as a bare integer); a top-level float is checked by type. Inside strings it
# may match too; that only costs the fast path, never exactness.
_FLOAT_TOKEN: Final = re.compile(rb"[:,\[]-?[0-9]+[.eE]")
# A number value in compact output: right after the '":' that ends a key, or after the
# "[" or "," of an array; three searches, each with a literal first byte (a character
# class first is a slow scan), look for one. A look-alike inside a string only sends
# the text to the float-token check below.
_NUMBER_AFTER: Final = (re.compile(rb'":[-0-9]'), re.compile(rb"\[[-0-9]"),
                        re.compile(rb",[-0-9]"))


def float_free(raw: bytes) -> bool:
    """Whether orjson's compact output ``raw`` (a text :func:`_exact_parse` parsed)
    holds no float below the top level.

    Three searches find whether any number value is there at all (most receipts hold
    none); only then are the float-shaped tokens looked at, each kept only when it
    follows a real separator: ``[``, ``,`` or the ``":`` that ends a key (a digest such
    as ``"sha256:2e..."`` has a ``:`` not preceded by ``"``). A look-alike inside a
    string can only make the answer ``False``, which costs the fast path, never
    exactness.
    """
    key, opening, comma = _NUMBER_AFTER
    if key.search(raw) is None and opening.search(raw) is None and comma.search(raw) is None:
        return True
    for match in _FLOAT_TOKEN.finditer(raw):
        start = match.start()
        if raw[start] != 0x3A or raw[start - 1] == 0x22:  # "[" or ",", or '":'
            return False
    return True


# The lead byte of a four-byte UTF-8 sequence: a character past the BMP.
_ASTRAL_UTF8: Final = re.compile(rb"[\xf0-\xf4]")


def _fast_loads(raw: bytes, max_depth: int) -> tuple[Any, bool] | None:
    """The orjson parse of ``raw`` with :func:`loads_plain`'s plain flag, when that is
    provably what the strict parser gives; ``None`` otherwise (parse it again).

    Exact because ``raw`` must equal orjson's sorted-key, 53-bit-integer serialisation
    of the value it parsed: then no object repeats a key (the value would hold fewer
    members than ``raw``), every integer lies within ±(2^53 − 1) (``OPT_STRICT_INTEGER``
    raises otherwise), every number is finite (orjson refuses an overflow), no string
    holds a lone surrogate, and there is no whitespace or other spelling freedom for two
    parsers to read differently. The flag is conservative: a float
    token's look-alike inside a string clears it, which costs the fast canonical path,
    never exactness.
    """
    exact = _exact_parse(raw, max_depth)
    if exact is None:
        return None
    value, simple = exact
    return value, simple and type(value) is not float and float_free(raw)


def _exact_parse(raw: bytes, max_depth: int) -> tuple[Any, bool] | None:
    if _orjson is None or _too_deep(raw, max_depth):
        return None
    try:
        value = _orjson.loads(raw)
        if _orjson.dumps(value, option=_ORJSON_STRICT) != raw:
            return None
    except (_orjson.JSONDecodeError, _orjson.JSONEncodeError):
        return None
    return value, _simple(raw)


def _too_deep(raw: bytes, max_depth: int) -> bool:
    """More brackets than ``max_depth`` (strings included: never an under-estimate)."""
    return raw.count(b"[") + raw.count(b"{") > max_depth


def _simple(raw: bytes) -> bool:
    # orjson writes a character past the BMP as its four UTF-8 bytes, never escaped.
    return raw.isascii() or _ASTRAL_UTF8.search(raw) is None


def loads(data: bytes | str, *, limits: JSONLimits = DEFAULT_LIMITS) -> Any:
    """Parse one JSON document strictly.

    Raises:
        MalformedJSON: with a specific ``code`` for each kind of bad input.
    """
    return loads_plain(data, limits=limits)[0]


def load_object(data: Any, *, what: str,
                limits: JSONLimits = DEFAULT_LIMITS) -> Mapping[str, Any]:
    """``data`` as a JSON object: bytes or text parsed by :func:`loads`, a parsed
    mapping checked by :func:`check_value`, both under ``limits`` (a
    :class:`ParsedObject` was checked by its parser: as it is).

    ``what`` names the document in the errors (e.g. ``"a receipt"``).

    Raises:
        MalformedJSON: bad bytes, a mapping that is not JSON data within the limits,
            or anything that is not a JSON object (code ``not-an-object``).
    """
    if isinstance(data, bytes | bytearray | memoryview | str):
        doc = loads(data if isinstance(data, bytes | str) else bytes(data), limits=limits)
    elif type(data) is ParsedObject:  # checked by its parser (the gate's step 1)
        doc = data
    elif isinstance(data, Mapping):
        check_value(data, limits=limits)
        doc = data
    else:
        raise MalformedJSON(f"{what} is bytes, text or a JSON object, got {type(data).__name__}",
                            code="not-an-object")
    if not isinstance(doc, Mapping):
        raise MalformedJSON(f"{what} must be a JSON object", code="not-an-object")
    return doc


class ParsedObject(dict[str, Any]):
    """A JSON object as the strict parser (or :func:`check_value`) found it.

    It carries what parsing learned, so that no caller passes it along beside it:

    - ``plain``: every part takes the fast canonical form (see :func:`loads_plain`);
      :func:`canonical_bytes` and the proofs' canonicalisation read it;
    - ``valid_for``: the contract whose schema it passed (set by the contracts'
      validator once it has checked it; ``None`` until then), so that the typed
      receipt is built without validating it twice.

    Only :func:`parse_object` (and :meth:`member`) make one: holding one means "parsed
    and checked under limits". It is a ``dict``: read it as any parsed object.
    """

    __slots__ = ("plain", "valid_for")
    plain: bool
    valid_for: object

    @classmethod
    def _of(cls, value: Mapping[str, Any], plain: bool) -> ParsedObject:
        parsed = cls(value)
        parsed.plain = plain
        parsed.valid_for = None
        return parsed

    def member(self, value: Any) -> Any:
        """``value``, an object inside this one, as a :class:`ParsedObject` with this
        one's ``plain`` (a part of a plain document is plain); anything else unchanged.
        """
        if type(value) is dict:
            return ParsedObject._of(value, self.plain)
        return value


def parse_object(data: Any, *, limits: JSONLimits = DEFAULT_LIMITS,
                 what: str = "a message") -> ParsedObject:
    """``data`` as a :class:`ParsedObject`: bytes or text parsed strictly, a mapping
    checked by :func:`check_value`, both under ``limits``.

    Raises:
        MalformedJSON: bad bytes, a mapping that is not JSON data within the limits, or
            anything that is not a JSON object (code ``not-an-object``).
    """
    if type(data) is bytes or isinstance(data, str):  # the wire's type first
        doc, plain = loads_plain(data, limits=limits)
    elif isinstance(data, Mapping):
        # A parsed object gets the limits and codes raw input gets, before anything
        # reads it (a ParsedObject too: these limits may be tighter than its parser's).
        plain = check_value(data, limits=limits)
        doc = data
    elif isinstance(data, _BINARY):
        doc, plain = loads_plain(bytes(data), limits=limits)
    else:
        raise MalformedJSON(
            f"{what} is bytes, text or a JSON object, got {type(data).__name__}",
            code="not-an-object")
    if type(doc) is not dict and not isinstance(doc, Mapping):
        raise MalformedJSON(f"{what} must be a JSON object", code="not-an-object")
    return ParsedObject._of(doc, plain)


def loads_plain(data: bytes | str, *, limits: JSONLimits = DEFAULT_LIMITS) -> tuple[Any, bool]:
    r"""Parse one JSON document strictly (as :func:`loads`), and say whether it is *plain*:
    every part of it takes :func:`canonical_bytes`' fast path, so that
    :func:`canonical_bytes_plain` may canonicalise it (and any part of it) without
    checking it first. Plain means: no floats, and no character past the Basic
    Multilingual Plane, written as itself or escaped (JCS sorts keys by UTF-16 code
    units, which order such characters otherwise); the strict parser already refuses
    integers beyond ±(2^53 − 1) and lone surrogates.

    Raises:
        MalformedJSON: with a specific ``code`` for each kind of bad input.
    """
    if isinstance(data, _BINARY):
        raw = bytes(data)
        if len(raw) > limits.max_bytes:
            raise MalformedJSON(
                f"document is {len(raw)} bytes, the limit is {limits.max_bytes}",
                code="too-large",
            )
        fast = _fast_loads(raw, limits.max_depth)
        if fast is not None:
            return fast
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedJSON(f"not UTF-8: {exc.reason}", code="invalid-utf8") from exc
    else:
        text = data
        size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        if size > limits.max_bytes:
            raise MalformedJSON(
                f"document exceeds the limit of {limits.max_bytes} bytes", code="too-large"
            )
    if _depth_exceeds(text, limits.max_depth):
        raise MalformedJSON(
            f"document nests deeper than {limits.max_depth} levels", code="too-deep"
        )
    if not text.isascii() and _SURROGATE.search(text):
        raise MalformedJSON("the text holds a lone surrogate, which I-JSON forbids",
                            code="lone-surrogate")
    floats = getattr(_FLOATS, "count", 0)
    try:
        value = _DECODER.decode(text.removeprefix("\ufeff") if text[:1] == "\ufeff" else text)
        # A single-character search first: most documents hold no escape at all.
        escaped = "\\" in text and "\\u" in text
        if escaped:
            _refuse_surrogates(value)
        astral = ((not text.isascii() and _ASTRAL.search(text) is not None)
                  or (escaped and _ESCAPED_HIGH_SURROGATE.search(text) is not None))
        return value, not astral and getattr(_FLOATS, "count", 0) == floats
    except MalformedJSON:
        raise
    except json.JSONDecodeError as exc:
        raise MalformedJSON(
            f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from exc
    except RecursionError as exc:  # pragma: no cover - guarded by the depth scan
        raise MalformedJSON("document nests too deeply", code="too-deep") from exc


_SURROGATE: Final = re.compile("[\ud800-\udfff]")
# A character past the BMP, as itself or as the escape of its high surrogate (which a
# backslash-escaped backslash before "u" may imitate: that costs only the fast path).
_ASTRAL: Final = re.compile("[\U00010000-\U0010ffff]")
_ESCAPED_HIGH_SURROGATE: Final = re.compile(r"\\u[dD][89abAB]")


def _refuse_surrogates(value: Any) -> None:
    """Raise ``lone-surrogate`` if a string of ``value`` (a parsed document, whose depth
    the parser has bounded) holds a lone surrogate: I-JSON (RFC 7493 §2.1) forbids
    them, and no UTF-8 encoder can write them.
    """
    stack: list[tuple[Any, str]] = [(value, "$")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            for key, item in node.items():
                where = f"{path}.{key}"
                if _SURROGATE.search(key):
                    raise MalformedJSON("an object key holds a lone surrogate, which I-JSON "
                                        "forbids", code="lone-surrogate", json_path=path)
                stack.append((item, where))
        elif isinstance(node, list):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(node))
        elif isinstance(node, str) and _SURROGATE.search(node):
            raise MalformedJSON("a string holds a lone surrogate, which I-JSON forbids",
                                code="lone-surrogate", json_path=path)


def jcs_plain(value: Any) -> bool:
    """Whether :func:`canonical_bytes` takes its fast path for ``value`` (``json``'s
    output equals RFC 8785's): then :func:`canonical_bytes_plain` gives the same bytes
    for it and every part of it.

    Exact types only (``type(x) is``): subclasses such as enums and every float take
    the reference path. Lone surrogates in string *values* are caught later, when the
    fast output is encoded to UTF-8.
    """
    kind = type(value)
    if kind is dict:
        return all(
            type(key) is str
            and (key.isascii() or not _astral_or_surrogate(key))
            and jcs_plain(item)
            for key, item in value.items()
        )
    if kind is list or kind is tuple:
        return all(jcs_plain(item) for item in value)
    if kind is int:
        return bool(-MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER)
    return kind is str or kind is bool or value is None


def _has_unparseable_float(value: Any) -> bool:
    """True for a float that JCS writes as a digit string beyond ±(2^53 − 1)."""
    if isinstance(value, float):
        return MAX_SAFE_INTEGER < abs(value) < 1e21
    if isinstance(value, dict):
        return any(_has_unparseable_float(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_has_unparseable_float(item) for item in value)
    return False


def _astral_or_surrogate(text: str) -> bool:
    # UTF-16 code-unit order differs from code-point order only past the BMP.
    return any(ord(ch) > 0xFFFF or 0xD800 <= ord(ch) <= 0xDFFF for ch in text)


def canonical_bytes_plain(value: Any) -> bytes:
    """:func:`canonical_bytes` of a value known to be plain (see :func:`jcs_plain` and
    :func:`loads_plain`), without checking it again. The caller vouches for it.
    """
    if _orjson is not None:
        try:
            data: bytes = _orjson.dumps(value, option=_orjson.OPT_SORT_KEYS)
        except _orjson.JSONEncodeError:
            pass  # nested beyond orjson's limit: the standard library's encoder
        else:
            return data
    return _FAST_ENCODER.encode(value).encode("utf-8")


def canonical_bytes(value: Any) -> bytes:
    """Return the RFC 8785 (JCS) canonical UTF-8 bytes of a JSON value.

    A :class:`ParsedObject` the parser found plain takes the fast form without another
    walk (the parser's finding travels with it); any other value is checked first.

    Raises:
        MalformedJSON: for values JCS cannot represent (NaN, huge integers, lone
            surrogates, non-string keys).
    """
    if type(value) is ParsedObject and value.plain:
        return canonical_bytes_plain(value)
    if jcs_plain(value):
        if _orjson is not None:
            try:
                data: bytes = _orjson.dumps(value, option=_orjson.OPT_SORT_KEYS)
            except _orjson.JSONEncodeError:
                pass  # a lone surrogate or deep nesting: the paths below decide
            else:
                return data
        try:
            return _FAST_ENCODER.encode(value).encode("utf-8")
        except UnicodeEncodeError:
            pass  # a lone surrogate: let the reference path raise its error
    if _has_unparseable_float(value):
        raise MalformedJSON(
            "a whole number at or beyond 2^53 would be written as an integer literal the "
            "strict parser refuses", code="integer-out-of-range",
        )
    try:
        return rfc8785.dumps(value)
    except rfc8785.IntegerDomainError as exc:
        raise MalformedJSON(str(exc), code="integer-out-of-range") from exc
    except rfc8785.FloatDomainError as exc:
        raise MalformedJSON(str(exc), code="non-finite-number") from exc
    except (rfc8785.CanonicalizationError, UnicodeEncodeError, TypeError) as exc:
        raise MalformedJSON(f"cannot canonicalise: {exc}", code="invalid-json") from exc


# Bytes JCS escapes in a string: control characters, quotation mark, reverse solidus.
_ESCAPED: Final = bytes(range(0x20)) + b'"\\'


def _plain_str_size(text: str) -> int:
    """Canonical size of a string; ``-1`` when it needs escapes or is not ASCII."""
    if not text.isascii():
        return -1
    if len(text) < 64:
        if text.isprintable() and '"' not in text and "\\" not in text:
            return len(text) + 2
        return -1
    raw = text.encode("ascii")
    return len(raw) + 2 if len(raw.translate(None, _ESCAPED)) == len(raw) else -1


def canonical_size(value: Any) -> int:
    """``len(canonical_bytes(value))``, without building the bytes where that is exact.

    JCS writes a container as its members' texts in order, so sizes add up; plain
    ASCII strings, booleans, ``null`` and safe integers are sized directly, anything
    else (floats, escapes, non-ASCII text, foreign types) by canonicalising that value
    alone. ``tests/unit/test_json.py`` checks the equality as a Hypothesis property.

    Raises:
        MalformedJSON: exactly when :func:`canonical_bytes` would, with its error (a
            member's own error may not be the whole value's: the whole value names it).
    """
    try:
        return _size(value)
    except MalformedJSON:
        return len(canonical_bytes(value))  # raises the whole value's error


def _size(value: Any) -> int:  # noqa: PLR0911 - one return per JSON shape
    kind = type(value)
    if kind is str:
        size = _plain_str_size(value)
        return size if size >= 0 else len(canonical_bytes(value))
    if kind is bool:
        return 4 if value else 5
    if value is None:
        return 4
    if kind is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return len(str(value))
    if kind is dict:
        if not value:
            return 2
        total = 2 * len(value) + 1
        for key, item in value.items():
            if type(key) is not str:
                return len(canonical_bytes(value))  # raises: JCS keys are strings
            size = _plain_str_size(key)
            total += (size if size >= 0 else len(canonical_bytes(key))) + _size(item)
        return total
    if kind is list or kind is tuple:
        if not value:
            return 2
        return len(value) + 1 + sum(map(_size, value))
    return len(canonical_bytes(value))


def digest(value: Mapping[str, Any] | list[Any] | bytes) -> str:
    """SHA-256 of the canonical form (or of raw bytes), as ``"sha256:<hex>"``."""
    data = value if isinstance(value, bytes) else canonical_bytes(value)
    return "sha256:" + hashlib.sha256(data).hexdigest()


def dumps(value: Any, *, indent: int | None = None) -> str:
    """Serialise for humans and logs: sorted keys, UTF-8, never NaN."""
    separators = (",", ":") if indent is None else (",", ": ")
    return json.dumps(
        value, ensure_ascii=False, sort_keys=True, indent=indent, separators=separators,
        allow_nan=False,
    )


def _path(parent: str, key: object) -> str:
    return f"{parent}[{key}]" if isinstance(key, int) else f"{parent}.{key}"


# A node of check_value's walk: (value, depth, the parent's node or None, the key or
# index under the parent). The JSON path is made from the chain only for an error.
_Node = tuple[Any, int, Any, Any]


def _where(node: _Node) -> str:
    """The JSON path of a node of :func:`check_value`'s walk."""
    keys = []
    while node[2] is not None:
        keys.append(node[3])
        node = node[2]
    path = "$"
    for key in reversed(keys):
        path = _path(path, key)
    return path


def check_value(value: Any, *, limits: JSONLimits = DEFAULT_LIMITS) -> bool:  # noqa: PLR0912, PLR0915
    """Check an already parsed value as :func:`loads` checks text, and say whether it
    is plain (:func:`jcs_plain`).

    The same limits and codes as for bytes: the canonical size (``too-large``), the
    nesting depth (``too-deep``; a value that contains itself nests without end), lone
    surrogates (``lone-surrogate``), non-finite numbers (``non-finite-number``),
    integers outside ±(2^53 − 1) (``integer-out-of-range``), and ``invalid-json`` for
    what JSON cannot hold: a non-string key, a set, bytes, any other Python object.
    The walk is iterative and stops as soon as the size budget is spent, so neither a
    cycle nor a shared sub-object repeated many times costs more than ``max_bytes``.

    Raises:
        MalformedJSON: with the code above and the JSON path of the offending value.
    """
    budget = limits.max_bytes
    max_depth = limits.max_depth
    size = 0
    plain = True
    stack: list[_Node] = [(value, 0, None, None)]
    while stack:
        entry = stack.pop()
        node = entry[0]
        kind = type(node)
        if kind is str or isinstance(node, str):
            if node.isascii():
                size += len(node) + 2
            else:
                if _SURROGATE.search(node):
                    raise MalformedJSON("a string holds a lone surrogate, which I-JSON "
                                        "forbids", code="lone-surrogate",
                                        json_path=_where(entry))
                size += len(node.encode("utf-8")) + 2
            plain = plain and kind is str
        elif node is None or kind is bool:
            size += 5
        elif kind is int or (isinstance(node, int) and not isinstance(node, bool)):
            if not -MAX_SAFE_INTEGER <= node <= MAX_SAFE_INTEGER:
                raise MalformedJSON(f"integer {str(node)[:24]} is outside ±(2^53 − 1)",
                                    code="integer-out-of-range", json_path=_where(entry))
            size += 17
            plain = plain and kind is int
        elif isinstance(node, float):
            if not math.isfinite(node):
                raise MalformedJSON(f"non-finite number {node!r} is not JSON",
                                    code="non-finite-number", json_path=_where(entry))
            if MAX_SAFE_INTEGER < abs(node) < 1e21:
                raise MalformedJSON(
                    f"the whole number {node!r} lies beyond ±(2^53 − 1)",
                    code="integer-out-of-range", json_path=_where(entry))
            size += 24
            plain = False
        elif isinstance(node, Mapping):
            depth = entry[1]
            if depth >= max_depth:
                raise MalformedJSON(
                    f"the object nests deeper than {max_depth} levels (or contains itself)",
                    code="too-deep", json_path=_where(entry))
            size += 2 + len(node)
            plain = plain and kind is dict
            depth += 1
            for key, item in node.items():
                if type(key) is not str:
                    if not isinstance(key, str):
                        raise MalformedJSON(
                            f"object keys are strings in JSON, got {type(key).__name__} "
                            f"{key!r}", json_path=_where(entry))
                    plain = False
                if not key.isascii():
                    if _SURROGATE.search(key):
                        raise MalformedJSON("an object key holds a lone surrogate, which "
                                            "I-JSON forbids", code="lone-surrogate",
                                            json_path=_where(entry))
                    plain = plain and not _astral_or_surrogate(key)
                size += len(key) + 3
                stack.append((item, depth, entry, key))
        elif kind is list or kind is tuple or isinstance(node, list):
            depth = entry[1]
            if depth >= max_depth:
                raise MalformedJSON(
                    f"the array nests deeper than {max_depth} levels (or contains itself)",
                    code="too-deep", json_path=_where(entry))
            size += 2 + len(node)
            plain = plain and (kind is list or kind is tuple)
            depth += 1
            stack.extend([(item, depth, entry, i) for i, item in enumerate(node)])
        else:
            raise MalformedJSON(f"{type(node).__name__} is not JSON data",
                                json_path=_where(entry))
        if size > budget:
            raise MalformedJSON(
                f"the object's canonical form exceeds the limit of {budget} bytes",
                code="too-large")
    return plain
