"""An independent edwards25519 oracle for the tests (RFC 8032 §5.1 in exact integers).

The library checks keys with libsodium (``crypto_core_ed25519_is_valid_point``) and
verifies with libsodium; this module builds the adversarial inputs the tests feed both
libraries (every encoding of the small-order points, non-canonical spellings) and
decodes points leniently, so that the tests do not take libsodium's word for them.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "SMALL_ORDER_ENCODINGS",
    "L",
    "P",
    "decode_point",
    "has_small_order_component",
    "is_small_order",
]

# Exact integer arithmetic on the twisted Edwards curve -x^2 + y^2 = 1 + d x^2 y^2
# (RFC 8032 §5.1).

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


def is_small_order(point: _Point) -> bool:
    """``[8]P`` is the identity."""
    return _is_identity(_multiply(point, 8))


def has_small_order_component(point: _Point) -> bool:
    """``[L]P`` is not the identity (an honest key's never is)."""
    return not _is_identity(_multiply(point, _L))


L: Final = _L
P: Final = _P
decode_point = _decode_point
