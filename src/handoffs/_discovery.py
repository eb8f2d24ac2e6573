"""Contract discovery: ``MODULE:ATTR`` references to contracts, and where each came from.

The library never trusts a contract it was not given (every loader, verifier and gate
takes ``registry=``); the command line and the service build their registry here, the
way other tools find a user's code (``uvicorn module:app``, pytest plugins). Sources,
each a list of ``MODULE:ATTR`` references:

1. ``handoffs --contracts MODULE:ATTR`` (repeatable), else
2. the environment variable ``HANDOFFS_CONTRACTS`` (comma-separated), else
3. ``contracts = [...]`` under ``[tool.handoffs]`` in ``pyproject.toml`` in the
   working directory;

the first of those that names anything wins (a flag overrides the environment, which
overrides the project file). Installed packages add theirs through the entry-point
group ``handoffs.contracts`` (each entry point is a ``MODULE:ATTR`` reference),
always. ``ATTR`` may be a :class:`~handoffs.contracts.Contract`, a
:class:`~handoffs.contracts.Registry` or an iterable of contracts, and may be dotted
(``module:Class.attr``). Modules import from the working directory, which is put on
``sys.path`` as ``uvicorn`` does.

When nothing is configured, :func:`discover` finds no source (an empty
:class:`Discovered`); what to do then is the caller's choice (the command line uses
its shipped example, and says so).

A source that cannot be loaded is one line naming it: :class:`ContractSourceError`
(``bad-contract-source``); two sources defining the same ``name/version`` differently
are ``duplicate-contract``.
"""

from __future__ import annotations

import os
import pkgutil
import sys
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Final

import attrs

from handoffs._errors import ContractSourceError, UnknownContract
from handoffs.contracts import Contract, Registry

__all__ = [
    "ENTRY_POINT_GROUP",
    "ENV_VAR",
    "ContractSource",
    "Discovered",
    "discover",
    "load_source",
]

ENV_VAR: Final = "HANDOFFS_CONTRACTS"
"""The environment variable listing contract sources, comma-separated."""

ENTRY_POINT_GROUP: Final = "handoffs.contracts"
"""The entry-point group through which installed packages offer their contracts."""

FLAG: Final = "--contracts"
PYPROJECT: Final = "pyproject.toml [tool.handoffs] contracts"


@attrs.frozen
class ContractSource:
    """One ``MODULE:ATTR`` reference and the contracts it gave.

    Attributes:
        spec: the reference as written, e.g. ``"mymodule:MY_CONTRACT"``.
        origin: where it was configured: ``"--contracts"``, ``"HANDOFFS_CONTRACTS"``,
            ``"pyproject.toml [tool.handoffs] contracts"``, ``"entry point NAME
            (DISTRIBUTION)"``, or the caller's own label.
        contracts: the contracts it names, in order.
    """

    spec: str
    origin: str
    contracts: tuple[Contract[Any, Any], ...]


@attrs.frozen
class Discovered:
    """The contracts found, by source.

    Attributes:
        sources: every source, in the order they were read (none when nothing is
            configured).
        registry: all their contracts.
    """

    sources: tuple[ContractSource, ...]
    registry: Registry

    @classmethod
    def from_sources(cls, sources: Iterable[ContractSource]) -> Discovered:
        """The contracts of ``sources``, in order.

        Raises:
            UnknownContract: two sources define one ``name/version`` differently
                (``duplicate-contract``).
        """
        listed = tuple(sources)
        return cls(sources=listed, registry=_merge(listed))


def _fail(spec: str, origin: str, why: str) -> ContractSourceError:
    return ContractSourceError(f"contract source {spec!r} ({origin}): {why}",
                               json_path=origin if origin.startswith("--") else "$")


def load_source(spec: str, *, origin: str, cwd: Path | None = None) -> ContractSource:
    """Import ``spec`` (``MODULE:ATTR``) with ``cwd`` (default: the working directory)
    on ``sys.path``, and read its contracts.

    Raises:
        ContractSourceError: not ``MODULE:ATTR``, the module cannot be imported, it has
            no such attribute, or the attribute is no contract, registry or iterable
            of contracts.
    """
    module_name, sep, attribute = spec.strip().partition(":")
    if not sep or not module_name or not attribute:
        raise _fail(spec, origin, "expected MODULE:ATTR, e.g. mymodule:MY_CONTRACT")
    root = str((cwd or Path.cwd()).resolve())
    if root not in sys.path:
        sys.path.insert(0, root)
    try:
        value: Any = pkgutil.resolve_name(f"{module_name}:{attribute}")
    except AttributeError as exc:
        raise _fail(spec, origin, f"{module_name} has no attribute {attribute!r}") from exc
    except Exception as exc:  # the user's module may raise anything while importing
        raise _fail(spec, origin, f"cannot import {module_name!r}: "
                    f"{type(exc).__name__}: {exc}") from exc
    try:
        registry = Registry.coerce(value)
    except Exception as exc:
        raise _fail(spec, origin, f"{attribute} is a {type(value).__name__}, not a "
                    "Contract, a Registry or an iterable of contracts") from exc
    if len(registry) == 0:
        raise _fail(spec, origin, f"{attribute} holds no contract")
    return ContractSource(spec=spec.strip(), origin=origin, contracts=tuple(registry))


def _pyproject_specs(cwd: Path) -> list[str]:
    path = cwd / "pyproject.toml"
    if not path.is_file():
        return []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ContractSourceError(f"{path}: invalid TOML: {exc}") from exc
    table = data.get("tool", {}).get("handoffs", {})
    if not isinstance(table, Mapping) or "contracts" not in table:
        return []
    specs = table["contracts"]
    if not isinstance(specs, list) or not all(isinstance(s, str) for s in specs):
        raise ContractSourceError(f"{path}: [tool.handoffs] contracts must be a list of "
                                  "\"MODULE:ATTR\" strings")
    return list(specs)


def _split(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def discover(flags: Sequence[str] = (), *, environ: Mapping[str, str] | None = None,
             cwd: Path | None = None, plugins: bool = True) -> Discovered:
    """The contracts a command uses (see the module docs for the order of sources).

    Args:
        flags: the ``--contracts`` values.
        environ: the environment (default: ``os.environ``).
        cwd: the working directory (default: the current one).
        plugins: whether to read the ``handoffs.contracts`` entry points.

    Raises:
        ContractSourceError: a source cannot be loaded (the message names it).
        UnknownContract: two sources define one ``name/version`` differently
            (``duplicate-contract``).
    """
    environ = os.environ if environ is None else environ
    cwd = cwd or Path.cwd()
    configured: list[tuple[str, str]] = []
    for spec in flags:
        configured += [(item, FLAG) for item in _split(spec)]
    if not configured:
        configured = [(item, ENV_VAR) for item in _split(environ.get(ENV_VAR, ""))]
    if not configured:
        configured = [(item, PYPROJECT) for item in _pyproject_specs(cwd)]
    sources = [load_source(spec, origin=origin, cwd=cwd) for spec, origin in configured]
    if plugins:
        for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
            dist = point.dist.name if point.dist is not None else "unknown distribution"
            sources.append(load_source(point.value, origin=f"entry point {point.name} ({dist})",
                                       cwd=cwd))
    return Discovered.from_sources(sources)


def _merge(sources: Iterable[ContractSource]) -> Registry:
    registry = Registry()
    seen: dict[str, ContractSource] = {}
    for source in sources:
        for contract in source.contracts:
            first = seen.setdefault(contract.id, source)
            if first is not source and registry.contracts[contract.id] is not contract:
                raise UnknownContract(
                    f"{contract.id} is defined by {first.spec!r} ({first.origin}) and, "
                    f"differently, by {source.spec!r} ({source.origin})",
                    code="duplicate-contract")
            registry = registry.with_contracts((contract,))
    return registry
