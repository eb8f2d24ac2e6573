"""The findings of a contract diff: codes, directions, categories, the version-bump rule and
the :class:`ContractDiff` that holds and renders them (internal; see ``versions``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal

import attrs

from handoffs._errors import HandoffsError

Bump = Literal["major", "minor", "patch", "none"]
"""The smallest semantic-version bump a set of findings requires."""

_RANK: Final[dict[str, int]] = {"none": 0, "patch": 1, "minor": 2, "major": 3}
_SEMVER: Final = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)")
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


class VersionBumpError(HandoffsError, ValueError):
    """The new contract version does not bump the old one enough for its changes.

    Attributes:
        old_version: the old ``MAJOR.MINOR.PATCH``.
        new_version: the new one.
        required: the bump the findings require (``"major"``, ``"minor"``...).
        actual: the bump made (``"none"`` for equal versions, ``"downgrade"``).

    Codes: ``version-bump-too-small``, ``version-decreased``, ``contract-renamed``,
    ``no-version``.
    """

    code = "version-bump-too-small"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        old_version: str | None = None,
        new_version: str | None = None,
        required: str | None = None,
        actual: str | None = None,
    ) -> None:
        self.old_version = old_version
        self.new_version = new_version
        self.required = required
        self.actual = actual
        super().__init__(message, code=code, json_path="$.version")


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


def _findings(items: Iterable[Finding]) -> tuple[Finding, ...]:
    return tuple(items)


@attrs.frozen
class ContractDiff:
    """Every finding between two contract versions, breaking ones first.

    Attributes:
        old: the old contract id, ``"<name>/<version>"``.
        new: the new contract id.
        findings: the findings, breaking first, then in schema and contract order.
    """

    old: str
    new: str
    findings: tuple[Finding, ...] = attrs.field(converter=_findings)

    @classmethod
    def between_schemas(cls, old_schema: Mapping[str, Any],
                        new_schema: Mapping[str, Any]) -> ContractDiff:
        """Compare two receipt JSON Schemas and return their ``WIRE`` findings.

        Handles the subset :meth:`~handoffs.contracts.Contract.json_schema` emits
        (properties, required, type, enum, const, numeric and length bounds, pattern,
        additionalProperties, items, anyOf, local ``$ref``) plus decision-field and
        action enums. Any other keyword that differs is reported as a breaking
        ``KEYWORD_CHANGED``: what the differ cannot prove compatible, it does not pass.

        Raises:
            ContractDefinitionError: ``bad-schema`` for a non-object schema or an
                unresolvable ``$ref``.
        """
        from handoffs.contracts._diff._schemas import diff_schemas  # it builds on this

        return diff_schemas(old_schema, new_schema)

    @classmethod
    def between_policies(cls, old_policy: Mapping[str, Any], new_policy: Mapping[str, Any],
                         *, old_schema: Mapping[str, Any] | None = None,
                         new_schema: Mapping[str, Any] | None = None) -> ContractDiff:
        """Compare two policy documents (``schemas/<name>/<version>.policy.json``, see
        :meth:`~handoffs.contracts.Contract.policy_document`) and, when given, their
        receipt schemas: the same findings :func:`~handoffs.contracts.versions.diff`
        gives for the two contracts.

        Actions added or removed show in the schemas (the ``proposed_action`` enum); without
        them only the decision findings are compared.

        Raises:
            ContractDefinitionError: ``bad-policy-document`` when a document lacks a member.
        """
        from handoffs.contracts._diff._policies import diff_policies  # it builds on this

        return diff_policies(old_policy, new_policy, old_schema=old_schema,
                             new_schema=new_schema)

    @property
    def breaking(self) -> bool:
        """True when any finding is breaking."""
        return any(finding.breaking for finding in self.findings)

    @property
    def release_bump(self) -> Bump:
        """The bump that publishes these changes: :attr:`required_bump`, and at least a
        patch (a released version's files never change, even for a formatting-only
        difference).
        """
        bump = self.required_bump
        return "patch" if bump == "none" else bump

    def next_version(self, version: str) -> str:
        """The version to publish these changes as after ``version``
        (:attr:`release_bump`; before 1.0.0 a breaking change moves the minor part).
        """
        return next_version(version, self.release_bump)

    @property
    def required_bump(self) -> Bump:
        """The smallest version bump that covers every finding."""
        bump: Bump = "none"
        for finding in self.findings:
            if _RANK[finding.bump] > _RANK[bump]:
                bump = finding.bump
        return bump

    def check_version_bump(self) -> None:
        """Raise unless the new version bumps the old one enough for the findings.

        Breaking changes need a major bump, other semantic changes a minor one,
        description changes a patch. Before 1.0.0 every requirement moves down one
        place (a breaking change needs ``0.x`` → ``0.(x+1)``), as Cargo does.

        Raises:
            VersionBumpError: the bump is too small, the version went down, the
                contracts differ in name, or an id names no version.
        """
        old_name, _ = _split_id(self.old)
        new_name, _ = _split_id(self.new)
        if old_name != new_name:
            raise VersionBumpError(
                f"{self.old} and {self.new} are different contracts; a renamed contract "
                "starts its own version history",
                code="contract-renamed",
            )
        old_version, new_version = _semver(self.old), _semver(self.new)
        old_text = ".".join(map(str, old_version))
        new_text = ".".join(map(str, new_version))
        required: str = self.required_bump
        if old_version[0] == 0 and required in ("major", "minor"):
            required = "minor" if required == "major" else "patch"
        actual = _bump_made(old_version, new_version)
        context = {"old_version": old_text, "new_version": new_text,
                   "required": required, "actual": actual}
        if actual == "downgrade":
            raise VersionBumpError(
                f"version went down from {old_text} to {new_text}", code="version-decreased",
                **context,
            )
        if _RANK[actual] < _RANK[required]:
            reasons = [f for f in self.findings if _RANK[f.bump] > _RANK[actual]]
            first = reasons[0] if reasons else None
            why = f"; first: {first.code} @ {first.json_path}" if first else ""
            raise VersionBumpError(
                f"{old_text} → {new_text} is a {actual} bump but the changes need a "
                f"{required} bump ({len(reasons)} finding{'s' if len(reasons) != 1 else ''}"
                f"{why})",
                **context,
            )

    def to_json(self) -> dict[str, Any]:
        """JSON-ready report: ids, verdict, required bump and every finding."""
        return {
            "old": self.old,
            "new": self.new,
            "breaking": self.breaking,
            "required_bump": self.required_bump,
            "findings": [finding.to_json() for finding in self.findings],
        }

    def to_markdown(self) -> str:
        """A Markdown report: a verdict line and one table row per finding."""
        count = len(self.findings)
        lines = [
            f"# Contract diff: `{self.old}` → `{self.new}`",
            "",
            f"**Breaking: {'yes' if self.breaking else 'no'}** · required bump: "
            f"**{self.required_bump}** · {count} finding{'s' if count != 1 else ''}",
            "",
        ]
        if not self.findings:
            lines.append("No differences.")
            return "\n".join(lines) + "\n"
        lines += [
            "| Code | Path | Category | Direction | Breaking | Message |",
            "|---|---|---|---|---|---|",
        ]
        for f in self.findings:
            message = f.message.replace("|", "\\|").replace("\n", " ")
            lines.append(
                f"| `{f.code}` | `{f.json_path}` | {f.category.value} | {f.direction.value} "
                f"| {'yes' if f.breaking else 'no'} | {message} |"
            )
        return "\n".join(lines) + "\n"


def _ordered(findings: Sequence[Finding]) -> tuple[Finding, ...]:
    return tuple(sorted(findings, key=lambda f: not f.breaking))


# ------------------------------------------------------------------ schema diff


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
