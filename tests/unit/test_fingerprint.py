"""The contract fingerprint: what it covers, the policy document, and the gate's pin.

A receipt carries the fingerprint of the policy it was granted under in its signed
authority grant; a gate refuses it when its own contract for that version decides
under other rules (``policy-mismatch``).
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from handoffs._json import canonical_bytes
from handoffs.contracts import Contract, Registry
from handoffs.contracts._fingerprint import document_fingerprint
from handoffs.contracts._signing import AuthorityGrant
from handoffs.contracts.policy import Over, Policy
from handoffs.contracts.versions import ContractDiff
from handoffs.examples.payment import PaymentAction as Action
from handoffs.receivers import Step, Verdict
from worlds.gate import CONTRACT, WORLD, raw, strict


def _variants() -> dict[str, Contract[Any, Any]]:
    rules = CONTRACT.policy.rules
    swapped = (rules[1], rules[0], *rules[2:])
    return {
        "rule order": attrs.evolve(CONTRACT, policy=attrs.evolve(CONTRACT.policy,
                                                                  rules=swapped)),
        "rule action": attrs.evolve(CONTRACT, policy=attrs.evolve(CONTRACT.policy, rules=(
            attrs.evolve(rules[0], action=Action.ESCALATE), *rules[1:]))),
        "default": attrs.evolve(CONTRACT, policy=attrs.evolve(CONTRACT.policy,
                                                               default=Action.HOLD)),
        "loss": attrs.evolve(CONTRACT, loss=CONTRACT.loss.with_entries(
            {(Action.RELEASE, Action.HOLD): 99})),
        "hard constraint": attrs.evolve(CONTRACT, hard_constraints=()),
        "context": attrs.evolve(CONTRACT, context=()),
        "fail-closed action": attrs.evolve(CONTRACT, fail_closed_action=Action.HOLD),
    }


@pytest.mark.parametrize("what", list(_variants()))
def test_every_decisive_part_moves_the_fingerprint(what: str) -> None:
    changed = _variants()[what]
    assert changed.id == CONTRACT.id
    assert changed.policy_fingerprint() != CONTRACT.policy_fingerprint()


def test_the_same_definition_has_the_same_fingerprint() -> None:
    again = attrs.evolve(CONTRACT, description=CONTRACT.description)
    assert again is not CONTRACT
    assert again.policy_fingerprint() == CONTRACT.policy_fingerprint()
    assert CONTRACT.policy_fingerprint().startswith("sha256:")
    assert len(CONTRACT.policy_fingerprint()) == 71


def _numeric(threshold: float) -> Contract[Any, Any]:
    """The diff tests' pump contract with its ``hot`` threshold at ``threshold``."""
    from worlds.pump_versions import HOT, MANUAL, WORN, Act, make

    hot = attrs.evolve(HOT, when=Over("temperature", threshold))
    return make(policy=Policy(rules=(hot, WORN, MANUAL), default=Act.CONTINUE))


def test_the_policy_document_is_plain_json_with_guards_in_order() -> None:
    document = CONTRACT.policy_document()
    text = json.dumps(document)  # plain JSON: no Python object inside
    assert json.loads(text) == document
    assert [r["rule"] for r in document["rules"]] == [r.name for r in CONTRACT.policy.rules]
    assert document["rules"][0] == {"rule": "identity-unverified",
                                    "when": "not identity_verified",
                                    "guard": {"is": ["identity_verified", False]},
                                    "action": "HOLD"}
    assert document["fail_closed_action"] == "ESCALATE"
    assert document["fingerprint"] == CONTRACT.policy_fingerprint()
    assert document["fingerprint"] == document_fingerprint(document)
    assert canonical_bytes(document)  # canonicalisable (RFC 8785)


def test_a_threshold_edit_is_a_rule_change_in_a_document_diff() -> None:
    old, new = _numeric(90.0), _numeric(95.0)
    assert old.id == new.id
    assert old.policy_fingerprint() != new.policy_fingerprint()
    result = ContractDiff.between_policies(old.policy_document(), new.policy_document())
    assert [(str(f.code), f.json_path) for f in result.findings] == [
        ("POLICY_RULE_CHANGED", "$.policy.rules.hot")]
    assert "temperature > 95.0" in result.findings[0].message
    assert result.breaking
    assert result.required_bump == "major"


# ------------------------------------------------------------------ the gate's pin


def test_the_grant_carries_the_fingerprint_of_the_governed_contract() -> None:
    grant = AuthorityGrant.from_json(WORLD.grant("routine-01"))
    assert grant.policy_fingerprint == CONTRACT.policy_fingerprint()


def test_a_receipt_granted_under_another_policy_is_refused() -> None:
    edited = _variants()["loss"]  # same id, another loss matrix
    doc = WORLD.signed("routine-01", grant=WORLD.grant("routine-01", contract=edited))
    decision = strict(WORLD.gate()).receive(raw(doc))
    assert decision.verdict is Verdict.REJECT
    assert decision.step is Step.PROOFS
    assert [(r.code, r.json_path) for r in decision.reasons] == [
        ("policy-mismatch", "$.grant.policy_fingerprint")]
    assert edited.policy_fingerprint() in decision.reasons[0].message
    # The receiver that holds the edited policy admits the very same receipt.
    admitted = strict(WORLD.gate(registry=Registry.of(edited))).receive(raw(doc))
    assert admitted.verdict is Verdict.ACCEPT, admitted.reasons


def test_a_grant_without_a_fingerprint_is_refused() -> None:
    grant = WORLD.grant("routine-01")
    del grant["policy_fingerprint"]
    # Re-sign the grant as the policy service would have without a fingerprint.
    from handoffs.integrity import sign

    unsigned = {k: v for k, v in grant.items() if k != "proof"}
    grant = sign(unsigned, WORLD.service_key, purpose="capabilityDelegation",
                 created=payment_created())
    decision = strict(WORLD.gate()).receive(raw(WORLD.signed("routine-01", grant=grant)))
    assert [r.code for r in decision.reasons] == ["policy-fingerprint-missing"]
    assert decision.verdict is Verdict.REJECT


def test_content_cannot_set_the_fingerprint() -> None:
    """Changing the fingerprint in a signed grant breaks the grant's proof."""
    grant = WORLD.grant("routine-01")
    grant["policy_fingerprint"] = _variants()["loss"].policy_fingerprint()
    decision = strict(WORLD.gate()).receive(raw(WORLD.signed("routine-01", grant=grant)))
    assert [r.code for r in decision.reasons] == ["grant-invalid"]


def payment_created() -> Any:
    from worlds.gate import T0

    return T0



def test_a_callable_reloaded_from_changed_source_gets_a_new_digest(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Source digests are kept per callable: asking twice gives the same answer, and a
    class or function reloaded from changed source is digested again."""
    import importlib
    import os
    import sys

    from handoffs._callables import callable_digest

    module = tmp_path / "digested_rule.py"
    module.write_text("class Rule:\n    x = 1\n\n\ndef rule():\n    return 1\n", "utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    loaded = importlib.import_module("digested_rule")
    try:
        first = [callable_digest(loaded.Rule), callable_digest(loaded.rule)]
        assert [callable_digest(loaded.Rule), callable_digest(loaded.rule)] == first
        assert all(d["source"] is not None for d in first)
        module.write_text("class Rule:\n    x = 2\n\n\ndef rule():\n    return 2\n", "utf-8")
        os.utime(module, (1, 1))  # a new mtime for linecache and the import cache
        loaded = importlib.reload(loaded)
        again = [callable_digest(loaded.Rule), callable_digest(loaded.rule)]
        assert [d["callable"] for d in again] == [d["callable"] for d in first]
        assert [d["source"] for d in again] != [d["source"] for d in first]
        assert again[0]["source"] != first[0]["source"]
        assert again[1]["source"] != first[1]["source"]
    finally:
        sys.modules.pop("digested_rule", None)
