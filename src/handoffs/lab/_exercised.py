"""Whether a perturbation exercised a receiver: the one statement.

A perturbed message *exercises* a strategy's receiver when it differs from the
unperturbed message in something the receiver reads or checks
(:func:`handoffs.receivers._reads.decision_reads`: a member or decision field read by
value, or the message's validity under the contract schema when the receiver checks
it), when the perturbation moves the reference action the decision is scored against,
or when the decision itself differs from the unperturbed one (then something read
differed, whatever the statement says). A row (strategy × perturbation) is exercised
when at least one of its cases is; a control always is. A row that is not reads "not
exercised" with the reason (what the perturbation changed, and why the receiver does
not read it) instead of figures that would read as a survival, and a gate over it
fails with that reason.

The chunk counts, per strategy × perturbation, the exercised cases and the members
changed in the others (with why each is not read); the aggregator adds them up
(:meth:`Tally.merge`) and :func:`row_exercised` writes each row's verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Final

from handoffs._memo import memo_value
from handoffs.lab.perturbations import Variant
from handoffs.receivers import Reads

__all__ = ["Tally", "row_exercised", "touched"]

_STATE: Final = "decision_state"
_ABSENT: Final = object()


def _same(a: Any, b: Any) -> bool:
    return a is b or (a == b and memo_value(a) == memo_value(b))


def _member_paths(name: str, before: Any, after: Any, out: set[str]) -> None:
    if _same(before, after):
        return
    if name == _STATE and isinstance(before, Mapping) and isinstance(after, Mapping):
        for field in before.keys() | after.keys():
            if not _same(before.get(field, _ABSENT), after.get(field, _ABSENT)):
                out.add(f"{_STATE}.{field}")
        return
    out.add(name)


def touched(base: Mapping[str, Any], variant: Variant) -> set[str]:
    """The paths (members, ``decision_state.<field>``) where ``variant``'s message
    differs from ``base`` (a patch compares its one member).
    """
    out: set[str] = set()
    if variant.patch is not None and variant.base is base:
        member, _ = variant.patch
        message = variant.message
        _member_paths(member, base.get(member, _ABSENT), message.get(member, _ABSENT), out)
        return out
    message = variant.message
    if message is base:
        return out
    for name in base.keys() | message.keys():
        _member_paths(name, base.get(name, _ABSENT), message.get(name, _ABSENT), out)
    return out


class Tally:
    """Per strategy × perturbation: the exercised cases, and the paths changed (but not
    read) in the cases that were not, with why each is not read. Its JSON form is a
    chunk record's ``exercised``: ``[[strategy, perturbation, exercised cases,
    {path: why not read}], ...]``.
    """

    __slots__ = ("cases", "last", "unread")

    def __init__(self) -> None:
        self.cases: dict[tuple[int, int], int] = {}
        self.last: dict[tuple[int, int], int] = {}
        self.unread: dict[tuple[int, int], dict[str, str]] = {}

    def note(self, at: tuple[int, int, int], reads: Reads,
             changed: Callable[[], Collection[str]], *,
             validity: bool, reference: bool, decision: bool) -> None:
        """One variant of case ``at[0]`` for strategy ``at[1]`` under perturbation
        ``at[2]``: ``changed()`` the paths changed (asked only when the rest does not
        settle it), ``validity`` changed, the ``reference`` moved, the ``decision``
        differs from the unperturbed one.
        """
        j, si, pi = at
        key = (si, pi)
        self.cases.setdefault(key, 0)
        if not (reference or decision or (validity and reads.schema)):
            paths = changed()
            if not any(reads.reads(p) for p in paths):
                unread = self.unread.setdefault(key, {})
                for path in paths:
                    if path not in unread and len(unread) < 64:
                        unread[path] = reads.why_not(path) or ""
                return
        if self.last.get(key) != j:
            self.last[key] = j
            self.cases[key] += 1

    def to_json(self) -> list[list[Any]]:
        """The chunk record's ``exercised``."""
        return [[si, pi, n, dict(sorted(self.unread.get((si, pi), {}).items()))]
                for (si, pi), n in sorted(self.cases.items())]

    def merge(self, rows: Sequence[Sequence[Any]]) -> None:
        """Add a chunk record's ``exercised``."""
        for si, pi, n, unread in rows:
            key = (int(si), int(pi))
            self.cases[key] = self.cases.get(key, 0) + int(n)
            mine = self.unread.setdefault(key, {})
            for path, why in unread.items():
                mine.setdefault(path, why)


def row_exercised(tally: Tally | None, si: int, pi: int, *, kind: str, receiver: str,
                  cases: int, scoring: str | None) -> tuple[bool | None, int | None,
                                                            str | None]:
    """A row's ``(exercised, exercised cases, reason when not)``; ``None`` where the
    run did not record it (a run log written before it was). ``scoring``: the name of
    the row's own loss matrix when it differs from the contract's.
    """
    if pi == 0 or kind == "control":
        return True, cases, None
    if tally is None:
        return None, None, None
    n = tally.cases.get((si, pi))
    if n is None:
        return None, None, None
    if n:
        return True, n, None
    unread = tally.unread.get((si, pi), {})
    if unread:
        parts = [f"{path} ({why})" if why else path for path, why in sorted(unread.items())]
        reason = (f"in none of its {cases} case(s) did the perturbation change anything "
                  f"{receiver} reads or checks: it changed {', '.join(parts)}")
    else:
        reason = (f"in none of its {cases} case(s) did the perturbation change the "
                  "message or the reference action")
    if scoring is not None:
        reason += (f"; only the scoring changed (loss matrix {scoring}), which "
                   f"{receiver} is not given: these are the unperturbed decisions "
                   "re-scored")
    return False, 0, reason
