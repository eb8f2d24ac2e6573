"""What changed between two versions of a contract, and whether the version says so.

:func:`diff` compares two contracts (schema, policy, governance) and returns a
:class:`ContractDiff` of :class:`Finding` s, each with its ``code`` (a string enum);
:meth:`ContractDiff.between_policies` compares two policy documents alone and
:meth:`ContractDiff.between_schemas` two receipt schemas (wire findings only). A
released version is locked: :func:`export_release` writes a contract version's schema
and policy document once, and :func:`lock_problems` says how the checked-in files differ
from the definition. :class:`VersionBumpError` is a change the new version number does
not own up to.
"""

from handoffs.contracts._diff import (
    Category,
    ContractDiff,
    Direction,
    Finding,
    FindingCode,
    VersionBumpError,
    diff,
)
from handoffs.contracts._lock import LockProblem, export_release, lock_problems

__all__ = [
    "Category",
    "ContractDiff",
    "Direction",
    "Finding",
    "FindingCode",
    "LockProblem",
    "VersionBumpError",
    "diff",
    "export_release",
    "lock_problems",
]
