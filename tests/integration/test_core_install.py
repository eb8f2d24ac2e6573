"""The gate's runtime install: the core faces and the gate user's commands work without
the extras' libraries (Hypothesis, rich, matplotlib, jinja2), which a fresh
interpreter here refuses to import; the lab and ``handoffs.testing`` say which extra
to install.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from handoffs._json import dumps
from handoffs.contracts import Receipt
from handoffs.examples.payment import (
    GOVERNANCE,
    PAYMENT_RELEASE,
    decision_contract_encoder,
    synthetic_cases,
)

EXTRAS_ONLY = ("hypothesis", "rich", "matplotlib", "jinja2")

# A meta-path finder placed first: importing any of the extras' libraries fails as if
# it were not installed (find_spec raising ModuleNotFoundError, as the import system
# does for a missing module).
BLOCKER = f"""\
import sys

class Blocker:
    blocked = {EXTRAS_ONLY!r}

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.blocked:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked)", name=name)
        return None

sys.meta_path.insert(0, Blocker())
"""

T = "2026-06-01T00:00:00Z"
LATER = "2026-06-01T00:30:00Z"

WORKFLOW = BLOCKER + """\
import json
from click.testing import CliRunner
import handoffs, handoffs.contracts, handoffs.receivers
from handoffs.cli import main

results = {}

def run(name, *args):
    result = CliRunner().invoke(main, list(args), prog_name="handoffs")
    results[name] = [result.exit_code, result.stdout, result.stderr]
    return result

run("help", "--help")
run("gate help", "gate", "--help")
run("contracts", "contracts")
run("schema check", "schema", "export", "--check", SCHEMAS)
for controller, roles, purposes, out in (
        ("evidence-specialist", "proposer", "assertionMethod", "sender"),
        ("policy-service", "policy-service", "capabilityDelegation", "policy")):
    run("keys " + out, "keys", "new", "--controller", controller, "--roles", roles,
        "--purposes", purposes, "--out", out, "--trust", "trust.json",
        "--not-before", "2026-01-01T00:00:00Z")
receipt = json.load(open("receipt.json"))
grant = run("grant", "grant", "--key", "policy.pem", "--issuer", "policy-service",
            "--subject", receipt["sender"], "--audience", receipt["receiver"],
            "--contract", receipt["contract"], "--case", receipt["case_id"],
            "--policy-version", receipt["policy_version"],
            "--valid-until", receipt["valid_until"], "--created", T)
open("grant.json", "w").write(grant.stdout)
signed = run("sign", "sign", "receipt.json", "--key", "sender.pem", "--grant", "grant.json",
             "--created", T)
open("signed.json", "w").write(signed.stdout)
run("verify", "verify", "signed.json", "--trust", "trust.json", "--as", receipt["receiver"],
    "--now", LATER)
run("gate", "gate", "signed.json", "--trust", "trust.json", "--as", receipt["receiver"],
    "--role", receipt["receiver"], "--policy", receipt["policy_version"], "--now", LATER,
    "--log", "decisions.sqlite")
run("log", "log", "summary", "decisions.sqlite")
run("lab", "lab", "run", "--out", "report")
try:
    import handoffs.testing
except handoffs.MissingExtra as exc:
    results["testing"] = [exc.code, exc.extra, str(exc)]
results["loaded"] = sorted(m for m in sys.modules if m.split(".")[0] in Blocker.blocked)
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def workflow(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[object]]]:
    """The gate user's commands, then the lab's and the test helpers', in one fresh
    interpreter that cannot import the extras' libraries.
    """
    tmp_path = tmp_path_factory.mktemp("core")
    case = next(iter(synthetic_cases()))
    receipt = Receipt.build(PAYMENT_RELEASE, decision_contract_encoder().encode(case),
                            GOVERNANCE.stamp(case_id=case.case_id,
                                             evidence_refs=case.evidence_refs))
    (tmp_path / "receipt.json").write_text(dumps(receipt.to_json()), encoding="utf-8")
    schemas = Path(__file__).resolve().parents[2] / "schemas"
    code = (f"SCHEMAS = {str(schemas)!r}\nT = {T!r}\nLATER = {LATER!r}\n") + WORKFLOW
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    results: dict[str, list[object]] = json.loads(done.stdout)
    return tmp_path, results


def test_the_gate_users_commands_run_without_the_extras(
        workflow: tuple[Path, dict[str, list[object]]]) -> None:
    _, results = workflow
    for name in ("help", "gate help", "contracts", "schema check", "keys sender",
                 "keys policy", "grant", "sign", "verify", "log"):
        assert results[name][0] == 0, (name, results[name])
    assert results["gate"][0] == 3, results["gate"]  # admitted, escalated: not to act on
    assert "  lab " in str(results["help"][1])
    assert str(results["verify"][1]).startswith("valid: ")
    decision = json.loads(str(results["gate"][1]))
    # admitted (escalated: no evidence resolver is configured, as a bare install has none)
    assert (decision["admitted"], decision["verdict"]) == (True, "ESCALATE")
    assert [r["code"] for r in decision["reasons"]] == ["evidence-unresolved"]
    assert json.loads(str(results["log"][1]))["decisions"] == 1
    # nothing of the extras was imported: the blocker saw no attempt succeed
    assert results["loaded"] == []


def test_the_lab_and_the_test_helpers_name_their_extra(
        workflow: tuple[Path, dict[str, list[object]]]) -> None:
    tmp_path, results = workflow
    status, _, stderr = results["lab"]
    assert status == 2
    assert stderr == ("error: handoffs lab needs the optional dependency 'hypothesis'; "
                      "install it with pip install 'handoffs[lab]' [missing-extra]\n")
    assert not (tmp_path / "report").exists()
    code, extra, message = results["testing"]
    assert (code, extra) == ("missing-extra", "testing")
    assert "pip install 'handoffs[testing]'" in str(message)


def test_the_blocker_blocks() -> None:
    done = subprocess.run([sys.executable, "-c", BLOCKER + "import rich\n"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert "No module named 'rich' (blocked)" in done.stderr
