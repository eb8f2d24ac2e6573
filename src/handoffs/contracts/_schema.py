"""JSON Schema (Draft 2020-12) for every contract version, and validation against it.

Schemas are generated from the typed contract, closed by default
(``additionalProperties: false``), carry a ``description`` on every property and a
stable ``$id`` naming contract and version. ``schemas/<name>/<version>.json`` holds
the checked-in copies; a test fails when code and files drift.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import jsonschema_rs

from handoffs._errors import MalformedJSON, ReceiptValidationError, Violation
from handoffs._json import DEFAULT_LIMITS, JSONLimits, ParsedObject, check_value
from handoffs._schemas import (
    DIALECT,
    DIGEST_PATTERN,
    FAST_KEYWORDS,
    IDENT_PATTERN,
    TIME_PATTERN,
    URN_UUID_PATTERN,
    context_schema,
    describe,
    proof_schema,
    render_json_schema,
    violation_message,
)
from handoffs.contracts._contract import Authority, Contract, Uncertainty
from handoffs.contracts._fields import FieldKind, FieldSpec

if TYPE_CHECKING:  # python-jsonschema describes rare violations; imported when it must
    from jsonschema import Draft202012Validator

__all__ = [
    "content_json_schema",
    "iter_violations",
    "render_schema",
    "schema_path",
    "to_json_schema",
    "validate",
    "write_schema",
]

_URI_PATTERN: Final = "^[a-z][a-z0-9+.-]*:[^\\s]{1,500}$"


def _field_schema(spec: FieldSpec) -> dict[str, Any]:
    base: dict[str, Any] = {"description": spec.description}
    if spec.kind is FieldKind.BOOL:
        base["type"] = "boolean"
    elif spec.kind is FieldKind.ENUM:
        base["enum"] = [member.value for member in spec.domain() or ()]
    elif spec.kind in (FieldKind.INT, FieldKind.FLOAT):
        base["type"] = "integer" if spec.kind is FieldKind.INT else "number"
        base["minimum"] = spec.minimum
        base["maximum"] = spec.maximum
    else:
        bound = {"type": "number", "minimum": spec.minimum, "maximum": spec.maximum}
        base.update({
            "type": "object",
            "additionalProperties": False,
            "required": ["lo", "hi"],
            "properties": {
                "lo": {**bound, "description": "Inclusive lower end of the interval."},
                "hi": {**bound, "description": "Inclusive upper end of the interval."},
            },
        })
    if spec.optional:  # null: known not to apply; the member itself stays required
        base["description"] = f"{spec.description} null: known not to apply."
        if "enum" in base:
            base["enum"] = [*base["enum"], None]
        else:
            base["type"] = [base["type"], "null"]
    return base


def to_json_schema(contract: Contract[Any, Any]) -> dict[str, Any]:
    """Generate the Draft 2020-12 JSON Schema of a contract version's receipts."""
    ident = {"type": "string", "pattern": IDENT_PATTERN, "maxLength": 128}
    state_props = {spec.name: _field_schema(spec) for spec in contract.fields}
    context = _context_schema(contract)
    schema: dict[str, Any] = {
        "$schema": DIALECT,
        "$id": contract.schema_id,
        "title": f"{contract.name} {contract.version} decision receipt",
        "description": contract.description,
        "type": "object",
        "additionalProperties": False,
        "required": [
            "contract", "id", "case_id", "sender", "receiver", "authority", "proposed_action",
            "decision_state", "evidence_refs", "policy_version", "valid_until", "uncertainty",
            "counterfactual_trigger",
        ],
        "properties": {
            "contract": {"const": contract.id,
                         "description": "Contract name and version this receipt follows."},
            "id": {"type": "string", "pattern": URN_UUID_PATTERN, "maxLength": 45,
                   "description": "Unique receipt identifier; a receiver refuses a replay."},
            "case_id": {**ident, "description": "The case the decision is about."},
            "sender": {**ident, "description": "Identity of the sending agent (from the "
                                               "identity service)."},
            "receiver": {**ident, "description": "The one receiver this receipt is "
                                                 "addressed to (its audience)."},
            "authority": {"enum": [a.value for a in Authority],
                          "description": "ADVISE: the receiver decides; DECIDE: the sender "
                                         "decided and the receiver executes."},
            "proposed_action": {"enum": [a.value for a in contract.actions],
                                "description": "The action the sender proposes."},
            "decision_state": {
                "type": "object",
                "description": "The decisive facts that locate the case in a decision region.",
                "additionalProperties": False,
                "required": [spec.name for spec in contract.fields],
                "properties": state_props,
            },
            "evidence_refs": {
                "type": "array",
                "description": "References to authoritative evidence, optionally pinned by a "
                               "SHA-256 content digest.",
                "minItems": 1,
                "maxItems": 32,
                "items": {"anyOf": [
                    {"type": "string", "pattern": _URI_PATTERN, "maxLength": 512},
                    {"type": "object", "additionalProperties": False,
                     "required": ["uri", "digest"],
                     "properties": {
                         "uri": {"type": "string", "pattern": _URI_PATTERN, "maxLength": 512,
                                 "description": "Where the evidence lives."},
                         "digest": {"type": "string", "pattern": DIGEST_PATTERN,
                                    "description": "sha256 of the evidence content."},
                     }},
                ]},
            },
            "policy_version": {**ident, "description": "The receiver policy version the "
                                                       "state was assessed under."},
            "valid_until": {"type": "string", "pattern": TIME_PATTERN,
                            "description": "After this instant (UTC) the receipt must not be "
                                           "acted on."},
            "uncertainty": {"enum": [u.value for u in Uncertainty],
                            "description": "Whether the sender's evidence is resolved, in "
                                           "conflict or incomplete."},
            "counterfactual_trigger": {"type": "string", "minLength": 1, "maxLength": 500,
                                       "description": "The change that requires recomputation "
                                                      "instead of reusing this receipt."},
            "notes": {"type": "string", "maxLength": contract.max_notes_length,
                      "description": "Optional bounded narrative. Untrusted: it never sets "
                                     "authority, audience or validity."},
            "grant": {"type": "object", "maxProperties": 16,
                      "description": "The governance service's signed authority grant."},
            "proof": {
                "description": "Data Integrity proof(s) over the receipt.",
                "anyOf": [{"$ref": "#/$defs/proof"},
                          {"type": "array", "items": {"$ref": "#/$defs/proof"},
                           "minItems": 1, "maxItems": 8}],
            },
        },
        "$defs": {"proof": proof_schema(contract.cryptosuites, context=context)},
    }
    if context is not None:  # declared: the document's @context, and the proof's copy
        schema["properties"] = {"@context": context, **schema["properties"]}
    return schema


def _context_schema(contract: Contract[Any, Any]) -> dict[str, Any] | None:
    if not contract.admits_context:
        return None
    from handoffs.integrity import ACCEPTED_CONTEXTS

    return context_schema(ACCEPTED_CONTEXTS)


_STRICT_DROPPED: Final = frozenset({"minLength", "maxLength"})


def _strict(node: Any) -> Any:
    """A copy of a schema node in the strict subset model providers constrain decoding
    to: no string length bounds, a ``type`` beside every string ``enum``.
    """
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _strict(value) for key, value in node.items() if key not in _STRICT_DROPPED}
    if "enum" in out and "type" not in out and all(isinstance(v, str) for v in out["enum"]):
        out["type"] = "string"
    elif ("enum" in out and "type" not in out and None in out["enum"]
          and all(isinstance(v, str) or v is None for v in out["enum"])):
        out["type"] = ["string", "null"]  # an optional enum field
    return out


def content_json_schema(contract: Contract[Any, Any]) -> dict[str, Any]:
    """The strict JSON Schema of a receipt's *content*: what an encoder or a model
    writes, nothing that governs authority, audience or validity.

    Every object is closed (``additionalProperties: false``) and lists all its
    properties as required; optional members are nullable instead (``null``
    ``counterfactual_trigger``: the contract's; ``null`` ``notes``: none). The schema
    is in the subset that OpenAI's strict structured outputs accept. Bounds it cannot
    express (string lengths) are still enforced when the receipt is built.
    """
    props = to_json_schema(contract)["properties"]
    properties: dict[str, Any] = {
        name: _strict(props[name]) for name in ("proposed_action", "decision_state",
                                                "uncertainty")
    }
    properties["counterfactual_trigger"] = {
        "type": ["string", "null"],
        "description": props["counterfactual_trigger"]["description"]
        + " null: the contract's own trigger.",
    }
    properties["notes"] = {
        "type": ["string", "null"],
        "description": props["notes"]["description"].replace("Optional b", "B")
        + f" At most {contract.max_notes_length} characters; null for none.",
    }
    return {
        "title": f"{contract.name} {contract.version} decision content",
        "description": contract.description,
        "type": "object",
        "additionalProperties": False,
        "required": list(properties),
        "properties": properties,
    }


def to_json_schema_cached(contract: Contract[Any, Any]) -> dict[str, Any]:
    """The schema the cached validators were compiled from (do not mutate it)."""
    return _compiled(contract).schema


class _Compiled:
    """One contract version's schema, its compiled validator and, built on first use,
    python-jsonschema's validator (the reference describer of rare violations).
    """

    __slots__ = ("_reference", "contract", "fast", "numbers", "schema")

    def __init__(self, contract: Contract[Any, Any]) -> None:
        self.contract = contract
        self.schema = to_json_schema(contract)
        self.fast: Any = jsonschema_rs.validator_for(self.schema)
        self._reference: Draft202012Validator | None = None

    def reference(self) -> Draft202012Validator:
        if self._reference is None:
            from jsonschema import Draft202012Validator

            self._reference = Draft202012Validator(self.schema)
        return self._reference


# Keyed by the definition's identity, not its id: two definitions may share an id
# (tests, a redefinition in a notebook). The contract is kept in the value so that
# its ``id()`` cannot be reused while the entry lives.
_validators: dict[int, _Compiled] = {}


def _compiled(contract: Contract[Any, Any]) -> _Compiled:
    entry = _validators.get(id(contract))
    if entry is None or entry.contract is not contract:
        entry = _validators[id(contract)] = _Compiled(contract)
    return entry


def _validator(contract: Contract[Any, Any]) -> Draft202012Validator:
    return _compiled(contract).reference()


def _fast_validator(contract: Contract[Any, Any]) -> Any:
    return _compiled(contract).fast


def iter_violations(contract: Contract[Any, Any], document: Any) -> Iterator[Violation]:
    """Every schema violation of ``document``, the most relevant first."""
    from jsonschema.exceptions import relevance

    errors = sorted(_validator(contract).iter_errors(document), key=relevance)
    for error in errors:
        yield Violation(
            json_path=error.json_path,
            schema_path="/".join(str(p) for p in error.absolute_schema_path),
            message=describe(error),
            validator=str(error.validator),
        )


# python-jsonschema's ``exceptions.WEAK_MATCHES``, which ``relevance`` ranks last.
_WEAK_MATCHES: Final = frozenset({"anyOf", "oneOf"})
_JSON_TYPES: Final[dict[str, Any]] = {
    "object": dict, "array": list, "string": str, "boolean": bool, "null": type(None),
}


def _is_json_type(value: Any, name: str) -> bool:
    if name in ("integer", "number"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        return name == "number" or isinstance(value, int) or float(value).is_integer()
    return isinstance(value, _JSON_TYPES.get(name, ()))


def _fast_violations(contract: Contract[Any, Any], document: Any) -> list[Violation] | None:
    """The violations from the compiled validator, ordered and worded exactly as
    :func:`iter_violations` would; ``None`` when a keyword needs the reference path.
    """
    schema = to_json_schema_cached(contract)
    rows = []
    for error in _fast_validator(contract).iter_errors(document):
        keyword = error.schema_path[-1] if error.schema_path else ""
        if keyword not in FAST_KEYWORDS:
            return None
        # Ties keep python-jsonschema's traversal order: schema keywords as written.
        node: Any = schema
        parent: Any = schema
        order = []
        try:
            for step in error.schema_path:
                order.append(list(node).index(step) if isinstance(node, dict) else step)
                parent, node = node, node[step]
        except (KeyError, IndexError, TypeError, ValueError):  # e.g. through a $ref
            return None
        path = list(error.instance_path)
        instance = error.instance
        expected = parent.get("type")
        matches = expected is not None and any(
            _is_json_type(instance, t) for t in ([expected] if isinstance(expected, str)
                                                 else expected))
        key = (-len(path), path, keyword not in _WEAK_MATCHES, False,
               not matches, order)
        json_path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
        missing = error.kind.property if keyword == "required" else None
        message = violation_message(keyword, instance, node, parent, missing)
        rows.append((key, Violation(json_path, "/".join(str(s) for s in error.schema_path),
                                    message, keyword)))
    rows.sort(key=lambda row: row[0])
    return [violation for _, violation in rows]


def validate(
    contract: Contract[Any, Any], document: Any, *, limits: JSONLimits = DEFAULT_LIMITS
) -> None:
    """Raise :class:`ReceiptValidationError` listing every violation, best first.

    The document is first checked as parsed JSON (``check_value``:
    size and depth within ``limits``, no lone surrogates, nothing JSON cannot hold).
    The compiled validator (``jsonschema-rs``) decides, and describes the common
    violations itself; rarer keywords are described by ``jsonschema``.

    Raises:
        ReceiptValidationError: every violation, best first.
        MalformedJSON: the document is not JSON data, or exceeds ``limits``.
    """
    if type(document) is not ParsedObject:  # a ParsedObject was checked by its parser
        check_value(document, limits=limits)
    validate_checked(contract, document)


def validate_checked(contract: Contract[Any, Any], document: Any) -> None:
    """:func:`validate` for a document already checked as JSON data (parsed by the
    strict parser, or passed through ``check_value``).

    A :class:`~handoffs._json.ParsedObject` remembers the contract it passed
    (``valid_for``): validating it again under that contract costs nothing.

    Raises:
        ReceiptValidationError: every violation, best first.
        MalformedJSON: the validators refused a value that is not JSON data.
    """
    parsed = type(document) is ParsedObject
    if parsed and document.valid_for is contract:
        return
    try:
        if _compiled(contract).fast.is_valid(document):
            if parsed:
                document.valid_for = contract
            return
        fast = _fast_violations(contract, document)
        violations = fast if fast is not None else list(iter_violations(contract, document))
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise MalformedJSON(f"the document is not plain JSON data: {exc}") from exc
    if not violations:
        # The compiled validator anchors patterns strictly (``$`` never matches before a
        # trailing newline); python-jsonschema is laxer there.
        violations = [Violation("$", "", "a string does not match its pattern exactly",
                                "pattern")]
    raise ReceiptValidationError(violations, contract=contract.name, version=contract.version)


def schema_path(root: Path, contract: Contract[Any, Any]) -> Path:
    """Where a contract version's schema is checked in: ``<root>/<name>/<version>.json``."""
    return root / contract.name / f"{contract.version}.json"


def write_schema(root: Path, contract: Contract[Any, Any]) -> Path:
    """Write the schema file (stable formatting, trailing newline); return its path."""
    path = schema_path(root, contract)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_schema(contract), encoding="utf-8")
    return path


def render_schema(contract: Contract[Any, Any]) -> str:
    """The exact text checked in for a contract version."""
    return render_json_schema(to_json_schema(contract))
