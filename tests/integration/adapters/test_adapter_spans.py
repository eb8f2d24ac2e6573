"""One OpenTelemetry span per gate decision in every adapter (issue #28 item 4), read
with the OpenTelemetry SDK's ``InMemorySpanExporter``.

Each adapter hands off one overruled receipt (the gate admits it and decides HOLD, not
the proposed RELEASE) inside the framework's current span: the framework's own where it
traces with OpenTelemetry (Pydantic AI's and Google ADK's agent spans), else the span
the caller has open (``caller``). The ``handoffs.gate`` span must be that span's child
and carry the verdict, the step, the ruling and the reasons as a string array. The
adapters' topologies come from their own tests; the only stand-ins are for what is
remote (the models; for MCP, the tool server).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace

from adapter_world import (
    OVERRULED_CASE,
    case_ref,
    make_sender,
    make_world,
    overruled_content,
    strict_receiver,
)

CALLER = "caller"


def _in_caller_span(run: Callable[[], Any]) -> Any:
    with trace.get_tracer("tests").start_as_current_span(CALLER):
        return run()


def _openai_agents() -> str:
    pytest.importorskip("agents")
    from agents import Runner, set_trace_processors
    from agents.tracing import TracingProcessor

    from worlds.openai_agents_topology import Topology

    class Collect(TracingProcessor):
        def __init__(self) -> None:
            self.spans: list[Any] = []

        def on_trace_start(self, trace: Any) -> None: ...
        def on_trace_end(self, trace: Any) -> None: ...
        def on_span_start(self, span: Any) -> None: ...

        def on_span_end(self, span: Any) -> None:
            self.spans.append(span)

        def shutdown(self) -> None: ...
        def force_flush(self) -> None: ...

    world = make_world()
    topology = Topology(overruled_content(), signer=make_sender(world),
                        receiver=strict_receiver(world))
    collected = Collect()
    set_trace_processors([collected])
    try:
        result = _in_caller_span(lambda: asyncio.run(Runner.run(
            topology.evidence, "Dossier.", context=case_ref(OVERRULED_CASE))))
    finally:
        set_trace_processors([])
    assert result.last_agent.name == "escalation"
    # The SDK's own trace holds the decision too: a custom span under its handoff span.
    (gate,) = [s for s in collected.spans if getattr(s.span_data, "name", "") == "handoffs.gate"]
    assert gate.span_data.data["handoffs.outcome"] == "decided-otherwise"
    by_id = {s.span_id: s for s in collected.spans}
    assert by_id[gate.parent_id].span_data.type == "handoff"
    return CALLER


def _langgraph() -> str:
    pytest.importorskip("langgraph")
    from worlds.langgraph_topology import Topology

    world = make_world()
    topology = Topology(overruled_content(), signer=make_sender(world),
                        receiver=strict_receiver(world))
    final = _in_caller_span(lambda: topology.run(OVERRULED_CASE))
    assert final["outcome"] == "escalated: decided-otherwise"
    return CALLER


def _pydantic_ai() -> str:
    pytest.importorskip("pydantic_ai")
    from worlds.pydantic_ai_topology import Topology

    world = make_world()
    topology = Topology(overruled_content(), signer=make_sender(world),
                        receiver=strict_receiver(world), on_refusal="result")
    topology.owner.instrument = True  # Pydantic AI's own OpenTelemetry spans
    topology.owner.name = "case_owner"
    topology.run(OVERRULED_CASE, on_refusal="result")
    return "invoke_agent case_owner"


def _google_adk() -> str:
    pytest.importorskip("google.adk")
    from worlds.google_adk_agents import Run, evidence_agent, owner_agent, sequence

    world = make_world()
    Run(sequence(evidence_agent(overruled_content(), signer=make_sender(world)),
                 owner_agent(strict_receiver(world))), OVERRULED_CASE)
    return "invoke_agent case_owner"


def _agent_framework() -> str:
    pytest.importorskip("agent_framework")
    from worlds.agent_framework_topology import Topology

    world = make_world()
    topology = Topology(overruled_content(), signer=make_sender(world),
                        receiver=strict_receiver(world))
    # MAF opens its invoke_agent span inside the agent middleware chain, after the
    # gate: the gate's span is a child of the span current when the run starts.
    _in_caller_span(lambda: topology.hand_off(OVERRULED_CASE, stream=True))
    return CALLER


def _a2a() -> str:
    pytest.importorskip("a2a")
    pytest.importorskip("uvicorn")
    from a2a.types import TaskState
    from dispatch_world import WORLD

    from worlds.a2a_server import Server, message_for

    content = {**WORLD.content(address_verified=False), "proposed_action": "DISPATCH"}
    with Server(WORLD) as server:
        # The server side decides in its own request context: the span's parent is the
        # server's current span when the executor runs (here: none, a root span).
        (task,) = server.send(message_for(WORLD.signed_bytes(content=content)))
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    return ""


def _mcp() -> str:
    pytest.importorskip("mcp")
    import mcp_types as types
    from dispatch_world import WORLD

    from handoffs._json import loads
    from handoffs.adapters.mcp import call_gated
    from handoffs.receivers import StrictContractReceiver

    content = {**WORLD.content(address_verified=False), "proposed_action": "DISPATCH"}
    signed = WORLD.signed_bytes(content=content)

    class ToolServer:
        """A stand-in for the remote MCP tool server: it returns the signed receipt."""

        async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
            return types.CallToolResult(content=[types.TextContent(text=signed.decode())],
                                        structured_content=dict(loads(signed)))

    gated = _in_caller_span(lambda: asyncio.run(call_gated(
        ToolServer(), StrictContractReceiver(WORLD.gate()), "plan_route")))
    assert not gated.accepted
    return CALLER


ADAPTERS: dict[str, Callable[[], str]] = {
    "openai-agents": _openai_agents,
    "langgraph": _langgraph,
    "pydantic-ai": _pydantic_ai,
    "google-adk": _google_adk,
    "agent-framework": _agent_framework,
    "a2a": _a2a,
    "mcp": _mcp,
}


def test_every_adapter_is_traced() -> None:
    from worlds.adapters import adapter_modules

    assert set(ADAPTERS) == adapter_modules()


@pytest.mark.parametrize("adapter", list(ADAPTERS))
def test_one_span_per_gate_decision_as_a_child_of_the_current_span(
        adapter: str, otel_spans: Any) -> None:
    parent_name = ADAPTERS[adapter]()
    spans = otel_spans.get_finished_spans()
    by_id = {span.context.span_id: span for span in spans}
    (gate,) = [span for span in spans if span.name == "handoffs.gate"]
    if parent_name:
        assert gate.parent is not None
        assert by_id[gate.parent.span_id].name == parent_name
    attributes = dict(gate.attributes or {})
    assert attributes["handoffs.adapter"] == adapter
    assert attributes["handoffs.verdict"] == "ACCEPT"
    assert attributes["handoffs.step"] == 5
    assert attributes["handoffs.outcome"] == "decided-otherwise"
    assert attributes["handoffs.ruling.action"] == "HOLD"
    assert attributes["handoffs.ruling.proposed_action"] in {"RELEASE", "DISPATCH"}
    assert attributes["handoffs.ruling.overruled"] is True
    assert attributes["handoffs.reasons"] == ("decided-otherwise",)
    assert attributes["handoffs.receipt_id"]
    assert gate.end_time is not None
    assert gate.start_time is not None


def test_without_opentelemetry_the_gate_decides_and_records_nothing() -> None:
    """OpenTelemetry is an extra, imported lazily: with it unimportable, importing the
    adapters and deciding a handoff works and loads nothing of it."""
    import json
    import subprocess
    import sys

    probe = ("import sys, json\n"
             "sys.modules['opentelemetry'] = None  # not installed\n"
             "import handoffs.adapters._handover as h\n"
             "from handoffs.receivers import Decision, Step, Verdict\n"
             "class R:\n"
             "    name, deterministic = 'r', True\n"
             "    def receive(self, message): raise AssertionError\n"
             "handover = h.admit(None, receiver=R(), adapter='probe')\n"
             "print(json.dumps([handover.decision.reasons[0].code,"
             " sorted(m for m in sys.modules if m.startswith('opentelemetry.'))]))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, check=True)
    assert json.loads(done.stdout) == ["no-receipt", []]
