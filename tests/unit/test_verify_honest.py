"""``Receipt.verify`` and ``handoffs verify`` are honest (issue 32, item 5): they check
the policy pin a gate checks (``policy-mismatch``, ``policy-fingerprint-missing``) and
say "policy not checked" when nothing pins it; ``handoffs verify`` reads at most its
limit + 1 byte, so 300 MB of zeros on stdin end in a typed refusal in bounded memory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from handoffs.contracts import ProofError, Receipt, issue_grant
from worlds.pump import NOW, PUMP, REFS, TRUST, content, sender

SERVICE_KEY = sender().grants.key  # type: ignore[union-attr]


class _Grants:
    """A grant source pinning what the test says (a stale or missing fingerprint)."""

    def __init__(self, **pin: Any) -> None:
        self.pin = pin

    def grant(self, governance: Any, *, contract: Any, now: Any) -> dict[str, Any]:
        return issue_grant(SERVICE_KEY, issuer="policy-service", subject=governance.sender,
                           audience=governance.receiver, case_id=governance.case_id,
                           policy_version=governance.policy_version,
                           authority=[governance.authority],
                           valid_until=governance.valid_until, created=now, **self.pin)


def _verify(receipt: Receipt[Any, Any], **options: Any) -> Any:
    return Receipt.verify(receipt.to_json(), TRUST, now=NOW + timedelta(minutes=1),
                          registry=PUMP, audience="plant-controller", **options)


def test_a_receipt_granted_under_this_policy_is_checked_and_says_so() -> None:
    verified = _verify(sender().receipt(content(), case_id="pump-7", evidence_refs=REFS))
    assert verified.policy_checked is True


@pytest.mark.parametrize(("pin", "code", "path"), [
    ({"contract": PUMP.id, "policy_fingerprint": "sha256:" + "0" * 64}, "policy-mismatch",
     "$.grant.policy_fingerprint"),
    ({"contract": PUMP.id}, "policy-fingerprint-missing", "$.grant"),
])
def test_a_grant_pinning_another_policy_or_none_is_refused(
        pin: dict[str, Any], code: str, path: str) -> None:
    receipt = sender(grants=_Grants(**pin)).receipt(content(), case_id="pump-7",
                                                    evidence_refs=REFS)
    with pytest.raises(ProofError) as info:
        _verify(receipt)
    assert (info.value.code, info.value.json_path) == (code, path)


def test_without_a_grant_the_policy_is_not_checked() -> None:
    receipt = sender(grants=None).receipt(content(), case_id="pump-7", evidence_refs=REFS)
    assert _verify(receipt, require_grant=False).policy_checked is False


# ------------------------------------------------------------------ the CLI


def _cli(tmp_path: Path, receipt: Receipt[Any, Any]) -> subprocess.CompletedProcess[str]:
    (tmp_path / "trust.json").write_text(json.dumps(TRUST.to_json()))
    (tmp_path / "r.json").write_text(json.dumps(receipt.to_json()))
    (tmp_path / "pump.py").write_text(
        "import sys\nsys.path[:0] = %r\nfrom worlds.pump import PUMP\n" % [
            str(Path(__file__).parent), str(Path(__file__).parents[1])])
    env = {**os.environ, "HANDOFFS_CONTRACTS": "pump:PUMP",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    return subprocess.run(
        [sys.executable, "-m", "handoffs", "verify", "r.json", "--trust", "trust.json",
         "--as", "plant-controller", "--now", "2026-06-01T12:01:00Z"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_handoffs_verify_refuses_a_stale_policy_pin(tmp_path: Path) -> None:
    stale = sender(grants=_Grants(contract=PUMP.id, policy_fingerprint="sha256:" + "0" * 64))
    done = _cli(tmp_path, stale.receipt(content(), case_id="pump-7", evidence_refs=REFS))
    assert done.returncode == 1, done.stderr
    assert "[policy-mismatch]" in done.stderr
    done = _cli(tmp_path, sender().receipt(content(), case_id="pump-7", evidence_refs=REFS))
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("; policy pinned by the grant matches\n")


_MEASURE = """
import resource, subprocess, sys
zeros = subprocess.Popen(["head", "-c", "300000000", "/dev/zero"], stdout=subprocess.PIPE)
done = subprocess.run([sys.executable, "-m", "handoffs", "verify", "-", "--trust",
                       sys.argv[1], "--any-audience"], stdin=zeros.stdout,
                      capture_output=True, text=True)
zeros.stdout.close()
zeros.kill()
zeros.wait()
# ru_maxrss of the largest waited-for child, in KiB on Linux (head's is tiny).
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(done.stderr)
"""


def test_verify_reads_at_most_its_limit_from_an_endless_stdin(tmp_path: Path) -> None:
    (tmp_path / "trust.json").write_text(json.dumps(TRUST.to_json()))
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(tmp_path / "trust.json")],
                          capture_output=True, text=True, timeout=300, check=True)
    first, message = done.stdout.split("\n", 1)
    status, max_rss_kib = map(int, first.split())
    assert status == 1, message
    assert "[too-large]" in message
    assert max_rss_kib < 128 * 1024, f"{max_rss_kib} KiB"


@pytest.mark.parametrize("document", ["{}", b"{}", ["{}"], 3])
def test_verify_takes_a_parsed_object_only(document: Any) -> None:
    # Receipt.verify verifies a parsed receipt: text or bytes, even of a JSON object, are
    # not parsed here (the gate and Receipt.from_json parse), they are refused as they are.
    from handoffs.errors import MalformedJSON

    with pytest.raises(MalformedJSON) as caught:
        Receipt.verify(document, TRUST, now=NOW, registry=PUMP, audience="plant-controller")
    assert caught.value.code == "not-an-object"
    assert "is a JSON object, got" in caught.value.message
