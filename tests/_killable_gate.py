"""A gate process for the kill -9 tests: decides receipts from a file, acknowledges each.

Run as ``python _killable_gate.py STORE RING MESSAGES``; prints ``<receipt id> <verdict>``
on standard output (flushed) after each decision, so that the parent knows which
decisions were acknowledged before it kills this process with SIGKILL.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from handoffs.integrity import KeyRing
from handoffs.receivers import (
    Gate,
    InMemoryEvidenceResolver,
    InMemoryPolicyService,
    StrictContractReceiver,
)

NOW = datetime(2026, 6, 1, 12, 1, tzinfo=UTC)


def main(store_url: str, ring_path: str, messages_path: str) -> None:
    from stores import open_log
    from worlds.gate import ALL_EVIDENCE, CONTRACT

    log = open_log(store_url)
    gate = Gate(identity="case-owner", trust=KeyRing.from_json(json.loads(
        Path(ring_path).read_text("utf-8"))), registry=CONTRACT, roles={"case-owner"},
        policy_service=InMemoryPolicyService({"PAY-7.4": True}), clock=lambda: NOW,
        evidence=InMemoryEvidenceResolver(ALL_EVIDENCE), replay=log, log=log)
    receiver = StrictContractReceiver(gate)
    out = sys.stdout
    for line in Path(messages_path).read_bytes().splitlines():
        decision = receiver.receive(line)
        out.write(f"{decision.receipt_id} {decision.verdict.value}\n")
        out.flush()


if __name__ == "__main__":
    sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parent / "unit")]
    main(*sys.argv[1:4])
