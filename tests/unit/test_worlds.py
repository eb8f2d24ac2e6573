"""No test module imports another test module: what several share is a world in
``tests/worlds`` (or a fixture in a ``conftest.py``), so that each test module can be
read, run and changed on its own (issue #29)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
TEST_MODULES = {path.stem for path in TESTS.rglob("test_*.py")}
# mypy reads this file, as the lines a type checker must refuse; pytest never imports it.
TYPE_CHECK_INPUTS = {TESTS / "integration" / "typing" / "must_fail.py"}


def imported_test_modules(path: Path) -> list[str]:
    """The test modules ``path`` imports (``from test_x import ...``, ``import test_x``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [name for name in names if name.split(".")[0] in TEST_MODULES]
    return found


def test_no_test_module_imports_another() -> None:
    bad = {str(path.relative_to(TESTS)): imported
           for path in sorted(TESTS.rglob("*.py")) if path not in TYPE_CHECK_INPUTS
           if (imported := imported_test_modules(path))}
    assert bad == {}


def test_the_scan_sees_an_import_of_a_test_module(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from test_gate import WORLD\nimport test_receipts as pump\n"
                     "from worlds.gate import WORLD\n")
    assert imported_test_modules(probe) == ["test_gate", "test_receipts"]
