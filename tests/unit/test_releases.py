"""Released contract versions are immutable, and a file-based diff sees policy changes.

A user's contract (``tests/user_contract/mymodule.py``) is exported, then its policy
threshold is edited in place under the same version, as the issue's new user did:
``schema export --check`` must fail, name the change and advise a new version (never
an overwrite), ``schema export`` must refuse to write, and ``schema diff`` of the two
exports must report the rule change and exit non-zero.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from handoffs.cli import main

HERE = Path(__file__).resolve().parents[1]
MODULE = HERE / "user_contract" / "mymodule.py"
THRESHOLD = 'Field("failure_probability") * Field("consequence") > 2'


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copy(MODULE, tmp_path / "mymodule.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("HANDOFFS_CONTRACTS", "mymodule:MY_CONTRACT")
    return tmp_path


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _edit_threshold(user_dir: Path, new: str) -> None:
    """Edit the module's threshold in place and forget the imported module."""
    import sys

    path = user_dir / "mymodule.py"
    text = path.read_text(encoding="utf-8")
    assert THRESHOLD in text
    path.write_text(text.replace(THRESHOLD, new), encoding="utf-8")
    sys.modules.pop("mymodule", None)


def test_export_writes_the_policy_document_beside_the_schema(user_dir: Path) -> None:
    sys_modules_clean()
    written = run("schema", "export", "schemas")
    assert written.exit_code == 0, written.output
    assert written.stdout == ("wrote schemas/pump-maintenance/1.0.0.json\n"
                              "wrote schemas/pump-maintenance/1.0.0.policy.json\n")
    document = json.loads((user_dir / "schemas/pump-maintenance/1.0.0.policy.json")
                          .read_text("utf-8"))
    [rule] = [r for r in document["rules"] if r["rule"] == "expected-loss-high"]
    assert rule["guard"] == {"compare": ">", "left": {
        "arith": "*", "left": {"field": "failure_probability"},
        "right": {"field": "consequence"}}, "right": {"const": 2}}
    assert document["fingerprint"].startswith("sha256:")
    check = run("schema", "export", "schemas", "--check")
    assert (check.exit_code, check.stdout) == (0, "ok: 2 file(s) up to date in schemas\n")


def test_an_in_place_threshold_edit_fails_the_check_without_advising_an_overwrite(
        user_dir: Path) -> None:
    sys_modules_clean()
    assert run("schema", "export", "schemas").exit_code == 0
    released = {p: p.read_text("utf-8") for p in (user_dir / "schemas").rglob("*.json")}
    shutil.copytree(user_dir / "schemas", user_dir / "released")
    _edit_threshold(user_dir, THRESHOLD.replace("> 2", "> 3"))

    check = run("schema", "export", "schemas", "--check")
    assert check.exit_code == 1
    lines = check.stderr.splitlines()
    assert lines[0].startswith(
        "changed: pump-maintenance/1.0.0 is released (schemas/pump-maintenance/1.0.0.policy.json)"
        " and its definition changed: POLICY_RULE_CHANGED @ $.policy.rules.expected-loss-high.")
    assert "publish the change as pump-maintenance/2.0.0 (a major bump)" in lines[0]
    assert lines[-1].endswith("[released-version-changed]")
    assert "handoffs schema export schemas'" not in check.stderr  # never advises overwriting

    # export refuses too, and writes nothing over the released version
    export = run("schema", "export", "schemas")
    assert export.exit_code == 1
    assert "released-version-changed" in export.stderr
    assert {p: p.read_text("utf-8") for p in (user_dir / "schemas").rglob("*.json")} == released

    # the new definition exported elsewhere: a file-based diff reports the rule change
    assert run("schema", "export", "edited").exit_code == 0
    diff = run("schema", "diff", "released/pump-maintenance/1.0.0.json",
               "edited/pump-maintenance/1.0.0.json")
    assert diff.exit_code == 1
    assert diff.stdout.splitlines() == [
        "pump-maintenance/1.0.0 → pump-maintenance/1.0.0: breaking, required bump major, "
        "1 finding",
        "  POLICY_RULE_CHANGED @ $.policy.rules.expected-loss-high [DECISION, BOTH, BREAKING]: "
        "rule 'expected-loss-high' changed from (when failure_probability * consequence > 2 "
        "→ STOP) to (when failure_probability * consequence > 3 → STOP)",
    ]
    # the policy documents themselves may be given too
    by_policy = run("schema", "diff", "released/pump-maintenance/1.0.0.policy.json",
                    "edited/pump-maintenance/1.0.0.policy.json", "--format", "json")
    assert by_policy.exit_code == 1
    assert [f["code"] for f in json.loads(by_policy.stdout)["findings"]] == [
        "POLICY_RULE_CHANGED"]


def test_a_schema_alone_gives_wire_findings_and_says_so(user_dir: Path) -> None:
    sys_modules_clean()
    assert run("schema", "export", "schemas").exit_code == 0
    lone = user_dir / "lone.json"
    shutil.copy(user_dir / "schemas/pump-maintenance/1.0.0.json", lone)
    result = run("schema", "diff", "schemas/pump-maintenance/1.0.0.json", lone)
    assert result.exit_code == 0
    assert result.stderr == ("note: no policy document beside lone.json: wire findings only, "
                             "decisions not compared\n").replace("lone.json", str(lone))


def test_a_new_version_is_exported_beside_the_released_one(user_dir: Path) -> None:
    sys_modules_clean()
    assert run("schema", "export", "schemas").exit_code == 0
    path = user_dir / "mymodule.py"
    text = path.read_text(encoding="utf-8").replace(THRESHOLD, THRESHOLD.replace("> 2", "> 3"))
    assert '"pump-maintenance/1.0.0"' not in text
    # A patch bump is too small for a rule change: export says which bump it needs.
    path.write_text(text.replace('version="1.0.0"', 'version="1.0.1"'), encoding="utf-8")
    sys_modules_clean()
    small = run("schema", "export", "schemas", "--check")
    assert small.exit_code == 1
    assert small.stderr.splitlines()[0] == (
        "bump-too-small: pump-maintenance/1.0.1 is not exported: its changes since the "
        "released 1.0.0 need a major bump (first: POLICY_RULE_CHANGED @ "
        "$.policy.rules.expected-loss-high); publish them as pump-maintenance/2.0.0")
    assert run("schema", "export", "schemas").exit_code == 1
    assert not (user_dir / "schemas/pump-maintenance/1.0.1.json").exists()
    path.write_text(text.replace('version="1.0.0"', 'version="2.0.0"'), encoding="utf-8")
    sys_modules_clean()
    result = run("schema", "export", "schemas")
    assert result.exit_code == 0, result.output
    assert result.stdout == ("wrote schemas/pump-maintenance/2.0.0.json\n"
                             "wrote schemas/pump-maintenance/2.0.0.policy.json\n")
    assert (user_dir / "schemas/pump-maintenance/1.0.0.policy.json").is_file()


def sys_modules_clean() -> None:
    import sys

    sys.modules.pop("mymodule", None)


# ------------------------------------------------- receiver fingerprints and lab gate

EXPERIMENT = """\
[experiment]
name = "pump-maintenance"
contract = "pump-maintenance/1.0.0"
subject = "receipt"

[cases]
hypothesis = 12
draws = 200  # worlds.TEST_DRAWS

[governance]
object = "mymodule:GOVERNANCE"

[[strategy]]
name = "receipt"
encoder = "mymodule:encoder"
receiver = "mymodule:function_planner"
gated = true

[tolerances]
gate_perturbations = ["none"]
controls_must_fail = false
claims_verified_upstream = "the test's sender is the test itself"
"""

FUNCTION_PLANNER = '''

def function_planner():
    """A code receiver: a user function that recomputes the policy."""
    from handoffs.receivers import FunctionReceiver

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeConfigurationWarning)
        gate = Gate(identity="maintenance-planner", trust=UnsafeNoProofs(),
                    registry=MY_CONTRACT, replay=None)
    return FunctionReceiver(plan, gate=gate, name="function-planner", prompt="recompute",
                            model_route="code/local", deterministic=True)


def plan(admitted):
    return admitted.contract.decide(admitted.receipt.decision_state)
'''


def lab(*args: str | Path) -> Result:
    from handoffs.cli._lab import lab as group

    return CliRunner().invoke(group, [str(a) for a in args], catch_exceptions=False)


def test_a_stale_receiver_fails_lab_gate_unless_allowed(user_dir: Path) -> None:
    sys_modules_clean()
    module = user_dir / "mymodule.py"
    module.write_text(module.read_text("utf-8") + FUNCTION_PLANNER, encoding="utf-8")
    (user_dir / "exp.toml").write_text(EXPERIMENT, encoding="utf-8")
    ran = lab("run", "exp.toml", "--out", "out", "--no-progress", "--no-cache")
    assert ran.exit_code == 0, ran.output
    report = json.loads((user_dir / "out" / "report.json").read_text("utf-8"))
    [row] = report["experiment"]["strategies"]
    recorded = row["receiver_fingerprint"]
    assert (recorded["kind"], recorded["callable"]) == ("code", "mymodule:plan")
    assert recorded["source"].startswith("sha256:")

    fresh = lab("gate", "out/report.json", "--experiment", "exp.toml",
                "--artefact", "out/release.json")
    assert fresh.exit_code == 0, fresh.output
    artefact = json.loads((user_dir / "out" / "release.json").read_text("utf-8"))
    assert artefact["receivers"] == {"receipt": recorded}
    assert artefact["policy_fingerprint"] == report["experiment"]["policy_fingerprint"]

    # The receiver's code changes after the run: the release is stale.
    sys_modules_clean()
    module.write_text(module.read_text("utf-8").replace(
        "    return admitted.contract.decide(admitted.receipt.decision_state)",
        "    decided = admitted.contract.decide(admitted.receipt.decision_state)\n"
        "    return decided"), encoding="utf-8")
    stale = lab("gate", "out/report.json", "--experiment", "exp.toml")
    assert stale.exit_code == 1
    assert "FAIL stale release: the receiver of receipt changed since the run (source:" in (
        " ".join(stale.stdout.split()))
    allowed = lab("gate", "out/report.json", "--experiment", "exp.toml",
                  "--allow-stale-receiver")
    assert allowed.exit_code == 0
    assert "accepted with --allow-stale-receiver" in " ".join(allowed.stdout.split())
    unchecked = lab("gate", "out/report.json")
    assert "receiver fingerprints not checked" in " ".join(unchecked.stdout.split())


