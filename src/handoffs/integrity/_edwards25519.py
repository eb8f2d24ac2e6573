"""The edwards25519 weak-key checks: which public keys and signature points cannot bind
a signature to one signer.

Two Ed25519 verifiers may disagree on such inputs: libsodium (which the gate verifies
with) refuses small-order and non-canonical public keys and a small-order ``R`` in a
signature, while OpenSSL's (``cryptography``) ref10-style verify accepts them. The
library refuses all three before any verify, with a typed reason, so that no receipt
is admitted by one library and refused by the other (``tests/unit/test_ed25519_libraries.py``
documents every difference found):

- a key is checked once, at enrolment, by :func:`check_public_key`
  (``small-order-key``, ``non-canonical-key``, ``mixed-order-key``, ``not-on-curve``);
- a signature's ``R`` is looked up in :data:`SMALL_ORDER_ENCODINGS` (every 32-byte
  spelling of the eight small-order points, sign bit either way), a set lookup.
"""

from __future__ import annotations

from typing import Final

from handoffs._errors import KeyRingError, WeakKey

__all__ = ["SMALL_ORDER_ENCODINGS", "check_public_key", "small_order"]

# Exact integer arithmetic on the twisted Edwards curve -x^2 + y^2 = 1 + d x^2 y^2
# (RFC 8032 §5.1). It runs once per enrolment (and once at import, for the table of
# small-order encodings), never on the signing or verifying path.

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
    key). Returns nothing; raises on the first failure.

    Raises:
        KeyRingError: ``bad-key-length`` or ``not-on-curve``.
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


def _encode(point: _Point) -> bytes:
    x, y, z, _ = point
    inverse = pow(z, _P - 2, _P)
    x, y = x * inverse % _P, y * inverse % _P
    return (y | (x & 1) << 255).to_bytes(32, "little")


def _small_order_encodings() -> frozenset[bytes]:
    """Every 32-byte string that decodes (leniently) to a point of order dividing 8."""
    torsion = _IDENTITY
    y = 2
    while True:  # the first y whose point has an order-8 component (y = 3 today)
        found = _decode_point(y.to_bytes(32, "little"))
        if found is not None:
            torsion = _multiply(found[0], _L)
            if not _is_identity(_multiply(torsion, 4)):
                break
        y += 1
    encodings: set[bytes] = set()
    point = _IDENTITY
    for _ in range(8):
        y_value = int.from_bytes(_encode(point), "little") & ((1 << 255) - 1)
        for raw in (y_value, y_value + _P):
            for sign in (0, 1):
                if raw < 1 << 255:
                    encodings.add((raw | sign << 255).to_bytes(32, "little"))
        point = _add(point, torsion)
    return frozenset(encodings)


SMALL_ORDER_ENCODINGS: Final = _small_order_encodings()
"""Every encoding of a small-order point, canonical or not, with either sign bit."""


def small_order(encoded: bytes) -> bool:
    """Whether 32 bytes spell a small-order point (a weak key or a weak ``R``)."""
    return encoded in SMALL_ORDER_ENCODINGS
