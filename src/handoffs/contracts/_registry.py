"""Where contracts are looked up by the name and version a message names."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs

from handoffs._errors import ContractDefinitionError, UnknownContract
from handoffs.contracts._contract import Contract

__all__ = ["Registry"]


@attrs.frozen
class Registry:
    """An immutable set of contract versions, keyed by ``"<name>/<version>"``.

    Lookups never guess: an unknown name or version raises :class:`UnknownContract`,
    even when another version of the same contract is known.
    """

    contracts: Mapping[str, Contract[Any, Any]] = attrs.field(factory=dict)

    @classmethod
    def of(cls, *contracts: Contract[Any, Any]) -> Registry:
        """A registry holding exactly ``contracts``."""
        return cls().with_contracts(contracts)

    @classmethod
    def coerce(cls, value: Registry | Contract[Any, Any] | Iterable[Contract[Any, Any]], *,
               what: str = "registry") -> Registry:
        """``value`` as a :class:`Registry`: a registry itself, one contract, or an
        iterable of contracts (what every ``registry=`` argument accepts). Nothing else
        is accepted: there is no default registry.

        Raises:
            ContractDefinitionError: ``value`` is none of those (``not-a-registry``).
        """
        if isinstance(value, Registry):
            return value
        if isinstance(value, Contract):
            return cls.of(value)
        if not isinstance(value, str | bytes | Mapping) and isinstance(value, Iterable):
            contracts = tuple(value)
            if all(isinstance(c, Contract) for c in contracts):
                return cls.of(*contracts)
        raise ContractDefinitionError(
            f"{what} must be a Registry, a Contract or an iterable of contracts, "
            f"got {type(value).__name__}", code="not-a-registry")

    def with_contracts(self, contracts: Iterable[Contract[Any, Any]]) -> Registry:
        """A new registry that also holds ``contracts`` (a same-id redefinition is refused)."""
        merged = dict(self.contracts)
        for contract in contracts:
            known = merged.get(contract.id)
            if known is not None and known is not contract:
                raise UnknownContract(
                    f"{contract.id} is already registered with another definition",
                    code="duplicate-contract",
                )
            merged[contract.id] = contract
        return Registry(merged)

    def get(self, name: str, version: str) -> Contract[Any, Any]:
        """The contract ``name`` at exactly ``version``."""
        return self.by_id(f"{name}/{version}")

    def by_id(self, contract_id: str, *, json_path: str = "$") -> Contract[Any, Any]:
        """The contract for a ``"<name>/<version>"`` identifier."""
        try:
            return self.contracts[contract_id]
        except (KeyError, TypeError):
            name = contract_id.split("/", 1)[0] if isinstance(contract_id, str) else ""
            versions = self.versions(name)
            hint = f"; known versions: {', '.join(versions)}" if versions else ""
            raise UnknownContract(
                f"unknown contract {contract_id!r}{hint}", json_path=json_path
            ) from None

    def for_document(self, document: Mapping[str, Any]) -> Contract[Any, Any]:
        """The contract a document names in its ``contract`` member."""
        named = document.get("contract")
        if not isinstance(named, str):
            raise UnknownContract(
                "the message names no contract", code="no-contract", json_path="$.contract"
            )
        return self.by_id(named, json_path="$.contract")

    def versions(self, name: str) -> list[str]:
        """Known versions of ``name``, oldest first."""
        found = sorted((c for c in self.contracts.values() if c.name == name),
                       key=lambda c: c.version_key)
        return [c.version for c in found]

    def __iter__(self) -> Iterator[Contract[Any, Any]]:
        return iter(self.contracts.values())

    def __len__(self) -> int:
        return len(self.contracts)
