"""The agents experiment (examples/agents_payment.py) runs, and its docs page shows what it
measures."""

from __future__ import annotations

import asyncio
import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from chat_server import completion, handover_policy, sequence, serving
from handoffs.examples.payment import synthetic_cases

pytest.importorskip("agents")

ROOT = Path(__file__).parents[3]
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


# ------------------------------------------- a language model as the case owner

def _example(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(ROOT))
    return importlib.import_module("examples.agents_payment")


def test_a_model_case_owner_over_http(monkeypatch: pytest.MonkeyPatch) -> None:
    # The server is tests/chat_server.py: real HTTP on 127.0.0.1, a scripted "model"
    # (the remote provider is the only stand-in) that applies the payment policy to the
    # last verified receipt in the conversation.
    example = _example(monkeypatch)
    monkeypatch.setenv("AGENTS_TEST_KEY", "sk-test")
    with serving(handover_policy) as server:
        model = example.OwnerModel(base_url=server.url, route="owner-model",
                                   api_key_env="AGENTS_TEST_KEY")
        outcomes = asyncio.run(example.run_experiment(model))
    rows = example.summarise(outcomes, model)
    for row in rows:
        assert (row["agreement"], row["regret"], row["hard_violations"]) == (1.0, 0.0, 0)
        assert row["gate_refused"] == {"readback-mismatch": 1}
        assert (row["owner_model"], row["owner_failed_closed"]) == ("owner-model", 0)
    # One call per case-owner run (the refused injection goes to the desk, not the model).
    assert len(server.requests) == sum(r["case_owner_runs"] for r in rows) == 54
    used = [handover_policy(b)[2]["usage"] for b in server.requests]
    assert sum(r["owner_tokens"] for r in rows) == sum(u["total_tokens"] for u in used)
    for body, headers in zip(server.requests, server.headers, strict=True):
        assert (body["model"], body["temperature"], body["seed"], body["max_tokens"]) == (
            "owner-model", 0.0, 0, 32)
        assert body["response_format"]["json_schema"]["schema"]["properties"]["action"][
            "enum"] == ["RELEASE", "HOLD", "REJECT_DUPLICATE", "ESCALATE"]
        assert body["messages"][0] == {"role": "system", "content": example.OWNER_INSTRUCTIONS}
        assert headers["authorization"] == "Bearer sk-test"
    # What the model reads is the channel: the handover alone, or the whole history.
    alone = [len(b["messages"]) for b in server.requests[27:]]
    full = [len(b["messages"]) for b in server.requests[:27]]
    assert set(alone) == {2}
    assert min(full) > 2
    assert "dossier" not in server.requests[27]["messages"][1]["content"]
    assert example.render(rows).count("`owner-model`") == 2


@pytest.mark.parametrize(("reply", "reason"), [
    ((200, {}, completion(json.dumps({"action": "MAYBE"}))), "invalid-action"),
    ((200, {}, completion("RELEASE, I think")), "malformed-answer"),
    ((500, {}, {"error": {"message": "down"}}), "model-error"),
])
def test_a_model_case_owner_fails_closed(monkeypatch: pytest.MonkeyPatch, reply: Any,
                                         reason: str) -> None:
    example = _example(monkeypatch)
    routine = [c for c in synthetic_cases() if c.case_id == "routine-01"]
    with serving(sequence(reply)) as server:
        model = example.OwnerModel(base_url=server.url, route="owner-model", max_retries=0)
        outcomes = asyncio.run(example.run_experiment(model, cases=routine))
    assert len(server.requests) == 2  # one case, two arms
    for outcome in outcomes:
        assert (outcome.reference, outcome.chosen) == ("RELEASE", "ESCALATE")
        assert outcome.owner_failed_closed == reason
    [row, _] = example.summarise(outcomes, model)
    assert (row["owner_failed_closed"], row["hard_violations"]) == (1, 0)
