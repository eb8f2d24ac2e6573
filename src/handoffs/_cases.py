"""Shared internal (not public): the record of a case drawn from a contract.

The lab's :class:`~handoffs.lab.GeneratedCases` yields it, and
:func:`handoffs.testing.cases` draws it with Hypothesis; its three attributes are what
the lab's default readers (``case_id``, ``state``, ``evidence_refs``) read.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

__all__ = ["ABSENT_RATE", "GeneratedCase"]

ABSENT_RATE: Final = 0.25
"""How often a realistic or population draw of an optional field is ``None`` (known not
to apply), unless a case distribution says otherwise."""


@attrs.frozen
class GeneratedCase:
    """A case drawn from a contract: an id, the true decision state and references."""

    case_id: str
    state: Any
    evidence_refs: tuple[str, ...]
