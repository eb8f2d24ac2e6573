"""Messages as a chunk decides them: measured messages (what a decision's row needs
of them) and each receiver's slot with its memoisation interface. A message's memo keys
are computed lazily, once per receiver.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

from handoffs._json import canonical_size
from handoffs.lab._memo import declared, member_keyer, projector
from handoffs.lab._plan import _measure
from handoffs.lab.perturbations import Variant
from handoffs.receivers import Receiver
from handoffs.receivers.models import ModelReceiver

__all__ = ["Message", "Patched", "Slot", "drawn", "sampled"]


class Slot:
    """One receiver of the chunk, with its memoisation interface."""

    __slots__ = (
        "ahead",
        "checked",
        "deterministic",
        "index",
        "member",
        "members",
        "memoised",
        "project",
        "receiver",
        "sampled",
        "slow",
    )

    def __init__(self, index: int, receiver: Receiver, *, projection: bool = False) -> None:
        self.index = index
        self.receiver = receiver
        self.deterministic = bool(receiver.deterministic)
        # A receiver that says how many calls it may have in flight is slow (a model).
        self.slow = isinstance(getattr(receiver, "max_in_flight", None), int)
        # A sampled model receiver whose admission is deterministic is memoised per
        # draw: its decision of a message in epoch i is the ruling on the model's i-th
        # answer to the request, asked once per run (and kept by the call cache).
        self.sampled = sampled(receiver)
        self.memoised = self.deterministic or self.sampled
        # Its requests are produced by the scheduling pass, unless its admission keeps a
        # decision log (each receive writes a row: the whole decision goes to the pool).
        self.ahead = getattr(getattr(receiver, "gate", None), "log", None) is None
        # the memo key the lab derives (_keys); a user's `reads` only with projection on
        self.project: Callable[[Any], Hashable | None] | None
        self.project = projector(receiver, projection=projection)
        # when the key follows member by member: one member's contribution, and the
        # only members it reads (None: all); a patched message's key follows from its
        # base's (_Chunk._key)
        keyer = member_keyer(receiver, projection=projection)
        self.member: Callable[[str, Any], Hashable] | None = None
        self.members: frozenset[str] | None = None
        if keyer is not None:
            self.member, self.members = keyer
        # memo hits on a key that rests on a user's declaration are decided again now
        # and then (_Chunk._check)
        self.checked = projection and declared(receiver)


def sampled(receiver: Receiver) -> bool:
    """Whether ``receiver`` is a sampled model receiver memoised per draw (its answers
    differ from call to call, its admission's decisions do not).
    """
    return isinstance(receiver, ModelReceiver) and not receiver.deterministic \
        and bool(receiver.gate.deterministic)


def drawn(key: Hashable, sample: int) -> Hashable:
    """The memo key of draw ``sample`` of a message keyed ``key`` (draw 0: ``key``)."""
    return (key, sample) if sample else key


class Message:
    """A measured message: size, validity and (lazily) its memo keys."""

    __slots__ = ("canon", "governance", "keys", "message", "schema", "size", "sizes", "state",
                 "tokens")

    base: Message | None = None
    """The message a patched message (:class:`Patched`) differs from in one member."""

    def __init__(self, message: Mapping[str, Any], slots: int) -> None:
        self.message = message
        self.keys: list[Any] = [None] * slots
        self.canon: bytes | None = None
        self.size = 0
        self.tokens: int | None = None
        self.governance = False
        self.schema: bool | None = None
        self.sizes: dict[str, int] | None = None
        # whether the message carries a decision state object
        self.state = isinstance(message.get("decision_state"), Mapping)

    def member_size(self, name: str) -> int:
        """The canonical size of member ``name`` written as ``"name":value`` (RFC 8785
        writes an object's members one by one: :func:`~handoffs._json.canonical_size`),
        computed once per member: the patches of one base share it.
        """
        sizes = self.sizes
        if sizes is None:
            sizes = self.sizes = {}
        found = sizes.get(name)
        if found is None:
            found = sizes[name] = canonical_size({name: self.message[name]}) - 2
        return found

    def canonical(self, measure: Callable[[Mapping[str, Any]], tuple[bytes, int]] = _measure
                  ) -> bytes:
        """The canonical memo key (payload and envelope), computed once."""
        if self.canon is None:
            self.canon = measure(self.message)[0]
        return self.canon


class Patched(Message):
    """A message that differs from a measured ``base`` in one member (a patched
    :class:`~handoffs.lab.perturbations.Variant`), built only when read.
    """

    __slots__ = ("base", "variant")

    def __init__(self, variant: Variant, base: Message, slots: int) -> None:
        self.variant = variant
        self.base = base
        self.keys = [None] * slots
        self.canon = None
        self.size = 0
        self.tokens = None
        self.governance = False
        self.schema = None
        self.sizes = None
        name, value = self.patch
        self.state = isinstance(value, Mapping) if name == "decision_state" else base.state

    def __getattr__(self, name: str) -> Any:
        """``message``, built on first read (an unset slot lands here)."""
        if name != "message":
            raise AttributeError(name)
        message = self.message = self.variant.message
        return message

    @property
    def patch(self) -> tuple[str, Any]:
        """``(member, value)``; the value is ``REMOVED`` for a removal."""
        patch = self.variant.patch
        assert patch is not None  # noqa: S101 - a Patched is made of a patched variant
        return patch


