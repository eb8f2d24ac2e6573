"""tools/mutate.py finds its mutants (or stops, loudly), every mutant is a real,
compilable change, tests are chosen by the lines they execute, and the harness runs a
mutant's tests on the mutant's own copy of ``src/``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

import pytest

from worlds.repo import ROOT, load_mutate, named_mutant

mutate = load_mutate()
MUTANTS = mutate.discover()


def test_every_named_mutant_of_issue_9_is_found_exactly_once() -> None:
    named = [m for m in MUTANTS if m.named]
    assert len(named) == len(mutate.NAMED) == 5
    assert all(m.path and m.old in (ROOT / m.path).read_text(encoding="utf-8") for m in named)


def test_the_checks_of_signing_proofs_pipeline_and_replay_stores_are_mutated() -> None:
    functions = {m.where.split(":")[0] for m in MUTANTS if not m.named}
    assert functions <= {f for target in mutate.TARGETS for f in target.functions}
    assert {"verify_receipt", "_verify_grant", "_check_profile", "verify", "expired",
            "_same", "MemoryReplayStore.first_seen", "SQLiteDecisionLog._claim"} <= functions


@pytest.mark.parametrize("change", ["function", "named", "tests"])
def test_a_target_that_moved_stops_the_tool_before_any_run(
        change: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    if change == "function":
        target = mutate.TARGETS[0]
        moved = mutate.Target(target.area, target.package, ("_no_such_check",), target.tests)
        monkeypatch.setattr(mutate, "TARGETS", (moved, *mutate.TARGETS[1:]))
        expected = "signing: _no_such_check is defined 0 times under src/handoffs/contracts"
    elif change == "named":
        gone = mutate.Named("gone", (("if this_is_not_in_src:", "if False:"),), ())
        monkeypatch.setattr(mutate, "NAMED", (*mutate.NAMED, gone))
        expected = "named mutant 'gone': no spelling occurs exactly once under src/"
    else:
        target = mutate.TARGETS[0]
        renamed = mutate.Target(target.area, target.package, target.functions,
                                ("tests/test_renamed_away.py",))
        monkeypatch.setattr(mutate, "TARGETS", (renamed, *mutate.TARGETS[1:]))
        expected = "test file tests/test_renamed_away.py does not exist"
    with pytest.raises(mutate.TargetMissing) as caught:
        mutate.discover()
    assert caught.value.problems == [expected]
    monkeypatch.setattr(sys, "argv", ["mutate.py", "--list"])
    assert mutate.main() == 2
    assert expected in capsys.readouterr().err


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


def test_each_mutant_names_the_lines_it_changes() -> None:
    for mutant in MUTANTS:
        first, last = mutant.lines
        source = (ROOT / mutant.path).read_text(encoding="utf-8").splitlines()
        assert 1 <= first <= last <= len(source), mutant
        if mutant.named:
            assert mutant.old.splitlines()[0] in source[first - 1]
        else:
            assert mutant.where.endswith(f":{first}") or "check" in mutant.what, mutant


def _named(label: str) -> Any:
    return named_mutant(MUTANTS, label)


def test_a_mutant_runs_only_the_tests_that_execute_its_lines_fastest_first() -> None:
    mutant = _named("receipt expiry <= → <")  # its two lines: the check and the raise
    first, last = mutant.lines
    assert last == first + 1
    calls = mutate.Coverage(
        {mutant.path: {first - 1: ["t::before"], first: ["t::slow", "t::fast"],
                       last: ["t::fast", "t::last"], last + 1: ["t::after"]}},
        {"t::slow": 2.0, "t::fast": 0.1, "t::last": 1.0})
    assert calls.tests(mutant) == ["t::fast", "t::last", "t::slow"]
    assert mutate.Coverage({}, {}).tests(mutant) == []


def test_a_killer_s_node_id_is_read_whole_from_the_log() -> None:
    log = ("tests/t.py F\nFAILED tests/t.py::test_x[a tuple] - AssertionError: a - b\n"
           "ERROR tests/u.py::test_y[ case-owner]\nFAILED tests/v.py::test_z\n")
    assert mutate.failed_tests(log) == [
        "tests/t.py::test_x[a tuple]", "tests/u.py::test_y[ case-owner]", "tests/v.py::test_z"]


def test_the_survivors_block_replaces_the_one_on_the_page(tmp_path: Path) -> None:
    mutant = _named("grant expiry <= → <")
    results = [mutate.Result(mutant, "survived", 1.0, 3),
               mutate.Result(_named("receipt expiry <= → <"), "killed", 1.0, 2, "t::x")]
    block = mutate.markdown(results, command="python tools/mutate.py", seconds=12.0, cpu=7.0)
    assert "**1 killed, 1 survived** (0 of them judged equivalent, which the score of " \
           "50.0 % leaves out)" in block
    assert f"| `{mutant.path}` `grant expiry <= → <` | if expired(grant.valid_until, now): " \
           "| **not killed**: a test gap |" in block
    page = tmp_path / "page.md"
    page.write_text(f"# T\n\n{mutate._BEGIN}\nold\n{mutate._END}\n\nafter\n", encoding="utf-8")
    mutate._write_markdown(str(page), block)
    text = page.read_text(encoding="utf-8")
    assert text.startswith(f"# T\n\n{mutate._BEGIN}\nMeasured on ")
    assert text.endswith(f"{mutate._END}\n\nafter\n")
    assert "old" not in text


def test_each_mutant_judged_equivalent_is_one_of_the_mutants() -> None:
    keys = [mutate._key(m) for m in MUTANTS]
    for key, reason in mutate.EQUIVALENT.items():
        assert keys.count(key) == 1, f"EQUIVALENT names no single mutant any more: {key}"
        assert reason
