"""The relay: the message passes through k hops, re-encoded and re-stamped at each."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import Any, Final

import attrs

from handoffs._errors import ExperimentError
from handoffs._json import canonical_bytes, loads
from handoffs._members import CONTENT_FIELDS, GOVERNANCE_FIELDS
from handoffs.contracts import Contract, Uncertainty
from handoffs.lab.perturbations._base import (
    CaseContext,
    Perturbation,
    Variant,
    _names,
    _state_of,
    _strategies_field,
    declare_perturbation,
)

__all__ = ["Relay"]


_RELAY_NAMESPACE: Final = uuid.UUID("3b0f5f4e-8f55-4d55-a3d5-2f0d0f9a4c21")


def _collapse(value: Any) -> Any:
    if isinstance(value, Mapping) and set(value) == {"lo", "hi"}:
        try:
            mid = (float(value["lo"]) + float(value["hi"])) / 2
        except (TypeError, ValueError):
            return value
        return {"lo": mid, "hi": mid}
    return value


def _relay_id(p: Relay) -> str:
    parts = [f"relay:{p.hops}", "drop=" + "+".join(p.drop) if p.drop else "",
             "soften" if p.soften_uncertainty else "", "collapse" if p.collapse_intervals else ""]
    return ":".join(part for part in parts if part)


def _relay_description(p: Relay) -> str:
    extra = [f"the first hop drops {', '.join(p.drop)}" if p.drop else "",
             "conflicts are softened to resolved" if p.soften_uncertainty else "",
             "intervals collapse to points" if p.collapse_intervals else ""]
    extra = [e for e in extra if e]
    tail = f"; {'; '.join(extra)}" if extra else ""
    return f"Relay through {p.hops} hop(s), re-encoded and re-stamped at each{tail}."


def _hops(_: Any, __: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ExperimentError(f"relay hops must be a positive integer, got {value!r}",
                              json_path="$.hops")


_NESTED: Final = "decision_state"
_ALWAYS_DROPPED: Final = ("proof", "grant")


def _drop_paths(_: Any, __: Any, value: tuple[str, ...]) -> None:
    """The shape of each drop path: ``member`` or ``decision_state.<field>``."""
    for index, path in enumerate(value):
        head, dot, rest = path.partition(".")
        if not head or (dot and (head != _NESTED or not rest or "." in rest)):
            raise ExperimentError(
                f"relay drop path {path!r} names no member: a drop path is a top-level "
                f"member or {_NESTED}.<field>", code="unknown-drop-path",
                json_path=f"$.drop[{index}]")
        if path in _ALWAYS_DROPPED:
            raise ExperimentError(
                f"relay drop path {path!r}: every hop drops {path} already (proofs and "
                f"grants do not survive re-encoding)", code="unknown-drop-path",
                json_path=f"$.drop[{index}]")


def _drop(message: dict[str, Any], path: str) -> None:
    """Remove the member ``path`` names from ``message`` (in place), if present."""
    head, dot, rest = path.partition(".")
    if not dot:
        message.pop(head, None)
        return
    state = message.get(head)
    if isinstance(state, Mapping) and rest in state:
        message[head] = {k: v for k, v in state.items() if k != rest}


@declare_perturbation(kind="boundary", id=_relay_id, description=_relay_description)
@attrs.frozen
class Relay(Perturbation):
    """Boundary: the message passes through ``hops`` relays, each re-encoding it.

    Every hop round-trips the message through canonical JSON and re-stamps
    ``sender`` as ``relay-<i>``; ``drop`` lists members the first hop discards
    (irrelevant to it, decisive downstream): a top-level member (``notes``) or a decision
    field as ``decision_state.<field>``; a path that names no member of the
    contract's receipts is an error when the relay is prepared (or loaded from TOML);
    ``soften_uncertainty`` turns CONFLICT
    into RESOLVED and ``collapse_intervals`` turns intervals into point estimates, at
    every hop. Each hop issues a new receipt id; proofs and grants do not survive
    re-encoding. Id ``relay:<hops>[:drop=a+b][:soften][:collapse]``.
    """

    hops: int = attrs.field(default=2, validator=_hops)
    drop: tuple[str, ...] = attrs.field(default=(), converter=_names, validator=_drop_paths)
    soften_uncertainty: bool = False
    collapse_intervals: bool = False
    strategies: tuple[str, ...] | None = _strategies_field()

    def prepare(self, contract: Contract[Any, Any], *, seed: int) -> Perturbation:
        """Check that every drop path names a member of ``contract``'s receipts.

        Raises:
            ExperimentError: ``unknown-drop-path`` at ``$.drop[i]``, with the member
                the path probably meant.
        """
        members = set(GOVERNANCE_FIELDS) | set(CONTENT_FIELDS) | {"id", "contract"}
        for index, path in enumerate(self.drop):
            head, dot, rest = path.partition(".")
            if dot and rest in contract.field_map:
                continue
            if not dot and head in members:
                continue
            hint = (f"; did you mean {_NESTED}.{head}?" if not dot and head in contract.field_map
                    else f"; decision fields: {sorted(contract.field_map)}" if dot
                    else f"; members: {sorted(members)}")
            raise ExperimentError(
                f"relay drop path {path!r} names no member of {contract.id} receipts{hint}",
                code="unknown-drop-path", json_path=f"$.drop[{index}]")
        return self

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """The message as the last hop forwards it."""
        current: dict[str, Any] = dict(message)
        for hop in range(1, self.hops + 1):
            current = loads(canonical_bytes(current))
            for member in ("proof", "grant"):
                current.pop(member, None)
            previous = current.get("id")
            if isinstance(previous, str):
                current["id"] = f"urn:uuid:{uuid.uuid5(_RELAY_NAMESPACE, f'{previous}/{hop}')}"
            if hop == 1:
                for path in self.drop:
                    _drop(current, path)
            if "sender" in current:
                current["sender"] = f"relay-{hop}"
            if self.soften_uncertainty and current.get("uncertainty") == Uncertainty.CONFLICT.value:
                current["uncertainty"] = Uncertainty.RESOLVED.value
            state = _state_of(current)
            if self.collapse_intervals and state is not None:
                current["decision_state"] = {k: _collapse(v) for k, v in state.items()}
        yield Variant(current)
