"""Shared internal (not public): the hashable stand-ins memo keys are made of.

A memo key holds each JSON value as :func:`memo_value`, equal exactly when the values
are equal and of the same types, and treats the members in :data:`PROJECTED` (the
per-case identifiers) apart. Used by ``handoffs.receivers`` (the gate's memo key in
``_memo``, the baseline governance checker's in ``_baselines``) and ``handoffs.lab``
(``_keys``: the run-wide memo keys of the receivers it calls), so that the receivers
and the lab build keys from one definition of "the same value".
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Final, cast

__all__ = ["PROJECTED", "memo_value"]

_FLAT: Final = frozenset({str, int, float, bool, type(None)})


class _Unique:
    """A key part equal only to itself (for values that cannot be compared safely)."""

    __slots__ = ()


def memo_value(value: Any) -> Hashable:  # noqa: PLR0911 - one return per JSON shape
    """A hashable stand-in for a JSON value, equal exactly when the values are equal
    *and* of the same types (``True``, ``1`` and ``1.0`` are different values here),
    with object members in order. Unhashable foreign values never compare equal.
    """
    kind = type(value)
    if kind is str:
        return cast(str, value)
    if kind is dict:
        types = tuple(map(type, value.values()))
        if _FLAT.issuperset(types):
            return (dict, tuple(value.items()), types)
        return (dict, tuple((k, memo_value(v)) for k, v in value.items()))
    if kind in _FLAT:
        return (kind, value)
    if kind is list or kind is tuple:
        types = tuple(map(type, value))
        if _FLAT.issuperset(types):
            return (kind, tuple(value), types)
        return (kind, tuple(memo_value(v) for v in value))
    if isinstance(value, Mapping):
        return (kind, tuple((k, memo_value(v)) for k, v in value.items()))
    try:
        hash(value)
    except TypeError:
        return _Unique()
    return (kind, value)



# The members of a receipt that carry per-case identifiers.
PROJECTED: Final = frozenset({"id", "case_id", "evidence_refs"})
