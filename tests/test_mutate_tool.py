"""tools/mutate.py finds its mutants, and every mutant is a real, compilable change."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
_SPEC = importlib.util.spec_from_file_location("mutate", ROOT / "tools" / "mutate.py")
assert _SPEC is not None
assert _SPEC.loader is not None
mutate = importlib.util.module_from_spec(_SPEC)
sys.modules["mutate"] = mutate
_SPEC.loader.exec_module(mutate)


MUTANTS = mutate.discover()


def test_every_named_mutant_of_issue_9_is_found_exactly_once() -> None:
    named = [m for m in MUTANTS if m.named]
    assert len(named) == len(mutate.NAMED) == 5
    missing = [m.where for m in named if not m.path]
    assert not missing, f"update NAMED in tools/mutate.py: {missing}"


def _compiles_and_changes(mutants: list[Any]) -> None:
    for mutant in mutants:
        original = (ROOT / mutant.path).read_text(encoding="utf-8")
        changed = mutate.mutated_source(mutant)
        assert ast.dump(ast.parse(changed)) != ast.dump(ast.parse(original)), mutant
        compile(changed, mutant.path, "exec")


def test_the_named_mutants_and_one_per_function_compile_and_change_their_module() -> None:
    assert {m.area for m in MUTANTS} >= {"signing", "proofs", "replay store"}
    first = {m.where.split(":")[0]: m for m in reversed(MUTANTS) if not m.named}
    _compiles_and_changes([m for m in MUTANTS if m.named] + list(first.values()))


@pytest.mark.slow
def test_every_mutant_compiles_and_changes_its_module() -> None:
    _compiles_and_changes(MUTANTS)


def test_each_mutant_maps_to_its_function_for_test_selection() -> None:
    for mutant in MUTANTS:
        path, _, name = mutate.function_key(mutant).partition("::")
        assert path == mutant.path
        assert name, mutant
