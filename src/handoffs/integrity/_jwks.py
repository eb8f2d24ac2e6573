"""Trusted keys from where agents publish them: a JWK Set (RFC 7517) or an A2A agent card.

The receiver pins what it trusts: it fetches a JWK Set or an agent card *once*, reviews
it, stores it, and loads the stored copy with :meth:`KeyRing.from_jwks
<handoffs.integrity.KeyRing.from_jwks>` or :meth:`KeyRing.from_agent_card
<handoffs.integrity.KeyRing.from_agent_card>`; this module only *reads* the documents
(each key as its Multikey and the JSON path it came from), the key ring enrols them.
Nothing is fetched — not here, and never at decision time — so a key change at the
publisher reaches a gate only through a new pinned copy. Every refusal is a
:class:`~handoffs.KeyRingError` whose ``json_path`` says which member of the document
and whose message says why.

An agent card's keys are enrolled only after every JWS signature on the card (RFC 7515,
over the RFC 8785 form of the card without ``signatures`` and empty values, detached,
as a2a-sdk signs) verified with PyJWT against a key the receiver pinned: a JWK Set or
one JWK. A key carried in a signature's own header (``jwk``, ``x5c``, ``x5u``) is
refused, and ``jku`` is never fetched.

Key types: ``OKP`` / ``Ed25519`` keys are enrolled as ``eddsa-jcs-2022`` keys (with
the key ring's weak-key checks); ``EC`` / ``P-256`` keys are checked to be a point on
the curve and enrolled as ``ecdsa-jcs-2019`` keys (their compressed point in a
Multikey, so a key verifies proofs of its own suite only). Any other key type or curve
(RSA, X25519, P-384, secp256k1) is refused with ``unsupported-key-type``; name the
keys you can pin with ``kids=`` to take them from a mixed set.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from handoffs._errors import KeyRingError, MalformedJSON
from handoffs._json import canonical_bytes, loads
from handoffs.integrity._suites import ECDSA_JCS_2019, EDDSA_JCS_2022, encode_multikey

__all__ = ["agent_card_keys", "jwks_keys"]

_B64URL: Final = re.compile(r"[A-Za-z0-9_-]*")
_PRIVATE: Final = ("d", "p", "q", "dp", "dq", "qi", "k")
_SIGNING_OPS: Final = frozenset({"verify"})

Document = Mapping[str, Any] | str | bytes | Path
"""A pinned document: parsed JSON, JSON text or bytes, or the path of a JSON file."""


def _fail(message: str, *, code: str, json_path: str) -> KeyRingError:
    return KeyRingError(message, code=code, json_path=json_path)


def _document(source: Document, *, what: str) -> Mapping[str, Any]:
    if not isinstance(source, Mapping | str | bytes | Path):
        raise _fail(f"the {what} must be a JSON object, JSON text or bytes, or a path; got "
                    f"{type(source).__name__}", code=f"bad-{what.replace(' ', '-')}",
                    json_path="$")
    try:
        if isinstance(source, Path):
            source = source.read_bytes()
        value = source if isinstance(source, Mapping) else loads(source)
    except OSError as exc:
        raise _fail(f"cannot read the {what}: {exc}", code=f"bad-{what.replace(' ', '-')}",
                    json_path="$") from exc
    except MalformedJSON as exc:
        raise _fail(f"the {what} is not valid JSON: {exc.message}",
                    code=f"bad-{what.replace(' ', '-')}", json_path=exc.json_path) from exc
    if not isinstance(value, Mapping):
        raise _fail(f"the {what} must be a JSON object, got {type(value).__name__}",
                    code=f"bad-{what.replace(' ', '-')}", json_path="$")
    return value


def _b64url(value: Any, *, json_path: str, size: int) -> bytes:
    if not isinstance(value, str) or not _B64URL.fullmatch(value):
        raise _fail(f"expected unpadded base64url text, got {value!r}", code="bad-jwk",
                    json_path=json_path)
    try:
        data = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError) as exc:
        raise _fail(f"not base64url: {value!r}", code="bad-jwk", json_path=json_path) from exc
    if len(data) != size:
        raise _fail(f"expected {size} bytes, got {len(data)}", code="bad-jwk",
                    json_path=json_path)
    return data


def _member(jwk: Mapping[str, Any], name: str, *, json_path: str) -> Any:
    if name not in jwk:
        raise _fail(f"required member {name!r} missing", code="bad-jwk",
                    json_path=f"{json_path}.{name}")
    return jwk[name]


def _check_use(jwk: Mapping[str, Any], *, json_path: str) -> None:
    private = [name for name in _PRIVATE if name in jwk]
    if private:
        raise _fail("a private key member in a set of trusted public keys: remove it, "
                    "and treat the key as exposed", code="private-key-in-jwks",
                    json_path=f"{json_path}.{private[0]}")
    use = jwk.get("use")
    if use is not None and use != "sig":
        raise _fail(f"the key is published for {use!r}, not for signatures ('sig')",
                    code="not-a-signing-key", json_path=f"{json_path}.use")
    ops = jwk.get("key_ops")
    if ops is not None and (not isinstance(ops, list) or not _SIGNING_OPS & set(ops)):
        raise _fail(f"key_ops {ops!r} does not allow 'verify'", code="not-a-signing-key",
                    json_path=f"{json_path}.key_ops")


def _multikey(jwk: Mapping[str, Any], *, json_path: str) -> str:
    """The Multikey ``publicKeyMultibase`` of one JWK (its header names the key's
    cryptosuite), or a typed refusal.
    """
    if not isinstance(jwk, Mapping):
        raise _fail(f"a JWK must be a JSON object, got {type(jwk).__name__}", code="bad-jwk",
                    json_path=json_path)
    _check_use(jwk, json_path=json_path)
    kty = _member(jwk, "kty", json_path=json_path)
    crv = _member(jwk, "crv", json_path=json_path) if kty in {"OKP", "EC"} else None
    alg = jwk.get("alg")
    if kty == "OKP" and crv == "Ed25519":
        if alg not in {None, "EdDSA", "Ed25519"}:
            raise _fail(f"alg {alg!r} does not match an Ed25519 key", code="bad-jwk",
                        json_path=f"{json_path}.alg")
        public = _b64url(_member(jwk, "x", json_path=json_path), json_path=f"{json_path}.x",
                         size=32)
        return encode_multikey(EDDSA_JCS_2022, public)
    if kty == "EC" and crv == "P-256":
        if alg not in {None, "ES256"}:
            raise _fail(f"alg {alg!r} does not match a P-256 key", code="bad-jwk",
                        json_path=f"{json_path}.alg")
        x = _b64url(_member(jwk, "x", json_path=json_path), json_path=f"{json_path}.x",
                    size=32)
        y = _b64url(_member(jwk, "y", json_path=json_path), json_path=f"{json_path}.y",
                    size=32)
        try:
            key = ec.EllipticCurvePublicNumbers(int.from_bytes(x, "big"),
                                                int.from_bytes(y, "big"),
                                                ec.SECP256R1()).public_key()
        except ValueError as exc:
            raise _fail("the point (x, y) is not on P-256", code="not-on-curve",
                        json_path=json_path) from exc
        point = key.public_bytes(Encoding.X962, PublicFormat.CompressedPoint)
        return encode_multikey(ECDSA_JCS_2019, point)
    where = f"{json_path}.crv" if crv is not None else f"{json_path}.kty"
    raise _fail(f"unsupported key type kty={kty!r} crv={crv!r}: expected OKP/Ed25519 "
                "or EC/P-256", code="unsupported-key-type", json_path=where)


def _chosen(
    found: Sequence[tuple[str | None, Mapping[str, Any], str]],
    *,
    kids: Iterable[str] | None,
) -> Iterator[tuple[str, str]]:
    """The keys to pin, as ``(public_key_multibase, json_path)``: the document-level
    checks run now, each key is read as the caller reaches it (so a refusal of a later
    key comes after what the caller did with the earlier ones).
    """
    wanted = None if kids is None else list(kids)
    if wanted is not None:
        named = {kid for kid, _, _ in found}
        missing = [kid for kid in wanted if kid not in named]
        if missing:
            raise _fail(f"no key with kid {missing[0]!r} in the document (it has "
                        f"{sorted(k for k in named if k is not None)})", code="unknown-kid",
                        json_path="$")
    chosen = [(kid, jwk, path) for kid, jwk, path in found
              if wanted is None or kid in wanted]
    if not chosen:
        raise _fail("the document holds no key to trust (an empty key ring trusts no one)",
                    code="no-keys", json_path="$")
    return ((_multikey(jwk, json_path=path), path) for _, jwk, path in chosen)


def jwks_keys(jwks: Document, *, kids: Iterable[str] | None = None) -> Iterator[tuple[str, str]]:
    """The keys of a pinned JWK Set to trust, as ``(public_key_multibase, json_path)``:
    the reader behind :meth:`KeyRing.from_jwks <handoffs.integrity.KeyRing.from_jwks>`
    (see there for the refusals).
    """
    document = _document(jwks, what="jwks")
    keys = document.get("keys")
    if not isinstance(keys, list):
        raise _fail("a JWK Set has a 'keys' array", code="bad-jwks", json_path="$.keys")
    found = [(jwk.get("kid") if isinstance(jwk, Mapping) else None, jwk, f"$.keys[{at}]")
             for at, jwk in enumerate(keys)]
    return _chosen(found, kids=kids)


_CARD_ALGORITHMS: Final = {EDDSA_JCS_2022.name: ["EdDSA"], ECDSA_JCS_2019.name: ["ES256"]}
"""The JWS ``alg`` a pinned key may verify a card signature with: its own, never the
header's choice (no algorithm confusion: no HS256, no ``none``)."""
_EMBEDDED: Final = ("jwk", "x5c", "x5u")


def _card_document(card: Any) -> Mapping[str, Any]:
    """A card as JSON: an a2a-sdk ``AgentCard`` (a protobuf message) through
    ``MessageToDict``, as the SDK's signer and verifier see it; else a pinned document.
    """
    if hasattr(card, "DESCRIPTOR") and hasattr(card, "SerializeToString"):
        import importlib  # protobuf comes with a2a-sdk: only a card object needs it

        as_json: Mapping[str, Any] = importlib.import_module(
            "google.protobuf.json_format").MessageToDict(card)
        return as_json
    return _document(card, what="agent card")


def _clean_empty(value: Any) -> Any:
    """The card without its empty strings, lists and objects, at any depth (what
    a2a-sdk removes before RFC 8785: A2A §8.4's "default values removed").
    """
    if isinstance(value, Mapping):
        kept = {k: v for k, v in ((k, _clean_empty(v)) for k, v in value.items())
                if v is not None}
        return kept or None
    if isinstance(value, list):
        items = [v for v in (_clean_empty(v) for v in value) if v is not None]
        return items or None
    return None if value == "" else value


def _card_payload(document: Mapping[str, Any]) -> bytes:
    """The bytes a card's JWS signatures cover: RFC 8785 of the card without
    ``signatures`` and without empty values, base64url-encoded (the detached payload).
    """
    unsigned = {k: v for k, v in document.items() if k != "signatures"}
    try:
        canonical = canonical_bytes(_clean_empty(unsigned) or {})
    except MalformedJSON as exc:
        raise _fail(f"the card has no RFC 8785 form: {exc.message}", code="bad-agent-card",
                    json_path=exc.json_path) from exc
    return base64.urlsafe_b64encode(canonical).rstrip(b"=")


def _pinned_jwk(header: Mapping[str, Any], *, jwks: Mapping[str, Any] | None,
                key: Mapping[str, Any] | None, json_path: str
                ) -> tuple[Mapping[str, Any], str]:
    """The pinned JWK a signature's header names (by ``kid``), and its path in the pinned
    document (``$.keys[i]`` of the JWK Set, ``$`` for one pinned key).
    """
    kid = header.get("kid")
    if key is not None:
        if kid is not None and key.get("kid") is not None and kid != key.get("kid"):
            raise _fail(f"the signature names key {kid!r}; the pinned key is "
                        f"{key.get('kid')!r}", code="unknown-kid",
                        json_path=f"{json_path}.protected.kid")
        return key, "$"
    assert jwks is not None  # noqa: S101 - the caller passes exactly one
    if not isinstance(kid, str):
        raise _fail("the signature names no kid to find in the pinned JWK Set",
                    code="bad-agent-card", json_path=f"{json_path}.protected")
    listed = jwks.get("keys")
    keys: list[Any] = listed if isinstance(listed, list) else []
    index = next((i for i, jwk in enumerate(keys)
                  if isinstance(jwk, Mapping) and jwk.get("kid") == kid), None)
    if index is None:
        raise _fail(f"key {kid!r} is not in the pinned JWK Set (jku "
                    f"{header.get('jku')!r} is never fetched)", code="unknown-kid",
                    json_path=f"{json_path}.protected.kid")
    return keys[index], f"$.keys[{index}]"


def _verify_card_signature(signature: Any, payload: bytes, *, jwks: Mapping[str, Any] | None,
                           key: Mapping[str, Any] | None, json_path: str) -> tuple[str, str]:
    """Verify one JWS (RFC 7515) signature of a card against the pinned key it names
    (PyJWT); return that key as ``(public_key_multibase, json_path)``.
    """
    import jwt

    if not isinstance(signature, Mapping):
        raise _fail("a card signature must be a JSON object", code="bad-agent-card",
                    json_path=json_path)
    protected, value = signature.get("protected"), signature.get("signature")
    for name, text in (("protected", protected), ("signature", value)):
        if not isinstance(text, str) or not _B64URL.fullmatch(text):
            raise _fail(f"the signature's {name} must be base64url text",
                        code="bad-agent-card", json_path=f"{json_path}.{name}")
    token = f"{protected}.{payload.decode('ascii')}.{value}"
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        raise _fail(f"the protected header is not a base64url JSON object: {exc}",
                    code="bad-agent-card", json_path=f"{json_path}.protected") from exc
    embedded = next((name for name in _EMBEDDED if name in header), None)
    if embedded is not None:
        raise _fail(f"the header carries its own key ({embedded!r}): a key on the card's "
                    "own word proves nothing; pin the agent's JWK Set (jwks=) or key (key=)",
                    code="embedded-key", json_path=f"{json_path}.protected.{embedded}")
    if "crit" in header:
        raise _fail(f"critical header parameters {header['crit']!r} are not understood",
                    code="bad-agent-card", json_path=f"{json_path}.protected.crit")
    jwk, key_path = _pinned_jwk(header, jwks=jwks, key=key, json_path=json_path)
    multibase = _multikey(jwk, json_path=key_path)
    from handoffs.integrity._suites import decode_multikey

    allowed = _CARD_ALGORITHMS[decode_multikey(multibase)[0].name]
    if header.get("alg") not in allowed:
        raise _fail(f"alg {header.get('alg')!r} is not the pinned key's ({allowed[0]})",
                    code="wrong-algorithm", json_path=f"{json_path}.protected.alg")
    try:
        jwt.api_jws.PyJWS().decode_complete(token, key=jwt.PyJWK(dict(jwk)),
                                            algorithms=allowed)
    except jwt.PyJWTError as exc:
        raise _fail(f"the signature does not verify under pinned key {header.get('kid')!r} "
                    f"({exc}): the card changed after signing, or another key signed it",
                    code="bad-card-signature", json_path=f"{json_path}.signature") from exc
    return multibase, key_path


def agent_card_keys(
    card: Any,
    *,
    controller: str | None = None,
    jwks: Document | None = None,
    key: Mapping[str, Any] | None = None,
) -> tuple[str, list[tuple[str, str]]]:
    """Who owns a pinned agent card's signing keys (``controller``, else the verified
    card's ``name``) and the pinned keys that verified *every* signature on it, as
    ``(public_key_multibase, json_path)``: the reader behind :meth:`KeyRing.from_agent_card
    <handoffs.integrity.KeyRing.from_agent_card>` (see there for the refusals). Nothing
    is returned before every signature verified.
    """
    if (jwks is None) == (key is None):
        raise _fail("pin what verifies the card: exactly one of jwks= (the agent's JWK Set, "
                    "fetched once and reviewed) or key= (one JWK)", code="no-pinned-key",
                    json_path="$")
    pinned_set = None if jwks is None else _document(jwks, what="jwks")
    if key is not None and not isinstance(key, Mapping):
        raise _fail(f"key= is one JWK (a JSON object), got {type(key).__name__}",
                    code="bad-jwk", json_path="$")
    document = _card_document(card)
    signatures = document.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        raise _fail("the card carries no signatures: nothing verifies it",
                    code="bad-agent-card", json_path="$.signatures")
    payload = _card_payload(document)
    found = [_verify_card_signature(signature, payload, jwks=pinned_set, key=key,
                                    json_path=f"$.signatures[{at}]")
             for at, signature in enumerate(signatures)]
    owner = controller if controller is not None else document.get("name")
    if not isinstance(owner, str) or not owner:
        raise _fail("the card has no name: pass controller=", code="bad-agent-card",
                    json_path="$.name")
    first: dict[str, tuple[str, str]] = {}
    for multibase, path in found:  # a key that signs twice is pinned once
        first.setdefault(multibase, (multibase, path))
    return owner, list(first.values())
