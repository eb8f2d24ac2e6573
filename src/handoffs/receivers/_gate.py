"""The runtime gate for signed decision receipts: five numbered steps, fail closed.

A :class:`Gate` is built once, with keyword-only configuration, and then decides
message after message. Its steps are stages of the one admission pipeline
(:mod:`handoffs.receivers._pipeline`), numbered as in the docs
(``docs/how-to/validate-at-runtime.md``) and in :class:`~handoffs.receivers.Step`:

1. **parse** with limits (size, depth, duplicate keys, non-finite numbers), pick the
   contract version the message names (unknown versions are rejected, never guessed)
   and check the contract's schema;
2. **proofs**: the sender's proof, the issuer's authority grant, key validity at
   signing time, proof purposes, audience, expiry against the injected clock, and
   replay (a receipt id seen before);
3. **context**: the contract's declared receiver-context dependencies (policy version
   resolvable and current, the receiver's role, freshness of referenced evidence);
   a missing one rejects or escalates exactly as the contract says;
4. **evidence**: resolve every evidence reference, verify pinned content digests and,
   when configured, read the decisive claims back against the resolved evidence;
5. **policy**: the receiver contract's own rule (see ``handoffs.receivers``).

No step raises out of the gate: the pipeline turns every
:class:`~handoffs.HandoffsError` (and any unexpected exception, as ``internal-error``)
into a fail-closed :class:`~handoffs.receivers.Decision` carrying the contract's
``fail_closed_action`` and a typed :class:`~handoffs.receivers.Reason`. The services the
steps ask (policy service, evidence resolvers, readback) live in
:mod:`handoffs.receivers._services`.

One concern, kept in one module although it is past 800 lines: the gate's configuration
and its five steps, in the order they run, so that a reader follows one message through
the gate top to bottom. What the steps call lives elsewhere already (the pipeline, the
decision types, the services, the memo, the replay store).
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable, Hashable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Final, NamedTuple, cast

import attrs

from handoffs._audience import check_addressed
from handoffs._errors import (
    HandoffsError,
    InvalidArgument,
    MalformedJSON,
    ProofError,
    UnknownContract,
    UnsafeConfigurationWarning,
)
from handoffs._json import (
    DEFAULT_LIMITS,
    JSONLimits,
    ParsedObject,
    canonical_bytes,
    parse_object,
)
from handoffs._logs import ReplayClaim
from handoffs._memo import gate_memo
from handoffs._time import CLOCK_SKEW, format_time, utc_now
from handoffs.contracts import (
    Contract,
    EvidenceFresh,
    EvidenceRef,
    PolicyResolvable,
    Receipt,
    Registry,
    RoleHeld,
    VerifiedReceipt,
)
from handoffs.integrity import KeyRing
from handoffs.receivers._decision import Decision, Reason, Step, Verdict
from handoffs.receivers._pipeline import Pipeline, Refusal, Run, Stage
from handoffs.receivers._replay import (
    DecisionLog,
    MemoryReplayStore,
    ReplayedReceipt,
    ReplayLog,
    ReplayStore,
)
from handoffs.receivers._services import (
    EvidenceError,
    EvidenceResolver,
    PolicyService,
    ResolvedEvidence,
    check_readback,
    reads_back,
)

__all__ = [
    "Admitted",
    "Clock",
    "Gate",
    "ReceiverRule",
    "Ruling",
    "UnsafeConfigurationWarning",
    "UnsafeNoProofs",
    "utc_now",
]

Clock = Callable[[], datetime]
"""An injectable clock: returns the current instant as an aware datetime."""


# ------------------------------------------------------------------------ unsafe hatch


@attrs.frozen
class UnsafeNoProofs:
    """**Unsafe.** A trust setting that skips step (2)'s cryptography.

    With it, a gate accepts unsigned messages: it checks no proof, no key, no
    authority grant, so *anyone* can claim any sender and ``DECIDE`` authority. Every
    other check still runs: parsing limits, the schema, audience, expiry, replay,
    context, evidence and policy. It exists for the ablation lab, whose messages are
    unsigned as in the essay. Building a gate with it emits an
    :class:`UnsafeConfigurationWarning`.
    """


# ------------------------------------------------------------------ admission results


@attrs.frozen(kw_only=True)
class Admitted:
    """What steps (1)–(4) established about a message; the input of step (5).

    Attributes:
        document: the parsed message (pass this on, never the raw bytes).
        contract: the contract the message was admitted under.
        receipt: the typed receipt (``None`` for the non-receipt message forms).
        verified: the verified proofs and grant (``None`` under
            :class:`UnsafeNoProofs` and for non-receipt forms).
        evidence: resolved evidence by URI (empty without a resolver).
        readback: the readback outcome (see :attr:`Decision.readback`).
    """

    document: Mapping[str, Any]
    contract: Contract[Any, Any]
    receipt: Receipt[Any, Any] | None = None
    verified: VerifiedReceipt | None = None
    evidence: Mapping[str, ResolvedEvidence] = attrs.field(factory=dict)
    readback: str | None = None

    @property
    def authority(self) -> str | None:
        """The authority the message claims (verified when :attr:`verified` is set)."""
        if self.receipt is not None:
            return str(self.receipt.authority.value)
        value = self.document.get("authority")
        return value if isinstance(value, str) else None


@attrs.frozen(kw_only=True)
class Ruling:
    """A receiver rule's answer in step (5).

    Attributes:
        action: the action value chosen (the fail-closed action when refusing).
        verdict: ACCEPT, or ESCALATE / REJECT when the receiver refuses.
        reasons: why, when not a clean ACCEPT.
        record: receiver-specific facts to record with the decision.
    """

    action: str
    verdict: Verdict = Verdict.ACCEPT
    reasons: tuple[Reason, ...] = ()
    record: Mapping[str, Any] = attrs.field(factory=dict)


ReceiverRule = Callable[[Admitted], Ruling]
"""Step (5): a receiver contract's rule over an admitted message."""


# ----------------------------------------------------------------------------- helpers

def _raw(message: Any) -> bytes | None:
    if isinstance(message, bytes | bytearray | memoryview):
        return bytes(message)
    if isinstance(message, str):
        return message.encode("utf-8", "surrogatepass")
    return None


def _digest(
    message: Any, document: Mapping[str, Any] | None
) -> tuple[str | None, int, bytes | None]:
    """Digest and size of the message as received (canonical form for a mapping)."""
    raw = _raw(message)
    if raw is None and document is not None:
        try:
            raw = canonical_bytes(document)
        except HandoffsError:
            return None, 0, None
        return "sha256:" + hashlib.sha256(raw).hexdigest(), len(raw), None
    if raw is None:
        return None, 0, None
    return "sha256:" + hashlib.sha256(raw).hexdigest(), len(raw), raw


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


# ---------------------------------------------------------------------------- schema


def check_schema(contract: Contract[Any, Any], document: ParsedObject) -> None:
    """Validate ``document`` against the contract's schema (step 1); the document then
    remembers it passed (``valid_for``), so step (2) builds the receipt unvalidated.

    The contracts' validator answers the accept path with the compiled validator
    (jsonschema-rs, built once per contract version) and reports a rejection with
    every violation and its path.

    Raises:
        ReceiptValidationError: every violation, best first.
        MalformedJSON: the object holds values that are not JSON data (``invalid-json``).
    """
    try:
        contract.validate(document)
    except HandoffsError:
        raise
    except (ValueError, TypeError, OverflowError) as exc:
        raise MalformedJSON(f"the message is not plain JSON data: {exc}") from exc


def _same(claimed: Any, stated: Any) -> bool:
    if isinstance(claimed, bool) or isinstance(stated, bool):
        return isinstance(claimed, bool) and isinstance(stated, bool) and claimed is stated
    return bool(claimed == stated)


# ------------------------------------------------------------------------------ the gate


def _identity(_: Any, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value or value != value.strip():
        raise InvalidArgument(f"{attribute.name} must be a non-empty identifier, got {value!r}")


def _registry(value: Registry | Contract[Any, Any] | Iterable[Contract[Any, Any]]) -> Registry:
    return Registry.coerce(value)


def _roles(value: Iterable[str]) -> frozenset[str]:
    if isinstance(value, str):
        raise InvalidArgument("roles must be a collection of role names, not one string")
    roles = frozenset(value)
    if not all(isinstance(r, str) and r for r in roles):
        raise InvalidArgument("roles must be non-empty strings")
    return roles


def _trust(_: Any, __: Any, value: KeyRing | UnsafeNoProofs) -> None:
    if isinstance(value, UnsafeNoProofs):
        return
    if not isinstance(value, KeyRing):
        raise InvalidArgument(
            f"trust must be a KeyRing or UnsafeNoProofs(), got {type(value).__name__}"
        )
    if len(value) == 0:
        raise ProofError(
            "the trust key ring is empty; nothing could verify (fail closed)",
            code="empty-trust-store",
        )


def _optional_protocol(protocol: type[Any]) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is not None and not isinstance(value, protocol):
            raise InvalidArgument(f"{attribute.name} must implement {protocol.__name__}")

    return check


def _optional_age(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (not isinstance(value, timedelta) or value <= timedelta(0)):
        raise InvalidArgument(f"{attribute.name} must be a positive timedelta or None, "
                              f"got {value!r}")


def _callable(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not callable(value):
        raise InvalidArgument(f"{attribute.name} must be callable")


class _Run(Run):
    """What one decision reports (the steps' data flows through the typed values below)."""

    __slots__ = ("claim", "document", "message", "proposal", "rule")
    document: Mapping[str, Any]  # (1) the parsed message, for the decision log

    def __init__(self, message: Any, rule: ReceiverRule, receiver: str,
                 fail_closed: str | None, record: Mapping[str, Any]) -> None:
        super().__init__(receiver, fail_closed, record)
        self.message = message
        self.rule = rule
        self.claim: ReplayClaim | None = None
        self.proposal: str | None = None  # (2) the receipt's proposed_action, for the log


# What each step hands the next (immutable, typed; NamedTuples: a tuple's cost per
# message, where an attrs instance costs a setattr per field).


class _Parsed(NamedTuple):
    """(1) → (2): the parsed message under its contract's plan, schema-valid."""

    document: ParsedObject  # with what parsing learned (plain; the schema it passed)
    plan: _Plan
    unverified: Receipt[Any, Any] | None  # the typed receipt under UnsafeNoProofs


class _Verified(NamedTuple):
    """(2) → (3): the typed receipt whose proofs, grant, audience, time and replay passed."""

    parsed: _Parsed
    receipt: Receipt[Any, Any]
    verified: VerifiedReceipt | None  # None under UnsafeNoProofs
    now: datetime


class _InContext(NamedTuple):
    """(3) → (4): the receiver-context dependencies met; evidence resolved so far."""

    verified: _Verified
    resolved: dict[str, ResolvedEvidence]


class _WithEvidence(NamedTuple):
    """(4) → (5): evidence resolved, digests verified, decisive claims read back."""

    in_context: _InContext
    readback: str | None


_Check = Callable[["Gate", Any, "Receipt[Any, Any]", datetime, dict[str, "ResolvedEvidence"]],
                  "Reason | None"]
"""Step (3)'s check of one declared dependency: the gate, the dependency, the receipt,
now, the evidence resolved so far; the reason it is unmet, or ``None``."""


class _Plan:
    """What the gate knows of one contract version before any message arrives: the
    contract, its fail-closed action, the proof age it accepts, and its receiver-context
    dependencies each paired with its check, chosen once by kind (the compiled validator
    and the key index live with the schema and the key ring).
    """

    __slots__ = ("context", "contract", "fail_closed", "max_age")

    def __init__(self, contract: Contract[Any, Any], max_proof_age: timedelta | None) -> None:
        self.contract = contract
        self.fail_closed = contract.fail_closed_action.value
        self.max_age = contract.max_proof_age if max_proof_age is None else max_proof_age
        self.context: tuple[tuple[_Check, Any], ...] = tuple(
            (_check_of(dependency), dependency) for dependency in contract.context)


def _check_of(dependency: Any) -> _Check:
    """The check of a declared dependency, by its kind (at plan time, not per receipt)."""
    if isinstance(dependency, PolicyResolvable):
        return Gate._policy_unmet
    if isinstance(dependency, RoleHeld):
        return Gate._role_unmet
    if isinstance(dependency, EvidenceFresh):
        return Gate._fresh
    return Gate._unsupported


@attrs.frozen(kw_only=True)
class Gate:
    """The runtime gate for decision receipts: five numbered steps, fail closed.

    Build it once; call :meth:`decide` (usually through a receiver contract such as
    :class:`~handoffs.receivers.StrictContractReceiver`) for every message.

    Attributes:
        identity: this receiver's identity; a receipt must be addressed to it.
        trust: the key ring that verifies proofs and grants, or **the unsafe**
            :class:`UnsafeNoProofs`. An empty key ring is refused.
        registry: the contract versions this receiver understands: a
            :class:`~handoffs.contracts.Registry`, one contract or an iterable of
            contracts (required; no contract is trusted by default).
        roles: roles this receiver holds (checked against ``RoleHeld`` dependencies).
        policy_service: resolves policy versions (``PolicyResolvable`` dependencies).
        evidence: resolves evidence references (steps 3 and 4); without one, step (4)
            is skipped and ``EvidenceFresh`` dependencies are unmet.
        replay: the replay store (default: a fresh :class:`MemoryReplayStore`);
            ``None`` disables replay protection (deterministic replays in the lab).
        clock: the injectable clock for validity windows and freshness.
        limits: size and depth bounds for raw input.
        readback: the fraction of receipts whose decisive claims step (4) reads back
            against the resolved evidence (needs ``evidence``): ``0`` (the default)
            none, ``1`` every one, ``0.1`` a deterministic tenth of receipt ids (the
            same id is always in or out, so a deterministic receiver stays
            deterministic).
        log: an optional decision log; one row per decision.
        max_proof_age: how old the sender's proof may be at step (2) (``proof-stale``
            from that age on); ``None`` (the default) uses each contract's
            :attr:`~handoffs.contracts.Contract.max_proof_age` (one hour unless the
            contract says otherwise). The bound is always on.
    """

    identity: str = attrs.field(validator=_identity)
    trust: KeyRing | UnsafeNoProofs = attrs.field(validator=_trust)
    registry: Registry = attrs.field(converter=_registry)
    roles: frozenset[str] = attrs.field(default=frozenset(), converter=_roles)
    policy_service: PolicyService | None = attrs.field(
        default=None, validator=_optional_protocol(PolicyService)
    )
    evidence: EvidenceResolver | None = attrs.field(
        default=None, validator=_optional_protocol(EvidenceResolver)
    )
    replay: ReplayStore | None = attrs.field(
        factory=MemoryReplayStore, validator=_optional_protocol(ReplayStore)
    )
    clock: Clock = attrs.field(default=utc_now, validator=_callable)
    limits: JSONLimits = attrs.field(
        default=DEFAULT_LIMITS, validator=attrs.validators.instance_of(JSONLimits)
    )
    readback: float = attrs.field(default=0.0, validator=check_readback)
    log: DecisionLog | None = attrs.field(default=None, validator=_optional_protocol(DecisionLog))
    max_proof_age: timedelta | None = attrs.field(default=None, validator=_optional_age)
    _fail_closed: str | None = attrs.field(init=False, repr=False, eq=False)
    _joint: bool = attrs.field(init=False, repr=False, eq=False, default=False)
    # Per contract id: what steps (1) and (2) need of it, computed once.
    _plans: Mapping[str, _Plan] = attrs.field(init=False, repr=False, eq=False, factory=dict)

    def __attrs_post_init__(self) -> None:
        if len(self.registry) == 0:
            raise UnknownContract("the registry holds no contract", code="empty-registry")
        if self.readback > 0 and self.evidence is None:
            raise InvalidArgument("readback needs an evidence resolver (evidence=...)")
        shared = {c.fail_closed_action.value for c in self.registry}
        object.__setattr__(self, "_fail_closed", shared.pop() if len(shared) == 1 else None)
        # One store for both: the replay claim commits with the decision row.
        object.__setattr__(self, "_joint", self.log is not None
                           and cast(object, self.replay) is self.log
                           and isinstance(self.log, ReplayLog))
        object.__setattr__(self, "_plans", {
            contract.id: _Plan(contract, self.max_proof_age) for contract in self.registry})
        if isinstance(self.trust, UnsafeNoProofs):
            warnings.warn(
                f"gate {self.identity!r} is built with UnsafeNoProofs: proofs, keys and "
                "authority grants are NOT checked; any sender can claim any authority",
                UnsafeConfigurationWarning,
                stacklevel=3,
            )

    @property
    def deterministic(self) -> bool:
        """True without a replay store: the same message always gets the same decision
        (given a fixed clock and fixed context services).
        """
        return self.replay is None

    def memo_key(self, message: Mapping[str, Any]) -> Hashable | None:
        """A key on which this gate's decisions of a parsed ``message`` may be memoised,
        or ``None`` when they depend on more than the message.

        Two messages with equal keys get the same verdict, action and reason codes from
        steps (1)–(4). It exists only for a deterministic gate (no replay store) that
        checks no proofs (a signature covers every byte), keeps no log, and whose
        evidence resolver, if any, has its own ``memo_key(ref)``. Every member is kept
        as it is, except ``id`` and ``case_id`` (only their validity under the schema
        decides here; the id is kept when readback samples by id) and
        ``evidence_refs`` (validity, the resolver's key, and which freshness
        dependencies each names): see ``handoffs._memo``, which a new
        check on one of those members must extend.
        """
        memo = gate_memo(self)
        return None if memo is None else memo.key(message)

    def memo_member(self) -> Callable[[str, Any], Hashable] | None:
        """The contribution of one member to :meth:`memo_key`, or ``None`` when there
        is no key: ``memo_key(m)`` is the set of ``(name, memo_member()(name, value))``
        over the members of ``m``, so a message that differs from another in one member
        has a key that differs in that member's pair only.
        """
        memo = gate_memo(self)
        return None if memo is None else memo.member

    @property
    def verifies_proofs(self) -> bool:
        """False under :class:`UnsafeNoProofs`."""
        return not isinstance(self.trust, UnsafeNoProofs)

    def decide(
        self,
        message: bytes | str | Mapping[str, Any],
        *,
        rule: ReceiverRule,
        receiver: str,
        record: Mapping[str, Any] | None = None,
    ) -> Decision:
        """Run steps (1)–(5) on one message; never raises.

        Args:
            message: raw bytes or text (parsed with :attr:`limits`) or a parsed object.
            rule: step (5), the receiver contract's rule.
            receiver: the receiver contract's name, recorded in the decision.
            record: facts recorded with every decision of this receiver.
        """
        run = _Run(message, rule, receiver, self._fail_closed, {} if record is None else record)
        decision = _PIPELINE.run(self, run)
        if self.log is not None:  # the document, when step (1) parsed one
            decision = self._append(decision, message, getattr(run, "document", None), run=run)
        return decision

    # ------------------------------------------------------------------ steps (1)-(5)

    def _parse_step(self, run: _Run, _: object) -> _Parsed:
        """(1) parse: limits, the contract version the message names, then its schema."""
        document = parse_object(run.message, limits=self.limits)
        run.document = document
        named = document.get("contract")
        run.contract = _text(named)
        run.receipt_id = _text(document.get("id"))
        plan = self._plans.get(named) if type(named) is str else None
        if plan is None:  # the registry says why: no contract named, or an unknown one
            plan = self._plans[self.registry.for_document(document).id]
        run.fail_closed = plan.fail_closed
        check_schema(plan.contract, document)
        if isinstance(self.trust, KeyRing):  # the typed receipt comes from (2)
            return _Parsed(document, plan, None)
        return _Parsed(document, plan, Receipt.from_json(document, registry=self.registry,
                                                         limits=self.limits))

    def _proofs_step(self, run: _Run, parsed: _Parsed) -> _Verified:
        """(2) proofs: sender proof, grant, key validity, purpose, audience, time, replay."""
        now = self.clock()
        if now.tzinfo is None:
            raise InvalidArgument("the gate's clock returned a naive datetime", code="bad-clock")
        verified = None
        if isinstance(self.trust, KeyRing):
            # The one receipt verification; the parsed document carries what step (1)
            # learned of it (plain or not, the schema it passed under the gate's limits).
            verified = Receipt.verify(
                parsed.document, self.trust, now=now, registry=self.registry,
                audience=self.identity, require_grant=True, max_proof_age=parsed.plan.max_age,
            )
            receipt = verified.receipt
            run.sender = verified.signer.controller
        else:
            receipt = cast("Receipt[Any, Any]", parsed.unverified)
            check_addressed(receipt.receiver, receipt.valid_until, self.identity, now)
            run.sender = receipt.sender
        # ``_value_``: the member's value as a plain attribute (``.value`` is a property
        # whose getter runs Python code, once per read).
        run.authority = str(receipt.authority._value_)
        run.trigger = receipt.counterfactual_trigger
        run.proposal = str(receipt.proposed_action._value_)
        self._check_replay(receipt, now, run)
        return _Verified(parsed, receipt, verified, now)

    def _context_step(self, run: _Run, verified: _Verified) -> _InContext:
        """(3) context: the contract's declared receiver-context dependencies, each by
        the check its plan chose; every unmet one is reported, and the refusal rejects
        when one of them says so (``on_missing``), else escalates.
        """
        resolved: dict[str, ResolvedEvidence] = {}
        receipt, now = verified.receipt, verified.now
        failures: list[tuple[str, Reason]] = []
        for check, dependency in verified.parsed.plan.context:
            reason = check(self, dependency, receipt, now, resolved)
            if reason is not None:
                failures.append((dependency.on_missing.value, reason))
        if failures:
            reject = any(on == "REJECT" for on, _ in failures)
            raise Refusal(
                Verdict.REJECT if reject else Verdict.ESCALATE, tuple(r for _, r in failures)
            )
        return _InContext(verified, resolved)

    def _evidence_step(self, run: _Run, in_context: _InContext) -> _WithEvidence:
        """(4) evidence: resolve, verify digests, read decisive claims back."""
        if self.evidence is None:
            return _WithEvidence(in_context, None)
        verified = in_context.verified
        readback = run.readback = self._check_evidence(
            verified.receipt, verified.parsed.document, in_context.resolved, run)
        return _WithEvidence(in_context, readback)

    def _policy_step(self, run: _Run, admitted: _WithEvidence) -> None:
        """(5) policy: the receiver contract's rule over the admitted message."""
        in_context = admitted.in_context
        verified = in_context.verified
        ruling = run.rule(Admitted(
            document=verified.parsed.document, contract=verified.parsed.plan.contract,
            receipt=verified.receipt, verified=verified.verified,
            evidence=in_context.resolved, readback=admitted.readback,
        ))
        run.settle(ruling.verdict, ruling.action, ruling.reasons, ruling.record)

    # ---------------------------------------------------------------- step details

    def _policy_unmet(
        self,
        dependency: PolicyResolvable,
        receipt: Receipt[Any, Any],
        now: datetime,
        resolved: dict[str, ResolvedEvidence],
    ) -> Reason | None:
        """Why a ``PolicyResolvable`` dependency is not met, or ``None``."""
        context = Step.CONTEXT
        version = receipt.policy_version
        if dependency.version is not None and version != dependency.version:
            return Reason(
                "policy-version-mismatch",
                f"the contract pins policy {dependency.version!r}, the receipt names "
                f"{version!r}", context, "$.policy_version",
            )
        if self.policy_service is None:
            return Reason("policy-unresolvable", "this receiver has no policy service",
                          context, "$.policy_version")
        try:
            current = self.policy_service.resolve(version)
        except Exception as exc:
            return Reason("policy-unresolvable", f"the policy service failed: {exc}",
                          context, "$.policy_version")
        if current is None:
            return Reason("policy-unresolvable",
                          f"the policy service does not know {version!r}",
                          context, "$.policy_version")
        if current is not True:
            return Reason("policy-not-current", f"policy {version!r} is not current",
                          context, "$.policy_version")
        return None

    def _role_unmet(
        self,
        dependency: RoleHeld,
        receipt: Receipt[Any, Any],
        now: datetime,
        resolved: dict[str, ResolvedEvidence],
    ) -> Reason | None:
        """Why a ``RoleHeld`` dependency is not met, or ``None``."""
        if dependency.role in self.roles:
            return None
        return Reason("receiver-role-missing",
                      f"this receiver does not hold the role {dependency.role!r}",
                      Step.CONTEXT, "$.receiver")

    def _unsupported(
        self,
        dependency: Any,
        receipt: Receipt[Any, Any],
        now: datetime,
        resolved: dict[str, ResolvedEvidence],
    ) -> Reason | None:
        """A dependency of a kind this gate cannot check: always unmet."""
        return Reason("dependency-unsupported",
                      f"this gate cannot check the {dependency.kind!r} dependency",
                      Step.CONTEXT, "$")

    def _fresh(
        self,
        dependency: EvidenceFresh,
        receipt: Receipt[Any, Any],
        now: datetime,
        resolved: dict[str, ResolvedEvidence],
    ) -> Reason | None:
        matching = [
            (i, ref) for i, ref in enumerate(receipt.evidence_refs)
            if dependency.evidence in ref.uri
        ]
        if not matching:
            return Reason("evidence-missing",
                          f"no evidence reference names {dependency.evidence!r}",
                          Step.CONTEXT, "$.evidence_refs")
        for index, ref in matching:
            # The reason's JSON path is built only for a reason (not on the accept path).
            try:
                found = self._resolve(ref, resolved)
            except EvidenceError as exc:
                return Reason(exc.code, exc.message, Step.CONTEXT, f"$.evidence_refs[{index}]")
            if found.observed_at is None:
                return Reason("evidence-stale", f"{ref.uri} has no observation time",
                              Step.CONTEXT, f"$.evidence_refs[{index}]")
            age = now - found.observed_at
            if age > dependency.max_age or age < _PAST_SKEW:
                return Reason(
                    "evidence-stale",
                    f"{ref.uri} was observed at {format_time(found.observed_at)}; the "
                    f"contract accepts at most {dependency.max_age} before now "
                    f"({format_time(now)})",
                    Step.CONTEXT, f"$.evidence_refs[{index}]",
                )
        return None

    def _resolve(self, ref: EvidenceRef, resolved: dict[str, ResolvedEvidence]) -> ResolvedEvidence:
        found = resolved.get(ref.uri)
        if found is not None:
            return found
        if self.evidence is None:
            raise EvidenceError(f"this receiver has no evidence resolver for {ref.uri!r}")
        try:
            found = self.evidence.resolve(ref)
        except EvidenceError:
            raise
        except Exception as exc:
            raise EvidenceError(
                f"resolving {ref.uri!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(found, ResolvedEvidence):
            raise EvidenceError(f"the resolver returned {type(found).__name__} for {ref.uri!r}")
        resolved[ref.uri] = found
        return found

    def _check_evidence(
        self,
        receipt: Receipt[Any, Any],
        doc: Mapping[str, Any],
        resolved: dict[str, ResolvedEvidence],
        run: _Run,
    ) -> str | None:
        unresolved: list[Reason] = []
        tampered: list[Reason] = []
        for index, ref in enumerate(receipt.evidence_refs):
            try:
                found = self._resolve(ref, resolved)
            except EvidenceError as exc:
                unresolved.append(Reason(exc.code, exc.message, Step.EVIDENCE,
                                         f"$.evidence_refs[{index}]"))
                continue
            if ref.digest is not None and found.digest != ref.digest:
                tampered.append(Reason(
                    "evidence-digest-mismatch",
                    f"{ref.uri} has digest {found.digest}, the receipt pins {ref.digest}",
                    Step.EVIDENCE, f"$.evidence_refs[{index}].digest",
                ))
        if tampered:
            raise Refusal(Verdict.REJECT, tuple(tampered + unresolved))
        if unresolved:
            raise Refusal(Verdict.ESCALATE, tuple(unresolved))
        if not reads_back(self.readback, receipt.id):
            return None
        state = doc["decision_state"]
        compared = False
        disagreements: list[Reason] = []
        for ref in receipt.evidence_refs:
            claims = resolved[ref.uri].claims
            if not claims:
                continue
            for name, claimed in claims.items():
                if name not in state:
                    continue
                compared = True
                stated = state[name]
                if claimed is not stated and not _same(claimed, stated):
                    disagreements.append(Reason(
                        "readback-mismatch",
                        f"the receipt says {name} = {stated!r}, but {ref.uri} says "
                        f"{claimed!r}",
                        Step.EVIDENCE, f"$.decision_state.{name}",
                    ))
        if disagreements:
            run.readback = "disagree"
            raise Refusal(Verdict.REJECT, tuple(disagreements))
        return "agree" if compared else "no-claims"

    # --------------------------------------------------------------------- outcomes
    # --------------------------------------------------------------------- outcomes

    def _check_replay(self, receipt: Receipt[Any, Any], now: datetime, run: _Run) -> None:
        if self._joint:
            # Claimed by the log in one statement with the decision row, which also
            # detects a replay (no read before: one round trip per decision).
            run.claim = ReplayClaim(receipt_id=receipt.id, expires=receipt.valid_until,
                                    claimed_at=now)
        elif self.replay is not None and not self.replay.first_seen(
            receipt.id, expires=receipt.valid_until, now=now
        ):
            raise ReplayedReceipt(f"receipt {receipt.id} was seen before", json_path="$.id")

    def _append(
        self,
        decision: Decision,
        message: Any,
        document: Mapping[str, Any] | None,
        *,
        run: _Run,
    ) -> Decision:
        assert self.log is not None  # noqa: S101 - checked by the caller
        try:
            digest, size, raw = _digest(message, document)
            # A refusal claims nothing: only an admitted receipt's id is spent.
            claim = run.claim if decision.admitted else None
            proposal = run.proposal if decision.admitted else None
            if claim is not None and cast(ReplayLog, self.log).record(
                decision, claim=claim, digest=digest, message_bytes=size, message=raw,
                decided_at=self.clock(), proposed_action=proposal,
            ):
                return decision
            if claim is not None:
                # Another process claimed the id between step (2) and now: a replay.
                run.step, run.readback = Step.PROOFS, None
                decision = run.refused(Refusal.of(ReplayedReceipt(
                    f"receipt {claim.receipt_id} was seen before", json_path="$.id",
                ), Step.PROOFS))
            self.log.append(
                decision, digest=digest, message_bytes=size, message=raw,
                decided_at=self.clock(),
                proposed_action=run.proposal if decision.admitted else None,
            )
        except Exception as exc:
            code = exc.code if isinstance(exc, HandoffsError) else "log-unavailable"
            reason = Reason(code, f"the decision could not be logged: {exc}", decision.step)
            return attrs.evolve(
                decision, verdict=Verdict.REJECT, reasons=(*decision.reasons, reason),
                action=decision.action if decision.verdict is not Verdict.ACCEPT
                else self._fail_closed_for(decision),
            )
        return decision

    def _fail_closed_for(self, decision: Decision) -> str | None:
        if decision.contract is not None:
            try:
                return str(self.registry.by_id(decision.contract).fail_closed_action.value)
            except UnknownContract:
                pass
        return self._fail_closed


# An observation may lie at most the proofs' clock skew in the future (one skew for
# every "made after now" check); further ahead it is ``evidence-stale``.
_PAST_SKEW: Final = -CLOCK_SKEW

_PIPELINE: Final[Pipeline[Gate, _Run]] = Pipeline((
    Stage(Step.PARSE, "parse", Gate._parse_step),
    Stage(Step.PROOFS, "proofs", Gate._proofs_step),
    Stage(Step.CONTEXT, "context", Gate._context_step),
    Stage(Step.EVIDENCE, "evidence", Gate._evidence_step),
    Stage(Step.POLICY, "policy", Gate._policy_step),
), crash="internal-error")
"""The gate's five steps, run in order by the one engine."""
