"""The :class:`ContractDiff` of two contract versions, two policy documents or two receipt
schemas: the findings the differs (``_schemas``, ``_policies``) find, ordered, and what
they require of the new version (internal; see ``versions``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from handoffs._errors import VersionBumpError
from handoffs.contracts._contract import Contract
from handoffs.contracts._diff._findings import (
    _RANK,
    Bump,
    Finding,
    _bump_made,
    _semver,
    _split_id,
    next_version,
)
from handoffs.contracts._diff._policies import _decision_findings
from handoffs.contracts._diff._schemas import _schema_label, _SchemaDiffer
from handoffs.contracts._fingerprint import policy_document
from handoffs.contracts._schema import to_json_schema

__all__ = ["ContractDiff", "diff"]


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
        findings = _SchemaDiffer(old_schema, new_schema).run()  # refuses a bad schema first
        return cls(_schema_label(old_schema), _schema_label(new_schema), _ordered(findings))

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
        findings = (_SchemaDiffer(old_schema, new_schema).run()
                    if old_schema is not None and new_schema is not None else [])
        findings.extend(_decision_findings(old_policy, new_policy))
        return cls(str(old_policy["contract"]), str(new_policy["contract"]),
                   _ordered(findings))

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


def diff(old: Contract[Any, Any], new: Contract[Any, Any]) -> ContractDiff:
    """Compare two contract versions: wire findings from their receipt schemas, plus
    decision findings from actions, policy, defaults, loss, hard constraints, context
    dependencies and the counterfactual trigger.

    Example: adding a receiver action (the essay's pilot who may now also stop or
    land) is an ``ACTION_ADDED`` finding, breaking in the ``DECISION`` category even
    though every old receipt still validates.
    """
    return ContractDiff.between_policies(policy_document(old), policy_document(new),
                                         old_schema=to_json_schema(old),
                                         new_schema=to_json_schema(new))
