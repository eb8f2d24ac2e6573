"""What every adapter shares: one handoff from model content to the gate's decision.

A framework adapter calls :func:`hand_over` where its framework passes control from
one agent to the next, then routes on the :class:`Handover` it gets back: to the
receiving agent when the gate accepted the receipt, elsewhere (an escalation agent,
a node, an error) when it did not. The model's output is *content* only; the
governance members come from the signer's configuration, never from the model.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

import attrs

from handoffs._errors import HandoffsError, InvalidArgument, MalformedJSON, MissingExtra
from handoffs._json import dumps, loads
from handoffs._members import PROTECTED_MEMBERS
from handoffs._spans import SPAN_NAME, decision_attributes, decision_span
from handoffs.contracts import Contract
from handoffs.receivers import Decision, Reason, Receiver, Step, Verdict

__all__ = [
    "CONTINUE",
    "DECIDED_OTHERWISE",
    "OVERRULED",
    "REFUSE",
    "SPAN_NAME",
    "Case",
    "Handover",
    "ReceiptSigner",
    "Transport",
    "admit",
    "case_in",
    "case_of",
    "content_schema",
    "hand_over",
    "no_receipt",
    "overruled_mode",
    "receipt_text",
    "refusal_text",
    "refused",
    "require",
    "sign_content",
    "span_attributes",
    "traced",
]

PROTECTED_CONTENT: frozenset[str] = PROTECTED_MEMBERS
"""Members a model's content may never set (governance and envelope)."""

NOT_FOR_THE_MODEL: frozenset[str] = frozenset({"grant", "proof", "id", "contract"})
"""Members of an admitted receipt the next model is not shown: the grant and proof were
checked by the gate; :attr:`Handover.reference` names the receipt instead."""

DECIDED_OTHERWISE: str = "decided-otherwise"
"""The reason code of a handoff the gate admitted but decided otherwise than proposed
(another action, or an escalation): the CLI's exit 3, as a reason an adapter routes on."""

REFUSE: str = "refuse"
"""``on_overruled`` default: a ruling other than the proposal takes the framework's
refusal/escalation route, with the reason :data:`DECIDED_OTHERWISE`."""
CONTINUE: str = "continue"
"""``on_overruled``: the receiving agent runs on the gate's action, the proposal shown
overruled (an escalation still takes the escalation route)."""
OVERRULED: tuple[str, ...] = (REFUSE, CONTINUE)
"""The values of ``on_overruled``."""

SENDER: str = "sender"
"""The ``receiver`` name on a decision the sender side made (it refused to sign)."""

Transport = Callable[[bytes], bytes]
"""What carries the signed bytes from the sender to the gate: the identity in one
process; a queue, an outbox or an HTTP hop in a deployment (tests use it to tamper or
replay)."""


@runtime_checkable
class ReceiptSigner(Protocol):
    """Turns model-written content into signed receipt bytes (a
    :class:`handoffs.contracts.Sender`): governance is stamped from its configuration.
    """

    @property
    def contract(self) -> Contract[Any, Any]:
        """The contract version whose receipts it signs."""
        ...

    def sign(self, content: Mapping[str, Any], *, case_id: str,
             evidence_refs: Sequence[str]) -> bytes:
        """Signed receipt bytes for ``content``.

        Raises:
            HandoffsError: the content sets a governance member (``UntrustedGovernance``)
                or does not satisfy the contract (``ReceiptValidationError``).
        """
        ...


def _strings(values: Any) -> tuple[str, ...]:
    return tuple(str(value) for value in values)


@attrs.frozen
class Case:
    """The case a handoff is about, as the application (not the model) knows it.

    Attributes:
        case_id: the case identifier stamped on the receipt; it follows
            the receipt identifier rule (no spaces: ``"order-1842"``,
            not ``"order 1842"``) — :meth:`handoffs.contracts.Governance.case_id_from` makes one
            from any text. One that breaks the rule is a sender refusal
            (``invalid-case-id @ $.case_id``) naming the rule.
        evidence_refs: references to the authoritative evidence.
    """

    case_id: str
    evidence_refs: tuple[str, ...] = attrs.field(converter=_strings)


def case_of(context: Any) -> Case:
    """The :class:`Case` of a framework's context object: a :class:`Case`, or any object
    with ``case_id`` and ``evidence_refs`` attributes (or keys, for a mapping).

    Raises:
        ValueError: ``InvalidArgument`` (also a TypeError), the context names no case.
    """
    if isinstance(context, Case):
        return context
    if isinstance(context, Mapping):
        case_id, refs = context.get("case_id"), context.get("evidence_refs")
    else:
        case_id = getattr(context, "case_id", None)
        refs = getattr(context, "evidence_refs", None)
    if not isinstance(case_id, str) or refs is None:
        raise InvalidArgument(f"the context ({type(context).__name__}) names no case: give it "
                        "case_id and evidence_refs, or pass case_of=")
    return Case(case_id=case_id, evidence_refs=refs)


def case_in(context: Any, case: Callable[[Any], Case] = case_of) -> Case:
    """``case(context)``, with every failure as a :class:`~handoffs.HandoffsError`
    (code ``no-case``), so that an adapter can route it instead of raising it.

    Raises:
        HandoffsError: ``case`` raised, or returned something other than a :class:`Case`.
    """
    try:
        found = case(context)
    except HandoffsError as exc:
        raise HandoffsError(exc.message, code="no-case", json_path=exc.json_path) from exc
    except Exception as exc:
        raise HandoffsError(f"the case of the run could not be read: {type(exc).__name__}: "
                            f"{exc}", code="no-case") from exc
    if not isinstance(found, Case):
        raise HandoffsError(f"the case callable returned a {type(found).__name__}, not a Case",
                            code="no-case")
    return found


def overruled_mode(value: str) -> str:
    """``value`` if it is one of :data:`OVERRULED`.

    Raises:
        ValueError: ``InvalidArgument`` (also a TypeError), any other value.
    """
    if value not in OVERRULED:
        raise InvalidArgument(f"unknown on_overruled {value!r}; expected one of "
                              f"{list(OVERRULED)}")
    return value


@attrs.frozen
class Handover:
    """The outcome of one handoff: the decision, and what crossed.

    Four outcomes, as ``handoffs gate``'s exit status has them: the gate accepted the
    receipt and its action *is* the proposal (the receiving agent runs); it admitted the
    receipt but decided another action, or escalated (:attr:`overruled`: exit 3); it
    refused the receipt; or the sender refused to sign. An overruled handoff takes the
    refusal route with the reason :data:`DECIDED_OTHERWISE` unless ``on_overruled`` is
    :data:`CONTINUE`: then an accepted ruling reaches the receiving agent as the
    decision, the proposal marked overruled (an escalation is never continued).

    Attributes:
        decision: the gate's decision; when the sender refused to sign the model's
            content, a ``REJECT`` whose ``receiver`` is ``"sender"`` and whose reason
            says which member and why.
        message: the signed bytes the gate received (``None`` when nothing was signed).
        receipt: the admitted receipt document (only when the gate accepted it).
        proposal: the receipt's ``proposed_action`` when the gate admitted it.
        on_overruled: :data:`REFUSE` (default) or :data:`CONTINUE`.
    """

    decision: Decision
    message: bytes | None = None
    receipt: Mapping[str, Any] | None = None
    proposal: str | None = None
    on_overruled: str = attrs.field(default=REFUSE, converter=overruled_mode)

    @property
    def overruled(self) -> bool:
        """Whether the gate admitted the receipt but did not decide its proposal: another
        action, or an escalation.
        """
        if not self.decision.admitted or self.proposal is None:
            return False
        return (self.decision.verdict is Verdict.ESCALATE
                or self.decision.action != self.proposal)

    @property
    def accepted(self) -> bool:
        """Whether the receiving agent gets the receipt: the gate's verdict is ACCEPT and
        its action is the proposal (or, with ``on_overruled="continue"``, overrules it).
        """
        if self.decision.verdict is not Verdict.ACCEPT:
            return False
        return not self.overruled or self.on_overruled == CONTINUE

    @property
    def outcome(self) -> str:
        """``"accepted"``, ``"overruled"`` (accepted, the proposal overruled, continued),
        ``"decided-otherwise"`` (admitted, routed as a refusal) or ``"refused"``.
        """
        if self.accepted:
            return "overruled" if self.overruled else "accepted"
        return DECIDED_OTHERWISE if self.overruled else "refused"

    @property
    def reasons(self) -> tuple[Reason, ...]:
        """The reasons a refusal route carries: the gate's, led by
        :data:`DECIDED_OTHERWISE` for an overruled handoff that is not continued.
        """
        reasons = self.decision.reasons
        if self.overruled and not self.accepted:
            decision = self.decision
            ruled = ("escalated" if decision.verdict is Verdict.ESCALATE
                     else f"decided {decision.action}")
            reasons = (Reason(
                DECIDED_OTHERWISE,
                f"the gate admitted the receipt and {ruled}, not the proposed "
                f"{self.proposal}", decision.step, "$.proposed_action"), *reasons)
        return reasons

    @property
    def routed(self) -> Decision:
        """The decision as the route carries it: the gate's, with :attr:`reasons`."""
        return attrs.evolve(self.decision, reasons=self.reasons)

    @property
    def refused_by(self) -> str | None:
        """``"sender"`` or ``"gate"`` for a refused handoff, ``None`` when accepted."""
        if self.accepted:
            return None
        return SENDER if self.decision.receiver == SENDER else "gate"

    @property
    def ruling(self) -> dict[str, Any] | None:
        """What the receiving agent acts on when the handoff was admitted: the gate's
        ``action``, the ``proposed_action`` and whether the ruling ``overruled`` it;
        ``None`` unless admitted.
        """
        if not self.decision.admitted or self.proposal is None:
            return None
        return {"action": self.decision.action, "proposed_action": self.proposal,
                "overruled": self.overruled}

    @property
    def content(self) -> dict[str, Any] | None:
        """What the next model needs of an admitted receipt: its content and the stamped
        governance (case, sender, receiver, authority, validity), without the grant and
        proof the gate already checked; ``None`` unless accepted. When the ruling
        overrules the proposal, ``proposed_action`` is replaced by ``overruled_proposal``
        (the next model reads the ruling's action, never a bare proposal it contradicts).
        """
        if self.receipt is None or not self.accepted:
            return None
        content = {key: value for key, value in self.receipt.items()
                   if key not in NOT_FOR_THE_MODEL}
        if self.overruled and "proposed_action" in content:
            content["overruled_proposal"] = content.pop("proposed_action")
        return content

    @property
    def reference(self) -> dict[str, Any] | None:
        """A reference to the verified receipt: its ``id``, ``contract`` and the
        ``sha256:`` digest of the exact bytes the gate received; ``None`` unless accepted.
        """
        if self.receipt is None or self.message is None or not self.accepted:
            return None
        return {"id": self.receipt.get("id"), "contract": self.receipt.get("contract"),
                "digest": "sha256:" + hashlib.sha256(self.message).hexdigest()}

    def to_json(self) -> dict[str, Any]:
        """What the next agent reads: the outcome, the decision (with :attr:`reasons`),
        the :attr:`ruling` and, when accepted, the receipt's :attr:`content` and a
        :attr:`reference` to it (not its grant and proof).
        """
        return {
            "handoff": "accepted" if self.accepted else "refused",
            "outcome": self.outcome,
            "refused_by": self.refused_by,
            "decision": self.routed.to_json(),
            "ruling": self.ruling,
            "content": self.content,
            "receipt": self.reference,
        }

    def to_text(self) -> str:
        """:meth:`to_json` as compact JSON text (a tool output, a message)."""
        return dumps(self.to_json())


def refusal_text(handover: Handover) -> str:
    """One line for a refused handover: who refused, each reason (code, JSON path and
    message) and the fail-closed action, e.g. ``handoff refused by the gate:
    bad-signature @ $.proof: ...; action ESCALATE``.
    """
    decision = handover.decision
    return (f"handoff refused by the {handover.refused_by}: "
            + "; ".join(f"{r.code} @ {r.json_path}: {r.message}" for r in handover.reasons)
            + f"; action {decision.action}")


def _sender_refusal(contract: Contract[Any, Any], exc: HandoffsError) -> Decision:
    return Decision(
        verdict=Verdict.REJECT,
        action=contract.fail_closed_action.value,
        step=Step.PARSE,
        reasons=(Reason(code=exc.code, message=exc.message, step=Step.PARSE,
                        json_path=exc.json_path),),
        receiver=SENDER,
        contract=contract.id,
    )


def sign_content(content: Any, *, signer: ReceiptSigner, case: Case) -> bytes:
    """The sender side alone: parse the model's ``content`` and have ``signer`` stamp
    governance and sign it.

    Raises:
        HandoffsError: not a JSON object (``MalformedJSON``), a governance member set by
            the model (``UntrustedGovernance``), or content the contract refuses.
    """
    document = loads(content) if isinstance(content, str | bytes) else content
    if not isinstance(document, Mapping):
        raise MalformedJSON("the model's handoff content must be a JSON object",
                            code="not-an-object")
    return signer.sign(document, case_id=case.case_id, evidence_refs=case.evidence_refs)


def refused(contract: Contract[Any, Any], exc: HandoffsError, *,
            adapter: str = "") -> Handover:
    """The handover of content the sender refused to sign (see :func:`sign_content`)."""
    return traced(Handover(decision=_sender_refusal(contract, exc)), adapter=adapter)


def no_receipt(receiver: Receiver, why: str, json_path: str = "$") -> Decision:
    """The gate's refusal of a handoff that carries no receipt at all (code
    ``no-receipt``): every adapter names that condition so.
    """
    return Decision(verdict=Verdict.REJECT, action=None, step=Step.PARSE,
                    reasons=(Reason("no-receipt", why, Step.PARSE, json_path),),
                    receiver=receiver.name)


def receipt_text(text: str | None) -> str | None:
    """``text`` when it can be a receipt (JSON object text: it starts with ``{``), else
    ``None``: a prompt of plain words carries no receipt (``no-receipt``), while a
    broken object is the gate's to refuse (``invalid-json``, ...).
    """
    if text is None or not text.lstrip().startswith("{"):
        return None
    return text


def _proposal(document: Any) -> str | None:
    if not isinstance(document, Mapping):
        return None
    proposal = document.get("proposed_action")
    return proposal if isinstance(proposal, str) else None


def admit(message: bytes | str | Mapping[str, Any] | None, *, receiver: Receiver,
          overruled: str = REFUSE, adapter: str = "") -> Handover:
    """The receiver side alone: the gate decides ``message`` (bytes, text or a parsed
    JSON object; nothing or empty text is ``no-receipt``); never raises. The decision
    is one OpenTelemetry span (see :func:`traced`) around the gate.

    Args:
        message: what arrived.
        receiver: the receiving side's receiver contract behind its gate.
        overruled: what an admitted receipt whose proposal the gate overrules becomes
            (:data:`REFUSE` or :data:`CONTINUE`; see :class:`Handover`).
        adapter: the adapter's name, for the decision's span.
    """
    overruled = overruled_mode(overruled)
    with decision_span(adapter) as record:
        handover = _admit(message, receiver, overruled)
        record(handover.decision, lambda: _span_extra(handover))
    return handover


def _admit(message: bytes | str | Mapping[str, Any] | None, receiver: Receiver,
           overruled: str) -> Handover:
    if message is None or (isinstance(message, str | bytes) and not message.strip()):
        return Handover(decision=no_receipt(receiver, "the handoff carries no receipt"),
                        on_overruled=overruled)
    decision = receiver.receive(message)
    if not decision.admitted:
        data = message.encode() if isinstance(message, str) else message
        return Handover(decision=decision, on_overruled=overruled,
                        message=data if isinstance(data, bytes) else None)
    if isinstance(message, Mapping):
        # An admitted object is valid JSON: its compact text is what was decided.
        receipt, data = dict(message), dumps(message).encode()
    else:
        data = message.encode() if isinstance(message, str) else bytes(message)
        receipt = loads(data)
    accepted = decision.verdict is Verdict.ACCEPT
    return Handover(decision=decision, message=data, receipt=receipt if accepted else None,
                    proposal=_proposal(receipt), on_overruled=overruled)


def _span_extra(handover: Handover) -> dict[str, Any]:
    return {
        "handoffs.outcome": handover.outcome,
        "handoffs.refused_by": handover.refused_by,
        "handoffs.ruling.action": handover.decision.action if handover.ruling else None,
        "handoffs.ruling.proposed_action": handover.proposal,
        "handoffs.ruling.overruled": handover.overruled if handover.ruling else None,
        "handoffs.message_bytes": None if handover.message is None else len(handover.message),
        # The reasons the route carries (decided-otherwise first), as a string array.
        "handoffs.reasons": [reason.code for reason in handover.reasons],
    }


def span_attributes(handover: Handover, *, adapter: str) -> dict[str, Any]:
    """The attributes of ``handover``'s span (see :func:`traced`), for a framework's own
    tracing (the Agents SDK's custom span carries them as its data).
    """
    attributes: dict[str, Any] = {"handoffs.adapter": adapter,
                                  **decision_attributes(handover.decision)}
    attributes.update({key: value for key, value in _span_extra(handover).items()
                       if value is not None})
    return attributes


def traced(handover: Handover, *, adapter: str) -> Handover:
    """``handover``, after its decision is recorded as one OpenTelemetry span
    ``handoffs.gate``: a child of the current span (the framework's, when it traces with
    OpenTelemetry), with the attributes ``handoffs.adapter``, ``handoffs.verdict``,
    ``handoffs.step``, ``handoffs.action``, ``handoffs.reasons`` (a string array),
    ``handoffs.outcome``, ``handoffs.ruling.*`` and the decision's receiver, contract,
    receipt id and sender. Without the ``otel`` extra nothing is recorded.
    """
    with decision_span(adapter) as record:
        record(handover.decision, lambda: _span_extra(handover))
    return handover


def hand_over(
    content: Any,
    *,
    signer: ReceiptSigner,
    receiver: Receiver,
    case: Case,
    transport: Transport | None = None,
    overruled: str = REFUSE,
    adapter: str = "",
) -> Handover:
    """Sign model-written ``content`` for ``case``, carry it, and gate it.

    The steps: (a) ``content`` must be a JSON object (text is parsed with the gate's
    limits); (b) the signer stamps governance from its own configuration and signs — a
    model that wrote a governance member (``authority``, ``valid_until``, …) is refused
    here (``untrusted-governance``), so nothing it wrote can widen authority or extend
    validity; (c) ``transport`` carries the bytes; (d) the receiver's gate decides.
    Never raises on bad content: every refusal is a :class:`Handover` with reasons.
    ``overruled`` is what a ruling other than the proposal becomes (:data:`REFUSE` or
    :data:`CONTINUE`; see :class:`Handover`).
    """
    overruled = overruled_mode(overruled)
    try:
        message = sign_content(content, signer=signer, case=case)
    except HandoffsError as exc:
        return refused(signer.contract, exc, adapter=adapter)
    if transport is not None:
        message = transport(message)
    return admit(message, receiver=receiver, overruled=overruled, adapter=adapter)


def content_schema(contract: Contract[Any, Any]) -> dict[str, Any]:
    """The strict JSON Schema of what a model may write for ``contract`` (its semantic
    part only: no governance, grant, proof, id or contract member).
    """
    return contract.content_schema()


def require(module: str, *, extra: str, feature: str) -> ModuleType:
    """Import an adapter's framework, or raise :class:`~handoffs.MissingExtra`."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtra(feature, extra=extra, module=module) from exc
