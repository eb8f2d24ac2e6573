"""handoffs: typed, signed, decision-sufficient messages between AI agents.

The package has three parts: :mod:`handoffs.contracts` (define, build, validate and
sign decision receipts), :mod:`handoffs.receivers` (the fail-closed runtime gate)
and :mod:`handoffs.lab` (ablate until the decision changes).
"""

from importlib.metadata import PackageNotFoundError, version

from handoffs._errors import HandoffsError, MissingExtra
from handoffs.contracts import Contract, Receipt
from handoffs.receivers import UnsafeConfigurationWarning

try:
    __version__ = version("handoffs")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "Contract",
    "HandoffsError",
    "MissingExtra",
    "Receipt",
    "UnsafeConfigurationWarning",
    "__version__",
]
