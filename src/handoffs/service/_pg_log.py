"""The PostgreSQL store's decision log: a refusal's row (one statement), and a claim with
its decision row in one statement, alone or by group commit with concurrent claims.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import orjson

from handoffs._errors import InvalidArgument
from handoffs._logs import DecisionLogError, ReplayClaim
from handoffs.receivers import Decision
from handoffs.service._pg_connection import _Connection

__all__ = ["_DecisionLogRows", "stamp"]

# Each write is one statement with one parameter, a JSON document: the client
# serialises it once (orjson) instead of adapting some twenty parameters, and the
# server unpacks it in one pass (``jsonb_to_record``) into typed columns.
_FIELDS: Final = """
    decided_at timestamptz, receipt_id text, digest text, contract text, version text,
    sender text, receiver text, step smallint, verdict text, action text,
    proposed_action text, authority text, reasons jsonb, readback text,
    counterfactual_trigger text, message_bytes integer, message bytea, pid integer,
    prune boolean, refused_retain interval, claim text, claimed_at timestamptz,
    expires timestamptz, retain interval, skew interval
"""
_ROW: Final = """
    INSERT INTO handoffs.decisions (decided_at, receipt_id, digest, contract, version, sender,
        receiver, step, verdict, action, proposed_action, authority, reasons, readback,
        counterfactual_trigger, message_bytes, message, pid)
    SELECT decided_at, receipt_id, digest, contract, version, sender, receiver, step, verdict,
        action, proposed_action, authority, reasons, readback, counterfactual_trigger,
        message_bytes, message, pid
    FROM p
"""
# Pruning, the skew check, the claims (replay detection) and the decision rows of one
# or more decisions (``n`` numbers them; their ids are distinct) in one statement (one
# transaction, one round trip). Each answers whether its clock was fresh and its claim won.
_RECORD: Final = f"""
WITH p AS MATERIALIZED (SELECT * FROM jsonb_to_recordset(%s::jsonb) AS j ({_FIELDS}, n integer)),
pruned AS (
    DELETE FROM handoffs.seen
    WHERE (SELECT bool_or(prune) FROM p) AND expires < now() - (SELECT max(retain) FROM p)
),
fresh AS (SELECT n, claimed_at >= now() - skew AS ok FROM p),
won AS (
    INSERT INTO handoffs.seen (receipt_id, first_seen, expires, pid)
    SELECT claim, claimed_at, expires, pid FROM p JOIN fresh USING (n) WHERE fresh.ok
    ON CONFLICT (receipt_id) DO NOTHING
    RETURNING receipt_id
),
drow AS ({_ROW} WHERE p.claim IN (SELECT receipt_id FROM won) RETURNING seq)
SELECT n, ok, claim IN (SELECT receipt_id FROM won) FROM p JOIN fresh USING (n)
"""
# A refusal: its row, and (every ``prune_every`` writes) refused rows past
# ``refused_retain`` by the server's clock forgotten, in one statement.
_APPEND: Final = f"""
WITH p AS MATERIALIZED (SELECT * FROM jsonb_to_record(%s::jsonb) AS j ({_FIELDS})),
old_rows AS (
    DELETE FROM handoffs.decisions WHERE seq IN (
        SELECT seq FROM handoffs.decisions
        WHERE (SELECT prune AND refused_retain IS NOT NULL FROM p)
            AND verdict = 'REJECT'
            AND recorded_at < now() - (SELECT refused_retain FROM p)
        LIMIT 10000)
),
drow AS ({_ROW} RETURNING seq)
SELECT count(*) FROM drow
"""

# The most decisions one group commit records in one statement.
_BATCH_MAX: Final = 64


class _Pending:
    """One decision waiting to be recorded (group commit)."""

    __slots__ = ("claim_id", "deadline", "document", "error", "finished", "lead", "outcome",
                 "wake")

    def __init__(self, document: dict[str, Any], claim_id: str, deadline: float) -> None:
        self.document = document
        self.claim_id = claim_id
        self.deadline = deadline
        # Only a decision that waits for another's statement needs one (_join).
        self.wake: threading.Event | None = None
        self.finished = False
        self.lead = False
        self.outcome = (False, False)
        self.error: DecisionLogError | None = None


def stamp(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    # isoformat, not strftime: the same text for UTC, at a fraction of the cost.
    utc = moment if moment.tzinfo is UTC else moment.astimezone(UTC)
    return utc.isoformat(timespec="microseconds")[:-6] + "Z"


def _interval(span: timedelta | None) -> str | None:
    return None if span is None else f"{span.total_seconds():.6f} seconds"


def _document(document: dict[str, Any]) -> tuple[str]:
    return (orjson.dumps(document).decode(),)


class _DecisionLogRows(_Connection):
    """Writing decision rows (and the claims that come with them)."""

    keep_messages: bool
    retain: timedelta
    prune_every: int
    refused_retain: timedelta | None
    group_commit: float
    _group: threading.Lock
    _full: threading.Event
    _queue: list[_Pending]
    _flushing: bool

    def _params(
        self,
        decision: Decision,
        *,
        digest: str | None,
        message_bytes: int,
        message: bytes | None,
        decided_at: datetime,
        proposed_action: str | None,
    ) -> dict[str, Any]:
        if decided_at.tzinfo is None:
            raise InvalidArgument("times must be timezone-aware")
        name, _, version = (decision.contract or "").partition("/")
        self._writes += 1
        return {
            "decided_at": stamp(decided_at), "receipt_id": decision.receipt_id,
            "digest": digest, "contract": name or None, "version": version or None,
            "sender": decision.sender, "receiver": decision.receiver,
            "step": int(decision.step), "verdict": decision.verdict.value,
            "action": decision.action, "proposed_action": proposed_action,
            "authority": decision.authority,
            "reasons": [r.to_json() for r in decision.reasons],
            "readback": decision.readback,
            "counterfactual_trigger": decision.counterfactual_trigger,
            "message_bytes": int(message_bytes),
            "message": ("\\x" + message.hex()
                        if self.keep_messages and message is not None else None),
            "pid": os.getpid(),
            "prune": self._writes % self.prune_every == 0,
            "refused_retain": _interval(self.refused_retain),
        }

    def append(
        self,
        decision: Decision,
        *,
        digest: str | None,
        message_bytes: int,
        message: bytes | None = None,
        decided_at: datetime,
        proposed_action: str | None = None,
    ) -> None:
        """Record one decision (one row; its reason codes are in ``reasons``).

        ``proposed_action`` is the sender's proposal (the admitted receipt's
        ``proposed_action``; ``None`` for a refusal), kept beside the decided action.

        Raises:
            DecisionLogError: the row could not be written.
        """
        params = _document(self._params(decision, digest=digest, message_bytes=message_bytes,
                                        message=message, decided_at=decided_at,
                                        proposed_action=proposed_action))
        self._run(lambda conn: conn.execute(_APPEND, params, prepare=True),
                  what="append a decision")

    def record(
        self,
        decision: Decision,
        *,
        claim: ReplayClaim,
        digest: str | None,
        message_bytes: int,
        message: bytes | None = None,
        decided_at: datetime,
        proposed_action: str | None = None,
    ) -> bool:
        """Claim ``claim.receipt_id`` and append ``decision`` in one statement.

        Returns False and writes nothing when the id was claimed before.

        Raises:
            DecisionLogError: nothing was written (or, if the connection broke during
                the commit, it cannot be known; a retry then finds the id claimed);
                code ``clock-skew`` when ``claim.claimed_at`` is older than the
                server's ``now()`` minus ``retain / 2``.
        """
        if claim.claimed_at.tzinfo is None or claim.expires.tzinfo is None:
            raise InvalidArgument("times must be timezone-aware")
        document = self._params(decision, digest=digest, message_bytes=message_bytes,
                                message=message, decided_at=decided_at,
                                proposed_action=proposed_action)
        document.update(claim=claim.receipt_id, claimed_at=stamp(claim.claimed_at),
                        expires=stamp(claim.expires), retain=_interval(self.retain),
                        skew=_interval(self.retain / 2))
        entry = _Pending(document, claim.receipt_id, time.monotonic() + self.timeout)
        if self.group_commit > 0:
            self._join(entry)
        else:
            self._flush([entry])
        if entry.error is not None:
            raise entry.error
        fresh, won = entry.outcome
        if not fresh:
            raise DecisionLogError(
                f"the claim of receipt {claim.receipt_id} was made at "
                f"{stamp(claim.claimed_at)} by this process's clock, more than "
                f"retain/2 = {self.retain / 2} before the store's clock: this clock lags",
                code="clock-skew")
        return won

    def _flush(self, batch: list[_Pending]) -> None:
        """Record ``batch`` (distinct ids) in one statement; each entry gets its outcome."""
        for n, entry in enumerate(batch):
            entry.document["n"] = n
        params = (orjson.dumps([entry.document for entry in batch]).decode(),)
        try:
            rows = self._run(lambda conn: conn.execute(_RECORD, params, prepare=True).fetchall(),
                             what="record a decision",
                             deadline=min(entry.deadline for entry in batch))
        except DecisionLogError as exc:
            for entry in batch:
                entry.error = exc
        else:
            answered = {int(n): (bool(ok), bool(won)) for n, ok, won in rows}
            for n, entry in enumerate(batch):
                if n in answered:
                    entry.outcome = answered[n]
                else:  # cannot happen: every input row is answered
                    entry.error = DecisionLogError(
                        f"cannot record a decision in {self.where}: no answer for it")
        for entry in batch:
            entry.finished = True
            if entry.wake is not None:
                entry.wake.set()

    def _join(self, entry: _Pending) -> None:
        """Group commit: queue ``entry``; one caller at a time (the leader) records
        everything queued in one statement, then hands the lead to the next waiter.
        A waiter still queued at its deadline withdraws (nothing of it was written).
        """
        with self._group:
            self._queue.append(entry)
            if len(self._queue) >= _BATCH_MAX:
                self._full.set()
            lead = not self._flushing
            self._flushing = True
            if not lead:
                entry.wake = wake = threading.Event()
        if not lead:
            wake.wait(max(0.0, entry.deadline - time.monotonic()))
            with self._group:
                if not entry.finished and not entry.lead and entry in self._queue:
                    self._queue.remove(entry)
                    entry.error = DecisionLogError(
                        f"cannot record a decision in {self.where}: not sent within the "
                        f"{self.timeout:g} s timeout (the server is slow or stalled?)")
                    return
            # In a batch under way (bounded by its deadline, ours or earlier), or leading.
            wake.wait(self.timeout + 1.0)
            if not entry.finished and not entry.lead:
                entry.error = DecisionLogError(
                    f"cannot record a decision in {self.where}: no outcome within the "
                    f"{self.timeout:g} s timeout (it may have been recorded)")
                return
        while not entry.finished:
            with self._group:
                waiting = len(self._queue) > 1
            if waiting:  # others wait too: gather for the window, or a full batch
                self._full.wait(self.group_commit)
            # else commit at once: batches form under concurrency from the decisions
            # that queue while a statement is under way (adaptive group commit)
            with self._group:
                batch: list[_Pending] = []
                ids: set[str] = set()
                for queued in self._queue:
                    if queued.claim_id not in ids and len(batch) < _BATCH_MAX:
                        ids.add(queued.claim_id)
                        batch.append(queued)
                self._queue = [queued for queued in self._queue if queued not in batch]
                if len(self._queue) < _BATCH_MAX:
                    self._full.clear()
            self._flush(batch)
        with self._group:
            if self._queue:
                follower = self._queue[0]
                follower.lead = True
                assert follower.wake is not None  # noqa: S101 - every follower has one
                follower.wake.set()
            else:
                self._flushing = False
