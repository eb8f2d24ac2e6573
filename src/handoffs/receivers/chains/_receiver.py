"""The identity-composition receiver: the admission pipeline for handoff chains.

Its stages and their step numbers are described in :mod:`handoffs.receivers.chains`.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Final

import attrs

from handoffs._errors import HandoffsError, InvalidArgument, MalformedJSON, ProofError
from handoffs._json import DEFAULT_LIMITS, JSONLimits, canonical_bytes, check_value, digest, loads
from handoffs._logs import ReplayStoreError
from handoffs._time import expired, format_time, stale
from handoffs.contracts import Authority
from handoffs.integrity import KeyRing, VerifiedProof, verify
from handoffs.receivers._decision import Decision, Reason, Step, Verdict
from handoffs.receivers._gate import UnsafeConfigurationWarning
from handoffs.receivers._pipeline import Pipeline, Refusal, Run, Stage
from handoffs.receivers._replay import MemoryReplayStore, ReplayedReceipt, ReplayStore
from handoffs.receivers.chains._contract import (
    _CONTRACT_NAME,
    _MAX_WIRE_HOPS,
    HANDOFF_CHAIN_CONTRACT,
    HOP_PROOF_PURPOSE,
    HopRole,
    _check_contract_member,
)
from handoffs.receivers.chains._duties import SeparationOfDuties
from handoffs.receivers.chains._format import (
    HandoffChain,
    Hop,
    _check_ident,
    _check_optional_ident,
    _structure,
)
from handoffs.receivers.chains._schema import _schema_violations, _typed_violations

__all__ = ["DEFAULT_CHAIN_MAX_AGE", "IdentityCompositionReceiver"]


_DEFAULT_REQUIRED: Final = frozenset({HopRole.INVESTIGATOR, HopRole.PROPOSER, HopRole.APPROVER})
"""Every role the chain contract names a hop for; the executor of a DECIDE chain is the
receiving agent itself, so it is never missing."""

DEFAULT_CHAIN_MAX_AGE: Final = timedelta(hours=24)
"""The default bound on the age of every hop proof and approval of a chain (see
:attr:`IdentityCompositionReceiver.max_age`): one working day, the time a case takes
from investigation to approved execution when people approve; an approval older than
that is confirmed again rather than executed."""


def _check_max_age(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise InvalidArgument(
            f"max_age must be a positive timedelta, got {value!r}", json_path="$.max_age")


def _check_flag(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bool):
        raise InvalidArgument(f"{attribute.name} must be True or False, got {value!r}",
                              json_path=f"$.{attribute.name}")


def _required_roles(value: Iterable[HopRole | str]) -> frozenset[HopRole]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidArgument(f"required_roles must be a set of roles, got {value!r}")
    return frozenset(HopRole(role) for role in value)


def _check_keyring(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, KeyRing):
        raise InvalidArgument(f"keyring must be a KeyRing, got {type(value).__name__}")
    if len(value) == 0:
        raise ProofError(
            "the key ring is empty; nothing can verify (fail closed)", code="empty-trust-store"
        )


def _check_clock(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not callable(value):
        raise InvalidArgument(
            f"clock must be a callable returning an aware datetime, got {value!r}"
        )


def _check_max_hops(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_WIRE_HOPS:
        raise InvalidArgument(
            f"max_hops must be an integer in [1, {_MAX_WIRE_HOPS}], got {value!r}"
        )


def _check_sod(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, SeparationOfDuties):
        raise InvalidArgument(
            f"separation_of_duties must be a SeparationOfDuties, got {type(value).__name__}"
        )


def _check_limits(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, JSONLimits):
        raise InvalidArgument(f"limits must be JSONLimits, got {type(value).__name__}")


def _check_replay(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, ReplayStore):
        raise InvalidArgument(
            f"replay must implement ReplayStore or be None, got {type(value).__name__}"
        )


def _replay_claim(chain: HandoffChain) -> str:
    """The id under which a receiver claims ``chain`` in its replay store.

    ``handoff-chain:<id>/<number of hops>``: the signed envelope id, and the length,
    because each extension of a chain is a new message to a new receiver. The prefix
    keeps it apart from receipt ids in a store shared with a gate.
    """
    return f"{_CONTRACT_NAME}:{chain.id}/{len(chain.hops)}"


def _proposal_digest(item: _Verified) -> str:
    """The digest of an approved proposal hop with its proposer's proof only: the same
    for every approval of that proposal, whoever signs it and however often.
    """
    proofs = item.raw["proof"]
    primary = proofs if isinstance(proofs, Mapping) else proofs[0]
    return digest({**item.raw, "proof": primary})


def _execution_claims(verified: Sequence[_Verified], identity: str) -> tuple[str, ...]:
    """The claims that make one approval executable once (empty unless the chain asks
    its receiver to DECIDE over an approved proposal).

    ``handoff-chain:approval:<proposal>/<hops>`` refuses a fork (one approval
    extended to two receivers at the same length) and a second DECIDE hop for the
    same proposal; ``handoff-chain:approval:<proposal>@<receiver>`` refuses the same
    approval reaching one executor twice by different paths (directly and through
    an executor hop). The executor and the ledger after it each still act once.
    """
    if verified[-1].hop.authority is not Authority.DECIDE:
        return ()
    _, approved = _approvals(verified)
    if not approved:
        return ()
    proposal = _proposal_digest(next(iter(approved.values())))
    prefix = f"{_CONTRACT_NAME}:approval:{proposal}"
    return (f"{prefix}/{len(verified)}", f"{prefix}@{identity}")


def _once(reasons: Iterable[Reason]) -> list[Reason]:
    """Each reason code once, at its first place; later places join its message."""
    merged: dict[str, list[Reason]] = {}
    for reason in reasons:
        merged.setdefault(reason.code, []).append(reason)
    out: list[Reason] = []
    for group in merged.values():
        first = group[0]
        if len(group) == 1:
            out.append(first)
            continue
        more = "; ".join(f"{r.message} ({r.json_path})" for r in group[1:])
        out.append(attrs.evolve(first, message=f"{first.message}; also: {more}"))
    return out


@attrs.frozen
class _Verified:
    """One hop with its verified proofs: ``primary`` signed it, ``approvals`` chain to it."""

    index: int
    hop: Hop
    raw: Mapping[str, Any]
    primary: VerifiedProof
    approvals: tuple[VerifiedProof, ...]

    @property
    def path(self) -> str:
        return f"$.hops[{self.index}]"

    def proof_path(self, position: int) -> str:
        return f"{self.path}.proof" if isinstance(self.hop.proof, Mapping) else (
            f"{self.path}.proof[{position}]"
        )


@attrs.frozen(kw_only=True)
class IdentityCompositionReceiver:
    """The identity-composition receiver contract for ``handoff-chain/2.0.0``.

    It decides whether a multi-hop chain may be acted on, from the key ring alone:
    the chain is intact and ordered, every signer held its role when it signed,
    authority only narrowed, validity is the earliest expiry, and separation of
    duties holds. ACCEPT returns the final hop's action; REJECT and ESCALATE return
    ``fail_closed_action``. It never raises on a message.

    Attributes:
        keyring: the pinned trust store (must not be empty).
        identity: who this receiver is; the final hop must be addressed to it.
        clock: returns the current aware datetime, read once per message.
        separation_of_duties: which roles one identity may not combine.
        required_roles: roles the chain must contain. ``approver`` means an approval
            proof over the proposal; without one the chain is escalated.
        max_hops: the longest chain accepted (at most 32, the schema's bound).
        fail_closed_action: the action reported with REJECT and ESCALATE.
        limits: size and depth limits for raw input.
        replay: the replay store, as a :class:`~handoffs.receivers.Gate`'s (default: a
            fresh :class:`~handoffs.receivers.MemoryReplayStore`; share a SQLite or
            PostgreSQL store across processes); ``None`` disables replay protection
            (deterministic replays in the lab). A chain is claimed as
            ``handoff-chain:<id>/<number of hops>`` once step (2) has passed, until
            its earliest expiry; a DECIDE chain over an approved proposal also claims
            the approval (one execution per approval: a fork or a second DECIDE for
            the same proposal is ``replayed``).
        max_age: how old any hop proof or approval may be (``now - created``), even
            before it expires (``chain-stale``); by default
            :data:`~handoffs.receivers.chains.DEFAULT_CHAIN_MAX_AGE`, one day. Zero or
            negative is refused.
        require_current_roles: also require every signer and approver to hold its
            role *now*, by a key of the ring that is valid and not revoked at the
            receiver's clock, not only when it signed (``role-not-held``).
        single_instance: this receiver is the only one acting on these chains. Without
            it, a per-instance :class:`~handoffs.receivers.MemoryReplayStore` cannot stop
            a second instance from executing the same approval, so building the
            receiver warns (:class:`~handoffs.receivers.UnsafeConfigurationWarning`);
            share a SQLite or PostgreSQL store instead.

    ACCEPT of a chain whose final hop is ADVISE is advice, not an action: the decision's
    ``action`` is ``fail_closed_action`` and ``record["advice"]`` holds the final hop's
    action, so a caller that ignores ``authority`` executes nothing by mistake.

    """

    keyring: KeyRing = attrs.field(validator=_check_keyring)
    identity: str = attrs.field(validator=_check_ident)
    clock: Callable[[], datetime] = attrs.field(validator=_check_clock)
    separation_of_duties: SeparationOfDuties = attrs.field(
        factory=SeparationOfDuties, validator=_check_sod
    )
    required_roles: frozenset[HopRole] = attrs.field(
        default=_DEFAULT_REQUIRED, converter=_required_roles
    )
    max_hops: int = attrs.field(default=8, validator=_check_max_hops)
    fail_closed_action: str | None = attrs.field(default=None, validator=_check_optional_ident)
    limits: JSONLimits = attrs.field(default=DEFAULT_LIMITS, validator=_check_limits)
    replay: ReplayStore | None = attrs.field(factory=MemoryReplayStore, validator=_check_replay)
    max_age: timedelta = attrs.field(default=DEFAULT_CHAIN_MAX_AGE, validator=_check_max_age)
    require_current_roles: bool = attrs.field(default=False, validator=_check_flag)
    single_instance: bool = attrs.field(default=False, validator=_check_flag)

    def __attrs_post_init__(self) -> None:
        if isinstance(self.replay, MemoryReplayStore) and not self.single_instance:
            warnings.warn(
                f"chain receiver {self.identity!r} keeps its replay claims in memory: a "
                "second instance would execute the same approval again; share a SQLite or "
                "PostgreSQL replay store, or pass single_instance=True if this is the only "
                "one",
                UnsafeConfigurationWarning,
                stacklevel=3,
            )

    @property
    def name(self) -> str:
        """Stable name of the receiver contract: ``"identity-composition"``."""
        return "identity-composition"

    @property
    def deterministic(self) -> bool:
        """True without a replay store: the same message at the same clock reading then
        gets the same decision.
        """
        return self.replay is None

    def receive(self, message: bytes | str | Mapping[str, Any]) -> Decision:
        """Decide one handoff chain (raw bytes/text or a parsed JSON object)."""
        return _PIPELINE.run(self, _Run(message, self.name, self.fail_closed_action))

    # ---------------------------------------------------------------- stages

    def _clock(self, run: _Run, _: object = None) -> None:
        # (2) the clock, read once per message (before the message is read).
        now = self.clock()
        if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
            raise Refusal(Verdict.REJECT, [
                Reason("bad-clock", f"the clock returned {now!r}, not an aware datetime",
                       Step.PROOFS)
            ])
        run.now = now

    def _parse(self, run: _Run, _: object = None) -> None:
        # (1) limits and strict JSON; a parsed object is re-read under the same limits.
        message = run.message
        if isinstance(message, bytes | bytearray | memoryview | str):
            doc = loads(message, limits=self.limits)
        elif isinstance(message, Mapping):
            check_value(message, limits=self.limits)
            doc = loads(canonical_bytes(message), limits=self.limits)
        else:
            raise MalformedJSON(
                f"a message is bytes, text or a JSON object, got {type(message).__name__}",
                code="not-an-object",
            )
        if not isinstance(doc, Mapping):
            raise MalformedJSON("a handoff chain must be a JSON object", code="not-an-object")
        # (1) the contract the message names: unknown versions are never guessed.
        _check_contract_member(doc)
        run.contract = HANDOFF_CHAIN_CONTRACT
        run.receipt_id = doc.get("id") if isinstance(doc.get("id"), str) else None
        # (1) chain length, before the schema so that the reason is specific.
        hops = doc.get("hops")
        if isinstance(hops, list) and not hops:
            raise Refusal(Verdict.REJECT, [
                Reason("chain-empty", "the chain has no hops", Step.PARSE, "$.hops")
            ])
        if isinstance(hops, list) and len(hops) > self.max_hops:
            raise Refusal(Verdict.REJECT, [
                Reason("chain-too-long",
                       f"{len(hops)} hops exceed this receiver's limit of {self.max_hops}",
                       Step.PARSE, "$.hops")
            ])
        # (1) closed schema, then the typed model's exact checks.
        violations = _schema_violations(doc) or _typed_violations(doc)
        if violations:
            raise Refusal(Verdict.REJECT, [
                Reason("schema-invalid", v.message, Step.PARSE, v.json_path)
                for v in violations[:20]
            ])
        run.raw, run.chain = doc, _structure(doc)

    def _proofs(self, run: _Run, _: object = None) -> None:
        # (2) every proof of every hop against the pinned key ring.
        raw, chain, now = run.raw, run.chain, run.now
        reasons: list[Reason] = []
        results: list[tuple[VerifiedProof, ...]] = []
        for k, raw_hop in enumerate(raw["hops"]):
            try:
                results.append(verify(raw_hop, self.keyring, purpose=HOP_PROOF_PURPOSE, now=now))
            except HandoffsError as exc:
                reasons.append(_reason(exc, Step.PROOFS, base=f"$.hops[{k}]"))
        if reasons:
            raise Refusal(Verdict.REJECT, reasons)
        verified = [
            _Verified(k, hop, raw["hops"][k], proofs[0], proofs[1:])
            for k, (hop, proofs) in enumerate(zip(chain.hops, results, strict=True))
        ]
        # (2) the signer is the sender and held the claimed role when it signed.
        for item in verified:
            hop, primary = item.hop, item.primary
            if primary.controller != hop.sender:
                reasons.append(Reason(
                    "sender-mismatch",
                    f"hop {item.index} names sender {hop.sender!r}, but the key ring says its "
                    f"key belongs to {primary.controller!r}",
                    Step.PROOFS, f"{item.path}.sender"))
            if hop.role.value not in primary.roles:
                reasons.append(Reason(
                    "role-not-held",
                    f"{primary.controller!r} claims role {hop.role.value!r} on hop "
                    f"{item.index}, but its key held {sorted(primary.roles)} when it signed "
                    f"({format_time(primary.created)})",
                    Step.PROOFS, f"{item.path}.role"))
            for position, approval in enumerate(item.approvals, start=1):
                if HopRole.APPROVER.value not in approval.roles:
                    reasons.append(Reason(
                        "role-not-held",
                        f"{approval.controller!r} co-signed hop {item.index} as an approval, "
                        f"but its key held {sorted(approval.roles)} when it signed",
                        Step.PROOFS, f"{item.proof_path(position)}.verificationMethod"))
            if self.require_current_roles:
                reasons.extend(self._current_roles(item, now))
        if reasons:
            raise Refusal(Verdict.REJECT, _once(reasons))
        run.verified = verified

    def _current_roles(self, item: _Verified, now: datetime) -> list[Reason]:
        """Each signer of ``item`` still holds its role at ``now`` (by a live key)."""
        claims = [(item.primary.controller, item.hop.role.value, f"{item.path}.role")]
        claims.extend(
            (approval.controller, HopRole.APPROVER.value,
             f"{item.proof_path(position)}.verificationMethod")
            for position, approval in enumerate(item.approvals, start=1))
        reasons: list[Reason] = []
        for controller, role, where in claims:
            live = [entry for entry in self.keyring.for_controller(controller)
                    if entry.valid_at(now) and not entry.revoked(now)]
            if not any(role in entry.roles for entry in live):
                reasons.append(Reason(
                    "role-not-held",
                    f"{controller!r} held {role!r} when it signed hop {item.index}, but no "
                    f"key of the ring that is live at {format_time(now)} holds it now",
                    Step.PROOFS, where))
        return reasons

    def _lineage(self, run: _Run, _: object = None) -> None:
        chain, verified = run.chain, run.verified
        # (2) lineage: numbering and role order, case, digests, alignment, audience.
        reasons: list[Reason] = []
        seen: set[HopRole] = set()
        for item in verified:
            reasons.extend(_hop_lineage(item, chain, seen))
            if item.index:
                reasons.extend(_link_lineage(verified[item.index - 1], item))
            elif item.hop.derived_from is not None:
                reasons.append(Reason(
                    "chain-broken", "the first hop derives from a hop that is not in the chain",
                    Step.PROOFS, f"{item.path}.derived_from"))
        last = verified[-1]
        if last.hop.receiver != self.identity:
            reasons.append(Reason(
                "wrong-audience",
                f"the chain is addressed to {last.hop.receiver!r}, not to {self.identity!r}",
                Step.PROOFS, f"{last.path}.receiver"))
        if reasons:
            raise Refusal(Verdict.REJECT, _once(reasons))

    def _validity(self, run: _Run, _: object = None) -> None:
        # (2) validity: the earliest expiry in the chain, hop or proof, and freshness:
        # the oldest proof (hop or approval) is younger than max_age.
        verified, now = run.verified, run.now
        candidates: list[tuple[datetime, str]] = []
        made: list[tuple[datetime, str]] = []
        for item in verified:
            candidates.append((item.hop.valid_until, f"{item.path}.valid_until"))
            for position, proof in enumerate((item.primary, *item.approvals)):
                made.append((proof.created, f"{item.proof_path(position)}.created"))
                if proof.expires is not None:
                    candidates.append((proof.expires, f"{item.proof_path(position)}.expires"))
        earliest, where = min(candidates, key=lambda pair: pair[0])
        if expired(earliest, now):
            raise Refusal(Verdict.REJECT, [Reason(
                "chain-expired",
                f"the chain expired at {format_time(earliest)} (now {format_time(now)})",
                Step.PROOFS, where)])
        oldest, where = min(made, key=lambda pair: pair[0])
        if stale(oldest, self.max_age, now):
            raise Refusal(Verdict.REJECT, [Reason(
                "chain-stale",
                f"a proof of the chain was made at {format_time(oldest)}, {now - oldest} "
                f"before now ({format_time(now)}); this receiver accepts at most "
                f"{self.max_age}", Step.PROOFS, where)])
        run.validity = earliest

    def _replay(self, run: _Run, _: object = None) -> None:
        # (2) replay: claim the signed id (and length) until the earliest expiry.
        if self.replay is None:
            return
        claims = [(_replay_claim(run.chain), "$.id")]
        claims.extend((claim, "$.hops") for claim in
                      _execution_claims(run.verified, self.identity))
        for claim, where in claims:
            try:
                first = self.replay.first_seen(claim, expires=run.validity, now=run.now)
            except Exception as exc:  # any store failure fails closed, with the gate's code
                raise Refusal(Verdict.REJECT, [Reason(
                    ReplayStoreError.code, f"the replay store could not answer: {exc}",
                    Step.PROOFS)]) from exc
            if first is not True:
                what = ("chain" if where == "$.id"
                        else "the approval of this proposal, executed as")
                raise Refusal(Verdict.REJECT, [Reason(
                    ReplayedReceipt.code, f"{what} {claim} was seen before", Step.PROOFS,
                    where)])

    def _policy(self, run: _Run, _: object = None) -> None:
        # (5) policy: approvals, attenuation, separation of duties, required roles.
        verified, validity = run.verified, run.validity
        reasons, approved = _approvals(verified)
        reasons.extend(_attenuation(verified, approved))
        holders = self._holders(verified)
        for first, second, identity in self.separation_of_duties.violations(holders):
            # Point at the later of the two places where the identity acts.
            where = max(holders[first][identity], holders[second][identity], key=_path_order)
            reasons.append(Reason(
                "separation-of-duties",
                f"{identity!r} acts as both {first.value} and {second.value}", Step.POLICY,
                where))
        escalations: list[Reason] = []
        for role in sorted(self.required_roles, key=lambda r: r.rank):
            if role is HopRole.APPROVER and not approved:
                escalations.append(Reason(
                    "approval-missing",
                    "no approver's proof covers the proposal; refer it for approval",
                    Step.POLICY, "$.hops"))
            elif role is not HopRole.APPROVER and not holders[role]:
                reasons.append(Reason(
                    "role-missing", f"the chain has no {role.value}", Step.POLICY, "$.hops"))

        final = verified[-1]
        record = {
            "hops": len(verified),
            "effective_valid_until": format_time(validity),
            "roles": {role.value: sorted(holders[role]) for role in HopRole},
            "approved_action": next((item.hop.action for item in approved.values()), None),
            "chain_digest": digest(final.raw),
        }
        run.sender = final.hop.sender
        if reasons:
            raise Refusal(Verdict.REJECT, _once(reasons), record=record)
        run.authority = final.hop.authority.value
        verdict = Verdict.ESCALATE if escalations else Verdict.ACCEPT
        action = self.fail_closed_action
        if verdict is Verdict.ACCEPT and final.hop.authority is Authority.DECIDE:
            action = final.hop.action
        elif verdict is Verdict.ACCEPT:
            # Advice is not an action: the final hop's action is reported, not taken.
            record["advice"] = final.hop.action
        run.settle(verdict, action, tuple(_once(escalations)), record)

    def _holders(self, verified: Sequence[_Verified]) -> dict[HopRole, dict[str, str]]:
        """Role → identity → where it first acts so, from verified signers only."""
        holders: dict[HopRole, dict[str, str]] = {role: {} for role in HopRole}
        for item in verified:
            holders[item.hop.role].setdefault(item.primary.controller, f"{item.path}.sender")
            for position, approval in enumerate(item.approvals, start=1):
                holders[HopRole.APPROVER].setdefault(
                    approval.controller, f"{item.proof_path(position)}.verificationMethod")
        if verified[-1].hop.authority is Authority.DECIDE:
            holders[HopRole.EXECUTOR].setdefault(self.identity, f"{verified[-1].path}.receiver")
        return holders


class _Run(Run):
    """Per-message state of a chain decision, filled in stage by stage."""

    __slots__ = ("chain", "message", "now", "raw", "validity", "verified")
    # Each is set by the stage named beside it before a later stage reads it.
    now: datetime  # clock
    raw: Mapping[str, Any]  # parse
    chain: HandoffChain  # parse
    verified: list[_Verified]  # proofs and signers
    validity: datetime  # validity

    def __init__(self, message: bytes | str | Mapping[str, Any], receiver: str,
                 fail_closed: str | None) -> None:
        super().__init__(receiver, fail_closed)
        self.message = message

_PIPELINE: Final[Pipeline[IdentityCompositionReceiver, _Run]] = Pipeline((
    Stage(Step.PROOFS, "clock", IdentityCompositionReceiver._clock),
    Stage(Step.PARSE, "parse", IdentityCompositionReceiver._parse),
    Stage(Step.PROOFS, "proofs and signers", IdentityCompositionReceiver._proofs),
    Stage(Step.PROOFS, "lineage, envelope and audience", IdentityCompositionReceiver._lineage),
    Stage(Step.PROOFS, "validity", IdentityCompositionReceiver._validity),
    Stage(Step.PROOFS, "replay", IdentityCompositionReceiver._replay),
    Stage(Step.POLICY, "policy", IdentityCompositionReceiver._policy),
), crash="receiver-error", crash_step=Step.PARSE)
"""The chain receiver's stages, run in order by the one engine."""


def _path_order(path: str) -> tuple[int, ...]:
    """Sort key for JSON paths by the hop and proof indices they name."""
    return tuple(int(number) for number in re.findall(r"\[(\d+)\]", path))


def _reason(exc: HandoffsError, step: Step, *, base: str = "$") -> Reason:
    """A typed reason from a library error, its JSON path anchored under ``base``."""
    return Reason(exc.code, exc.message, step, base + exc.json_path.removeprefix("$"))


def _hop_lineage(item: _Verified, chain: HandoffChain, seen: set[HopRole]) -> list[Reason]:
    """Checks on one hop alone: its number, case, role repetition, approval dates."""
    reasons: list[Reason] = []
    hop, k = item.hop, item.index
    if hop.hop != k:
        reasons.append(Reason(
            "hop-order", f"hop number {hop.hop} at position {k}", Step.PROOFS, f"{item.path}.hop"))
    reasons.extend(_envelope_lineage(item, chain))
    if hop.role in seen and hop.role is not HopRole.INVESTIGATOR:
        reasons.append(Reason(
            "hop-order", f"a second {hop.role.value} hop at position {k}", Step.PROOFS,
            f"{item.path}.role"))
    seen.add(hop.role)
    reasons.extend(
        Reason("hop-order", f"the approval on hop {k} is dated before the proposal",
               Step.PROOFS, f"{item.proof_path(position)}.created")
        for position, approval in enumerate(item.approvals, start=1)
        if approval.created < item.primary.created
    )
    return reasons


def _envelope_lineage(item: _Verified, chain: HandoffChain) -> list[Reason]:
    """The envelope's ``id`` and ``case_id`` are the ones this hop signed."""
    reasons: list[Reason] = []
    hop, k = item.hop, item.index
    if hop.chain_id != chain.id:
        reasons.append(Reason(
            "chain-id-mismatch",
            f"hop {k} was signed for chain {hop.chain_id!r}, the envelope says {chain.id!r}",
            Step.PROOFS, f"{item.path}.chain_id"))
    if hop.case_id != chain.case_id:
        reasons.append(Reason(
            "case-mismatch",
            f"hop {k} is about case {hop.case_id!r}, the chain about {chain.case_id!r}",
            Step.PROOFS, f"{item.path}.case_id"))
    return reasons


def _link_lineage(parent: _Verified, item: _Verified) -> list[Reason]:
    """Checks on the link from ``parent`` to ``item``: order, digest, alignment."""
    reasons: list[Reason] = []
    hop, k = item.hop, item.index
    if hop.role.rank < parent.hop.role.rank:
        reasons.append(Reason(
            "hop-order",
            f"a {hop.role.value} hop follows a {parent.hop.role.value} hop at position {k}",
            Step.PROOFS, f"{item.path}.role"))
    latest = max(p.created for p in (parent.primary, *parent.approvals))
    if item.primary.created < latest:
        reasons.append(Reason(
            "hop-order", f"hop {k} is dated before its parent's proofs", Step.PROOFS,
            f"{item.proof_path(0)}.created"))
    expected = digest(parent.raw)
    if hop.derived_from is None or hop.derived_from.digest != expected:
        got = None if hop.derived_from is None else hop.derived_from.digest
        reasons.append(Reason(
            "chain-broken",
            f"hop {k} derives from {got!r}, but hop {k - 1} has digest {expected!r}",
            Step.PROOFS, f"{item.path}.derived_from"))
    if parent.hop.receiver != hop.sender:
        reasons.append(Reason(
            "chain-misaligned",
            f"hop {k - 1} is addressed to {parent.hop.receiver!r}, but hop {k} is sent by "
            f"{hop.sender!r}", Step.PROOFS, f"{item.path}.sender"))
    return reasons


def _approvals(verified: Sequence[_Verified]) -> tuple[list[Reason], dict[int, _Verified]]:
    """Approvals that chain to the proposer's proof on the proposal hop, and misfits."""
    reasons: list[Reason] = []
    approved: dict[int, _Verified] = {}
    for item in verified:
        for position, approval in enumerate(item.approvals, start=1):
            where = f"{item.proof_path(position)}.previousProof"
            if item.hop.role is not HopRole.PROPOSER:
                reasons.append(Reason(
                    "approval-not-exact",
                    f"hop {item.index} is a {item.hop.role.value} hop; only the proposal can "
                    "be approved", Step.POLICY, where))
            elif item.primary.proof_id is None or approval.previous_proof != (
                item.primary.proof_id,
            ):
                reasons.append(Reason(
                    "approval-not-exact",
                    f"the approval on hop {item.index} does not chain to the proposer's proof, "
                    "so it does not cover the exact proposal", Step.POLICY, where))
            else:
                approved[item.index] = item
    return reasons, approved


def _attenuation(
    verified: Sequence[_Verified], approved: Mapping[int, _Verified]
) -> list[Reason]:
    """Authority only narrows, DECIDE only over the approved action, validity never grows."""
    reasons: list[Reason] = []
    ceiling = Authority.ADVISE
    approved_action: str | None = None
    for item in verified:
        hop = item.hop
        held = hop.authority
        if hop.authority is Authority.DECIDE and ceiling is Authority.ADVISE:
            # Every DECIDE that no approval covers is reported; none widens the next.
            held = Authority.ADVISE
            reasons.append(Reason(
                "authority-widened",
                f"hop {item.index} claims DECIDE, but no approval of the proposal grants it at "
                "this point of the chain", Step.POLICY, f"{item.path}.authority"))
        elif hop.authority is Authority.DECIDE and hop.action != approved_action:
            reasons.append(Reason(
                "approval-not-exact",
                f"hop {item.index} decides {hop.action!r}, but the approval covers "
                f"{approved_action!r}", Step.POLICY, f"{item.path}.action"))
        if item.index in approved:
            ceiling, approved_action = Authority.DECIDE, hop.action
        else:
            ceiling = held
        parent = verified[item.index - 1].hop if item.index else None
        if parent is not None and hop.valid_until > parent.valid_until:
            reasons.append(Reason(
                "validity-extended",
                f"hop {item.index} is valid until {format_time(hop.valid_until)}, later than "
                f"its parent ({format_time(parent.valid_until)})",
                Step.POLICY, f"{item.path}.valid_until"))
    return reasons
