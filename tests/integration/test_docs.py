"""Every ```python block in README.md and docs/**/*.md runs: in order, one namespace per
page.

A page about an optional extra declares the modules it needs on its first line,
``<!-- requires: agents, langgraph -->``; without them installed its blocks are skipped
(CI installs every extra, so they run there).
"""

from __future__ import annotations

import ast
import re
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# A fence opening with exactly ``python`` (attributes after it are allowed), up to the
# closing fence at the same indentation.
_BLOCK = re.compile(r"^(?P<indent>[ \t]*)```python\b[^\n]*\n(?P<code>.*?)^(?P=indent)```[ \t]*$",
                    re.DOTALL | re.MULTILINE)
_REQUIRES = re.compile(r"\A<!--\s*requires:\s*(?P<modules>[\w., ]+?)\s*-->")


def python_blocks(text: str) -> list[tuple[int, str]]:
    """``(line, code)`` of each ```python block, dedented by its fence's indentation."""
    blocks = []
    for match in _BLOCK.finditer(text):
        indent = len(match["indent"])
        code = "\n".join(line[indent:] for line in match["code"].splitlines())
        line = text.count("\n", 0, match.start("code")) + 1
        blocks.append((line, code))
    return blocks


def test_requires_line() -> None:
    match = _REQUIRES.match("<!-- requires: agents, langgraph -->\n# Title\n")
    assert match is not None
    assert [m.strip() for m in match["modules"].split(",")] == ["agents", "langgraph"]
    assert _REQUIRES.match("# Title\n<!-- requires: agents -->") is None


def test_block_extraction() -> None:
    text = ("x\n```python\na = 1\n```\n```console\n$ no\n```\n"
            "  ```python title='t'\n  b = 2\n  ```\n")
    assert python_blocks(text) == [(3, "a = 1"), (9, "b = 2")]


# The pages with something to run (a page without a python block has no test, rather
# than a test that always skips).
PAGES = [page for page in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
         if python_blocks(page.read_text(encoding="utf-8"))]


def test_the_pages_are_found() -> None:
    names = {str(page.relative_to(ROOT)) for page in PAGES}
    assert {"README.md", "docs/tutorial/first-contract.md", "docs/how-to/gate-mcp.md"} <= names
    assert "docs/reference/cli.md" not in names          # no python block: no test item


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = page.read_text(encoding="utf-8")
    blocks = python_blocks(text)
    requires = _REQUIRES.match(text)
    for required in requires["modules"].split(",") if requires else ():
        pytest.importorskip(required.strip())
    # A real module, so that classes defined on the page resolve their annotations,
    # pickle and repr like ordinary code; files the page writes land in tmp_path.
    name = "docs_" + re.sub(r"\W", "_", str(page.relative_to(ROOT).with_suffix("")))
    module = types.ModuleType(name)
    module.__file__ = str(page)
    monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.chdir(tmp_path)
    for line, code in blocks:
        compiled = compile("\n" * (line - 1) + code, str(page), "exec")
        exec(compiled, module.__dict__)  # noqa: S102 - running the docs is the test


def test_the_readme_example_is_short() -> None:
    """The README's first example (a user's contract, signed by a Sender, gated by a
    receiver) stays at most 20 lines besides its imports; it runs above."""
    line, code = python_blocks((ROOT / "README.md").read_text(encoding="utf-8"))[0]
    tree = ast.parse(code)
    imports = {n for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)
               for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)}
    lines = [n for n, text in enumerate(code.splitlines(), start=1)
             if text.strip() and n not in imports]
    assert len(lines) <= 20, f"README.md:{line}: {len(lines)} lines besides the imports"
    names = {type(node).__name__ for node in ast.walk(tree)}
    assert "ClassDef" in names
    assert "Sender(" in code
    assert "StrictContractReceiver(gate).receive(message)" in code
