"""The SQLite decision log and replay store, on a real file (across processes:
``tests/integration/test_replay_across_processes.py``)."""

from __future__ import annotations

import hashlib
import pickle
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from handoffs._logs import DecisionLogError
from handoffs.receivers import (
    InMemoryEvidenceResolver,
    SQLiteDecisionLog,
    Step,
    Verdict,
)
from handoffs.receivers._log import MIGRATIONS, SCHEMA_VERSION
from worlds.gate import ALL_EVIDENCE, CONTRACT, NOW, SENDER, T0, WORLD, raw, strict


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "decisions.sqlite")


def test_one_row_per_decision(db: str) -> None:
    log = SQLiteDecisionLog(db)
    gate = WORLD.gate(log=log, replay=log)
    message = raw(WORLD.signed("value-01"))
    accepted = strict(gate).receive(message)
    replayed = strict(gate).receive(message)
    garbage = strict(gate).receive(b"{oops")
    assert log.count() == 3
    newest, middle, oldest = log.rows()
    assert oldest == {
        "seq": 1, "decided_at": "2026-06-01T12:01:00.000000Z",
        "receipt_id": accepted.receipt_id,
        "digest": "sha256:" + hashlib.sha256(message).hexdigest(),
        "contract": "payment-release", "version": "1.0.0", "sender": SENDER,
        "receiver": "strict-contract", "step": 5, "verdict": "ACCEPT", "action": "ESCALATE",
        "proposed_action": "ESCALATE", "authority": "ADVISE", "reasons": [], "readback": None,
        "counterfactual_trigger": CONTRACT.counterfactual_trigger,
        "message_bytes": len(message), "pid": oldest["pid"],
    }
    assert (middle["verdict"], middle["step"], middle["sender"]) == ("REJECT", 2, None)
    # A refusal records no proposal (the replayed receipt's is not the gate's to log).
    assert middle["proposed_action"] is newest["proposed_action"] is None
    assert [r["code"] for r in middle["reasons"]] == ["replayed"]
    assert (newest["receipt_id"], newest["digest"], newest["message_bytes"]) == (
        None, "sha256:" + hashlib.sha256(b"{oops").hexdigest(), 5)
    assert replayed.verdict is garbage.verdict is Verdict.REJECT
    log.close()


def test_messages_are_kept_only_on_request(db: str) -> None:
    log = SQLiteDecisionLog(db, keep_messages=True)
    message = raw(WORLD.signed())
    strict(WORLD.gate(log=log)).receive(message)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT message FROM decisions").fetchone()[0] == message
    log.close()


def test_summary_counts_the_boundary_metrics(db: str) -> None:
    log = SQLiteDecisionLog(db)
    evidence = dict(ALL_EVIDENCE)
    del evidence["evidence://routine/2/identity"]
    gate = WORLD.gate(log=log, replay=log, readback=1.0,
                      evidence=InMemoryEvidenceResolver(evidence))
    receiver = strict(gate)
    for case_id in ("routine-01", "policy-01", "value-01"):
        receiver.receive(raw(WORLD.signed(case_id)))  # three admitted, read back, agree
    receiver.receive(raw(WORLD.signed("routine-02")))  # source-resolution failure
    receiver.receive(raw(WORLD.signed("policy-02", state={"policy_current": True},
                                      mutate=lambda d: d.update(proposed_action="RELEASE"))))
    missing = WORLD.signed("routine-03", mutate=lambda d: d.pop("receiver"))
    receiver.receive(raw(missing))
    receiver.receive(raw(WORLD.signed("routine-04", valid_until=NOW - timedelta(minutes=1))))
    replay = raw(WORLD.signed("duplicate-01"))
    receiver.receive(replay)
    receiver.receive(replay)
    summary = log.summary()
    assert summary.to_json() == {
        "decisions": 9,
        "by_verdict": {"ACCEPT": 4, "ESCALATE": 1, "REJECT": 4},
        "by_step": {"1": 1, "2": 2, "4": 2, "5": 4},
        "by_reason": {"evidence-unresolved": 1, "missing-field": 1, "readback-mismatch": 1,
                      "receipt-expired": 1, "replayed": 1},
        "by_receiver": {"strict-contract": 9},
        "missing_field_rejections": 1,
        "expired": 1,
        "source_resolution_failures": 1,
        "replays": 1,
        "readback_sampled": 5,
        "readback_disagreements": 1,
        "readback_disagreement_rate": 0.2,
        "counterfactual_triggers": {CONTRACT.counterfactual_trigger: 6},
        "mean_message_bytes": summary.mean_message_bytes,
        "first_decided_at": "2026-06-01T12:01:00.000000Z",
        "last_decided_at": "2026-06-01T12:01:00.000000Z",
    }
    assert summary.mean_message_bytes is not None
    assert summary.mean_message_bytes > 1000
    log.close()


def test_empty_log_summary(db: str) -> None:
    with SQLiteDecisionLog(db) as log:
        summary = log.summary()
    assert (summary.decisions, summary.readback_disagreement_rate, summary.mean_message_bytes) \
        == (0, None, None)


def test_replay_protection_survives_a_restart(db: str) -> None:
    until = T0 + timedelta(hours=1)
    log = SQLiteDecisionLog(db)
    assert log.first_seen("urn:uuid:1", expires=until, now=T0)
    log.close()
    reopened = SQLiteDecisionLog(db)
    assert not reopened.first_seen("urn:uuid:1", expires=until, now=T0)
    clone = pickle.loads(pickle.dumps(reopened))  # noqa: S301 - our own object
    assert not clone.first_seen("urn:uuid:1", expires=until, now=T0)
    reopened.close()
    clone.close()


def test_expired_ids_are_pruned_by_the_store_clock(db: str) -> None:
    log = SQLiteDecisionLog(db, prune_every=2)
    real_now = datetime.now(UTC)
    # Its own validity ended two hours ago by the store's clock: forgotten.
    assert log.first_seen("old", expires=real_now - timedelta(hours=2), now=T0)
    # The writer's clock is irrelevant to pruning (recorded only).
    assert log.first_seen("new", expires=real_now + timedelta(days=2), now=T0)
    with sqlite3.connect(db) as conn:
        assert [r[0] for r in conn.execute("SELECT receipt_id FROM seen")] == ["new"]
        stamps = conn.execute("SELECT first_seen, recorded_at FROM seen").fetchone()
    assert stamps[0].startswith("2026-06-01T12:00")
    assert abs(datetime.fromisoformat(stamps[1]) - real_now) < timedelta(minutes=5)
    log.close()


def test_bad_retention_options_are_refused(db: str) -> None:
    with pytest.raises(ValueError, match="retain"):
        SQLiteDecisionLog(db, retain=timedelta(seconds=-1))
    with pytest.raises(ValueError, match="prune_every"):
        SQLiteDecisionLog(db, prune_every=0)


def test_a_version_1_file_is_migrated(db: str) -> None:
    with sqlite3.connect(db) as conn:
        conn.executescript(MIGRATIONS[1])
        conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
        conn.execute("INSERT INTO seen (receipt_id, first_seen, expires, pid) "
                     "VALUES ('kept', 'x', '2999-01-01T00:00:00.000000Z', 1)")
    log = SQLiteDecisionLog(db)
    assert not log.first_seen("kept", expires=T0, now=T0)
    assert log.first_seen("fresh", expires=T0, now=T0)
    log.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM meta").fetchone() == (SCHEMA_VERSION,)
        assert [r[0] for r in conn.execute(
            "SELECT recorded_at IS NULL FROM seen ORDER BY receipt_id")] == [0, 1]


def test_a_version_2_file_keeps_its_rows_and_records_proposals_after(db: str) -> None:
    """Version 3 adds ``proposed_action``: a version-2 log keeps every row (their
    proposal NULL: not recorded then) and records the proposal of what it logs next."""
    with sqlite3.connect(db) as conn:
        for version in (1, 2):
            conn.executescript(MIGRATIONS[version])
        conn.execute("INSERT INTO meta VALUES ('schema_version', '2')")
        conn.execute(
            "INSERT INTO decisions (decided_at, receiver, step, verdict, action, reasons, "
            "message_bytes, pid) VALUES ('2026-01-01T00:00:00.000000Z', 'r', 5, 'ACCEPT', "
            "'HOLD', '[]', 10, 1)")
    log = SQLiteDecisionLog(db)
    (old,) = log.rows()
    assert (old["seq"], old["action"], old["proposed_action"]) == (1, "HOLD", None)
    strict(WORLD.gate(log=log, replay=log)).receive(raw(WORLD.signed("value-01")))
    new, old_again = log.rows()
    assert old_again == old
    assert (new["verdict"], new["action"], new["proposed_action"]) == (
        "ACCEPT", "ESCALATE", "ESCALATE")
    log.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM meta").fetchone() == (SCHEMA_VERSION,)


def test_unusable_files_fail_closed(tmp_path: Path, db: str) -> None:
    with pytest.raises(DecisionLogError, match="cannot open"):
        SQLiteDecisionLog(tmp_path)
    SQLiteDecisionLog(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(DecisionLogError, match="schema version") as info:
        SQLiteDecisionLog(db)
    assert info.value.code == "log-version"
    with pytest.raises(ValueError, match="busy_timeout"):
        SQLiteDecisionLog(db, busy_timeout=0)


def test_a_broken_replay_database_fails_the_gate_closed(tmp_path: Path) -> None:
    path = tmp_path / "gone.sqlite"
    log = SQLiteDecisionLog(path)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE seen")
    decision = strict(WORLD.gate(replay=log)).receive(raw(WORLD.signed()))
    assert (decision.verdict, decision.step, [r.code for r in decision.reasons]) == (
        Verdict.REJECT, Step.PROOFS, ["replay-store-unavailable"])
    log.close()
