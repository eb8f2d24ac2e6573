"""Separation of duties: the pairs of roles one identity may not both hold in a chain."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

import attrs

from handoffs._errors import InvalidArgument
from handoffs.receivers.chains._contract import HopRole

__all__ = ["SeparationOfDuties"]


_DEFAULT_DISTINCT: Final = (
    (HopRole.PROPOSER, HopRole.APPROVER),
    (HopRole.PROPOSER, HopRole.EXECUTOR),
    (HopRole.APPROVER, HopRole.EXECUTOR),
    (HopRole.INVESTIGATOR, HopRole.APPROVER),
)


def _role_pairs(value: Iterable[Iterable[HopRole | str]]) -> frozenset[frozenset[HopRole]]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidArgument(f"distinct must be pairs of roles, got {value!r}")
    pairs: set[frozenset[HopRole]] = set()
    for item in value:
        if isinstance(item, str) or not isinstance(item, Iterable):
            raise InvalidArgument(f"each entry of distinct is a pair of roles, got {item!r}")
        roles = [HopRole(role) for role in item]
        if len(roles) != 2 or roles[0] is roles[1]:
            raise InvalidArgument(
                f"a separation-of-duties pair names two different roles: {item!r}"
            )
        pairs.add(frozenset(roles))
    if not pairs:
        raise InvalidArgument(
            "an empty separation-of-duties policy would allow any identity to hold every "
            "role; name the pairs that must differ (fail closed)"
        )
    return frozenset(pairs)


def _pair_key(pair: frozenset[HopRole]) -> tuple[int, ...]:
    return tuple(sorted(role.rank for role in pair))


@attrs.frozen(kw_only=True)
class SeparationOfDuties:
    """Pairs of roles that one identity may not both hold within a chain.

    Deny by default: proposer ≠ approver, proposer ≠ executor, approver ≠ executor and
    no investigator approves. A contract relaxes it explicitly with :meth:`allowing`;
    an empty policy is refused. Identities are the key ring's controllers, so one
    agent with two keys is still one identity. The receiving agent counts as the
    executor when the chain's final hop is DECIDE.

    Attributes:
        distinct: the role pairs (order-free) whose holders must differ.

    """

    distinct: frozenset[frozenset[HopRole]] = attrs.field(
        default=_DEFAULT_DISTINCT, converter=_role_pairs
    )

    def allowing(self, *pairs: tuple[HopRole | str, HopRole | str]) -> SeparationOfDuties:
        """Return a policy that lets one identity hold both roles of each given pair.

        Raises:
            ValueError: ``InvalidArgument`` (also a TypeError), a pair is not in this
                policy, or nothing would remain.

        """
        if not pairs:
            return self
        drop = _role_pairs(pairs)
        unknown = drop - self.distinct
        if unknown:
            names = sorted(sorted(role.value for role in pair) for pair in unknown)
            raise InvalidArgument(f"not in this policy: {names}")
        return SeparationOfDuties(distinct=self.distinct - drop)

    def violations(
        self, holders: Mapping[HopRole, Iterable[str]]
    ) -> tuple[tuple[HopRole, HopRole, str], ...]:
        """``(role, role, identity)`` for every identity holding both roles of a pair."""
        found: list[tuple[HopRole, HopRole, str]] = []
        for pair in sorted(self.distinct, key=_pair_key):
            first, second = sorted(pair, key=lambda role: role.rank)
            both = set(holders.get(first, ())) & set(holders.get(second, ()))
            found.extend((first, second, identity) for identity in sorted(both))
        return tuple(found)

    def to_json(self) -> list[list[str]]:
        """The pairs as sorted lists of role names, in a stable order."""
        return [
            [role.value for role in sorted(pair, key=lambda role: role.rank)]
            for pair in sorted(self.distinct, key=_pair_key)
        ]
