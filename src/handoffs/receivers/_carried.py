"""Carried receipts: one stable decision receipt travelling with a signed handoff chain.

The essay's first sound pattern for multi-hop handoffs is that every hop carries the
same decision receipt, unchanged, and adds its own signed transformation. A *carried
receipt* message is a JSON object with two members::

    {"receipt": <the originator's signed decision receipt>,
     "chain":   <a handoff-chain/1.0.0 chain>}

- the receipt is signed by the agent that established the decisive state and is
  addressed to the final receiver: nobody on the way can change it without breaking
  its proof;
- the chain records who passed it on, in which role and with which note. Every hop
  pins the receipt it carried in its signed ``transformation`` (:func:`carry` writes
  the pin), so no hop can swap in a receipt of its own.

:class:`CarriedReceiptReceiver` decides such a message in numbered steps:

(1) parse: limits, strict JSON, an object with object members ``receipt`` and
    ``chain`` (other members are not signed and are ignored);
(2) chain: the identity-composition receiver must accept the chain (proofs, roles
    held at signing time, lineage, audience, validity, authority, separation of
    duties); an escalation is passed on;
(3) binding: the receipt names the chain's case, was sent by the chain's first sender,
    and every hop pins exactly its digest;
(4) receipt: the receipt receiver (a gate that verifies proofs, with a receiver
    contract such as :class:`~handoffs.receivers.StrictContractReceiver`) admits and
    decides the receipt.

The decision is the receipt receiver's: the final receiver recomputes from the
originator's decisive state, never from a relayed summary. Refusals carry the
``fail_closed_action``. The receiver never raises on a message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from handoffs._errors import HandoffsError, InvalidArgument
from handoffs._json import DEFAULT_LIMITS, JSONLimits, check_value, digest, loads
from handoffs.receivers._decision import Decision, Reason, Receiver, Step, Verdict
from handoffs.receivers._identity import IdentityCompositionReceiver

__all__ = ["CARRY_PIN", "CarriedReceiptReceiver", "carried_receipt", "carry", "receipt_pin"]

CARRY_PIN: Final = "carries receipt"
"""The words before the receipt digest in a hop's ``transformation`` (see :func:`carry`)."""

_PIN: Final = re.compile(re.escape(CARRY_PIN) + r" (sha256:[0-9a-f]{64})")
_IDENT: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}")


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
        ValueError: ``note`` already contains a receipt pin.
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


class _Refused(Exception):
    def __init__(self, decision: Decision) -> None:
        super().__init__(decision.verdict.value)
        self.decision = decision


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

    @property
    def deterministic(self) -> bool:
        """True when the receipt receiver is (the chain receiver always is)."""
        return bool(self.receipt_receiver.deterministic and self.chain_receiver.deterministic)

    def receive(self, message: bytes | str | Mapping[str, Any]) -> Decision:
        """Decide one carried-receipt message; never raises."""
        try:
            receipt, chain = self._parse(message)  # (1)
            chain_decision = self._chain(chain)  # (2)
            pin = self._binding(receipt, chain)  # (3)
            return self._decide(receipt, chain, chain_decision, pin)  # (4)
        except _Refused as refused:
            return refused.decision
        except Exception as exc:  # fail closed: a bug must never admit a message
            return self._refuse(Verdict.REJECT, Step.PARSE, (Reason(
                "receiver-error", f"the receiver failed: {type(exc).__name__}: {exc}",
                Step.PARSE),)).decision

    # ---------------------------------------------------------------- steps

    def _parse(self, message: bytes | str | Mapping[str, Any]
               ) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
        # (1) parse: strict JSON within limits, then the two signed members.
        doc: Any = message  # anything but bytes, text or an object: carrier-invalid below
        try:
            if isinstance(message, bytes | bytearray | memoryview | str):
                doc = loads(message, limits=self.limits)
            elif isinstance(message, Mapping):
                check_value(message, limits=self.limits)
        except HandoffsError as exc:
            raise self._refuse(Verdict.REJECT, Step.PARSE, (Reason(
                exc.code, exc.message, Step.PARSE, exc.json_path),)) from exc
        if not isinstance(doc, Mapping):
            raise self._refuse(Verdict.REJECT, Step.PARSE, (Reason(
                "carrier-invalid", "a carried receipt is a JSON object", Step.PARSE),))
        reasons = tuple(
            Reason("carrier-invalid", f"member {member!r} must be a JSON object",
                   Step.PARSE, f"$.{member}")
            for member in ("receipt", "chain") if not isinstance(doc.get(member), Mapping))
        if reasons:
            raise self._refuse(Verdict.REJECT, Step.PARSE, reasons)
        return doc["receipt"], doc["chain"]

    def _chain(self, chain: Mapping[str, Any]) -> Decision:
        # (2) the chain, by the identity-composition receiver.
        decision = self.chain_receiver.receive(chain)
        if decision.verdict is not Verdict.ACCEPT:
            raise self._refuse(decision.verdict, decision.step,
                               _nested(decision.reasons, "chain"), record=decision.record)
        return decision

    def _binding(self, receipt: Mapping[str, Any], chain: Mapping[str, Any]) -> str:
        # (3) binding: same case, the first sender's receipt, pinned by every hop.
        pin = receipt_pin(receipt)
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
            raise self._refuse(Verdict.REJECT, Step.PROOFS, tuple(reasons))
        return pin

    def _decide(self, receipt: Mapping[str, Any], chain: Mapping[str, Any],
                chain_decision: Decision, pin: str) -> Decision:
        # (4) the receipt: admitted and decided by the receipt receiver.
        decision = self.receipt_receiver.receive(receipt)
        record = {
            **decision.record,
            "receipt_digest": pin,
            "chain_digest": chain_decision.record.get("chain_digest"),
            "carried_by": [hop.get("sender") for hop in chain["hops"]],
        }
        if decision.verdict is Verdict.REJECT:
            raise self._refuse(Verdict.REJECT, decision.step,
                               _nested(decision.reasons, "receipt"), record=record)
        return attrs.evolve(decision, receiver=self.name,
                            reasons=_nested(decision.reasons, "receipt"), record=record)

    def _refuse(self, verdict: Verdict, step: Step, reasons: tuple[Reason, ...], *,
                record: Mapping[str, Any] | None = None) -> _Refused:
        return _Refused(Decision(
            verdict=verdict, action=self.fail_closed_action, step=step, reasons=reasons,
            receiver=self.name, record=dict(record or {})))
