"""One rule for "expired at instant *t*", shared by everything that expires.

Receipts (``valid_until``), authority grants (``valid_until``), proofs (``expires``),
keys (``not_after`` for signing, ``revoked_at`` for verifying), handoff chains (their
earliest expiry) and proof freshness (``created`` + ``max_proof_age``) all name the
*first instant at which the thing is no longer valid*. So a thing valid until ``u`` is
valid at every ``t < u`` and expired at every ``t >= u``, including ``t == u``
exactly. Every check in the library goes through :func:`expired`; the exact-instant
tests in ``tests/unit/test_instants.py`` pin it for each kind.


RFC 3339 times are read and written here too, once for the library: receipts, grants,
proofs and trust files all spell an instant as ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z`` (UTC,
upper-case ``T`` and ``Z``, at most microseconds), and :func:`utc_now` is the one
system clock.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final

from handoffs._errors import InvalidArgument, MalformedJSON

__all__ = [
    "CLOCK_SKEW",
    "expired",
    "format_time",
    "format_utc",
    "parse_time",
    "parse_utc",
    "stale",
    "utc_now",
    "why_not_utc",
]

#: How far in the future a signed ``created`` may lie before it is refused: one bound for
#: the proofs (integrity) and the gate's freshness window (receivers).
CLOCK_SKEW: Final = timedelta(minutes=5)


def utc_now() -> datetime:
    """The system clock in UTC (the default clock of gates and senders)."""
    return datetime.now(UTC)


_RFC3339_Z: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?Z", re.ASCII
)
_PARSED: dict[str, datetime] = {}
_FORMATTED: dict[datetime, str] = {}
_CACHED: Final = 1024  # entries kept per cache (many messages of a busy hour share times)


def parse_utc(text: object) -> datetime | None:
    """The instant an RFC 3339 UTC time names, or ``None`` for anything else (the
    callers raise their own typed error with its JSON path).
    """
    if type(text) is not str:
        return None if not isinstance(text, str) else _parse(str(text))
    found = _PARSED.get(text)
    if found is not None:
        return found
    parsed = _parse(text)
    if parsed is not None:
        if len(_PARSED) >= _CACHED:
            _PARSED.clear()
        _PARSED[text] = parsed
    return parsed


def _parse(text: str) -> datetime | None:
    try:
        return _instant(text)
    except ValueError:
        return None


def _instant(text: str) -> datetime | None:
    match = _RFC3339_Z.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction = match.groups()
    return datetime(int(year), int(month), int(day), int(hour), int(minute), int(second),
                    int((fraction or "0").ljust(6, "0")), tzinfo=UTC)


def why_not_utc(text: object) -> str:
    """Why :func:`parse_utc` refuses ``text`` (for an error message)."""
    if isinstance(text, str):
        try:
            if _instant(text) is not None:
                return f"{text!r} is an RFC 3339 UTC time"
        except ValueError as exc:
            return f"invalid time {text!r}: {exc}"
    return f"expected an RFC 3339 UTC time like 2027-01-01T00:00:00Z, got {text!r}"


def format_utc(when: datetime) -> str:
    """An aware datetime as RFC 3339 UTC with ``Z`` (a fraction only when non-zero)."""
    cached = when.tzinfo is UTC  # UTC has no folds: equal values are one instant
    if cached:
        found = _FORMATTED.get(when)
        if found is not None:
            return found
    utc = when.astimezone(UTC)
    text = (f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}"
            f"T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}")
    if utc.microsecond:
        text += f".{utc.microsecond:06d}".rstrip("0")
    text += "Z"
    if cached:
        if len(_FORMATTED) >= _CACHED:
            _FORMATTED.clear()
        _FORMATTED[when] = text
    return text


def expired(until: datetime, now: datetime) -> bool:
    """Whether something valid until ``until`` is expired at ``now`` (``until <= now``)."""
    return until <= now


def stale(created: datetime, max_age: timedelta, now: datetime) -> bool:
    """Whether a proof made at ``created`` is too old at ``now``: its freshness expires
    at ``created + max_age`` under the one rule of :func:`expired` (computed as a
    difference, so ``timedelta.max`` cannot overflow).
    """
    return now - created >= max_age


def parse_time(text: str, *, json_path: str = "$") -> datetime:
    """Parse an RFC 3339 UTC timestamp written with ``Z`` (the only form receipts use;
    :func:`parse_utc`).

    Raises:
        MalformedJSON: ``bad-time``, at ``json_path``.
    """
    parsed = parse_utc(text)
    if parsed is None:
        raise MalformedJSON(why_not_utc(text), code="bad-time", json_path=json_path)
    return parsed


def format_time(moment: datetime) -> str:
    """Format an aware datetime as RFC 3339 UTC with ``Z`` (microseconds only if set)."""
    if moment.tzinfo is None:
        raise InvalidArgument("times must be timezone-aware")
    return format_utc(moment)
