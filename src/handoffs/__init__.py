"""handoffs: typed, signed, decision-sufficient messages between AI agents.

The package has three parts: :mod:`handoffs.contracts` (define, build, validate and
sign decision receipts), :mod:`handoffs.receivers` (the fail-closed runtime gate)
and :mod:`handoffs.lab` (ablate until the decision changes).

Importing ``handoffs`` alone loads none of them; the names below are resolved on
first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from handoffs._errors import HandoffsError, MissingExtra
from handoffs._version import __version__

if TYPE_CHECKING:
    from handoffs.contracts import Contract, Receipt
    from handoffs.receivers import UnsafeConfigurationWarning

__all__ = [
    "Contract",
    "HandoffsError",
    "MissingExtra",
    "Receipt",
    "UnsafeConfigurationWarning",
    "__version__",
]

_LAZY = {
    "Contract": "handoffs.contracts",
    "Receipt": "handoffs.contracts",
    "UnsafeConfigurationWarning": "handoffs.receivers",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module 'handoffs' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
