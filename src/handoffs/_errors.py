"""One error hierarchy for the whole library.

Every error is data: a stable ``code`` (kebab-case, listed on the errors page), a
``json_path`` saying *where* and a ``message`` saying *why*. The text is built from
them: ``"expected a boolean, got 'yes' @ $.decision_state.policy_current"``.
Each subclass also inherits the nearest builtin, so ``except ValueError`` keeps
working for callers that do not know this library.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

__all__ = [
    "ContractDefinitionError",
    "ContractSourceError",
    "HandoffsError",
    "InvalidArgument",
    "KeyRingError",
    "MalformedJSON",
    "MissingExtra",
    "PolicyError",
    "ProofError",
    "ReceiptValidationError",
    "UnknownContract",
    "UnknownKey",
    "UntrustedGovernance",
    "Violation",
    "WeakKey",
]


class HandoffsError(Exception):
    """Root of every error raised by ``handoffs``.

    Attributes:
        code: stable machine-readable reason code, e.g. ``"duplicate-key"``.
        message: human-readable explanation of why.
        json_path: where in the document, as a JSONPath (``"$"`` for the whole).
    """

    code: str = "handoffs-error"

    def __init__(self, message: str, *, code: str | None = None, json_path: str = "$") -> None:
        if code is not None:
            self.code = code
        self.message = message
        self.json_path = json_path
        super().__init__(self.__str__())

    def __str__(self) -> str:
        return f"{self.message} @ {self.json_path}"

    def __reduce__(self) -> tuple[object, ...]:
        # Keep errors picklable across process and Dask boundaries.
        return (_rebuild, (type(self), self.message, self.code, self.json_path, self.__dict__))


def _rebuild(
    cls: type[HandoffsError], message: str, code: str, json_path: str, state: dict[str, object]
) -> HandoffsError:
    err = cls.__new__(cls)
    Exception.__init__(err, f"{message} @ {json_path}")
    err.__dict__.update(state)
    return err


class InvalidArgument(HandoffsError, ValueError, TypeError):
    """A function or class was called with an unusable argument (a wrong type, an
    out-of-range number, a naive datetime, an empty collection where one is needed).

    It is raised before any work starts. It inherits both ``ValueError`` and
    ``TypeError`` so that callers catching either builtin keep working.
    """

    code = "invalid-argument"


class MalformedJSON(HandoffsError, ValueError):
    """The bytes are not acceptable JSON for a handoff.

    Codes: ``invalid-json``, ``invalid-utf8``, ``lone-surrogate``, ``duplicate-key``,
    ``non-finite-number``, ``integer-out-of-range``, ``too-large``, ``too-deep``,
    ``not-an-object``. Parsed input (a Python mapping) gets the same limits and codes,
    and ``invalid-json`` for what JSON cannot hold (a set, a non-string key, any other
    Python object).
    """

    code = "invalid-json"


@attrs.frozen
class Violation:
    """One schema violation: where (``json_path``), which rule (``schema_path``), why."""

    json_path: str
    schema_path: str
    message: str
    validator: str

    def __str__(self) -> str:
        return f"{self.message} @ {self.json_path}"


class ReceiptValidationError(HandoffsError, ValueError):
    """A document does not satisfy its contract's JSON Schema.

    ``violations`` holds every violation, the best (most relevant) first; the
    message is the best one's.
    """

    code = "schema-invalid"

    def __init__(
        self,
        violations: Sequence[Violation],
        *,
        contract: str | None = None,
        version: str | None = None,
    ) -> None:
        if not violations:
            raise InvalidArgument("a validation error needs at least one violation")
        self.violations = tuple(violations)
        self.contract = contract
        self.version = version
        best = self.violations[0]
        super().__init__(best.message, json_path=best.json_path)

    def __str__(self) -> str:
        more = len(self.violations) - 1
        tail = f" (and {more} more)" if more else ""
        return f"{self.message} @ {self.json_path}{tail}"


class UnknownContract(HandoffsError, LookupError):
    """A message names a contract or contract version this party does not know.

    Unknown versions are rejected, never guessed: there is no fall-back to the latest.
    """

    code = "unknown-contract"


class ContractDefinitionError(HandoffsError, TypeError):
    """A contract definition in Python is inconsistent (e.g. an incomplete loss matrix)."""

    code = "bad-contract-definition"


class PolicyError(HandoffsError, ValueError):
    """A policy condition could not be evaluated, so the decision fails closed.

    Codes: ``predicate-result`` (a :class:`~handoffs.contracts.policy.Predicate` returned
    something other than ``True``, ``False`` or ``None``), ``predicate-raised`` (it
    raised), ``not-a-number`` (an arithmetic expression read a value that is not a
    number or an interval). A gate turns it into a decision with the contract's
    fail-closed action and this code; it is never read as ``False``.
    """

    code = "policy-error"


class ProofError(HandoffsError, ValueError):
    """A Data Integrity proof is missing, malformed or does not verify.

    Codes are listed on the errors page; among them ``proof-missing``,
    ``proof-malformed``, ``proof-duplicated``, ``proof-chain-broken``,
    ``too-many-proofs``, ``wrong-proof-type``, ``wrong-cryptosuite``, ``wrong-purpose``,
    ``purpose-not-allowed``, ``domain-mismatch``, ``challenge-mismatch``,
    ``context-not-allowed``, ``context-mismatch``, ``bad-signature``, ``weak-signature``
    (a small-order Ed25519 ``R``, a high-S ECDSA ``s``), ``suite-not-admitted`` (signing),
    ``unknown-key``, ``key-not-valid``,
    ``proof-expired``, ``proof-not-yet-valid``, ``empty-trust-store``, and for signed
    receipts ``sender-mismatch``, ``grant-missing``, ``grant-invalid``,
    ``grant-mismatch``, ``grant-expired``, ``role-not-held``, ``authority-not-granted``,
    ``validity-exceeds-grant``, ``wrong-audience``, ``receipt-expired``, and at a gate's
    context step ``policy-mismatch`` and ``policy-fingerprint-missing``.
    """

    code = "proof-invalid"


class UntrustedGovernance(HandoffsError, ValueError):
    """Encoder or model content tried to set a governance or envelope member.

    Governance (case, sender, receiver, authority, policy version, validity,
    evidence references) only ever comes from the configured governance service;
    ``json_path`` names the member the content tried to set.
    """

    code = "untrusted-governance"


class KeyRingError(HandoffsError, ValueError):
    """A key or key-ring entry is unusable (bad encoding, bad PEM, bad passphrase), or
    a key ring holds no key for a verification method (code ``unknown-key``, also a
    ``KeyError``).
    """

    code = "bad-key"


class WeakKey(KeyRingError):
    """A public key of small order (or otherwise non-binding) was offered for enrolment."""

    code = "weak-key"


class UnknownKey(KeyRingError, KeyError):
    """A verification method names a key that the key ring does not hold (internal: a
    :class:`KeyRingError` with code ``unknown-key``).
    """

    code = "unknown-key"

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return f"{self.message} @ {self.json_path}"


class ContractSourceError(HandoffsError, ImportError):
    """A configured contract source (``MODULE:ATTR``) cannot be loaded; the message names
    the source and where it was configured (``--contracts``, ``HANDOFFS_CONTRACTS``,
    ``pyproject.toml`` or an entry point).
    """

    code = "bad-contract-source"


class MissingExtra(HandoffsError, ImportError):
    """An optional dependency of the requested feature is not installed.

    Attributes:
        extra: the name of the extra that provides it, e.g. ``"report"``.
        module: the module that could not be imported.
    """

    code = "missing-extra"

    def __init__(self, feature: str, *, extra: str, module: str) -> None:
        self.extra = extra
        self.module = module
        super().__init__(
            f"{feature} needs the optional dependency {module!r}; install it with "
            f"pip install 'handoffs[{extra}]'",
            json_path="$",
        )
