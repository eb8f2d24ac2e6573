"""The PostgreSQL store's schema: its tables in the ``handoffs`` schema, the versioned
migrations that create them, run once under an advisory lock, and the refusal of a
schema newer than this code (``log-version``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from handoffs._logs import DecisionLogError

if TYPE_CHECKING:
    import psycopg

__all__ = ["migrate"]

_SCHEMA_VERSION: Final = "4"
# An arbitrary constant: the advisory lock that serialises migrations across replicas.
_MIGRATION_LOCK: Final = 0x68616E64

_MIGRATIONS: Final = {
    1: """
CREATE TABLE handoffs.decisions (
    seq BIGSERIAL PRIMARY KEY,
    decided_at TIMESTAMPTZ NOT NULL,
    recorded_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    receipt_id TEXT,
    digest TEXT,
    contract TEXT,
    version TEXT,
    sender TEXT,
    receiver TEXT NOT NULL,
    step SMALLINT NOT NULL,
    verdict TEXT NOT NULL,
    action TEXT,
    authority TEXT,
    reasons JSONB NOT NULL,
    readback TEXT,
    counterfactual_trigger TEXT,
    message_bytes INTEGER NOT NULL,
    message BYTEA,
    pid INTEGER NOT NULL
);
CREATE INDEX decisions_receipt ON handoffs.decisions (receipt_id);
CREATE TABLE handoffs.decision_reasons (
    decision BIGINT NOT NULL REFERENCES handoffs.decisions (seq),
    code TEXT NOT NULL,
    step SMALLINT NOT NULL
);
CREATE INDEX decision_reasons_code ON handoffs.decision_reasons (code);
CREATE TABLE handoffs.seen (
    receipt_id TEXT PRIMARY KEY,
    first_seen TIMESTAMPTZ NOT NULL,
    expires TIMESTAMPTZ NOT NULL,
    recorded_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    pid INTEGER NOT NULL
);
CREATE INDEX seen_expires ON handoffs.seen (expires);
""",
    # Version 2: refused rows are pruned by age (``refused_retain``).
    # The reasons' foreign key goes: each row and its reasons are one statement, and
    # its check was a second (internal) query per decision.
    2: """
CREATE INDEX decisions_refused ON handoffs.decisions (recorded_at) WHERE verdict = 'REJECT';
ALTER TABLE handoffs.decision_reasons DROP CONSTRAINT IF EXISTS decision_reasons_decision_fkey;
""",
    # Version 3: the reason codes are read from each row's ``reasons`` (which always
    # held them, with their steps): ``decision_reasons`` becomes a view over it, so a
    # decision is one heap row and its indexes instead of one more row and index entry
    # per reason. Every old ``decision_reasons`` row repeats its decision's ``reasons``.
    # The index on ``decisions.receipt_id`` goes too (a write per decision that no
    # query of the gate reads; an auditor may create it back, see the how-to).
    3: """
DROP TABLE handoffs.decision_reasons;
CREATE VIEW handoffs.decision_reasons AS
    SELECT d.seq AS decision, r.code, r.step
    FROM handoffs.decisions d,
        jsonb_to_recordset(d.reasons) AS r (code text, step smallint);
DROP INDEX handoffs.decisions_receipt
""",
    # Version 4: the sender's proposal beside the decided action (``proposed_action``:
    # the admitted receipt's ``proposed_action``; NULL for a refusal and for rows
    # written before), so that ``handoffs log watch`` measures the decided-otherwise rate.
    4: """
ALTER TABLE handoffs.decisions ADD COLUMN proposed_action TEXT
""",
}


def migrate(conn: psycopg.Connection[Any], where: str) -> None:
    """Create or migrate the schema to the current schema version (one transaction).

    Raises:
        DecisionLogError: code ``log-version``: the schema is newer than this code.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute("CREATE SCHEMA IF NOT EXISTS handoffs")
        conn.execute("CREATE TABLE IF NOT EXISTS handoffs.meta "
                     "(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        row = conn.execute(
            "SELECT value FROM handoffs.meta WHERE key = 'schema_version'").fetchone()
        current = 0 if row is None else _version(row[0], where)
        for version in range(current + 1, int(_SCHEMA_VERSION) + 1):
            for statement in _MIGRATIONS[version].split(";"):
                if statement.strip():
                    conn.execute(statement)
        conn.execute(
            "INSERT INTO handoffs.meta (key, value) VALUES ('schema_version', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (_SCHEMA_VERSION,))


def _version(value: str, where: str) -> int:
    if value.isdigit() and 1 <= int(value) <= int(_SCHEMA_VERSION):
        return int(value)
    raise DecisionLogError(
        f"decision log schema version {value!r} in {where} is not {_SCHEMA_VERSION!r} or "
        "older (written by a newer handoffs?)",
        code="log-version",
    )

