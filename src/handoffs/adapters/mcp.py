"""MCP: a tool that hands off a signed decision receipt, gated by the calling agent.

**Sender side.** :func:`receipt_server` builds a low-level MCP server whose tools
return signed receipts as ``structuredContent`` and publish the contract's own JSON
Schema as their ``outputSchema``. (MCP 2.x derives ``outputSchema`` from a
function's return annotation, so a high-level server would publish a generic
object; the low-level server publishes the contract.) The tool's handler writes only
decision content; signing and governance come from the sender's code.

**Receiver side.** :func:`call_gated` calls the tool and runs the gate on the
structured result before anything reaches the calling agent. A refusal becomes an
``isError`` result whose text names the gate's reasons and whose structured content
is the decision JSON, so the model sees why, and the unverified receipt never reaches
it.

Needs the ``mcp`` extra (``pip install 'handoffs[mcp]'``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from handoffs._errors import HandoffsError
from handoffs._json import dumps, loads
from handoffs.adapters._handover import (
    REFUSE,
    Handover,
    admit,
    no_receipt,
    overruled_mode,
    require,
    traced,
)
from handoffs.contracts import Contract
from handoffs.receivers import Decision, Reason, Receiver, Step, Verdict

require("mcp.server.lowlevel", extra="mcp", feature="the MCP adapter")

import mcp_types as types  # noqa: E402
from mcp.server.lowlevel import Server  # noqa: E402

__all__ = ["GatedToolResult", "ReceiptTool", "ToolCaller", "call_gated", "receipt_server"]

ADAPTER = "mcp"

class ToolCaller(Protocol):
    """What calls a tool: an ``mcp.Client`` or an ``mcp.client.session.ClientSession``."""

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None,
                        ) -> types.CallToolResult:
        """Call tool ``name`` with ``arguments``."""
        ...


ReceiptHandler = Callable[[Mapping[str, Any]], Awaitable[bytes]]
"""Produces the signed receipt bytes for one tool call's arguments."""


@attrs.frozen
class ReceiptTool:
    """One MCP tool whose result is a signed decision receipt of ``contract``.

    Attributes:
        name: the tool name.
        description: what the tool does, for the calling model.
        contract: the receipt's contract; its JSON Schema is the tool's ``outputSchema``.
        input_schema: JSON Schema of the tool's arguments.
        handler: writes the signed receipt for one call's arguments.
    """

    name: str
    description: str
    contract: Contract[Any, Any]
    input_schema: Mapping[str, Any]
    handler: ReceiptHandler

    def to_tool(self) -> types.Tool:
        """The MCP tool definition, with the contract's schema as ``outputSchema``."""
        return types.Tool(name=self.name, description=self.description,
                          input_schema=dict(self.input_schema),
                          output_schema=self.contract.json_schema())


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


def receipt_server(name: str, tools: Sequence[ReceiptTool]) -> Server[Any]:
    """A low-level MCP server offering ``tools``; run it with any MCP transport.

    A call's result carries the receipt twice, as MCP asks of structured results: the
    exact signed bytes as text content and the parsed receipt as structured content.
    A handler that fails (for example with untrusted governance in the content) gives
    an ``isError`` result naming the failure, as MCP asks of tool errors.
    """
    by_name = {tool.name: tool for tool in tools}
    if len(by_name) != len(tools):
        raise HandoffsError("two receipt tools share a name", code="duplicate-tool")

    async def list_tools(_: Any, __: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool.to_tool() for tool in tools])

    async def call_tool(_: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = by_name.get(params.name)
        if tool is None:
            return _error(f"unknown tool {params.name!r}")
        try:
            receipt = await tool.handler(params.arguments or {})
        except HandoffsError as exc:
            return _error(f"{exc.code}: {exc}")
        except Exception as exc:
            return _error(f"tool-failed: {type(exc).__name__}: {exc}")
        return types.CallToolResult(
            content=[types.TextContent(text=receipt.decode("utf-8"))],
            structured_content=dict(loads(receipt)),
        )

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


@attrs.frozen
class GatedToolResult:
    """A tool result after the gate.

    Attributes:
        result: what the calling agent may see — the tool's own result when the
            receipt was admitted, otherwise an ``isError`` result with the reasons.
        decision: the gate's decision on the receipt.
        accepted: whether the calling agent gets the receipt (or, continued, the
            ruling that overrules its proposal); ``False`` for every ``isError`` result.
    """

    result: types.CallToolResult
    decision: Decision
    accepted: bool = False

    @property
    def admitted(self) -> bool:
        """Whether the gate admitted the receipt (it may still have decided otherwise
        than proposed: see :attr:`accepted`).
        """
        return self.decision.admitted


def _receipt_in(result: types.CallToolResult) -> Mapping[str, Any] | None:
    content = result.structured_content
    if result.is_error or not isinstance(content, Mapping):
        return None
    return content


def _no_receipt(receiver: Receiver, result: types.CallToolResult) -> Decision:
    said = " ".join(block.text for block in result.content
                    if isinstance(block, types.TextContent))
    why = (f"the tool failed: {said}" if result.is_error
           else "the result has no structured receipt")
    return no_receipt(receiver, why, "$.structuredContent")


def _call_failed(receiver: Receiver, name: str, exc: Exception) -> Decision:
    why = f"calling tool {name!r} failed: {type(exc).__name__}: {exc}"
    return Decision(verdict=Verdict.REJECT, action=None, step=Step.PARSE,
                    reasons=(Reason("tool-call-failed", why, Step.PARSE, "$"),),
                    receiver=receiver.name)


def _refusal(decision: Decision) -> types.CallToolResult:
    reasons = "; ".join(f"{r.code}: {r.message}" for r in decision.reasons) or "refused"
    text = (f"handoffs gate refused the handoff: {decision.verdict.value} at step "
            f"{decision.step.name.lower()} ({reasons})")
    return types.CallToolResult(content=[types.TextContent(text=text)],
                                structured_content=decision.to_json(), is_error=True)


async def call_gated(
    session: ToolCaller,
    receiver: Receiver,
    name: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    on_overruled: str = REFUSE,
) -> GatedToolResult:
    """Call tool ``name`` and gate the receipt it returns before the agent sees it.

    The receiver decides in a worker thread (the gate's stores and resolvers may
    block). Whatever the tool returns, the answer is a :class:`GatedToolResult`: an
    admitted receipt passes through unchanged, anything else becomes an ``isError``
    result carrying the gate's reasons — also when the call itself fails (a result the
    client refuses because it breaks the tool's own ``outputSchema``, a broken session:
    ``tool-call-failed``). A receipt the gate admits but decides otherwise than proposed
    (another action, or an escalation) is an ``isError`` result with the reason
    ``decided-otherwise``; with ``on_overruled="continue"`` an accepted ruling passes as
    the handover (:meth:`~handoffs.adapters.Handover.to_json`: the gate's action as the
    decision, the proposal as ``overruled_proposal``), never the bare receipt. It never
    raises (cancellation excepted), except ``InvalidArgument`` for an unknown
    ``on_overruled``.
    """
    overruled = overruled_mode(on_overruled)
    try:
        result = await session.call_tool(name, dict(arguments or {}))
    except Exception as exc:
        # The client refuses a result that breaks the tool's own outputSchema (the MCP
        # SDK raises RuntimeError); a broken session raises too. Either way: no receipt.
        decision = traced(Handover(decision=_call_failed(receiver, name, exc)),
                          adapter=ADAPTER).decision
        return GatedToolResult(_refusal(decision), decision)
    receipt = _receipt_in(result)
    if receipt is None:
        decision = traced(Handover(decision=_no_receipt(receiver, result)),
                          adapter=ADAPTER).decision
        return GatedToolResult(_refusal(decision), decision)
    handover: Handover = await asyncio.to_thread(
        lambda: admit(receipt, receiver=receiver, overruled=overruled, adapter=ADAPTER))
    if not handover.accepted:
        return GatedToolResult(_refusal(handover.routed), handover.decision)
    if handover.overruled:
        # Continued: the agent reads the ruling, never a proposal it contradicts.
        shown = types.CallToolResult(content=[types.TextContent(text=handover.to_text())],
                                     structured_content=handover.to_json())
        return GatedToolResult(shown, handover.decision, accepted=True)
    # What the agent sees is exactly what was gated: the admitted structured receipt,
    # also as its text, whatever other text the tool put beside it.
    admitted = types.CallToolResult(content=[types.TextContent(text=dumps(receipt))],
                                    structured_content=dict(receipt))
    return GatedToolResult(admitted, handover.decision, accepted=True)
