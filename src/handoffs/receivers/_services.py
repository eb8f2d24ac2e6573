"""The gate's services: the policy service, evidence resolvers (in memory and over
HTTP), the evidence they resolve, and how often step (4) reads claims back.

Step (3) asks a :class:`PolicyService` whether a receipt's policy version is known and
current; steps (3) and (4) ask an :class:`EvidenceResolver` for the evidence behind a
reference; :func:`reads_back` says which receipts step (4) reads back.
"""

from __future__ import annotations

import hashlib
import urllib.parse
from collections.abc import Hashable, Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from handoffs._errors import EvidenceError, InvalidArgument, MalformedJSON
from handoffs._json import loads
from handoffs.contracts import EvidenceRef

if TYPE_CHECKING:  # HTTP evidence resolution imports urllib.request when it is built
    import urllib.request

__all__ = [
    "EvidenceError",
    "EvidenceResolver",
    "HTTPEvidenceResolver",
    "InMemoryEvidenceResolver",
    "InMemoryPolicyService",
    "PolicyService",
    "ResolvedEvidence",
    "check_readback",
    "reads_back",
]


# --------------------------------------------------------------------- errors (data)


# -------------------------------------------------------------------- policy service


@runtime_checkable
class PolicyService(Protocol):
    """The receiver's authenticated policy service (step 3)."""

    def resolve(self, version: str) -> bool | None:
        """Whether ``version`` is the policy in force now: ``True`` current, ``False``
        known but superseded, ``None`` unknown (``policy-unresolvable``; so is an
        exception).
        """
        ...


def _versions(value: Mapping[str, bool]) -> Mapping[str, bool]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, bool) for k, v in value.items()
    ):
        raise InvalidArgument("versions must map policy version strings to booleans (current?)")
    return MappingProxyType(dict(value))


@attrs.frozen
class InMemoryPolicyService:
    """A policy service backed by a mapping ``{version: is_current}``.

    Example: ``InMemoryPolicyService({"PAY-7.4": True, "PAY-7.3": False})`` knows
    two versions, of which PAY-7.4 is current.
    """

    versions: Mapping[str, bool] = attrs.field(converter=_versions)

    def resolve(self, version: str) -> bool | None:
        """Whether a listed version is current; ``None`` for one not listed."""
        return self.versions.get(version)


# ------------------------------------------------------------------ evidence resolvers


def _content(value: bytes) -> bytes:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise InvalidArgument(f"evidence content must be bytes, got {type(value).__name__}")
    return bytes(value)


def _observed(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidArgument("observed_at must be a timezone-aware datetime or None")
    return value.astimezone(UTC)


def _claims(value: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise InvalidArgument("claims must be a mapping with string keys, or None")
    return MappingProxyType(dict(value))


@attrs.frozen
class ResolvedEvidence:
    """What an evidence resolver returns for one reference.

    Attributes:
        content: the evidence bytes (a pinned reference's digest covers exactly these).
        observed_at: when the source observed the evidence, or ``None`` if unknown
            (unknown age never satisfies a freshness dependency).
        claims: decisive facts the source asserts, keyed by decision-field name in
            their JSON form (``{"policy_current": false}``), or ``None``. Step (4)
            reads a receipt's decision state back against them.
    """

    content: bytes = attrs.field(converter=_content)
    observed_at: datetime | None = attrs.field(default=None, converter=_observed)
    claims: Mapping[str, Any] | None = attrs.field(default=None, converter=_claims)
    digest: str = attrs.field(init=False, repr=False, eq=False)
    """``"sha256:<hex>"`` of :attr:`content` (computed once)."""

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "digest", "sha256:" + hashlib.sha256(self.content).hexdigest())


@runtime_checkable
class EvidenceResolver(Protocol):
    """Resolves an evidence reference to its content (step 3 freshness, step 4).

    A deterministic resolver may also offer ``memo_key(ref) -> Hashable``: what its
    answer for ``ref`` depends on, as far as a gate can see it. Equal keys must mean
    the same outcome: the same error code, or the same ``observed_at`` and ``claims``
    and the same verdict on ``ref``'s pinned digest. With it, the lab can memoise a
    gate without proofs on messages that differ only in their references.
    """

    def resolve(self, ref: EvidenceRef) -> ResolvedEvidence:
        """The evidence behind ``ref``.

        Raises:
            Exception: any, when the reference cannot be resolved: the gate reports it
                as ``evidence-unresolved`` with the exception's message.
        """
        ...


def _documents(value: Mapping[str, ResolvedEvidence]) -> Mapping[str, ResolvedEvidence]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, ResolvedEvidence) for k, v in value.items()
    ):
        raise InvalidArgument("documents must map URIs to ResolvedEvidence")
    return MappingProxyType(dict(value))


@attrs.frozen
class InMemoryEvidenceResolver:
    """Resolves references from a mapping ``{uri: ResolvedEvidence}`` (tests, the lab)."""

    documents: Mapping[str, ResolvedEvidence] = attrs.field(converter=_documents)

    def resolve(self, ref: EvidenceRef) -> ResolvedEvidence:
        """The evidence stored under ``ref.uri``.

        Raises:
            EvidenceError: no evidence is stored under that URI.
        """
        found = self.documents.get(ref.uri)
        if found is None:
            raise EvidenceError(f"no evidence is known for {ref.uri!r}")
        return found

    def memo_key(self, ref: EvidenceRef) -> Hashable:
        """The answer depends on the URI; the pinned digest is compared against it."""
        return (ref.uri, ref.digest)


def _no_redirect_opener() -> urllib.request.OpenerDirector:
    """An opener that uses no environment proxy and follows no redirect (the opener
    then raises an HTTP error): evidence is fetched from the configured location only.
    """
    import urllib.request

    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return

    return urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


def _routes(value: Mapping[str, str]) -> Mapping[str, str]:
    if not isinstance(value, Mapping) or not value:
        raise InvalidArgument("routes must be a non-empty mapping of URI prefix to base URL")
    for prefix, base in value.items():
        if not isinstance(prefix, str) or not prefix or not isinstance(base, str):
            raise InvalidArgument("routes must map non-empty URI prefixes to base URLs")
        parts = urllib.parse.urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InvalidArgument(f"route base {base!r} must be an absolute http(s) URL")
    return MappingProxyType(dict(value))


def _positive(_: Any, attribute: attrs.Attribute[Any], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise InvalidArgument(f"{attribute.name} must be a positive number, got {value!r}")


def _headers(value: Mapping[str, str]) -> Mapping[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InvalidArgument("headers must map header names to string values")
    return MappingProxyType(dict(value))


@attrs.frozen(kw_only=True)
class HTTPEvidenceResolver:
    """Resolves references over HTTP(S) with ``urllib``, through configured routes only.

    A reference is fetched only when its URI starts with a configured prefix: the
    rest of the URI is appended to that prefix's base URL. A URI that matches no
    route is never fetched (a signed receipt cannot make the receiver call an
    arbitrary host). Redirects and environment proxies are not followed.

    The response body is the evidence content. ``observed_at`` is read from the
    ``Last-Modified`` header; ``claims`` from the ``"claims"`` member when the body is
    a JSON object served as ``application/json``.

    Attributes:
        routes: URI prefix → base URL, e.g. ``{"evidence://": "https://ev.example/"}``;
            the longest matching prefix wins.
        timeout: seconds per request.
        max_bytes: largest accepted body.
        headers: extra request headers (e.g. an authorisation token).
    """

    routes: Mapping[str, str] = attrs.field(converter=_routes)
    timeout: float = attrs.field(default=5.0, validator=_positive)
    max_bytes: int = attrs.field(default=1_048_576, validator=_positive)
    headers: Mapping[str, str] = attrs.field(factory=dict, converter=_headers)
    _opener: urllib.request.OpenerDirector = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_opener", _no_redirect_opener())

    def url_for(self, uri: str) -> str:
        """The URL a reference is fetched from.

        Raises:
            EvidenceError: no route matches ``uri``.
        """
        matches = [p for p in self.routes if uri.startswith(p)]
        if not matches:
            raise EvidenceError(f"no evidence route matches {uri!r}; it is not fetched")
        prefix = max(matches, key=len)
        rest = uri[len(prefix):].lstrip("/")
        return self.routes[prefix].rstrip("/") + "/" + urllib.parse.quote(rest, safe="/")

    def resolve(self, ref: EvidenceRef) -> ResolvedEvidence:
        """Fetch ``ref`` and return its content, observation time and claims.

        Raises:
            EvidenceError: no route, an HTTP error status, a redirect, a network
                error or timeout, an oversize body, or a malformed JSON body.
        """
        import email.utils
        import http.client
        import urllib.error
        import urllib.request

        url = self.url_for(ref.uri)
        request = urllib.request.Request(  # noqa: S310 - the scheme is checked per route
            url, headers={"Accept": "application/json, */*;q=0.5", **self.headers}
        )
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                body = response.read(self.max_bytes + 1)
                last_modified = response.headers.get("Last-Modified")
                content_type = response.headers.get_content_type()
        except urllib.error.HTTPError as exc:
            exc.close()  # release the connection the error response holds
            raise EvidenceError(f"GET {url} answered HTTP {exc.code}") from exc
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
            raise EvidenceError(f"GET {url} failed: {exc}") from exc
        if len(body) > self.max_bytes:
            raise EvidenceError(f"GET {url} returned more than {self.max_bytes} bytes")
        observed_at = None
        if last_modified:
            try:
                observed_at = email.utils.parsedate_to_datetime(last_modified)
            except (TypeError, ValueError) as exc:
                raise EvidenceError(f"bad Last-Modified {last_modified!r} from {url}") from exc
            if observed_at.tzinfo is None:
                observed_at = observed_at.replace(tzinfo=UTC)
        claims = None
        if content_type == "application/json":
            try:
                parsed = loads(body)
            except MalformedJSON as exc:
                raise EvidenceError(f"GET {url} returned malformed JSON: {exc}") from exc
            if isinstance(parsed, Mapping) and isinstance(parsed.get("claims"), Mapping):
                claims = parsed["claims"]
        return ResolvedEvidence(content=body, observed_at=observed_at, claims=claims)


# -------------------------------------------------------------------------- readback


def check_readback(_: Any, __: Any, value: float) -> None:
    """Validate a readback fraction (attrs): a number in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise InvalidArgument(f"a readback fraction lies in [0, 1], got {value!r}")


def reads_back(fraction: float, receipt_id: str) -> bool:
    """Whether step (4) reads back the receipt with this id: never at ``0``, always at
    ``1``, and in between for a deterministic ``fraction`` of receipt ids (the same id is
    always in or out of the sample, so a deterministic receiver stays deterministic).
    """
    if fraction >= 1:
        return True
    if fraction <= 0:
        return False
    head = hashlib.sha256(receipt_id.encode("utf-8", "surrogatepass")).digest()[:8]
    return int.from_bytes(head, "big") < fraction * 2**64

