"""The LangGraph adapter's history sent to a chat model over real HTTP on 127.0.0.1 (the
scripted server of ``tests/chat_server.py``); its in-process tests are in
``tests/unit/adapters/test_adapter_langgraph.py``."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import ToolMessage, convert_to_openai_messages
from openai import OpenAI

from adapter_world import content_for, with_governance
from chat_server import completion, serving
from handoffs.contracts import Sender
from handoffs.receivers import StrictContractReceiver
from worlds.langgraph_topology import Topology


def _unanswered_calls(messages: list[dict[str, Any]]) -> list[str]:
    """Tool calls of assistant messages not answered by the tool messages right after
    (the rule OpenAI's chat completions enforce with HTTP 400)."""
    missing = []
    for at, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        answered = set()
        for after in messages[at + 1:]:
            if after.get("role") != "tool":
                break
            answered.add(after.get("tool_call_id"))
        missing += [c["id"] for c in message.get("tool_calls", ()) if c["id"] not in answered]
    return missing


def strict_history(body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    """A stand-in for a remote chat provider (real HTTP on 127.0.0.1): HTTP 400, as
    OpenAI answers, when an assistant tool call is left without its tool message."""
    missing = _unanswered_calls(body["messages"])
    if missing:
        return 400, {}, {"error": {"message": f"tool_call_ids did not have response "
                                              f"messages: {', '.join(missing)}"}}
    return 200, {}, completion("ok")


@pytest.mark.parametrize("form", ["tool", "two-node"])
@pytest.mark.parametrize("case", ["screening-03", "refused"])
def test_a_chat_model_downstream_gets_a_valid_history(
        form: str, case: str, signer: Sender[Any, Any],
        receiver: StrictContractReceiver) -> None:
    """Regression (#23): ``sender_node`` never answered the model's tool call with a
    ``ToolMessage``, so a real chat model downstream got an invalid history (OpenAI
    returns 400). Both forms answer it, on ACCEPT and on refusal."""
    arguments = (with_governance(content_for("routine-01")) if case == "refused"
                 else content_for(case))
    topology = Topology(arguments, signer=signer, receiver=receiver,
                        wire=(lambda text: text) if form == "two-node" else None)
    final = topology.run("routine-01" if case == "refused" else case)
    with serving(strict_history) as server:
        client = OpenAI(base_url=server.url, api_key="sk-test", max_retries=0)
        try:
            answer = client.chat.completions.create(
                model="downstream", messages=convert_to_openai_messages(final["messages"]))
        finally:
            client.close()
    assert answer.choices[0].message.content == "ok"
    (tool_message,) = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert tool_message.tool_call_id == "call-1"
    assert json.loads(tool_message.content) == final["handovers"][-1]
    assert tool_message.status == ("error" if case == "refused" else "success")
    # the stand-in does refuse an unanswered call
    assert _unanswered_calls(convert_to_openai_messages(final["messages"][:-1])) == ["call-1"]
