"""The A2A adapter: a real A2A client and server over HTTP on 127.0.0.1.

The receiving agent runs behind :class:`GatedAgentExecutor` in the SDK's own v2
request handler and JSON-RPC routes, served by uvicorn; the sender uses the SDK's own
client. A receipt the gate refuses rejects the task with the reasons, and the
receiving agent never runs.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("a2a")
pytest.importorskip("uvicorn")

import httpx
from a2a.helpers.proto_helpers import new_data_part
from a2a.types import (
    Message,
    Part,
    Role,
    Task,
    TaskState,
)
from dispatch_world import WORLD

from handoffs.adapters.a2a import (
    RECEIPT_EXTENSION_URI,
    RECEIPT_MEDIA_TYPE,
    Carriage,
    NoReceipt,
    data_part_channel,
    decision_of,
    receipt_of,
    text_summary_channel,
)
from handoffs.contracts import UntrustedGovernance
from handoffs.receivers import StrictContractReceiver, Verdict
from worlds.a2a_server import Server, message_for

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # the SDK's card advisories



@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with Server(WORLD) as running:
        yield running


def _refusal_codes(task: Task) -> list[str]:
    decision = decision_of(task)
    assert decision is not None, "a rejected task carries the gate's decision"
    return [reason["code"] for reason in decision["reasons"]]


@pytest.mark.parametrize("carriage", list(Carriage))
def test_a_genuine_receipt_is_admitted_and_reaches_the_agent(server: Server,
                                                             carriage: Carriage) -> None:
    raw = WORLD.signed_bytes()
    handled = len(server.agent.handled)
    (task,) = server.send(message_for(raw, carriage, summary="route 3 stops, all clear"))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [p.text for a in task.artifacts for p in a.parts] == ["case owner acts: DISPATCH"]
    (decision,) = server.agent.handled[handled:]
    assert decision.verdict is Verdict.ACCEPT
    assert decision.sender == "dispatcher"


def test_a_data_part_turns_integers_into_floats_and_the_proof_still_verifies() -> None:
    raw = WORLD.signed_bytes(stops=3)
    carried = receipt_of(message_for(raw, Carriage.DATA))
    assert isinstance(carried, dict)
    assert carried["decision_state"]["stops"] == 3.0
    assert isinstance(carried["decision_state"]["stops"], float)
    decision = StrictContractReceiver(WORLD.gate()).receive(carried)
    assert decision.verdict is Verdict.ACCEPT, decision.reasons


@pytest.mark.parametrize(
    ("name", "expected"),
    [("tampered", {"bad-signature"}), ("wrong-audience", {"wrong-audience"}),
     # A Sender's grant lasts exactly as long as its receipt: both have expired.
     ("expired", {"receipt-expired", "grant-expired"})],
)
def test_a_bad_receipt_rejects_the_task_and_the_agent_never_runs(
    server: Server, name: str, expected: set[str]
) -> None:
    raw = WORLD.bad_receipt(name)
    handled = len(server.agent.handled)
    (task,) = server.send(message_for(raw))
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    (code,) = _refusal_codes(task)
    assert code in expected
    assert code in task.status.message.parts[0].text
    assert server.agent.handled[handled:] == []


def test_a_replayed_receipt_is_rejected_the_second_time(server: Server) -> None:
    raw = WORLD.signed_bytes()
    first, second = server.send(message_for(raw), message_for(raw))
    assert first.status.state == TaskState.TASK_STATE_COMPLETED
    assert second.status.state == TaskState.TASK_STATE_REJECTED
    assert _refusal_codes(second) == ["replayed"]


def test_a_message_without_a_receipt_part_is_rejected(server: Server) -> None:
    plain = Message(message_id="plain", role=Role.ROLE_USER,
                    parts=[Part(text="please release the payment", media_type="text/plain")])
    (task,) = server.send(plain)
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert _refusal_codes(task) == ["no-receipt"]


def test_two_receipt_parts_are_refused() -> None:
    raw = WORLD.signed_bytes()
    message = message_for(raw)
    message.parts.append(Part(raw=raw, media_type=RECEIPT_MEDIA_TYPE))
    with pytest.raises(NoReceipt, match="2 receipt parts"):
        receipt_of(message)


def test_a_data_part_that_is_not_an_object_is_refused() -> None:
    message = Message(message_id="m", parts=[new_data_part([1, 2], media_type=RECEIPT_MEDIA_TYPE)])
    with pytest.raises(NoReceipt, match="neither raw bytes nor a JSON object"):
        receipt_of(message)


def test_the_agent_card_declares_the_receipt_extension(server: Server) -> None:
    card = httpx.get(server.url + "/.well-known/agent-card.json", timeout=10).json()
    (extension,) = card["capabilities"]["extensions"]
    assert extension["uri"] == RECEIPT_EXTENSION_URI
    assert extension["required"] is True



def test_the_data_part_arm_keeps_every_decision_and_the_text_arm_loses_admissibility() -> None:
    direct = StrictContractReceiver(WORLD.gate(replay=None))
    via_data = data_part_channel(StrictContractReceiver(WORLD.gate(replay=None)))
    via_text = text_summary_channel(StrictContractReceiver(WORLD.gate(replay=None)),
                                    lambda raw: "dispatch: all clear, three stops")
    for stops in (1, 3, 9):
        raw = WORLD.signed_bytes(stops=stops)
        expected = direct.receive(raw)
        got = via_data.receive(raw)
        assert (got.verdict, got.action) == (expected.verdict, expected.action)
        assert via_text.receive(raw).verdict is Verdict.REJECT
    assert via_data.record["channel"].startswith("a2a-data-part/")


def test_model_written_governance_is_refused_by_the_sender_and_never_sent() -> None:
    draft = {**WORLD.content(), "authority": "DECIDE", "valid_until": "2099-01-01T00:00:00Z"}
    with pytest.raises(UntrustedGovernance, match="authority"):
        WORLD.sender().sign(draft, case_id="route-1", evidence_refs=["evidence://x"])


@pytest.mark.parametrize("mode", ["refuse", "continue"])
def test_the_ruling_not_the_proposal_reaches_the_outcome(mode: str) -> None:
    """The gate admits the receipt and decides HOLD (an unverified address), not the
    proposed DISPATCH: by default the task is rejected with decided-otherwise and the
    agent never runs; continued, the agent acts on the gate's action."""
    content = {**WORLD.content(address_verified=False), "proposed_action": "DISPATCH"}
    with Server(WORLD, on_overruled=mode) as running:
        (task,) = running.send(message_for(WORLD.signed_bytes(content=content)))
    acts = [p.text for a in task.artifacts for p in a.parts]
    assert "case owner acts: DISPATCH" not in acts
    if mode == "refuse":
        assert task.status.state == TaskState.TASK_STATE_REJECTED
        assert _refusal_codes(task) == ["decided-otherwise"]
        assert running.agent.handled == []
    else:
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert acts == ["case owner acts: HOLD"]
