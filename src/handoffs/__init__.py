"""handoffs: typed, signed, decision-sufficient messages between AI agents.

The package's faces, by audience:

- :mod:`handoffs.contracts` define, build, validate and sign decision receipts;
  :mod:`handoffs.contracts.policy` is the rule language and
  :mod:`handoffs.contracts.versions` what changed between two versions;
- :mod:`handoffs.integrity` keys, key rings, cryptosuites and signers;
- :mod:`handoffs.receivers` the fail-closed runtime gate;
- :mod:`handoffs.lab` ablate until the decision changes;
- :mod:`handoffs.testing` Hypothesis strategies for any contract.

Importing ``handoffs`` alone loads none of them. Here live only the root error every
other error derives from, the error for a missing extra, and the version.
"""

from handoffs._errors import HandoffsError, MissingExtra
from handoffs._moved import moved_from
from handoffs._version import __version__

__all__ = ["HandoffsError", "MissingExtra", "__version__"]

# A name that left this face since 0.1.0 raises an ImportError naming its new place.
__getattr__ = moved_from(__name__)
