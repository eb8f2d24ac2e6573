"""Contracts: the typed, versioned definition of one decision handoff."""

from __future__ import annotations

import enum
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from functools import cached_property
from typing import Any, Final, Generic, TypeVar, cast

import attrs

from handoffs._errors import ContractDefinitionError, InvalidArgument, PolicyError
from handoffs._json import DEFAULT_LIMITS, JSONLimits
from handoffs._schemas import SEMVER
from handoffs.contracts._fields import FieldKind, FieldSpec, _converter, state_fields
from handoffs.contracts._policy import (
    Absent,
    Condition,
    Present,
)
from handoffs.contracts._rules import (
    Outcome,
    Policy,
    arithmetic_conditions,
    walk_conditions,
)

__all__ = [
    "Authority",
    "ContextDependency",
    "Contract",
    "EvidenceFresh",
    "HardConstraint",
    "LossMatrix",
    "OnMissing",
    "PolicyResolvable",
    "RoleHeld",
    "Uncertainty",
]

A = TypeVar("A", bound=enum.Enum)
S = TypeVar("S")

_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
_SEMVER: Final = SEMVER


class Authority(enum.Enum):
    """What the sender's receipt asks of the receiver.

    ``ADVISE``: the receiver decides, recomputing from the decisive state.
    ``DECIDE``: the sender decided; an authorised actuator executes.
    """

    ADVISE = "ADVISE"
    DECIDE = "DECIDE"


class Uncertainty(enum.Enum):
    """Whether the sender's evidence is settled, in conflict or incomplete."""

    RESOLVED = "RESOLVED"
    CONFLICT = "CONFLICT"
    MISSING = "MISSING"


class OnMissing(enum.Enum):
    """What a receiver does when a declared context dependency is not met: a context
    dependency's ``on_missing``, written ``"REJECT"`` or ``"ESCALATE"``.
    """

    REJECT = "REJECT"
    ESCALATE = "ESCALATE"


def _on_missing(value: OnMissing | str) -> OnMissing:
    try:
        return OnMissing(value)
    except ValueError:
        raise InvalidArgument(f"on_missing must be 'REJECT' or 'ESCALATE', got {value!r}",
                              json_path="$.context.on_missing") from None


def _loss_entries(entries: Mapping[tuple[A, A], float]) -> dict[tuple[A, A], float]:
    return dict(entries)


def _action_set(actions: Iterable[A]) -> frozenset[A]:
    return frozenset(actions)


def _dependencies(deps: Iterable[ContextDependency]) -> tuple[ContextDependency, ...]:
    return tuple(deps)


def _constraints(items: Iterable[HardConstraint[A]]) -> tuple[HardConstraint[A], ...]:
    return tuple(items)


def _cryptosuites(names: Iterable[str]) -> tuple[str, ...]:
    from handoffs.integrity import registered_cryptosuites

    if isinstance(names, str):
        raise ContractDefinitionError(
            f"cryptosuites is a sequence of suite names, got the string {names!r}",
            code="bad-contract-definition")
    suites = tuple(names)
    registered = registered_cryptosuites()
    unknown = [name for name in suites if name not in registered]
    if not suites or unknown or len(set(suites)) != len(suites):
        raise ContractDefinitionError(
            f"cryptosuites must name registered suites ({', '.join(registered)}), each once "
            f"and at least one, got {list(suites)}", code="bad-contract-definition")
    return suites


def _all_cryptosuites() -> tuple[str, ...]:
    from handoffs.integrity import registered_cryptosuites

    return registered_cryptosuites()


@attrs.frozen
class LossMatrix(Generic[A]):
    """Consequence of choosing one action when the reference chose another.

    ``loss[(chosen, reference)]`` in the contract's units; every pair must be given.
    """

    entries: Mapping[tuple[A, A], float] = attrs.field(converter=_loss_entries)

    def __call__(self, chosen: A, reference: A) -> float:
        """The loss of ``chosen`` when ``reference`` was right."""
        return self.entries[(chosen, reference)]

    def check_complete(self, actions: Iterable[A]) -> None:
        """Raise unless every (chosen, reference) pair over ``actions`` has a loss."""
        actions = list(actions)
        for chosen in actions:
            for reference in actions:
                if (chosen, reference) not in self.entries:
                    raise ContractDefinitionError(
                        f"loss matrix has no entry for ({chosen.value}, {reference.value})",
                        code="incomplete-loss-matrix",
                    )
                if chosen == reference and self.entries[(chosen, reference)] != 0:
                    raise ContractDefinitionError(
                        f"loss of the correct action {chosen.value} must be 0",
                        code="nonzero-diagonal",
                    )
        extra = {a for pair in self.entries for a in pair} - set(actions)
        if extra:
            raise ContractDefinitionError(
                f"loss matrix names unknown actions {sorted(str(a) for a in extra)}",
                code="incomplete-loss-matrix",
            )

    def to_json(self) -> list[dict[str, Any]]:
        """Rows ``{"chosen", "reference", "loss"}`` in a stable order."""
        return [
            {"chosen": c.value, "reference": r.value, "loss": v}
            for (c, r), v in sorted(self.entries.items(), key=lambda kv: (kv[0][0].value,
                                                                          kv[0][1].value))
        ]

    def with_entries(self, changes: Mapping[tuple[A, A], float]) -> LossMatrix[A]:
        """A new matrix with some entries changed (for boundary experiments)."""
        return LossMatrix({**self.entries, **changes})


@attrs.frozen
class HardConstraint(Generic[A]):
    """A violation counted apart from average regret, never averaged away.

    Choosing ``chosen`` is a hard violation whenever the reference action is not in
    ``allowed_references`` and, if ``when`` is given, ``when`` holds on the reference
    (true) state. The essay's example: RELEASE when the reference is not RELEASE. A
    condition on the true state says "never CONTINUE when p > 0.3" directly::

        HardConstraint("no-continue-when-likely", chosen=Action.CONTINUE,
                       when=Field("failure_probability") > 0.3)

    ``when`` is evaluated in the policy's three-valued logic on the true state; if it
    is undetermined there (a certified interval straddling 0.3) the constraint counts
    as applying: a hard constraint errs on the side of counting.
    """

    name: str
    chosen: A
    allowed_references: frozenset[A] = attrs.field(default=frozenset(), converter=_action_set)
    description: str = ""
    when: Condition | None = attrs.field(default=None, kw_only=True)

    def violated(self, chosen: A, reference: A, *,
                 truth: Mapping[str, Any] | None = None) -> bool:
        """True when choosing ``chosen`` against ``reference`` breaks the constraint.

        Args:
            chosen: the action taken.
            reference: the reference action.
            truth: the true state as a view (``Contract.view``); required when the
                constraint has a ``when`` condition.

        Raises:
            PolicyError: ``truth-required`` when ``when`` is set and ``truth`` is not
                given; or what evaluating ``when`` raises.
        """
        if chosen != self.chosen or reference in self.allowed_references:
            return False
        if self.when is None:
            return True
        if truth is None:
            raise PolicyError(f"hard constraint {self.name!r} is conditioned on the true "
                              "state; pass truth=", code="truth-required")
        return self.when.evaluate(truth) is not False

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        out = {
            "name": self.name,
            "chosen": self.chosen.value,
            "allowed_references": sorted(a.value for a in self.allowed_references),
            "description": self.description,
        }
        if self.when is not None:
            out["when"] = self.when.describe()
        return out


class ContextDependency:
    """Base of declared receiver-context dependencies (runtime preconditions)."""

    on_missing: OnMissing

    @property
    def kind(self) -> str:
        """Stable identifier of the dependency type."""
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form, exported with the contract."""
        raise NotImplementedError


@attrs.frozen
class PolicyResolvable(ContextDependency):
    """The receiver's policy service must resolve the receipt's policy version, and it
    must be current. ``version`` pins an exact version; ``None`` accepts the one named
    in the receipt if the service knows it and holds it current.
    """

    version: str | None = None
    on_missing: OnMissing = attrs.field(default=OnMissing.ESCALATE, converter=_on_missing)

    @property
    def kind(self) -> str:
        return "policy-resolvable"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "version": self.version, "on_missing": self.on_missing.value}


@attrs.frozen
class RoleHeld(ContextDependency):
    """The receiver must hold ``role`` (according to its own identity service)."""

    role: str
    on_missing: OnMissing = attrs.field(default=OnMissing.REJECT, converter=_on_missing)

    @property
    def kind(self) -> str:
        return "role-held"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "role": self.role, "on_missing": self.on_missing.value}


@attrs.frozen
class EvidenceFresh(ContextDependency):
    """Evidence whose reference contains ``evidence`` must have been observed no longer
    than ``max_age`` before the decision.
    """

    evidence: str
    max_age: timedelta
    on_missing: OnMissing = attrs.field(default=OnMissing.ESCALATE, converter=_on_missing)

    @property
    def kind(self) -> str:
        return "evidence-fresh"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "evidence": self.evidence,
            "max_age_seconds": int(self.max_age.total_seconds()),
            "on_missing": self.on_missing.value,
        }


def _check_name(_: Any, __: Any, value: str) -> None:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ContractDefinitionError(
            f"contract name {value!r} must be kebab-case ASCII", code="bad-contract-name"
        )


def _check_version(_: Any, __: Any, value: str) -> None:
    if not isinstance(value, str) or not _SEMVER.fullmatch(value):
        raise ContractDefinitionError(
            f"contract version {value!r} must be MAJOR.MINOR.PATCH", code="bad-contract-version"
        )


def _check_absence_tests(conditions: Iterable[Condition],
                         fields: Mapping[str, FieldSpec]) -> None:
    """Refuse an :class:`Absent` or :class:`Present` test of a field that cannot be absent."""
    for condition in conditions:
        for test in walk_conditions(condition):
            if (isinstance(test, Absent | Present) and test.field in fields
                    and not fields[test.field].optional):
                raise ContractDefinitionError(
                    f"{test.describe()!r} tests the absence of {test.field}, which is not "
                    "optional (declare it T | None)", code="not-optional",
                    json_path=f"$.{test.field}")


DEFAULT_MAX_PROOF_AGE: Final = timedelta(hours=1)
"""The default bound on the age of a receipt's proof (see :attr:`Contract.max_proof_age`)."""


@attrs.frozen
class Contract(Generic[S, A]):
    """One versioned decision-receipt contract: everything needed to build, sign,
    validate and decide.

    Attributes:
        name: kebab-case contract name, e.g. ``"payment-release"``.
        version: semantic version ``MAJOR.MINOR.PATCH``.
        description: what decision the contract carries.
        actions: the receiver's action set (a ``str``-valued Enum).
        state: the decision state, a frozen attrs class of :func:`decision_field` s.
        policy: the receiver's reference policy, with explicit precedence.
        loss: asymmetric loss over (chosen, reference) actions.
        hard_constraints: violations counted apart from regret.
        context: declared receiver-context dependencies.
        fail_closed_action: what the receiver does when it cannot decide safely.
        counterfactual_trigger: the change that invalidates reuse of a receipt.
        policy_versions: the policy versions a receipt may name (pattern-free list).
        max_notes_length: bound on the free-text ``notes`` member.
        max_proof_age: how old the sender's proof may be when a receiver checks it
            (``now - created``; one hour by default). A receipt whose proof is that old
            or older is refused as ``proof-stale`` even if it has not expired, so a
            key rotated out of the ring cannot back-date proofs for longer than this.
            A gate's ``max_proof_age`` option overrides it.
        cryptosuites: the Data Integrity cryptosuites the receipt schema's proof admits
            (default: every registered suite, ``eddsa-jcs-2022`` and ``ecdsa-jcs-2019``).
            A version released when only ``eddsa-jcs-2022`` existed names that one suite
            here, so its checked-in schema and fingerprint stay as released; signing
            with a key of a suite not listed fails (``suite-not-admitted``).
        admits_context: the receipt schema admits an ``@context`` (and the proof's copy
            of it) of the accepted values
            (:data:`~handoffs.integrity.ACCEPTED_CONTEXTS`: the DI v2 context, as data,
            never interpreted), as receipts signed by a JSON-LD Data Integrity stack
            carry it; ``False`` (the default) keeps plain JSON.
    """

    name: str = attrs.field(validator=_check_name)
    version: str = attrs.field(validator=_check_version)
    description: str
    actions: type[A]
    state: type[S]
    policy: Policy[A]
    loss: LossMatrix[A]
    fail_closed_action: A
    counterfactual_trigger: str
    hard_constraints: tuple[HardConstraint[A], ...] = attrs.field(
        default=(), converter=_constraints
    )
    context: tuple[ContextDependency, ...] = attrs.field(default=(), converter=_dependencies)
    max_notes_length: int = 2000
    max_proof_age: timedelta = attrs.field(default=DEFAULT_MAX_PROOF_AGE, kw_only=True)
    cryptosuites: tuple[str, ...] = attrs.field(factory=_all_cryptosuites,
                                                converter=_cryptosuites, kw_only=True)
    admits_context: bool = attrs.field(default=False, kw_only=True,
                                       validator=attrs.validators.instance_of(bool))

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.max_proof_age, timedelta) or self.max_proof_age <= timedelta(0):
            raise ContractDefinitionError(
                f"max_proof_age must be a positive timedelta, got {self.max_proof_age!r}",
                code="bad-contract-definition")
        if not (isinstance(self.actions, type) and issubclass(self.actions, enum.Enum)):
            raise ContractDefinitionError("actions must be an Enum class", code="bad-actions")
        if not all(isinstance(a.value, str) for a in self.actions):
            raise ContractDefinitionError("actions must have string values", code="bad-actions")
        specs = self.fields  # validates the state class
        self.loss.check_complete(self.actions)
        known = {spec.name for spec in specs}
        unknown = self.policy.reads() - known
        if unknown:
            raise ContractDefinitionError(
                f"policy reads unknown fields {sorted(unknown)}", code="policy-unknown-field"
            )
        conditions = [rule.when for rule in self.policy.rules]
        for constraint in self.hard_constraints:
            if constraint.when is None:
                continue
            unknown = constraint.when.reads() - known
            if unknown:
                raise ContractDefinitionError(
                    f"hard constraint {constraint.name!r} reads unknown fields "
                    f"{sorted(unknown)}", code="policy-unknown-field",
                    json_path=f"$.hard_constraints.{constraint.name}")
            conditions.append(constraint.when)
        numeric = (FieldKind.INT, FieldKind.FLOAT, FieldKind.INTERVAL)
        _check_absence_tests(conditions, self.field_map)
        for condition in conditions:
            for compare in arithmetic_conditions(condition):
                bad = sorted(n for n in compare.reads() if n in known
                             and self.field_map[n].kind not in numeric)
                if bad:
                    raise ContractDefinitionError(
                        f"arithmetic in {compare.describe()!r} reads non-numeric fields "
                        f"{bad}", code="policy-not-numeric")
        for action in (self.fail_closed_action, self.policy.default,
                       *(r.action for r in self.policy.rules),
                       *(h.chosen for h in self.hard_constraints)):
            if not isinstance(action, self.actions):
                raise ContractDefinitionError(
                    f"{action!r} is not an action of {self.actions.__name__}", code="bad-actions"
                )

    @cached_property
    def id(self) -> str:
        """``"<name>/<version>"``, the value of a receipt's ``contract`` member (made once
        per contract: a gate reads it per receipt).
        """
        return f"{self.name}/{self.version}"

    @property
    def schema_id(self) -> str:
        """The stable ``$id`` of this version's receipt schema,
        ``"urn:handoffs:schema:<name>:<version>"``.
        """
        return f"urn:handoffs:schema:{self.name}:{self.version}"

    @property
    def version_key(self) -> tuple[int, int, int]:
        """The version as ``(major, minor, patch)``, for ordering versions."""
        major, minor, patch = (int(part) for part in self.version.split("."))
        return major, minor, patch

    @cached_property
    def fields(self) -> tuple[FieldSpec, ...]:
        """The decision fields, in declaration order."""
        return state_fields(self.state)

    @cached_property
    def field_map(self) -> dict[str, FieldSpec]:
        """Decision fields by name."""
        return {spec.name: spec for spec in self.fields}

    def view(self, state: S) -> dict[str, Any]:
        """A full state as a view for :meth:`~handoffs.contracts.policy.Policy.evaluate`."""
        names, values = self._view_parts
        return dict(zip(names, values(state), strict=True))

    @cached_property
    def _view_parts(self) -> tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]:
        # The field names and one C-level reader of their values (no Python per field
        # in :meth:`view`, which a gate calls per receipt).
        names = tuple(spec.name for spec in self.fields)
        if len(names) > 1:
            return names, operator.attrgetter(*names)
        # attrgetter of one name gives the value itself, not a 1-tuple (and needs a name)
        return names, lambda state: tuple(getattr(state, name) for name in names)

    def dump_state(self, state: S) -> dict[str, Any]:
        """A full state's JSON form, as a receipt's ``decision_state`` carries it (enums
        as their values, intervals as ``{"lo": ..., "hi": ...}``).
        """
        return cast("dict[str, Any]", _converter.unstructure(state))

    def load_state(self, data: Mapping[str, Any]) -> S:
        """The typed state of a JSON ``decision_state`` (the inverse of
        :meth:`dump_state`). It structures what it is given, and checks nothing beyond
        what structuring needs: validate a message with :meth:`validate` first.
        """
        return self._structure_state(data, self.state)

    @cached_property
    def _structure_state(self) -> Callable[[Any, Any], S]:
        # The converter's structure hook for the state class, looked up once: a gate
        # builds a typed state per receipt (``Converter.structure`` dispatches per call).
        return cast("Callable[[Any, Any], S]", _converter.get_structure_hook(self.state))

    def decide(self, state: S) -> A:
        """The reference action for a complete state (always determined)."""
        outcome = self.policy.evaluate(self.view(state))
        if outcome.action is None:  # an interval straddles, a divisor holds 0, or a
            return self.fail_closed_action  # Predicate returned None
        return outcome.action

    def evaluate(self, view: S | Mapping[str, Any]) -> Outcome[A]:
        """The policy on a full state object or a partial view (a mapping of field
        names to values; see :meth:`~handoffs.contracts.policy.Policy.evaluate`).

        Raises:
            ValueError: ``InvalidArgument`` (also a TypeError), ``view`` is neither an instance of
                :attr:`state` nor a
                mapping (a ``TypeError`` and a ``ValueError``).
        """
        if isinstance(view, self.state):
            return self.policy.evaluate(self.view(view))
        if not isinstance(view, Mapping):
            raise InvalidArgument(f"evaluate takes a {self.state.__name__} or a mapping of field "
                            f"values, got {type(view).__name__}")
        return self.policy.evaluate(view)

    def content_schema(self) -> dict[str, Any]:
        """The strict JSON Schema of what an encoder or a model writes for this contract.

        Only the semantic members (``proposed_action``, ``decision_state``,
        ``uncertainty``, ``counterfactual_trigger``, ``notes``): no governance, grant,
        proof, id or contract. Every object is closed and lists all its properties as
        required (optional members are nullable), as OpenAI's strict structured
        outputs require; pass the model's output to
        :meth:`~handoffs.contracts.Sender.sign`.
        """
        from handoffs.contracts._schema import content_json_schema

        return content_json_schema(self)

    def json_schema(self) -> dict[str, Any]:
        """The Draft 2020-12 JSON Schema of this contract version's receipts (the
        file ``handoffs schema export`` writes).
        """
        from handoffs.contracts._schema import to_json_schema

        return to_json_schema(self)

    def validate(self, document: Any, *, limits: JSONLimits = DEFAULT_LIMITS) -> None:
        """Check a parsed receipt document against :meth:`json_schema`; return nothing
        or raise :class:`~handoffs.contracts.ReceiptValidationError` listing every
        violation, best first.

        The document is first checked as parsed JSON (size and depth within
        ``limits``, no lone surrogates, nothing JSON cannot hold). The compiled
        validator (``jsonschema-rs``) decides, and describes the common violations
        itself; rarer keywords are described by ``jsonschema``.

        Raises:
            ReceiptValidationError: every violation, best first.
            MalformedJSON: the document is not JSON data, or exceeds ``limits``.
        """
        _schema.validate(self, document, limits=limits)

    def policy_document(self) -> dict[str, Any]:
        """The version's policy document (``schemas/<id>/<version>.policy.json``),
        its ``fingerprint`` included: the schema's digest, the rules in order with
        their guards and thresholds, defaults, loss matrix, hard constraints, context
        dependencies, fail-closed action and counterfactual trigger, as plain JSON.
        """
        from handoffs.contracts._fingerprint import policy_document

        return policy_document(self)

    def policy_fingerprint(self) -> str:
        """The contract fingerprint, ``sha256:<hex>``: a digest over everything that
        decides (the ``fingerprint`` of :meth:`policy_document`); authority grants
        carry it, and a gate refuses a grant issued under another. Computed once per
        definition.
        """
        from handoffs.contracts._fingerprint import policy_fingerprint

        return policy_fingerprint(self)

    def hard_violations(self, chosen: A, reference: A, *,
                        truth: S | Mapping[str, Any] | None = None) -> tuple[str, ...]:
        """Names of the hard constraints that ``chosen`` breaks against ``reference``.

        ``truth`` (the true state, or its view) is needed by constraints with ``when``.
        """
        view = truth if truth is None or isinstance(truth, Mapping) else self.view(truth)
        return tuple(h.name for h in self.hard_constraints
                     if h.violated(chosen, reference, truth=view))

    def describe(self) -> dict[str, Any]:
        """The whole contract as JSON-ready data (exported beside the schema)."""
        return {
            "contract": self.id,
            "description": self.description,
            "actions": [a.value for a in self.actions],
            "decision_fields": [
                {
                    "name": s.name,
                    "kind": s.kind.value,
                    "description": s.description,
                    **({"optional": True} if s.optional else {}),
                    **({"enum": [e.value for e in s.domain() or ()]} if s.enum_type else {}),
                    **({"minimum": s.minimum, "maximum": s.maximum}
                       if s.minimum is not None else {}),
                }
                for s in self.fields
            ],
            "policy": self.policy.describe(),
            "loss": self.loss.to_json(),
            "hard_constraints": [h.to_json() for h in self.hard_constraints],
            "context": [c.to_json() for c in self.context],
            "fail_closed_action": self.fail_closed_action.value,
            "counterfactual_trigger": self.counterfactual_trigger,
        }


# Below the class it needs: _schema builds on this module (an import cycle), and
# validating calls it once per message (an import inside the method costs ~1 µs each).
from handoffs.contracts import _schema  # noqa: E402
