"""An A2A receiving agent behind GatedAgentExecutor, served by uvicorn on 127.0.0.1, and
messages carrying a receipt. Test modules import it from here rather than from one
another.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import pytest

pytest.importorskip("a2a")
pytest.importorskip("uvicorn")
import uvicorn
from a2a.client import ClientConfig, create_client
from a2a.server.agent_execution import RequestContext
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    SendMessageRequest,
    Task,
)
from dispatch_world import RECEIVER, World
from starlette.applications import Starlette

from handoffs.adapters.a2a import (
    RECEIPT_MEDIA_TYPE,
    Carriage,
    GatedAgentExecutor,
    receipt_extension,
    receipt_message,
)
from handoffs.receivers import Decision, StrictContractReceiver

__all__ = [
    "CaseOwner",
    "Server",
    "message_for",
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class CaseOwner:
    """The receiving agent: it records what it was handed and completes the task."""

    def __init__(self) -> None:
        self.handled: list[Decision] = []

    async def __call__(self, decision: Decision, context: RequestContext,
                       updater: TaskUpdater) -> None:
        self.handled.append(decision)
        await updater.add_artifact([Part(text=f"case owner acts: {decision.action}")],
                                   name="decision")
        await updater.complete()


class Server:
    """A gated A2A agent served by uvicorn on a free loopback port."""

    def __init__(self, world: World, *, on_overruled: str = "refuse") -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.agent = CaseOwner()
        self.card = AgentCard(
            name=RECEIVER, description="Accountable owner of payment cases.", version="1.0.0",
            supported_interfaces=[AgentInterface(protocol_binding="JSONRPC", url=self.url + "/",
                                                 protocol_version="1.0")],
            capabilities=AgentCapabilities(streaming=False, extensions=[receipt_extension()]),
            default_input_modes=[RECEIPT_MEDIA_TYPE], default_output_modes=["text/plain"],
            skills=[AgentSkill(id="decide-case", name="Decide a case",
                               description="Decide a handed-off case.", tags=["handoff"])],
        )
        handler = DefaultRequestHandlerV2(
            agent_executor=GatedAgentExecutor(StrictContractReceiver(world.gate()), self.agent,
                                              on_overruled=on_overruled),
            task_store=InMemoryTaskStore(), agent_card=self.card,
        )
        app = Starlette(routes=[*create_agent_card_routes(self.card),
                                *create_jsonrpc_routes(handler, rpc_url="/")])
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port,
                                                    log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the A2A test server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)

    def send(self, *messages: Message) -> list[Task]:
        async def run() -> list[Task]:
            client = await create_client(self.url, client_config=ClientConfig(streaming=False))
            try:
                tasks = []
                for message in messages:
                    async for event in client.send_message(SendMessageRequest(message=message)):
                        tasks.append(event.task)
                return tasks
            finally:
                await client.close()

        return asyncio.run(run())


def message_for(raw: bytes, carriage: Carriage = Carriage.RAW, **options: Any) -> Message:
    """A message carrying the receipt ``raw`` (a fresh message id each time)."""
    return receipt_message(raw, carriage=carriage, message_id=f"m-{time.monotonic_ns()}",
                           **options)
