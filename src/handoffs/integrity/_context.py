"""The ``@context`` values a plain-JSON Data Integrity document may carry under the JCS
suites, accepted as data and never interpreted (no JSON-LD processing, nothing fetched).

The ``eddsa-jcs-2022`` and ``ecdsa-jcs-2019`` specifications put a document's
``@context``, when present, into the proof configuration before hashing (under JCS it
is data); Digital Bazaar's JavaScript signer always adds the Data Integrity v2 context.
Accepted, exactly:

- ``"https://w3id.org/security/data-integrity/v2"`` (the DI v2 context), or
  ``"https://www.w3.org/ns/credentials/v2"`` (the VC v2 context, which includes it),
  as a string;
- a non-empty array of those strings, each at most once, in any order.

Anything else (another URL, an inline context object, an empty array) is refused with
``context-not-allowed``: an unknown context could redefine terms for a JSON-LD reader
of the same bytes. A proof's own ``@context``, when present, obeys the same rule and
must be a prefix of the document's, in order (``context-mismatch``; the 2024
context-injection fix of the W3C specifications).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from handoffs._errors import ProofError

__all__ = ["ACCEPTED_CONTEXTS", "DATA_INTEGRITY_V2", "check_context", "check_proof_context"]

DATA_INTEGRITY_V2: Final = "https://w3id.org/security/data-integrity/v2"
"""The W3C Data Integrity v2 JSON-LD context URL."""
CREDENTIALS_V2: Final = "https://www.w3.org/ns/credentials/v2"
"""The W3C Verifiable Credentials v2 context URL (it includes the DI v2 terms)."""
ACCEPTED_CONTEXTS: Final = (DATA_INTEGRITY_V2, CREDENTIALS_V2)
"""The ``@context`` URLs accepted (as a string, or an array of them)."""


def check_context(value: object, *, json_path: str = "$.@context") -> None:
    """Refuse an ``@context`` value outside :data:`ACCEPTED_CONTEXTS`.

    Raises:
        ProofError: ``context-not-allowed`` at ``json_path`` (or the array item's path).
    """
    items = value if isinstance(value, list) else [value]
    if isinstance(value, list) and not value:
        raise ProofError("@context is an empty array", code="context-not-allowed",
                         json_path=json_path)
    for at, item in enumerate(items):
        where = f"{json_path}[{at}]" if isinstance(value, list) else json_path
        if not isinstance(item, str) or item not in ACCEPTED_CONTEXTS:
            raise ProofError(
                f"@context {str(item)[:80]!r} is not accepted: only {list(ACCEPTED_CONTEXTS)} "
                "(as data, never interpreted)", code="context-not-allowed", json_path=where)
        if items.index(item) != at:
            raise ProofError(f"@context names {item!r} twice", code="context-not-allowed",
                             json_path=where)


def check_proof_context(document: Mapping[str, Any], proof: Mapping[str, Any], *,
                        path: str) -> None:
    """A proof's ``@context``, when present: accepted, and a prefix of the document's.

    Raises:
        ProofError: ``context-not-allowed`` or ``context-mismatch``.
    """
    if "@context" not in proof:
        return
    context = proof["@context"]
    check_context(context, json_path=f"{path}.@context")
    expected = context if isinstance(context, list) else [context]
    actual = document.get("@context") if "@context" in document else []
    actual = actual if isinstance(actual, list) else [actual]
    if actual[: len(expected)] != expected:
        raise ProofError("the document's @context does not start with the proof's @context",
                         code="context-mismatch", json_path=f"{path}.@context")
