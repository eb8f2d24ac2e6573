"""A Google ADK handover: a scripted model, the evidence and owner agents in a sequence,
a run of it and an impostor sender. Test modules import it from here rather than from
one another.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import AsyncGenerator
from typing import Any

import pytest

pytest.importorskip("google.adk")
from google.adk.agents import LlmAgent, SequentialAgent
from google.adk.agents.base_agent import BaseAgent
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.apps import App
from google.adk.events.event import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

from adapter_world import (
    VALID_UNTIL,
    CaseGrants,
    World,
    answer_the_proposal,
    case_ref,
    make_sender,
)
from handoffs.adapters import case_of
from handoffs.adapters.google_adk import (
    HaltOnRefusal,
    HandoffTool,
    ReceiptGate,
)
from handoffs.contracts import GovernanceService, Sender
from handoffs.integrity import SigningKey
from handoffs.receivers import StrictContractReceiver

__all__ = [
    "APP",
    "INSTRUCTION",
    "MODES",
    "USER",
    "Run",
    "ScriptedLlm",
    "brief_of",
    "decide",
    "evidence_agent",
    "impostor",
    "notifier",
    "owner_agent",
    "requests_of",
    "sequence",
]


APP, USER = "payments", "clerk"
MODES = ["async", "sync", "stream"]
INSTRUCTION = "Decide on this handoff: "


class ScriptedLlm(BaseLlm):
    """A stand-in for the remote model provider (ADK's ``BaseLlm`` contract): answers each
    request with the next scripted step (a tool call, or text; a callable step is given
    the request). Text is streamed as partial chunks when ADK asks for a stream. It
    records every request it got."""

    script: list[Any] = []  # noqa: RUF012 - a pydantic field, copied per instance
    requests: list[LlmRequest] = []  # noqa: RUF012

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False
                                     ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        step = self.script.pop(0)
        if callable(step):
            step = step(llm_request)
        if isinstance(step, dict):
            part = types.Part(function_call=types.FunctionCall(name="hand_off", args=step))
        else:
            part = types.Part(text=step)
            if stream:
                for start in range(0, len(step), 5):
                    yield LlmResponse(content=types.Content(
                        role="model", parts=[types.Part(text=step[start:start + 5])]),
                        partial=True)
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


def brief_of(request: LlmRequest) -> dict[str, Any]:
    instruction = str(request.config.system_instruction)
    return json.loads(instruction.split(INSTRUCTION, 1)[1].split("\n", 1)[0])


def decide(request: LlmRequest) -> str:
    """The case owner's model: the proposed action of the brief it was handed."""
    return answer_the_proposal(brief_of(request))


def evidence_agent(*steps: Any, signer: Sender[Any, Any], name: str = "evidence",
                   to: str | None = None, transport: Any = None, case: Any = case_of,
                   sub_agents: list[BaseAgent] | None = None) -> LlmAgent:
    tool = HandoffTool(signer=signer, to=to, transport=transport, case=case)
    return LlmAgent(name=name, model=ScriptedLlm(model="stub-evidence", script=list(steps)),
                    tools=[tool], sub_agents=sub_agents or [])


def owner_agent(receiver: StrictContractReceiver, name: str = "case_owner",
                on_overruled: str = "refuse") -> LlmAgent:
    return LlmAgent(name=name, model=ScriptedLlm(model="stub-owner", script=[decide]),
                    include_contents="none", instruction=INSTRUCTION + "{handoffs_brief}",
                    before_agent_callback=ReceiptGate(receiver=receiver,
                                                      on_overruled=on_overruled))


def notifier() -> LlmAgent:
    return LlmAgent(name="notifier", model=ScriptedLlm(model="stub-notifier",
                                                       script=["payment team notified"]))


def sequence(*agents: BaseAgent) -> SequentialAgent:
    with warnings.catch_warnings():  # deprecated for Workflow in ADK 2, still the idiom
        warnings.simplefilter("ignore", DeprecationWarning)
        return SequentialAgent(name="desk", sub_agents=list(agents))


def requests_of(agent: LlmAgent) -> list[LlmRequest]:
    model = agent.model
    assert isinstance(model, ScriptedLlm)
    return model.requests


class Run:
    """One invocation of ``root`` for a case, and what came out of it."""

    def __init__(self, root: BaseAgent, case_id: str, *, mode: str = "async",
                 halt: bool = True, state: dict[str, Any] | None = None) -> None:
        service = InMemorySessionService()
        app = App(name=APP, root_agent=root, plugins=[HaltOnRefusal()] if halt else [])
        runner = Runner(app=app, session_service=service)
        case = case_ref(case_id)
        if state is None:
            state = {"case_id": case.case_id, "evidence_refs": list(case.evidence_refs)}
        session = asyncio.run(service.create_session(app_name=APP, user_id=USER, state=state))
        message = types.Content(role="user", parts=[types.Part(text=f"Dossier of {case_id}.")])
        config = RunConfig(streaming_mode=StreamingMode.SSE if mode == "stream"
                           else StreamingMode.NONE)
        options = {"user_id": USER, "session_id": session.id, "new_message": message,
                   "run_config": config}
        if mode == "sync":
            self.events: list[Event] = list(runner.run(**options))
        else:
            async def collect() -> list[Event]:
                return [event async for event in runner.run_async(**options)]
            self.events = asyncio.run(collect())
        final = asyncio.run(service.get_session(app_name=APP, user_id=USER,
                                                session_id=session.id))
        assert final is not None
        self.state = final.state

    def said(self, author: str) -> list[str]:
        """The final (non-partial) texts ``author`` produced."""
        return [part.text for event in self.events
                if event.author == author and not event.partial and event.content
                for part in event.content.parts or () if part.text]

    def partial(self, author: str) -> list[str]:
        return [part.text for event in self.events if event.author == author and event.partial
                and event.content for part in event.content.parts or () if part.text]


def impostor(world: World) -> Sender[Any, Any]:
    """A sender whose signing key nobody enrolled, with a genuine grant."""
    genuine = make_sender(world)
    return Sender(contract=genuine.contract, key=SigningKey.generate(),
                  governance=GovernanceService(sender="evidence-specialist",
                                               receiver="case-owner", policy_version="PAY-7.4",
                                               valid_until=VALID_UNTIL),
                  grants=CaseGrants(world.service_key), clock=genuine.clock)
