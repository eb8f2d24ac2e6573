"""Your contract, not ours: a contract module in a temporary directory, outside the
package, works through every command with only ``HANDOFFS_CONTRACTS`` set; and the
other ways to point the command line at contracts (flag, pyproject, entry points).

Every command runs as the installed ``handoffs`` script in a fresh process, from a
directory that holds only the user's files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]
MODULE = HERE / "user_contract" / "mymodule.py"
HANDOFFS = str(Path(sys.executable).with_name("handoffs"))
T = "2026-06-01T09:00:00Z"
LATER = "2026-06-01T09:05:00Z"

EXPERIMENT = """\
[experiment]
name = "pump-maintenance"
contract = "pump-maintenance/1.0.0"   # looked up among the configured contracts
subject = "receipt"

[cases]
hypothesis = 24

[governance]
object = "mymodule:GOVERNANCE"

[[strategy]]
name = "receipt"
encoder = "mymodule:encoder"
receiver = "mymodule:planner"
gated = true

[tolerances]
gate_perturbations = ["none"]
claims_verified_upstream = "the test's sender is the test itself"
"""

UNSIGNED = {
    "contract": "pump-maintenance/1.0.0",
    "id": "urn:uuid:8f0c5a52-3f4e-4f7e-9c1e-2b7d2a1c0e11",
    "case_id": "pump-7",
    "sender": "monitoring-agent",
    "receiver": "maintenance-planner",
    "authority": "ADVISE",
    "policy_version": "PM-1",
    "valid_until": "2027-01-01T00:00:00Z",
    "evidence_refs": ["telemetry://pumps/7/2026-06-01"],
    "proposed_action": "STOP",
    "decision_state": {"failure_probability": {"lo": 0.05, "hi": 0.08}, "consequence": 60,
                       "calibrated": True},
    "uncertainty": "RESOLVED",
    "counterfactual_trigger": "Recompute when the failure estimate or its cost changes.",
}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("HANDOFFS_CONTRACTS", "PYTHONPATH")}
    env.update(extra)
    return env


def handoffs(cwd: Path, *args: str, env: dict[str, str] | None = None,
             status: int = 0) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([HANDOFFS, *args], cwd=cwd, env=env or _env(), text=True,
                          capture_output=True, timeout=300, check=False)
    assert done.returncode == status, (args, done.stdout[-2000:], done.stderr[-2000:])
    return done


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    shutil.copy(MODULE, tmp_path / "mymodule.py")
    return tmp_path


def test_a_user_contract_works_through_every_command(user_dir: Path) -> None:
    env = _env(HANDOFFS_CONTRACTS="mymodule:MY_CONTRACT")
    assert sorted(p.name for p in user_dir.iterdir()) == ["mymodule.py"]

    def run(*args: str, status: int = 0) -> subprocess.CompletedProcess[str]:
        return handoffs(user_dir, *args, env=env, status=status)

    listed = run("contracts").stdout
    assert listed == "pump-maintenance/1.0.0  mymodule:MY_CONTRACT  (HANDOFFS_CONTRACTS)\n"
    # schema export writes the user's schema, and only it; --check reads it back
    assert run("schema", "export", "schemas").stdout == (
        "wrote schemas/pump-maintenance/1.0.0.json\n"
        "wrote schemas/pump-maintenance/1.0.0.policy.json\n")
    assert sorted(str(p.relative_to(user_dir)) for p in (user_dir / "schemas").rglob("*.json")
                  ) == ["schemas/pump-maintenance/1.0.0.json",
                        "schemas/pump-maintenance/1.0.0.policy.json"]
    written = json.loads((user_dir / "schemas/pump-maintenance/1.0.0.json").read_text())
    assert written["$id"] == "urn:handoffs:schema:pump-maintenance:1.0.0"
    assert "ok: 2 file(s)" in run("schema", "export", "schemas", "--check").stdout
    assert "no differences" in run("schema", "diff", "pump-maintenance/1.0.0",
                                   "schemas/pump-maintenance/1.0.0.json").stdout
    for controller, roles, purposes in (
        ("policy-service", "policy-service", "capabilityDelegation"),
        ("monitoring-agent", "proposer", "assertionMethod"),
        ("maintenance-planner", "maintenance-planner", "assertionMethod"),
    ):
        run("keys", "new", "--controller", controller, "--roles", roles, "--purposes",
            purposes, "--trust", "trust.json", "--not-before", "2026-01-01T00:00:00Z")
    grant = run("grant", "--key", "policy-service.pem", "--issuer", "policy-service",
                "--subject", "monitoring-agent", "--audience", "maintenance-planner",
                "--contract", "pump-maintenance/1.0.0", "--case", "pump-7",
                "--policy-version", "PM-1", "--valid-until", "2027-01-01T00:00:00Z",
                "--created", T).stdout
    (user_dir / "grant.json").write_text(grant)
    (user_dir / "unsigned.json").write_text(json.dumps(UNSIGNED))
    signed = run("sign", "unsigned.json", "--key", "monitoring-agent.pem", "--grant",
                 "grant.json", "--created", T).stdout
    (user_dir / "receipt.json").write_text(signed)
    assert "valid: urn:uuid:8f0c5a52" in run("verify", "receipt.json", "--trust", "trust.json",
                                             "--as", "maintenance-planner", "--now",
                                             LATER).stdout
    decision = json.loads(run("gate", "receipt.json", "--trust", "trust.json", "--as",
                              "maintenance-planner", "--now", LATER, "--log",
                              "decisions.sqlite").stdout)
    # p·h is in [3, 4.8] > 2: the planner's own policy stops the pump
    assert (decision["admitted"], decision["action"], decision["contract"]) == (
        True, "STOP", "pump-maintenance/1.0.0")
    assert json.loads(run("log", "summary", "decisions.sqlite").stdout)["decisions"] == 1
    # the experiment beside the module imports it without PYTHONPATH
    (user_dir / "experiment.toml").write_text(EXPERIMENT)
    lab = run("lab", "run", "experiment.toml", "--out", "report", "--no-progress").stdout
    assert "Release gate: PASS" in lab
    assert "PASS" in run("lab", "gate", "report/report.json", "--budget",
                         "regret_delta=0.5", "--artefact", "report/release.json").stdout
    assert (user_dir / "report" / "release.json").is_file()
    # without the variable, the same commands know only the shipped example
    plain = handoffs(user_dir, "verify", "receipt.json", "--trust", "trust.json", "--as",
                     "maintenance-planner", "--now", LATER, status=1)
    assert "unknown contract 'pump-maintenance/1.0.0'" in plain.stderr
    assert "HANDOFFS_CONTRACTS" in plain.stderr


def test_the_flag_overrides_the_environment_and_the_project_file(user_dir: Path) -> None:
    (user_dir / "pyproject.toml").write_text(
        '[tool.handoffs]\ncontracts = ["mymodule:MY_CONTRACT"]\n')
    assert handoffs(user_dir, "contracts").stdout == (
        "pump-maintenance/1.0.0  mymodule:MY_CONTRACT  "
        "(pyproject.toml [tool.handoffs] contracts)\n")
    env = _env(HANDOFFS_CONTRACTS="handoffs.examples.payment:PAYMENT_RELEASE")
    assert handoffs(user_dir, "contracts", env=env).stdout == (
        "payment-release/1.0.0  handoffs.examples.payment:PAYMENT_RELEASE  "
        "(HANDOFFS_CONTRACTS)\n")
    both = handoffs(user_dir, "--contracts", "mymodule:MY_CONTRACT", "--contracts",
                    "mymodule:REGISTRY", "contracts", "--format", "json", env=env).stdout
    assert json.loads(both) == {"examples": False, "contracts": [
        {"contract": "pump-maintenance/1.0.0", "source": "mymodule:MY_CONTRACT",
         "origin": "--contracts"},
        {"contract": "pump-maintenance/1.0.0", "source": "mymodule:REGISTRY",
         "origin": "--contracts"},
        {"contract": "payment-release/1.0.0", "source": "mymodule:REGISTRY",
         "origin": "--contracts"},
    ]}


def test_with_nothing_configured_the_shipped_example_is_used_and_said(tmp_path: Path) -> None:
    done = handoffs(tmp_path, "contracts")
    assert done.stdout == ("payment-release/1.0.0  handoffs.examples.payment:PAYMENT_RELEASE"
                           "  (shipped example)\n")
    assert "no contracts configured" in done.stderr


def test_an_installed_package_offers_its_contracts_by_entry_point(user_dir: Path) -> None:
    site = user_dir / "site"
    dist = site / "pumpco-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: pumpco\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[handoffs.contracts]\npumps = mymodule:MY_CONTRACT\n")
    shutil.move(str(user_dir / "mymodule.py"), site / "mymodule.py")
    done = handoffs(user_dir, "contracts", env=_env(PYTHONPATH=str(site)))
    assert done.stdout == ("pump-maintenance/1.0.0  mymodule:MY_CONTRACT  "
                           "(entry point pumps (pumpco))\n")


@pytest.mark.parametrize(("spec", "message"), [
    ("nomodule:X", "contract source 'nomodule:X' (HANDOFFS_CONTRACTS): cannot import "
                   "'nomodule': ModuleNotFoundError: No module named 'nomodule'"),
    ("mymodule:NOPE", "contract source 'mymodule:NOPE' (HANDOFFS_CONTRACTS): mymodule has "
                      "no attribute 'NOPE'"),
    ("mymodule", "contract source 'mymodule' (HANDOFFS_CONTRACTS): expected MODULE:ATTR"),
    ("mymodule:GOVERNANCE", "contract source 'mymodule:GOVERNANCE' (HANDOFFS_CONTRACTS): "
                            "GOVERNANCE is a GovernanceService, not a Contract"),
    ("mymodule:MY_CONTRACT,mymodule:OTHER_1_0_0",
     "pump-maintenance/1.0.0 is defined by 'mymodule:MY_CONTRACT' (HANDOFFS_CONTRACTS) and, "
     "differently, by 'mymodule:OTHER_1_0_0' (HANDOFFS_CONTRACTS)"),
])
def test_a_bad_source_is_one_line_naming_it(user_dir: Path, spec: str, message: str) -> None:
    done = handoffs(user_dir, "contracts", env=_env(HANDOFFS_CONTRACTS=spec),
                    status=1 if "defined by" in message else 2)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert message in lines[0]
    assert lines[0].startswith("error: ")
