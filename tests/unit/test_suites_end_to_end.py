"""Every registered cryptosuite end to end (issue 32, items 1 and 2): a Sender and a
GrantIssuer of each suite (Ed25519, P-256 in memory, a KMS-style callable) produce
receipts the gate admits; a suite the contract's schema refuses fails at signing; a
high-S ECDSA twin is refused (``weak-signature``).

Real keys, the real gate; the user's contract is ``tests/unit/test_sender.py``'s pump.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import attrs
import pytest

from handoffs.contracts import GrantIssuer, ProofError, Receipt, Registry, Sender
from handoffs.integrity import CallableSigner, P256SigningKey, Signer, SigningKey
from handoffs.integrity._base58 import b58decode, b58encode
from handoffs.integrity._suites import registered_cryptosuites
from handoffs.receivers import Gate, StrictContractReceiver, Verdict
from test_sender import NOW, PUMP, REFS, SERVICE, SINCE, content

_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


def _kms(key: P256SigningKey) -> CallableSigner:
    """A P-256 key 'in a KMS': only the bytes to sign cross; DER comes back, as most
    cloud KMS APIs return it (and half of the time high-S)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    return CallableSigner(public_key_multibase=key.public_key_multibase, der=True,
                          sign_bytes=lambda data: key.private_key.sign(
                              data, ec.ECDSA(hashes.SHA256())))


SIGNERS: dict[str, Callable[[], Signer]] = {
    "eddsa-jcs-2022": SigningKey.generate,
    "ecdsa-jcs-2019": P256SigningKey.generate,
    "ecdsa-jcs-2019-kms": lambda: _kms(P256SigningKey.generate()),
}


def test_every_registered_suite_has_a_signer_here() -> None:
    assert {s().cryptosuite for s in SIGNERS.values()} == set(registered_cryptosuites())


def _world(sender_kind: str, issuer_kind: str) -> tuple[Sender[Any, Any], Gate]:
    agent, service = SIGNERS[sender_kind](), SIGNERS[issuer_kind]()
    sender = Sender(contract=PUMP, key=agent, governance=SERVICE, clock=lambda: NOW,
                    grants=GrantIssuer(key=service, issuer="policy-service"))
    gate = Gate(identity="plant-controller", trust=sender.key_ring(not_before=SINCE),
                registry=Registry.of(PUMP), clock=lambda: NOW + timedelta(minutes=1))
    return sender, gate


@pytest.mark.parametrize("issuer_kind", sorted(SIGNERS))
@pytest.mark.parametrize("sender_kind", sorted(SIGNERS))
def test_the_gate_admits_receipts_of_every_suite_as_sender_and_as_grant_issuer(
        sender_kind: str, issuer_kind: str) -> None:
    sender, gate = _world(sender_kind, issuer_kind)
    receipt = sender.receipt(content(), case_id="pump-7", evidence_refs=REFS)
    assert receipt.proof["cryptosuite"] == sender.key.cryptosuite
    assert receipt.grant is not None
    assert receipt.grant["proof"]["cryptosuite"] == sender.grants.key.cryptosuite  # type: ignore[union-attr]
    decision = StrictContractReceiver(gate).receive(receipt.to_bytes())
    assert decision.admitted, decision.reasons
    assert decision.verdict is Verdict.ACCEPT


def test_released_contracts_keep_their_one_suite_and_refuse_another_at_signing() -> None:
    eddsa_only = attrs.evolve(PUMP, cryptosuites=("eddsa-jcs-2022",))
    schema = eddsa_only.json_schema()["$defs"]["proof"]["properties"]["cryptosuite"]
    assert schema == {"const": "eddsa-jcs-2022", "description": "Cryptosuite."}
    assert PUMP.json_schema()["$defs"]["proof"]["properties"]["cryptosuite"]["enum"] == list(
        registered_cryptosuites())
    sender = Sender(contract=eddsa_only, key=P256SigningKey.generate(), governance=SERVICE,
                    grants=None, clock=lambda: NOW)
    with pytest.raises(ProofError) as info:
        sender.receipt(content(), case_id="pump-7", evidence_refs=REFS)
    assert (info.value.code, info.value.json_path) == ("suite-not-admitted",
                                                       "$.proof.cryptosuite")


def test_a_contract_names_only_registered_suites() -> None:
    from handoffs.contracts import ContractDefinitionError

    for bad in ((), ("rsa-2000",), ("eddsa-jcs-2022", "eddsa-jcs-2022"), "eddsa-jcs-2022"):
        with pytest.raises(ContractDefinitionError):
            attrs.evolve(PUMP, cryptosuites=bad)


def test_a_sender_refuses_what_is_no_signer() -> None:
    from handoffs._errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="must be a Signer"):
        Sender(contract=PUMP, key=b"secret", governance=SERVICE, grants=None)  # type: ignore[arg-type]


# ----------------------------------------------------------------- low-S (item 2)


def _high_s_twin(document: dict[str, Any]) -> dict[str, Any]:
    twin = json.loads(json.dumps(document))
    raw = b58decode(twin["proof"]["proofValue"][1:])
    s = int.from_bytes(raw[32:], "big")
    twin["proof"]["proofValue"] = "z" + b58encode(raw[:32] + (_N - s).to_bytes(32, "big"))
    return twin


@pytest.mark.parametrize("kind", ["ecdsa-jcs-2019", "ecdsa-jcs-2019-kms"])
def test_ecdsa_signs_low_s_always_and_its_high_s_twin_is_refused(kind: str) -> None:
    sender, gate = _world(kind, "eddsa-jcs-2022")
    trust = sender.key_ring(not_before=SINCE)
    for n in range(40):  # a random ECDSA signature is high-S half of the time
        receipt = sender.receipt(content(), case_id=f"pump-{n}", evidence_refs=REFS)
        raw = b58decode(receipt.proof["proofValue"][1:])
        assert int.from_bytes(raw[32:], "big") <= _N // 2
    document = receipt.to_json()
    Receipt.verify(document, trust, now=NOW, registry=PUMP, audience="plant-controller")
    twin = _high_s_twin(document)
    with pytest.raises(ProofError) as info:
        Receipt.verify(twin, trust, now=NOW, registry=PUMP, audience="plant-controller")
    assert (info.value.code, info.value.json_path) == ("weak-signature", "$.proof.proofValue")
    refused = StrictContractReceiver(gate).receive(json.dumps(twin).encode())
    assert not refused.admitted
    assert [r.code for r in refused.reasons] == ["weak-signature"]


def test_a_kms_signer_that_fails_is_a_typed_refusal() -> None:
    from handoffs.integrity import KeyRingError

    key = P256SigningKey.generate()
    signer = CallableSigner(public_key_multibase=key.public_key_multibase,
                            sign_bytes=lambda data: "not bytes")  # type: ignore[arg-type,return-value]
    sender = Sender(contract=PUMP, key=signer, governance=SERVICE, grants=None,
                    clock=lambda: NOW)
    with pytest.raises(KeyRingError) as info:
        sender.receipt(content(), case_id="pump-7", evidence_refs=REFS)
    assert info.value.code == "bad-signer"


# ------------------------------------------- a contract declaring @context (item 3)


@pytest.mark.parametrize("kind", ["eddsa-jcs-2022", "ecdsa-jcs-2019"])
def test_a_contract_that_declares_context_admits_receipts_carrying_the_di_context(
        kind: str) -> None:
    from handoffs.integrity import sign

    declaring = attrs.evolve(PUMP, admits_context=True)
    assert "@context" in declaring.json_schema()["properties"]
    assert "@context" not in PUMP.json_schema()["properties"]
    agent = SIGNERS[kind]()
    sender = Sender(contract=declaring, key=agent, governance=SERVICE, clock=lambda: NOW,
                    grants=GrantIssuer(key=SigningKey.generate(), issuer="policy-service"))
    unsigned = sender.receipt(content(), case_id="pump-7", evidence_refs=REFS).to_json()
    del unsigned["proof"]

    def gate_for(contract: Any, context: Any) -> Any:
        doc = sign({**unsigned, "@context": context}, agent, created=NOW)
        gate = Gate(identity="plant-controller", trust=sender.key_ring(not_before=SINCE),
                    registry=Registry.of(contract), clock=lambda: NOW + timedelta(minutes=1))
        return StrictContractReceiver(gate).receive(json.dumps(doc).encode())

    di_v2 = ["https://w3id.org/security/data-integrity/v2"]
    admitted = gate_for(declaring, di_v2)
    assert admitted.admitted, admitted.reasons
    undeclared = gate_for(PUMP, di_v2)
    # Refused at the document's @context and at the proof's copy of it.
    assert sorted((r.code, r.json_path) for r in undeclared.reasons) == [
        ("schema-invalid", "$"), ("schema-invalid", "$.proof")]
    with pytest.raises(ProofError) as info:
        gate_for(declaring, ["https://example.org/terms/v1"])
    assert info.value.code == "context-not-allowed"
