"""T(S), the instance test on a receiver (lab anchors §5): given the message cut down
to the fields S, the receiver accepts and chooses the reference action (one receiver
call).

:func:`ddmin` is delta debugging (Zeller & Hildebrandt 2002) for a black-box receiver.
:func:`search_receiver` runs the instance tests of one state's search on a receiver
within its own budget (calls and tokens): a search that stops early says why
(:class:`SearchStop`) and claims no minimal message. R(S), sufficiency against the
reference policy, is :mod:`handoffs.lab._minimal`.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from handoffs._codes import TRANSIENT_CODES
from handoffs.receivers import Receiver, Verdict

__all__ = ["ReceiverSearch", "SearchStop", "ddmin", "search_receiver"]

T = TypeVar("T")


# -------------------------------------------------------------------------- ddmin


class _Budget(Exception):
    pass


class _Stopped(Exception):
    """The instance test refuses to run: the search's budget is spent, or a call failed."""

    def __init__(self, stop: SearchStop) -> None:
        super().__init__(stop.reason)
        self.stop = stop


def ddmin(units: Sequence[T], test: Callable[[Sequence[T]], bool], *,
          budget: int = 64) -> tuple[tuple[T, ...], int, bool]:
    """Delta debugging: a 1-minimal subset of ``units`` for which ``test`` holds.

    ``test`` is the black-box instance test (e.g. "the receiver, given only these
    fields, still chooses the reference action"). Subsets are tested once each.

    Returns:
        ``(subset, calls, complete)``: ``complete`` is false when ``budget`` calls
        ran out (the subset then still passes, but may not be 1-minimal) or when
        even the full set fails (the full set is returned).
    """
    calls = 0
    seen: dict[tuple[int, ...], bool] = {}
    index = {id(u): i for i, u in enumerate(units)}

    def check(subset: Sequence[T]) -> bool:
        nonlocal calls
        key = tuple(sorted(index[id(u)] for u in subset))
        if key in seen:
            return seen[key]
        if calls >= budget:
            raise _Budget
        calls += 1
        seen[key] = result = bool(test(subset))
        return result

    current = list(units)
    try:
        if not check(current):
            return tuple(current), calls, False
        if check([]):
            return (), calls, True
        granularity = 2
        while len(current) >= 2:
            size = math.ceil(len(current) / granularity)
            chunks = [current[i:i + size] for i in range(0, len(current), size)]
            for chunk in chunks:
                if check(chunk):
                    current, granularity = chunk, 2
                    break
            else:
                for chunk in chunks:
                    complement = [u for u in current if all(u is not c for c in chunk)]
                    if check(complement):
                        current, granularity = complement, max(granularity - 1, 2)
                        break
                else:
                    if granularity >= len(current):
                        break
                    granularity = min(len(current), granularity * 2)
    except (_Budget, _Stopped):
        return tuple(current), calls, False
    return tuple(current), calls, True


# ------------------------------------------------------- the search on a receiver


@attrs.frozen
class SearchStop:
    """Why a minimal-message search on a receiver stopped before it finished.

    Attributes:
        code: ``search-max-calls`` or ``search-max-tokens`` (the search's own budget
            is spent), or the reason code of the call that failed (``budget-exceeded``:
            the run's budget; ``model-error``, ``model-timeout``).
        reason: what happened, in words.
    """

    code: str
    reason: str


@attrs.frozen
class ReceiverSearch:
    """One state's minimal-message search on the confirming receiver.

    Attributes:
        confirmed: whether the receiver chose the reference action on the minimal
            message (``False`` when the search stopped before it could say).
        fields: the field set the receiver needs, found by delta debugging (1-minimal
            under the receiver), or ``None`` (not searched, or the search stopped).
        calls: receiver calls the search made.
        tokens: model tokens (in + out) of the answers it read, cached or not, so that
            a repeated run stops where the first did.
        stop: why it stopped early; ``None`` when it finished.
        max_calls / max_tokens: its budget (``None``: unbounded).
    """

    confirmed: bool
    fields: tuple[str, ...] | None
    calls: int
    tokens: int
    stop: SearchStop | None
    max_calls: int | None
    max_tokens: int | None

    @property
    def finished(self) -> bool:
        """Whether the search ran to its end (its result is a found minimal message)."""
        return self.stop is None

    def to_json(self) -> dict[str, Any]:
        """The report's ``search`` object of a region."""
        return {"finished": self.finished,
                "stopped_by": None if self.stop is None else self.stop.code,
                "reason": None if self.stop is None else self.stop.reason,
                "calls": self.calls, "tokens": self.tokens,
                "max_calls": self.max_calls, "max_tokens": self.max_tokens}


class _InstanceTest:
    """T(S) on a receiver, counted against one search's budget; raises :class:`_Stopped`
    instead of answering when the budget is spent or a call failed (an unanswered test
    is not a refusal).
    """

    def __init__(self, receiver: Receiver, example: Mapping[str, Any], action: str, *,
                 max_calls: int | None, max_tokens: int | None) -> None:
        self.receiver = receiver
        self.example = example
        self.action = action
        self.max_calls = max_calls
        self.max_tokens = max_tokens
        self.calls = 0
        self.tokens = 0
        self.stop: SearchStop | None = None

    def __call__(self, fields: Sequence[str]) -> bool:
        if self.stop is None and self.max_calls is not None and self.calls >= self.max_calls:
            self.stop = SearchStop("search-max-calls", f"the search's {self.max_calls} "
                                   "receiver call(s) are spent (max_calls)")
        if self.stop is None and self.max_tokens is not None and self.tokens >= self.max_tokens:
            self.stop = SearchStop("search-max-tokens", f"the search spent {self.tokens} "
                                   f"model token(s) of {self.max_tokens} (max_tokens)")
        if self.stop is not None:
            raise _Stopped(self.stop)
        message = dict(self.example)
        state = self.example.get("decision_state")
        if isinstance(state, Mapping):
            message["decision_state"] = {k: v for k, v in state.items() if k in fields}
        decision = self.receiver.receive(message)
        self.calls += 1
        record = decision.record
        for member in ("tokens_in", "tokens_out"):
            used = record.get(member, 0)
            if isinstance(used, int) and not isinstance(used, bool):
                self.tokens += used
        failed = [r for r in decision.reasons if r.code in TRANSIENT_CODES]
        if failed:
            self.stop = SearchStop(failed[0].code, f"a receiver call failed: {failed[0].message}")
            raise _Stopped(self.stop)
        return bool(decision.verdict is Verdict.ACCEPT and decision.action == self.action)


def search_receiver(receiver: Receiver, example: Mapping[str, Any], action: str,
                    names: Sequence[str], *, method: str, fields: Sequence[str],
                    max_calls: int | None = 64, max_tokens: int | None = None
                    ) -> ReceiverSearch:
    """Confirm (``method="region"``) or search (``"ddmin"``) one state's minimal
    message on ``receiver``, within ``max_calls`` receiver calls and ``max_tokens``
    model tokens.

    With ``"region"``, the receiver gets ``example`` cut down to ``fields`` (the
    region-minimal set); when it does not choose ``action``, delta debugging finds
    the set it needs. With ``"ddmin"``, delta debugging over ``names`` is the search,
    and the set it finds is confirmed once more. A test the budget or a failed call
    leaves unanswered stops the search (fail closed: it reports no minimal message and
    no confirmation), with :class:`SearchStop` saying why.
    """
    test = _InstanceTest(receiver, example, action, max_calls=max_calls,
                         max_tokens=max_tokens)
    confirmed = False
    found: tuple[str, ...] | None = None
    try:
        if method == "ddmin":
            subset, _, complete = ddmin(names, test, budget=sys.maxsize)
            if test.stop is None:  # complete, or even the full set is refused
                found = tuple(n for n in names if n in subset)
                confirmed = complete and test(found)
        else:
            confirmed = test(fields)
            if not confirmed:
                subset, _, _ = ddmin(names, test, budget=sys.maxsize)
                if test.stop is None:
                    found = tuple(n for n in names if n in subset)
    except _Stopped:
        confirmed, found = False, None
    if test.stop is not None:
        confirmed, found = False, None
    return ReceiverSearch(confirmed=confirmed, fields=found, calls=test.calls,
                          tokens=test.tokens, stop=test.stop, max_calls=max_calls,
                          max_tokens=max_tokens)
