"""Interop both ways with Digital Bazaar's JavaScript Data Integrity stack (issue 32,
item 3): ``@digitalbazaar/data-integrity`` with the ``eddsa-jcs-2022`` and
``ecdsa-jcs-2019`` cryptosuites and ``jsonld-signatures``, run by node on
``tools/interop/interop.mjs``.

For both suites: receipts, their grants and plain documents signed here verify there
(``AssertionProofPurpose``; grants under ``ControllerProofPurpose`` with
``capabilityDelegation``); documents signed there (which always carry the DI v2
``@context``) verify here; tampered ones are refused both ways. An ECDSA signature
made there high-S (WebCrypto does not normalise S) is refused here (``weak-signature``)
and its low-S twin verifies on both sides.

Marked ``interop``: CI runs it in a bounded step after ``npm ci`` in tools/interop
(pytest -m interop). Without node or the installed packages it skips, and under CI a
skip fails the run (tests/conftest.py).
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from handoffs._errors import ProofError
from handoffs.contracts import GrantIssuer, Registry, Sender
from handoffs.integrity import KeyRing, P256SigningKey, SigningKey, sign, verify
from handoffs.integrity._base58 import b58decode, b58encode
from handoffs.integrity._suites import registered_cryptosuites
from handoffs.receivers import Gate, StrictContractReceiver

pytestmark = pytest.mark.interop

TOOL = Path(__file__).resolve().parents[2] / "tools" / "interop"
_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
DI_V2 = "https://w3id.org/security/data-integrity/v2"


def run_js(job: dict[str, Any]) -> dict[str, Any]:
    """Run the JavaScript side on ``job``; fail on a broken job (exit 2)."""
    node = shutil.which("node")
    if node is None or not (TOOL / "node_modules" / "@digitalbazaar").is_dir():
        pytest.skip("node or tools/interop/node_modules missing: run npm ci in tools/interop")
    done = subprocess.run([node, str(TOOL / "interop.mjs")], input=json.dumps(job),
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode in (0, 1), done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    result["returncode"] = done.returncode
    return result


def new_key(suite: str) -> SigningKey | P256SigningKey:
    return SigningKey.generate() if suite == "eddsa-jcs-2022" else P256SigningKey.generate()


def tampered(document: dict[str, Any], member: str, value: Any) -> dict[str, Any]:
    twin = copy.deepcopy(document)
    twin[member] = value
    return twin


def signed_here(suite: str) -> list[dict[str, Any]]:
    """What this project signs with ``suite``: a receipt (with its grant, signed by a
    policy-service key of the same suite), the grant alone, a plain document, and a
    document with the DI v2 context; each with a tampered twin.
    """
    from test_sender import PUMP, REFS, SERVICE, SINCE, content

    now = datetime.now(UTC).replace(microsecond=0)
    sender = Sender(contract=PUMP, key=new_key(suite), governance=SERVICE, clock=lambda: now,
                    grants=GrantIssuer(key=new_key(suite), issuer="policy-service"))
    receipt = sender.receipt(content(), case_id="pump-7", evidence_refs=REFS).to_json()
    gate = Gate(identity="plant-controller", trust=sender.key_ring(not_before=SINCE),
                registry=Registry.of(PUMP), clock=lambda: now + timedelta(seconds=5))
    assert StrictContractReceiver(gate).receive(json.dumps(receipt)).admitted
    key = new_key(suite)
    plain = sign({"type": "Note", "text": "hello", "n": 7}, key, created=now)
    with_context = sign({"@context": [DI_V2], "type": "Note", "text": "hello"}, key,
                        created=now)
    items = [
        ("receipt", receipt, "assertionMethod", "authority", "DECIDE"),
        ("grant", receipt["grant"], "capabilityDelegation", "audience", "mallory"),
        ("document", plain, "assertionMethod", "n", 8),
        ("document-with-context", with_context, "assertionMethod", "text", "bye"),
    ]
    jobs = []
    for label, document, purpose, member, value in items:
        jobs.append({"label": f"{suite}/{label}", "document": document, "purpose": purpose,
                     "expect": True})
        jobs.append({"label": f"{suite}/{label}/tampered", "purpose": purpose,
                     "document": tampered(document, member, value), "expect": False})
    return jobs


@pytest.mark.parametrize("suite", registered_cryptosuites())
def test_what_is_signed_here_verifies_there_and_tampered_is_refused(suite: str) -> None:
    jobs = signed_here(suite)
    result = run_js({"verify": jobs})
    assert result["failures"] == [], result["failures"]
    assert result["returncode"] == 0
    assert [r["verified"] for r in result["verify"]] == [j["expect"] for j in jobs]


def ring_for(signed: dict[str, Any]) -> KeyRing:
    return KeyRing().enrol(signed["publicKeyMultibase"], controller="js-agent",
                           not_before=datetime(2020, 1, 1, tzinfo=UTC))


@pytest.mark.parametrize("suite", registered_cryptosuites())
def test_what_is_signed_there_verifies_here_and_tampered_is_refused(suite: str) -> None:
    document = {"type": "Note", "text": "from node", "n": 7}
    result = run_js({"sign": [{"label": "plain", "suite": suite, "document": document,
                               "lowS": True}]})
    [signed] = result["sign"]
    secured = signed["document"]
    assert secured["@context"] == [DI_V2]  # the JS signer always adds it
    assert secured["proof"]["@context"] == [DI_V2]
    [proof] = verify(secured, ring_for(signed), purpose="assertionMethod")
    assert (proof.controller, proof.verification_method) == ("js-agent",
                                                             signed["verificationMethod"])
    for twin, code in ((tampered(secured, "n", 8), "bad-signature"),
                       (tampered(secured, "@context", ["https://example.org/v1"]),
                        "context-not-allowed")):
        with pytest.raises(ProofError) as info:
            verify(twin, ring_for(signed), purpose="assertionMethod")
        assert info.value.code == code


def test_a_high_s_signature_made_there_is_refused_here_and_its_low_s_twin_verifies() -> None:
    result = run_js({"sign": [{"label": "high-s", "suite": "ecdsa-jcs-2019",
                               "document": {"type": "Note"}, "wantHighS": True}]})
    [signed] = result["sign"]
    assert signed["highS"] is True
    secured = signed["document"]
    with pytest.raises(ProofError) as info:
        verify(secured, ring_for(signed), purpose="assertionMethod")
    assert info.value.code == "weak-signature"
    raw = b58decode(secured["proof"]["proofValue"][1:])
    low = raw[:32] + (_N - int.from_bytes(raw[32:], "big")).to_bytes(32, "big")
    twin = copy.deepcopy(secured)
    twin["proof"]["proofValue"] = "z" + b58encode(low)
    verify(twin, ring_for(signed), purpose="assertionMethod")
    back = run_js({"verify": [{"label": "low-s twin", "document": twin,
                               "purpose": "assertionMethod", "expect": True}]})
    assert back["failures"] == []


def test_the_script_exits_non_zero_when_a_direction_breaks() -> None:
    [job] = [j for j in signed_here("eddsa-jcs-2022") if j["label"].endswith("/document")]
    result = run_js({"verify": [{**job, "expect": False}]})  # a wrong expectation
    assert result["returncode"] == 1
    assert result["failures"]
