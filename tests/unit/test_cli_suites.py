"""Issue 32's done-when, through the command line: a ``keys new --suite
ecdsa-jcs-2019`` sender key signs a receipt under a user's contract
(``tests/user_contract/mymodule.py``), a P-256 policy-service key grants it, and
``handoffs gate`` admits it; its high-S twin is refused (``weak-signature``).
"""

from __future__ import annotations

import json
import shutil
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from handoffs.cli import main
from handoffs.integrity._base58 import b58decode, b58encode

HERE = Path(__file__).resolve().parents[1]
_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copy(HERE / "user_contract" / "mymodule.py", tmp_path / "mymodule.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("HANDOFFS_CONTRACTS", "mymodule:MY_CONTRACT")
    sys.modules.pop("mymodule", None)
    return tmp_path


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _unsigned(now: datetime) -> dict[str, object]:
    from mymodule import GOVERNANCE, MY_CONTRACT

    from handoffs.contracts import Receipt

    governance = GOVERNANCE.stamp(case_id="pump-7", evidence_refs=["sensor://pump-7/p"],
                                  now=now)
    content = {"proposed_action": "CONTINUE", "uncertainty": "RESOLVED",
               "decision_state": {"failure_probability": {"lo": 0.001, "hi": 0.002},
                                  "consequence": 10.0, "calibrated": True}}
    return Receipt.build(MY_CONTRACT, content, governance).to_json()


def test_a_p256_cli_key_signs_a_receipt_the_gate_admits_and_its_high_s_twin_is_refused(
        user_dir: Path) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    since = (now - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    made = run("keys", "new", "--suite", "ecdsa-jcs-2019", "--controller",
               "monitoring-agent", "--out", "agent", "--trust", "trust.json",
               "--not-before", since)
    assert made.exit_code == 0, made.output
    entry = json.loads((user_dir / "agent.key.json").read_text())
    assert entry["public_key_multibase"].startswith("zDn")  # a P-256 Multikey
    made = run("keys", "new", "--suite", "ecdsa-jcs-2019", "--controller", "policy-service",
               "--roles", "policy-service", "--purposes", "capabilityDelegation",
               "--out", "service", "--trust", "trust.json", "--not-before", since)
    assert made.exit_code == 0, made.output

    (user_dir / "receipt.json").write_text(json.dumps(_unsigned(now)))
    granted = run("grant", "--key", "service.pem", "--issuer", "policy-service",
                  "--subject", "monitoring-agent", "--audience", "maintenance-planner",
                  "--contract", "pump-maintenance/1.0.0", "--case", "pump-7",
                  "--policy-version", "PM-1", "--valid-until", "2027-01-01T00:00:00Z")
    assert granted.exit_code == 0, granted.output
    (user_dir / "grant.json").write_text(granted.stdout)
    assert json.loads(granted.stdout)["proof"]["cryptosuite"] == "ecdsa-jcs-2019"
    signed = run("sign", "receipt.json", "--key", "agent.pem", "--grant", "grant.json")
    assert signed.exit_code == 0, signed.output
    document = json.loads(signed.stdout)
    assert document["proof"]["cryptosuite"] == "ecdsa-jcs-2019"
    (user_dir / "signed.json").write_text(signed.stdout)

    admitted = run("gate", "signed.json", "--trust", "trust.json", "--as",
                   "maintenance-planner")
    assert admitted.exit_code == 0, admitted.output
    verified = run("verify", "signed.json", "--trust", "trust.json", "--as",
                   "maintenance-planner")
    assert verified.exit_code == 0, verified.output

    raw = b58decode(document["proof"]["proofValue"][1:])
    high = raw[:32] + (_N - int.from_bytes(raw[32:], "big")).to_bytes(32, "big")
    document["proof"]["proofValue"] = "z" + b58encode(high)
    (user_dir / "twin.json").write_text(json.dumps(document))
    refused = run("gate", "twin.json", "--trust", "trust.json", "--as",
                  "maintenance-planner")
    assert refused.exit_code == 1
    assert "weak-signature" in refused.output
    refused = run("verify", "twin.json", "--trust", "trust.json", "--as",
                  "maintenance-planner")
    assert refused.exit_code == 1
    assert "weak-signature" in refused.output


KMS_MODULE = """
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from handoffs.integrity import CallableSigner, P256SigningKey

_KEY = P256SigningKey.generate()  # stands for a key held in a KMS


def signer():
    return CallableSigner(public_key_multibase=_KEY.public_key_multibase, der=True,
                          sign_bytes=lambda data: _KEY.private_key.sign(
                              data, ec.ECDSA(hashes.SHA256())))
"""


def test_signer_names_a_kms_signer_by_import_string(user_dir: Path) -> None:
    (user_dir / "kms.py").write_text(KMS_MODULE)
    sys.modules.pop("kms", None)
    granted = run("grant", "--signer", "kms:signer", "--issuer", "p", "--subject", "s",
                  "--audience", "a", "--contract", "pump-maintenance/1.0.0", "--case", "c",
                  "--policy-version", "PM-1", "--valid-until", "2027-01-01T00:00:00Z")
    assert granted.exit_code == 0, granted.output
    proof = json.loads(granted.stdout)["proof"]
    import kms

    assert proof["cryptosuite"] == "ecdsa-jcs-2019"
    assert proof["verificationMethod"] == kms.signer().verification_method
    for args, where in (([], "exactly one of --key"), (["--signer", "kms:nothing"], "--signer"),
                        (["--signer", "kms:_KEY.sign"], "--signer")):
        refused = run("grant", *args, "--issuer", "p", "--subject", "s", "--audience", "a",
                      "--contract", "pump-maintenance/1.0.0", "--case", "c",
                      "--policy-version", "PM-1", "--valid-until", "2027-01-01T00:00:00Z")
        assert refused.exit_code == 2, refused.output
        assert where in refused.output
