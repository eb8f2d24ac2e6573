"""Which contracts a ``handoffs`` command uses, and where each came from.

The library never trusts a contract it was not given; the command line needs a
registry, and this module builds it. Every command reads it through
:func:`cli_registry`.
"""

from __future__ import annotations

import importlib
from typing import Any, Final

import attrs
import click

from handoffs._errors import InvalidArgument
from handoffs.contracts._contract import Contract
from handoffs.contracts._registry import Registry

__all__ = ["SHIPPED_EXAMPLES", "Discovered", "cli_registry", "discover"]

SHIPPED_EXAMPLES: Final = ("handoffs.examples.payment:PAYMENT_RELEASE",)
"""The shipped example contracts the command line knows, loaded by name."""


@attrs.frozen
class Discovered:
    """The registry a command uses and, per contract id, where it came from.

    Attributes:
        registry: every contract the command knows.
        origins: ``contract id -> source`` (e.g. ``"shipped example"``).
    """

    registry: Registry
    origins: dict[str, str] = attrs.field(factory=dict)


def _load(spec: str) -> Contract[Any, Any]:
    module_name, _, attribute = spec.partition(":")
    value: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        value = getattr(value, part)
    if not isinstance(value, Contract):  # pragma: no cover - the shipped names are contracts
        raise InvalidArgument(f"{spec} is not a Contract")
    return value


def discover() -> Discovered:
    """The contracts the command line uses: the shipped examples."""
    contracts = [_load(spec) for spec in SHIPPED_EXAMPLES]
    return Discovered(Registry.of(*contracts),
                      {c.id: "shipped example" for c in contracts})


def cli_registry() -> Registry:
    """The registry of the running ``handoffs`` command (discovered once per run)."""
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx is not None else None
    found = getattr(root.obj, "discovered", None) if root is not None else None
    if not isinstance(found, Discovered):
        found = discover()
        if root is not None and root.obj is not None and hasattr(root.obj, "discovered"):
            root.obj.discovered = found
    return found.registry
