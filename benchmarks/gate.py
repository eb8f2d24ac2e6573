"""Cost of the runtime gate per receipt, against the bare Ed25519 verifies it performs
and against the peer a user would otherwise build.

Every receipt is a signed ``payment-release`` 1.0.0 receipt carrying its own signed
authority grant, so the gate performs two Ed25519 verifies per receipt (the sender's
proof and the grant's proof). The gate runs all five steps: strict parse, proofs and
grant, audience, expiry, replay (in-memory store), the contract's three context
dependencies, evidence resolution with pinned digests, readback of every decisive
claim, and the strict receiver's policy. The same gate is also timed on the receipts
as text (``str``) and parsed (``dict``), the forms frameworks often hand over.

The **peer** receives the same receipts (same content, same keys) secured the way a
user without this library would: the receipt is a JWS (PyJWT, EdDSA) whose payload
carries the authority grant as a nested JWS signed by the policy service; the
receiver reads each ``kid`` from its key table, verifies both signatures with PyJWT,
parses the payloads with ``json``, validates the receipt against the contract's JSON
Schema with jsonschema-rs (the ``grant`` member a string, no ``proof``), and applies
the same binding (signer is the sender, grant issuer holds ``policy-service``, grant
binds issuer, subject, audience, case, contract, policy version, authority and the
latest validity), audience, expiry, freshness and replay checks. Freshness is the
gate's: each payload carries the signing time as ``iat`` (RFC 7519 NumericDate, what
the proof's ``created`` is to the gate); neither may lie more than the gate's clock
skew in the future, and the receipt's must be younger than the contract's
``max_proof_age``. Then it makes the gate's steps (3)-(5) the way a hand-written
receiver would (``PeerReceiver._decide``): policy version current, receiver role,
screening evidence fresh, every reference resolved with its pinned digest, every decisive
claim read back, the contract's rules recomputed. The same peer without those steps is
timed too (``steps (1)-(2) only``, the first measure of issue 20): it is less work than
the gate, so its ratio is printed for information beside the headline.

Method: every operation runs over the same K distinct receipts; operations are
interleaved round-robin in one process (one discarded warm-up round, then ROUNDS
rounds), with the garbage collector off inside the timed loops. Time is the thread's
CPU time (``time.thread_time_ns``), so other processes on a shared machine cost less
than with wall time. Reported: the median per receipt of each operation, and *paired*
ratios (the median over rounds of the per-round ratio). The "bare verifies" operation
calls ``Ed25519PublicKey.verify`` (cryptography) on the exact 64-byte ``hashData``
messages the gate's proofs sign, with the public keys already loaded.

The **floor** is the compiled library calls the gate's accept path makes, and nothing
else: orjson's parse and sorted re-serialisation (the exact-parse check), jsonschema-rs
``is_valid``, and for the receipt and its grant the two JCS serialisations (orjson,
sorted keys), the two SHA-256 digests, the base58 decoding and the verify. It checks
nothing (no key validity, binding, audience, time, replay, typed receipt, context,
evidence, readback or policy), so no accept path built on these helpers costs less; its
ratio to the bare verifies is what is left, under a gate/verify target, for every check.

Run: ``python benchmarks/gate.py [--receipts K] [--rounds R] [--quick]`` (needs the ``bench``
extra: PyJWT for the peer, based58 as the ``fast`` extra installs it). The line before
the headline is ``floor/verify ratio: <x>``; the last two lines are the headline:
``gate/peer ratio: <x>`` and ``gate/verify ratio: <x>``.

``--compiled PATH`` measures a compiled build of handoffs (say, modules compiled by mypyc
into a copy of ``src``, or a compiled wheel installed with ``pip install --target PATH``)
beside this process's own, pure build: one child process per build, the same operations,
their rounds interleaved (which build goes first alternates), one warm-up round each. The
table gains each operation's compiled median and its compiled/pure ratio paired per round;
before the headline (which stays the pure build's) come the compiled modules' names,
``compiled/pure gate CPU ratio`` (with every round's ratio), the same for the peer as the
control (it runs no handoffs code: its spread is the noise between the two processes),
``compiled gate/verify ratio`` and ``compiled gate/peer ratio``. It refuses a PATH that
imports no compiled module, and a pure build that does.
"""

from __future__ import annotations

import argparse
import ast
import base64
import gc
import hashlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tokenize
import warnings
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import based58
import jsonschema_rs
import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from jwt import PyJWS
from jwt.exceptions import InvalidSignatureError
from nacl.bindings import crypto_sign_open
from nacl.exceptions import BadSignatureError

from handoffs._json import canonical_bytes, dumps, loads
from handoffs._time import CLOCK_SKEW
from handoffs.contracts import Authority, EvidenceFresh, EvidenceRef, Governance, Receipt
from handoffs.contracts._schema import _fast_validator
from handoffs.contracts._signing import issue_grant, sign_receipt, verify_receipt
from handoffs.examples import payment
from handoffs.integrity import KeyRing, SigningKey
from handoffs.integrity._base58 import _b58decode_or_none
from handoffs.receivers import (
    Gate,
    InMemoryEvidenceResolver,
    InMemoryPolicyService,
    MemoryReplayStore,
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


def build(count: int, notes: str | None = None) -> dict[str, Any]:
    """Keys, a trust ring, ``count`` signed receipts (with ``notes``) and their evidence."""
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
    tokens: list[bytes] = []
    jws = PyJWS()
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
        content = encoder.encode(case)  # the JSON content members
        if notes is not None:
            content = {**content, "notes": notes}
        doc = Receipt.build(CONTRACT, content, governance)
        grant = issue_grant(
            service, issuer="policy-service", subject="evidence-specialist",
            audience="case-owner", contract=CONTRACT, case_id=case.case_id,
            policy_version="PAY-7.4", authority=[Authority.ADVISE],
            valid_until=T0 + timedelta(hours=2), created=T0,
        )
        receipt = sign_receipt(doc, sender, grant=grant, created=T0)
        messages.append(dumps(receipt.to_json()).encode())
        # The same receipt and grant, secured as the peer secures them.
        grant_claims = {**{k: v for k, v in grant.items() if k != "proof"},
                        "iat": int(T0.timestamp())}
        grant_jws = jws.encode(json.dumps(grant_claims).encode(), service.private_key,
                               algorithm="EdDSA", headers={"kid": "policy-service-1"})
        claims = {k: v for k, v in receipt.to_json().items() if k not in ("proof", "grant")}
        tokens.append(jws.encode(json.dumps({**claims, "grant": grant_jws,
                                             "iat": int(T0.timestamp())}).encode(),
                                 sender.private_key, algorithm="EdDSA",
                                 headers={"kid": "evidence-specialist-1"}).encode())
    peer_keys = {
        "policy-service-1": PeerKey(service.private_key.public_key(), "policy-service",
                                    frozenset({"policy-service"})),
        "evidence-specialist-1": PeerKey(sender.private_key.public_key(),
                                         "evidence-specialist", frozenset({"proposer"})),
    }
    return {"ring": ring, "messages": messages, "evidence": evidence, "tokens": tokens,
            "peer_keys": peer_keys}


# ------------------------------------------------------------------------------ the peer


class PeerKey:
    """A key table entry of the peer: public key (loaded and raw), controller, roles."""

    __slots__ = ("controller", "key", "raw", "roles")

    def __init__(self, key: Ed25519PublicKey, controller: str, roles: frozenset[str]) -> None:
        self.key, self.controller, self.roles = key, controller, roles
        self.raw = key.public_bytes_raw()


class PeerRefused(Exception):
    """The peer's refusal, with a reason code."""


def peer_schema() -> dict[str, Any]:
    """The contract's receipt schema as the peer's payload has it: grant a compact JWS."""
    schema = CONTRACT.json_schema()
    properties = dict(schema["properties"])
    del properties["proof"]
    properties["grant"] = {"type": "string", "maxLength": 4096}
    properties["iat"] = {"type": "integer", "minimum": 0}
    return {**schema, "properties": properties,
            "required": [*schema["required"], "grant", "iat"]}


class PeerReceiver:
    """What a user would otherwise build: PyJWT + jsonschema-rs + hand-written checks."""

    def __init__(self, keys: dict[str, PeerKey], *, identity: str, now: Callable[[], datetime],
                 max_proof_age: timedelta = CONTRACT.max_proof_age,
                 evidence: dict[str, ResolvedEvidence] | None = None) -> None:
        self.keys = keys
        # Steps (3)-(5) as the gate's benchmark configuration runs them (see
        # ``receive``); ``None``: steps (1)-(2) only, the issue's first measure.
        self.evidence = None if evidence is None else {
            uri: (found.digest, found.observed_at.timestamp() if found.observed_at else None,
                  tuple((found.claims or {}).items()))
            for uri, found in evidence.items()}
        self.policies = {"PAY-7.4": True}  # the policy service: version -> current
        self.roles = frozenset({"case-owner"})
        fresh = [d for d in CONTRACT.context if isinstance(d, EvidenceFresh)]
        self.fresh = [(d.evidence, d.max_age.total_seconds()) for d in fresh]
        # The contract's rules, first match wins (what a peer writes as an if-chain).
        self.rules = [(r.when.field, r.when.value, r.action.value)
                      for r in CONTRACT.policy.rules]
        self.default = CONTRACT.policy.default.value
        self.identity = identity
        self.now = now
        self.max_age = max_proof_age.total_seconds()
        self.skew = CLOCK_SKEW.total_seconds()
        self.jws = PyJWS()
        self.validator = jsonschema_rs.Draft202012Validator(peer_schema(),
                                                            validate_formats=True)
        self.seen: set[str] = set()

    def _open(self, token: str | bytes) -> tuple[PeerKey, Any]:
        header = self.jws.get_unverified_header(token)
        entry = self.keys.get(header.get("kid", ""))
        if entry is None:
            raise PeerRefused("unknown-key")
        try:
            payload = self.jws.decode(token, entry.key, algorithms=["EdDSA"])
        except InvalidSignatureError as exc:
            raise PeerRefused("bad-signature") from exc
        return entry, json.loads(payload)

    def receive(self, token: bytes) -> str:  # noqa: PLR0911, PLR0912 - one return per check
        """Admit one token: ``"accept"`` or a refusal code."""
        try:
            signer, claims = self._open(token)
            if not self.validator.is_valid(claims):
                return "schema-invalid"
            now = self.now()
            stamp = now.timestamp()
            if claims["iat"] > stamp + self.skew:
                return "proof-not-yet-valid"
            if signer.controller != claims["sender"]:
                return "sender-mismatch"
            issuer, grant = self._open(claims["grant"])
            if "policy-service" not in issuer.roles:
                return "role-not-held"
            if grant.get("type") != "AuthorityGrant":
                return "grant-invalid"
            issued = grant.get("iat")
            if type(issued) is not int or issued > stamp + self.skew:
                return "grant-invalid"
            for name, expected in (("issuer", issuer.controller), ("subject", claims["sender"]),
                                   ("audience", claims["receiver"]),
                                   ("case_id", claims["case_id"]),
                                   ("contract", claims["contract"]),
                                   ("policy_version", claims["policy_version"])):
                if grant.get(name) != expected:
                    return "grant-mismatch"
            if claims["authority"] not in grant.get("authority", ()):
                return "authority-not-granted"
            valid_until = datetime.fromisoformat(claims["valid_until"])
            grant_until = datetime.fromisoformat(grant["valid_until"])
            if valid_until > grant_until:
                return "validity-exceeds-grant"
            if grant_until <= now:
                return "grant-expired"
            if claims["receiver"] != self.identity:
                return "wrong-audience"
            if valid_until <= now:
                return "receipt-expired"
            if stamp - claims["iat"] >= self.max_age:
                return "proof-stale"
            if claims["id"] in self.seen:
                return "replayed"
            self.seen.add(claims["id"])
            if self.evidence is not None:
                return self._decide(claims, stamp)
        except PeerRefused as exc:
            return str(exc)
        except (ValueError, KeyError, TypeError):  # malformed JWS, JSON or time
            return "malformed"
        return "accept"

    def _decide(self, claims: dict[str, Any], stamp: float) -> str:  # noqa: PLR0911, PLR0912
        """Steps (3)-(5) as the gate runs them here: the policy version known and
        current, the receiver's role, the screening evidence fresh (not older than the
        contract allows, not beyond the clock skew ahead); every reference resolved
        with its pinned digest; every decisive claim read back against the decision
        state; the contract's rules recomputed (first match, else the default).
        """
        assert self.evidence is not None  # checked by the caller
        if not self.policies.get(claims["policy_version"]):
            return "policy-not-current"
        if "case-owner" not in self.roles:
            return "receiver-role-missing"
        state = claims["decision_state"]
        refs = claims["evidence_refs"]
        for name, max_age in self.fresh:
            matching = [ref for ref in refs if name in ref["uri"]]
            if not matching:
                return "evidence-missing"
            for ref in matching:
                found = self.evidence.get(ref["uri"])
                if found is None or found[1] is None:
                    return "evidence-stale"
                if not -self.skew <= stamp - found[1] <= max_age:
                    return "evidence-stale"
        for ref in refs:
            found = self.evidence.get(ref["uri"])
            if found is None:
                return "evidence-unresolved"
            if ref.get("digest") is not None and ref["digest"] != found[0]:
                return "evidence-digest-mismatch"
        for ref in refs:
            for name, claimed in self.evidence[ref["uri"]][2]:
                if name in state and state[name] is not claimed and state[name] != claimed:
                    return "readback-mismatch"
        for name, value, action in self.rules:
            if state.get(name) is value:
                return "accept" if action else "undetermined"
        return "accept" if self.default else "undetermined"


class HandPeer(PeerReceiver):
    """The strongest peer: the same checks, with the JWS compact form parsed by hand
    (split, base64url, orjson), the header's ``alg`` pinned to EdDSA, and each
    signature verified by libsodium (PyNaCl), as the gate verifies.
    """

    def _open(self, token: str | bytes) -> tuple[PeerKey, Any]:
        raw = token.encode() if isinstance(token, str) else token
        try:
            head, payload, signature = raw.split(b".")
            header = orjson.loads(base64.urlsafe_b64decode(head + b"=" * (-len(head) % 4)))
        except (ValueError, orjson.JSONDecodeError) as exc:
            raise PeerRefused("malformed") from exc
        if header.get("alg") != "EdDSA":
            raise PeerRefused("wrong-alg")
        entry = self.keys.get(header.get("kid", ""))
        if entry is None:
            raise PeerRefused("unknown-key")
        try:
            crypto_sign_open(
                base64.urlsafe_b64decode(signature + b"=" * (-len(signature) % 4))
                + head + b"." + payload, entry.raw)
        except (BadSignatureError, ValueError) as exc:
            raise PeerRefused("bad-signature") from exc
        return entry, orjson.loads(base64.urlsafe_b64decode(payload + b"=" * (-len(payload) % 4)))


def check_peer(world: dict[str, Any], kind: type[PeerReceiver] = PeerReceiver) -> None:
    """The peer accepts the receipts once, and refuses what the gate refuses."""
    PeerReceiver = kind  # noqa: N806 - the same checks for either peer
    peer = PeerReceiver(world["peer_keys"], identity="case-owner", now=lambda: NOW)
    tokens: list[bytes] = world["tokens"]
    assert all(peer.receive(t) == "accept" for t in tokens)
    # Steps (3)-(5): every receipt decided; a changed evidence record or claim refused.
    full = PeerReceiver(world["peer_keys"], identity="case-owner", now=lambda: NOW,
                        evidence=world["evidence"])
    assert all(full.receive(t) == "accept" for t in tokens)
    uri = next(u for u in world["evidence"] if "screening" in u)  # freshness applies
    found = world["evidence"][uri]
    for changed, code in (
        (ResolvedEvidence(content=b"other", observed_at=found.observed_at,
                          claims=found.claims), "evidence-digest-mismatch"),
        (ResolvedEvidence(content=found.content, observed_at=NOW - timedelta(days=2),
                          claims=found.claims), "evidence-stale"),
        (ResolvedEvidence(content=found.content, observed_at=found.observed_at,
                          claims={k: not v for k, v in (found.claims or {}).items()}),
         "readback-mismatch"),
    ):
        evidence = {**world["evidence"], uri: changed}
        index = next(i for i, m in enumerate(world["messages"]) if uri.encode() in m)
        assert PeerReceiver(world["peer_keys"], identity="case-owner", now=lambda: NOW,
                            evidence=evidence).receive(tokens[index]) == code
    assert peer.receive(tokens[0]) == "replayed"
    fresh = PeerReceiver(world["peer_keys"], identity="case-owner", now=lambda: NOW)
    head, payload, signature = tokens[0].split(b".")
    assert fresh.receive(b".".join((head, payload[:-4] + b"AAAA", signature))) in (
        "bad-signature", "malformed")
    late = PeerReceiver(world["peer_keys"], identity="case-owner",
                        now=lambda: NOW + timedelta(hours=1))
    assert late.receive(tokens[0]) == "receipt-expired"
    other = PeerReceiver(world["peer_keys"], identity="someone-else", now=lambda: NOW)
    assert other.receive(tokens[0]) == "wrong-audience"
    # The gate's freshness: the proof-age bound, and no signing time in the future.
    strict = PeerReceiver(world["peer_keys"], identity="case-owner", now=lambda: NOW,
                          max_proof_age=NOW - T0)
    assert strict.receive(tokens[0]) == "proof-stale"
    early = PeerReceiver(world["peer_keys"], identity="case-owner",
                         now=lambda: T0 - CLOCK_SKEW - timedelta(seconds=1))
    assert early.receive(tokens[0]) == "proof-not-yet-valid"
    keys = dict(world["peer_keys"])
    service = keys["policy-service-1"]
    keys["policy-service-1"] = PeerKey(service.key, service.controller, frozenset())
    assert PeerReceiver(keys, identity="case-owner", now=lambda: NOW).receive(
        tokens[0]) == "role-not-held"


def bare_verifies(world: dict[str, Any]) -> list[tuple[Ed25519PublicKey, bytes, bytes]]:
    """The (key, signature, hashData) triples of the two proofs on every receipt
    (the key as ``cryptography`` loads it; :func:`raw_triples` for libsodium).
    """
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


def raw_triples(triples: list[tuple[Ed25519PublicKey, bytes, bytes]]
                ) -> list[tuple[bytes, bytes, bytes]]:
    """The same triples as libsodium takes them: raw key, signature + message."""
    return [(key.public_bytes_raw(), signature, data) for key, signature, data in triples]


def gate_for(world: dict[str, Any], **options: Any) -> Gate:
    config: dict[str, Any] = {
        "identity": "case-owner",
        "trust": world["ring"],
        "registry": CONTRACT,
        "roles": {"case-owner"},
        "policy_service": InMemoryPolicyService({"PAY-7.4": True}),
        "evidence": InMemoryEvidenceResolver(world["evidence"]),
        "clock": lambda: NOW,
        "readback": 1.0,
    }
    config.update(options)
    return Gate(**config)


def timed(setup: Callable[[], Callable[[], None]]) -> Callable[[], float]:
    """An operation: ``setup`` (untimed) returns the loop to time; result in seconds."""

    def run() -> float:
        loop = setup()
        gc.disable()
        try:
            start = time.thread_time_ns()
            loop()
            return (time.thread_time_ns() - start) / 1e9
        finally:
            gc.enable()

    return run


def operations(world: dict[str, Any], tmp: Path) -> dict[str, Callable[[], float]]:
    """The timed operations, each over every receipt."""
    messages: list[bytes] = world["messages"]
    triples = world["triples"]
    counter = iter(range(10**9))

    def over_messages(receive: Callable[[Any], Any],
                      inputs: list[Any] = messages) -> Callable[[], None]:
        def loop() -> None:
            for message in inputs:
                receive(message)
        return loop

    def bare() -> Callable[[], None]:
        raw = raw_triples(triples)

        def loop() -> None:
            for key, signature, data in raw:
                crypto_sign_open(signature + data, key)
        return loop

    def bare_openssl() -> Callable[[], None]:
        def loop() -> None:
            for key, signature, data in triples:
                key.verify(signature, data)
        return loop

    def gate_memory() -> Callable[[], None]:
        gate = gate_for(world, replay=MemoryReplayStore())
        return over_messages(StrictContractReceiver(gate).receive)

    def gate_on(inputs: list[Any]) -> Callable[[], Callable[[], None]]:
        def setup() -> Callable[[], None]:
            gate = gate_for(world, replay=MemoryReplayStore())
            return over_messages(StrictContractReceiver(gate).receive, inputs)
        return setup

    def gate_sqlite() -> Callable[[], None]:
        log = SQLiteDecisionLog(tmp / f"log-{next(counter)}.sqlite")
        return over_messages(StrictContractReceiver(gate_for(world, replay=log, log=log)).receive)

    def parse_only() -> Callable[[], None]:
        return over_messages(loads)

    def parse_and_verify() -> Callable[[], None]:
        ring = world["ring"]

        def loop() -> None:
            for message in messages:
                verify_receipt(loads(message), ring, now=NOW, registry=CONTRACT,
                               audience="case-owner")
        return loop

    def peer_of(kind: type[PeerReceiver], *,
                steps: bool = True) -> Callable[[], Callable[[], None]]:
        def setup() -> Callable[[], None]:
            receiver = kind(world["peer_keys"], identity="case-owner", now=lambda: NOW,
                            evidence=world["evidence"] if steps else None)
            tokens: list[bytes] = world["tokens"]

            def loop() -> None:
                for token in tokens:
                    receiver.receive(token)
            return loop
        return setup

    def floor() -> Callable[[], None]:
        keys = {e.verification_method: e.public_key_bytes for e in world["ring"]}
        valid = _fast_validator(CONTRACT).is_valid
        sha256, serialise, parse, b58decode = (hashlib.sha256, orjson.dumps, orjson.loads,
                                               based58.b58decode)
        sort = orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER

        def loop() -> None:
            for message in messages:
                doc = parse(message)
                if serialise(doc, option=sort) != message or not valid(doc):
                    raise AssertionError("the floor takes the gate's accept path")
                for secured in (doc, doc["grant"]):
                    config = dict(secured["proof"])
                    value = config.pop("proofValue")
                    unsecured = dict(secured)
                    del unsecured["proof"]
                    crypto_sign_open(
                        b58decode(value[1:].encode())
                        + sha256(serialise(config, option=orjson.OPT_SORT_KEYS)).digest()
                        + sha256(serialise(unsecured, option=orjson.OPT_SORT_KEYS)).digest(),
                        keys[config["verificationMethod"]])
        return loop

    def gate_unsafe() -> Callable[[], None]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnsafeConfigurationWarning)
            gate = gate_for(world, trust=UnsafeNoProofs(), replay=MemoryReplayStore())
        return over_messages(StrictContractReceiver(gate).receive)

    return {
        BARE: timed(bare),
        BARE_OPENSSL: timed(bare_openssl),
        GATE: timed(gate_memory),
        PEER: timed(peer_of(HandPeer)),
        PEER_PROOFS: timed(peer_of(HandPeer, steps=False)),
        PYJWT_PEER: timed(peer_of(PeerReceiver)),
        GATE_SQLITE: timed(gate_sqlite),
        GATE_TEXT: timed(gate_on([m.decode() for m in messages])),
        GATE_PARSED: timed(gate_on([loads(m) for m in messages])),
        "  of which: strict parse": timed(parse_only),
        VERIFY: timed(parse_and_verify),
        "gate without crypto (Unsafe)": timed(gate_unsafe),
        FLOOR: timed(floor),
    }


BARE = "bare Ed25519 verifies (libsodium)"
BARE_OPENSSL = "bare Ed25519 verifies (OpenSSL)"
PEER = "peer: hand JWS + PyNaCl ×2 + jsonschema-rs"
PEER_PROOFS = "  the same peer, steps (1)-(2) only"
PYJWT_PEER = "peer: PyJWT ×2 + jsonschema-rs + checks"
GATE = "gate, all steps (memory replay)"
GATE_SQLITE = "gate, all steps + SQLite log"
GATE_TEXT = "gate, the receipt as text (str)"
GATE_PARSED = "gate, the receipt parsed (dict)"
VERIFY = "  of which: parse + verify_receipt"
FLOOR = "floor: the accept path's library calls"


# ------------------------------------------------------------- lines of code

ROOT = Path(__file__).resolve().parent.parent
BEFORE = "0ff9115"  # main before the one check path (issue 20)
# The modules the gate's steps (1) and (2) run through: parse, keys, proofs, receipt
# and grant verification, the gate itself; ``integrity/`` from issue 20 on (the proofs
# moved there from ``contracts/_proofs.py`` and the audience check to ``_audience.py`` in
# issue 21: a path missing at one revision counts nothing there).
VERIFICATION_PATH = ("src/handoffs/_json.py", "src/handoffs/_time.py",
                     "src/handoffs/_audience.py", "src/handoffs/contracts/_proofs.py",
                     "src/handoffs/contracts/_keys.py",
                     "src/handoffs/contracts/_signing.py", "src/handoffs/receivers/_gate.py",
                     "src/handoffs/integrity/")
BEFORE_LINES = 2752  # code_lines of VERIFICATION_PATH at BEFORE, for a tree without git
PLANNED = "f7b1b51"  # main before the gate planned per contract (issue 30)
PLANNED_LINES = 3201  # code_lines of VERIFICATION_PATH at PLANNED, for a tree without git


def code_lines(source: str) -> int:
    """Lines holding code: not blank, not only a comment, not a docstring."""
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if (isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            docstrings.update(range(body[0].lineno, (body[0].end_lineno or 0) + 1))
    lines: set[int] = set()
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
            tokenize.DEDENT, tokenize.ENDMARKER)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in skip:
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - docstrings)


def verification_lines(revision: str | None) -> int | None:
    """:func:`code_lines` over :data:`VERIFICATION_PATH` at ``revision`` (``None``: the
    working tree); ``None`` when git cannot show that revision.
    """
    total = 0
    if revision is None:
        for entry in VERIFICATION_PATH:
            path = ROOT / entry
            files = sorted(path.glob("*.py")) if entry.endswith("/") else [path]
            total += sum(code_lines(f.read_text()) for f in files if f.exists())
        return total
    try:
        listing = subprocess.run(  # noqa: S603 - git, with fixed arguments
            ["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", revision,  # noqa: S607
             "--", *VERIFICATION_PATH],
            capture_output=True, text=True, check=True).stdout.split()
        for name in listing:
            if name.endswith(".py"):
                total += code_lines(subprocess.run(  # noqa: S603 - git, fixed arguments
                    ["git", "-C", str(ROOT), "show", f"{revision}:{name}"],  # noqa: S607
                    capture_output=True, text=True, check=True).stdout)
    except (OSError, subprocess.CalledProcessError):
        return None
    return total


def paired(samples: dict[str, list[float]], name: str, base: str = BARE) -> float:
    """Median over rounds of the per-round ratio ``name`` / ``base``."""
    return statistics.median(g / b for g, b in zip(samples[name], samples[base], strict=True))


def setup(receipts: int, notes: str | None
          ) -> tuple[dict[str, Callable[[], float]], int, float]:
    """The world and its self-checks; the timed operations, the receipt count and the
    Ed25519 verifies per receipt.
    """
    world = build(receipts, notes)
    world["triples"] = bare_verifies(world)
    count = len(world["messages"])
    ops = operations(world, Path(tempfile.mkdtemp(prefix="handoffs-bench-")))

    # Self-check: every receipt is admitted, read back and agrees with its evidence.
    check = StrictContractReceiver(gate_for(world))
    assert all(d.verdict is Verdict.ACCEPT and d.readback == "agree"
               for d in map(check.receive, world["messages"]))
    check_peer(world)
    check_peer(world, HandPeer)
    return ops, count, len(world["triples"]) / count


def one_round(ops: dict[str, Callable[[], float]], count: int) -> dict[str, float]:
    """Every operation once, in order: µs per receipt."""
    return {name: operation() / count * 1e6 for name, operation in ops.items()}


def compiled_modules() -> list[str]:
    """The handoffs modules imported from a compiled extension, not a ``.py`` (not
    counting mypyc's shared runtime library, ``<name>__mypyc``).
    """
    return sorted(name for name, module in list(sys.modules.items())
                  if name.startswith("handoffs") and not name.endswith("__mypyc")
                  and str(getattr(module, "__file__", None) or "").endswith((".so", ".pyd")))


def child(args: argparse.Namespace) -> None:
    """One build's measuring process: a round per line on stdin, a JSON line out each."""
    ops, count, verifies = setup(args.receipts, args.notes)
    print(json.dumps({"count": count, "verifies": verifies, "compiled": compiled_modules()}),
          flush=True)
    for _ in sys.stdin:
        print(json.dumps(one_round(ops, count)), flush=True)


class Build:
    """A child process measuring one build of handoffs: ``path`` (``None``: this
    process's own) first on its module search path.
    """

    def __init__(self, path: str | None, args: argparse.Namespace) -> None:
        env = dict(os.environ)
        if path is not None:
            env["PYTHONPATH"] = os.pathsep.join(
                entry for entry in (str(Path(path).resolve()), env.get("PYTHONPATH")) if entry)
        command = [sys.executable, str(Path(__file__).resolve()), "--child",
                   "--receipts", str(args.receipts)]
        if args.notes is not None:
            command += ["--notes", args.notes]
        self.process = subprocess.Popen(  # noqa: S603 - this script, fixed arguments
            command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = json.loads(self._line())
        self.count: int = ready["count"]
        self.verifies: float = ready["verifies"]
        self.compiled: list[str] = ready["compiled"]

    def _line(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the measuring process exited ({self.process.wait()})")
        return line

    def round(self) -> dict[str, float]:
        """One round of every operation, in the child."""
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        return dict(json.loads(self._line()))

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def side_by_side(args: argparse.Namespace
                 ) -> tuple[dict[str, list[float]], dict[str, list[float]], Build, Build]:
    """The pure and the compiled build, one child process each, their rounds
    interleaved (which goes first alternates), one warm-up round each discarded.
    """
    pure, compiled = Build(None, args), Build(args.compiled, args)
    try:
        if not compiled.compiled:
            raise SystemExit(f"--compiled {args.compiled}: no compiled handoffs module there")
        if pure.compiled:
            raise SystemExit(f"the pure build imports compiled modules: {pure.compiled}")
        samples: tuple[dict[str, list[float]], dict[str, list[float]]] = ({}, {})
        for round_ in range(args.rounds + 1):
            for index in ((0, 1) if round_ % 2 else (1, 0)):
                figures = (pure, compiled)[index].round()
                if round_:  # round 0 warms up
                    for name, value in figures.items():
                        samples[index].setdefault(name, []).append(value)
    finally:
        pure.close()
        compiled.close()
    return samples[0], samples[1], pure, compiled


def paired_across(pure: dict[str, list[float]], compiled: dict[str, list[float]],
                  name: str) -> float:
    """Median over rounds of the per-round ratio compiled / pure for ``name``."""
    return statistics.median(c / p for c, p in zip(compiled[name], pure[name], strict=True))


def across(pure: dict[str, list[float]], compiled: dict[str, list[float]], name: str) -> str:
    """:func:`paired_across`, and every round's ratio."""
    ratios = [c / p for c, p in zip(compiled[name], pure[name], strict=True)]
    return (f"{paired_across(pure, compiled, name):.2f} (rounds: "
            f"{', '.join(f'{r:.2f}' for r in ratios)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--receipts", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run for CI: 35 receipts, 3 rounds (not for figures)")
    parser.add_argument("--notes", default=None,
                        help="sign every receipt with these notes (say, text beyond ASCII)")
    parser.add_argument("--compiled", metavar="PATH", default=None,
                        help="measure the compiled build installed in PATH (pip install "
                             "--target PATH) beside this one: a child process per build, "
                             "rounds interleaved")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.receipts, args.rounds = 35, 3
    if args.child:
        child(args)
        return
    compiled: dict[str, list[float]] | None = None
    if args.compiled is None:
        ops, count, verifies = setup(args.receipts, args.notes)
        samples: dict[str, list[float]] = {name: [] for name in ops}
        for round_ in range(args.rounds + 1):
            figures = one_round(ops, count)
            if round_:  # round 0 warms up
                for name, value in figures.items():
                    samples[name].append(value)
    else:
        samples, compiled, pure_build, compiled_build = side_by_side(args)
        count, verifies = pure_build.count, pure_build.verifies

    median = {name: statistics.median(values) for name, values in samples.items()}
    print(f"python {sys.version.split()[0]}, {count} distinct signed receipts, "
          f"{verifies:g} Ed25519 verifies each, {args.rounds} "
          "interleaved rounds, thread CPU time")
    print(f"{'operation':40} {'median µs/receipt':>18} {'min':>8} {'receipts/s':>11}"
          + ("" if compiled is None else f" {'compiled µs':>12} {'compiled/pure':>14}"))
    for name, values in samples.items():
        print(f"{name:40} {median[name]:18.1f} {min(values):8.1f} "
              f"{1e6 / median[name]:11,.0f}"
              + ("" if compiled is None else
                 f" {statistics.median(compiled[name]):12.1f} "
                 f"{paired_across(samples, compiled, name):14.2f}"))
    parse = median["  of which: strict parse"]
    print(f"beyond the bare verifies: the gate, all steps {median[GATE] - median[BARE]:.1f} µs; "
          f"strict parse + verify_receipt {median[VERIFY] - median[BARE]:.1f} µs "
          f"(the parse {parse:.1f} µs)")
    print(f"receipts/s on one core: {1e6 / median[GATE]:,.0f} (memory replay), "
          f"{1e6 / median[GATE_SQLITE]:,.0f} (SQLite decision log)")
    print(f"floor/verify ratio: {paired(samples, FLOOR):.2f} (what no check is left to cost)")
    print(f"peer/verify ratio: {paired(samples, PEER):.2f}")
    print(f"OpenSSL/libsodium bare verifies ratio: {paired(samples, BARE_OPENSSL):.2f}")
    print(f"gate+SQLite/verify ratio: {paired(samples, GATE_SQLITE):.2f}")
    print(f"gate(text)/verify ratio: {paired(samples, GATE_TEXT):.2f}, "
          f"gate(dict)/verify ratio: {paired(samples, GATE_PARSED):.2f}")
    before, planned = verification_lines(BEFORE), verification_lines(PLANNED)
    print(f"verification path, lines of code ({', '.join(VERIFICATION_PATH)}; no blank, "
          f"comment or docstring lines): before ({BEFORE}) "
          f"{BEFORE_LINES if before is None else before}"
          f"{' (recorded)' if before is None else ''}, before the per-contract plan "
          f"({PLANNED}) {PLANNED_LINES if planned is None else planned}"
          f"{' (recorded)' if planned is None else ''}, now {verification_lines(None)}")
    print(f"gate/PyJWT-peer ratio: {paired(samples, GATE, PYJWT_PEER):.2f}")
    print(f"gate/peer-steps-(1)-(2) ratio: {paired(samples, GATE, PEER_PROOFS):.2f} (a peer "
          "without context, evidence, readback or policy: less work than the gate)")
    if compiled is not None:
        print(f"compiled build ({args.compiled}): {len(compiled_build.compiled)} modules "
              f"compiled ({', '.join(compiled_build.compiled)})")
        print(f"compiled/pure gate CPU ratio: {across(samples, compiled, GATE)}")
        print(f"compiled/pure peer CPU ratio: {across(samples, compiled, PEER)} (the control: "
              "the peer runs no handoffs code)")
        print(f"compiled gate/verify ratio: {paired(compiled, GATE):.2f}")
        print(f"compiled gate/peer ratio: {paired(compiled, GATE, PEER):.2f}")
    print(f"gate/peer ratio: {paired(samples, GATE, PEER):.2f}")
    print(f"gate/verify ratio: {paired(samples, GATE):.2f}")

if __name__ == "__main__":
    main()
