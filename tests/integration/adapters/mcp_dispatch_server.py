"""An MCP server over stdio whose tool hands off a signed ``parcel-dispatch`` receipt.

Run by ``test_mcp.py`` in a subprocess. The keys come from the PEM files named by
``DISPATCH_SERVICE_KEY`` and ``DISPATCH_SENDER_KEY``. The tool's ``fault`` argument
(test-only) makes it misbehave as a compromised or broken server would: ``tampered``,
``expired``, ``wrong-audience``, ``replay`` (the last receipt again), ``fail`` or
``off-schema`` (a result that breaks the tool's own ``outputSchema``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
from dispatch_world import CASE_ID, EVIDENCE, PARCEL_DISPATCH, World
from mcp.server.stdio import stdio_server

from handoffs.adapters.mcp import ReceiptTool, receipt_server
from handoffs.integrity import SigningKey

WORLD = World(
    service_key=SigningKey.from_pem(Path(os.environ["DISPATCH_SERVICE_KEY"]).read_bytes()),
    sender_key=SigningKey.from_pem(Path(os.environ["DISPATCH_SENDER_KEY"]).read_bytes()),
)
_LAST: list[bytes] = []

INPUT = {
    "type": "object",
    "properties": {
        "address_verified": {"type": "boolean"},
        "hazardous": {"type": "boolean"},
        "stops": {"type": "integer"},
        "fault": {"type": "string"},
        "draft": {"type": "object"},
    },
    "required": ["address_verified", "hazardous", "stops"],
}


async def plan_route(arguments: Mapping[str, Any]) -> bytes:
    """The route planner's tool: decision content from the arguments, signed by code."""
    if "draft" in arguments:  # content a model wrote, signed as written
        return WORLD.sender().sign(arguments["draft"], case_id=CASE_ID, evidence_refs=EVIDENCE)
    fault = arguments.get("fault", "")
    if fault == "fail":
        raise RuntimeError("the planner crashed")
    if fault == "replay":
        return _LAST[-1]
    if fault == "off-schema":
        return b'{"contract": "parcel-dispatch/1.0.0", "stops": "three"}'
    if fault:
        return WORLD.bad_receipt(fault)
    state = {name: arguments[name] for name in ("address_verified", "hazardous", "stops")}
    _LAST.append(WORLD.signed_bytes(**state))
    return _LAST[-1]


SERVER = receipt_server("route-planner", [
    ReceiptTool(name="plan_route", description="Plan a parcel route and hand it off.",
                contract=PARCEL_DISPATCH, input_schema=INPUT, handler=plan_route),
])


async def main() -> None:
    """Serve over stdio until the client closes the pipe."""
    async with stdio_server() as (read, write):
        await SERVER.run(read, write, SERVER.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
