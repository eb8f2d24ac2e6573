"""The MCP adapter: a real MCP server over stdio in a subprocess, a real client session.

The server publishes the contract's own JSON Schema as the tool's ``outputSchema`` and
returns signed receipts as structured content; the calling agent's side gates the
result before the agent sees it, and a refusal is an ``isError`` result with reasons.
One server process answers every call of this module (starting one costs seconds).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
from dispatch_world import PARCEL_DISPATCH, WORLD
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from handoffs.adapters.mcp import GatedToolResult, call_gated
from handoffs.receivers import StrictContractReceiver

HERE = Path(__file__).parent
ROUTE = {"address_verified": True, "hazardous": False, "stops": 3}
# An unverified address: the policy decides HOLD; the sender proposes DISPATCH.
OVERRULED = {**WORLD.content(address_verified=False), "proposed_action": "DISPATCH"}
CALLS = ["genuine", "tampered", "wrong-audience", "expired", "fail", "genuine", "replay",
         "off-schema"]


@pytest.fixture(scope="module")
def session_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """List the tools, then make every call of :data:`CALLS` through one gate."""
    folder = tmp_path_factory.mktemp("keys")
    env = {"PYTHONPATH": f"{HERE}:{HERE.parents[2] / 'src'}"}
    for name, key in (("DISPATCH_SERVICE_KEY", WORLD.service_key),
                      ("DISPATCH_SENDER_KEY", WORLD.sender_key)):
        path = folder / f"{name.lower()}.pem"
        path.write_bytes(key.to_pem())
        env[name] = str(path)
    params = StdioServerParameters(command=sys.executable,
                                   args=[str(HERE / "mcp_dispatch_server.py")], env=env)
    receiver = StrictContractReceiver(WORLD.gate())

    async def run() -> dict[str, Any]:
        async with stdio_client(params) as streams, ClientSession(*streams[:2]) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            calls: list[GatedToolResult] = []
            for call in CALLS:
                fault = {} if call == "genuine" else {"fault": call}
                calls.append(await call_gated(session, receiver, "plan_route",
                                              {**ROUTE, **fault}))
            draft = {**WORLD.content(), "authority": "DECIDE",
                     "valid_until": "2099-01-01T00:00:00Z"}
            calls.append(await call_gated(session, receiver, "plan_route",
                                          {**ROUTE, "draft": draft}))
            ruled = {mode: await call_gated(session, receiver, "plan_route",
                                            {**ROUTE, "draft": OVERRULED},
                                            on_overruled=mode)
                     for mode in ("refuse", "continue")}
            return {"tools": tools, "calls": calls, "ruled": ruled}

    return anyio.run(run)


def test_the_tool_publishes_the_contracts_own_schema(session_results: dict[str, Any]) -> None:
    (tool,) = session_results["tools"]
    assert tool.name == "plan_route"
    assert tool.output_schema == PARCEL_DISPATCH.json_schema()


def test_a_genuine_receipt_is_admitted_and_reaches_the_agent(
    session_results: dict[str, Any],
) -> None:
    gated = session_results["calls"][0]
    assert gated.admitted
    assert gated.accepted
    assert gated.decision.action == "DISPATCH"
    assert gated.decision.sender == "dispatcher"
    assert not gated.result.is_error
    assert gated.result.structured_content["decision_state"] == ROUTE


@pytest.mark.parametrize(
    ("index", "expected"),
    [(1, {"bad-signature"}), (2, {"wrong-audience"}),
     (3, {"receipt-expired", "grant-expired"}),  # a Sender's grant ends with its receipt
     (4, {"no-receipt"}), (6, {"replayed"}), (7, {"tool-call-failed"})],
    ids=["tampered", "wrong-audience", "expired", "tool-failed", "replayed", "off-schema"],
)
def test_a_bad_result_becomes_an_error_result_with_the_reason(
    session_results: dict[str, Any], index: int, expected: set[str]
) -> None:
    gated = session_results["calls"][index]
    assert not gated.admitted
    assert gated.result.is_error
    (code,) = [r["code"] for r in gated.result.structured_content["reasons"]]
    assert code in expected
    assert code in gated.result.content[0].text
    assert "decision_state" not in gated.result.structured_content


def test_a_replay_is_the_same_receipt_the_gate_admitted_before(
    session_results: dict[str, Any],
) -> None:
    first, replay = session_results["calls"][5], session_results["calls"][6]
    assert first.admitted
    assert replay.decision.receipt_id == first.decision.receipt_id


def test_model_written_governance_is_refused_by_the_tool_and_never_signed(
    session_results: dict[str, Any],
) -> None:
    gated = session_results["calls"][len(CALLS)]
    assert not gated.admitted
    assert gated.result.is_error
    assert "untrusted-governance" in gated.result.content[0].text
    assert "decision_state" not in gated.result.structured_content


def test_a_result_off_its_own_output_schema_is_a_refusal_not_an_error(
    session_results: dict[str, Any],
) -> None:
    """Regression (#23): a tool whose output broke its own ``outputSchema`` made
    ``call_gated`` raise the client's ``RuntimeError``; it is a refusal result."""
    gated = session_results["calls"][CALLS.index("off-schema")]
    assert not gated.admitted
    (reason,) = gated.decision.reasons
    assert reason.code == "tool-call-failed"
    assert "plan_route" in reason.message
    assert "RuntimeError" in reason.message


def answer_the_proposal(result: Any) -> str:
    """The calling agent's stand-in model (a test double for the remote model
    provider): it answers the proposal it reads in the tool result, else the ruling."""
    if result.is_error:
        return "error: " + result.content[0].text
    seen = result.structured_content
    if "proposed_action" in seen:
        return str(seen["proposed_action"])
    return str(seen["ruling"]["action"])


def test_the_ruling_not_the_proposal_reaches_the_agent(session_results: dict[str, Any]) -> None:
    """The gate admits the receipt and decides HOLD, not the proposed DISPATCH."""
    ruled = session_results["ruled"]
    refused, continued = ruled["refuse"], ruled["continue"]
    assert refused.admitted
    assert not refused.accepted
    assert refused.result.is_error
    assert refused.result.structured_content["reasons"][0]["code"] == "decided-otherwise"
    assert "decided-otherwise" in answer_the_proposal(refused.result)
    assert continued.accepted
    assert not continued.result.is_error
    assert answer_the_proposal(continued.result) == "HOLD"
    assert continued.result.structured_content["ruling"] == {
        "action": "HOLD", "proposed_action": "DISPATCH", "overruled": True}
    assert "proposed_action" not in continued.result.structured_content["content"]
