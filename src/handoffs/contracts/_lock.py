"""Released contract versions are immutable: the checked-in schema and policy document
of a version lock what it decides.

``schemas/<name>/<version>.json`` (the receipt schema) and
``schemas/<name>/<version>.policy.json`` (the policy document, with the contract
fingerprint) are written once, when the version is first exported. From then on the
version is *released*: :func:`lock_problems` compares the definition in code with the
files, and a changed fingerprint is a :class:`LockProblem` that names every finding
(:meth:`~handoffs.contracts.versions.ContractDiff.between_policies`) and the version to
publish instead, with the bump the findings require. Nothing here ever rewrites a
released version's meaning: :func:`export_release` writes missing files and
formatting-only changes, never a changed definition.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final, Literal

import attrs

from handoffs._errors import HandoffsError, ReleasedVersionChanged
from handoffs._json import digest
from handoffs._schemas import render_json_schema
from handoffs.contracts._contract import Contract
from handoffs.contracts._diff import (
    ContractDiff,
    VersionBumpError,
    next_version,
)
from handoffs.contracts._fingerprint import (
    document_fingerprint,
    policy_document,
    policy_path,
    render_policy_document,
)
from handoffs.contracts._schema import schema_path, to_json_schema

__all__ = [
    "LockProblem",
    "ReleasedVersionChanged",
    "export_release",
    "lock_problems",
]

ProblemKind = Literal["missing", "changed", "unreadable", "reformatted", "bump-too-small"]
_RANK: Final = {"none": 0, "patch": 1, "minor": 2, "major": 3}


@attrs.frozen
class LockProblem:
    """Why a contract version's checked-in files do not match its definition.

    Attributes:
        kind: ``missing`` (a file to write: nothing released is overwritten),
            ``reformatted`` (same content, other text: safe to rewrite), ``changed``
            (the released definition changed: publish a new version),
            ``bump-too-small`` (a new version whose changes since the latest released
            lower version need a larger bump), or ``unreadable`` (a checked-in file is
            not what export wrote).
        contract: the contract id.
        path: the file concerned.
        message: one line saying what and what to do.
        diff: for ``changed``, the findings from the released files to the definition.
        suggested_version: for ``changed``, the version to publish the change as.
    """

    kind: ProblemKind
    contract: str
    path: Path
    message: str
    diff: ContractDiff | None = None
    suggested_version: str | None = None

    @property
    def writable(self) -> bool:
        """Whether ``schema export`` may write the file (no released meaning changes)."""
        return self.kind in ("missing", "reformatted")


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return exc


def _changed(contract: Contract[Any, Any], path: Path, old: tuple[Any, Any],
             new: tuple[dict[str, Any], dict[str, Any]]) -> LockProblem:
    """The ``changed`` problem: ``old`` and ``new`` are (schema, policy document)."""
    (old_schema, old_policy), (new_schema, new_policy) = old, new
    found = (ContractDiff.between_policies(old_policy, new_policy, old_schema=old_schema,
                                           new_schema=new_schema)
             if old_policy is not None else ContractDiff.between_schemas(old_schema, new_schema))
    bump = found.release_bump
    suggested = found.next_version(contract.version)
    count = len(found.findings)
    what = (", ".join(f"{f.code} @ {f.json_path}" for f in found.findings[:3])
            + (f" and {count - 3} more" if count > 3 else "")) if count else (
        "the policy document differs where no finding looks (an order, a source digest)")
    message = (f"{contract.id} is released ({path}) and its definition changed: {what}. "
               f"A released version never changes: publish the change as "
               f"{contract.name}/{suggested} (a {bump} bump) and keep {contract.version}'s "
               "files as they are")
    if any(f.json_path.endswith(".cryptosuite") for f in found.findings):
        # Released before Contract.cryptosuites admitted every registered suite.
        message += ("; or, if only the admitted cryptosuites moved, keep the version as "
                    "released with Contract(..., cryptosuites=(\"eddsa-jcs-2022\",))")
    return LockProblem("changed", contract.id, path, message, found, suggested)


def _version_key(text: str) -> tuple[int, int, int] | None:
    parts = text.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1]), int(parts[2])


def _bump_problem(root: Path, contract: Contract[Any, Any], new_schema: dict[str, Any],
                  new_policy: dict[str, Any]) -> LockProblem | None:
    """For a version not yet exported: a problem when its changes since the latest
    released lower version (both files checked in) need a larger bump than it makes.
    """
    released = []
    for path in (root / contract.name).glob("*.policy.json"):
        version = path.name.removesuffix(".policy.json")
        key = _version_key(version)
        if key is not None and key < contract.version_key and path.with_name(
                f"{version}.json").is_file():
            released.append((key, version, path))
    if not released:
        return None
    _, version, path = max(released)
    old_policy, old_schema = _read(path), _read(path.with_name(f"{version}.json"))
    if not (isinstance(old_policy, dict) and isinstance(old_schema, dict)):
        return None  # reported when that version itself is checked
    try:
        found = ContractDiff.between_policies(old_policy, new_policy, old_schema=old_schema,
                                              new_schema=new_schema)
        found.check_version_bump()
    except VersionBumpError as exc:
        bump = found.required_bump if exc.required is None else exc.required
        first = next((f for f in found.findings if _RANK[f.bump] >= _RANK[bump]), None)
        why = f" (first: {first.code} @ {first.json_path})" if first else ""
        return LockProblem(
            "bump-too-small", contract.id, schema_path(root, contract),
            f"{contract.id} is not exported: its changes since the released {version} "
            f"need a {bump} bump{why}; publish them as {contract.name}/"
            f"{next_version(version, bump)}")  # type: ignore[arg-type]
    except HandoffsError:
        return None  # a malformed released file is reported when its version is checked
    return None


def _read_released(contract: Contract[Any, Any], schema_file: Path, policy_file: Path
                   ) -> tuple[Any, Any] | list[LockProblem]:
    """The checked-in (schema, policy document), ``None`` where absent, or the problems
    that make them unusable.
    """
    old_schema = _read(schema_file) if schema_file.is_file() else None
    old_policy = _read(policy_file) if policy_file.is_file() else None
    problems = [
        LockProblem("unreadable", contract.id, path,
                    f"{path} is not a JSON object ({value}); restore it from version control")
        for path, value in ((schema_file, old_schema), (policy_file, old_policy))
        if isinstance(value, Exception) or (value is not None and not isinstance(value, dict))
    ]
    if problems:
        return problems
    if old_policy is not None and document_fingerprint(old_policy) != old_policy.get(
            "fingerprint"):
        return [LockProblem("unreadable", contract.id, policy_file,
                            f"{policy_file} was edited by hand: its content does not give the "
                            "fingerprint it states; restore it from version control")]
    return old_schema, old_policy


def lock_problems(root: Path, contract: Contract[Any, Any]) -> list[LockProblem]:
    """Compare ``contract`` with its checked-in files under ``root``; ``[]`` when they
    match exactly.
    """
    schema_file, policy_file = schema_path(root, contract), policy_path(root, contract)
    new_schema = to_json_schema(contract)
    new_policy = policy_document(contract)
    schema_text, policy_text = render_json_schema(new_schema), render_policy_document(contract)
    read = _read_released(contract, schema_file, policy_file)
    if isinstance(read, list):
        return read
    old_schema, old_policy = read
    problems: list[LockProblem] = []
    if old_schema is None:
        if old_policy is not None:
            return [LockProblem("unreadable", contract.id, schema_file,
                                f"{schema_file} is missing beside its policy document; "
                                "restore it from version control")]
        too_small = _bump_problem(root, contract, new_schema, new_policy)
        if too_small is not None:
            return [too_small]
        return [LockProblem("missing", contract.id, schema_file,
                            f"missing: {schema_file} ({contract.id}, not yet exported)"),
                LockProblem("missing", contract.id, policy_file,
                            f"missing: {policy_file} ({contract.id}, not yet exported)")]
    same_schema = digest(old_schema) == digest(new_schema)
    same_policy = old_policy is None or old_policy["fingerprint"] == new_policy["fingerprint"]
    if not (same_schema and same_policy):
        return [_changed(contract, policy_file if old_policy is not None else schema_file,
                         (old_schema, old_policy), (new_schema, new_policy))]
    if schema_file.read_text(encoding="utf-8") != schema_text:
        problems.append(LockProblem("reformatted", contract.id, schema_file,
                                    f"reformatted: {schema_file} ({contract.id}, same content)"))
    if old_policy is None:
        problems.append(LockProblem(
            "missing", contract.id, policy_file,
            f"missing: {policy_file} ({contract.id}: the released schema has no policy "
            "document yet; exporting adds it, it overwrites nothing)"))
    elif policy_file.read_text(encoding="utf-8") != policy_text:
        problems.append(LockProblem("reformatted", contract.id, policy_file,
                                    f"reformatted: {policy_file} ({contract.id}, same content)"))
    return problems


def export_release(root: Path, contract: Contract[Any, Any]) -> dict[Path, bool]:
    """Write ``contract``'s missing (or reformatted) files under ``root``
    (``<root>/<name>/<version>.json`` and ``<version>.policy.json``); return each of the
    two files with whether it was written.

    Raises:
        ReleasedVersionChanged: a checked-in version's definition changed (nothing is
            written for it).
    """
    problems = lock_problems(root, contract)
    refused = [p for p in problems if not p.writable]
    if refused:
        raise ReleasedVersionChanged(refused)
    texts = {schema_path(root, contract): render_json_schema(to_json_schema(contract)),
             policy_path(root, contract): render_policy_document(contract)}
    written = dict.fromkeys(texts, False)
    for problem in problems:
        problem.path.parent.mkdir(parents=True, exist_ok=True)
        problem.path.write_text(texts[problem.path], encoding="utf-8")
        written[problem.path] = True
    return written
