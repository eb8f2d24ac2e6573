"""Carried receipts: one stable decision receipt travelling with a signed handoff chain.

The essay's first sound pattern for multi-hop handoffs is that every hop carries the
same decision receipt, unchanged, and adds its own signed transformation. A *carried
receipt* message is a JSON object with two members::

    {"receipt": <the originator's signed decision receipt>,
     "chain":   <a handoff-chain/2.0.0 chain>}

- the receipt is signed by the agent that established the decisive state and is
  addressed to the final receiver: nobody on the way can change it without breaking
  its proof;
- the chain records who passed it on, in which role and with which note. Every hop
  pins the receipt it carried in its signed ``transformation`` (:func:`carry` writes
  the pin), so no hop can swap in a receipt of its own.

:class:`CarriedReceiptReceiver` decides such a message in the stages of the one
admission pipeline (:mod:`handoffs.receivers._pipeline`), numbered as
:class:`~handoffs.receivers.Step`:

(1) parse: limits, strict JSON, an object with object members ``receipt`` and
    ``chain`` (other members are not signed and are ignored);
(2) chain: the identity-composition receiver must accept the chain (proofs, roles
    held at signing time, lineage and the signed envelope, audience, validity, replay,
    authority, separation of duties); an escalation is passed on;
(2) binding: the receipt names the chain's case, was sent by the chain's first sender,
    and every hop pins exactly its digest;
(1)-(5) receipt: the receipt receiver (a gate that verifies proofs, with a receiver
    contract such as :class:`~handoffs.receivers.StrictContractReceiver`) admits and
    decides the receipt; the decision reports the receipt receiver's step.

The decision is the receipt receiver's: the final receiver recomputes from the
originator's decisive state, never from a relayed summary. Refusals carry the
``fail_closed_action``. The receiver never raises on a message.

Replay: the chain receiver claims the chain (``handoff-chain:<id>/<hops>``) in the
chain stage, the receipt gate the receipt's id in the receipt stage, each once. The
claims never collide, so both may share one store (and should: an outage of that
store then fails the message closed in the chain stage, before anything is claimed).
A message re-sent as is is a replayed chain (``$.chain.id``); the receipt re-carried
in a fresh chain is a replayed receipt (``$.receipt.id``) when the gate keeps a store.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from handoffs._errors import InvalidArgument
from handoffs._json import DEFAULT_LIMITS, JSONLimits, check_value, digest, loads
from handoffs._schemas import DIGEST, IDENT
from handoffs.receivers._decision import Decision, Reason, Receiver, Step, Verdict
from handoffs.receivers._pipeline import Pipeline, Refusal, Run, Stage
from handoffs.receivers.chains import IdentityCompositionReceiver

__all__ = ["CARRY_PIN", "CarriedReceiptReceiver", "carried_receipt", "carry", "receipt_pin"]

CARRY_PIN: Final = "carries receipt"
"""The words before the receipt digest in a hop's ``transformation`` (see :func:`carry`)."""

_PIN: Final = re.compile(re.escape(CARRY_PIN) + f" ({DIGEST.pattern})")
_IDENT: Final = IDENT


def receipt_pin(receipt: Mapping[str, Any]) -> str:
    """The pin of a receipt: its ``sha256:`` digest over the canonical (RFC 8785) form,
    proofs and grant included.
    """
    return digest(dict(receipt))


def carry(note: str, receipt: Mapping[str, Any]) -> str:
    """A hop ``transformation`` that says ``note`` and pins ``receipt``.

    Example: ``carry("forwarded unchanged", receipt)`` gives
    ``"forwarded unchanged [carries receipt sha256:…]"``.

    Raises:
        ValueError: ``InvalidArgument`` (also a TypeError), ``note`` already contains a receipt pin.
    """
    if _PIN.search(note):
        raise InvalidArgument("the note already pins a receipt")
    return f"{note} [{CARRY_PIN} {receipt_pin(receipt)}]"


def carried_receipt(receipt: Mapping[str, Any], chain: Mapping[str, Any]) -> dict[str, Any]:
    """The carried-receipt message for a signed ``receipt`` and its ``chain``
    (both in wire form, e.g. ``Receipt.to_json()`` and ``HandoffChain.to_json()``).
    """
    return {"receipt": dict(receipt), "chain": dict(chain)}


def _is_chain_receiver(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, IdentityCompositionReceiver):
        raise InvalidArgument(f"{attribute.name} must be an IdentityCompositionReceiver, got "
                        f"{type(value).__name__}")


def _is_receipt_receiver(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, Receiver):
        raise InvalidArgument(f"{attribute.name} must implement the Receiver protocol")
    gate = getattr(value, "gate", None)
    if gate is not None and getattr(gate, "verifies_proofs", True) is False:
        raise InvalidArgument(
            f"{attribute.name} does not verify proofs; a carried receipt is only as good as "
            "its proof (fail closed)")


def _is_action(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str) or not _IDENT.fullmatch(value):
        raise InvalidArgument(f"{attribute.name} must be an action identifier, got {value!r}")


def _nested(reasons: Sequence[Reason], member: str) -> tuple[Reason, ...]:
    return tuple(attrs.evolve(r, json_path=f"$.{member}" + r.json_path.removeprefix("$"))
                 for r in reasons)


@attrs.frozen(kw_only=True)
class CarriedReceiptReceiver:
    """The receiver contract for a stable receipt carried through a signed chain.

    Attributes:
        chain_receiver: checks the chain (its identity is the final receiver's).
        receipt_receiver: admits and decides the receipt; its gate must verify proofs.
        fail_closed_action: the action reported when the message is refused before the
            receipt is decided.
        name: the receiver's name in decisions.
        limits: size and depth limits for raw input.
    """

    chain_receiver: IdentityCompositionReceiver = attrs.field(validator=_is_chain_receiver)
    receipt_receiver: Receiver = attrs.field(validator=_is_receipt_receiver)
    fail_closed_action: str = attrs.field(validator=_is_action)
    name: str = "carried-receipt"
    limits: JSONLimits = DEFAULT_LIMITS

    def __attrs_post_init__(self) -> None:
        gate = getattr(self.receipt_receiver, "gate", None)
        identity = getattr(gate, "identity", None)
        if identity is not None and identity != self.chain_receiver.identity:
            raise InvalidArgument(f"the receipt gate is {identity!r} but the chain receiver is "
                             f"{self.chain_receiver.identity!r}; both must be this receiver")

    @staticmethod
    def message(receipt: Mapping[str, Any], chain: Mapping[str, Any]) -> dict[str, Any]:
        """The carried-receipt message for a signed ``receipt`` and its ``chain``
        (both in wire form, e.g. ``Receipt.to_json()`` and ``HandoffChain.to_json()``).
        """
        return carried_receipt(receipt, chain)

    @property
    def deterministic(self) -> bool:
        """True when both the chain receiver and the receipt receiver are (neither keeps
        a replay store).
        """
        return bool(self.receipt_receiver.deterministic and self.chain_receiver.deterministic)

    def receive(self, message: bytes | str | Mapping[str, Any]) -> Decision:
        """Decide one carried-receipt message; never raises."""
        run = _Run(message, self.name, self.fail_closed_action)
        return _PIPELINE.run(self, run)

    # ---------------------------------------------------------------- steps

    def _parse_step(self, run: _Run, _: object = None) -> None:
        """(1) parse: strict JSON within limits, then the two signed members."""
        message = run.message
        doc: Any = message  # anything but bytes, text or an object: carrier-invalid below
        if isinstance(message, bytes | bytearray | memoryview | str):
            doc = loads(message, limits=self.limits)
        elif isinstance(message, Mapping):
            check_value(message, limits=self.limits)
        if not isinstance(doc, Mapping):
            raise Refusal(Verdict.REJECT, (Reason(
                "carrier-invalid", "a carried receipt is a JSON object", Step.PARSE),))
        reasons = tuple(
            Reason("carrier-invalid", f"member {member!r} must be a JSON object",
                   Step.PARSE, f"$.{member}")
            for member in ("receipt", "chain") if not isinstance(doc.get(member), Mapping))
        if reasons:
            raise Refusal(Verdict.REJECT, reasons)
        run.receipt, run.chain = doc["receipt"], doc["chain"]

    def _chain_step(self, run: _Run, _: object = None) -> None:
        """(2) the chain, by the identity-composition receiver; an escalation is passed on."""
        decision = self.chain_receiver.receive(run.chain)
        if decision.verdict is not Verdict.ACCEPT:
            raise Refusal(decision.verdict, _nested(decision.reasons, "chain"),
                          record=decision.record, step=decision.step)
        run.chain_digest = decision.record.get("chain_digest")

    def _binding_step(self, run: _Run, _: object = None) -> None:
        """(2) binding: same case, the first sender's receipt, pinned by every hop."""
        receipt, chain = run.receipt, run.chain
        pin = run.pin = receipt_pin(receipt)
        hops = chain["hops"]  # the chain receiver accepted it: a non-empty list of objects
        reasons: list[Reason] = []
        if receipt.get("case_id") != chain.get("case_id"):
            reasons.append(Reason(
                "case-mismatch", f"the receipt is about {receipt.get('case_id')!r}, the chain "
                f"about {chain.get('case_id')!r}", Step.PROOFS, "$.receipt.case_id"))
        first = hops[0].get("sender")
        if receipt.get("sender") != first:
            reasons.append(Reason(
                "receipt-unattributed",
                f"the receipt was sent by {receipt.get('sender')!r}, but the chain starts with "
                f"{first!r}: the decisive state is no longer the originator's",
                Step.PROOFS, "$.receipt.sender"))
        for k, hop in enumerate(hops):
            pins = _PIN.findall(str(hop.get("transformation", "")))
            if pins != [pin]:
                found = ", ".join(pins) if pins else "no receipt"
                reasons.append(Reason(
                    "receipt-not-carried",
                    f"hop {k} pins {found}; the carried receipt is {pin}",
                    Step.PROOFS, f"$.chain.hops[{k}].transformation"))
        if reasons:
            raise Refusal(Verdict.REJECT, reasons)

    def _receipt_step(self, run: _Run, _: object = None) -> None:
        """Steps (1)-(5) of the receipt, by the receipt receiver; its decision is this one's."""
        decision = self.receipt_receiver.receive(run.receipt)
        record = {
            **decision.record,
            "receipt_digest": run.pin,
            "chain_digest": run.chain_digest,
            "carried_by": [hop.get("sender") for hop in run.chain["hops"]],
        }
        reasons = _nested(decision.reasons, "receipt")
        if decision.verdict is Verdict.REJECT:
            raise Refusal(Verdict.REJECT, reasons, record=record, step=decision.step)
        run.step = decision.step
        run.contract, run.receipt_id = decision.contract, decision.receipt_id
        run.sender, run.authority = decision.sender, decision.authority
        run.trigger, run.readback = decision.counterfactual_trigger, decision.readback
        run.settle(decision.verdict, decision.action, reasons, record)


class _Run(Run):
    """Per-message state of a carried-receipt decision."""

    __slots__ = ("chain", "chain_digest", "message", "pin", "receipt")
    # Each is set by the stage named beside it before a later stage reads it.
    receipt: Mapping[str, Any]  # parse
    chain: Mapping[str, Any]  # parse
    chain_digest: Any  # chain
    pin: str  # binding

    def __init__(self, message: bytes | str | Mapping[str, Any], receiver: str,
                 fail_closed: str) -> None:
        super().__init__(receiver, fail_closed)
        self.message = message


_PIPELINE: Final[Pipeline[CarriedReceiptReceiver, _Run]] = Pipeline((
    Stage(Step.PARSE, "parse", CarriedReceiptReceiver._parse_step),
    Stage(Step.PROOFS, "chain", CarriedReceiptReceiver._chain_step),
    Stage(Step.PROOFS, "binding", CarriedReceiptReceiver._binding_step),
    Stage(Step.POLICY, "receipt", CarriedReceiptReceiver._receipt_step),
), crash="receiver-error", crash_step=Step.PARSE)
"""The carried receipt's stages, run in order by the one engine."""
