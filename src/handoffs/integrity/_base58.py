"""base58btc (the Bitcoin alphabet), as Multikey strings and ``proofValue`` spell bytes.

Encoding keeps each leading zero byte as ``1``; decoding accepts only alphabet
characters, so every string decodes to exactly one byte string that re-encodes to
itself (no non-canonical spelling exists to reject). With the optional ``based58``
package (``handoffs[fast]``, Rust) both directions are its; ``tests/unit/test_compiled.py``
checks them equal to the pure-Python ones here.
"""

from __future__ import annotations

import importlib
from typing import Any, Final

from handoffs._errors import KeyRingError

try:  # optional: handoffs[fast]
    _based58: Any = importlib.import_module("based58")
except ImportError:  # pragma: no cover - tests force the fallback
    _based58 = None

__all__ = ["b58decode", "b58encode"]


_B58_ALPHABET: Final = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_B58_INDEX: Final = {ch: i for i, ch in enumerate(_B58_ALPHABET)}
_B58_CHARS: Final = frozenset(_B58_ALPHABET)

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
    its ``b58decode``, which ``tests/unit/test_compiled.py`` checks equal to the pure-Python
    decoding below on every string of the alphabet.
    """
    if _based58 is not None:
        # based58 refuses every byte outside the alphabet, and encoding to ASCII every
        # other character (both ValueError: UnicodeEncodeError is one).
        try:
            return bytes(_based58.b58decode(text.encode("ascii")))
        except ValueError:
            return None
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


