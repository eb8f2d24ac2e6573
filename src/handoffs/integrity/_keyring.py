"""The key ring (trust store): which keys this receiver trusts, for whom and when.

The :class:`KeyRing` is the *only* source of trust: a ``verificationMethod`` is a
lookup key into it, never something to resolve or fetch. Each :class:`KeyEntry` maps a
key to the agent that controls it, the roles that agent holds, the proof purposes the
key may serve and the time window in which it may sign. Enrolment refuses keys that
would not bind a signature to one signer (each suite's ``check_public_key``; for
Ed25519 small-order points in every encoding, non-canonical encodings, points with a
small-order component, and bytes that are not a curve point at all).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import attrs
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PublicKey,
)

from handoffs._errors import HandoffsError, KeyRingError, ProofError, UnknownKey
from handoffs._time import expired
from handoffs.integrity._jwks import agent_card_keys, jwks_keys
from handoffs.integrity._keys import _aware_utc, _format_utc, _parse_utc
from handoffs.integrity._signer import multikey_verification_method
from handoffs.integrity._suites import EDDSA_JCS_2022, Cryptosuite, decode_multikey

__all__ = ["DEFAULT_PURPOSES", "KEY_RING_SCHEMA_VERSION", "KeyEntry", "KeyRing"]

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

    # Decoded and checked once at enrolment; verification reads them as plain
    # attributes (a property would be a Python call per proof).
    public_key_bytes: bytes = attrs.field(init=False, eq=False, repr=False)
    """The raw public key, checked at enrolment (what verification uses): 32 bytes for
    an Ed25519 key, the 33-byte compressed point for a P-256 key."""
    suite: Cryptosuite = attrs.field(init=False, eq=False, repr=False)
    """The cryptosuite the key's Multikey header names: it verifies only proofs of that
    suite."""

    def __attrs_post_init__(self) -> None:
        suite, raw = decode_multikey(self.public_key_multibase,
                                     json_path="$.public_key_multibase")
        suite.check_public_key(raw, json_path="$.public_key_multibase")
        object.__setattr__(self, "public_key_bytes", raw)
        object.__setattr__(self, "suite", suite)
        if self.verification_method.startswith("did:key:"):
            expected = multikey_verification_method(self.public_key_multibase)
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
    def public_key(self) -> Ed25519PublicKey:
        """The Ed25519 public key as a ``cryptography`` object (checked at enrolment).

        Raises:
            KeyRingError: ``wrong-key-type`` for a key of another suite.
        """
        if self.suite is not EDDSA_JCS_2022:
            raise KeyRingError(f"{self.verification_method!r} is not an Ed25519 key",
                               code="wrong-key-type")
        return Ed25519PublicKey.from_public_bytes(self.public_key_bytes)

    def valid_at(self, when: datetime) -> bool:
        """Whether the key may sign at ``when``: ``not_before <= when < not_after``."""
        when = _aware_utc(when, json_path="$")
        return self.not_before <= when and (
            self.not_after is None or not expired(self.not_after, when))

    def revoked(self, now: datetime) -> bool:
        """Whether this key's proofs no longer verify at ``now`` (revoked at or before it)."""
        return self.revoked_at is not None and expired(self.revoked_at, now)

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
            verification_method = multikey_verification_method(public_key_multibase)
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
        :attr:`KeyEntry.revoked_at <handoffs.integrity.KeyEntry.revoked_at>`;
        rotation is ``not_after``).

        Raises:
            KeyRingError: ``unknown-key``, the ring holds no such key.
            KeyRingError: ``at`` is not a timezone-aware datetime.

        """
        entry = self.lookup(verification_method)
        when = _aware_utc(at, json_path="$.revoked_at")
        return KeyRing(tuple(attrs.evolve(e, revoked_at=when) if e is entry else e
                             for e in self.entries))

    def lookup(self, verification_method: str) -> KeyEntry:
        """Return the entry enrolled under ``verification_method``.

        Raises:
            KeyRingError: ``unknown-key``, the ring holds no such key (it is never
                fetched).

        """
        entry = self._by_vm.get(verification_method)
        if entry is None:
            raise UnknownKey(
                f"no key {verification_method!r} in the key ring; keys are never fetched",
                json_path="$.proof.verificationMethod",
            )
        return entry

    def entry_valid_at(self, verification_method: str, when: datetime) -> KeyEntry:
        """Return the entry for ``verification_method`` if it may sign at ``when``.

        Raises:
            KeyRingError: ``unknown-key``, the ring holds no such key.
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


    @classmethod
    def from_jwks(
        cls,
        jwks: Mapping[str, Any] | str | bytes | Path,
        *,
        controller: str,
        not_before: datetime,
        roles: Iterable[str] = (),
        purposes: Iterable[str] = DEFAULT_PURPOSES,
        kids: Iterable[str] | None = None,
        ring: KeyRing | None = None,
    ) -> KeyRing:
        """A key ring holding the keys of a pinned JWK Set (RFC 7517 ``{"keys": [...]}``).

        ``OKP``/``Ed25519`` keys verify ``eddsa-jcs-2022`` proofs, ``EC``/``P-256`` keys
        ``ecdsa-jcs-2019`` proofs; the ring holds them as :meth:`enrol` would.

        Args:
            jwks: the JWK Set the receiver pinned (parsed, text, bytes or a file path).
            controller: who the keys belong to (the agent that publishes the set).
            not_before: when the keys start to be trusted (aware datetime).
            roles: the roles the keys hold (none by default).
            purposes: the proof purposes the keys may sign for.
            kids: pin only the keys with these ``kid`` values (default: every key).
            ring: add the keys to this ring (default: a new one).

        Raises:
            KeyRingError: ``bad-jwks`` (not a JWK Set), ``bad-jwk`` (a member missing or
                malformed), ``unsupported-key-type``, ``not-a-signing-key``,
                ``private-key-in-jwks``, ``not-on-curve``, ``unknown-kid``, ``no-keys``, or
                what enrolment raises (a weak key, a duplicate) — each at its JSON path.
        """
        return (ring if ring is not None else cls())._enrol_read(
            jwks_keys(jwks, kids=kids), controller=controller, not_before=not_before,
            roles=roles, purposes=purposes)

    @classmethod
    def from_agent_card(
        cls,
        card: Any,
        *,
        not_before: datetime,
        jwks: Mapping[str, Any] | str | bytes | Path | None = None,
        key: Mapping[str, Any] | None = None,
        controller: str | None = None,
        roles: Iterable[str] = (),
        purposes: Iterable[str] = DEFAULT_PURPOSES,
        ring: KeyRing | None = None,
    ) -> KeyRing:
        """A key ring holding the keys that verify a signed A2A agent card.

        Every JWS signature on the card (A2A §8.4: RFC 7515 over the RFC 8785 form of
        the card without ``signatures`` and empty values, detached, as a2a-sdk's
        ``create_agent_card_signer`` makes it) must verify, with PyJWT, against a key
        *you* pinned: the agent's JWK Set (``jwks=``, fetched once from its ``jku`` and
        reviewed; never fetched here) or one JWK (``key=``). The algorithm is the pinned
        key's (``EdDSA`` for Ed25519, ``ES256`` for P-256), never the header's choice.
        Only then are the verifying keys enrolled; a key the card carries in its own
        header (``jwk``, ``x5c``, ``x5u``) is refused, since a card vouching for itself
        proves nothing.

        Args:
            card: the agent card: a2a-sdk's ``AgentCard`` object, or its JSON (parsed,
                text, bytes or a file path) as the agent serves it.
            not_before: when the keys start to be trusted (aware datetime).
            jwks: the pinned JWK Set the signatures' ``kid`` name keys in.
            key: instead of ``jwks``, the one pinned JWK (its ``kid``, if any, must be
                the one the signatures name).
            controller: who the keys belong to (default: the verified card's ``name``).
            roles: the roles the keys hold (none by default).
            purposes: the proof purposes the keys may sign for.
            ring: add the keys to this ring (default: a new one).

        Raises:
            KeyRingError: nothing is enrolled, and each refusal names its JSON path:
                ``no-pinned-key`` (neither or both of ``jwks``/``key``),
                ``bad-agent-card`` (no signatures, a malformed header or signature, no
                ``kid`` to look up, ``crit``), ``embedded-key`` (a key in the header),
                ``unknown-kid`` (a ``kid`` the pin does not hold), ``wrong-algorithm``
                (an ``alg`` other than the pinned key's), ``bad-card-signature`` (the
                card changed after signing, or another key signed it), or what
                :meth:`from_jwks` raises for the pinned key itself.
        """
        owner, keys = agent_card_keys(card, controller=controller, jwks=jwks, key=key)
        return (ring if ring is not None else cls())._enrol_read(
            keys, controller=owner, not_before=not_before, roles=roles, purposes=purposes)

    def _enrol_read(
        self,
        keys: Iterable[tuple[str, str]],
        *,
        controller: str,
        not_before: datetime,
        roles: Iterable[str],
        purposes: Iterable[str],
    ) -> KeyRing:
        """Return a new ring with each ``(public_key_multibase, json_path)`` read from a
        pinned document enrolled; a refusal names the path of the key in the document.
        """
        result = self
        for multibase, path in keys:
            try:
                result = result.enrol(multibase, controller=controller, not_before=not_before,
                                      roles=roles, purposes=purposes)
            except KeyRingError as exc:
                raise KeyRingError(exc.message, code=exc.code, json_path=path) from exc
        return result


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
