"""The findings of a contract diff: codes, directions, categories and the version-bump rule
(internal; see ``versions``). The :class:`ContractDiff` that holds and renders them lives
above the differs, in ``_contract_diff``.
"""

from __future__ import annotations

import enum
import re
from typing import Any, Final, Literal

import attrs

from handoffs._errors import VersionBumpError
from handoffs._schemas import SEMVER

Bump = Literal["major", "minor", "patch", "none"]
"""The smallest semantic-version bump a set of findings requires."""

_RANK: Final[dict[str, int]] = {"none": 0, "patch": 1, "minor": 2, "major": 3}
_SEMVER: Final = SEMVER
_SCHEMA_ID: Final = re.compile(r"urn:handoffs:schema:([^:]+):([^:]+)")


class FindingCode(enum.StrEnum):
    """Stable identifiers of diff findings (compare equal to their string names)."""

    CONTRACT_RENAMED = "CONTRACT_RENAMED"
    FIELD_ADDED_REQUIRED = "FIELD_ADDED_REQUIRED"
    FIELD_ADDED_OPTIONAL = "FIELD_ADDED_OPTIONAL"
    FIELD_REMOVED = "FIELD_REMOVED"
    FIELD_NOW_REQUIRED = "FIELD_NOW_REQUIRED"
    FIELD_NOW_OPTIONAL = "FIELD_NOW_OPTIONAL"
    FIELD_TYPE_CHANGED = "FIELD_TYPE_CHANGED"
    FIELD_TYPE_NARROWED = "FIELD_TYPE_NARROWED"
    FIELD_TYPE_WIDENED = "FIELD_TYPE_WIDENED"
    FIELD_BOUNDS_NARROWED = "FIELD_BOUNDS_NARROWED"
    FIELD_BOUNDS_WIDENED = "FIELD_BOUNDS_WIDENED"
    ENUM_VALUE_ADDED = "ENUM_VALUE_ADDED"
    ENUM_VALUE_REMOVED = "ENUM_VALUE_REMOVED"
    CONST_CHANGED = "CONST_CHANGED"
    PATTERN_CHANGED = "PATTERN_CHANGED"
    CONTENT_MODEL_OPENED = "CONTENT_MODEL_OPENED"
    CONTENT_MODEL_CLOSED = "CONTENT_MODEL_CLOSED"
    ANYOF_BRANCH_ADDED = "ANYOF_BRANCH_ADDED"
    ANYOF_BRANCH_REMOVED = "ANYOF_BRANCH_REMOVED"
    KEYWORD_CHANGED = "KEYWORD_CHANGED"
    DESCRIPTION_CHANGED = "DESCRIPTION_CHANGED"
    ACTION_ADDED = "ACTION_ADDED"
    ACTION_REMOVED = "ACTION_REMOVED"
    POLICY_PRECEDENCE_CHANGED = "POLICY_PRECEDENCE_CHANGED"
    POLICY_RULE_ADDED = "POLICY_RULE_ADDED"
    POLICY_RULE_REMOVED = "POLICY_RULE_REMOVED"
    POLICY_RULE_CHANGED = "POLICY_RULE_CHANGED"
    DEFAULT_CHANGED = "DEFAULT_CHANGED"
    LOSS_CHANGED = "LOSS_CHANGED"
    HARD_CONSTRAINT_ADDED = "HARD_CONSTRAINT_ADDED"
    HARD_CONSTRAINT_REMOVED = "HARD_CONSTRAINT_REMOVED"
    HARD_CONSTRAINT_CHANGED = "HARD_CONSTRAINT_CHANGED"
    CONTEXT_DEPENDENCY_ADDED = "CONTEXT_DEPENDENCY_ADDED"
    CONTEXT_DEPENDENCY_REMOVED = "CONTEXT_DEPENDENCY_REMOVED"
    CONTEXT_DEPENDENCY_CHANGED = "CONTEXT_DEPENDENCY_CHANGED"
    COUNTERFACTUAL_TRIGGER_CHANGED = "COUNTERFACTUAL_TRIGGER_CHANGED"


class Direction(enum.Enum):
    """Which readers a change can break.

    ``BACKWARD``: a new receiver reading old receipts. ``FORWARD``: an old receiver
    reading new receipts. ``BOTH``: both. ``NONE``: neither (annotations only).
    """

    BACKWARD = "BACKWARD"
    FORWARD = "FORWARD"
    BOTH = "BOTH"
    NONE = "NONE"


class Category(enum.Enum):
    """``WIRE``: which receipts validate. ``DECISION``: what a receiver decides."""

    WIRE = "WIRE"
    DECISION = "DECISION"


def _combine(*, backward: bool, forward: bool) -> Direction:
    if backward and forward:
        return Direction.BOTH
    if backward:
        return Direction.BACKWARD
    return Direction.FORWARD if forward else Direction.NONE


def _is_breaking(code: FindingCode, direction: Direction, category: Category) -> bool:
    if direction is Direction.NONE:
        return False
    if category is Category.DECISION or code is FindingCode.CONTENT_MODEL_OPENED:
        return True
    return direction is not Direction.FORWARD


@attrs.frozen
class Finding:
    """One difference between two contract versions.

    Attributes:
        code: stable identifier, e.g. ``FindingCode.ACTION_ADDED``.
        json_path: where: a receipt path for ``WIRE`` findings, a contract path for
            ``DECISION`` ones (see the module documentation).
        direction: which readers the change can break.
        breaking: whether the change requires a major version bump.
        category: ``WIRE`` or ``DECISION``.
        message: what changed and why it matters.
    """

    code: FindingCode
    json_path: str
    direction: Direction
    breaking: bool
    category: Category
    message: str

    @property
    def bump(self) -> Bump:
        """The version bump this finding alone requires."""
        if self.breaking:
            return "major"
        return "patch" if self.direction is Direction.NONE else "minor"

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form with string values."""
        return {
            "code": str(self.code),
            "json_path": self.json_path,
            "direction": self.direction.value,
            "breaking": self.breaking,
            "category": self.category.value,
            "message": self.message,
        }

    def __str__(self) -> str:
        flag = "BREAKING" if self.breaking else self.bump
        return (
            f"{self.code} @ {self.json_path} [{self.category.value}, "
            f"{self.direction.value}, {flag}]: {self.message}"
        )


def _finding(
    code: FindingCode,
    json_path: str,
    direction: Direction,
    message: str,
    *,
    category: Category = Category.WIRE,
) -> Finding:
    return Finding(
        code, json_path, direction, _is_breaking(code, direction, category), category, message
    )


def _split_id(contract_id: str) -> tuple[str, str]:
    name, _, version = contract_id.rpartition("/")
    return name, version


def _semver(contract_id: str) -> tuple[int, int, int]:
    _, version = _split_id(contract_id)
    match = _SEMVER.fullmatch(version)
    if match is None:
        raise VersionBumpError(
            f"{contract_id!r} names no MAJOR.MINOR.PATCH version", code="no-version"
        )
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def _bump_made(old: tuple[int, int, int], new: tuple[int, int, int]) -> str:
    if new < old:
        return "downgrade"
    if new == old:
        return "none"
    if new[0] != old[0]:
        return "major"
    return "minor" if new[1] != old[1] else "patch"


def next_version(version: str, bump: Bump) -> str:
    """The version after ``version`` with ``bump`` (before 1.0.0 a breaking change
    moves the minor part and anything else the patch part, as Cargo does).
    """
    major, minor, patch = (int(p) for p in version.split("."))
    if major == 0 and bump in ("major", "minor"):
        bump = "minor" if bump == "major" else "patch"
    if bump == "major":
        return f"{major + 1}.0.0"
    if bump == "minor":
        return f"{major}.{minor + 1}.0"
    return f"{major}.{minor}.{patch + 1}"
