"""One rule for "expired at instant t", freshness, revocation and explicit audiences.

Every bound is the first instant at which the thing is no longer valid: each kind —
receipt, grant, proof, key (signing and revocation), chain, proof freshness — is
tested at that exact instant (expired) and one microsecond before it (valid). These
tests also kill the mutants an audit found surviving: receipt and grant expiry with
``<`` for ``<=``, one second of slack in "validity exceeds grant", a missing
``policy-service`` role check on the grant's issuer, and replay pruning with the wrong
sign.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest

from handoffs._errors import InvalidArgument, ProofError
from handoffs._time import expired, stale
from handoffs.contracts import ANY_AUDIENCE, Authority, Receipt
from handoffs.contracts._signing import issue_grant
from handoffs.integrity import KeyRing, SigningKey, verify
from handoffs.receivers import MemoryReplayStore, SQLiteDecisionLog, Step, Verdict
from worlds.gate import CONTRACT, RECEIVER, SENDER, SERVICE, T0, WORLD, codes, raw, strict

US = timedelta(microseconds=1)


def _verify(doc: dict[str, Any], now: datetime, *, keyring: KeyRing | None = None,
            **options: Any) -> None:
    options.setdefault("audience", RECEIVER)
    options.setdefault("registry", CONTRACT)
    Receipt.verify(doc, keyring or WORLD.keyring, now=now, **options)


def _fails(doc: dict[str, Any], now: datetime, code: str, path: str, **options: Any) -> None:
    with pytest.raises(ProofError) as caught:
        _verify(doc, now, **options)
    assert (caught.value.code, caught.value.json_path) == (code, path)


def _gate_codes(doc: dict[str, Any], now: datetime, **options: Any) -> tuple[Step, list[str]]:
    decision = strict(WORLD.gate(clock=lambda: now, replay=None, **options)).receive(raw(doc))
    return decision.step, codes(decision)


def test_the_rule() -> None:
    assert expired(T0, T0)
    assert not expired(T0, T0 - US)
    assert stale(T0, timedelta(hours=1), T0 + timedelta(hours=1))
    assert not stale(T0, timedelta(hours=1), T0 + timedelta(hours=1) - US)
    assert not stale(T0, timedelta.max, T0 + timedelta(days=10_000))  # no overflow


# ------------------------------------------------------------------------ receipts


def test_a_receipt_expires_at_its_valid_until() -> None:
    until = T0 + timedelta(minutes=30)
    doc = WORLD.signed("policy-01", valid_until=until)
    _verify(doc, until - US)
    _fails(doc, until, "receipt-expired", "$.valid_until")
    assert _gate_codes(doc, until) == (Step.PROOFS, ["receipt-expired"])
    assert _gate_codes(doc, until - US)[0] > Step.PROOFS


def test_an_unsigned_receipt_expires_at_its_valid_until_in_an_unsafe_gate() -> None:
    until = T0 + timedelta(minutes=30)
    doc = WORLD.unsigned("policy-01", valid_until=until)
    at = strict(WORLD.unsafe_gate(clock=lambda: until, replay=None)).receive(doc)
    before = strict(WORLD.unsafe_gate(clock=lambda: until - US, replay=None)).receive(doc)
    assert codes(at) == ["receipt-expired"]
    assert before.step > Step.PROOFS


# -------------------------------------------------------------------------- grants


def test_a_grant_expires_at_its_valid_until() -> None:
    until = T0 + timedelta(minutes=30)
    grant = WORLD.grant("policy-01", valid_until=until)
    doc = WORLD.signed("policy-01", grant=grant, valid_until=until)
    _verify(doc, until - US)
    # The grant is checked before the receipt: at the instant both end, the grant's
    # expiry is the reason (a grant that expired "after" now would fall to the receipt).
    _fails(doc, until, "grant-expired", "$.grant.valid_until")


def test_validity_may_equal_the_grant_but_never_exceed_it_by_a_microsecond() -> None:
    until = T0 + timedelta(minutes=30)
    grant = WORLD.grant("policy-01", valid_until=until)
    _verify(WORLD.signed("policy-01", grant=grant, valid_until=until), T0 + timedelta(minutes=1))
    over = WORLD.signed("policy-01", grant=grant, valid_until=until + US)
    _fails(over, T0 + timedelta(minutes=1), "validity-exceeds-grant", "$.valid_until")


def test_a_grant_issuer_without_the_policy_service_role_is_refused() -> None:
    impostor = SigningKey.generate()
    ring = WORLD.keyring.enrol(
        impostor.public_key_multibase, controller=SERVICE + "-2", roles=["proposer"],
        purposes=["capabilityDelegation"], not_before=T0 - timedelta(days=1))
    grant = issue_grant(
        impostor, issuer=SERVICE + "-2", subject=SENDER, audience=RECEIVER,
        contract=CONTRACT, case_id="policy-01", policy_version="PAY-7.4",
        authority=[Authority.ADVISE], valid_until=T0 + timedelta(hours=1), created=T0)
    doc = WORLD.signed("policy-01", grant=grant)
    _fails(doc, T0 + timedelta(minutes=1), "role-not-held", "$.grant.proof", keyring=ring)


# -------------------------------------------------------------------------- proofs


def test_a_proof_expires_at_its_expires() -> None:
    until = T0 + timedelta(minutes=20)
    doc = WORLD.signed("policy-01", expires=until)
    _verify(doc, until - US)
    _fails(doc, until, "proof-expired", "$.proof.expires")


def test_a_proof_is_stale_at_created_plus_max_proof_age() -> None:
    doc = WORLD.signed("policy-01", created=T0, valid_until=T0 + timedelta(hours=3),
                       grant=WORLD.grant("policy-01", valid_until=T0 + timedelta(hours=3)))
    age = CONTRACT.max_proof_age
    assert age == timedelta(hours=1)  # the documented default
    _verify(doc, T0 + age - US)
    _fails(doc, T0 + age, "proof-stale", "$.proof.created")
    # A verifier's and a gate's own bound replace the contract's.
    _verify(doc, T0 + age, max_proof_age=timedelta(hours=2))
    _fails(doc, T0 + timedelta(minutes=10), "proof-stale", "$.proof.created",
           max_proof_age=timedelta(minutes=10))
    assert _gate_codes(doc, T0 + age) == (Step.PROOFS, ["proof-stale"])
    assert _gate_codes(doc, T0 + age, max_proof_age=timedelta(hours=2))[0] > Step.PROOFS
    assert _gate_codes(doc, T0 + timedelta(minutes=10),
                       max_proof_age=timedelta(minutes=10)) == (Step.PROOFS, ["proof-stale"])


def test_a_contract_sets_its_own_proof_age() -> None:
    from handoffs.contracts import Registry

    short = attrs.evolve(CONTRACT, max_proof_age=timedelta(minutes=5))
    doc = WORLD.signed("policy-01")
    registry = Registry.of(short)
    Receipt.verify(doc, WORLD.keyring, now=T0 + timedelta(minutes=5) - US,
                   audience=RECEIVER, registry=registry)
    with pytest.raises(ProofError, match="at most 0:05:00") as caught:
        Receipt.verify(doc, WORLD.keyring, now=T0 + timedelta(minutes=5),
                       audience=RECEIVER, registry=registry)
    assert caught.value.code == "proof-stale"


@pytest.mark.parametrize("age", [timedelta(0), timedelta(seconds=-1), 3600, None])
def test_a_bad_proof_age_is_refused_before_any_work(age: Any) -> None:
    from handoffs._errors import ContractDefinitionError

    if age is not None:
        with pytest.raises(InvalidArgument):
            WORLD.gate(max_proof_age=age)
        with pytest.raises(InvalidArgument):
            _verify(WORLD.signed(), T0, max_proof_age=age)
    with pytest.raises(ContractDefinitionError):
        attrs.evolve(CONTRACT, max_proof_age=age if age is not None else 5)


# ---------------------------------------------------------------------------- keys


def _rotated(not_after: datetime) -> tuple[SigningKey, KeyRing]:
    key = SigningKey.generate()
    ring = (KeyRing()
            .enrol(WORLD.service_key.public_key_multibase, controller=SERVICE,
                   roles=["policy-service"], purposes=["capabilityDelegation"],
                   not_before=T0 - timedelta(days=30))
            .enrol(key.public_key_multibase, controller=SENDER, roles=["proposer"],
                   not_before=T0 - timedelta(days=30), not_after=not_after))
    return key, ring


def test_a_key_signs_until_its_not_after() -> None:
    switch = T0 + timedelta(minutes=10)
    key, ring = _rotated(switch)
    now = T0 + timedelta(minutes=15)
    _verify(WORLD.signed("policy-01", key=key, created=switch - US), now, keyring=ring)
    _fails(WORLD.signed("policy-01", key=key, created=switch), now, "key-not-valid",
           "$.proof.created", keyring=ring)


def test_back_dating_with_a_rotated_key_is_bounded_by_the_proof_age() -> None:
    switch = T0 + timedelta(minutes=10)
    key, ring = _rotated(switch)
    grant = WORLD.grant("policy-01", valid_until=T0 + timedelta(hours=6))
    # Signed at T0 + 3 h, claiming to have been signed just before the rotation.
    forged = WORLD.signed("policy-01", key=key, created=switch - US, grant=grant,
                          valid_until=T0 + timedelta(hours=5))
    _fails(forged, T0 + timedelta(hours=3), "proof-stale", "$.proof.created", keyring=ring)


def test_revocation_stops_every_proof_whatever_its_created() -> None:
    revoked_at = T0 + timedelta(minutes=30)
    ring = WORLD.keyring.revoke(WORLD.sender_key.verification_method, at=revoked_at)
    doc = WORLD.signed("policy-01", created=T0)  # made long before the revocation
    _verify(doc, revoked_at - US, keyring=ring)
    _fails(doc, revoked_at, "key-revoked", "$.proof.verificationMethod", keyring=ring)
    # Rotation is different: a proof made before not_after keeps verifying.
    key, rotated = _rotated(T0 + timedelta(minutes=5))
    _verify(WORLD.signed("policy-01", key=key, created=T0), revoked_at, keyring=rotated)


def test_a_revoked_key_is_refused_at_the_gate_and_in_plain_verify() -> None:
    at = T0 + timedelta(seconds=30)
    ring = WORLD.keyring.revoke(WORLD.sender_key.verification_method, at=at)
    doc = WORLD.signed("policy-01")
    assert _gate_codes(doc, at, trust=ring) == (Step.PROOFS, ["key-revoked"])
    with pytest.raises(ProofError) as caught:
        verify(doc, ring, purpose="assertionMethod", now=at)
    assert caught.value.code == "key-revoked"
    verify(doc, ring, purpose="assertionMethod", now=at - US)


def test_revocation_round_trips_through_the_trust_file() -> None:
    at = T0 + timedelta(minutes=30)
    ring = WORLD.keyring.revoke(WORLD.sender_key.verification_method, at=at)
    again = KeyRing.from_json(ring.to_json())
    assert again == ring
    assert [e.revoked_at for e in again if e.controller == SENDER] == [at]
    assert "revoked_at" not in WORLD.keyring.to_json()["keys"][0]


def test_revoking_an_unknown_key_or_at_a_naive_time_is_refused() -> None:
    from handoffs._errors import KeyRingError, UnknownKey

    with pytest.raises(UnknownKey):
        WORLD.keyring.revoke("did:key:nobody", at=T0)
    with pytest.raises(KeyRingError):
        WORLD.keyring.revoke(WORLD.sender_key.verification_method,
                             at=datetime(2026, 1, 1))


# -------------------------------------------------------------------------- chains


def test_a_chain_expires_at_its_earliest_expiry() -> None:
    from worlds.chains import STANDARD, T, make_chain, receiver

    chain = make_chain(STANDARD).to_bytes()
    earliest = T + timedelta(hours=1)  # the last hop's valid_until
    assert codes(receiver(clock=lambda: earliest).receive(chain)) == ["chain-expired"]
    assert receiver(clock=lambda: earliest - US).receive(chain).verdict is Verdict.ACCEPT


# ------------------------------------------------------------------------ audience


def test_verify_receipt_needs_an_explicit_audience() -> None:
    doc = WORLD.signed("policy-01")
    now = T0 + timedelta(minutes=1)
    with pytest.raises(TypeError):
        Receipt.verify(doc, WORLD.keyring, now=now, registry=CONTRACT)  # type: ignore[call-arg]
    for bad in (None, "", 42):
        with pytest.raises(InvalidArgument):
            Receipt.verify(doc, WORLD.keyring, now=now, audience=bad,  # type: ignore[arg-type]
                           registry=CONTRACT)
    Receipt.verify(doc, WORLD.keyring, now=now, audience=ANY_AUDIENCE, registry=CONTRACT)
    with pytest.raises(ProofError) as caught:
        Receipt.verify(doc, WORLD.keyring, now=now, audience="auditor", registry=CONTRACT)
    assert caught.value.code == "wrong-audience"
    assert repr(ANY_AUDIENCE) == "ANY_AUDIENCE"
    import pickle

    assert pickle.loads(pickle.dumps(ANY_AUDIENCE)) is ANY_AUDIENCE  # noqa: S301 - our own bytes


@pytest.mark.parametrize("identity", [None, "", " case-owner", ANY_AUDIENCE])
def test_a_gate_always_names_its_audience(identity: Any) -> None:
    """A gate admits receipts for itself: no default, no "any audience" (that is only
    for verify_receipt, an auditor's choice)."""
    with pytest.raises(InvalidArgument, match="identity"):
        WORLD.gate(identity=identity)
    doc = WORLD.signed("policy-01")
    elsewhere = strict(WORLD.gate(identity="auditor", replay=None)).receive(raw(doc))
    assert (elsewhere.verdict, codes(elsewhere)) == (Verdict.REJECT, ["wrong-audience"])


def test_the_chain_receiver_and_the_chain_expire_by_the_one_rule() -> None:
    from worlds.chains import STANDARD, T, make_chain, receiver

    chain = make_chain(STANDARD)
    earliest = min(hop.valid_until for hop in chain.hops)
    for now in (earliest - US, earliest, earliest + US):
        decision = receiver(clock=lambda now=now: now).receive(chain.to_bytes())
        assert (decision.verdict is Verdict.REJECT) is expired(earliest, now)
    assert earliest == T + timedelta(hours=1)


# ---------------------------------------------------------------------- replay stores


def test_the_memory_replay_store_forgets_an_id_only_once_it_expired() -> None:
    store = MemoryReplayStore()
    until = T0 + timedelta(minutes=30)
    assert store.first_seen("a", expires=until, now=T0)
    assert not store.first_seen("a", expires=until, now=until - US)
    assert store.first_seen("b", expires=until + timedelta(hours=1), now=until)
    assert len(store) == 1  # "a" expired at `until` exactly and was forgotten


def test_sqlite_pruning_never_forgets_an_unexpired_id(tmp_path: Path) -> None:
    # The store prunes by its own clock (the real one), so the receipt here is one that
    # is valid in real time for another half hour.
    with SQLiteDecisionLog(tmp_path / "log.sqlite") as store:
        now = datetime.now(UTC)
        assert store.first_seen("genuine", expires=now + timedelta(minutes=30), now=now)
        for i in range(1100):  # past the pruning period, whatever it is
            store.first_seen(f"other-{i}", expires=now + timedelta(minutes=30), now=now)
        assert not store.first_seen("genuine", expires=now + timedelta(minutes=30), now=now)
