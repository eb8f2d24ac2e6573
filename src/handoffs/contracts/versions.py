"""What changed between two versions of a contract, and whether the version says so.

:func:`diff` compares two contracts (schema, policy, governance) and returns a
:class:`ContractDiff` of :class:`Finding` s, each with its ``code`` (a string enum);
:func:`diff_policies` compares two policies alone. :class:`VersionBumpError` is a
change the new version number does not own up to.
"""

from handoffs.contracts._diff import (
    ContractDiff,
    Finding,
    VersionBumpError,
    diff,
    diff_policies,
)

__all__ = ["ContractDiff", "Finding", "VersionBumpError", "diff", "diff_policies"]
