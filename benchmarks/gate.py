"""Cost of the runtime gate per receipt, against the bare Ed25519 verifies it performs.

Every receipt is a signed ``payment-release`` 1.0.0 receipt carrying its own signed
authority grant, so the gate performs two Ed25519 verifies per receipt (the sender's
proof and the grant's proof). The gate runs all five steps: strict parse, proofs and
grant, audience, expiry, replay (in-memory store), the contract's three context
dependencies, evidence resolution with pinned digests, readback of every decisive
claim, and the strict receiver's policy.

Method: every operation runs over the same K distinct receipts; operations are
interleaved round-robin in one process (one discarded warm-up round, then ROUNDS
rounds), with the garbage collector off inside the timed loops. Reported: the median
time per receipt of each operation, and the *paired* ratio gate / bare verifies (the
median over rounds of the per-round ratio). The "bare verifies" operation calls
``Ed25519PublicKey.verify`` on the exact 64-byte ``hashData`` messages the gate's
proofs sign, with the public keys already loaded.

Run: ``python benchmarks/gate.py [--receipts K] [--rounds R]``. The last line is the
headline: ``gate/verify ratio: <x>``.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from handoffs._json import canonical_bytes, dumps, loads
from handoffs.contracts import Authority, EvidenceRef, Governance, Receipt, compose, payment
from handoffs.contracts._keys import KeyRing, SigningKey, _b58decode_or_none
from handoffs.contracts._signing import issue_grant, sign_receipt, verify_receipt
from handoffs.receivers import (
    Gate,
    InMemoryEvidenceResolver,
    InMemoryPolicyService,
    MemoryReplayStore,
    Readback,
    ResolvedEvidence,
    SQLiteDecisionLog,
    StrictContractReceiver,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
    Verdict,
)

T0 = datetime(2026, 6, 1, 12, tzinfo=UTC)
NOW = T0 + timedelta(minutes=1)
CONTRACT = payment.PAYMENT_RELEASE


def build(count: int) -> dict[str, Any]:
    """Keys, a trust ring, ``count`` signed receipts and their evidence."""
    service, sender = SigningKey.generate(), SigningKey.generate()
    since = T0 - timedelta(days=30)
    ring = (
        KeyRing()
        .enrol(service.public_key_multibase, controller="policy-service",
               roles=["policy-service"], not_before=since, purposes=["capabilityDelegation"])
        .enrol(sender.public_key_multibase, controller="evidence-specialist",
               roles=["proposer"], not_before=since)
    )
    encoder = payment.decision_contract_encoder()
    variants = -(-count // 7)
    cases = list(payment.synthetic_cases(variants))[:count]
    evidence: dict[str, ResolvedEvidence] = {}
    messages: list[bytes] = []
    for case in cases:
        refs = []
        for uri in case.evidence_refs:
            kind = uri.rsplit("/", 1)[1]
            claims = {
                "identity": {"identity_verified": case.identity_verified},
                "screening": {"screening_clear": case.screening_clear,
                              "duplicate_signal": case.duplicate_signal},
                "policy": {"policy_current": case.policy_current,
                           "evidence_conflict": case.evidence_conflict,
                           "high_value": case.high_value},
            }[kind]
            found = ResolvedEvidence(content=f"authoritative record {uri}".encode(),
                                     observed_at=T0 - timedelta(hours=1), claims=claims)
            evidence[uri] = found
            refs.append(EvidenceRef(uri, found.digest))
        governance = Governance(
            case_id=case.case_id, sender="evidence-specialist", receiver="case-owner",
            authority=Authority.ADVISE, policy_version="PAY-7.4",
            valid_until=T0 + timedelta(hours=1), evidence_refs=tuple(refs),
        )
        doc = compose(encoder.encode(case), governance, contract=CONTRACT)
        grant = issue_grant(
            service, issuer="policy-service", subject="evidence-specialist",
            audience="case-owner", contract=CONTRACT, case_id=case.case_id,
            policy_version="PAY-7.4", authority=[Authority.ADVISE],
            valid_until=T0 + timedelta(hours=2), created=T0,
        )
        receipt = sign_receipt(Receipt.from_json(doc), sender, grant=grant, created=T0)
        messages.append(dumps(receipt.to_json()).encode())
    return {"ring": ring, "messages": messages, "evidence": evidence}


def bare_verifies(world: dict[str, Any]) -> list[tuple[Ed25519PublicKey, bytes, bytes]]:
    """The (key, signature, hashData) triples of the two proofs on every receipt."""
    keys = {e.verification_method: Ed25519PublicKey.from_public_bytes(e.public_key_bytes)
            for e in world["ring"]}
    triples = []
    for message in world["messages"]:
        doc = loads(message)
        for secured in (doc["grant"], doc):
            proof = secured["proof"]
            config = {k: v for k, v in proof.items() if k != "proofValue"}
            unsecured = {k: v for k, v in secured.items() if k != "proof"}
            data = (hashlib.sha256(canonical_bytes(config)).digest()
                    + hashlib.sha256(canonical_bytes(unsecured)).digest())
            signature = _b58decode_or_none(proof["proofValue"][1:])
            assert signature is not None
            key = keys[proof["verificationMethod"]]
            key.verify(signature, data)  # the triple is exactly what the gate checks
            triples.append((key, signature, data))
    return triples


def gate_for(world: dict[str, Any], **options: Any) -> Gate:
    config: dict[str, Any] = {
        "identity": "case-owner",
        "trust": world["ring"],
        "roles": {"case-owner"},
        "policy_service": InMemoryPolicyService({"PAY-7.4": True}),
        "evidence": InMemoryEvidenceResolver(world["evidence"]),
        "clock": lambda: NOW,
        "readback": Readback.ALWAYS,
    }
    config.update(options)
    return Gate(**config)


def timed(setup: Callable[[], Callable[[], None]]) -> Callable[[], float]:
    """An operation: ``setup`` (untimed) returns the loop to time; result in seconds."""

    def run() -> float:
        loop = setup()
        gc.disable()
        try:
            start = time.perf_counter_ns()
            loop()
            return (time.perf_counter_ns() - start) / 1e9
        finally:
            gc.enable()

    return run


def operations(world: dict[str, Any], tmp: Path) -> dict[str, Callable[[], float]]:
    """The timed operations, each over every receipt."""
    messages: list[bytes] = world["messages"]
    triples = world["triples"]
    counter = iter(range(10**9))

    def over_messages(receive: Callable[[bytes], Any]) -> Callable[[], None]:
        def loop() -> None:
            for message in messages:
                receive(message)
        return loop

    def bare() -> Callable[[], None]:
        def loop() -> None:
            for key, signature, data in triples:
                key.verify(signature, data)
        return loop

    def gate_memory() -> Callable[[], None]:
        gate = gate_for(world, replay=MemoryReplayStore())
        return over_messages(StrictContractReceiver(gate).receive)

    def gate_sqlite() -> Callable[[], None]:
        log = SQLiteDecisionLog(tmp / f"log-{next(counter)}.sqlite")
        return over_messages(StrictContractReceiver(gate_for(world, replay=log, log=log)).receive)

    def parse_only() -> Callable[[], None]:
        return over_messages(loads)

    def parse_and_verify() -> Callable[[], None]:
        ring = world["ring"]

        def loop() -> None:
            for message in messages:
                verify_receipt(loads(message), ring, now=NOW, audience="case-owner")
        return loop

    def gate_unsafe() -> Callable[[], None]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnsafeConfigurationWarning)
            gate = gate_for(world, trust=UnsafeNoProofs(), replay=MemoryReplayStore())
        return over_messages(StrictContractReceiver(gate).receive)

    return {
        BARE: timed(bare),
        GATE: timed(gate_memory),
        GATE_SQLITE: timed(gate_sqlite),
        "  of which: strict parse": timed(parse_only),
        VERIFY: timed(parse_and_verify),
        "gate without crypto (Unsafe)": timed(gate_unsafe),
    }


BARE = "bare Ed25519 verifies"
GATE = "gate, all steps (memory replay)"
GATE_SQLITE = "gate, all steps + SQLite log"
VERIFY = "  of which: parse + verify_receipt"


def paired(samples: dict[str, list[float]], name: str) -> float:
    """Median over rounds of the per-round ratio ``name`` / bare verifies."""
    return statistics.median(g / b for g, b in zip(samples[name], samples[BARE], strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--receipts", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    world = build(args.receipts)
    world["triples"] = bare_verifies(world)
    count = len(world["messages"])
    ops = operations(world, Path(tempfile.mkdtemp(prefix="handoffs-bench-")))

    # Self-check: every receipt is admitted, read back and agrees with its evidence.
    check = StrictContractReceiver(gate_for(world))
    assert all(d.verdict is Verdict.ACCEPT and d.readback == "agree"
               for d in map(check.receive, world["messages"]))

    samples: dict[str, list[float]] = {name: [] for name in ops}
    for round_ in range(args.rounds + 1):
        for name, operation in ops.items():
            seconds = operation()
            if round_:  # round 0 warms up
                samples[name].append(seconds / count * 1e6)

    median = {name: statistics.median(values) for name, values in samples.items()}
    print(f"python {sys.version.split()[0]}, {count} distinct signed receipts, "
          f"{len(world['triples']) / count:g} Ed25519 verifies each, {args.rounds} "
          "interleaved rounds")
    print(f"{'operation':40} {'median µs/receipt':>18} {'min':>8} {'receipts/s':>11}")
    for name, values in samples.items():
        print(f"{name:40} {median[name]:18.1f} {min(values):8.1f} "
              f"{1e6 / median[name]:11,.0f}")
    parse = median["  of which: strict parse"]
    print(f"beyond the bare verifies: strict parse {parse:.1f} µs, verify_receipt's other work "
          f"{median[VERIFY] - parse - median[BARE]:.1f} µs, the gate's own steps "
          f"{median[GATE] - median[VERIFY]:.1f} µs")
    print(f"receipts/s on one core: {1e6 / median[GATE]:,.0f} (memory replay), "
          f"{1e6 / median[GATE_SQLITE]:,.0f} (SQLite decision log)")
    print(f"gate+SQLite/verify ratio: {paired(samples, GATE_SQLITE):.2f}")
    print(f"gate/verify ratio: {paired(samples, GATE):.2f}")


if __name__ == "__main__":
    main()
