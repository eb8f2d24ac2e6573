"""``handoffs log watch``: a released handoff watched in production (issue #28 item 5).

The release: ``handoffs lab run`` on the payment example, then ``handoffs lab gate
--baseline-log`` with the decision log of the released sender's acceptance run. In
production the sender starts omitting a decisive field (the whole decision state):
its messages shrink and the gate refuses them ``missing-field``. The watch exits 1
naming both shifts; the exported Prometheus rules fire on the same shift in
``promtool test rules`` (Debian's ``prometheus`` package). Another sender starts
proposing what its own decision state does not call for: the strict receiver
overrules it, and the watch names the decided-otherwise rate.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from adapter_world import CASES, NOW, World, case_ref, content_for, make_sender, make_world
from handoffs.cli._gate import log as log_group
from handoffs.cli._lab import lab
from handoffs.examples import payment
from handoffs.receivers import (
    Gate,
    InMemoryPolicyService,
    SQLiteDecisionLog,
    StrictContractReceiver,
)


def gate_into(world: World, path: Path) -> StrictContractReceiver:
    """The case owner's strict receiver, logging every decision to ``path``."""
    log = SQLiteDecisionLog(path)
    return StrictContractReceiver(Gate(
        identity="case-owner", trust=world.trust, registry=payment.PAYMENT_RELEASE,
        roles={"case-owner"}, policy_service=InMemoryPolicyService({"PAY-7.4": True}),
        evidence=world.evidence, readback=1.0, clock=lambda: NOW + timedelta(minutes=1),
        log=log, replay=log))


def send(world: World, receiver: StrictContractReceiver, *, rounds: int,
         omit: bool = False, overrule: bool = False) -> None:
    """``rounds`` passes over every case: genuine receipts, (``omit``) receipts whose
    sender dropped the decision state (the decisive fields), or (``overrule``) receipts
    proposing another action than their decision state calls for."""
    sender = make_sender(world)
    for _ in range(rounds):
        for case_id in CASES:
            content = content_for(case_id)
            if overrule:
                content["proposed_action"] = next(
                    a.value for a in payment.PAYMENT_RELEASE.actions
                    if a.value != content["proposed_action"])
            signed = sender.sign(content, case_id=case_id,
                                 evidence_refs=case_ref(case_id).evidence_refs)
            if omit:
                document = json.loads(signed)
                del document["decision_state"]
                signed = json.dumps(document).encode()
            receiver.receive(signed)


def invoke(group: Any, *args: str) -> Any:
    return CliRunner().invoke(group, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A release with baselines, and three production logs: healthy, shifted, and one of
    another contract version (written by hand, below)."""
    folder = tmp_path_factory.mktemp("watch")
    world = make_world()
    send(world, gate_into(world, folder / "acceptance.db"), rounds=2)
    send(world, gate_into(world, folder / "healthy.db"), rounds=2)
    shifted = gate_into(world, folder / "shifted.db")
    send(world, shifted, rounds=1)
    send(world, shifted, rounds=3, omit=True)
    overruled = gate_into(world, folder / "overruled.db")
    send(world, overruled, rounds=1)
    send(world, overruled, rounds=1, overrule=True)
    out = folder / "lab"
    assert invoke(lab, "run", "--out", str(out), "--no-progress").exit_code == 0
    bare = invoke(lab, "gate", str(out / "report.json"), "--artefact", str(folder / "bare.json"))
    assert bare.exit_code == 0, bare.output
    result = invoke(lab, "gate", str(out / "report.json"), "--artefact",
                    str(folder / "release.json"), "--baseline-log", str(folder / "acceptance.db"),
                    "--watch-budget", "message_bytes_drop=0.02")
    assert result.exit_code == 0, result.output
    return {"folder": folder, "release": folder / "release.json",
            "bare": folder / "bare.json", "healthy": folder / "healthy.db",
            "shifted": folder / "shifted.db", "overruled": folder / "overruled.db"}


def test_the_release_records_the_baselines(scene: dict[str, Path]) -> None:
    release = json.loads(scene["release"].read_text("utf-8"))
    baselines = release["baselines"]
    assert baselines["format"] == "handoffs-watch-baselines/1"
    assert baselines["profile"]["decisions"] == 2 * len(CASES)
    assert baselines["profile"]["contracts"] == ["payment-release/1.0.0"]
    assert baselines["budgets"]["message_bytes_drop"] == 0.02
    assert "baselines" not in json.loads(scene["bare"].read_text("utf-8"))


def test_a_healthy_deployment_passes(scene: dict[str, Path]) -> None:
    result = invoke(log_group, "watch", str(scene["healthy"]), "--release",
                    str(scene["release"]))
    assert result.exit_code == 0, result.output
    assert "0 budget(s) crossed" in result.output
    assert "ok message_bytes" in result.output
    assert "ok decided_otherwise_rate: accepted decisions that overrule the proposal 0.0% " \
           f"in production against 0.0% released (0 of {2 * len(CASES)} against 0 of " \
           f"{2 * len(CASES)})" in result.output


def test_a_sender_whose_proposals_are_overruled_crosses_decided_otherwise(
        scene: dict[str, Path]) -> None:
    result = invoke(log_group, "watch", str(scene["overruled"]), "--release",
                    str(scene["release"]))
    assert result.exit_code == 1, result.output
    assert "SHIFT decided_otherwise_rate: accepted decisions that overrule the proposal " \
           f"50.0% in production against 0.0% released ({len(CASES)} of {2 * len(CASES)} " \
           f"against 0 of {2 * len(CASES)})" in result.output
    assert "crossed: decided_otherwise_rate" in result.output


def test_rows_written_before_the_proposal_column_are_unmeasured(
        scene: dict[str, Path], tmp_path: Path) -> None:
    """A log migrated from schema version 2: its old rows record no proposal. All old:
    unmeasured, said so; old and new: the new rows are measured, the old left out."""
    old, mixed = tmp_path / "old.db", tmp_path / "mixed.db"
    for copy in (old, mixed):  # the WAL too: sqlite3's backup, not a file copy
        with sqlite3.connect(scene["overruled"]) as source, sqlite3.connect(copy) as target:
            source.backup(target)
    with sqlite3.connect(old) as conn:
        conn.execute("UPDATE decisions SET proposed_action = NULL")
    result = invoke(log_group, "watch", str(old), "--release", str(scene["release"]))
    assert result.exit_code == 0, result.output
    assert "unmeasured decided_otherwise_rate: accepted decisions that overrule the " \
           "proposal: not measured (the production decision log records no proposal: " \
           "its rows predate the proposed_action column)" in result.output
    with sqlite3.connect(mixed) as conn:  # the genuine round predates the column
        conn.execute("UPDATE decisions SET proposed_action = NULL WHERE seq <= ?", (len(CASES),))
    result = invoke(log_group, "watch", str(mixed), "--release", str(scene["release"]))
    assert result.exit_code == 1, result.output
    assert f"100.0% in production against 0.0% released ({len(CASES)} of {len(CASES)} " \
           f"({len(CASES)} older rows without a proposal left out)" in result.output


def test_a_sender_omitting_a_decisive_field_crosses_both_budgets(
        scene: dict[str, Path]) -> None:
    result = invoke(log_group, "watch", str(scene["shifted"]), "--release",
                    str(scene["release"]))
    assert result.exit_code == 1, result.output
    assert "SHIFT message_bytes: messages shrank" in result.output
    assert "SHIFT missing_field_rate: missing-field refusals 75.0% in production against " \
           "0.0% released" in result.output
    assert "crossed: message_bytes, missing_field_rate, refusal_reason_rate" in result.output
    as_json = json.loads(invoke(log_group, "watch", str(scene["shifted"]), "--release",
                                str(scene["release"]), "--json").output)
    assert as_json["crossed"] == ["message_bytes", "missing_field_rate", "refusal_reason_rate"]
    # The last 28 decisions are all shifted; a budget given at the watch overrides.
    looser = invoke(log_group, "watch", str(scene["shifted"]), "--release",
                    str(scene["release"]), "--last", "28", "--budget", "missing_field_rate=1",
                    "--budget", "refusal_reason_rate=1", "--budget", "message_bytes_drop=0.5")
    assert looser.exit_code == 0, looser.output


@pytest.mark.parametrize(("case", "code"), [
    ("bare", "watch-no-baselines"),
    ("empty", "watch-empty-log"),
    ("other-version", "watch-contract-mismatch"),
    ("missing-log", "watch-empty-log"),
    ("bad-budget", "watch-bad-budget"),
])
def test_bad_input_is_a_typed_error_naming_what_is_missing(
        scene: dict[str, Path], tmp_path: Path, case: str, code: str) -> None:
    release, log = scene["release"], scene["healthy"]
    extra: list[str] = []
    if case == "bare":
        release = scene["bare"]
    elif case == "empty":
        log = tmp_path / "empty.db"
        SQLiteDecisionLog(log).close()
    elif case == "other-version":
        log = tmp_path / "other.db"
        # through SQLite (a WAL database's latest pages may be in its -wal file, which a
        # copy of the main file would leave behind)
        with closing(sqlite3.connect(scene["healthy"])) as source, \
                closing(sqlite3.connect(log)) as copy:
            source.backup(copy)
        with sqlite3.connect(log) as conn:
            conn.execute("UPDATE decisions SET version = '2.0.0' WHERE seq % 2 = 0")
    elif case == "missing-log":
        log = tmp_path / "nowhere.db"
    else:
        extra = ["--budget", "message_bytes_drop=2"]
    result = CliRunner().invoke(log_group, ["watch", str(log), "--release", str(release),
                                            *extra])
    assert result.exit_code == 2, result.output
    assert f"[{code}]" in result.output
    if case == "bare":
        assert "baselines.profile" in result.output
        assert "--baseline-log" in result.output
    if case == "other-version":
        assert "payment-release/2.0.0" in result.output


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus; "
                    ".ci/run installs it)")
    return found


def test_the_exported_rules_are_valid_and_fire_on_the_shift(
        scene: dict[str, Path], tmp_path: Path) -> None:
    tool = promtool()
    rules = tmp_path / "handoffs-rules.yml"
    result = invoke(log_group, "watch", "--release", str(scene["release"]),
                    "--prometheus-rules", str(rules), "--window", "10m", "--for", "5m")
    assert result.exit_code == 0, result.output
    checked = subprocess.run([tool, "check", "rules", str(rules)], capture_output=True,
                             text=True, timeout=60, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    document = json.loads(rules.read_text("utf-8"))
    by_name = {rule["alert"]: rule for rule in document["groups"][0]["rules"]}
    release = json.loads(scene["release"].read_text("utf-8"))
    mean = release["baselines"]["profile"]["message_bytes"]["mean"]

    def alert(name: str) -> dict[str, Any]:
        return {"exp_labels": by_name[name]["labels"],
                "exp_annotations": by_name[name]["annotations"]}

    # The shifted sender as the service counts it: 10 decisions a minute, 3 of every 4
    # refused missing-field, each message 15% smaller than the release's mean.
    small = round(10 * mean * 0.85)
    series = [
        {"series": 'handoffs_decisions_total{receiver="strict-contract",verdict="ACCEPT",'
                   'step="5"}', "values": "0+2.5x60"},
        {"series": 'handoffs_decisions_total{receiver="strict-contract",verdict="REJECT",'
                   'step="1"}', "values": "0+7.5x60"},
        {"series": "handoffs_missing_field_rejections_total", "values": "0+7.5x60"},
        {"series": "handoffs_expired_messages_total", "values": "0+0x60"},
        {"series": "handoffs_decided_otherwise_total", "values": "0+0x60"},
        {"series": "handoffs_message_bytes_sum", "values": f"0+{small}x60"},
        {"series": "handoffs_message_bytes_count", "values": "0+10x60"},
        {"series": 'handoffs_readback_total{result="agree"}', "values": "0+2.5x60"},
    ]
    tests = {"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "alert_rule_test": [
            {"eval_time": "30m", "alertname": "HandoffsMessagesShrank",
             "exp_alerts": [alert("HandoffsMessagesShrank")]},
            {"eval_time": "30m", "alertname": "HandoffsMissingFieldRefusalsRose",
             "exp_alerts": [alert("HandoffsMissingFieldRefusalsRose")]},
            {"eval_time": "30m", "alertname": "HandoffsExpiredRefusalsRose", "exp_alerts": []},
            {"eval_time": "30m", "alertname": "HandoffsMessagesGrew", "exp_alerts": []},
            {"eval_time": "30m", "alertname": "HandoffsEscalationsRose", "exp_alerts": []},
            {"eval_time": "30m", "alertname": "HandoffsDecidedOtherwiseRose",
             "exp_alerts": []},
            {"eval_time": "30m", "alertname": "HandoffsReadbackDisagreementRose",
             "exp_alerts": []},
            # Not yet held for --for 5m: nothing fires in the first minutes.
            {"eval_time": "3m", "alertname": "HandoffsMessagesShrank", "exp_alerts": []},
        ]}]}
    test_file = tmp_path / "handoffs-rules.test.yml"
    test_file.write_text(json.dumps(tests, indent=2), encoding="utf-8")
    ran = subprocess.run([tool, "test", "rules", str(test_file)], capture_output=True,
                         text=True, timeout=60, check=False)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "SUCCESS" in ran.stdout + ran.stderr


def test_rules_need_a_release_with_baselines(scene: dict[str, Path], tmp_path: Path) -> None:
    result = CliRunner().invoke(log_group, ["watch", "--release", str(scene["bare"]),
                                            "--prometheus-rules", str(tmp_path / "r.yml")])
    assert result.exit_code == 2
    assert "[watch-no-baselines]" in result.output
    nothing: Callable[..., Any] = CliRunner().invoke
    assert nothing(log_group, ["watch", "--release", str(scene["release"])]).exit_code == 2


@pytest.mark.parametrize(("shift", "crossed"), [
    ("omit", "crossed: message_bytes, missing_field_rate"),
    ("overrule", "crossed: decided_otherwise_rate"),
])
def test_a_postgresql_log_is_watched_alike(scene: dict[str, Path], shift: str,
                                           crossed: str) -> None:
    """The same shifted senders, their gate logging to PostgreSQL (a throwaway server)."""
    from stores import open_log, postgres_server, why_no_postgres

    reason = why_no_postgres()
    if reason is not None:
        pytest.skip(reason)
    world = make_world()
    with postgres_server() as server:
        url = server.create_database("watch")
        store = open_log(url)
        try:
            receiver = StrictContractReceiver(Gate(
                identity="case-owner", trust=world.trust, registry=payment.PAYMENT_RELEASE,
                roles={"case-owner"}, policy_service=InMemoryPolicyService({"PAY-7.4": True}),
                evidence=world.evidence, readback=1.0,
                clock=lambda: NOW + timedelta(minutes=1), log=store, replay=store))
            send(world, receiver, rounds=1, omit=shift == "omit",
                 overrule=shift == "overrule")
            rows = store.rows(limit=1)
        finally:
            store.close()
        result = invoke(log_group, "watch", url, "--release", str(scene["release"]))
    assert result.exit_code == 1, result.output
    assert crossed in result.output
    if shift == "overrule":  # the store records the sender's proposal beside the action
        assert rows[0]["verdict"] == "ACCEPT"
        assert rows[0]["proposed_action"] not in (None, rows[0]["action"])


PAGE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "watch-a-released-handoff.md"


def test_the_how_to_runs(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The page's files and console commands, in page order, in one bash session from
    an empty directory; each output line the page shows appears in its block's output."""
    import os
    import re
    import sys

    from console_pages import matches, steps

    handoffs = Path(sys.executable).with_name("handoffs")
    assert handoffs.is_file(), "the handoffs console script is not installed"
    found = steps(PAGE.read_text("utf-8"))
    script = ["set -e", "exec 2>&1"]
    for index, (kind, step) in enumerate(found):
        if kind == "console":
            assert isinstance(step, tuple)
            script.append(f"echo '::block {index}::'")
            script.extend(step[0])
        else:
            assert isinstance(step, str)
            script.append(f"cat > {kind.removeprefix('file:')} <<'PAGE_EOF'\n{step}PAGE_EOF")
    env = {"PATH": f"{handoffs.parent}:/usr/bin:/bin",
           "HOME": str(tmp_path_factory.mktemp("home")), "LANG": "C.UTF-8"}
    if "PYTHONPATH" in os.environ:  # a worktree's sources before the installed ones
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-6000:]
    printed = re.split(r"^::block (\d+)::$", done.stdout, flags=re.M)
    outputs = {int(printed[i]): printed[i + 1] for i in range(1, len(printed), 2)}
    blocks = [(index, step) for index, (kind, step) in enumerate(found) if kind == "console"]
    assert len(blocks) == 6
    for index, step in blocks:
        assert isinstance(step, tuple)
        assert matches(step[1], outputs[index]) == [], (index, outputs[index])
    if shutil.which("promtool"):
        checked = subprocess.run(["promtool", "check", "rules",
                                  str(tmp_path / "handoffs-rules.yml")],
                                 capture_output=True, text=True, timeout=60, check=False)
        assert checked.returncode == 0, checked.stdout + checked.stderr
