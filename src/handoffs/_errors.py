"""One error hierarchy for the whole library.

Every error is data: a stable ``code`` (kebab-case, listed on the errors page), a
``json_path`` saying *where* and a ``message`` saying *why*. The text is built from
them: ``"expected a boolean, got 'yes' @ $.decision_state.policy_current"``.
Each subclass also inherits the nearest builtin, so ``except ValueError`` keeps
working for callers that do not know this library.
"""

from __future__ import annotations

import os  # loaded by every interpreter at start-up: no cost
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

__all__ = [
    "BudgetExceeded",
    "CallCacheError",
    "ConfigError",
    "ContractDefinitionError",
    "ContractSourceError",
    "DecisionLogError",
    "EvidenceError",
    "ExperimentError",
    "HandoffsError",
    "InvalidArgument",
    "KeyRingError",
    "MalformedJSON",
    "MissingExtra",
    "ModelError",
    "ModelTimeout",
    "MovedName",
    "NoSuchReading",
    "PolicyError",
    "ProjectionError",
    "ProofError",
    "ReceiptValidationError",
    "ReleasedVersionChanged",
    "ReplayStoreError",
    "ReplayedReceipt",
    "ReportError",
    "RunLogError",
    "UnknownContract",
    "UnknownExperimentKey",
    "UnknownKey",
    "UnsafeConfigurationWarning",
    "UntrustedGovernance",
    "UserCodeError",
    "VersionBumpError",
    "Violation",
    "WeakKey",
    "refuse_unknown",
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
    ``context-not-allowed``, ``context-mismatch``, ``bad-signature`` (a small-order
    Ed25519 ``R`` too), ``weak-signature`` (a high-S ECDSA ``s``), ``suite-not-admitted``
    (signing),
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


class MovedName(HandoffsError, ImportError):
    """A name was imported from the face it left (since 0.1.0); the message names
    where it lives now, or what replaced it (see the migration table).

    Attributes:
        name: the name imported.
        face: the module it was imported from.
        place: where it lives now, or what replaced it.
    """

    code = "moved-name"

    def __init__(self, message: str, *, name: str, face: str, place: str) -> None:
        super().__init__(message)
        self.name = name
        self.face = face
        self.place = place

    def __str__(self) -> str:
        return self.message


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


# ------------------------------------------------ errors of the gate, the lab, the service
# (defined here so that handoffs.errors lists them all without importing those parts)


class EvidenceError(HandoffsError, LookupError):
    """An evidence reference could not be resolved (source-resolution failure)."""

    code = "evidence-unresolved"


class ModelError(HandoffsError, RuntimeError):
    """A model call failed (HTTP error after retries, malformed response body, budget).

    ``code`` is the reason code a model receiver fails closed with:
    ``"model-error"``, ``"model-timeout"`` or ``"budget-exceeded"``.
    """

    code = "model-error"


class ModelTimeout(ModelError, TimeoutError):
    """A model call timed out on every attempt."""

    code = "model-timeout"


class ReplayedReceipt(HandoffsError, ValueError):
    """A receipt id was seen before: the message is a replay."""

    code = "replayed"


class UnsafeConfigurationWarning(UserWarning):
    """A gate was built with an ``Unsafe...`` escape hatch (e.g.
    :class:`~handoffs.receivers.UnsafeNoProofs`).
    """


class CallCacheError(HandoffsError, OSError):
    """The call cache file cannot be opened or written."""

    code = "call-cache-unavailable"


class BudgetExceeded(ModelError):
    """The run's call or token budget is spent: the model is not asked."""

    code = "budget-exceeded"


class ExperimentError(HandoffsError, ValueError):
    """An experiment declaration is inconsistent or cannot be loaded."""

    code = "bad-experiment"


class ProjectionError(ExperimentError):
    """A receiver's declared ``reads`` left out a member its decisions depend on: a
    memo hit on the declared projection, decided again without the memo, gave
    another outcome (only with ``projection=True``; by default the key is exact).

    Attributes:
        receiver: the receiver's name.
        fields: the members that differ between the two messages and that the
            declaration does not name.
        declared: the declared ``reads``.
    """

    code = "projection-mismatch"

    def __init__(self, receiver: str, fields: Sequence[str], declared: Sequence[str],
                 detail: str) -> None:
        self.receiver = receiver
        self.fields = tuple(fields)
        self.declared = tuple(declared)
        self.detail = detail
        named = ", ".join(self.fields) or "(a member it reads by presence)"
        super().__init__(f"receiver {receiver!r} declares reads={list(self.declared)!r} but "
                         f"its decision depends on {named}: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        # raised in a worker process, it crosses back to the run whole
        return (ProjectionError, (self.receiver, self.fields, self.declared, self.detail))


class UnknownExperimentKey(ExperimentError):
    """A table of an experiment file (or its JSON form) has a key nothing reads.

    Attributes:
        key: the unknown key.
        table: the TOML path of its table (``cases``, ``strategy[2].model``; empty for
            the top level).
        known: the keys the table accepts.
        suggestion: the closest known key (:func:`difflib.get_close_matches`), if any.
        file: the experiment file, when it was read from one.
    """

    code = "unknown-experiment-key"

    def __init__(self, key: str, *, table: str, known: Iterable[str], noun: str,
                 file: str | None = None) -> None:
        self.key = key
        self.table = table
        self.known = tuple(sorted(known))
        self.noun = noun
        self.file = file
        import difflib  # only when the error is raised: importing handoffs stays light

        close = difflib.get_close_matches(key, self.known, n=1, cutoff=0.6)
        self.suggestion = close[0] if close else None
        if not table:
            text = f"unknown table [{key}]"
            hint = (f"; did you mean [{self.suggestion}]?" if self.suggestion
                    else f"; known: {', '.join(self.known)}")
        else:
            text = f"unknown {noun} {key!r} in [{table}]"
            hint = (f"; did you mean {self.suggestion!r}?" if self.suggestion
                    else f"; known: {', '.join(self.known)}")
        prefix = f"{file}: " if file else ""
        super().__init__(prefix + text + hint,
                         json_path=f"$.{table}.{key}" if table else f"$.{key}")

    def in_file(self, file: os.PathLike[str] | str) -> UnknownExperimentKey:
        """The same error, naming the file it was read from."""
        return UnknownExperimentKey(self.key, table=self.table, known=self.known,
                                    noun=self.noun, file=str(file))


def refuse_unknown(table: Mapping[str, Any], known: Iterable[str], *, path: str,
                   noun: str = "key") -> None:
    """Raise :class:`UnknownExperimentKey` for the first key of ``table`` not in ``known``."""
    accepted = frozenset(known)
    unknown = sorted(k for k in table if k not in accepted)
    if unknown:
        raise UnknownExperimentKey(str(unknown[0]), table=path, known=accepted, noun=noun)


class UserCodeError(ExperimentError):
    """The experiment's own code (an encoder, a receiver, a case source, a structure or
    evidence function) raised, or returned what the lab cannot use.

    Attributes:
        role: what the code was doing (``encoder``, ``receiver``, ``case source``, ...).
        callable_name: the callable's qualified name (``module.Class.method``).
        case_id: the case it was working on, if known.
        error: the exception's type and text.
    """

    code = "user-code-error"

    def __init__(self, *, role: str, callable_name: str, case_id: str | None,
                 error: BaseException | str, at: str | None = None) -> None:
        self.role = role
        self.callable_name = callable_name
        self.case_id = case_id
        self.error = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        where = f" on case {case_id!r}" if case_id is not None else ""
        if at is not None:
            where = f" {at}"
        super().__init__(f"the {role} {callable_name} raised{where}: {self.error}")


class ReportError(HandoffsError, ValueError):
    """A report does not satisfy the report schema.

    ``violations`` lists every violation, the most relevant first.
    """

    code = "bad-report"

    def __init__(self, violations: Sequence[Violation]) -> None:
        self.violations = tuple(violations)
        best = self.violations[0]
        super().__init__(best.message, json_path=best.json_path)


class RunLogError(HandoffsError, ValueError):
    """The run log cannot be used (wrong format, another experiment, unreadable)."""

    code = "bad-run-log"


class NoSuchReading(HandoffsError, KeyError):
    """:meth:`~handoffs.lab.Baselines.control` was asked for a strategy and control pair
    that the report holds no reading of (the strategy was not run, or not under that control).
    """

    code = "no-such-reading"

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return f"{self.message} @ {self.json_path}"


class DecisionLogError(HandoffsError, OSError):
    """The decision log cannot be opened or written (the gate then fails closed)."""

    code = "log-unavailable"


class ReplayStoreError(HandoffsError, RuntimeError):
    """The replay store cannot answer (full, or its database failed): fail closed."""

    code = "replay-store-unavailable"


class ConfigError(HandoffsError, ValueError):
    """The service configuration is missing a setting or has a bad one."""

    code = "bad-config"


class VersionBumpError(HandoffsError, ValueError):
    """The new contract version does not bump the old one enough for its changes.

    Attributes:
        old_version: the old ``MAJOR.MINOR.PATCH``.
        new_version: the new one.
        required: the bump the findings require (``"major"``, ``"minor"``...).
        actual: the bump made (``"none"`` for equal versions, ``"downgrade"``).

    Codes: ``version-bump-too-small``, ``version-decreased``, ``contract-renamed``,
    ``no-version``.
    """

    code = "version-bump-too-small"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        old_version: str | None = None,
        new_version: str | None = None,
        required: str | None = None,
        actual: str | None = None,
    ) -> None:
        self.old_version = old_version
        self.new_version = new_version
        self.required = required
        self.actual = actual
        super().__init__(message, code=code, json_path="$.version")


class ReleasedVersionChanged(HandoffsError, ValueError):
    """A checked-in (released) contract version no longer matches its definition.

    Attributes:
        problems: every :class:`~handoffs.contracts.versions.LockProblem` found.
    """

    code = "released-version-changed"

    def __init__(self, problems: Sequence[Any]) -> None:
        # each a LockProblem (``message``, ``path``); not named here, which would make
        # this module, the root of every error, import the contracts
        self.problems = tuple(problems)
        first = problems[0]
        super().__init__(first.message, code="released-version-changed",
                         json_path=str(first.path))
