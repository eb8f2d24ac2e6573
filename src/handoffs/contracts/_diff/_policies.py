"""The diff of two policy documents (actions, rules, defaults, loss, hard constraints,
context dependencies): the ``DECISION`` findings, and :func:`diff` of two contracts
(internal; see ``versions``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

import attrs

from handoffs._errors import ContractDefinitionError
from handoffs.contracts._diff._findings import (
    Category,
    Direction,
    Finding,
    FindingCode,
    _finding,
)
from handoffs.contracts._diff._schemas import _key, _short
from handoffs.contracts._fields import MISSING


def _shown(value: Any) -> str:
    """An ``if_missing`` value of a policy document as the finding shows it."""
    if value is MISSING:
        return "none (fail closed)"
    if value is None:
        return "null (absent: known not to apply)"
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
