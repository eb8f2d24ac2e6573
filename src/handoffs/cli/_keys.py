"""``handoffs keys``: create signing keys and trust-file entries."""

from __future__ import annotations

import errno
from datetime import datetime
from pathlib import Path

import click

from handoffs._json import dumps
from handoffs._time import utc_now
from handoffs.cli._common import (
    comma_items,
    passphrase_from_env,
    read_object,
    time_option,
    write_new,
)

__all__ = ["keys"]


@click.group("keys")
def keys() -> None:
    """Create signing keys and trust-file entries."""


@keys.command("new")
@click.option("--controller", required=True, help="Identity of the agent holding the key.")
@click.option("--suite", type=click.Choice(["eddsa-jcs-2022", "ecdsa-jcs-2019"]),
              default="eddsa-jcs-2022", show_default=True,
              help="The key's cryptosuite: Ed25519 (eddsa-jcs-2022) or P-256 "
                   "(ecdsa-jcs-2019, the curve most KMSs and HSMs hold).")
@click.option("--roles", default="", help="Comma-separated roles, e.g. proposer,policy-service.")
@click.option("--purposes", default="assertionMethod", show_default=True,
              help="Comma-separated proof purposes; a policy service's grant key needs "
                   "capabilityDelegation.")
@click.option("--out", "prefix", type=click.Path(dir_okay=False, path_type=Path),
              help="Write PREFIX.pem and PREFIX.key.json (default: the controller name).")
@click.option("--trust", type=click.Path(dir_okay=False, path_type=Path),
              help="Also enrol the key in this trust file (created if missing).")
@click.option("--passphrase-env", metavar="VAR",
              help="Encrypt the PEM with the passphrase in environment variable VAR.")
@click.option("--not-before", metavar="RFC3339", callback=time_option,
              help="First instant the key may sign (default: now).")
def keys_new(*, controller: str, suite: str, roles: str, purposes: str, prefix: Path | None,
             trust: Path | None,
             passphrase_env: str | None, not_before: datetime | None) -> None:
    """Generate a key of --suite: a private PEM and its key-ring (trust file) entry."""
    from handoffs.integrity import KeyRing, P256SigningKey, SigningKey

    passphrase = passphrase_from_env(passphrase_env)
    key = P256SigningKey.generate() if suite == "ecdsa-jcs-2019" else SigningKey.generate()
    ring = KeyRing().enrol(key.public_key_multibase, controller=controller,
                           roles=comma_items(roles), purposes=comma_items(purposes),
                           not_before=not_before or utc_now().replace(microsecond=0))
    entry = ring.entries[0]
    if trust is not None:
        existing = (KeyRing.from_json(read_object(trust, what="trust file"))
                    if trust.exists() else KeyRing())
        updated = existing.with_key(entry)
    base = prefix if prefix is not None else Path(controller)
    pem_path = base.with_name(base.name + ".pem")
    entry_path = base.with_name(base.name + ".key.json")
    entry_text = dumps(entry.to_json(), indent=2) + "\n"
    for path in (pem_path, entry_path):
        if path.exists():  # check both before writing either: no half-made key pair
            raise FileExistsError(errno.EEXIST, "File exists", str(path))
    write_new(pem_path, key.to_pem(passphrase), private=True)
    write_new(entry_path, entry_text.encode("utf-8"))
    if trust is not None:
        trust.write_text(dumps(updated.to_json(), indent=2) + "\n", encoding="utf-8")
        click.echo(f"enrolled {entry.verification_method} in {trust}", err=True)
    click.echo(f"wrote {pem_path} (private, keep it secret) and {entry_path}", err=True)
    click.echo(entry_text, nl=False)
