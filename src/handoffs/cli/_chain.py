"""``handoffs gate`` on a handoff chain: the identity-composition receiver from the shell.

``handoffs gate chain.json --trust TRUST --as RECEIVER`` reads a file that names
``handoff-chain/…`` with :class:`~handoffs.receivers.chains.IdentityCompositionReceiver`
(the same exit codes as receipts):

* ``0``: accepted with ``DECIDE`` authority (and, with ``--expect``, over that action):
  the receiver may execute the action;
* ``1``: refused (``REJECT``);
* ``3``: admitted but not to be executed: escalated (an approval is missing), or
  accepted as advice (the final hop is ``ADVISE``: ``record.advice`` holds it).

``--log`` is also the replay store (one execution per approval across runs and
processes); without it nothing is claimed, since one run decides one message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from handoffs._json import DEFAULT_LIMITS, loads
from handoffs.cli._common import CommandError
from handoffs.integrity import KeyRing
from handoffs.receivers import Decision, ReplayStore, Verdict

__all__ = ["chain_status", "decide_chain", "names_a_chain", "parse_age"]

_CHAIN_PREFIX: Final = "handoff-chain/"
_AGE: Final = re.compile(r"(\d+)([smhd])")
_UNITS: Final = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def names_a_chain(raw: bytes) -> bool:
    """Whether ``raw`` is a JSON object naming a ``handoff-chain/…`` contract (anything
    else, unreadable bytes included, goes to the receipt gate, which says why).
    """
    try:
        doc = loads(raw, limits=DEFAULT_LIMITS)
    except Exception:  # the receipt gate reports unreadable input
        return False
    named = doc.get("contract") if isinstance(doc, Mapping) else None
    return isinstance(named, str) and named.startswith(_CHAIN_PREFIX)


def parse_age(text: str) -> timedelta:
    """``--max-age``: a positive whole number of ``s``, ``m``, ``h`` or ``d`` (``24h``).

    Raises:
        CommandError: anything else, zero included (``[usage]``).
    """
    found = _AGE.fullmatch(text.strip())
    age = timedelta(**{_UNITS[found.group(2)]: int(found.group(1))}) if found else None
    if age is None or age <= timedelta(0):
        raise CommandError(f"--max-age expects a positive duration such as 30m, 24h or 7d, "
                           f"got {text!r} [usage]")
    return age


def decide_chain(
    raw: bytes,
    keyring: KeyRing,
    identity: str,
    *,
    clock: Any,
    replay: ReplayStore | None,
    max_age: timedelta | None,
    require_current_roles: bool,
) -> Decision:
    """Decide one chain file with the identity-composition receiver."""
    from handoffs.receivers.chains import IdentityCompositionReceiver

    options: dict[str, Any] = {"replay": replay, "single_instance": True,
                               "require_current_roles": require_current_roles}
    if max_age is not None:
        options["max_age"] = max_age
    return IdentityCompositionReceiver(keyring=keyring, identity=identity, clock=clock,
                                       **options).receive(raw)


def chain_status(decision: Decision, *, expect: str | None = None) -> int:
    """The exit status of ``handoffs gate`` for a chain decision (see the module docs)."""
    if not decision.admitted:
        return 1
    if (decision.verdict is Verdict.ACCEPT and decision.authority == "DECIDE"
            and decision.action is not None and (expect is None or decision.action == expect)):
        return 0
    return 3


def now_clock(moment: datetime | None) -> Any:
    """A fixed clock at ``moment``, or the system clock."""
    from handoffs._time import utc_now

    return utc_now if moment is None else (lambda: moment)
