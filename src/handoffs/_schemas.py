"""Shared internal (not public): the JSON Schema vocabulary the library's schemas share.

The Draft 2020-12 dialect; the patterns of identifiers, RFC 3339 ``Z`` times,
``sha256:`` digests, semantic versions and ``urn:uuid`` ids, each stated once, here (a
schema uses the pattern, Python code its compiled form with ``fullmatch``); the schema
of a W3C Data Integrity proof; the one wording of a schema violation (``expected a
boolean, got 'yes'``); and the checked-in text of a schema. Used by the contracts
(every receipt schema, ``handoffs.contracts._schema``, the identifier and version
checks) and the receivers (the handoff chain's schema, ``handoffs.receivers.chains``,
a carried receipt's pin); the command line writes the chain's
schema file with :func:`render_json_schema` too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import jsonschema.exceptions

__all__ = [
    "DIALECT",
    "DIGEST",
    "DIGEST_PATTERN",
    "FAST_KEYWORDS",
    "IDENT",
    "IDENT_PATTERN",
    "SEMVER",
    "SEMVER_PATTERN",
    "TIME_PATTERN",
    "URN_UUID",
    "URN_UUID_PATTERN",
    "context_schema",
    "describe",
    "proof_schema",
    "render_json_schema",
    "violation_message",
]

DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"
# No ``$``: Python's ``re.search`` lets ``$`` match before a final newline. The
# character classes plus maxLength bound the value; the typed model re-checks it.
IDENT_PATTERN: Final = "^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$"
TIME_PATTERN: Final = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$"
DIGEST_PATTERN: Final = "^sha256:[0-9a-f]{64}$"
SEMVER_PATTERN: Final = r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$"
URN_UUID_PATTERN: Final = "^urn:uuid:[0-9a-f-]{36}$"


def _compiled(pattern: str) -> re.Pattern[str]:
    """The pattern without its anchors, for ``fullmatch`` (and for ``search`` inside a
    longer text, as a carried receipt's pin).
    """
    return re.compile(pattern.removeprefix("^").removesuffix("$"))


IDENT: Final = _compiled(IDENT_PATTERN)
DIGEST: Final = _compiled(DIGEST_PATTERN)
SEMVER: Final = _compiled(SEMVER_PATTERN)
URN_UUID: Final = _compiled(URN_UUID_PATTERN)

# Keywords whose violations the compiled validator's errors describe exactly as
# python-jsonschema's do; any other keyword takes the reference path.
FAST_KEYWORDS: Final = frozenset({
    "type", "required", "additionalProperties", "enum", "const", "minimum", "maximum",
    "pattern", "anyOf",
})

def context_schema(urls: tuple[str, ...]) -> dict[str, Any]:
    """The JSON Schema of an ``@context`` of the accepted ``urls``: one of them, or an
    array of them, each at most once (data, never interpreted).
    """
    return {
        "description": "JSON-LD context, accepted as data (never interpreted): "
                       + ", ".join(urls) + ".",
        "anyOf": [{"enum": list(urls)},
                  {"type": "array", "items": {"enum": list(urls)}, "minItems": 1,
                   "maxItems": len(urls), "uniqueItems": True}],
    }


def proof_schema(cryptosuites: tuple[str, ...] = ("eddsa-jcs-2022",), *,
                 context: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON Schema of a W3C Data Integrity proof of one of ``cryptosuites``.

    One suite is written as a ``const`` (the form every version released before other
    suites were admitted has, kept byte for byte); several as an ``enum``. ``context``
    (a :func:`context_schema`) admits a proof ``@context``, as the JCS suites copy the
    document's.
    """
    text = {"type": "string", "maxLength": 512}
    if len(cryptosuites) == 1:
        suite: dict[str, Any] = {"const": cryptosuites[0], "description": "Cryptosuite."}
        what, signature = f"cryptosuite {cryptosuites[0]}", "Ed25519 signature"
    else:
        suite = {"enum": list(cryptosuites), "description": "Cryptosuite."}
        what, signature = f"cryptosuites {', '.join(cryptosuites)}", "signature"
    if cryptosuites != ("eddsa-jcs-2022",) and len(cryptosuites) == 1:
        signature = "signature"
    return {
        "type": "object",
        "description": f"A W3C Data Integrity proof ({what}).",
        "required": ["type", "cryptosuite", "verificationMethod", "proofPurpose", "proofValue"],
        "additionalProperties": False,
        "properties": {
            "type": {"const": "DataIntegrityProof", "description": "Proof type."},
            "cryptosuite": suite,
            "id": {**text, "description": "Proof identifier, referenced by previousProof."},
            "created": {"type": "string", "pattern": TIME_PATTERN,
                        "description": "When the proof was created."},
            "expires": {"type": "string", "pattern": TIME_PATTERN,
                        "description": "When the proof stops being valid."},
            "verificationMethod": {**text, "description": "Key that made the proof."},
            "proofPurpose": {**text, "description": "What the proof authorises."},
            "previousProof": {
                "description": "Earlier proof(s) this proof chains to.",
                "anyOf": [text, {"type": "array", "items": text, "maxItems": 8}],
            },
            "domain": {**text, "description": "Intended domain of the proof."},
            "challenge": {**text, "description": "Challenge answered by the proof."},
            "nonce": {**text, "description": "Nonce against replay."},
            "proofValue": {"type": "string", "pattern": "^z[1-9A-HJ-NP-Za-km-z]{40,100}$",
                           "description": f"Multibase base58btc {signature}."},
            **({} if context is None else {"@context": context}),
        },
    }


def describe(error: jsonschema.exceptions.ValidationError) -> str:
    keyword = str(error.validator)
    if keyword not in FAST_KEYWORDS:
        return str(error.message)
    missing = error.message.split("'")[1] if keyword == "required" else None
    schema = error.schema if isinstance(error.schema, dict) else {}
    return violation_message(keyword, error.instance, error.validator_value, schema, missing)


def _article(expected: Any) -> str:
    names = {"boolean": "a boolean", "string": "a string", "integer": "an integer",
             "number": "a number", "object": "an object", "array": "an array"}
    if isinstance(expected, list):
        return " or ".join(names.get(str(e), str(e)) for e in expected)
    return names.get(str(expected), str(expected))


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def violation_message(  # noqa: PLR0911 - one wording per keyword
    keyword: str, got: Any, value: Any, schema: Mapping[str, Any], missing: str | None
) -> str:
    """The violation's wording; ``missing`` names the absent property of ``required``."""
    if keyword == "type":
        return f"expected {_article(value)}, got {_short(got)}"
    if keyword == "required":
        return f"required field {missing!r} missing"
    if keyword == "additionalProperties":
        extra = sorted(set(got) - set(schema.get("properties", {})))
        return f"unknown field{'s' if len(extra) > 1 else ''} {', '.join(map(repr, extra))}"
    if keyword == "enum":
        return f"expected one of {value}, got {_short(got)}"
    if keyword == "const":
        return f"expected {value!r}, got {_short(got)}"
    if keyword in ("minimum", "maximum"):
        return f"{_short(got)} is {'below' if keyword == 'minimum' else 'above'} the " \
               f"{keyword} {value}"
    if keyword == "pattern":
        return f"{got!r} does not match {value!r}"
    return f"{got!r} is not valid under any of the given schemas"


def render_json_schema(schema: dict[str, Any]) -> str:
    """The checked-in text of any schema: two-space indent, UTF-8, final newline."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
