"""Command-line front ends of the gate: ``handoffs gate`` and ``handoffs log summary``.

``handoffs gate RECEIPT --trust TRUST --as RECEIVER [--log DB]`` runs the strict
contract receiver's gate on one receipt file (``-`` for standard input) and prints the
:class:`~handoffs.receivers.Decision` as JSON. Its exit status is one a shell can
trust (``handoffs gate r.json && act``):

* ``0`` (:data:`EXIT_ACT`): admitted (``ACCEPT``) and the receiver's own action is the
  proposed action (and, with ``--expect ACTION``, is ``ACTION``): the receiver may act
  on the proposal;
* ``1`` (:data:`EXIT_REFUSED`): refused (``REJECT``), nothing to act on;
* ``2``: the command could not run (an unreadable file, a bad trust file, bad usage);
* ``3`` (:data:`EXIT_NOT_AS_PROPOSED`): admitted, but not to be acted on as proposed:
  the gate escalated, or the receiver decided another action than the proposal (or
  than ``--expect``). Read ``action`` in the printed decision.

A file naming ``handoff-chain/…`` is decided by the identity-composition receiver with
the same exit codes (``handoffs.cli._chain``: 0 only for an accepted ``DECIDE``;
``--max-age`` and ``--require-current-roles`` apply to chains only).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import click

from handoffs._json import DEFAULT_LIMITS, dumps, loads
from handoffs._time import parse_time
from handoffs.cli._chain import chain_status, decide_chain, names_a_chain, now_clock, parse_age
from handoffs.cli._common import CommandError, one_line_errors, read_bounded
from handoffs.cli._contracts import cli_registry
from handoffs.integrity import KeyRing
from handoffs.receivers import (
    Decision,
    Gate,
    HTTPEvidenceResolver,
    InMemoryPolicyService,
    StrictContractReceiver,
    Verdict,
)

__all__ = ["EXIT_ACT", "EXIT_NOT_AS_PROPOSED", "EXIT_REFUSED", "gate", "log", "shell_status"]

EXIT_ACT: Final = 0
"""``handoffs gate``: admitted, and the receiver may act on the proposed action."""
EXIT_REFUSED: Final = 1
"""``handoffs gate``: refused (``REJECT``)."""
EXIT_NOT_AS_PROPOSED: Final = 3
"""``handoffs gate``: admitted, but escalated or decided another action than proposed."""


_read = read_bounded


def _keyring(path: str) -> KeyRing:
    raw = _read(path, "trust file", DEFAULT_LIMITS.max_bytes)
    with one_line_errors():
        return KeyRing.from_json(loads(raw))


def _routes(values: Sequence[str]) -> dict[str, str]:
    routes: dict[str, str] = {}
    for value in values:
        prefix, sep, base = value.partition("=")
        if not sep or not prefix or not base:
            raise CommandError(f"--evidence expects PREFIX=BASE_URL, got {value!r} [usage]")
        routes[prefix] = base
    return routes


def shell_status(decision: Decision, *, expect: str | None = None) -> int:
    """The exit status of ``handoffs gate`` for ``decision`` (see the module docs):
    :data:`EXIT_ACT` only when it was accepted, its action is the proposed action
    (``record["agrees_with_proposal"]`` is true) and, if ``expect`` is given, is
    ``expect``; :data:`EXIT_REFUSED` when refused; :data:`EXIT_NOT_AS_PROPOSED` else.
    """
    if not decision.admitted:
        return EXIT_REFUSED
    if (decision.verdict is Verdict.ACCEPT and decision.record.get("agrees_with_proposal") is True
            and (expect is None or decision.action == expect)):
        return EXIT_ACT
    return EXIT_NOT_AS_PROPOSED


@click.command("gate")
@click.argument("receipt", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--trust", "trust_path", required=True, type=click.Path(dir_okay=False),
              help="Trust file: the key ring JSON (keys, controllers, roles, validity).")
@click.option("--as", "identity", metavar="RECEIVER", envvar="HANDOFFS_IDENTITY",
              required=True,
              help="This receiver's identity; the receipt must be addressed to it "
                   "(or set HANDOFFS_IDENTITY). Required: the audience is always checked.")
@click.option("--log", "log_path", metavar="DB|URL",
              help="Decision log, also the replay store across runs and processes: a SQLite "
                   "file, or postgresql://… (extra postgres) shared by every replica.")
@click.option("--role", "roles", multiple=True, metavar="ROLE",
              help="A role this receiver holds, besides those the trust file gives it.")
@click.option("--policy", "policies", multiple=True, metavar="VERSION",
              help="A policy version the receiver's policy service holds current.")
@click.option("--evidence", "routes", multiple=True, metavar="PREFIX=URL",
              help="Resolve evidence URIs starting with PREFIX over HTTP(S) under URL.")
@click.option("--readback", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="Fraction of receipts whose decisive claims are read back (needs --evidence).")
@click.option("--now", "now_text", metavar="TIME",
              help="Decide as of this RFC 3339 UTC time (for audits); default: now.")
@click.option("--expect", metavar="ACTION",
              help="Exit 0 only when the decided action is also ACTION (e.g. RELEASE), so "
                   "that 'handoffs gate r.json --expect RELEASE && pay' never pays otherwise.")
@click.option("--max-age", "max_age", metavar="AGE",
              help="Chains: the oldest hop proof or approval accepted (30m, 24h, 7d; "
                   "default 24h).")
@click.option("--require-current-roles", is_flag=True,
              help="Chains: every signer and approver must also hold its role now.")
def gate(
    *,
    receipt: str,
    trust_path: str,
    identity: str,
    log_path: str | None,
    roles: tuple[str, ...],
    policies: tuple[str, ...],
    routes: tuple[str, ...],
    readback: float,
    now_text: str | None,
    expect: str | None,
    max_age: str | None,
    require_current_roles: bool,
) -> None:
    """Gate one RECEIPT: print the decision; exit 0 only if the receiver may act on the
    proposal.

    The decision is printed as JSON. Exit 0 only when admitted and the receiver's
    action is the proposed action (and --expect's), 1 when refused, 3 when admitted
    but escalated or decided otherwise than proposed, 2 when the command could not
    run.
    """
    from handoffs.service import open_store

    if readback > 0 and not routes:
        raise CommandError("--readback needs --evidence PREFIX=URL: claims are read back "
                           "from resolved evidence [usage]")
    raw = _read(receipt, "receipt", DEFAULT_LIMITS.max_bytes)
    keyring = _keyring(trust_path)
    if names_a_chain(raw):
        _gate_chain(raw, keyring, identity, log_path=log_path, now_text=now_text,
                    expect=expect, max_age=max_age, current=require_current_roles,
                    receipt_only=bool(roles or policies or routes or readback))
    if max_age is not None or require_current_roles:
        raise CommandError("--max-age and --require-current-roles apply to handoff chains "
                           "only [usage]")
    who = identity
    held = set(roles).union(*(entry.roles for entry in keyring.for_controller(who)))
    with one_line_errors():
        clock = None
        if now_text is not None:
            moment: datetime = parse_time(now_text, json_path="--now")
            clock = lambda: moment  # noqa: E731 - a fixed clock
        log = open_store(log_path) if log_path is not None else None
        options: dict[str, Any] = {}
        if log is not None:
            options.update(log=log, replay=log)
        if clock is not None:
            options["clock"] = clock
        if policies:
            options["policy_service"] = InMemoryPolicyService(dict.fromkeys(policies, True))
        if routes:
            options["evidence"] = HTTPEvidenceResolver(routes=_routes(routes))
        options["readback"] = readback
        the_gate = Gate(identity=who, trust=keyring, registry=cli_registry(), roles=held,
                        **options)
    try:
        decision = StrictContractReceiver(the_gate).receive(raw)
    finally:
        if log is not None:
            log.close()
    click.echo(dumps(decision.to_json(), indent=2))
    sys.exit(shell_status(decision, expect=expect))


def _gate_chain(raw: bytes, keyring: KeyRing, identity: str, *, log_path: str | None,
                now_text: str | None, expect: str | None, max_age: str | None,
                current: bool, receipt_only: bool) -> None:
    """``handoffs gate`` on a chain file: print the decision and exit (never returns)."""
    from handoffs.service import open_store

    if receipt_only:
        raise CommandError("--role, --policy, --evidence and --readback apply to receipts, "
                           "not to handoff chains [usage]")
    age = parse_age(max_age) if max_age is not None else None
    with one_line_errors():
        moment = None if now_text is None else parse_time(now_text, json_path="--now")
        log = open_store(log_path) if log_path is not None else None
    try:
        decision = decide_chain(raw, keyring, identity, clock=now_clock(moment),
                                replay=log, max_age=age, require_current_roles=current)
    finally:
        if log is not None:
            log.close()
    click.echo(dumps(decision.to_json(), indent=2))
    sys.exit(chain_status(decision, expect=expect))


@click.group("log")
def log() -> None:
    """Read a gate's decision log; watch it against a release."""


@log.command("summary")
@click.argument("db", type=click.Path(dir_okay=False))
def summary(db: str) -> None:
    """Print the boundary metrics and totals of decision log DB as JSON."""
    if "://" not in db and not Path(db).is_file():
        raise CommandError(f"no decision log at {db} [io]")
    from handoffs.service import open_store

    with one_line_errors():
        store = open_store(db)
        try:
            result = store.summary()
        finally:
            store.close()
    click.echo(dumps(result.to_json(), indent=2))


# ``handoffs log watch`` lives in its own module (which imports what it needs when run).
from handoffs.cli._watch import watch as _watch  # noqa: E402

log.add_command(_watch)
