"""A Microsoft Agent Framework handover: a stub chat client, the agents, middleware and
an impostor sender. Test modules import it from here rather than from one another.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import pytest

pytest.importorskip("agent_framework")
from agent_framework import (
    Agent,
    AgentResponse,
    BaseChatClient,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    Message,
    ResponseStream,
)

from adapter_world import (
    VALID_UNTIL,
    CaseGrants,
    World,
    answer_the_proposal,
    case_ref,
    make_sender,
)
from handoffs.adapters.agent_framework import (
    ReceiptGate,
    content_format,
    hand_off,
)
from handoffs.contracts import GovernanceService, Sender
from handoffs.integrity import SigningKey
from handoffs.receivers import StrictContractReceiver

__all__ = [
    "StubChatClient",
    "Topology",
    "collect",
    "impostor",
    "owner_model",
    "run",
    "scripted",
]


class StubChatClient(BaseChatClient[Any]):
    """A stand-in for the remote model provider (MAF's ``BaseChatClient`` contract): each
    call answers ``reply(messages)``, streamed in 7-character updates when asked; it
    records every request it got."""

    def __init__(self, reply: Callable[[Sequence[Message]], str]) -> None:
        super().__init__()
        self.reply = reply
        self.requests: list[list[Message]] = []

    def _inner_get_response(self, *, messages: Sequence[Message], stream: bool,
                            options: Any, **kwargs: Any) -> Any:
        self.requests.append(list(messages))
        text = self.reply(messages)
        if stream:
            async def updates() -> AsyncIterator[ChatResponseUpdate]:
                for start in range(0, len(text), 7):
                    yield ChatResponseUpdate(role="assistant",
                                             contents=[Content.from_text(text[start:start + 7])])
            return self._build_response_stream(updates())

        async def response() -> ChatResponse:
            return ChatResponse(messages=[Message(role="assistant", contents=[text])])
        return response()


def scripted(*contents: dict[str, Any]) -> StubChatClient:
    """The evidence model: writes each scripted content in turn as its structured output."""
    queue = list(contents)
    return StubChatClient(lambda _messages: json.dumps(queue.pop(0)))


def owner_model() -> StubChatClient:
    """The case owner's model: answers the proposed action of the brief it is handed."""
    return StubChatClient(lambda messages: answer_the_proposal(json.loads(messages[-1].text)))


def run(coroutine: Awaitable[Any]) -> Any:
    async def main() -> Any:
        return await coroutine
    return asyncio.run(main())


async def collect(stream: ResponseStream[Any, Any]) -> tuple[str, AgentResponse[Any]]:
    chunks = [update.text async for update in stream]
    return "".join(chunks), await stream.get_final_response()


class Topology:
    def __init__(self, *contents: dict[str, Any], signer: Sender[Any, Any],
                 receiver: StrictContractReceiver, on_overruled: str = "refuse") -> None:
        self.signer = signer
        self.evidence_model, self.owner_model = scripted(*contents), owner_model()
        self.evidence = Agent(client=self.evidence_model, name="evidence")
        self.owner = Agent(client=self.owner_model, name="case-owner",
                           middleware=[ReceiptGate(receiver=receiver,
                                                   on_overruled=on_overruled)])

    def hand_off(self, case_id: str, *, stream: bool = False,
                 transport: Callable[[bytes], bytes] | None = None,
                 session: Any = None) -> tuple[str, AgentResponse[Any]]:
        async def go() -> tuple[str, AgentResponse[Any]]:
            drafted = await self.evidence.run(f"Dossier of case {case_id}.",
                                              options={"response_format":
                                                       content_format(self.signer)})
            if stream:
                return await collect(hand_off(drafted, self.owner, signer=self.signer,
                                              case=case_ref(case_id), stream=True,
                                              transport=transport, session=session))
            decided = await hand_off(drafted, self.owner, signer=self.signer,
                                     case=case_ref(case_id), transport=transport,
                                     session=session)
            return decided.text, decided
        return asyncio.run(go())


def impostor(world: World) -> Sender[Any, Any]:
    """A sender whose signing key nobody enrolled, with a genuine grant."""
    return Sender(contract=make_sender(world).contract, key=SigningKey.generate(),
                  governance=GovernanceService(sender="evidence-specialist",
                                               receiver="case-owner", policy_version="PAY-7.4",
                                               valid_until=VALID_UNTIL),
                  grants=CaseGrants(world.service_key), clock=make_sender(world).clock)
