"""The diff of two receipt JSON Schemas over the subset the schema generator emits: the
``WIRE`` findings (internal; see ``versions``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from handoffs._errors import ContractDefinitionError
from handoffs._json import canonical_bytes
from handoffs.contracts._diff._findings import (
    _SCHEMA_ID,
    Category,
    Direction,
    Finding,
    FindingCode,
    _combine,
    _finding,
    _split_id,
)

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
