"""Typed compatibility diff between two contract versions (or two receipt schemas).

:func:`diff` compares two :class:`~handoffs.contracts.Contract` versions and returns a
:class:`ContractDiff` of :class:`Finding` s; :func:`diff_schemas` compares two receipt
JSON Schemas (for example the checked-in ``schemas/<name>/<version>.json`` files) over
the subset our generator emits. Codes are stable and named in the spirit of Confluent's
``Difference.Type`` and buf's rule IDs.

Every finding has a *category*:

- ``WIRE``: the set of valid receipts changes (the schema says so).
- ``DECISION``: what a receiver decides, or whether a receipt is still sufficient for
  the decision, changes, with or without a schema change (a new receiver action, a
  reordered policy, a changed loss, a new benign default, a new decision-field enum
  value).

and a *direction* (receipt schemas are closed, ``additionalProperties: false``,
everywhere):

- ``BACKWARD``: a new receiver may reject, or decide differently, a receipt written
  under the old version;
- ``FORWARD``: an old receiver may reject, or decide differently, a receipt written
  under the new version;
- ``BOTH``: both; ``NONE``: neither (descriptions only).

A finding is **breaking** when it affects ``BACKWARD`` compatibility, when it is a
``DECISION`` finding (decisions are closed-world: a receiver that lacks a branch for a
new action or enum value decides by default, the essay's unsafe benign default), or when
it opens a closed content model. Breaking findings require a *major* version bump,
other findings with a direction a *minor* one, ``NONE`` findings a *patch*.

Codes (category, usual direction):

====================================  ========  =====================================
code                                  category  direction
====================================  ========  =====================================
``CONTRACT_RENAMED``                  WIRE      BOTH
``FIELD_ADDED_REQUIRED``              WIRE      BOTH
``FIELD_ADDED_OPTIONAL``              WIRE      FORWARD
``FIELD_REMOVED``                     WIRE      BACKWARD, BOTH if it was required
``FIELD_NOW_REQUIRED``                WIRE      BACKWARD
``FIELD_NOW_OPTIONAL``                WIRE      FORWARD
``FIELD_TYPE_CHANGED``                WIRE      BOTH
``FIELD_TYPE_NARROWED``               WIRE      BACKWARD
``FIELD_TYPE_WIDENED``                WIRE      FORWARD
``FIELD_BOUNDS_NARROWED``             WIRE      BACKWARD
``FIELD_BOUNDS_WIDENED``              WIRE      FORWARD
``ENUM_VALUE_ADDED``                  DECISION  FORWARD (WIRE outside decision_state)
``ENUM_VALUE_REMOVED``                DECISION  BACKWARD (WIRE outside decision_state)
``CONST_CHANGED``                     WIRE      BOTH
``PATTERN_CHANGED``                   WIRE      BACKWARD added, FORWARD removed, BOTH
``CONTENT_MODEL_OPENED``              WIRE      FORWARD (breaking: models stay closed)
``CONTENT_MODEL_CLOSED``              WIRE      BACKWARD
``ANYOF_BRANCH_ADDED``                WIRE      FORWARD
``ANYOF_BRANCH_REMOVED``              WIRE      BACKWARD
``KEYWORD_CHANGED``                   WIRE      any other keyword; BOTH if unknown
``DESCRIPTION_CHANGED``               WIRE      NONE (DECISION for hard constraints)
``ACTION_ADDED``                      DECISION  BOTH (the scout and the pilot)
``ACTION_REMOVED``                    DECISION  BACKWARD
``POLICY_PRECEDENCE_CHANGED``         DECISION  BOTH
``POLICY_RULE_ADDED``                 DECISION  BOTH
``POLICY_RULE_REMOVED``               DECISION  BOTH
``POLICY_RULE_CHANGED``               DECISION  BOTH
``DEFAULT_CHANGED``                   DECISION  BOTH (fail_closed_action, if_missing)
``LOSS_CHANGED``                      DECISION  BOTH
``HARD_CONSTRAINT_ADDED``             DECISION  BOTH
``HARD_CONSTRAINT_REMOVED``           DECISION  BOTH
``HARD_CONSTRAINT_CHANGED``           DECISION  BOTH
``CONTEXT_DEPENDENCY_ADDED``          DECISION  BOTH
``CONTEXT_DEPENDENCY_REMOVED``        DECISION  BOTH
``CONTEXT_DEPENDENCY_CHANGED``        DECISION  BOTH
``COUNTERFACTUAL_TRIGGER_CHANGED``    DECISION  BOTH
====================================  ========  =====================================

Paths: ``WIRE`` findings name the place in a *receipt* (``$.decision_state.amount``,
``$.evidence_refs[*]``), as validation errors do. ``DECISION`` findings name the place in
the contract (``$.policy.rules.high-value``, ``$.loss.RELEASE.ESCALATE``,
``$.hard_constraints.unsafe-release``, ``$.context.role-held:case-owner``), except enum
values and ``if_missing`` defaults, which name the receipt field they concern.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, Literal

import attrs

from handoffs._errors import ContractDefinitionError, HandoffsError
from handoffs._json import canonical_bytes
from handoffs.contracts._contract import Contract
from handoffs.contracts._fields import MISSING
from handoffs.contracts._fingerprint import policy_document
from handoffs.contracts._schema import to_json_schema

__all__ = [
    "Bump",
    "Category",
    "ContractDiff",
    "Direction",
    "Finding",
    "FindingCode",
    "VersionBumpError",
    "diff",
    "diff_policies",
    "diff_schemas",
]

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

    @property
    def breaking(self) -> bool:
        """True when any finding is breaking."""
        return any(finding.breaking for finding in self.findings)

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

_LOWER_BOUNDS: Final = ("minimum", "exclusiveMinimum", "minLength", "minItems",
                        "minProperties")
_UPPER_BOUNDS: Final = ("maximum", "exclusiveMaximum", "maxLength", "maxItems",
                        "maxProperties")
_ANNOTATIONS: Final = ("description", "title", "$comment", "examples")
_HANDLED: Final = frozenset({
    "$schema", "$id", "$defs", "$ref", "type", "enum", "const", "properties", "required",
    "additionalProperties", "items", "anyOf", "pattern", "default",
    *_LOWER_BOUNDS, *_UPPER_BOUNDS, *_ANNOTATIONS,
})
_DECISION_STATE: Final = "$.decision_state."
_ACTION_PATH: Final = "$.proposed_action"


def _short(value: Any) -> str:
    text = canonical_bytes(value).decode("utf-8")
    return text if len(text) <= 60 else text[:57] + "..."


def _key(value: Any) -> bytes:
    return canonical_bytes(value)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    return "array" if isinstance(value, list) else "object"


def _types(node: Mapping[str, Any]) -> frozenset[str] | None:
    """The JSON types a node admits, or ``None`` when it does not constrain the type."""
    declared = node.get("type")
    if isinstance(declared, str):
        return frozenset((declared,))
    if isinstance(declared, list):
        return frozenset(str(t) for t in declared)
    if isinstance(node.get("enum"), list):
        return frozenset(_json_type(v) for v in node["enum"])
    if "const" in node:
        return frozenset((_json_type(node["const"]),))
    return None


def _covers(wide: frozenset[str], narrow: frozenset[str]) -> bool:
    return all(t in wide or (t == "integer" and "number" in wide) for t in narrow)


def _has_ref(node: Any) -> bool:
    if isinstance(node, Mapping):
        return "$ref" in node or any(_has_ref(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_ref(v) for v in node)
    return False


def _pointer(root: Mapping[str, Any], ref: str, *, side: str) -> Any:
    if not ref.startswith("#"):
        raise ContractDefinitionError(
            f"{side} schema: only local $ref is supported, got {ref!r}", code="bad-schema"
        )
    node: Any = root
    for raw in filter(None, ref[1:].split("/")):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise ContractDefinitionError(
                f"{side} schema: $ref {ref!r} does not resolve", code="bad-schema"
            )
    return node


def _member(node: Mapping[str, Any], key: str, kind: type[Any], default: Any, *, path: str,
            side: str) -> Any:
    """``node[key]`` if it has the JSON type the keyword needs, else ``bad-schema``."""
    value = node.get(key, default)
    if not isinstance(value, kind):
        raise ContractDefinitionError(
            f"{side} schema: {key!r} at {path} must be "
            f"{'an object' if kind is Mapping else 'an array'}, got {_short(value)}",
            code="bad-schema",
        )
    return value


class _SchemaDiffer:
    """Walks two schemas in parallel and records findings at receipt paths."""

    def __init__(self, old_root: Mapping[str, Any], new_root: Mapping[str, Any]) -> None:
        for side, root in (("old", old_root), ("new", new_root)):
            if not isinstance(root, Mapping):
                raise ContractDefinitionError(
                    f"the {side} schema must be a JSON object, got {type(root).__name__}",
                    code="bad-schema",
                )
        self.old_root = old_root
        self.new_root = new_root
        self.defs_equal = old_root.get("$defs") == new_root.get("$defs")
        self.findings: list[Finding] = []
        self._active: set[tuple[str, str]] = set()

    def run(self) -> list[Finding]:
        self.node(self.old_root, self.new_root, "$", top=True)
        return self.findings

    def add(self, code: FindingCode, path: str, direction: Direction, message: str,
            *, category: Category = Category.WIRE) -> None:
        self.findings.append(_finding(code, path, direction, message, category=category))

    def _resolve(self, node: Mapping[str, Any], root: Mapping[str, Any], side: str
                 ) -> tuple[Mapping[str, Any], str]:
        refs = []
        for _ in range(32):
            ref = node.get("$ref")
            if not isinstance(ref, str):
                break
            refs.append(ref)
            target = _pointer(root, ref, side=side)
            if not isinstance(target, Mapping):
                raise ContractDefinitionError(
                    f"{side} schema: $ref {ref!r} is not a schema object", code="bad-schema"
                )
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        else:
            raise ContractDefinitionError(f"{side} schema: $ref chain too long",
                                          code="bad-schema")
        return node, "→".join(refs)

    def node(self, old: Any, new: Any, path: str, *, top: bool = False) -> None:
        if old == new and (self.defs_equal or not _has_ref(old)):
            return
        if isinstance(old, bool) or isinstance(new, bool) or not (
            isinstance(old, Mapping) and isinstance(new, Mapping)
        ):
            self.add(FindingCode.KEYWORD_CHANGED, path, Direction.BOTH,
                     f"schema {_short(old)} became {_short(new)}")
            return
        old, old_refs = self._resolve(old, self.old_root, "old")
        new, new_refs = self._resolve(new, self.new_root, "new")
        guard = (old_refs, new_refs)
        if old_refs or new_refs:
            if guard in self._active:
                return  # a recursive reference already being compared
            self._active.add(guard)
        try:
            self._compare(old, new, path, top=top)
        finally:
            self._active.discard(guard)

    def _compare(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str, *,
                 top: bool) -> None:
        self._annotations(old, new, path, top=top)
        if not self._types(old, new, path):
            return  # values of different types: nothing further is comparable
        self._const(old, new, path)
        self._enum(old, new, path)
        self._pattern(old, new, path)
        self._bounds(old, new, path)
        self._object(old, new, path)
        self._items(old, new, path)
        self._any_of(old, new, path)
        self._unknown(old, new, path, top=top)

    def _annotations(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str, *,
                     top: bool) -> None:
        for key in _ANNOTATIONS:
            if top and key == "title":
                continue  # the title names contract and version; both may change
            if old.get(key) != new.get(key):
                self.add(FindingCode.DESCRIPTION_CHANGED, path, Direction.NONE,
                         f"{key} changed from {_short(old.get(key))} to {_short(new.get(key))}")
        missing = object()
        if old.get("default", missing) != new.get("default", missing):
            decision = path.startswith(_DECISION_STATE)
            self.add(
                FindingCode.DEFAULT_CHANGED, path,
                Direction.BOTH if decision else Direction.NONE,
                f"default changed from {_short(old.get('default'))} to "
                f"{_short(new.get('default'))}"
                + ("; a default on a decision field is an unsafe benign default"
                   if decision else ""),
                category=Category.DECISION if decision else Category.WIRE,
            )

    def _types(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> bool:
        before, after = _types(old), _types(new)
        if before == after:
            return True
        shown_before = "any" if before is None else "|".join(sorted(before))
        shown_after = "any" if after is None else "|".join(sorted(after))
        if before is None or (after is not None and _covers(before, after)):
            self.add(FindingCode.FIELD_TYPE_NARROWED, path, Direction.BACKWARD,
                     f"type narrowed from {shown_before} to {shown_after}; old receipts "
                     "may no longer validate")
            return True
        if after is None or _covers(after, before):
            self.add(FindingCode.FIELD_TYPE_WIDENED, path, Direction.FORWARD,
                     f"type widened from {shown_before} to {shown_after}; old receivers "
                     "reject the new values")
            return True
        self.add(FindingCode.FIELD_TYPE_CHANGED, path, Direction.BOTH,
                 f"type changed from {shown_before} to {shown_after}")
        return False

    def _const(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        if "const" not in old and "const" not in new:
            return
        if "const" not in new:
            self.add(FindingCode.KEYWORD_CHANGED, path, Direction.FORWARD,
                     f"const {_short(old['const'])} removed")
        elif "const" not in old:
            self.add(FindingCode.KEYWORD_CHANGED, path, Direction.BACKWARD,
                     f"const {_short(new['const'])} added")
        elif old["const"] != new["const"]:
            if path == "$.contract" and isinstance(old["const"], str) and isinstance(
                new["const"], str
            ):
                before, after = _split_id(old["const"])[0], _split_id(new["const"])[0]
                if before != after:
                    self.add(FindingCode.CONTRACT_RENAMED, path, Direction.BOTH,
                             f"contract renamed from {before!r} to {after!r}")
                return  # a new version of the same contract is expected here
            self.add(FindingCode.CONST_CHANGED, path, Direction.BOTH,
                     f"const changed from {_short(old['const'])} to {_short(new['const'])}")

    def _enum(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        if "enum" not in old and "enum" not in new:
            return
        before_values = _member(old, "enum", list, [], path=path, side="old")
        after_values = _member(new, "enum", list, [], path=path, side="new")
        if "enum" not in new or "enum" not in old:
            constrained = "enum" in new
            self.add(FindingCode.KEYWORD_CHANGED, path,
                     Direction.BACKWARD if constrained else Direction.FORWARD,
                     f"enum constraint {'added' if constrained else 'removed'}")
            return
        before = {_key(v): v for v in before_values}
        after = {_key(v): v for v in after_values}
        removed = [v for k, v in before.items() if k not in after]
        added = [v for k, v in after.items() if k not in before]
        decision = path.startswith(_DECISION_STATE)
        category = Category.DECISION if decision else Category.WIRE
        for value in removed:
            if path == _ACTION_PATH:
                self.add(FindingCode.ACTION_REMOVED, path, Direction.BACKWARD,
                         f"action {_short(value)} removed: old receipts proposing it no "
                         "longer validate", category=Category.DECISION)
            else:
                self.add(FindingCode.ENUM_VALUE_REMOVED, path, Direction.BACKWARD,
                         f"enum value {_short(value)} removed: old receipts carrying it no "
                         "longer validate", category=category)
        for value in added:
            if path == _ACTION_PATH:
                self.add(FindingCode.ACTION_ADDED, path, Direction.BOTH,
                         f"action {_short(value)} added: the receiver's choice set grew, so "
                         "receipts sufficient for the old actions may not be sufficient "
                         "now (the scout and the pilot), and old receivers cannot read it",
                         category=Category.DECISION)
            else:
                self.add(FindingCode.ENUM_VALUE_ADDED, path, Direction.FORWARD,
                         f"enum value {_short(value)} added: old receivers reject it"
                         + ("; a policy without a branch for it decides by default"
                            if decision else ""),
                         category=category)

    def _pattern(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        before, after = old.get("pattern"), new.get("pattern")
        if before == after:
            return
        if before is None:
            direction, what = Direction.BACKWARD, f"pattern {after!r} added"
        elif after is None:
            direction, what = Direction.FORWARD, f"pattern {before!r} removed"
        else:
            direction, what = Direction.BOTH, f"pattern changed from {before!r} to {after!r}"
        self.add(FindingCode.PATTERN_CHANGED, path, direction, what)

    def _bounds(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        for keyword in (*_LOWER_BOUNDS, *_UPPER_BOUNDS):
            before, after = old.get(keyword), new.get(keyword)
            if before == after:
                continue
            lower = keyword in _LOWER_BOUNDS
            if not all(v is None or (isinstance(v, int | float) and not isinstance(v, bool))
                       for v in (before, after)):
                self.add(FindingCode.KEYWORD_CHANGED, path, Direction.BOTH,
                         f"{keyword} changed from {_short(before)} to {_short(after)}, which "
                         "is not a number")
                continue
            if before is None or after is None:
                narrowed = before is None
            else:
                narrowed = after > before if lower else after < before
            shown = f"{keyword} {_short(before)} → {_short(after)}"
            if narrowed:
                self.add(FindingCode.FIELD_BOUNDS_NARROWED, path, Direction.BACKWARD,
                         f"{shown}: old receipts may fall outside the new bounds")
            else:
                self.add(FindingCode.FIELD_BOUNDS_WIDENED, path, Direction.FORWARD,
                         f"{shown}: old receivers reject values outside the old bounds")

    def _object(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        old_props = _member(old, "properties", Mapping, {}, path=path, side="old")
        new_props = _member(new, "properties", Mapping, {}, path=path, side="new")
        old_req = set(_member(old, "required", list, [], path=path, side="old"))
        new_req = set(_member(new, "required", list, [], path=path, side="new"))
        old_extra = old.get("additionalProperties", True)
        new_extra = new.get("additionalProperties", True)
        old_closed, new_closed = old_extra is False, new_extra is False
        for name, schema in old_props.items():
            child = f"{path}.{name}"
            if name in new_props:
                self.node(schema, new_props[name], child)
                continue
            direction = _combine(backward=new_closed,
                                 forward=name in old_req or not new_closed)
            self.add(FindingCode.FIELD_REMOVED, child, direction,
                     f"field {name!r} removed"
                     + ("; the new closed schema rejects old receipts carrying it"
                        if new_closed else "")
                     + ("; old receivers require it" if name in old_req else ""))
        for name in new_props:
            if name in old_props:
                continue
            child = f"{path}.{name}"
            required = name in new_req
            direction = _combine(backward=required or not old_closed, forward=old_closed)
            code = (FindingCode.FIELD_ADDED_REQUIRED if required
                    else FindingCode.FIELD_ADDED_OPTIONAL)
            self.add(code, child, direction,
                     f"{'required' if required else 'optional'} field {name!r} added"
                     + ("; old receipts lack it" if required else "")
                     + ("; the old closed schema rejects receipts carrying it"
                        if old_closed else ""))
        for name in sorted(new_req - old_req):
            if (name in old_props) == (name in new_props):
                self.add(FindingCode.FIELD_NOW_REQUIRED, f"{path}.{name}",
                         Direction.BACKWARD, f"field {name!r} is now required; old receipts "
                         "may lack it")
        for name in sorted(old_req - new_req):
            if (name in old_props) == (name in new_props):
                self.add(FindingCode.FIELD_NOW_OPTIONAL, f"{path}.{name}",
                         Direction.FORWARD, f"field {name!r} is now optional; old receivers "
                         "require it")
        if old_closed and not new_closed:
            self.add(FindingCode.CONTENT_MODEL_OPENED, path, Direction.FORWARD,
                     "additionalProperties is no longer false: unknown members now pass, so "
                     "document text can smuggle in members (receipt schemas stay closed)")
        elif new_closed and not old_closed:
            self.add(FindingCode.CONTENT_MODEL_CLOSED, path, Direction.BACKWARD,
                     "additionalProperties is now false: old receipts with extra members "
                     "no longer validate")
        elif isinstance(old_extra, Mapping) and isinstance(new_extra, Mapping):
            self.node(old_extra, new_extra, f"{path}.*")

    def _items(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        before, after = old.get("items"), new.get("items")
        if before is None and after is None:
            return
        if before is None or after is None:
            added = before is None
            self.add(FindingCode.KEYWORD_CHANGED, f"{path}[*]",
                     Direction.BACKWARD if added else Direction.FORWARD,
                     f"items schema {'added' if added else 'removed'}")
            return
        self.node(before, after, f"{path}[*]")

    def _any_of(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        before, after = old.get("anyOf"), new.get("anyOf")
        if before is None and after is None:
            return
        if not isinstance(before, list) or not isinstance(after, list):
            added = before is None
            self.add(FindingCode.KEYWORD_CHANGED, path,
                     Direction.BACKWARD if added else Direction.FORWARD,
                     f"anyOf {'added' if added else 'removed'}")
            return
        remaining = list(after)
        unmatched_old: list[Any] = []
        for branch in before:
            for index, candidate in enumerate(remaining):
                if candidate == branch:
                    self.node(branch, remaining.pop(index), path)
                    break
            else:
                unmatched_old.append(branch)
        pairs = min(len(unmatched_old), len(remaining))
        for index in range(pairs):
            self.node(unmatched_old[index], remaining[index], path)
        for branch in unmatched_old[pairs:]:
            self.add(FindingCode.ANYOF_BRANCH_REMOVED, path, Direction.BACKWARD,
                     f"alternative {_short(branch)} removed; old receipts using it no longer "
                     "validate")
        for branch in remaining[pairs:]:
            self.add(FindingCode.ANYOF_BRANCH_ADDED, path, Direction.FORWARD,
                     f"alternative {_short(branch)} added; old receivers reject it")

    def _unknown(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str, *,
                 top: bool) -> None:
        for keyword in sorted((set(old) | set(new)) - _HANDLED):
            if old.get(keyword) != new.get(keyword):
                self.add(FindingCode.KEYWORD_CHANGED, path, Direction.BOTH,
                         f"keyword {keyword!r} changed from {_short(old.get(keyword))} to "
                         f"{_short(new.get(keyword))}; the differ does not model it, so it "
                         "counts as breaking")
        if top and old.get("$schema") != new.get("$schema"):
            self.add(FindingCode.KEYWORD_CHANGED, path, Direction.BOTH,
                     f"dialect changed from {old.get('$schema')!r} to {new.get('$schema')!r}")


def _schema_label(schema: Mapping[str, Any]) -> str:
    props = schema.get("properties")
    if isinstance(props, Mapping):
        contract = props.get("contract")
        if isinstance(contract, Mapping) and isinstance(contract.get("const"), str):
            return str(contract["const"])
    ident = schema.get("$id")
    if isinstance(ident, str):
        match = _SCHEMA_ID.fullmatch(ident)
        return f"{match.group(1)}/{match.group(2)}" if match else ident
    return "?"


def diff_schemas(old_schema: Mapping[str, Any], new_schema: Mapping[str, Any]) -> ContractDiff:
    """Compare two receipt JSON Schemas and return their ``WIRE`` findings.

    Handles the subset :func:`~handoffs.contracts.to_json_schema` emits (properties,
    required, type, enum, const, numeric and length bounds, pattern,
    additionalProperties, items, anyOf, local ``$ref``) plus decision-field and action
    enums. Any other keyword that differs is reported as a breaking
    ``KEYWORD_CHANGED``: what the differ cannot prove compatible, it does not pass.

    Raises:
        ContractDefinitionError: ``bad-schema`` for a non-object schema or an
            unresolvable ``$ref``.
    """
    findings = _SchemaDiffer(old_schema, new_schema).run()
    return ContractDiff(_schema_label(old_schema), _schema_label(new_schema), _ordered(findings))


# ---------------------------------------------------------------- contract diff


def _shown(value: Any) -> str:
    """An ``if_missing`` value of a policy document as the finding shows it."""
    if value is MISSING:
        return "none (fail closed)"
    if isinstance(value, Mapping) and set(value) == {"lo", "hi"}:
        return f"[{value['lo']}, {value['hi']}]"
    return repr(value)


def _same(a: Any, b: Any) -> bool:
    """Equal as canonical JSON (``2`` and ``2.0`` are the same number)."""
    return a is b or (a is not MISSING and b is not MISSING and _key(a) == _key(b))


def _rows(document: Mapping[str, Any], member: str) -> list[Mapping[str, Any]]:
    rows = document.get(member)
    if not isinstance(rows, list) or not all(isinstance(r, Mapping) for r in rows):
        raise ContractDefinitionError(f"a policy document's {member!r} must be a list of "
                                      "objects", code="bad-policy-document",
                                      json_path=f"$.{member}")
    return rows


@attrs.frozen
class _RuleView:
    name: str
    key: bytes
    action: str
    text: str


def _rule_views(document: Mapping[str, Any]) -> list[_RuleView]:
    views = [_RuleView(str(r["rule"]), _key([r["guard"], r["action"]]), str(r["action"]),
                       str(r["when"])) for r in _rows(document, "rules")]
    default = document["default"]
    views.append(_RuleView(str(default["rule"]), _key(["otherwise", default["action"]]),
                           str(default["action"]), "otherwise"))
    return views


def _policy_findings(old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[Finding]:
    before = {v.name: v for v in _rule_views(old)}
    after = {v.name: v for v in _rule_views(new)}
    for name, view in before.items():
        if name not in after:
            yield _finding(FindingCode.POLICY_RULE_REMOVED, f"$.policy.rules.{name}",
                           Direction.BOTH,
                           f"rule {name!r} (when {view.text} → {view.action}) removed",
                           category=Category.DECISION)
    for name, view in after.items():
        if name not in before:
            yield _finding(FindingCode.POLICY_RULE_ADDED, f"$.policy.rules.{name}",
                           Direction.BOTH,
                           f"rule {name!r} (when {view.text} → {view.action}) added",
                           category=Category.DECISION)
        elif before[name].key != view.key:
            was = before[name]
            yield _finding(FindingCode.POLICY_RULE_CHANGED, f"$.policy.rules.{name}",
                           Direction.BOTH,
                           f"rule {name!r} changed from (when {was.text} → {was.action}) to "
                           f"(when {view.text} → {view.action})",
                           category=Category.DECISION)
    old_order = [name for name in before if name in after]
    new_order = [name for name in after if name in before]
    if old_order != new_order:
        yield _finding(FindingCode.POLICY_PRECEDENCE_CHANGED, "$.policy.rules", Direction.BOTH,
                       f"precedence changed from {' > '.join(old_order)} to "
                       f"{' > '.join(new_order)}; the first rule that holds decides",
                       category=Category.DECISION)


def _default_findings(old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[Finding]:
    if old["fail_closed_action"] != new["fail_closed_action"]:
        yield _finding(FindingCode.DEFAULT_CHANGED, "$.fail_closed_action", Direction.BOTH,
                       f"fail_closed_action changed from {old['fail_closed_action']!r} to "
                       f"{new['fail_closed_action']!r}", category=Category.DECISION)
    before = {str(f["name"]): f for f in _rows(old, "decision_fields")}
    for spec in _rows(new, "decision_fields"):
        name = str(spec["name"])
        path = f"$.decision_state.{name}"
        now = spec.get("if_missing", MISSING)
        if name not in before:
            if now is not MISSING:
                yield _finding(
                    FindingCode.DEFAULT_CHANGED, path, Direction.BOTH,
                    f"new decision field {name!r} declares if_missing="
                    f"{_shown(now)}: a receiver would assume it when the field "
                    "is absent (an unsafe benign default)", category=Category.DECISION)
            continue
        was = before[name].get("if_missing", MISSING)
        if _same(was, now):
            continue
        if now is MISSING:
            why = "a receiver now fails closed when it is absent"
        elif was is MISSING:
            why = "a receiver now assumes a benign default instead of failing closed"
        else:
            why = "a receiver now assumes a different value when it is absent"
        yield _finding(FindingCode.DEFAULT_CHANGED, path, Direction.BOTH,
                       f"if_missing of {name!r} changed from {_shown(was)} to "
                       f"{_shown(now)}: {why}", category=Category.DECISION)


def _loss_findings(old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[Finding]:
    before = {(r["chosen"], r["reference"]): r["loss"] for r in _rows(old, "loss")}
    after = {(r["chosen"], r["reference"]): r["loss"] for r in _rows(new, "loss")}
    for pair, value in before.items():
        if pair in after and after[pair] != value:
            chosen, reference = pair
            yield _finding(FindingCode.LOSS_CHANGED, f"$.loss.{chosen}.{reference}",
                           Direction.BOTH,
                           f"loss of choosing {chosen} when {reference} is right changed from "
                           f"{value} to {after[pair]}: regret, release gates and sufficiency "
                           "move with it", category=Category.DECISION)


def _constraint_key(row: Mapping[str, Any]) -> bytes:
    return _key({k: row.get(k) for k in ("chosen", "allowed_references", "guard")})


def _constraint_shown(row: Mapping[str, Any]) -> str:
    return _short({k: v for k, v in row.items()
                   if k in ("name", "chosen", "allowed_references", "when") and v is not None})


def _constraint_findings(old: Mapping[str, Any], new: Mapping[str, Any]
                         ) -> Iterator[Finding]:
    before = {str(h["name"]): h for h in _rows(old, "hard_constraints")}
    after = {str(h["name"]): h for h in _rows(new, "hard_constraints")}
    for name, item in before.items():
        path = f"$.hard_constraints.{name}"
        if name not in after:
            yield _finding(FindingCode.HARD_CONSTRAINT_REMOVED, path, Direction.BOTH,
                           f"hard constraint {name!r} removed: its violations are no longer "
                           "counted", category=Category.DECISION)
        elif _constraint_key(item) != _constraint_key(after[name]):
            yield _finding(FindingCode.HARD_CONSTRAINT_CHANGED, path, Direction.BOTH,
                           f"hard constraint {name!r} changed from {_constraint_shown(item)} "
                           f"to {_constraint_shown(after[name])}",
                           category=Category.DECISION)
        elif item.get("description") != after[name].get("description"):
            yield _finding(FindingCode.DESCRIPTION_CHANGED, path, Direction.NONE,
                           f"description of hard constraint {name!r} changed",
                           category=Category.DECISION)
    for name in after:
        if name not in before:
            yield _finding(FindingCode.HARD_CONSTRAINT_ADDED, f"$.hard_constraints.{name}",
                           Direction.BOTH,
                           f"hard constraint {name!r} added: choices that were acceptable "
                           "may now be hard violations", category=Category.DECISION)


def _dependency_map(deps: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    found: dict[str, Mapping[str, Any]] = {}
    for data in deps:
        ident = next((data[k] for k in ("role", "evidence", "name") if k in data), None)
        key = str(data.get("kind", "?"))
        if ident is not None:
            key = f"{key}:{ident}"
        base, n = key, 2
        while key in found:
            key, n = f"{base}#{n}", n + 1
        found[key] = data
    return found


def _context_findings(old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[Finding]:
    before = _dependency_map(_rows(old, "context"))
    after = _dependency_map(_rows(new, "context"))
    for key, data in before.items():
        path = f"$.context.{key}"
        if key not in after:
            yield _finding(FindingCode.CONTEXT_DEPENDENCY_REMOVED, path, Direction.BOTH,
                           f"context dependency {key!r} removed: receivers stop checking "
                           "it before deciding", category=Category.DECISION)
        elif not _same(after[key], data):
            yield _finding(FindingCode.CONTEXT_DEPENDENCY_CHANGED, path, Direction.BOTH,
                           f"context dependency {key!r} changed from {_short(data)} to "
                           f"{_short(after[key])}", category=Category.DECISION)
    for key in after:
        if key not in before:
            yield _finding(FindingCode.CONTEXT_DEPENDENCY_ADDED, f"$.context.{key}",
                           Direction.BOTH,
                           f"context dependency {key!r} added: receivers must now meet it "
                           "before deciding", category=Category.DECISION)


_POLICY_MEMBERS: Final = ("contract", "actions", "decision_fields", "rules", "default", "loss",
                          "hard_constraints", "context", "fail_closed_action",
                          "counterfactual_trigger")


def _decision_findings(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Finding]:
    for side, document in (("OLD", old), ("NEW", new)):
        if not isinstance(document, Mapping):
            raise ContractDefinitionError(f"{side}: a policy document is a JSON object",
                                          code="bad-policy-document")
        missing = [m for m in _POLICY_MEMBERS if m not in document]
        if missing:
            raise ContractDefinitionError(
                f"{side}: not a policy document (no {missing[0]!r} member)",
                code="bad-policy-document", json_path=f"$.{missing[0]}")
    findings = list(_default_findings(old, new))
    findings.extend(_policy_findings(old, new))
    findings.extend(_loss_findings(old, new))
    findings.extend(_constraint_findings(old, new))
    findings.extend(_context_findings(old, new))
    if old["counterfactual_trigger"] != new["counterfactual_trigger"]:
        findings.append(_finding(
            FindingCode.COUNTERFACTUAL_TRIGGER_CHANGED, "$.counterfactual_trigger",
            Direction.BOTH,
            "counterfactual trigger changed: the condition under which a receipt may be "
            f"reused is now {new['counterfactual_trigger']!r}", category=Category.DECISION,
        ))
    return findings


def diff_policies(old_policy: Mapping[str, Any], new_policy: Mapping[str, Any], *,
                  old_schema: Mapping[str, Any] | None = None,
                  new_schema: Mapping[str, Any] | None = None) -> ContractDiff:
    """Compare two policy documents (``schemas/<name>/<version>.policy.json``, see
    :func:`~handoffs.contracts.policy_document`) and, when given, their receipt schemas:
    the same findings :func:`diff` gives for the two contracts.

    Actions added or removed show in the schemas (the ``proposed_action`` enum); without
    them only the decision findings are compared.

    Raises:
        ContractDefinitionError: ``bad-policy-document`` when a document lacks a member.
    """
    findings = (_SchemaDiffer(old_schema, new_schema).run()
                if old_schema is not None and new_schema is not None else [])
    findings.extend(_decision_findings(old_policy, new_policy))
    return ContractDiff(str(old_policy["contract"]), str(new_policy["contract"]),
                        _ordered(findings))


def diff(old: Contract[Any, Any], new: Contract[Any, Any]) -> ContractDiff:
    """Compare two contract versions: wire findings from their receipt schemas, plus
    decision findings from actions, policy, defaults, loss, hard constraints, context
    dependencies and the counterfactual trigger.

    Example: adding a receiver action (the essay's pilot who may now also stop or
    land) is an ``ACTION_ADDED`` finding, breaking in the ``DECISION`` category even
    though every old receipt still validates.
    """
    return diff_policies(policy_document(old), policy_document(new),
                         old_schema=to_json_schema(old), new_schema=to_json_schema(new))
