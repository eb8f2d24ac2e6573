"""One code per condition in every adapter (issue #32 item 7): a handoff that carries no
receipt is ``no-receipt`` in all seven, and a run that names no case is ``no-case`` in
every adapter that reads the case from its framework's context (A2A and MCP do not:
their sender's code passes the case to ``Sender.sign``).

Each case runs the adapter in its framework as the adapter's own tests do (their
topologies are imported from them); the only stand-ins are for what is remote — the
models, and for MCP the tool server (a caller that answers without a structured
receipt).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from adapter_world import content_for, make_sender, make_world, strict_receiver

CASE = "routine-01"


def nothing(_: bytes) -> bytes:
    """A transport that delivers nothing: the receipt was lost on the way."""
    return b""


def _openai_agents(condition: str) -> str:
    pytest.importorskip("agents")
    from worlds.openai_agents_topology import Topology

    world = make_world()
    if condition == "no-receipt":
        topology = Topology(content_for(CASE), signer=make_sender(world),
                            receiver=strict_receiver(world), transport=nothing)
        result = topology.run(CASE)
    else:
        topology = Topology(content_for(CASE), signer=make_sender(world),
                            receiver=strict_receiver(world))
        result = topology.run(CASE, context=None)
    assert topology.owner_model.calls == ()
    return str(result.final_output).removeprefix("escalated: ")


def _langgraph(condition: str) -> str:
    pytest.importorskip("langgraph")
    from langchain_core.messages import HumanMessage

    from worlds.langgraph_topology import Topology

    world = make_world()
    if condition == "no-receipt":
        topology = Topology(content_for(CASE), signer=make_sender(world),
                            receiver=strict_receiver(world), wire=lambda _text: "")
        final = topology.run(CASE)
    else:
        topology = Topology(content_for(CASE), signer=make_sender(world),
                            receiver=strict_receiver(world))
        final = topology.graph.invoke({"messages": [HumanMessage("Dossier.")],
                                       "receipts": [], "handovers": []})
    assert "case_owner" not in topology.seen
    return str(final["outcome"]).removeprefix("escalated: ")


def _pydantic_ai(condition: str) -> str:
    pytest.importorskip("pydantic_ai")
    from handoffs.adapters.pydantic_ai import HandoffRefusal, hand_off
    from worlds.pydantic_ai_topology import Topology

    world = make_world()
    topology = Topology(content_for(CASE), signer=make_sender(world),
                        receiver=strict_receiver(world), on_refusal="result")
    if condition == "no-receipt":
        output = topology.run(CASE, transport=nothing, on_refusal="result").output
    else:
        async def go() -> Any:
            drafted = await topology.evidence.run("Dossier.")
            return await hand_off(drafted, topology.owner, signer=topology.signer, case=None)
        output = asyncio.run(go()).output
    assert isinstance(output, HandoffRefusal)
    assert topology.owner_model.seen == []
    return output.code


def _google_adk(condition: str) -> str:
    pytest.importorskip("google.adk")
    from worlds.google_adk_agents import Run, evidence_agent, owner_agent, requests_of, sequence

    world = make_world()
    owner = owner_agent(strict_receiver(world))
    if condition == "no-receipt":
        evidence = evidence_agent(content_for(CASE), signer=make_sender(world),
                                  transport=nothing)
        run = Run(sequence(evidence, owner), CASE)
        code = run.state["handoffs_refusal"]["decision"]["reasons"][0]["code"]
    else:
        evidence = evidence_agent(content_for(CASE), "No case, no handoff.",
                                  signer=make_sender(world))
        Run(sequence(evidence, owner), CASE, state={})
        _, second = requests_of(evidence)
        (answer,) = [part.function_response for content in second.contents
                     for part in content.parts or () if part.function_response]
        assert answer.response is not None
        code = answer.response["decision"]["reasons"][0]["code"]
    assert requests_of(owner) == []
    return str(code)


def _agent_framework(condition: str) -> str:
    pytest.importorskip("agent_framework")
    from handoffs.adapters.agent_framework import hand_off, refusal_of
    from worlds.agent_framework_topology import Topology

    world = make_world()
    topology = Topology(content_for(CASE), signer=make_sender(world),
                        receiver=strict_receiver(world))
    if condition == "no-receipt":
        _, decided = topology.hand_off(CASE, transport=nothing)
    else:
        async def go() -> Any:
            drafted = await topology.evidence.run("Dossier.", options={
                "response_format": topology.signer.contract.content_schema()})
            return await hand_off(drafted, topology.owner, signer=topology.signer, case=None)
        decided = asyncio.run(go())
    refusal = refusal_of(decided)
    assert refusal is not None
    assert topology.owner_model.requests == []
    return str(refusal["reasons"][0]["code"])


def _a2a(condition: str) -> str:
    pytest.importorskip("a2a")
    pytest.importorskip("uvicorn")
    from a2a.types import Message, Part, Role, TaskState
    from dispatch_world import WORLD

    from handoffs.adapters.a2a import decision_of
    from worlds.a2a_server import Server

    plain = Message(message_id="plain", role=Role.ROLE_USER,
                    parts=[Part(text="please release the payment", media_type="text/plain")])
    with Server(WORLD) as server:
        (task,) = server.send(plain)
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert server.agent.handled == []
    decision = decision_of(task)
    assert decision is not None
    return str(decision["reasons"][0]["code"])


class _ToolServerWithoutReceipt:
    """A stand-in for the remote MCP tool server: it answers text, no structured receipt."""

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        import mcp_types as types

        return types.CallToolResult(content=[types.TextContent(text="route planned")])


def _mcp(condition: str) -> str:
    pytest.importorskip("mcp")
    from dispatch_world import WORLD

    from handoffs.adapters.mcp import call_gated
    from handoffs.receivers import StrictContractReceiver

    gated = asyncio.run(call_gated(_ToolServerWithoutReceipt(),
                                   StrictContractReceiver(WORLD.gate()), "plan_route"))
    assert not gated.accepted
    assert gated.result.is_error
    return gated.decision.reasons[0].code


ADAPTERS: dict[str, Callable[[str], str]] = {
    "openai-agents": _openai_agents,
    "langgraph": _langgraph,
    "pydantic-ai": _pydantic_ai,
    "google-adk": _google_adk,
    "agent-framework": _agent_framework,
    "a2a": _a2a,
    "mcp": _mcp,
}
READS_A_CASE = ("openai-agents", "langgraph", "pydantic-ai", "google-adk", "agent-framework")
"""The adapters that read the case from their framework's context (or a case= value)."""


CONDITIONS = [(adapter, "no-receipt") for adapter in ADAPTERS] + [
    (adapter, "no-case") for adapter in READS_A_CASE]


def test_every_adapter_is_checked() -> None:
    """A new adapter module fails this until it has its cases above."""
    from worlds.adapters import adapter_modules

    assert adapter_modules() == set(ADAPTERS)


@pytest.mark.parametrize(("adapter", "condition"), CONDITIONS)
def test_one_code_per_condition_in_every_adapter(adapter: str, condition: str) -> None:
    assert ADAPTERS[adapter](condition) == condition
