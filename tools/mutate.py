"""Targeted mutation testing of the checks that guard trust.

Each mutant is one small change to a check in the security core — a comparison
flipped (``<=`` ↔ ``<``, ``==`` ↔ ``!=``, ``in`` ↔ ``not in``), ``+`` ↔ ``-``,
``and`` ↔ ``or``, a ``not`` dropped, a check's condition negated, or a check (an
``if`` that raises or returns) dropped — plus the *named* mutants that an audit found
the suite missing (issue 9). Every target function and every named mutant must be
found exactly once, and every listed test file must exist: otherwise the tool stops
before running anything (the code moved: update ``TARGETS`` or ``NAMED``).

For every mutant the tool copies ``src/`` to its own temporary directory, applies the
change there (the work tree is never touched), and runs the tests that execute the
mutated lines with the mutant first on the import path, stopping at the first failure
and with a time limit. The tests are chosen by one coverage run of the unmutated
selection (coverage.py, one dynamic context per test, threads included), so a mutant
runs only the tests that execute its lines, fastest first. A test that reaches the code
only in another process is not chosen. Each mutant's pytest runs in a process forked
from a server that has already imported pytest, its plugins and the libraries the
tests stand on (never ``handoffs``: it is imported in the child, from the mutant's
copy), so a mutant costs its tests and the collection of their files, not a fresh
interpreter. ``--jobs N`` runs N mutants at once, each in its own copy, temporary
directory and process group. A mutant is *killed* when the tests fail (or time out),
and *survives* when they pass.

Run: ``python tools/mutate.py [--jobs N] [--timeout S] [--only TEXT] [--list]
[--markdown FILE]``. It prints one line per mutant and
``killed: K, survived: S, score: P %``; ``--markdown`` also writes the survivors as the
Markdown table of ``docs/explanation/testing.md``. It exits 1 when a named mutant
survives or the score falls below ``--break``, as Stryker's "break" threshold does,
and 2 when a target cannot be found.

Hypothesis runs under the derandomised ``mutation`` profile (``tests/conftest.py``)
so that a run's verdicts are reproducible.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import multiprocessing
import multiprocessing.connection
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# The test files run (and traced) for each area; every one must exist.
SIGNING_TESTS = ("tests/unit/test_hostile.py", "tests/unit/test_receipts.py",
                 "tests/unit/test_gate.py", "tests/unit/test_instants.py",
                 "tests/unit/test_sender.py", "tests/unit/test_verify_honest.py",
                 "tests/unit/test_fingerprint.py")
PROOF_TESTS = ("tests/unit/test_proofs.py", "tests/unit/test_hostile.py",
               "tests/unit/test_keys.py", "tests/unit/test_instants.py",
               "tests/unit/test_cryptosuites.py", "tests/unit/test_ed25519_libraries.py")
PIPELINE_TESTS = ("tests/unit/test_gate.py", "tests/unit/test_hostile.py",
                  "tests/unit/test_hostile_input.py", "tests/unit/test_receivers.py",
                  "tests/unit/test_carried.py")
PARSE_TESTS = ("tests/unit/test_compiled.py", "tests/unit/test_json.py",
               "tests/unit/test_one_path.py", "tests/unit/test_hostile.py",
               "tests/unit/test_hostile_input.py", "tests/unit/test_gate.py")
REPLAY_TESTS = ("tests/unit/test_decision_log.py", "tests/integration/test_replay_stores.py",
                "tests/unit/test_gate.py", "tests/unit/test_instants.py")


@dataclass(frozen=True)
class Target:
    """Functions (qualified names) whose checks are mutated, each defined in exactly one
    module under ``package`` (so the table survives a module being split or renamed).
    """

    area: str
    package: str
    functions: tuple[str, ...]
    tests: tuple[str, ...]


@dataclass(frozen=True)
class Named:
    """A mutant named by an audit: the first ``(old, new)`` spelling whose ``old`` occurs
    exactly once under ``src/`` is applied (a spelling per layout of the code).
    """

    label: str
    spellings: tuple[tuple[str, str], ...]
    tests: tuple[str, ...]


TARGETS = (
    Target("signing", "src/handoffs/contracts",
           ("AuthorityGrant.from_json", "verify_receipt", "_verify_grant", "_check_covers"),
           SIGNING_TESTS),
    Target("proofs", "src/handoffs/integrity",
           ("_signature_bytes", "_check_profile", "verify", "_verify_one"), PROOF_TESTS),
    Target("instants", "src/handoffs", ("expired", "stale", "check_addressed"), SIGNING_TESTS),
    Target("pipeline", "src/handoffs/receivers",
           ("check_schema", "_same", "Gate._parse_step", "Gate._proofs_step"), PIPELINE_TESTS),
    Target("parse", "src/handoffs", ("_fast_loads", "_exact_parse", "_too_deep", "_simple",
                                     "float_free"), PARSE_TESTS),
    Target("replay store", "src/handoffs/receivers",
           ("MemoryReplayStore.first_seen", "SQLiteDecisionLog.first_seen",
            "SQLiteDecisionLog._claim", "SQLiteDecisionLog._prune"), REPLAY_TESTS),
)

_SLACK = " + __import__('datetime').timedelta(seconds=1)"
NAMED = (
    Named("receipt expiry <= → <", (
        ("if receipt.valid_until <= now:\n        raise ProofError(",
         "if receipt.valid_until < now:\n        raise ProofError("),
        ("if expired(receipt.valid_until, now):\n        raise ProofError(",
         "if receipt.valid_until < now:\n        raise ProofError("),
        ("if expired(valid_until, now):\n        raise ProofError(",
         "if valid_until < now:\n        raise ProofError("),
    ), SIGNING_TESTS),
    Named("grant expiry <= → <", (
        ("if grant.valid_until <= now:", "if grant.valid_until < now:"),
        ("if expired(grant.valid_until, now):", "if grant.valid_until < now:"),
    ), SIGNING_TESTS),
    Named("one second of slack in 'validity exceeds grant'", (
        ("if receipt.valid_until > grant.valid_until:",
         f"if receipt.valid_until > grant.valid_until{_SLACK}:"),
    ), SIGNING_TESTS),
    Named("grant issuer's policy-service role not checked", (
        ("if POLICY_SERVICE_ROLE not in issuer_proof.roles:", "if False:"),
    ), SIGNING_TESTS),
    Named("SQLite replay pruning with the wrong sign", (
        ("_stamp(now - _PRUNE_MARGIN)", "_stamp(now + _PRUNE_MARGIN)"),
        ('seconds = f"-{self.retain.total_seconds():.6f} seconds"',
         'seconds = f"+{self.retain.total_seconds():.6f} seconds"'),
    ), REPLAY_TESTS),
)

_SWAPS: dict[type[ast.AST], type[ast.AST]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.Add: ast.Sub, ast.Sub: ast.Add,
    ast.And: ast.Or, ast.Or: ast.And,
}
_SYMBOL = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
           ast.NotEq: "!=", ast.In: "in", ast.NotIn: "not in", ast.Is: "is",
           ast.IsNot: "is not", ast.Add: "+", ast.Sub: "-", ast.And: "and", ast.Or: "or"}


@dataclass(frozen=True)
class Mutant:
    """One change: ``mutated_source`` turns the module's source into the mutant's.
    ``lines`` (first, last) are the original lines of the changed code: a test that
    executes none of them cannot notice the change.
    """

    area: str
    path: str
    where: str  # function and line
    what: str
    tests: tuple[str, ...]
    named: bool
    lines: tuple[int, int]
    # For AST mutants: (function, ordinal of the node in the walk, operation, index).
    site: tuple[str, int, str, int] | None = None
    old: str = ""
    new: str = ""


class TargetMissing(SystemExit):
    """A target function, named mutant or test file is not where ``TARGETS`` or
    ``NAMED`` says (exit status 2, before any mutant runs).
    """

    def __init__(self, problems: list[str]) -> None:
        super().__init__(2)
        self.problems = problems

    def __str__(self) -> str:
        return "mutate: " + "; ".join(self.problems) + " (update TARGETS or NAMED in " \
            "tools/mutate.py)"


# ------------------------------------------------------------------ finding mutants


def _is_check(node: ast.If) -> bool:
    """An ``if`` without ``else`` whose body ends by raising or returning."""
    return not node.orelse and isinstance(node.body[-1], ast.Raise | ast.Return)


def _sites(function: ast.AST) -> Iterator[tuple[int, ast.AST, str, int, str]]:
    """(ordinal, node, operation, index, description) for every mutation in a function."""
    for ordinal, node in enumerate(ast.walk(function)):
        if isinstance(node, ast.Compare):
            for index, op in enumerate(node.ops):
                if type(op) in _SWAPS:
                    new = _SWAPS[type(op)]
                    yield (ordinal, node, "swap", index,
                           f"{_SYMBOL[type(op)]} → {_SYMBOL[new]}")
        elif isinstance(node, ast.BinOp | ast.BoolOp) and type(node.op) in _SWAPS:
            yield (ordinal, node, "swap", -1,
                   f"{_SYMBOL[type(node.op)]} → {_SYMBOL[_SWAPS[type(node.op)]]}")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield ordinal, node, "drop-not", -1, "not dropped"
        elif isinstance(node, ast.If) and _is_check(node):
            yield ordinal, node, "negate", -1, "check negated"
            yield ordinal, node, "drop", -1, "check dropped"


def _span(node: ast.AST) -> tuple[int, int]:
    """The lines a test must execute for the mutant of ``node`` to run: an ``if``'s
    condition, or the expression itself.
    """
    expr = node.test if isinstance(node, ast.If) else node
    first = getattr(expr, "lineno", 0)
    return first, getattr(expr, "end_lineno", None) or first


@functools.cache
def _names(path: Path) -> frozenset[str]:
    return frozenset(n for n, _ in _all_functions(ast.parse(path.read_text(encoding="utf-8"))))


def _defining(package: str, name: str) -> list[Path]:
    """The modules under ``package`` that define the function ``name``."""
    return [path for path in sorted((ROOT / package).rglob("*.py")) if name in _names(path)]


def _all_functions(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    def visit(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.AST]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                yield from visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield f"{prefix}{child.name}", child

    return visit(tree, "")


def discover() -> list[Mutant]:
    """Every mutant of the targets and every named mutant, in a fixed order.

    Raises:
        TargetMissing: a target function is defined nowhere or more than once under its
            package, no spelling of a named mutant occurs exactly once under ``src/``,
            or a listed test file does not exist. Nothing is skipped silently.
    """
    problems: list[str] = []
    mutants: list[Mutant] = []
    tests = {t for target in TARGETS for t in target.tests} | {
        t for named in NAMED for t in named.tests}
    problems += [f"test file {t} does not exist" for t in sorted(tests)
                 if not (ROOT / t).is_file()]
    for target in TARGETS:
        for name in target.functions:
            paths = _defining(target.package, name)
            if len(paths) != 1:
                problems.append(f"{target.area}: {name} is defined {len(paths)} times under "
                                f"{target.package}")
                continue
            path = str(paths[0].relative_to(ROOT))
            tree = ast.parse(paths[0].read_text(encoding="utf-8"))
            function = dict(_all_functions(tree))[name]
            for ordinal, node, operation, index, what in _sites(function):
                line = getattr(node, "lineno", 0)
                mutants.append(Mutant(target.area, path, f"{name}:{line}", what,
                                      target.tests, False, _span(node),
                                      (name, ordinal, operation, index)))
    sources = {p: p.read_text(encoding="utf-8") for p in sorted((ROOT / "src").rglob("*.py"))}
    for named in NAMED:
        for old, new in named.spellings:
            hits = [p for p, text in sources.items() for _ in range(text.count(old))]
            if len(hits) == 1:
                text = sources[hits[0]]
                first = text.count("\n", 0, text.index(old)) + 1
                mutants.append(Mutant("named (issue 9)", str(hits[0].relative_to(ROOT)),
                                      named.label, old, named.tests, True,
                                      (first, first + old.count("\n")), old=old, new=new))
                break
        else:
            problems.append(f"named mutant {named.label!r}: no spelling occurs exactly once "
                            "under src/")
    if problems:
        raise TargetMissing(problems)
    return mutants


def mutated_source(mutant: Mutant) -> str:
    """The source of the mutated module."""
    source = (ROOT / mutant.path).read_text(encoding="utf-8")
    if mutant.site is None:
        return source.replace(mutant.old, mutant.new, 1)
    function_name, ordinal, operation, index = mutant.site
    tree = ast.parse(source)
    function = dict(_all_functions(tree))[function_name]
    node = next(n for i, n in enumerate(ast.walk(function)) if i == ordinal)
    if operation == "swap" and isinstance(node, ast.Compare):
        node.ops[index] = _SWAPS[type(node.ops[index])]()
    elif operation == "swap" and isinstance(node, ast.BinOp | ast.BoolOp):
        node.op = _SWAPS[type(node.op)]()  # type: ignore[assignment]
    elif operation == "drop-not" and isinstance(node, ast.UnaryOp):
        _replace(function, node, node.operand)
    elif operation == "negate" and isinstance(node, ast.If):
        node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
    elif operation == "drop" and isinstance(node, ast.If):
        node.test = ast.Constant(value=False)
    else:  # pragma: no cover - _sites yields only the combinations above
        raise AssertionError(mutant)
    return ast.unparse(ast.fix_missing_locations(tree))


def _replace(root: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in ast.walk(root):
        for name, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, name, new)
                return
            if isinstance(value, list) and any(item is old for item in value):
                value[value.index(old)] = new
                return


# ------------------------------------------------------------------- running them


@dataclass(frozen=True)
class Result:
    """The verdict on one mutant: "killed", "timeout" (counted as killed), "survived",
    "equivalent" (a survivor judged equivalent in ``EQUIVALENT``, not counted) or
    "error" (the harness failed: pytest could not run; the tool exits 2).
    """

    mutant: Mutant
    verdict: str
    seconds: float
    tests: int
    killer: str = ""


# Imported once by the fork server, so that a mutant's pytest does not pay for them.
# None of them may import handoffs (each child checks). An absent one is skipped.
_PRELOAD = ("pytest", "_pytest.python", "_pytest.fixtures", "_pytest.assertion.rewrite",
            "hypothesis", "hypothesis.strategies", "attrs", "click", "httpx", "orjson",
            "rfc8785", "based58", "jsonschema_rs", "cryptography.exceptions",
            "cryptography.hazmat.primitives.asymmetric.ed25519",
            "cryptography.hazmat.primitives.serialization")
_UNSOUND = 97  # a child found handoffs imported from somewhere else than its copy
_CPU = "mutate: cpu seconds "  # the child's last line: its CPU time and its children's
_PYTEST_ARGS = ("-q", "-x", "-p", "no:cacheprovider", "--no-header", "-rfE", "--tb=line",
                "-m", "not slow", "-n", "0")  # in-process: the mutant is patched here
# The fork server imported pytest's plugins before pytest could rewrite their asserts
# (which only their own code would use); it says so, and warnings are errors here.
_CHILD_ARGS = ("-W", "ignore::pytest.PytestAssertRewriteWarning")


def _preload() -> list[str]:
    plugins = [ep.module for ep in importlib.metadata.entry_points(group="pytest11")]
    return [*_PRELOAD, *plugins]


def _environment(src: Path) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join((str(src), str(ROOT / "tools"))),
            "HYPOTHESIS_PROFILE": "mutation", "PYTHONDONTWRITEBYTECODE": "1"}


def _child(src: str, log: str, args: list[str]) -> None:
    """Run pytest on ``args`` with ``handoffs`` imported from ``src`` (in a forked child)."""
    os.setpgid(0, 0)  # a time-out kills the whole group: the tests' own processes too
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    if any(name == "handoffs" or name.startswith("handoffs.") for name in sys.modules):
        print("mutate: handoffs was imported before the mutant's copy", flush=True)
        os._exit(_UNSOUND)
    os.environ.update(_environment(Path(src)))
    sys.dont_write_bytecode = True
    installed = str(ROOT / "src")
    sys.path[:] = [src, str(ROOT / "tools"),
                   *(p for p in sys.path if os.path.abspath(p) != installed)]
    os.chdir(ROOT)
    import pytest

    try:
        code = int(pytest.main(args))
    except BaseException as exc:  # pytest itself failed: a harness error, not a kill
        print(f"mutate: pytest raised {exc!r}", flush=True)
        code = _UNSOUND
    imported = sys.modules.get("handoffs")
    if imported is not None and not str(imported.__file__).startswith(src):
        print(f"mutate: handoffs came from {imported.__file__}, not {src}", flush=True)
        code = _UNSOUND
    used = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    print(f"{_CPU}{sum(u.ru_utime + u.ru_stime for u in used):.3f}")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


@dataclass
class _Running:
    mutant: Mutant | None  # None: the control run of the unmutated code
    process: Any
    scratch: tempfile.TemporaryDirectory[str]
    log: Path
    tests: int
    started: float
    deadline: float
    text: str = ""


def failed_tests(log: str) -> list[str]:
    """The node ids a pytest log's summary reports failed, in order: its lines read
    ``FAILED <node id> - <message>`` (or ``ERROR``), and a node id may hold spaces.
    """
    return [line.split(" ", 1)[1].split(" - ", 1)[0] for line in log.splitlines()
            if line.startswith(("FAILED ", "ERROR "))]


@dataclass
class Runner:
    """Runs mutants ``jobs`` at a time, each in a process forked from a server that
    has imported pytest and the libraries (``multiprocessing``'s forkserver).
    """

    jobs: int
    calls: Coverage
    timeout: float
    context: Any = field(init=False)
    # The tests that killed earlier mutants of each function, most recent first: they
    # run first on the next mutant of that function (the order only changes how soon
    # a failure is found, not which tests run).
    killers: dict[str, list[str]] = field(init=False, default_factory=dict)
    cpu: float = field(init=False, default=0.0)  # CPU seconds of every child so far

    def __post_init__(self) -> None:
        method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() \
            else "spawn"
        self.context = multiprocessing.get_context(method)
        if method == "forkserver":
            self.context.set_forkserver_preload(_preload())

    def _start(self, mutant: Mutant | None, tests: list[str], *, stop: bool = True) -> _Running:
        scratch = tempfile.TemporaryDirectory(prefix="handoffs-mutant-")
        root = Path(scratch.name)
        src = root / "src"
        shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__"))
        if mutant is not None:
            (root / mutant.path).write_text(mutated_source(mutant), encoding="utf-8")
        log = root / "pytest.log"
        args = [*(a for a in _PYTEST_ARGS if stop or a != "-x"), *_CHILD_ARGS,
                f"--basetemp={root / 'tmp'}", *tests]
        # Not a daemon: tests start processes of their own (a daemon may not).
        process = self.context.Process(target=_child, args=(str(src), str(log), args))
        process.start()
        # Four times what the tests took in the traced run (itself slowed by coverage),
        # plus a minute to start: a mutant that runs longer loops, on a loaded machine too.
        budget = min(self.timeout, 60.0 + 4.0 * sum(self.calls.durations.get(t, 1.0)
                                                    for t in tests))
        now = time.monotonic()
        return _Running(mutant, process, scratch, log, len(tests), now, now + budget)

    def _finish(self, run: _Running, *, timed_out: bool) -> tuple[str, str]:
        if timed_out:
            with contextlib.suppress(ProcessLookupError):  # ended meanwhile
                os.killpg(run.process.pid, signal.SIGKILL)
        run.process.join()
        text = run.log.read_text(encoding="utf-8", errors="replace") if run.log.exists() \
            else ""
        run.text = text
        run.scratch.cleanup()
        code = run.process.exitcode
        self.cpu += sum(float(line[len(_CPU):]) for line in text.splitlines()
                        if line.startswith(_CPU))
        failed = failed_tests(text)
        last = (text.strip().splitlines() or [""])[-1]
        if timed_out:
            return "timeout", ""
        if code == 0:
            return "survived", ""
        if code in (1, 2):  # tests failed, or collection broke (the mutant's import)
            return "killed", failed[0] if failed else last
        if code == 4 and failed and "ERROR: found no collectors for " in text:
            # Collection broke for tests named by id (a module that signs at import, say):
            # pytest calls that a usage error; the traced run collected the same ids.
            return "killed", failed[0]
        return "error", f"exit {code}: {last}"

    def control(self, tests: list[str] | None = None) -> None:
        """Run ``tests`` (by default the fastest traced test) on an unmutated copy
        through the same harness; exit 2 unless they pass with ``handoffs`` imported
        from the copy. Run on every test that killed a mutant, it shows that each kill
        was the mutant's doing and not the harness's.
        """
        if tests is None:
            tests = [min(self.calls.durations, key=lambda t: self.calls.durations[t])]
        if not tests:
            return
        run = self._start(None, tests, stop=False)
        run.process.join(max(self.timeout, run.deadline - time.monotonic()))
        verdict, detail = self._finish(run, timed_out=run.process.exitcode is None)
        if verdict != "survived":
            raise SystemExit(f"mutate: the harness's control run of {len(tests)} test(s) on "
                             f"the unmutated code did not pass ({verdict} {detail}):\n"
                             + run.text)

    def run(self, mutants: list[Mutant]) -> Iterator[Result]:
        """Yield each mutant's result as it finishes."""
        pending = list(reversed(mutants))
        running: dict[int, _Running] = {}
        try:
            yield from self._loop(pending, running)
        finally:  # stopped early (a time bound's SIGTERM, ^C): leave no tests running
            for run in running.values():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(run.process.pid, signal.SIGKILL)
                run.process.join()
                run.scratch.cleanup()

    def _loop(self, pending: list[Mutant], running: dict[int, _Running]) -> Iterator[Result]:
        while pending or running:
            while pending and len(running) < max(1, self.jobs):
                mutant = pending.pop()
                if _key(mutant) in EQUIVALENT:  # judged: no test can kill it, none runs
                    yield Result(mutant, "equivalent", 0.0, 0, "not run")
                    continue
                tests = self._ordered(mutant, self.calls.tests(mutant))
                if not tests:
                    yield Result(mutant, "survived", 0.0, 0, "no test runs it")
                    continue
                run = self._start(mutant, tests)
                running[run.process.sentinel] = run
            if not running:
                continue
            wait = max(0.0, min(r.deadline for r in running.values()) - time.monotonic())
            ready = set(multiprocessing.connection.wait(list(running), timeout=wait))
            now = time.monotonic()
            for sentinel in list(running):
                run = running[sentinel]
                if sentinel not in ready and now < run.deadline:
                    continue
                del running[sentinel]
                verdict, killer = self._finish(run, timed_out=sentinel not in ready)
                if run.mutant is not None:
                    if verdict == "killed" and killer:
                        for key in (_function(run.mutant), run.mutant.path):
                            recent = self.killers.setdefault(key, [])
                            recent[:] = [killer, *(t for t in recent if t != killer)][:8]
                    yield Result(run.mutant, verdict, now - run.started, run.tests, killer)

    def _ordered(self, mutant: Mutant, tests: list[str]) -> list[str]:
        """``tests`` with the recent killers of the mutant's function first, then those
        of its module.
        """
        chosen = set(tests)
        recent = [*self.killers.get(_function(mutant), []), *self.killers.get(mutant.path, [])]
        first = list(dict.fromkeys(t for t in recent if t in chosen))
        return [*first, *(t for t in tests if t not in first)]


def _function(mutant: Mutant) -> str:
    return f"{mutant.path}::{mutant.where.split(':')[0]}"


# -------------------------------------------------------- choosing tests: coverage.py


@dataclass(frozen=True)
class Coverage:
    """What one coverage run of the unmutated tests saw: per module, per line, the ids
    of the tests that executed it, and each test's duration.
    """

    lines: dict[str, dict[int, list[str]]]
    durations: dict[str, float]

    def tests(self, mutant: Mutant) -> list[str]:
        """The tests that execute one of the mutant's lines, fastest first."""
        first, last = mutant.lines
        by_line = self.lines.get(mutant.path, {})
        chosen = {t for line in range(first, last + 1) for t in by_line.get(line, ())}
        return sorted(chosen, key=lambda t: (self.durations.get(t, 0.0), t))


def _trace_key(files: list[str], modules: list[str]) -> str:
    """A digest of everything a trace depends on: the code, the tests, the selection."""
    digest = hashlib.sha256("\0".join([*files, "", *modules]).encode())
    for path in sorted([*(ROOT / "src").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:20]


def trace(mutants: list[Mutant], timeout: float, *, reuse: bool = False) -> Coverage:
    """Run the test files of ``mutants`` once, unmutated, under coverage.py with one
    dynamic context per test. Exits if a test fails (every mutant would look killed).
    With ``reuse``, a trace of exactly the same code, tests and selection is read from
    the temporary directory instead.
    """
    files = sorted({test for m in mutants for test in m.tests})
    modules = sorted({m.path for m in mutants})
    cached = Path(tempfile.gettempdir()) / f"handoffs-mutate-{_trace_key(files, modules)}.json"
    if reuse and cached.exists():
        return _coverage(json.loads(cached.read_text(encoding="utf-8")))
    with tempfile.TemporaryDirectory(prefix="handoffs-trace-") as scratch:
        out = Path(scratch) / "trace.json"
        env = {**os.environ, **_environment(ROOT / "src"), "MUTATE_TRACE": str(out),
               "MUTATE_MODULES": os.pathsep.join(str(ROOT / m) for m in modules)}
        with tempfile.NamedTemporaryFile("w", suffix=".args", delete=False) as argfile:
            argfile.write("\n".join(files))
        command = [sys.executable, "-m", "pytest", *_PYTEST_ARGS, "-p", "mutate",
                   f"--basetemp={Path(scratch) / 'tmp'}", f"@{argfile.name}"]
        command.remove("-x")
        try:
            done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True,  # noqa: S603
                                  text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise SystemExit(f"mutate: the traced run exceeded {timeout:.0f} s") from exc
        finally:
            os.unlink(argfile.name)
        if done.returncode != 0 or not out.exists():
            tail = "\n".join(done.stdout.strip().splitlines()[-15:])
            raise SystemExit(f"mutate: the unmutated tests fail (exit {done.returncode}):\n"
                             f"{tail}\n{done.stderr[-2000:]}")
        text = out.read_text(encoding="utf-8")
    if reuse:
        cached.write_text(text, encoding="utf-8")
    return _coverage(json.loads(text))


def _coverage(traced: dict[str, Any]) -> Coverage:
    return Coverage({path: {int(line): ids for line, ids in by_line.items()}
                     for path, by_line in traced["lines"].items()}, traced["durations"])


# ---------------------------------------- the coverage plugin (-p mutate, in pytest)


_COVERAGE: list[Any] = []
_DURATIONS: dict[str, float] = {}


def pytest_configure(config: Any) -> None:
    """Start coverage.py on the mutated modules, threads included (plugin hook)."""
    import coverage

    modules = os.environ["MUTATE_MODULES"].split(os.pathsep)
    cov = coverage.Coverage(data_file=None, include=modules, config_file=False,
                            concurrency=["thread"])
    cov.start()
    _COVERAGE.append(cov)


def pytest_runtest_protocol(item: Any, nextitem: Any) -> None:
    """Attribute what runs from here on to this test (plugin hook)."""
    _COVERAGE[0].switch_context(item.nodeid)


def pytest_runtest_logreport(report: Any) -> None:
    """Accumulate each test's duration (plugin hook)."""
    _DURATIONS[report.nodeid] = _DURATIONS.get(report.nodeid, 0.0) + report.duration


def pytest_unconfigure(config: Any) -> None:
    """Write, per module and line, the tests that executed it (plugin hook)."""
    cov = _COVERAGE[0]
    cov.stop()
    data = cov.get_data()
    lines: dict[str, dict[str, list[str]]] = {}
    for measured in data.measured_files():
        by_line = data.contexts_by_lineno(measured)
        lines[os.path.relpath(measured, ROOT)] = {
            str(line): sorted(c for c in contexts if c) for line, contexts in by_line.items()}
    Path(os.environ["MUTATE_TRACE"]).write_text(
        json.dumps({"lines": lines, "durations": _DURATIONS}), encoding="utf-8")


# ------------------------------------------------------------ survivors and the page

# Survivors judged equivalent (no test can tell them from the code as written), by
# (function, mutation, the stripped source line of the mutated node), with the reason:
# they are not run, not counted in the score, and listed with the reason. A survivor
# not listed here is a test gap. A key that matches no mutant any more is dropped by
# its test (tests/unit/test_mutate_tool.py).
EQUIVALENT: dict[tuple[str, str, str], str] = {
    ("_check_profile", "check dropped",
     "if len(proof) == len(_PRESENT):  # the six members every proof carries, and no other"): (
        "a shortcut, not a check: without it a proof of exactly the six required members "
        "takes the general path, which finds no expires, text option or previousProof and "
        "returns the same checked proof (its options flag only asks the same absent "
        "members again)"),
    ("float_free", "check dropped",
     "if key.search(raw) is None and opening.search(raw) is None and comma.search(raw) is None:"): (
        "a shortcut, not a check: the loop after it returns False only at `[`, `,` or `\":` "
        "before `-?[0-9]`, which is exactly the separator-digit pair whose absence it tests"),
}


def _key(mutant: Mutant) -> tuple[str, str, str]:
    source = (ROOT / mutant.path).read_text(encoding="utf-8").splitlines()
    return (mutant.where.split(":")[0], mutant.what.splitlines()[0],
            source[mutant.lines[0] - 1].strip())


_BEGIN, _END = "<!-- mutate: survivors -->", "<!-- /mutate: survivors -->"


def markdown(results: list[Result], *, command: str, seconds: float, cpu: float) -> str:
    """The survivors block of the testing page: what was run, when, and each survivor."""
    killed = sum(r.verdict in ("killed", "timeout") for r in results)
    left = [r for r in results if r.verdict in ("survived", "equivalent")]
    equivalent = sum(r.verdict == "equivalent" for r in results)
    areas = ", ".join(f"{area} {sum(r.mutant.area == area for r in results)}"
                      for area in dict.fromkeys(r.mutant.area for r in results))
    lines = [
        _BEGIN,
        f"Measured on {datetime.datetime.now(datetime.UTC).date().isoformat()} with "
        f"`{command}` ({len(results)} mutants: {areas}; {seconds:.0f} s on the machine "
        f"it ran on, the mutants' tests taking {cpu:.0f} CPU seconds): "
        f"**{killed} killed, {len(left)} survived** ({equivalent} of them judged "
        f"equivalent, which the score of {_score(results):.1f} % leaves out).",
        "",
    ]
    if left:
        lines += ["| where | mutant | reading |", "|---|---|---|"]
        for result in sorted(left, key=lambda r: (r.mutant.path, r.mutant.lines)):
            m = result.mutant
            reading = EQUIVALENT.get(_key(m), "**not killed**: a test gap")
            lines.append(f"| `{m.path}` `{m.where}` | {m.what.splitlines()[0]} | {reading} |")
    else:
        lines.append("No mutant survived.")
    lines.append(_END)
    return "\n".join(lines) + "\n"


def _write_markdown(path: str, block: str) -> None:
    if path == "-":
        sys.stdout.write(block)
        return
    page = Path(path)
    text = page.read_text(encoding="utf-8")
    if _BEGIN not in text or _END not in text:
        raise SystemExit(f"mutate: {path} has no {_BEGIN} ... {_END} block to replace")
    before, rest = text.split(_BEGIN, 1)
    after = rest.split(_END, 1)[1]
    page.write_text(before + block.rstrip("\n") + after, encoding="utf-8")


def _score(results: list[Result]) -> float:
    killed = sum(r.verdict in ("killed", "timeout") for r in results)
    survived = sum(r.verdict == "survived" for r in results)
    return 100.0 * killed / max(1, killed + survived)


def _terminate(signum: int, _: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through Runner.run, which stops its children


def main() -> int:
    """Run the mutants; exit 1 on a surviving named mutant or a low score, 2 when a
    target is missing or the harness fails.
    """
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="most seconds per mutant (less when its tests are quick)")
    parser.add_argument("--only", default="", help="only mutants whose line contains this")
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    parser.add_argument("--break", dest="threshold", type=float, default=80.0,
                        help="fail below this mutation score (percent)")
    parser.add_argument("--reuse-trace", action="store_true",
                        help="reuse the coverage run of exactly this code and these tests")
    parser.add_argument("--markdown", metavar="FILE",
                        help="write the survivors block into FILE (its "
                             f"{_BEGIN} block; '-': print it)")
    args = parser.parse_args()
    try:
        mutants = [m for m in discover()
                   if args.only in f"{m.area} {m.path} {m.where} {m.what}"]
    except TargetMissing as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.list:
        for mutant in mutants:
            print(f"{mutant.area:16} {mutant.where:40} {mutant.what.splitlines()[0]}")
        print(f"{len(mutants)} mutants")
        return 0
    signal.signal(signal.SIGTERM, _terminate)
    start = time.monotonic()
    calls = trace(mutants, args.timeout * 10, reuse=args.reuse_trace)
    traced = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"traced the unmutated tests in {time.monotonic() - start:.0f} s "
          f"({traced.ru_utime + traced.ru_stime:.0f} CPU seconds)", flush=True)
    runner = Runner(args.jobs, calls, args.timeout)
    runner.control()
    results: list[Result] = []
    for result in runner.run(mutants):
        m = result.mutant
        print(f"{result.verdict:10} {m.area:15} {m.where:38} {m.what.splitlines()[0]:26} "
              f"{result.tests:4} tests {result.seconds:5.1f}s {result.killer}", flush=True)
        results.append(result)
    killers = sorted({r.killer for r in results if r.verdict == "killed" and "::" in r.killer})
    runner.control(killers)
    print(f"the {len(killers)} tests that killed mutants pass on the unmutated code",
          flush=True)
    results.sort(key=lambda r: mutants.index(r.mutant))
    seconds = time.monotonic() - start
    survived = [r for r in results if r.verdict == "survived"]
    equivalent = [r for r in results if r.verdict == "equivalent"]
    errors = [r for r in results if r.verdict == "error"]
    killed = sum(r.verdict in ("killed", "timeout") for r in results)
    print(f"survivors ({len(survived)}):")
    for result in survived:
        print(f"  {result.mutant.path}  {result.mutant.where}  "
              f"{result.mutant.what.splitlines()[0]}")
    print(f"judged equivalent ({len(equivalent)}):")
    for result in equivalent:
        print(f"  {result.mutant.path}  {result.mutant.where}  "
              f"{result.mutant.what.splitlines()[0]}: {EQUIVALENT[_key(result.mutant)]}")
    print(f"{len(results)} mutants in {seconds:.0f} s (the mutants' tests: "
          f"{runner.cpu:.0f} CPU seconds)")
    print(f"killed: {killed}, survived: {len(survived)}, equivalent: {len(equivalent)}, "
          f"score: {_score(results):.1f} %")
    if args.markdown:
        command = "python tools/mutate.py " + " ".join(
            a for a in sys.argv[1:] if not a.startswith(("--markdown", "--reuse-trace"))
            and a != args.markdown)
        _write_markdown(args.markdown, markdown(results, command=command.strip(),
                                                seconds=seconds, cpu=runner.cpu))
    for result in errors:
        print(f"harness error on {result.mutant.where}: {result.killer}", file=sys.stderr)
    bad_named = [r for r in results if r.mutant.named and r.verdict not in ("killed", "timeout")]
    for result in bad_named:
        print(f"named mutant {result.verdict}: {result.mutant.where}", file=sys.stderr)
    if errors:
        return 2
    return 1 if bad_named or _score(results) < args.threshold else 0


if __name__ == "__main__":
    sys.exit(main())
