"""A Pydantic AI handover: the evidence agent and the case owner on FunctionModels, and
what the owner's model was shown. Test modules import it from here rather than from one
another.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from adapter_world import (
    answer_the_proposal,
    case_ref,
)
from handoffs.adapters.pydantic_ai import (
    FULL_HISTORY,
    ReceiptGate,
    content_output,
    content_validator,
    hand_off,
)
from handoffs.contracts import Sender
from handoffs.receivers import StrictContractReceiver

__all__ = [
    "OWNER_INSTRUCTIONS",
    "OWNER_PROMPT",
    "SENDER_PROMPT",
    "Evidence",
    "Owner",
    "Topology",
    "handover_of",
]


class Evidence:
    """The sending model: writes each scripted content in turn, and records what it saw."""

    def __init__(self, *contents: dict[str, Any]) -> None:
        self.contents = list(contents)
        self.tools: list[Any] = []
        self.retries: list[str] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.tools = info.output_tools
        for part in messages[-1].parts:
            # A ModelRetry from an output validator comes back as the output tool's
            # return, marked retried.
            if part.part_kind == "retry-prompt" or getattr(part, "outcome", None) == "retried":
                self.retries.append(str(part.content))
        return ModelResponse(parts=[ToolCallPart("hand_off", json.dumps(self.contents.pop(0)),
                                                 tool_call_id=f"c{len(self.contents)}")])


def handover_of(message: ModelMessage) -> dict[str, Any]:
    """The handover a receiving model was shown (the first text of the last prompt)."""
    content = message.parts[-1].content
    texts = [content] if isinstance(content, str) else [c for c in content if isinstance(c, str)]
    return json.loads(texts[0])


class Owner:
    """The receiving model: answers the handover's proposed action; records its input
    and instructions. A later turn (no handover) is answered with the turn's text."""

    def __init__(self) -> None:
        self.seen: list[list[ModelMessage]] = []
        self.instructions: list[str | None] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(messages)
        self.instructions.append(info.instructions)
        try:
            handover = handover_of(messages[-1])
        except ValueError:
            return ModelResponse(parts=[TextPart(f"later turn: {messages[-1].parts[-1].content}")])
        return ModelResponse(parts=[TextPart(answer_the_proposal(handover))])


SENDER_PROMPT = "You are the evidence specialist."
OWNER_PROMPT = "You are the case owner."
OWNER_INSTRUCTIONS = "Decide from the handover."


class Topology:
    def __init__(self, *contents: dict[str, Any], signer: Sender[Any, Any],
                 receiver: StrictContractReceiver, **gate: str) -> None:
        self.signer = signer
        self.evidence_model, self.owner_model = Evidence(*contents), Owner()
        self.evidence = Agent(FunctionModel(self.evidence_model),
                              output_type=content_output(signer),
                              system_prompt=SENDER_PROMPT)
        self.evidence.output_validator(content_validator(signer))
        # The tests before the ruling's test the exception option; ``gate`` overrides.
        self.gate = ReceiptGate(receiver=receiver, **{"on_refusal": "raise", **gate})
        self.owner = Agent(FunctionModel(self.owner_model), capabilities=[self.gate],
                           system_prompt=OWNER_PROMPT, instructions=OWNER_INSTRUCTIONS)

    def run(self, case_id: str, *, channel: str = FULL_HISTORY,
            transport: Callable[[bytes], bytes] | None = None, on_refusal: str = "raise") -> Any:
        async def go() -> Any:
            drafted = await self.evidence.run(f"Dossier of case {case_id}.")
            return await hand_off(drafted, self.owner, signer=self.signer,
                                  case=case_ref(case_id), channel=channel, transport=transport,
                                  on_refusal=on_refusal)
        return asyncio.run(go())
