"""Every path a documentation page or a docstring names exists (issue #29: docs that
match the code).

A page that names ``tests/unit/test_layers.py``, ``benchmarks/gate.py`` or
``src/handoffs/receivers/_gate.py`` is checked against the checkout: a file moved or
removed fails here rather than leaving the page pointing nowhere. The architecture
page's module names (``_gate.py`` under its part) are checked in
``tests/unit/test_layers.py``, beside the import graph they describe.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The changelog and the design notes are history: they may name a file a later release
# removed.
HISTORY = {ROOT / "docs" / "explanation" / "design-notes.md"}
PAGES = sorted({*ROOT.joinpath("docs").rglob("*.md"), ROOT / "README.md"} - HISTORY)
# Fenced blocks are left out: a console transcript shows the paths of the user's own
# project (``schemas/refund-approval/1.0.0.json``), a toctree names pages relative to
# its folder, and the python blocks run (tests/integration/test_docs.py).
_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,}).*?^(?P=fence)[ \t]*$", re.DOTALL | re.MULTILINE)

# A repository path: a top-level folder of the checkout, then a file or folder name.
_PATH = re.compile(
    r"(?<![\w./-])(?:src|tests|docs|benchmarks|examples|tools|schemas)/[\w.@*-]+(?:/[\w.@*-]+)*/?")


def paths(text: str) -> set[str]:
    """The repository paths a page's prose names (globs and placeholders left out)."""
    found = set()
    for match in _PATH.finditer(_FENCE.sub("", text)):
        path = match.group(0).rstrip(".")
        if any(ch in path for ch in "*<>") or path.endswith("/..."):
            continue
        found.add(path)
    return found


def test_the_path_finder() -> None:
    text = ("see `tests/unit/test_layers.py`, benchmarks/gate.py and docs/reference/; "
            "not my_tests/x.py nor https://example.com/src/x.py, nor schemas/<name>/*.json"
            "\n```console\n$ handoffs schema export schemas/mine/1.0.0.json\n```\n")
    assert paths(text) == {"tests/unit/test_layers.py", "benchmarks/gate.py",
                           "docs/reference/"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_page_names_exists(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    missing = sorted(p for p in paths(text) if not (ROOT / p).exists())
    assert missing == []


@pytest.mark.parametrize("module", sorted(ROOT.joinpath("src", "handoffs").rglob("*.py")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_docstring_or_comment_names_exists(module: Path) -> None:
    """A docstring or comment that names a repository file (``tests/unit/test_x.py``)
    names one that exists."""
    text = module.read_text(encoding="utf-8")
    missing = sorted(p for p in paths(text) if not (ROOT / p).exists())
    assert missing == []
