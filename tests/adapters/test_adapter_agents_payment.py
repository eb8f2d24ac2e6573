"""The agents experiment (examples/agents_payment.py) runs, and its docs page shows what it
measures."""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path

import pytest

pytest.importorskip("agents")

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "examples" / "agents-payment.md"
SIZE = 9  # the input-size column: receipt ids and proof values vary by a few characters


def _cells(table: str) -> list[list[str]]:
    rows = [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| `")]
    return [[cell.strip() for i, cell in enumerate(row) if i != SIZE] for row in rows]


def test_the_experiment_and_its_page_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))  # examples/ is imported from the repository root
    example = importlib.import_module("examples.agents_payment")
    outcomes = asyncio.run(example.run_experiment())
    rows = example.summarise(outcomes)
    full, alone = rows
    assert (full["arm"], alone["arm"]) == ("full_history", "receipt_only")
    for row in rows:
        assert (row["agreement"], row["regret"], row["hard_violations"]) == (1.0, 0.0, 0)
        assert row["gate_refused"] == {"readback-mismatch": 1}
        assert row["injected_caught"] == 1
    assert (full["owner_input_items_median"], alone["owner_input_items_median"]) == (3, 1)
    assert alone["owner_input_chars_median"] < full["owner_input_chars_median"]
    injected = [o for o in outcomes if o.injected]
    assert all(o.handled_by == "escalation" and o.chosen == "ESCALATE" for o in injected)
    assert _cells(example.render(rows)) == _cells(PAGE.read_text(encoding="utf-8"))
