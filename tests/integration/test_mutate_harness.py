"""tools/mutate.py's harness: a mutant's tests run on the mutant's own copy of ``src/`` in
processes forked from its server (the tool's in-process tests are in
``tests/unit/test_mutate_tool.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from worlds.repo import ROOT, load_mutate, named_mutant

mutate = load_mutate()
MUTANTS = mutate.discover()


def _named(label: str) -> Any:
    return named_mutant(MUTANTS, label)


def test_the_harness_runs_the_tests_on_the_mutant_and_the_control_on_the_original(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "tools"))  # the forked child imports mutate
    mutant = _named("grant expiry <= → <")
    test = "tests/unit/test_instants.py::test_a_grant_expires_at_its_valid_until"
    calls = mutate.Coverage({mutant.path: {mutant.lines[0]: [test]}}, {test: 0.5})
    runner = mutate.Runner(1, calls, 120.0)
    runner.control()  # the same test passes on an unmutated copy through the same harness
    (result,) = runner.run([mutant])
    assert (result.verdict, result.tests, result.killer) == ("killed", 1, test)
    assert runner.killers == {f"{mutant.path}::{mutant.where}": [test], mutant.path: [test]}


def test_a_mutant_that_breaks_a_test_module_s_import_is_killed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "tools"))  # the forked child imports mutate
    # Refusing every grant object: tests/unit/test_carried.py signs a receipt at import.
    (mutant,) = [m for m in mutate.discover() if m.where.startswith("AuthorityGrant.from_json")
                 and m.what == "check negated"][:1]
    test = "tests/unit/test_carried.py::test_the_decision_is_the_receivers_own"
    runner = mutate.Runner(1, mutate.Coverage({mutant.path: {mutant.lines[0]: [test]}},
                                              {test: 0.5}), 120.0)
    (result,) = runner.run([mutant])
    assert (result.verdict, result.killer) == ("killed", "tests/unit/test_carried.py")
