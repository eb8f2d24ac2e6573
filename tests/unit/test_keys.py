"""Keys, Multikey encodings and the key ring (trust store)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from hypothesis import given
from hypothesis import strategies as st

from handoffs._errors import KeyRingError, ProofError, UnknownKey, WeakKey
from handoffs.integrity import KeyRing, SigningKey
from handoffs.integrity._base58 import b58decode, b58encode
from handoffs.integrity._edwards25519 import check_public_key
from handoffs.integrity._keyring import DEFAULT_PURPOSES, KeyEntry
from handoffs.integrity._keys import (
    decode_public_key_multibase,
    decode_secret_key_multibase,
    did_key_verification_method,
    encode_public_key_multibase,
    encode_secret_key_multibase,
)

VECTORS = json.loads((Path(__file__).parents[1] / "vectors" / "eddsa-jcs-2022.json").read_text())
KEY_PAIR = VECTORS["key_pair"]
DERIVED = VECTORS["derived_by_research"]
T0 = datetime(2026, 1, 1, tzinfo=UTC)

# C2SP/CCTV ed25519/README.md, "Low-order edwards25519 point encodings": the eight
# points (canonical encodings) and their six alternative, non-canonical encodings.
SMALL_ORDER_CANONICAL = {
    "order-4-a": "0000000000000000000000000000000000000000000000000000000000000000",
    "order-4-b": "0000000000000000000000000000000000000000000000000000000000000080",
    "identity": "0100000000000000000000000000000000000000000000000000000000000000",
    "order-8-a": "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "order-8-b": "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
    "order-8-c": "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "order-8-d": "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
    "order-2": "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
}
SMALL_ORDER_NON_CANONICAL = {
    "order-4-a-y-over-p": "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "order-4-b-y-over-p": "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    "identity-x-minus-0": "0100000000000000000000000000000000000000000000000000000000000080",
    "identity-y-over-p": "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "identity-x-minus-0-y-over-p": (
        "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    ),
    "order-2-x-minus-0": "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
}
SMALL_ORDER = {**SMALL_ORDER_CANONICAL, **SMALL_ORDER_NON_CANONICAL}


def multibase_of(raw_hex: str) -> str:
    return "z" + b58encode(b"\xed\x01" + bytes.fromhex(raw_hex))


def enrol(ring: KeyRing, key: SigningKey, **overrides: Any) -> KeyRing:
    options: dict[str, Any] = {
        "controller": "evidence-specialist",
        "roles": {"proposer"},
        "not_before": T0,
    }
    options.update(overrides)
    return ring.enrol(key.public_key_multibase, **options)


# --------------------------------------------------------------------------- base58


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"", ""),
        (b"\0", "1"),
        (b"\0\0\x01", "112"),
        (b"\x39", "z"),
        (b"\x3a", "21"),
        (b"hello world", "StV1DL6CwTryKyV"),
    ],
    ids=["empty", "one-zero", "leading-zeros", "57", "58", "hello-world"],
)
def test_base58_known_values(data: bytes, text: str) -> None:
    assert b58encode(data) == text
    assert b58decode(text) == data


@given(st.binary(max_size=80), st.integers(min_value=0, max_value=8))
def test_base58_round_trip_keeps_leading_zero_bytes(data: bytes, zeros: int) -> None:
    padded = b"\0" * zeros + data
    text = b58encode(padded)
    assert b58decode(text) == padded
    assert text.startswith("1" * zeros)


@given(st.text(alphabet="123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz", max_size=60))
def test_base58_decoding_is_a_bijection(text: str) -> None:
    # Every alphabet string decodes to the one byte string that encodes back to it,
    # which is why decoding needs no separate canonicality check.
    assert b58encode(b58decode(text)) == text


@pytest.mark.parametrize("text", ["0", "O", "I", "l", "abc+", " 2", "2 ", "é"], ids=repr)
def test_base58_rejects_characters_outside_the_alphabet(text: str) -> None:
    with pytest.raises(KeyRingError, match="not canonical base58btc") as info:
        b58decode(text)
    assert info.value.code == "invalid-base58"


def test_base58_rejects_non_strings() -> None:
    with pytest.raises(KeyRingError) as info:
        b58decode(b"2")  # type: ignore[arg-type]
    assert info.value.code == "invalid-base58"


# ------------------------------------------------------------------------- multikey


def test_vector_key_pair_decodes_to_the_derived_bytes() -> None:
    public = decode_public_key_multibase(KEY_PAIR["publicKeyMultibase"])
    seed = decode_secret_key_multibase(KEY_PAIR["privateKeyMultibase"])
    assert public.hex() == DERIVED["public_key_hex"]
    assert seed.hex() == DERIVED["private_key_seed_hex"]
    assert encode_public_key_multibase(public) == KEY_PAIR["publicKeyMultibase"]
    assert encode_secret_key_multibase(seed) == KEY_PAIR["privateKeyMultibase"]


def test_signing_key_from_vector_multibase() -> None:
    key = SigningKey.from_multibase(KEY_PAIR["privateKeyMultibase"])
    mb = KEY_PAIR["publicKeyMultibase"]
    assert key.public_key_multibase == mb
    assert key.public_key_bytes.hex() == DERIVED["public_key_hex"]
    assert key.verification_method == f"did:key:{mb}#{mb}"
    assert did_key_verification_method(mb) == key.verification_method
    assert repr(key) == f"SigningKey(public_key_multibase={mb!r})"


@given(st.binary(min_size=32, max_size=32))
def test_multikey_round_trips(raw: bytes) -> None:
    assert decode_public_key_multibase(encode_public_key_multibase(raw)) == raw
    assert decode_secret_key_multibase(encode_secret_key_multibase(raw)) == raw


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2", "invalid-multibase"),
        ("Z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2", "invalid-multibase"),
        ("u7QGwDY2Tjn93PVFWWq02piP1NE9_XRlg-c8-jhJiDqKBDw", "invalid-multibase"),
        ("z16MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2", "invalid-multibase"),
        ("z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ0", "invalid-multibase"),
        ("z" + "2" * 60, "invalid-multibase"),
        ("z", "wrong-key-type"),
    ],
    ids=[
        "no-multibase-prefix",
        "base58flickr-prefix",
        "base64url-prefix",
        "extra-leading-zero-byte",
        "character-outside-alphabet",
        "too-long",
        "empty-payload",
    ],
)
def test_public_key_multibase_rejects(text: str, code: str) -> None:
    with pytest.raises(KeyRingError) as info:
        decode_public_key_multibase(text, json_path="$.keys[0].public_key_multibase")
    assert info.value.code == code
    assert info.value.json_path == "$.keys[0].public_key_multibase"


def test_public_key_multibase_rejects_other_multicodecs() -> None:
    raw = bytes.fromhex(DERIVED["public_key_hex"])
    x25519 = "z" + b58encode(b"\xec\x01" + raw)  # x25519-pub
    secret_as_public = "z" + b58encode(b"\x80\x26" + raw)
    short = "z" + b58encode(b"\xed\x01" + raw[:31])
    for text in (x25519, secret_as_public, short):
        with pytest.raises(KeyRingError) as info:
            decode_public_key_multibase(text)
        assert info.value.code == "wrong-key-type"
    with pytest.raises(KeyRingError) as info:
        decode_secret_key_multibase(KEY_PAIR["publicKeyMultibase"])
    assert info.value.code == "wrong-key-type"


@pytest.mark.parametrize("size", [0, 31, 33])
def test_encoders_reject_wrong_lengths(size: int) -> None:
    with pytest.raises(KeyRingError) as info:
        encode_public_key_multibase(b"\1" * size)
    assert info.value.code == "bad-key-length"
    with pytest.raises(KeyRingError) as info:
        encode_secret_key_multibase(b"\1" * size)
    assert info.value.code == "bad-key-length"


# ------------------------------------------------------------------------------ PEM


@pytest.mark.parametrize(
    "passphrase", [None, b"correct horse battery staple"], ids=["plain", "encrypted"]
)
def test_pem_round_trip(passphrase: bytes | None) -> None:
    key = SigningKey.generate()
    pem = key.to_pem(passphrase)
    assert pem.startswith(
        b"-----BEGIN ENCRYPTED PRIVATE KEY-----" if passphrase else b"-----BEGIN PRIVATE KEY-----"
    )
    loaded = SigningKey.from_pem(pem, passphrase)
    assert loaded.public_key_multibase == key.public_key_multibase
    assert loaded.sign(b"message") == key.sign(b"message")


def test_pem_wrong_passphrase() -> None:
    pem = SigningKey.generate().to_pem(b"right")
    with pytest.raises(KeyRingError, match="passphrase does not decrypt") as info:
        SigningKey.from_pem(pem, b"wrong")
    assert info.value.code == "bad-passphrase"
    assert isinstance(info.value.__cause__, ValueError)


def test_pem_missing_and_unexpected_passphrase() -> None:
    key = SigningKey.generate()
    with pytest.raises(KeyRingError) as info:
        SigningKey.from_pem(key.to_pem(b"secret"))
    assert info.value.code == "passphrase-required"
    with pytest.raises(KeyRingError) as info:
        SigningKey.from_pem(key.to_pem(), b"secret")
    assert info.value.code == "unexpected-passphrase"


@pytest.mark.parametrize(
    "data",
    [b"", b"not a pem", b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"],
    ids=["empty", "text", "garbage-body"],
)
def test_pem_garbage(data: bytes) -> None:
    with pytest.raises(KeyRingError) as info:
        SigningKey.from_pem(data)
    assert info.value.code == "bad-pem"


def test_pem_non_ed25519_key() -> None:
    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    with pytest.raises(KeyRingError, match="expected an Ed25519 private key") as info:
        SigningKey.from_pem(pem)
    assert info.value.code == "not-ed25519"


def test_pem_bad_argument_types() -> None:
    with pytest.raises(KeyRingError) as info:
        SigningKey.from_pem("-----BEGIN PRIVATE KEY-----")  # type: ignore[arg-type]
    assert info.value.code == "bad-pem"
    for passphrase in (b"", "text"):
        with pytest.raises(KeyRingError) as info:
            SigningKey.generate().to_pem(passphrase)  # type: ignore[arg-type]
        assert info.value.code == "bad-passphrase"


def test_signing_key_rejects_other_objects() -> None:
    with pytest.raises(KeyRingError) as info:
        SigningKey(ec.generate_private_key(ec.SECP256R1()))  # type: ignore[arg-type]
    assert info.value.code == "not-ed25519"


# ------------------------------------------------------------------- weak keys


@pytest.mark.parametrize("raw_hex", SMALL_ORDER.values(), ids=SMALL_ORDER.keys())
def test_small_order_keys_are_refused_at_enrolment(raw_hex: str) -> None:
    with pytest.raises(WeakKey, match="of small order") as info:
        KeyRing().enrol(
            multibase_of(raw_hex), controller="mallory", roles={"approver"}, not_before=T0
        )
    assert info.value.code == "weak-key"
    assert info.value.json_path == "$.public_key_multibase"
    with pytest.raises(WeakKey):
        check_public_key(bytes.fromhex(raw_hex))


def test_non_canonical_encoding_of_an_ordinary_point_is_refused() -> None:
    # y = p + k for small k: every such encoding that lands on the curve is a
    # non-canonical spelling of the point with y = k.
    p = 2**255 - 19
    codes = set()
    for k in range(2, 19):
        with pytest.raises(KeyRingError) as info:
            check_public_key((p + k).to_bytes(32, "little"))
        codes.add(info.value.code)
    assert codes == {"weak-key"}


def test_point_with_a_small_order_component_is_refused() -> None:
    # A + T where T has order 2 (y = -1): (x, y) + (0, -1) = (-x, -y).
    p = 2**255 - 19
    raw = bytes.fromhex(DERIVED["public_key_hex"])
    number = int.from_bytes(raw, "little")
    y = number & ((1 << 255) - 1)
    sign = number >> 255
    mixed = ((p - y) | ((1 - sign) << 255)).to_bytes(32, "little")
    with pytest.raises(WeakKey) as info:
        check_public_key(mixed)
    assert info.value.code == "weak-key"


def test_bytes_off_the_curve_and_wrong_lengths_are_refused() -> None:
    with pytest.raises(KeyRingError) as info:
        check_public_key((2).to_bytes(32, "little"))  # y = 2 is not on edwards25519
    assert info.value.code == "weak-key"
    with pytest.raises(KeyRingError) as info:
        check_public_key(b"\1" * 31)
    assert info.value.code == "bad-key-length"


@given(st.binary(min_size=32, max_size=32))
def test_generated_keys_pass_the_weak_key_check(seed: bytes) -> None:
    key = SigningKey.from_multibase(encode_secret_key_multibase(seed))
    check_public_key(key.public_key_bytes)


# ---------------------------------------------------------------------- key ring


def test_enrol_and_lookup() -> None:
    key = SigningKey.generate()
    ring = enrol(KeyRing(), key, roles={"proposer", "investigator"})
    entry = ring.lookup(key.verification_method)
    assert entry.controller == "evidence-specialist"
    assert entry.roles == frozenset({"proposer", "investigator"})
    assert entry.purposes == DEFAULT_PURPOSES
    assert entry.public_key_bytes == key.public_key_bytes
    assert len(ring) == 1
    assert list(ring) == [entry]
    assert ring.for_controller("evidence-specialist") == (entry,)


def test_key_ring_is_immutable() -> None:
    empty = KeyRing()
    ring = enrol(empty, SigningKey.generate())
    assert len(empty) == 0
    assert len(ring) == 1
    with pytest.raises(AttributeError):
        ring.entries = ()  # type: ignore[misc]


def test_unknown_key_lookup() -> None:
    ring = enrol(KeyRing(), SigningKey.generate())
    stranger = SigningKey.generate()
    with pytest.raises(UnknownKey, match="never fetched") as info:
        ring.lookup(stranger.verification_method)
    assert info.value.code == "unknown-key"
    assert isinstance(info.value, KeyError)


def test_custom_verification_method() -> None:
    key = SigningKey.generate()
    vm = "spiffe://acme/agent/evidence-specialist#key-1"
    ring = enrol(KeyRing(), key, verification_method=vm)
    assert ring.lookup(vm).public_key_multibase == key.public_key_multibase


def test_did_key_verification_method_must_name_its_own_key() -> None:
    key, other = SigningKey.generate(), SigningKey.generate()
    with pytest.raises(KeyRingError) as info:
        enrol(KeyRing(), key, verification_method=other.verification_method)
    assert info.value.code == "verification-method-mismatch"
    assert info.value.json_path == "$.verification_method"


def test_duplicates_are_refused() -> None:
    key = SigningKey.generate()
    ring = enrol(KeyRing(), key)
    with pytest.raises(KeyRingError) as info:
        enrol(ring, key)
    assert info.value.code == "duplicate-key"
    with pytest.raises(KeyRingError) as info:
        enrol(ring, key, verification_method="urn:example:same-key-again")
    assert info.value.code == "duplicate-key"
    assert info.value.json_path == "$.keys[1].public_key_multibase"


@pytest.mark.parametrize(
    ("overrides", "code", "path"),
    [
        ({"roles": "approver"}, "bad-key-entry", "$.roles"),
        ({"roles": {""}}, "bad-key-entry", "$.roles"),
        ({"purposes": set()}, "bad-key-entry", "$.purposes"),
        ({"controller": ""}, "bad-key-entry", "$.controller"),
        ({"controller": " padded "}, "bad-key-entry", "$.controller"),
        ({"not_before": datetime(2026, 1, 1)}, "naive-datetime", "$.not_before"),
        ({"not_after": T0}, "bad-validity-window", "$.not_after"),
        ({"not_after": "2027-01-01T00:00:00Z"}, "bad-time", "$.not_after"),
    ],
    ids=[
        "roles-as-string",
        "empty-role",
        "no-purposes",
        "empty-controller",
        "padded-controller",
        "naive-not-before",
        "empty-window",
        "string-time",
    ],
)
def test_bad_entries(overrides: dict[str, Any], code: str, path: str) -> None:
    with pytest.raises(KeyRingError) as info:
        enrol(KeyRing(), SigningKey.generate(), **overrides)
    assert (info.value.code, info.value.json_path) == (code, path)


def test_times_are_normalised_to_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    ring = enrol(
        KeyRing(), SigningKey.generate(), not_before=datetime(2026, 1, 1, 2, tzinfo=plus_two)
    )
    (entry,) = ring
    assert entry.not_before == T0
    assert entry.not_before.tzinfo is UTC


def test_validity_window_is_half_open() -> None:
    key = SigningKey.generate()
    end = T0 + timedelta(days=30)
    ring = enrol(KeyRing(), key, not_after=end)
    vm = key.verification_method
    assert ring.entry_valid_at(vm, T0).controller == "evidence-specialist"
    assert ring.entry_valid_at(vm, end - timedelta(microseconds=1))
    for when in (T0 - timedelta(seconds=1), end):
        with pytest.raises(ProofError, match="is not valid at") as info:
            ring.entry_valid_at(vm, when)
        assert info.value.code == "key-not-valid"


def test_rotation_keeps_several_keys_per_controller() -> None:
    old, new = SigningKey.generate(), SigningKey.generate()
    switch = T0 + timedelta(days=90)
    ring = enrol(enrol(KeyRing(), old, not_after=switch), new, not_before=switch)
    assert len(ring.for_controller("evidence-specialist")) == 2
    assert ring.entry_valid_at(old.verification_method, switch - timedelta(seconds=1))
    assert ring.entry_valid_at(new.verification_method, switch)
    with pytest.raises(ProofError):
        ring.entry_valid_at(old.verification_method, switch)
    with pytest.raises(ProofError):
        ring.entry_valid_at(new.verification_method, switch - timedelta(seconds=1))


# ---------------------------------------------------------------------- trust file


def two_key_ring() -> KeyRing:
    ring = enrol(KeyRing(), SigningKey.generate(), not_after=T0 + timedelta(days=1))
    return enrol(
        ring,
        SigningKey.generate(),
        controller="case-owner",
        roles={"approver", "executor"},
        purposes={"assertionMethod", "capabilityDelegation"},
        not_before=T0 + timedelta(seconds=1, microseconds=500000),
        verification_method="spiffe://acme/agent/case-owner#k2",
    )


def test_trust_file_round_trip() -> None:
    ring = two_key_ring()
    data = ring.to_json()
    assert data["type"] == "KeyRing"
    assert data["schema_version"] == "1.0"
    first, second = data["keys"]
    assert first["not_before"] == "2026-01-01T00:00:00Z"
    assert first["not_after"] == "2026-01-02T00:00:00Z"
    assert second["not_before"] == "2026-01-01T00:00:01.5Z"
    assert second["roles"] == ["approver", "executor"]
    assert second["purposes"] == ["assertionMethod", "capabilityDelegation"]
    assert KeyRing.from_json(json.loads(json.dumps(data))) == ring


def file_with(path: str, value: Any) -> dict[str, Any]:
    data = two_key_ring().to_json()
    *parents, last = path.split(".")
    target: Any = data
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    if value is DELETE:
        del target[last]
    else:
        target[last] = value
    return data


DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "code", "json_path"),
    [
        ("schema_version", "2.0", "unknown-version", "$.schema_version"),
        ("type", "TrustStore", "bad-trust-file", "$.type"),
        ("extra", 1, "bad-trust-file", "$.extra"),
        ("keys", {}, "bad-trust-file", "$.keys"),
        ("keys.1.not_before", "2026-01-01T00:00:00+00:00", "bad-time", "$.keys[1].not_before"),
        ("keys.1.not_before", "2026-01-01 00:00:00Z", "bad-time", "$.keys[1].not_before"),
        ("keys.1.not_before", "2026-02-30T00:00:00Z", "bad-time", "$.keys[1].not_before"),
        ("keys.0.not_after", 1767225600, "bad-time", "$.keys[0].not_after"),
        ("keys.1.roles", "approver", "bad-trust-file", "$.keys[1].roles"),
        ("keys.1.roles", ["approver", "approver"], "bad-trust-file", "$.keys[1].roles"),
        ("keys.1.purposes", [1], "bad-trust-file", "$.keys[1].purposes"),
        ("keys.1.controller", None, "bad-trust-file", "$.keys[1].controller"),
        ("keys.1.fingerprint", "x", "bad-trust-file", "$.keys[1].fingerprint"),
        ("keys.0.controller", DELETE, "bad-trust-file", "$.keys[0]"),
        (
            "keys.0.public_key_multibase",
            multibase_of(SMALL_ORDER["order-8-a"]),
            "weak-key",
            "$.keys[0].public_key_multibase",
        ),
        ("keys.1.public_key_multibase", "z6Mk", "wrong-key-type", "$.keys[1].public_key_multibase"),
        ("keys.0.not_after", "2025-12-31T00:00:00Z", "bad-validity-window", "$.keys[0].not_after"),
    ],
    ids=[
        "unknown-version",
        "wrong-type",
        "unknown-top-level-property",
        "keys-not-array",
        "offset-instead-of-z",
        "space-instead-of-t",
        "impossible-date",
        "number-time",
        "roles-string",
        "duplicate-role",
        "purpose-not-string",
        "controller-null",
        "unknown-entry-property",
        "missing-controller",
        "small-order-key",
        "truncated-key",
        "window-ends-before-start",
    ],
)
def test_trust_file_errors_name_the_path(path: str, value: Any, code: str, json_path: str) -> None:
    with pytest.raises(KeyRingError) as info:
        KeyRing.from_json(file_with(path, value))
    assert (info.value.code, info.value.json_path) == (code, json_path)


def test_trust_file_must_be_an_object() -> None:
    with pytest.raises(KeyRingError) as info:
        KeyRing.from_json([])  # type: ignore[arg-type]
    assert (info.value.code, info.value.json_path) == ("bad-trust-file", "$")


def test_trust_file_default_purposes() -> None:
    data = two_key_ring().to_json()
    del data["keys"][0]["purposes"]
    del data["keys"][0]["not_after"]
    entry = KeyRing.from_json(data).entries[0]
    assert entry.purposes == DEFAULT_PURPOSES
    assert entry.not_after is None


def test_key_entry_is_keyword_only_and_frozen() -> None:
    key = SigningKey.generate()
    entry = KeyEntry(
        verification_method=key.verification_method,
        public_key_multibase=key.public_key_multibase,
        controller="payments",
        roles={"executor"},
        not_before=T0,
    )
    assert KeyRing((entry,)).lookup(key.verification_method) is entry
    with pytest.raises(TypeError):
        KeyEntry(key.verification_method, key.public_key_multibase)  # type: ignore[call-arg]
    with pytest.raises(AttributeError):
        entry.controller = "mallory"  # type: ignore[misc]
