"""An OpenAI Agents SDK run of the handover (the SDK's ScriptedModel for the remote
model) and readers of what each model was shown. Test modules import it from here rather
than from one another.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("agents")
from agents import Agent, RunConfig, Runner
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from adapter_world import case_ref
from handoffs.adapters import Handover
from handoffs.adapters.openai_agents import (
    FULL_HISTORY,
    gated_handoff,
)
from handoffs.contracts import Sender
from handoffs.receivers import StrictContractReceiver

__all__ = [
    "RUN",
    "TOOL",
    "Topology",
    "handovers_in",
    "property_names",
    "reader",
]


TOOL = "transfer_to_case_owner"
RUN = RunConfig(tracing_disabled=True)


def property_names(schema: Any) -> set[str]:
    """Every property name declared anywhere in a JSON Schema."""
    names: set[str] = set()
    if isinstance(schema, dict):
        names.update(schema.get("properties", {}))
        for value in schema.values():
            names |= property_names(value)
    elif isinstance(schema, list):
        for value in schema:
            names |= property_names(value)
    return names


def handovers_in(call: ModelCall) -> list[dict[str, Any]]:
    """Every handover the receiving model was shown, wherever the channel put it."""
    found = []
    for item in call.input if isinstance(call.input, list) else []:
        text = item.get("output", item.get("content")) if isinstance(item, dict) else None
        try:
            value = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            continue
        if isinstance(value, dict) and "handoff" in value:
            found.append(value)
    return found


def reader(call: ModelCall) -> Any:
    """A case owner (or escalation desk) that answers from the handover it reads."""
    (handover,) = handovers_in(call)
    if handover["handoff"] == "accepted":
        return [assistant_message(handover["decision"]["action"])]
    codes = ",".join(r["code"] for r in handover["decision"]["reasons"])
    return [assistant_message(f"escalated: {codes}")]


class Topology:
    """Evidence agent → (gate) → case owner | escalation, each on a scripted model."""

    def __init__(self, arguments: Any, *, signer: Sender[Any, Any],
                 receiver: StrictContractReceiver, channel: str = FULL_HISTORY,
                 transport: Callable[[bytes], bytes] | None = None) -> None:
        self.evidence_model = ScriptedModel([[function_call(
            TOOL, arguments if isinstance(arguments, str) else json.dumps(arguments),
            call_id="call-1")]])
        self.owner_model = ScriptedModel([ModelStep.respond(reader)])
        self.desk_model = ScriptedModel([ModelStep.respond(reader)])
        self.handovers: list[Handover] = []
        self.owner = Agent(name="case_owner", model=self.owner_model)
        self.desk = Agent(name="escalation", model=self.desk_model)
        self.handoff = gated_handoff(
            self.owner, signer=signer, receiver=receiver, escalation=self.desk,
            channel=channel, transport=transport,
            on_handover=lambda _ctx, handover: self.handovers.append(handover))
        self.evidence = Agent(name="evidence", model=self.evidence_model,
                              handoffs=[self.handoff])

    def run(self, case_id: str, *, entry: str = "run", context: Any = ...) -> Any:
        """One run through ``entry``: ``run``, ``streamed`` or ``sync``
        (``Runner.run_sync``); ``context=`` as given (default: the case's)."""
        given = case_ref(case_id) if context is ... else context
        prompt = f"Dossier of case {case_id}."
        options: dict[str, Any] = {"run_config": RUN}
        if given is not None:
            options["context"] = given
        if entry == "sync":
            # run_sync runs on the thread's default loop and leaves it open: give it
            # one of ours and close it after.
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                return Runner.run_sync(self.evidence, prompt, **options)
            finally:
                loop.close()
                asyncio.set_event_loop(None)
        if entry == "streamed":
            async def streamed() -> Any:
                result = Runner.run_streamed(self.evidence, prompt, **options)
                async for _event in result.stream_events():
                    pass
                return result
            return asyncio.run(streamed())
        # asyncio.run, not Runner.run_sync: run_sync leaves its event loop open on purpose.
        return asyncio.run(Runner.run(self.evidence, prompt, **options))
