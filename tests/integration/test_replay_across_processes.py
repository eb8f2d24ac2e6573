"""The SQLite decision log and replay store shared by processes (``multiprocessing``,
spawned): no row lost, each receipt and each chain admitted once across processes (the
in-process tests are in ``tests/unit/test_decision_log.py`` and ``tests/unit/test_hostile.py``)."""

from __future__ import annotations

import multiprocessing
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs

from handoffs.receivers import (
    Decision,
    InMemoryEvidenceResolver,
    Reason,
    SQLiteDecisionLog,
    Step,
    Verdict,
)
from worlds.chains import STANDARD, make_chain
from worlds.gate import ALL_EVIDENCE, CONTRACT, NOW, RECEIVER, WORLD, codes, raw, strict

R, E = Verdict.REJECT, Step.PROOFS

_WRITERS, _ROWS, _SHARED = 4, 120, 60


def _writer(db: str, worker: int) -> list[str]:
    log = SQLiteDecisionLog(db)
    won = []
    decision = Decision(verdict=Verdict.REJECT, action="ESCALATE", step=Step.PROOFS,
                        reasons=(Reason("replayed", "seen", Step.PROOFS),), receiver="w")
    for i in range(_ROWS):
        log.append(attrs.evolve(decision, receipt_id=f"w{worker}-{i}"), digest=None,
                   message_bytes=i, decided_at=NOW)
        if i < _SHARED and log.first_seen(f"shared-{i}", expires=NOW + timedelta(hours=1),
                                          now=NOW):
            won.append(f"shared-{i}")
    log.close()
    return won


def test_concurrent_processes_lose_no_row_and_admit_each_id_once(db: str) -> None:
    SQLiteDecisionLog(db).close()
    with multiprocessing.get_context("spawn").Pool(_WRITERS) as pool:
        results = pool.starmap(_writer, [(db, w) for w in range(_WRITERS)])
    won = [receipt for batch in results for receipt in batch]
    assert sorted(won) == sorted(f"shared-{i}" for i in range(_SHARED))  # exactly once each
    with SQLiteDecisionLog(db) as log:
        assert log.count() == _WRITERS * _ROWS
        assert log.summary().by_reason == {"replayed": _WRITERS * _ROWS}
    with sqlite3.connect(db) as conn:
        ids = {r[0] for r in conn.execute("SELECT receipt_id FROM decisions")}
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert ids == {f"w{w}-{i}" for w in range(_WRITERS) for i in range(_ROWS)}


def _gate_worker(db: str, messages: list[bytes], ring: dict[str, Any]) -> list[str]:
    from handoffs.integrity import KeyRing
    from handoffs.receivers import Gate, InMemoryPolicyService, StrictContractReceiver

    log = SQLiteDecisionLog(db)
    gate = Gate(identity="case-owner", trust=KeyRing.from_json(ring), registry=CONTRACT,
                roles={"case-owner"},
                policy_service=InMemoryPolicyService({"PAY-7.4": True}),
                evidence=InMemoryEvidenceResolver(ALL_EVIDENCE), clock=lambda: NOW,
                replay=log, log=log)
    receiver = StrictContractReceiver(gate)
    verdicts = [receiver.receive(m).verdict.value for m in messages]
    log.close()
    return verdicts


def test_gates_in_several_processes_admit_each_receipt_once(db: str) -> None:
    messages = [raw(WORLD.signed(case_id)) for case_id in ("routine-01", "policy-01",
                                                           "value-02", "conflict-04")] * 3
    ring = WORLD.keyring.to_json()
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        results = pool.starmap(_gate_worker, [(db, messages, ring)] * 3)
    verdicts = [v for batch in results for v in batch]
    assert verdicts.count("ACCEPT") == 4  # four distinct receipts, each admitted once
    assert verdicts.count("REJECT") == len(verdicts) - 4
    with SQLiteDecisionLog(db) as log:
        assert log.count() == len(verdicts)
        assert log.summary().replays == len(verdicts) - 4


def _gate_in_another_process(db: str, message: bytes, ring: dict[str, Any]) -> dict[str, Any]:
    from handoffs.integrity import KeyRing
    from handoffs.receivers import Gate, InMemoryPolicyService, SQLiteDecisionLog
    from handoffs.receivers import InMemoryEvidenceResolver as Resolver
    from handoffs.receivers import StrictContractReceiver as Strict

    log = SQLiteDecisionLog(db)
    gate = Gate(identity=RECEIVER, trust=KeyRing.from_json(ring), registry=CONTRACT,
                roles={"case-owner"},
                policy_service=InMemoryPolicyService({"PAY-7.4": True}),
                evidence=Resolver(ALL_EVIDENCE), clock=lambda: NOW, replay=log, log=log)
    return Strict(gate).receive(message).to_json()


def test_a_replay_from_a_second_process_is_refused(tmp_path: Path) -> None:
    db = str(tmp_path / "decisions.sqlite")
    message = raw(WORLD.signed())
    ring = WORLD.keyring.to_json()
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        first = pool.apply(_gate_in_another_process, (db, message, ring))
    assert first["verdict"] == "ACCEPT"
    log = SQLiteDecisionLog(db)  # a restart: a new process-local store on the same file
    second = strict(WORLD.gate(replay=log, log=log)).receive(message)
    assert (second.verdict, codes(second), second.step) == (R, ["replayed"], E)
    assert log.summary().replays == 1
    log.close()


def _chain_receiver_in_another_process(db: str, message: dict[str, Any]) -> dict[str, Any]:
    from handoffs.service import open_store
    from worlds.chains import receiver as chain_receiver

    store = open_store(db)
    try:
        return chain_receiver(replay=store).receive(message).to_json()
    finally:
        store.close()


def test_a_chain_replay_from_a_second_process_is_refused(tmp_path: Path) -> None:
    from handoffs.service import open_store
    from worlds.chains import receiver as chain_receiver

    db = str(tmp_path / "chains.sqlite")
    doc = make_chain(STANDARD).to_json()
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        first = pool.apply(_chain_receiver_in_another_process, (db, doc))
    assert first["verdict"] == "ACCEPT"
    store = open_store(db)
    try:
        second = chain_receiver(replay=store).receive(doc)
    finally:
        store.close()
    assert (second.verdict, codes(second), second.step) == (R, ["replayed"], E)
