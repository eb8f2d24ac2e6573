"""Receipt JSON Schemas: shape, closedness, descriptions, drift and error ordering."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from handoffs.contracts import Contract, Receipt
from handoffs.contracts._schema import (
    iter_violations,
    render_schema,
    schema_path,
    write_schema,
)
from handoffs.examples.payment import (
    GOVERNANCE,
    PAYMENT_RELEASE,
    decision_contract_encoder,
    synthetic_cases,
)

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
CONTRACTS = [PAYMENT_RELEASE]  # the contracts whose schemas the repo publishes

# Objects deliberately left open, each with the reason. The grant is verified and
# read strictly by AuthorityGrant.from_json (signing), not by the receipt schema.
OPEN_BY_DESIGN = {"$.properties.grant"}


def _walk(node: Any, path: str = "$") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every subschema, with a JSONPath into the schema document."""
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            if key in ("properties", "$defs"):
                for name, sub in value.items():
                    yield from _walk(sub, f"{path}.{key}.{name}")
            elif key in ("items", "additionalProperties"):
                yield from _walk(value, f"{path}.{key}")
            elif key == "anyOf":
                for index, sub in enumerate(value):
                    yield from _walk(sub, f"{path}.anyOf[{index}]")


@pytest.mark.parametrize("contract", CONTRACTS, ids=lambda c: c.id)
def test_schema_identity(contract: Contract[Any, Any]) -> None:
    schema = contract.json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == contract.schema_id == (
        f"urn:handoffs:schema:{contract.name}:{contract.version}")
    assert schema["properties"]["contract"]["const"] == contract.id
    Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("contract", CONTRACTS, ids=lambda c: c.id)
def test_every_property_has_a_description(contract: Contract[Any, Any]) -> None:
    missing = [
        f"{path}.properties.{name}"
        for path, node in _walk(contract.json_schema())
        for name, sub in node.get("properties", {}).items()
        if not (isinstance(sub, dict) and str(sub.get("description", "")).strip())
    ]
    assert missing == []


@pytest.mark.parametrize("contract", CONTRACTS, ids=lambda c: c.id)
def test_every_object_is_closed(contract: Contract[Any, Any]) -> None:
    open_objects = [
        path for path, node in _walk(contract.json_schema())
        if (node.get("type") == "object" or "properties" in node)
        and node.get("additionalProperties") is not False
    ]
    assert sorted(open_objects) == sorted(OPEN_BY_DESIGN)


@pytest.mark.parametrize("contract", CONTRACTS, ids=lambda c: c.id)
def test_checked_in_schema_has_not_drifted(contract: Contract[Any, Any]) -> None:
    path = schema_path(SCHEMAS, contract)
    assert path.is_file(), f"{path} is missing; run 'handoffs schema export'"
    assert path.read_text(encoding="utf-8") == render_schema(contract), (
        f"{path} drifted from the contract; run 'handoffs schema export'")


def test_write_schema_is_stable(tmp_path: Path) -> None:
    path = write_schema(tmp_path, PAYMENT_RELEASE)
    assert path == tmp_path / "payment-release" / "1.0.0.json"
    text = path.read_text(encoding="utf-8")
    assert text.endswith("}\n")
    assert json.loads(text) == PAYMENT_RELEASE.json_schema()
    assert write_schema(tmp_path, PAYMENT_RELEASE).read_text(encoding="utf-8") == text


def _document() -> dict[str, Any]:
    case = next(iter(synthetic_cases()))
    receipt = Receipt.build(PAYMENT_RELEASE, decision_contract_encoder().encode(case),
                            GOVERNANCE.stamp(case_id=case.case_id,
                                             evidence_refs=case.evidence_refs))
    return receipt.to_json()


def test_generated_receipts_validate() -> None:
    assert list(iter_violations(PAYMENT_RELEASE, _document())) == []


def test_validation_reports_every_error_best_first() -> None:
    doc = _document()
    doc["decision_state"]["screening_clear"] = "no"
    doc["decision_state"]["extra"] = 1
    del doc["uncertainty"]
    doc["evidence_refs"] = ["not a uri", {"uri": "evidence://x", "digest": "md5:1"}]
    doc["id"] = "receipt-1"
    violations = list(iter_violations(PAYMENT_RELEASE, doc))
    assert [str(v) for v in violations] == [
        "expected a boolean, got 'no' @ $.decision_state.screening_clear",
        "'not a uri' is not valid under any of the given schemas @ $.evidence_refs[0]",
        "{'uri': 'evidence://x', 'digest': 'md5:1'} is not valid under any of the given "
        "schemas @ $.evidence_refs[1]",
        "unknown field 'extra' @ $.decision_state",
        "'receipt-1' does not match '^urn:uuid:[0-9a-f-]{36}$' @ $.id",
        "required field 'uncertainty' missing @ $",
    ]
    assert [v.validator for v in violations] == ["type", "anyOf", "anyOf",
                                                 "additionalProperties", "pattern", "required"]
    assert violations[0].schema_path == (
        "properties/decision_state/properties/screening_clear/type")


def test_validators_are_cached_per_definition_not_per_id() -> None:
    import enum

    import attrs

    from handoffs.contracts import Contract, LossMatrix, decision_field
    from handoffs.contracts.policy import Policy

    class Go(enum.Enum):
        GO = "GO"

    def contract(state: type[Any]) -> Contract[Any, Any]:
        return Contract(name="cache-probe", version="1.0.0", description="Probe.", actions=Go,
                        state=state, policy=Policy(rules=(), default=Go.GO),
                        loss=LossMatrix({(Go.GO, Go.GO): 0}), fail_closed_action=Go.GO,
                        counterfactual_trigger="Never.")

    first = contract(attrs.frozen(type("First", (), {
        "__annotations__": {"a": bool}, "a": decision_field("A.")})))
    second = contract(attrs.frozen(type("Second", (), {
        "__annotations__": {"b": bool}, "b": decision_field("B.")})))
    document = _document()
    document["contract"] = "cache-probe/1.0.0"
    document["proposed_action"] = "GO"
    document["decision_state"] = {"a": True}
    first.validate(document)
    document["decision_state"] = {"b": True}
    second.validate(document)


# ------------------------------------------- compiled validator vs python-jsonschema

_MUTATIONS = st.sampled_from(["delete", "retype", "extra", "enum", "pattern", "state"])


@given(st.lists(st.tuples(_MUTATIONS, st.integers(0, 20)), min_size=1, max_size=4))
def test_fast_violations_equal_the_reference_report(edits: list[tuple[str, int]]) -> None:
    """The compiled validator's violations are worded and ordered exactly like
    python-jsonschema's, whenever it describes them itself."""
    from handoffs.contracts._schema import _fast_violations

    doc = _payment_document()
    for kind, n in edits:
        keys = sorted(doc)
        key = keys[n % len(keys)]
        if kind == "delete":
            doc.pop(key)
        elif kind == "retype":
            doc[key] = [n] if isinstance(doc[key], str) else "text"
        elif kind == "extra":
            doc[f"extra_{n}"] = n
        elif kind == "enum":
            doc["authority"] = f"MAYBE{n}"
        elif kind == "pattern":
            doc["case_id"] = f"bad case {n}"
        elif isinstance(doc.get("decision_state"), dict):
            fields = sorted(doc["decision_state"])
            doc["decision_state"][fields[n % len(fields)]] = "yes" if n % 2 else None
    fast = _fast_violations(PAYMENT_RELEASE, doc)
    reference = list(iter_violations(PAYMENT_RELEASE, doc))
    assert fast is None or fast == reference


def _payment_document() -> dict[str, Any]:
    from handoffs.contracts import Receipt
    from handoffs.examples.payment import GOVERNANCE, decision_contract_encoder, synthetic_cases

    case = next(iter(synthetic_cases()))
    return Receipt.build(
        PAYMENT_RELEASE,
        decision_contract_encoder().encode(case),
        GOVERNANCE.stamp(case_id=case.case_id, evidence_refs=case.evidence_refs),
    ).to_json()


def test_the_fast_ranking_weakens_what_python_jsonschema_weakens() -> None:
    import jsonschema.exceptions

    from handoffs.contracts._schema import _WEAK_MATCHES

    assert jsonschema.exceptions.WEAK_MATCHES == _WEAK_MATCHES
