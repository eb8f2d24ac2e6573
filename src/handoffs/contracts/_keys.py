"""Ed25519 keys, their Multikey encodings, and the key ring (trust store).

Keys travel as W3C Multikey strings: ``publicKeyMultibase = "z" + base58btc(0xed01 ‖
32-byte key)`` and ``secretKeyMultibase = "z" + base58btc(0x8026 ‖ 32-byte seed)``.
Decoders accept exactly those headers and lengths, and only the canonical spelling
(the decoded bytes must re-encode to the same string).

The :class:`KeyRing` is the *only* source of trust: a ``verificationMethod`` is a
lookup key into it, never something to resolve or fetch. Each :class:`KeyEntry` maps a
key to the agent that controls it, the roles that agent holds, the proof purposes the
key may serve and the time window in which it may sign. Enrolment refuses keys that
would not bind a signature to one signer: small-order points (in every encoding),
non-canonical encodings, points with a small-order component, and bytes that are not a
curve point at all.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Final

import attrs
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from handoffs._errors import HandoffsError, KeyRingError, ProofError, UnknownKey, WeakKey
from handoffs._time import expired

try:  # optional: handoffs[fast]
    _based58: Any = importlib.import_module("based58")
except ImportError:  # pragma: no cover - tests force the fallback
    _based58 = None

__all__ = [
    "DEFAULT_PURPOSES",
    "KEY_RING_SCHEMA_VERSION",
    "KeyEntry",
    "KeyRing",
    "SigningKey",
    "b58decode",
    "b58encode",
    "check_public_key",
    "decode_public_key_multibase",
    "decode_secret_key_multibase",
    "did_key_verification_method",
    "encode_public_key_multibase",
    "encode_secret_key_multibase",
]

# --------------------------------------------------------------------------- base58btc

_B58_ALPHABET: Final = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_B58_INDEX: Final = {ch: i for i, ch in enumerate(_B58_ALPHABET)}
_B58_CHARS: Final = frozenset(_B58_ALPHABET)
_B58_BYTES: Final = _B58_ALPHABET.encode("ascii")

_ED25519_PUB_HEADER: Final = b"\xed\x01"
_ED25519_PRIV_HEADER: Final = b"\x80\x26"
# base58 of 34 bytes is at most 47 characters; one more for the multibase "z".
_MULTIKEY_MAX_CHARS: Final = 48


def b58encode(data: bytes) -> str:
    """Encode bytes as base58btc (Bitcoin alphabet); each leading zero byte becomes ``1``."""
    if _based58 is not None:
        return str(_based58.b58encode(bytes(data)).decode("ascii"))
    return _b58encode_python(data)


def _b58encode_python(data: bytes) -> str:
    zeros = len(data) - len(data.lstrip(b"\0"))
    number = int.from_bytes(data, "big")
    digits: list[str] = []
    while number:
        number, rem = divmod(number, 58)
        digits.append(_B58_ALPHABET[rem])
    return "1" * zeros + "".join(reversed(digits))


_B58_DIGITS: Final = str.maketrans({ch: chr(i) for i, ch in enumerate(_B58_ALPHABET)})
_B58_CHUNK: Final = 58**4


def _b58decode_or_none(text: str) -> bytes | None:
    """Decode canonical base58btc, or return ``None`` for anything else.

    With the optional ``based58`` package (``handoffs[fast]``, Rust) the decoding is
    its ``b58decode``, which ``tests/test_compiled.py`` checks equal to the pure-Python
    decoding below on every string of the alphabet.
    """
    if _based58 is not None:
        # Only alphabet characters: ASCII, and nothing left once they are deleted.
        if not text.isascii() or (raw := text.encode("ascii")).translate(None, _B58_BYTES):
            return None
        return bytes(_based58.b58decode(raw))
    if not _B58_CHARS.issuperset(text):
        return None
    return _b58decode_python(text)


def _b58decode_python(text: str) -> bytes:
    # Digit values as bytes, then four digits at a time in machine-sized integers.
    digits = text.translate(_B58_DIGITS).encode("latin-1")
    head = len(digits) % 4
    number = 0
    for digit in digits[:head]:
        number = number * 58 + digit
    for part in [((digits[i] * 58 + digits[i + 1]) * 58 + digits[i + 2]) * 58 + digits[i + 3]
                 for i in range(head, len(digits), 4)]:
        number = number * _B58_CHUNK + part
    zeros = len(text) - len(text.lstrip("1"))
    # Leading "1"s are zero bytes and the rest is a number without leading zero
    # digits, so this decoding is a bijection: every string has exactly one byte
    # string and re-encodes to itself (a property test checks it), and no
    # non-canonical spelling exists to reject.
    return b"\0" * zeros + number.to_bytes((number.bit_length() + 7) // 8, "big")


def b58decode(text: str) -> bytes:
    """Decode base58btc text (Bitcoin alphabet), keeping leading ``1`` as zero bytes.

    Raises:
        KeyRingError: ``invalid-base58`` for a character outside the alphabet or a
            string that is not the canonical encoding of its bytes.

    """
    if not isinstance(text, str):
        raise KeyRingError(
            f"expected a base58btc string, got {type(text).__name__}", code="invalid-base58"
        )
    data = _b58decode_or_none(text)
    if data is None:
        raise KeyRingError(f"not canonical base58btc: {text[:64]!r}", code="invalid-base58")
    return data


def _decode_multikey(text: str, *, header: bytes, what: str, json_path: str) -> bytes:
    if not isinstance(text, str):
        raise KeyRingError(
            f"expected a {what} string, got {type(text).__name__}",
            code="invalid-multibase",
            json_path=json_path,
        )
    if len(text) > _MULTIKEY_MAX_CHARS or not text.startswith("z"):
        raise KeyRingError(
            f"{what} must be 'z' (base58btc multibase) followed by at most "
            f"{_MULTIKEY_MAX_CHARS - 1} characters, got {text[:64]!r}",
            code="invalid-multibase",
            json_path=json_path,
        )
    data = _b58decode_or_none(text[1:])
    if data is None:
        raise KeyRingError(
            f"{what} is not canonical base58btc: {text!r}",
            code="invalid-multibase",
            json_path=json_path,
        )
    if len(data) != 34 or data[:2] != header:
        raise KeyRingError(
            f"{what} must encode the multicodec header 0x{header.hex()} and 32 key bytes, "
            f"got {len(data)} bytes starting 0x{data[:2].hex()}",
            code="wrong-key-type",
            json_path=json_path,
        )
    return data[2:]


def encode_public_key_multibase(public_key: bytes) -> str:
    """Return the Multikey ``publicKeyMultibase`` of a raw 32-byte Ed25519 public key."""
    if len(public_key) != 32:
        raise KeyRingError(
            f"an Ed25519 public key is 32 bytes, got {len(public_key)}", code="bad-key-length"
        )
    return "z" + b58encode(_ED25519_PUB_HEADER + bytes(public_key))


def decode_public_key_multibase(text: str, *, json_path: str = "$") -> bytes:
    """Return the raw 32-byte Ed25519 public key of a Multikey ``publicKeyMultibase``.

    Only the ``z`` (base58btc) multibase and the ``0xed01`` (ed25519-pub) header are
    accepted. The point itself is not checked here; see ``check_public_key``.

    Raises:
        KeyRingError: ``invalid-multibase`` or ``wrong-key-type``.

    """
    return _decode_multikey(
        text, header=_ED25519_PUB_HEADER, what="publicKeyMultibase", json_path=json_path
    )


def encode_secret_key_multibase(seed: bytes) -> str:
    """Return the Multikey ``secretKeyMultibase`` of a 32-byte Ed25519 seed."""
    if len(seed) != 32:
        raise KeyRingError(f"an Ed25519 seed is 32 bytes, got {len(seed)}", code="bad-key-length")
    return "z" + b58encode(_ED25519_PRIV_HEADER + bytes(seed))


def decode_secret_key_multibase(text: str, *, json_path: str = "$") -> bytes:
    """Return the 32-byte Ed25519 seed of a Multikey ``secretKeyMultibase``.

    Raises:
        KeyRingError: ``invalid-multibase`` or ``wrong-key-type`` (header not ``0x8026``).

    """
    return _decode_multikey(
        text, header=_ED25519_PRIV_HEADER, what="secretKeyMultibase", json_path=json_path
    )


def did_key_verification_method(public_key_multibase: str) -> str:
    """Return the ``did:key`` verification method id of a key: ``did:key:<mb>#<mb>``."""
    decode_public_key_multibase(public_key_multibase)
    return f"did:key:{public_key_multibase}#{public_key_multibase}"


# ---------------------------------------------------------------- edwards25519 checks
# Exact integer arithmetic on the twisted Edwards curve -x^2 + y^2 = 1 + d x^2 y^2
# (RFC 8032 §5.1). It runs once per enrolment, never on the signing or verifying path.

_P: Final = 2**255 - 19
_D: Final = -121665 * pow(121666, -1, _P) % _P
_D2: Final = 2 * _D % _P
_L: Final = 2**252 + 27742317777372353535851937790883648493  # prime subgroup order
_SQRT_M1: Final = pow(2, (_P - 1) // 4, _P)

_Point = tuple[int, int, int, int]  # extended coordinates (X, Y, Z, T)
_IDENTITY: Final[_Point] = (0, 1, 1, 0)


def _decode_point(data: bytes) -> tuple[_Point, bool] | None:
    """Decode 32 bytes leniently: ``(point, canonical)``, or ``None`` if not on the curve.

    Lenient on purpose (``y`` is reduced mod p, ``x = -0`` is accepted) so that every
    alternative encoding of a small-order point is recognised as that point.
    """
    number = int.from_bytes(data, "little")
    sign = number >> 255
    y_raw = number & ((1 << 255) - 1)
    y = y_raw % _P
    u = (y * y - 1) % _P
    v = (_D * y * y + 1) % _P
    x2 = u * pow(v, _P - 2, _P) % _P
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P:
        return None
    canonical = y_raw < _P and not (x == 0 and sign == 1)
    if (x & 1) != sign:
        x = -x % _P
    return (x, y, 1, x * y % _P), canonical


def _add(p: _Point, q: _Point) -> _Point:
    # RFC 8032 §5.1.4 addition (complete for a = -1, non-square d).
    x1, y1, z1, t1 = p
    x2, y2, z2, t2 = q
    a = (y1 - x1) * (y2 - x2) % _P
    b = (y1 + x1) * (y2 + x2) % _P
    c = t1 * _D2 * t2 % _P
    d = z1 * 2 * z2 % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _multiply(point: _Point, scalar: int) -> _Point:
    result = _IDENTITY
    addend = point
    while scalar:
        if scalar & 1:
            result = _add(result, addend)
        addend = _add(addend, addend)
        scalar >>= 1
    return result


def _is_identity(point: _Point) -> bool:
    x, y, z, _ = point
    return x % _P == 0 and (y - z) % _P == 0


def check_public_key(public_key: bytes, *, json_path: str = "$") -> None:
    """Refuse an Ed25519 public key that cannot bind a signature to a single signer.

    Checks, in order: 32 bytes; a point on the curve; not of small order (all eight
    small-order points, in canonical *and* non-canonical encodings: the cofactor
    multiple ``[8]A`` must not be the identity); canonically encoded; free of any
    small-order component (``[L]A`` is the identity, as for every honestly generated
    key); loadable by ``cryptography``. Returns nothing; raises on the first failure.

    Raises:
        KeyRingError: ``bad-key-length``, ``not-on-curve`` or ``bad-key``.
        KeyRingError: ``WeakKey``, ``small-order-key``, ``non-canonical-key`` or
            ``mixed-order-key``.

    """
    if not isinstance(public_key, bytes | bytearray) or len(public_key) != 32:
        size = len(public_key) if isinstance(public_key, bytes | bytearray) else "no"
        raise KeyRingError(
            f"an Ed25519 public key is 32 bytes, got {size} bytes",
            code="bad-key-length",
            json_path=json_path,
        )
    decoded = _decode_point(bytes(public_key))
    if decoded is None:
        raise KeyRingError(
            "the public key is not a point on edwards25519",
            code="not-on-curve",
            json_path=json_path,
        )
    point, canonical = decoded
    if _is_identity(_multiply(point, 8)):
        raise WeakKey(
            f"the public key {bytes(public_key).hex()} is a small-order point; any "
            "signature made with it would not bind a signer",
            code="small-order-key",
            json_path=json_path,
        )
    if not canonical:
        raise WeakKey(
            "the public key is a non-canonical point encoding",
            code="non-canonical-key",
            json_path=json_path,
        )
    if not _is_identity(_multiply(point, _L)):
        raise WeakKey(
            "the public key has a small-order component; honest Ed25519 keys never do",
            code="mixed-order-key",
            json_path=json_path,
        )
    try:
        Ed25519PublicKey.from_public_bytes(bytes(public_key))
    except ValueError as exc:  # pragma: no cover - every on-curve point loads today
        raise KeyRingError(
            f"cryptography cannot load the public key: {exc}", code="bad-key", json_path=json_path
        ) from exc


# ---------------------------------------------------------------------- times (RFC 3339)

_RFC3339_Z: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?Z", re.ASCII
)


_PARSED: dict[str, datetime] = {}
_PARSED_LIMIT: Final = 1024


def _parse_utc(text: object) -> datetime | None:
    """Parse an RFC 3339 UTC time (upper-case ``T`` and ``Z``, at most microseconds).

    Recent results are kept (many proofs in a busy second share their times).
    """
    if type(text) is not str:
        return None if not isinstance(text, str) else _parse_utc_uncached(text)
    found = _PARSED.get(text)
    if found is not None:
        return found
    parsed = _parse_utc_uncached(text)
    if parsed is not None:
        if len(_PARSED) >= _PARSED_LIMIT:
            _PARSED.clear()
        _PARSED[text] = parsed
    return parsed


def _parse_utc_uncached(text: str) -> datetime | None:
    match = _RFC3339_Z.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction = match.groups()
    try:
        return datetime(
            int(year),
            int(month),
            int(day),
            int(hour),
            int(minute),
            int(second),
            int((fraction or "0").ljust(6, "0")),
            tzinfo=UTC,
        )
    except ValueError:
        return None


def _format_utc(when: datetime) -> str:
    """Format an aware datetime as RFC 3339 UTC with ``Z`` (fraction only when non-zero)."""
    when = when.astimezone(UTC)
    text = (
        f"{when.year:04d}-{when.month:02d}-{when.day:02d}"
        f"T{when.hour:02d}:{when.minute:02d}:{when.second:02d}"
    )
    if when.microsecond:
        text += f".{when.microsecond:06d}".rstrip("0")
    return text + "Z"


def _aware_utc(value: object, *, json_path: str) -> datetime:
    if type(value) is datetime and value.tzinfo is UTC:
        return value
    if not isinstance(value, datetime):
        raise KeyRingError(
            f"expected a datetime, got {type(value).__name__}",
            code="bad-time",
            json_path=json_path,
        )
    if value.tzinfo is None or value.utcoffset() is None:
        raise KeyRingError(
            f"expected a timezone-aware datetime, got naive {value.isoformat()}",
            code="naive-datetime",
            json_path=json_path,
        )
    return value.astimezone(UTC)


# ----------------------------------------------------------------------------- keys


def _check_private_key(instance: object, attribute: object, value: Any) -> None:
    if not isinstance(value, Ed25519PrivateKey):
        raise KeyRingError(
            f"a SigningKey wraps an Ed25519 private key, got {type(value).__name__}",
            code="not-ed25519",
        )


@attrs.frozen(repr=False, eq=False)
class SigningKey:
    """An Ed25519 private key that signs proofs.

    Create one with :meth:`generate`, :meth:`from_pem` or :meth:`from_multibase`. The
    repr shows only the public key; the secret never appears in logs.
    """

    private_key: Ed25519PrivateKey = attrs.field(validator=_check_private_key)

    @classmethod
    def generate(cls) -> SigningKey:
        """Return a new random key from the operating system's CSPRNG."""
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_multibase(cls, secret_key_multibase: str) -> SigningKey:
        """Load a key from its Multikey ``secretKeyMultibase`` (``z`` + ``0x8026`` ‖ seed).

        Raises:
            KeyRingError: ``invalid-multibase`` or ``wrong-key-type``.

        """
        seed = decode_secret_key_multibase(secret_key_multibase)
        return cls(Ed25519PrivateKey.from_private_bytes(seed))

    @classmethod
    def from_pem(cls, data: bytes, passphrase: bytes | None = None) -> SigningKey:
        """Load a PKCS#8 PEM private key, decrypting it with ``passphrase`` if given.

        Raises:
            KeyRingError: ``passphrase-required`` (encrypted, none given),
                ``unexpected-passphrase`` (not encrypted, one given), ``bad-passphrase``,
                ``bad-pem`` (not a readable PEM private key) or ``not-ed25519``.

        """
        if not isinstance(data, bytes):
            raise KeyRingError(f"PEM data must be bytes, got {type(data).__name__}", code="bad-pem")
        if passphrase is not None and not isinstance(passphrase, bytes):
            raise KeyRingError(
                f"a passphrase must be bytes, got {type(passphrase).__name__}",
                code="bad-passphrase",
            )
        from cryptography.hazmat.primitives import serialization  # PEM only, on demand

        try:
            key = serialization.load_pem_private_key(data, password=passphrase)
        except TypeError as exc:
            if passphrase is None:
                raise KeyRingError(
                    "the PEM key is encrypted; a passphrase is required",
                    code="passphrase-required",
                ) from exc
            raise KeyRingError(
                "the PEM key is not encrypted, but a passphrase was given",
                code="unexpected-passphrase",
            ) from exc
        except ValueError as exc:
            if passphrase is not None and b"ENCRYPTED" in data:
                raise KeyRingError(
                    "the passphrase does not decrypt the PEM key", code="bad-passphrase"
                ) from exc
            raise KeyRingError(f"not a readable PEM private key: {exc}", code="bad-pem") from exc
        except UnsupportedAlgorithm as exc:
            raise KeyRingError(
                f"the PEM key uses an unsupported algorithm: {exc}", code="not-ed25519"
            ) from exc
        if not isinstance(key, Ed25519PrivateKey):
            raise KeyRingError(
                f"expected an Ed25519 private key, got {type(key).__name__}",
                code="not-ed25519",
            )
        return cls(key)

    def to_pem(self, passphrase: bytes | None = None) -> bytes:
        """Serialise as PKCS#8 PEM; encrypted (best available scheme) with a passphrase.

        Raises:
            KeyRingError: ``bad-passphrase`` for an empty or non-bytes passphrase.

        """
        from cryptography.hazmat.primitives import serialization  # PEM only, on demand

        encryption: serialization.KeySerializationEncryption
        if passphrase is None:
            encryption = serialization.NoEncryption()
        elif not isinstance(passphrase, bytes) or not passphrase:
            raise KeyRingError("a passphrase must be non-empty bytes", code="bad-passphrase")
        else:
            encryption = serialization.BestAvailableEncryption(passphrase)
        return self.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )

    @property
    def public_key_bytes(self) -> bytes:
        """The raw 32-byte public key."""
        return self.private_key.public_key().public_bytes_raw()

    @property
    def public_key_multibase(self) -> str:
        """The Multikey ``publicKeyMultibase``: ``z`` + base58btc(``0xed01`` ‖ key)."""
        return encode_public_key_multibase(self.public_key_bytes)

    @property
    def verification_method(self) -> str:
        """The ``did:key`` verification method id: ``did:key:<mb>#<mb>``."""
        return did_key_verification_method(self.public_key_multibase)

    def sign(self, data: bytes) -> bytes:
        """Return the 64-byte pure Ed25519 (RFC 8032) signature of ``data``."""
        return self.private_key.sign(data)

    def __repr__(self) -> str:
        return f"SigningKey(public_key_multibase={self.public_key_multibase!r})"


#: Proof purposes a key serves unless enrolled with others.
DEFAULT_PURPOSES: Final = frozenset({"assertionMethod"})


def _string_set(value: object, *, what: str) -> frozenset[str]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise KeyRingError(
            f"{what} must be a set of strings, got {type(value).__name__}",
            code="bad-key-entry",
            json_path=f"$.{what}",
        )
    items = frozenset(value)
    for item in items:
        if not isinstance(item, str) or not item:
            raise KeyRingError(
                f"{what} must hold non-empty strings, got {item!r}",
                code="bad-key-entry",
                json_path=f"$.{what}",
            )
    return items


def _roles(value: Iterable[str]) -> frozenset[str]:
    return _string_set(value, what="roles")


def _purposes(value: Iterable[str]) -> frozenset[str]:
    return _string_set(value, what="purposes")


def _not_before(value: datetime) -> datetime:
    return _aware_utc(value, json_path="$.not_before")


def _not_after(value: datetime | None) -> datetime | None:
    return None if value is None else _aware_utc(value, json_path="$.not_after")


def _revoked_at(value: datetime | None) -> datetime | None:
    return None if value is None else _aware_utc(value, json_path="$.revoked_at")


def revoked(entry: KeyEntry, now: datetime) -> bool:
    """Whether ``entry``'s proofs no longer verify at ``now`` (revoked at or before it)."""
    return entry.revoked_at is not None and expired(entry.revoked_at, now)


def _non_empty_str(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not value or value != value.strip():
        raise KeyRingError(
            f"{attribute.name} must be a non-empty string without surrounding space, got {value!r}",
            code="bad-key-entry",
            json_path=f"$.{attribute.name}",
        )


@attrs.frozen(kw_only=True)
class KeyEntry:
    """One enrolled public key: who controls it, what it may do, and when.

    A ``KeyEntry`` cannot be built around an unsafe key: construction runs
    ``check_public_key``, and a ``did:key`` verification method must name this
    very key.

    Attributes:
        verification_method: the id that proofs name in ``verificationMethod``.
        public_key_multibase: the Multikey public key.
        controller: the identity of the agent holding the key, e.g.
            ``"evidence-specialist"``.
        roles: roles the controller holds, e.g. ``{"proposer", "approver"}``.
        not_before: first instant (UTC) at which the key may sign.
        not_after: first instant at which it may no longer sign, or ``None``. This is
            *rotation*: a proof the key made before ``not_after`` still verifies.
        purposes: proof purposes the key may serve (default ``{"assertionMethod"}``).
        revoked_at: first instant at which *none* of the key's proofs verifies any more,
            whatever its ``created`` says (``key-revoked``), or ``None``. This is
            *revocation*, for a key that is compromised or must not be trusted: unlike
            rotation, a back-dated proof cannot escape it.

    """

    verification_method: str = attrs.field(validator=_non_empty_str)
    public_key_multibase: str = attrs.field(validator=_non_empty_str)
    controller: str = attrs.field(validator=_non_empty_str)
    roles: frozenset[str] = attrs.field(converter=_roles)
    not_before: datetime = attrs.field(converter=_not_before)
    not_after: datetime | None = attrs.field(default=None, converter=_not_after)
    purposes: frozenset[str] = attrs.field(default=DEFAULT_PURPOSES, converter=_purposes)
    revoked_at: datetime | None = attrs.field(default=None, converter=_revoked_at)

    _public_key: Ed25519PublicKey = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        raw = decode_public_key_multibase(
            self.public_key_multibase, json_path="$.public_key_multibase"
        )
        check_public_key(raw, json_path="$.public_key_multibase")
        # Loaded once at enrolment; verification reuses it.
        object.__setattr__(self, "_public_key", Ed25519PublicKey.from_public_bytes(raw))
        if self.verification_method.startswith("did:key:"):
            expected = did_key_verification_method(self.public_key_multibase)
            if self.verification_method != expected:
                raise KeyRingError(
                    f"a did:key verification method must name its own key: expected "
                    f"{expected!r}, got {self.verification_method!r}",
                    code="verification-method-mismatch",
                    json_path="$.verification_method",
                )
        if not self.purposes:
            raise KeyRingError(
                "a key needs at least one proof purpose",
                code="bad-key-entry",
                json_path="$.purposes",
            )
        if self.not_after is not None and self.not_after <= self.not_before:
            raise KeyRingError(
                f"not_after ({_format_utc(self.not_after)}) must be later than "
                f"not_before ({_format_utc(self.not_before)})",
                code="bad-validity-window",
                json_path="$.not_after",
            )

    @property
    def public_key_bytes(self) -> bytes:
        """The raw 32-byte public key."""
        return decode_public_key_multibase(self.public_key_multibase)

    @property
    def public_key(self) -> Ed25519PublicKey:
        """The loaded public key (checked at enrolment)."""
        return self._public_key

    def valid_at(self, when: datetime) -> bool:
        """Whether the key may sign at ``when``: ``not_before <= when < not_after``."""
        when = _aware_utc(when, json_path="$")
        return self.not_before <= when and (
            self.not_after is None or not expired(self.not_after, when))

    def to_json(self) -> dict[str, Any]:
        """Return this entry as a trust-file JSON object (sorted sets, RFC 3339 ``Z``)."""
        return {
            "verification_method": self.verification_method,
            "public_key_multibase": self.public_key_multibase,
            "controller": self.controller,
            "roles": sorted(self.roles),
            "not_before": _format_utc(self.not_before),
            "not_after": None if self.not_after is None else _format_utc(self.not_after),
            "purposes": sorted(self.purposes),
            **({} if self.revoked_at is None else {"revoked_at": _format_utc(self.revoked_at)}),
        }


#: The trust-file ``schema_version`` this library reads and writes.
KEY_RING_SCHEMA_VERSION: Final = "1.0"
_KEY_RING_TYPE: Final = "KeyRing"
_ENTRY_REQUIRED: Final = frozenset(
    {"verification_method", "public_key_multibase", "controller", "roles", "not_before"}
)
_ENTRY_KEYS: Final = _ENTRY_REQUIRED | {"not_after", "purposes", "revoked_at"}


def _check_unique(instance: object, attribute: object, entries: tuple[KeyEntry, ...]) -> None:
    seen_vm: set[str] = set()
    seen_key: set[str] = set()
    for index, entry in enumerate(entries):
        if not isinstance(entry, KeyEntry):
            raise KeyRingError(
                f"a key ring holds KeyEntry objects, got {type(entry).__name__}",
                code="bad-key-entry",
                json_path=f"$.keys[{index}]",
            )
        if entry.verification_method in seen_vm:
            raise KeyRingError(
                f"verification method {entry.verification_method!r} is enrolled twice",
                code="duplicate-key",
                json_path=f"$.keys[{index}].verification_method",
            )
        if entry.public_key_multibase in seen_key:
            raise KeyRingError(
                f"public key {entry.public_key_multibase!r} is enrolled twice; one key "
                "belongs to one entry",
                code="duplicate-key",
                json_path=f"$.keys[{index}].public_key_multibase",
            )
        seen_vm.add(entry.verification_method)
        seen_key.add(entry.public_key_multibase)


def _entries(value: Iterable[KeyEntry]) -> tuple[KeyEntry, ...]:
    return tuple(value)


@attrs.frozen
class KeyRing:
    """An immutable trust store: the only place verification looks keys up.

    ``with_key`` and ``enrol`` return a new ring. A ``verificationMethod`` is never
    resolved or fetched; a key that is not enrolled is unknown, however valid its
    ``did:key``. Several keys may share a controller (rotation), each with its own
    validity window; a proof stays verifiable when its key was valid at the proof's
    ``created`` time.
    """

    entries: tuple[KeyEntry, ...] = attrs.field(
        default=(), converter=_entries, validator=_check_unique
    )
    _by_vm: Mapping[str, KeyEntry] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(
            self, "_by_vm", {entry.verification_method: entry for entry in self.entries}
        )

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[KeyEntry]:
        return iter(self.entries)

    def with_key(self, entry: KeyEntry) -> KeyRing:
        """Return a new ring that also holds ``entry``.

        Raises:
            KeyRingError: ``duplicate-key`` if its verification method or public key is
                already enrolled.

        """
        return KeyRing((*self.entries, entry))

    def enrol(
        self,
        public_key_multibase: str,
        *,
        controller: str,
        not_before: datetime,
        roles: Iterable[str] = (),
        not_after: datetime | None = None,
        purposes: Iterable[str] = DEFAULT_PURPOSES,
        verification_method: str | None = None,
    ) -> KeyRing:
        """Return a new ring with the key enrolled (``did:key`` id unless one is given).

        ``roles`` defaults to none: a key holds only the roles it is given (a grant
        issuer's key needs ``policy-service``).

        Raises:
            KeyRingError: ``WeakKey``, for a small-order, non-canonical or mixed-order key.
            KeyRingError: for an undecodable key, a bad entry or a duplicate.

        """
        if verification_method is None:
            verification_method = did_key_verification_method(public_key_multibase)
        entry = KeyEntry(
            verification_method=verification_method,
            public_key_multibase=public_key_multibase,
            controller=controller,
            roles=roles,
            not_before=not_before,
            not_after=not_after,
            purposes=purposes,
        )
        return self.with_key(entry)

    def revoke(self, verification_method: str, *, at: datetime) -> KeyRing:
        """Return a new ring in which the key is revoked from ``at`` on: from that
        instant no proof of it verifies, whatever its ``created`` (see
        :attr:`KeyEntry.revoked_at`; rotation is ``not_after``).

        Raises:
            UnknownKey: the ring holds no such key.
            KeyRingError: ``at`` is not a timezone-aware datetime.

        """
        entry = self.lookup(verification_method)
        when = _aware_utc(at, json_path="$.revoked_at")
        return KeyRing(tuple(attrs.evolve(e, revoked_at=when) if e is entry else e
                             for e in self.entries))

    def lookup(self, verification_method: str) -> KeyEntry:
        """Return the entry enrolled under ``verification_method``.

        Raises:
            UnknownKey: the ring holds no such key (it is never fetched).

        """
        entry = self._by_vm.get(verification_method)
        if entry is None:
            raise UnknownKey(
                f"no key {verification_method!r} in the key ring; keys are never fetched",
                json_path="$.proof.verificationMethod",
            )
        return entry

    def _get(self, verification_method: str) -> KeyEntry | None:
        """The entry enrolled under ``verification_method``, or ``None`` (for the
        gate's fused accept path; :meth:`lookup` is the public way).
        """
        return self._by_vm.get(verification_method)

    def entry_valid_at(self, verification_method: str, when: datetime) -> KeyEntry:
        """Return the entry for ``verification_method`` if it may sign at ``when``.

        Raises:
            UnknownKey: the ring holds no such key.
            ProofError: ``key-not-valid`` unless ``not_before <= when < not_after``.

        """
        entry = self.lookup(verification_method)
        if not entry.valid_at(when):
            window = (
                f"[{_format_utc(entry.not_before)}, "
                f"{'∞' if entry.not_after is None else _format_utc(entry.not_after)})"
            )
            raise ProofError(
                f"key {verification_method!r} of {entry.controller!r} is not valid at "
                f"{_format_utc(when)}; its window is {window}",
                code="key-not-valid",
                json_path="$.proof.created",
            )
        return entry

    def for_controller(self, controller: str) -> tuple[KeyEntry, ...]:
        """Return every entry of ``controller`` (rotated keys included), in ring order."""
        return tuple(entry for entry in self.entries if entry.controller == controller)

    def to_json(self) -> dict[str, Any]:
        """Return the ring as a trust file: ``{"type", "schema_version", "keys": [...]}``."""
        return {
            "type": _KEY_RING_TYPE,
            "schema_version": KEY_RING_SCHEMA_VERSION,
            "keys": [entry.to_json() for entry in self.entries],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KeyRing:
        """Build a ring from a trust file, strictly.

        Unknown or missing properties, an unknown ``schema_version``, times that are not
        RFC 3339 ``Z`` strings, weak keys and duplicates are errors naming their JSON
        path, e.g. ``$.keys[2].not_before``.

        Raises:
            KeyRingError: (or its subclass ``WeakKey``) with the path of the first problem.

        """
        if not isinstance(data, Mapping):
            raise KeyRingError(
                f"a trust file is a JSON object, got {type(data).__name__}",
                code="bad-trust-file",
            )
        _check_keys(data, required={"type", "schema_version", "keys"}, path="$")
        if data["type"] != _KEY_RING_TYPE:
            raise KeyRingError(
                f"expected type {_KEY_RING_TYPE!r}, got {data['type']!r}",
                code="bad-trust-file",
                json_path="$.type",
            )
        if data["schema_version"] != KEY_RING_SCHEMA_VERSION:
            raise KeyRingError(
                f"unknown trust-file schema_version {data['schema_version']!r}; this "
                f"library reads {KEY_RING_SCHEMA_VERSION!r}",
                code="unknown-version",
                json_path="$.schema_version",
            )
        keys = data["keys"]
        if not isinstance(keys, list):
            raise KeyRingError(
                f"expected an array, got {type(keys).__name__}",
                code="bad-trust-file",
                json_path="$.keys",
            )
        entries = [_entry_from_json(item, path=f"$.keys[{i}]") for i, item in enumerate(keys)]
        return cls(entries)


def _check_keys(
    data: Mapping[str, Any],
    *,
    required: frozenset[str] | set[str],
    path: str,
    allowed: frozenset[str] | set[str] | None = None,
) -> None:
    allowed = required if allowed is None else allowed
    for key in data:
        if key not in allowed:
            raise KeyRingError(
                f"unknown property {key!r}", code="bad-trust-file", json_path=f"{path}.{key}"
            )
    for key in sorted(required):
        if key not in data:
            raise KeyRingError(
                f"required property {key!r} is missing", code="bad-trust-file", json_path=path
            )


def _string_list(value: object, *, path: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise KeyRingError(
            f"expected an array of strings, got {value!r}", code="bad-trust-file", json_path=path
        )
    if len(set(value)) != len(value):
        raise KeyRingError(f"duplicate items in {value!r}", code="bad-trust-file", json_path=path)
    return value


def _time(value: object, *, path: str) -> datetime:
    when = _parse_utc(value)
    if when is None:
        raise KeyRingError(
            f"expected an RFC 3339 UTC time like '2026-01-05T10:00:00Z', got {value!r}",
            code="bad-time",
            json_path=path,
        )
    return when


def _entry_from_json(item: object, *, path: str) -> KeyEntry:
    if not isinstance(item, Mapping):
        raise KeyRingError(
            f"a key entry is a JSON object, got {type(item).__name__}",
            code="bad-trust-file",
            json_path=path,
        )
    _check_keys(item, required=_ENTRY_REQUIRED, allowed=_ENTRY_KEYS, path=path)
    for name in ("verification_method", "public_key_multibase", "controller"):
        if not isinstance(item[name], str):
            raise KeyRingError(
                f"expected a string, got {item[name]!r}",
                code="bad-trust-file",
                json_path=f"{path}.{name}",
            )
    roles = _string_list(item["roles"], path=f"{path}.roles")
    purposes = _string_list(item.get("purposes", ["assertionMethod"]), path=f"{path}.purposes")
    not_before = _time(item["not_before"], path=f"{path}.not_before")
    not_after = item.get("not_after")
    if not_after is not None:
        not_after = _time(not_after, path=f"{path}.not_after")
    revoked_at = item.get("revoked_at")
    if revoked_at is not None:
        revoked_at = _time(revoked_at, path=f"{path}.revoked_at")
    try:
        return KeyEntry(
            verification_method=item["verification_method"],
            public_key_multibase=item["public_key_multibase"],
            controller=item["controller"],
            roles=roles,
            not_before=not_before,
            not_after=not_after,
            purposes=purposes,
            revoked_at=revoked_at,
        )
    except HandoffsError as exc:
        # Entry errors name a path inside the entry ("$.roles"); anchor it in the file.
        relocated = type(exc)(
            exc.message, code=exc.code, json_path=path + exc.json_path.removeprefix("$")
        )
        raise relocated from exc
