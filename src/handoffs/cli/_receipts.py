"""``handoffs sign``, ``grant`` and ``verify``: the sender's, the policy service's and an
auditor's commands on signed receipts.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import click

from handoffs._json import dumps
from handoffs._time import utc_now
from handoffs.cli._common import (
    comma_items,
    load_signer,
    read_object,
    time_option,
)
from handoffs.cli._contracts import cli_registry

__all__ = ["grant_command", "sign_command", "verify_command"]


@click.command("sign")
@click.argument("receipt", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--key", "key_path",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The sender's private key (PEM: Ed25519 or P-256).")
@click.option("--signer", "signer_spec", metavar="MODULE:ATTRIBUTE",
              help="Instead of --key: a Signer (or a callable returning one), e.g. a KMS "
                   "key through handoffs.integrity.CallableSigner.")
@click.option("--grant", "grant_path",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The policy service's signed authority grant (JSON).")
@click.option("--passphrase-env", metavar="VAR",
              help="Decrypt the PEM with the passphrase in environment variable VAR.")
@click.option("--created", metavar="RFC3339", callback=time_option,
              help="Proof creation time (default: now).")
def sign_command(*, receipt: str, key_path: Path | None, signer_spec: str | None,
                 grant_path: Path | None,
                 passphrase_env: str | None, created: datetime | None) -> None:
    """Sign RECEIPT (a JSON file, or - for stdin) and print the signed receipt."""
    from handoffs.contracts import Receipt

    key = load_signer(key_path, signer_spec, passphrase_env)
    registry = cli_registry()
    loaded = Receipt.from_json(read_object(receipt, what="receipt"), registry=registry)
    grant = read_object(grant_path, what="grant") if grant_path is not None else None
    signed = loaded.sign(key, grant=grant, created=created or utc_now().replace(microsecond=0),
                         contract=registry.by_id(loaded.contract))
    click.echo(dumps(signed.to_json(), indent=2))


@click.command("grant")
@click.option("--key", "key_path",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The policy service's private key (PEM, Ed25519 or P-256; its key-ring "
                   "entry needs the policy-service role and the capabilityDelegation "
                   "purpose).")
@click.option("--signer", "signer_spec", metavar="MODULE:ATTRIBUTE",
              help="Instead of --key: a Signer (or a callable returning one).")
@click.option("--issuer", required=True, help="Identity of the policy service.")
@click.option("--subject", required=True, help="The sender the grant is for.")
@click.option("--audience", required=True, help="The one receiver the sender may address.")
@click.option("--contract", "contract_id", required=True, metavar="NAME/VERSION",
              help="The contract version the grant covers, e.g. payment-release/1.0.0.")
@click.option("--case", "case_id", required=True, help="The case the grant covers.")
@click.option("--policy-version", required=True, help="The policy version in force.")
@click.option("--authority", default="ADVISE", show_default=True,
              help="Comma-separated authorities the sender may claim (ADVISE, DECIDE).")
@click.option("--roles", default="", help="Comma-separated roles the subject holds.")
@click.option("--valid-until", required=True, metavar="RFC3339", callback=time_option,
              help="No receipt under this grant may be valid later.")
@click.option("--passphrase-env", metavar="VAR",
              help="Decrypt the PEM with the passphrase in environment variable VAR.")
@click.option("--created", metavar="RFC3339", callback=time_option,
              help="Proof creation time (default: now).")
def grant_command(*, key_path: Path | None, signer_spec: str | None, issuer: str,
                  subject: str, audience: str,
                  contract_id: str, case_id: str, policy_version: str, authority: str,
                  roles: str, valid_until: datetime, passphrase_env: str | None,
                  created: datetime | None) -> None:
    """Issue a signed authority grant (what the policy service does) and print it."""
    from handoffs.contracts import Authority, issue_grant

    contract = cli_registry().by_id(contract_id, json_path="--contract")
    try:
        allowed = [Authority(item) for item in comma_items(authority)]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--authority") from exc
    key = load_signer(key_path, signer_spec, passphrase_env)
    document = issue_grant(
        key, issuer=issuer, subject=subject, audience=audience, contract=contract,
        case_id=case_id, policy_version=policy_version, authority=allowed,
        roles=comma_items(roles), valid_until=valid_until,
        created=created or utc_now().replace(microsecond=0),
    )
    click.echo(dumps(document, indent=2))


@click.command("verify")
@click.argument("receipt", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--trust", "trust_path", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The key ring (trust file) to verify against.")
@click.option("--as", "receiver", metavar="RECEIVER",
              help="Verify as this receiver: the receipt must be addressed to it.")
@click.option("--any-audience", is_flag=True,
              help="Do not check the audience (an auditor's or a relay's choice); "
                   "either this or --as is required.")
@click.option("--now", metavar="RFC3339", callback=time_option,
              help="Verification time (default: now).")
def verify_command(*, receipt: str, trust_path: Path, receiver: str | None,
                   any_audience: bool, now: datetime | None) -> None:
    """Verify a signed RECEIPT: exit 0 when valid, 1 with the reason when not.

    The checks of a gate's steps (2) and (3): proofs, grant, audience, expiry, and the
    policy the grant pins against the contract's (policy-mismatch,
    policy-fingerprint-missing). RECEIPT is read up to the parser's limit + 1 byte.
    """
    from handoffs.contracts import ANY_AUDIENCE, Receipt
    from handoffs.integrity import KeyRing

    if (receiver is None) == (not any_audience):
        raise click.UsageError("name the receiver with --as RECEIVER, or choose "
                               "--any-audience explicitly (exactly one of them)")
    ring = KeyRing.from_json(read_object(trust_path, what="trust file"))
    document = read_object(receipt, what="receipt")
    verified = Receipt.verify(document, ring, registry=cli_registry(), now=now or utc_now(),
                              audience=ANY_AUDIENCE if receiver is None else receiver)
    got = verified.receipt
    policy = ("policy pinned by the grant matches" if verified.policy_checked
              else "policy not checked: no authority grant pins it")
    click.echo(f"valid: {got.id} ({got.contract}) from {got.sender} to {got.receiver}, "
               f"signed by {verified.signer.controller}; {policy}")
