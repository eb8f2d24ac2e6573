"""Both stores (a SQLite file, a real PostgreSQL server): one transaction per admission,
no burned ids under kill -9, pruning by the store's clock, failing closed.

The PostgreSQL cases run against a throwaway server (``stores.postgres_server``) and
skip, with the reason, where its binaries are missing; ``.ci/run`` installs them.
"""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from handoffs._logs import DecisionLogError
from handoffs.receivers import Decision, ReplayLog, Step, Verdict
from handoffs.receivers._replay import ReplayClaim
from handoffs.service._pg_schema import _SCHEMA_VERSION
from stores import PostgresServer, free_port, open_log
from worlds.gate import CASES, NOW, WORLD, codes, raw, strict

HERE = Path(__file__).parents[1]  # tests/, where the helpers are


def query(url: str, sql: str) -> list[tuple[Any, ...]]:
    """Run ``sql`` (tables named ``seen`` and ``decisions``) on either backend."""
    if url.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(url) as conn:
            conn.execute("SET search_path TO handoffs")
            cursor = conn.execute(sql)
            return list(cursor.fetchall()) if cursor.description else []
    with sqlite3.connect(url) as conn:
        return list(conn.execute(sql).fetchall())


BURNED = ("SELECT s.receipt_id FROM seen s WHERE NOT EXISTS "
          "(SELECT 1 FROM decisions d WHERE d.receipt_id = s.receipt_id)")


def test_both_backends_are_replay_logs(store_url: str) -> None:
    with open_log(store_url) as log:
        assert isinstance(log, ReplayLog)


def test_one_row_per_decision_and_the_summary(store_url: str) -> None:
    log = open_log(store_url)
    gate = WORLD.gate(log=log, replay=log)
    message = raw(WORLD.signed("value-01"))
    accepted, replayed = strict(gate).receive(message), strict(gate).receive(message)
    garbage = strict(gate).receive(b"{oops")
    assert (accepted.verdict, codes(replayed), garbage.verdict) == (
        Verdict.ACCEPT, ["replayed"], Verdict.REJECT)
    newest, middle, oldest = log.rows()
    assert (oldest["receipt_id"], oldest["verdict"], oldest["decided_at"]) == (
        accepted.receipt_id, "ACCEPT", "2026-06-01T12:01:00.000000Z")
    assert (middle["verdict"], middle["step"], middle["sender"],
            [r["code"] for r in middle["reasons"]]) == ("REJECT", 2, None, ["replayed"])
    assert newest["message_bytes"] == 5
    summary = log.summary()
    assert (summary.decisions, summary.replays, summary.by_verdict) == (
        3, 1, {"ACCEPT": 1, "REJECT": 2})
    assert query(store_url, BURNED) == []
    log.close()


def _decision(receipt_id: str) -> Decision:
    return Decision(verdict=Verdict.ACCEPT, action="ESCALATE", step=Step.POLICY, reasons=(),
                    receiver="r", receipt_id=receipt_id)


def test_a_lost_claim_writes_nothing(store_url: str) -> None:
    log = open_log(store_url)
    claim = ReplayClaim(receipt_id="urn:x", expires=NOW + timedelta(hours=1), claimed_at=NOW)
    kwargs: dict[str, Any] = {"digest": None, "message_bytes": 1, "decided_at": NOW}
    assert log.record(_decision("urn:x"), claim=claim, **kwargs)
    assert not log.record(_decision("urn:x"), claim=claim, **kwargs)
    assert log.count() == 1
    log.close()


def test_every_field_of_a_decision_is_kept(store_url: str) -> None:
    """The row holds the whole decision: each column, the message bytes (when
    kept, even bytes that are not UTF-8) and every reason code with its step.
    """
    from handoffs.receivers import Reason

    log = open_log(store_url, keep_messages=True)
    decision = Decision(
        verdict=Verdict.ESCALATE, action="HOLD", step=Step.POLICY,
        reasons=(Reason("evidence-unresolved", "no resolver", Step.EVIDENCE),
                 Reason("policy-stale", "PAY-7.3", Step.POLICY, json_path="$.policy")),
        receiver="case-owner", receipt_id="urn:full", contract="payment-release/1.0",
        sender="intake", authority="payments", readback="agree",
        counterfactual_trigger="amount")
    claim = ReplayClaim(receipt_id="urn:full", expires=NOW + timedelta(hours=1), claimed_at=NOW)
    message = b"\x00\xff{not utf-8}"
    assert log.record(decision, claim=claim, digest="sha256:ab", message_bytes=len(message),
                      message=message, decided_at=NOW, proposed_action="RELEASE")
    (row,) = query(store_url, "SELECT receipt_id, digest, contract, version, sender, receiver, "
                              "step, verdict, action, authority, readback, "
                              "counterfactual_trigger, message_bytes, message FROM decisions")
    assert row[:13] == ("urn:full", "sha256:ab", "payment-release", "1.0", "intake",
                        "case-owner", 5, "ESCALATE", "HOLD", "payments", "agree", "amount",
                        len(message))
    assert bytes(row[13]) == message
    assert sorted(query(store_url, "SELECT code, step FROM decision_reasons")) == [
        ("evidence-unresolved", 4), ("policy-stale", 5)]
    (stored,) = log.rows(limit=1)
    assert (stored["action"], stored["proposed_action"]) == ("HOLD", "RELEASE")
    reasons = stored["reasons"]
    reasons = json.loads(reasons) if isinstance(reasons, str) else reasons
    assert reasons == [r.to_json() for r in decision.reasons]
    log.close()


def test_refused_rows_are_kept_for_refused_retain_only(store_url: str) -> None:
    """Garbage posts cannot grow the log for ever: refused rows older than
    ``refused_retain`` (store clock) go at the next prune; admitted rows stay.
    """
    from handoffs.receivers import Reason

    log = open_log(store_url, refused_retain=timedelta(minutes=5), prune_every=2)
    kwargs: dict[str, Any] = {"digest": None, "message_bytes": 1, "decided_at": NOW}
    refused = Decision(verdict=Verdict.REJECT, action=None, step=Step.PARSE,
                       reasons=(Reason("bad-json", "not JSON", Step.PARSE),), receiver="r",
                       receipt_id=None)
    claim = ReplayClaim(receipt_id="kept", expires=NOW + timedelta(hours=1), claimed_at=NOW)
    assert log.record(_decision("kept"), claim=claim, **kwargs)
    log.append(refused, **kwargs)
    old = "now() - interval '1 hour'" if store_url.startswith("postgresql://") else \
        "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-1 hours')"
    query(store_url, f"UPDATE decisions SET recorded_at = {old}")  # noqa: S608 - ours
    log.append(refused, **kwargs)
    log.append(refused, **kwargs)  # the fourth write: prunes (every second write)
    verdicts = sorted(v for (v,) in query(store_url, "SELECT verdict FROM decisions"))
    assert verdicts == ["ACCEPT", "REJECT", "REJECT"]  # the old refusal went
    assert query(store_url, "SELECT count(*) FROM decision_reasons") == [(2,)]
    log.close()


def test_threads_racing_on_one_id_admit_it_once(store_url: str) -> None:
    log = open_log(store_url)
    won: list[str] = []
    until = datetime.now(UTC) + timedelta(hours=1)

    def race(worker: int) -> None:
        for i in range(25):
            claim = ReplayClaim(receipt_id=f"id-{i}", expires=until, claimed_at=NOW)
            if log.record(_decision(f"id-{i}"), claim=claim, digest=None,
                          message_bytes=worker, decided_at=NOW):
                won.append(f"id-{i}")

    threads = [threading.Thread(target=race, args=(w,)) for w in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(won) == sorted(f"id-{i}" for i in range(25))
    assert log.count() == 25
    log.close()


# ------------------------------------------------------------- the store's own clock


def test_a_writer_at_2099_cannot_reopen_a_still_valid_id(store_url: str) -> None:
    """The outside test's case: 1,100 claims with now = 2099, then the valid id again."""
    log = open_log(store_url, prune_every=10, retain=timedelta(hours=1))
    real = datetime.now(UTC)
    assert log.first_seen("valid", expires=real + timedelta(hours=1), now=real)
    assert log.first_seen("long-gone", expires=real - timedelta(hours=2), now=real)
    future = datetime(2099, 1, 1, tzinfo=UTC)
    for i in range(1100):
        assert log.first_seen(f"skewed-{i}", expires=future + timedelta(hours=1), now=future)
    assert not log.first_seen("valid", expires=real + timedelta(hours=1), now=future)
    # Pruning did run (110 times), by the store's clock: only the id past its validity
    # (and the retention margin) was forgotten.
    assert log.seen("valid")
    assert not log.seen("long-gone")
    assert log.prune() == 0
    log.close()


def test_the_retention_margin_is_measured_from_the_receipt_validity(store_url: str) -> None:
    log = open_log(store_url, retain=timedelta(hours=3))
    real = datetime.now(UTC)
    assert log.first_seen("two-hours-ago", expires=real - timedelta(hours=2), now=real)
    assert log.first_seen("four-hours-ago", expires=real - timedelta(hours=4), now=real)
    assert log.prune() == 1
    assert (log.seen("two-hours-ago"), log.seen("four-hours-ago")) == (True, False)
    log.close()


# ---------------------------------------------------------------------- kill -9


def _kill_loop(store_url: str, tmp_path: Path, *, receipts: int, kills: int) -> None:
    """Gate ``receipts`` genuine receipts in processes SIGKILLed ``kills`` times at
    random moments; re-send whatever was never acknowledged; then check the store.
    """
    ring = tmp_path / "ring.json"
    ring.write_text(json.dumps(WORLD.keyring.to_json()), "utf-8")
    names = sorted(CASES)
    messages = {}
    for i in range(receipts):
        doc = WORLD.signed(names[i % len(names)])
        messages[doc["id"]] = raw(doc)
    acks: list[tuple[str, str]] = []
    pending = list(messages)
    rng = random.Random(11)  # noqa: S311 - when to kill, not a secret
    for round_ in range(kills + 1):
        feed = tmp_path / f"round-{round_}.jsonl"
        feed.write_bytes(b"\n".join(messages[i] for i in pending))
        proc = subprocess.Popen([sys.executable, str(HERE / "_killable_gate.py"), store_url,
                                 str(ring), str(feed)], stdout=subprocess.PIPE, cwd=HERE)
        assert proc.stdout is not None
        target = rng.randint(1, max(1, len(pending) // (kills - round_ + 1))) \
            if round_ < kills else len(pending)
        for _ in range(target):
            line = proc.stdout.readline().decode().split()
            if not line:
                break
            acks.append((line[0], line[1]))
        if round_ < kills:
            proc.kill()  # SIGKILL, mid-stream
        proc.wait(timeout=120)
        proc.stdout.close()
        acked = {receipt for receipt, _ in acks}
        pending = [i for i in pending if i not in acked]
        if not pending:
            break
    assert pending == []
    accepted = Counter(r for (r,) in query(
        store_url, "SELECT receipt_id FROM decisions WHERE verdict = 'ACCEPT'"))
    assert accepted == Counter(dict.fromkeys(messages, 1))  # each genuine receipt once
    assert query(store_url, BURNED) == []  # no id seen without its decision
    for receipt, verdict in acks:  # every acknowledgement has its row
        assert verdict in {"ACCEPT", "REJECT"}
        assert receipt in accepted


def test_kill_9_burns_no_genuine_id(store_url: str, tmp_path: Path) -> None:
    _kill_loop(store_url, tmp_path, receipts=30, kills=1)


@pytest.mark.slow
def test_kill_9_burns_no_genuine_id_in_forty_kills(store_url: str, tmp_path: Path) -> None:
    _kill_loop(store_url, tmp_path, receipts=400, kills=40)


def test_a_locked_sqlite_file_fails_closed_within_its_timeout(tmp_path: Path) -> None:
    """Another process holds the write lock: each call gives up at its deadline."""
    from serve_world import receipt

    path = tmp_path / "decisions.sqlite"
    log = open_log(str(path), busy_timeout=0.3, retain=timedelta(hours=1))
    gate = WORLD.gate(log=log, replay=log, clock=lambda: datetime.now(UTC))
    genuine = receipt("routine-01")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        locked = strict(gate).receive(genuine)
        with pytest.raises(DecisionLogError, match="locked"):
            log.ping()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (locked.admitted, codes(locked)[-1]) == (False, "log-unavailable")
    assert strict(gate).receive(genuine).admitted  # nothing was claimed
    log.close()


# ------------------------------------------------------------------ PostgreSQL only


def test_an_unreachable_server_fails_the_gate_closed() -> None:
    pytest.importorskip("psycopg")
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/none"
    log = open_log(url, timeout=1)
    decision = strict(WORLD.gate(log=log, replay=log)).receive(raw(WORLD.signed()))
    assert (decision.verdict, codes(decision)) == (Verdict.REJECT, ["log-unavailable"])
    assert decision.admitted is False
    with pytest.raises(DecisionLogError, match="cannot reach the server") as info:
        log.ping()
    assert info.value.code == "log-unavailable"
    assert "127.0.0.1" in str(info.value)
    log.close()


@pytest.mark.slow
def test_a_restart_fails_closed_then_recovers(postgres: PostgresServer) -> None:
    url = postgres.create_database("restart")
    log = open_log(url, timeout=2)
    gate = WORLD.gate(log=log, replay=log)
    before = strict(gate).receive(raw(WORLD.signed("routine-01")))
    assert before.verdict is Verdict.ACCEPT
    postgres.restart("immediate")
    after = [strict(gate).receive(raw(WORLD.signed("routine-02"))) for _ in range(3)]
    assert after[-1].verdict is Verdict.ACCEPT  # the pool reconnected
    for decision in after[:-1]:  # any refusal in between was fail-closed and typed
        assert decision.verdict is Verdict.ACCEPT or set(codes(decision)) <= {
            "replay-store-unavailable", "log-unavailable"}
    assert before.receipt_id in {r["receipt_id"] for r in log.rows()}  # survived the crash
    log.close()


def test_a_version_2_log_migrates_its_reason_rows_into_the_view(
    postgres: PostgresServer,
) -> None:
    """Version 3 drops the ``decision_reasons`` table for a view over each row's
    ``reasons``: a version-2 log keeps every reason code it had, with its step.
    """
    import psycopg

    from handoffs.service._pg_schema import _MIGRATIONS

    url = postgres.create_database("v2")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA handoffs")
        conn.execute("CREATE TABLE handoffs.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        for version in (1, 2):
            for statement in _MIGRATIONS[version].split(";"):
                if statement.strip():
                    conn.execute(statement)
        conn.execute("INSERT INTO handoffs.meta VALUES ('schema_version', '2')")
        seq = conn.execute(
            "INSERT INTO handoffs.decisions (decided_at, receiver, step, verdict, reasons, "
            "message_bytes, pid) VALUES (now(), 'r', 2, 'REJECT', %s::jsonb, 1, 1) "
            "RETURNING seq",
            ('[{"code": "replayed", "step": 2}, {"code": "expired", "step": 2}]',),
        ).fetchone()
        assert seq is not None
        conn.execute("INSERT INTO handoffs.decision_reasons VALUES (%s, 'replayed', 2), "
                     "(%s, 'expired', 2)", (seq[0], seq[0]))
    with open_log(url) as log:
        summary = log.summary()
    assert summary.by_reason == {"expired": 1, "replayed": 1}
    assert summary.replays == 1
    with psycopg.connect(url, autocommit=True) as conn:
        assert sorted(conn.execute(
            "SELECT decision, code, step FROM handoffs.decision_reasons").fetchall()) == [
            (seq[0], "expired", 2), (seq[0], "replayed", 2)]
        assert conn.execute("SELECT value FROM handoffs.meta").fetchone() == (_SCHEMA_VERSION,)
    # Version 4 adds ``proposed_action``: the old row has none; a new one records it.
    with open_log(url) as log:
        log.append(_decision("urn:new"), digest=None, message_bytes=1, decided_at=NOW,
                   proposed_action="HOLD")
        new, old = log.rows()
    assert (old["seq"], old["verdict"], old["proposed_action"]) == (seq[0], "REJECT", None)
    assert (new["action"], new["proposed_action"]) == ("ESCALATE", "HOLD")


def test_a_newer_schema_is_refused(postgres: PostgresServer) -> None:
    url = postgres.create_database("newer")
    with open_log(url) as log:
        log.ping()
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT value FROM handoffs.meta").fetchone() == (_SCHEMA_VERSION,)
        conn.execute("UPDATE handoffs.meta SET value = '99'")
    with pytest.raises(DecisionLogError, match="schema version '99'") as info, \
            open_log(url) as log:
        log.ping()
    assert info.value.code == "log-version"


def test_bad_options_are_refused_before_connecting() -> None:
    pytest.importorskip("psycopg")
    from handoffs.service.postgres import PostgresDecisionLog

    with pytest.raises(ValueError, match="postgresql://"):
        PostgresDecisionLog("mysql://x")
    with pytest.raises(ValueError, match="timeout"):
        PostgresDecisionLog("postgresql://x@127.0.0.1/db", timeout=0)
    with pytest.raises(ValueError, match="pool_size"):
        PostgresDecisionLog("postgresql://x@127.0.0.1/db", pool_size=0)
    for window in (-0.001, 0.2, True, "1"):
        with pytest.raises(ValueError, match="group_commit"):
            PostgresDecisionLog("postgresql://x@127.0.0.1/db", group_commit=window)


def test_gate_and_log_summary_take_a_postgresql_url(postgres: PostgresServer,
                                                     tmp_path: Path) -> None:
    from serve_world import HANDOFFS, receipt

    url = postgres.create_database("cli")
    (tmp_path / "trust.json").write_text(json.dumps(WORLD.keyring.to_json()), "utf-8")
    (tmp_path / "receipt.json").write_bytes(receipt("routine-01"))
    gate = [HANDOFFS, "gate", "receipt.json", "--trust", "trust.json", "--as", "case-owner",
            "--role", "case-owner", "--policy", "PAY-7.4", "--log", url]
    first = subprocess.run(gate, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                           check=False)
    again = subprocess.run(gate, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                           check=False)
    # admitted but escalated (no evidence resolver): 3; the replay is refused: 1
    assert (first.returncode, again.returncode) == (3, 1), first.stderr + again.stderr
    assert json.loads(again.stdout)["reasons"][0]["code"] == "replayed"
    summary = subprocess.run([HANDOFFS, "log", "summary", url], capture_output=True,
                             text=True, timeout=60, check=True)
    counts = json.loads(summary.stdout)
    assert (counts["decisions"], counts["replays"], counts["by_verdict"]) == (
        2, 1, {"ESCALATE": 1, "REJECT": 1})


def test_a_lagging_clock_cannot_claim(postgres: PostgresServer) -> None:
    """A claim older than the server's now minus retain/2 is refused (clock-skew):
    otherwise a lagging replica could re-admit an id that was already pruned.
    """
    log = open_log(postgres.create_database("skew"), retain=timedelta(hours=1))
    real = datetime.now(UTC)
    kwargs: dict[str, Any] = {"digest": None, "message_bytes": 1, "decided_at": real}

    def claim(lag: timedelta) -> ReplayClaim:
        return ReplayClaim(receipt_id=f"lag-{lag}", expires=real + timedelta(hours=1),
                           claimed_at=real - lag)

    with pytest.raises(DecisionLogError, match="this clock lags") as info:
        log.record(_decision("lag"), claim=claim(timedelta(minutes=31)), **kwargs)
    assert info.value.code == "clock-skew"
    assert (log.count(), log.seen("lag-0:31:00")) == (0, False)
    assert log.record(_decision("lag"), claim=claim(timedelta(minutes=29)), **kwargs)
    lagging = WORLD.gate(log=log, replay=log)  # the world's clock: months behind
    decision = strict(lagging).receive(raw(WORLD.signed("routine-01")))
    assert (decision.verdict, codes(decision)) == (Verdict.REJECT, ["clock-skew"])
    assert log.count() == 1
    log.close()


def test_a_stalled_server_fails_closed_and_admits_nothing(postgres: PostgresServer) -> None:
    """Every process of the server stopped (SIGSTOP): each call returns (the deadline
    cuts the connection) and refuses; readiness fails; after the thaw, all is well.
    """
    from serve_world import receipt

    log = open_log(postgres.create_database("stall"), timeout=1, retain=timedelta(hours=1))
    gate = WORLD.gate(log=log, replay=log, clock=lambda: datetime.now(UTC))
    log.ping()
    with postgres.stalled():
        during = [strict(gate).receive(receipt(case)) for case in ("routine-01", "value-01")]
        with pytest.raises(DecisionLogError, match="cannot reach the server"):
            log.ping()
    assert [(d.admitted, codes(d)[-1]) for d in during] == [(False, "log-unavailable")] * 2
    for _ in range(100):  # a stalled store fails fast for a moment after the thaw
        try:
            log.ping()
            break
        except DecisionLogError:
            time.sleep(0.1)
    after = strict(gate).receive(receipt("routine-02"))
    assert after.admitted
    log.close()


# ------------------------------------------------------------------ group commit


def test_group_commit_batches_and_admits_each_id_once(postgres: PostgresServer) -> None:
    """Twelve threads post the same 20 ids, and 20 of their own, at once through one
    store that gathers for 50 ms: each id is admitted exactly once, every caller gets
    its own row's outcome, and the rows went in fewer transactions than decisions.
    """
    log = open_log(postgres.create_database("group"), group_commit=0.05, pool_size=4)
    until = datetime.now(UTC) + timedelta(hours=1)
    start = threading.Barrier(12)
    outcomes: list[tuple[int, str, bool]] = []
    lock = threading.Lock()

    def post(worker: int) -> None:
        start.wait()
        for receipt_id in [f"{kind}-{i}" for i in range(20) for kind in ("id", worker)]:
            claim = ReplayClaim(receipt_id=receipt_id, expires=until, claimed_at=NOW)
            won = log.record(_decision(receipt_id), claim=claim, digest=None,
                             message_bytes=worker, decided_at=NOW)
            with lock:
                outcomes.append((worker, receipt_id, won))

    threads = [threading.Thread(target=post, args=(w,)) for w in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(outcomes) == 12 * 40
    admitted = Counter(receipt_id for _, receipt_id, won in outcomes if won)
    assert admitted == Counter({f"{kind}-{i}": 1 for i in range(20)
                                for kind in ("id", *range(12))})
    rows = query(log.url, "SELECT receipt_id, message_bytes, xmin::text FROM decisions")
    assert sorted((r, w) for r, w, _ in rows) == sorted(
        (receipt_id, worker) for worker, receipt_id, won in outcomes if won)
    assert len({xmin for _, _, xmin in rows}) < len(rows)  # grouped transactions
    assert query(log.url, "SELECT count(*) FROM seen") == [(20 * 13,)]
    log.close()


def test_group_commit_answers_a_skewed_claim_alone(postgres: PostgresServer) -> None:
    """In one batch, a claim from a lagging clock is refused (clock-skew) and writes
    nothing, while its neighbour is admitted.
    """
    log = open_log(postgres.create_database("groupskew"), group_commit=0.05,
                   retain=timedelta(hours=1))
    real = datetime.now(UTC)
    start = threading.Barrier(2)
    answers: dict[str, object] = {}

    def post(receipt_id: str, lag: timedelta) -> None:
        claim = ReplayClaim(receipt_id=receipt_id, expires=real + timedelta(hours=1),
                            claimed_at=real - lag)
        start.wait()
        try:
            answers[receipt_id] = log.record(_decision(receipt_id), claim=claim, digest=None,
                                             message_bytes=1, decided_at=real)
        except DecisionLogError as exc:
            answers[receipt_id] = exc.code

    threads = [threading.Thread(target=post, args=("fresh", timedelta(0))),
               threading.Thread(target=post, args=("lagging", timedelta(minutes=31)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert answers == {"fresh": True, "lagging": "clock-skew"}
    assert query(log.url, "SELECT receipt_id FROM decisions") == [("fresh",)]
    assert query(log.url, "SELECT receipt_id FROM seen") == [("fresh",)]
    log.close()


def test_group_commit_on_a_stalled_server_fails_closed(
    postgres: PostgresServer,
) -> None:
    """With the server stopped, eight concurrent callers of a grouping store each get
    an error (fail closed; the deadline cuts the batch, a queued caller withdraws),
    and nothing is admitted.
    """
    log = open_log(postgres.create_database("groupstall"), timeout=1, group_commit=0.01,
                   retain=timedelta(hours=1))
    log.ping()
    real = datetime.now(UTC)
    answers: list[object] = []
    lock = threading.Lock()

    def post(i: int) -> None:
        claim = ReplayClaim(receipt_id=f"stall-{i}", expires=real + timedelta(hours=1),
                            claimed_at=real)
        try:
            answer: object = log.record(_decision(f"stall-{i}"), claim=claim, digest=None,
                                        message_bytes=1, decided_at=real)
        except DecisionLogError as exc:
            answer = exc.code
        with lock:
            answers.append(answer)

    with postgres.stalled():
        threads = [threading.Thread(target=post, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    assert answers == ["log-unavailable"] * 8
    for _ in range(100):  # a stalled store fails fast for a moment after the thaw
        try:
            log.ping()
            break
        except DecisionLogError:
            time.sleep(0.1)
    assert log.count() == 0
    log.close()


def test_an_unknown_scheme_is_a_typed_error() -> None:
    from handoffs.service import open_store as open_by_url

    with pytest.raises(DecisionLogError, match=r"no decision log is installed for mysql://"):
        open_by_url("mysql://u@h/db")
