"""Google ADK: a handoff tool that signs what the model wrote, and a gate callback.

* **sender** — :class:`HandoffTool` is a tool of the sending ``LlmAgent``: its
  declaration is the contract's strict content schema (the semantic part; a model never
  sees ``grant`` or ``proof`` and cannot fill governance). When the model calls it, the
  tool signs the content for the session's case (governance from the signer's
  configuration), carries it and puts the signed receipt in session state
  (:data:`RECEIPT_KEY`); with ``to=`` it also transfers to that agent. Content the
  signer refuses (a governance member, a schema violation) comes back to the model as
  the tool's result, with the reasons, so it can correct itself: a tool, unlike
  ``output_schema`` (which wants a Pydantic class), does not end the run on bad output.
* **receiver** — :class:`ReceiptGate` is the receiving agent's
  ``before_agent_callback``. It takes the receipt out of state and gates it before the
  agent runs. On ACCEPT it writes the *brief*, the handover's
  :meth:`~handoffs.adapters.Handover.to_text` (the gate's decision, the receipt's content
  and governance, and a reference to the verified receipt; no grant, no proof), to
  :data:`BRIEF_KEY`, for the agent's instruction (``{handoffs_brief}``). On refusal the
  agent is skipped: its event carries the refusal text and ``EventActions(escalate=True)``,
  and the decision is in state (:data:`REFUSAL_KEY`): routed, never raised.
* **pipelines** — ADK's ``SequentialAgent`` ignores ``escalate`` (``LoopAgent`` and
  ``ParallelAgent`` honour it) and would run the agents after a refused one. Add
  :class:`HaltOnRefusal` to the ``App``'s plugins and every later agent of that
  invocation is skipped::

      evidence = LlmAgent(name="evidence", model=model, tools=[HandoffTool(signer=sender)])
      case_owner = LlmAgent(name="case_owner", model=model, include_contents="none",
                            instruction="Decide on this handoff: {handoffs_brief}",
                            before_agent_callback=ReceiptGate(receiver=receiver))
      desk = App(name="desk", plugins=[HaltOnRefusal()],
                 root_agent=SequentialAgent(name="desk", sub_agents=[evidence, case_owner]))
      runner = Runner(app=desk, session_service=InMemorySessionService())

The case comes from session state (``case_id``, ``evidence_refs``; pass them as the
run's ``state_delta``) or from ``case=``. Needs the ``google-adk`` extra.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

from handoffs import HandoffsError
from handoffs.adapters._handover import (
    REFUSE,
    Case,
    Handover,
    ReceiptSigner,
    Transport,
    admit,
    case_in,
    case_of,
    content_schema,
    overruled_mode,
    refusal_text,
    refused,
    require,
    sign_content,
)
from handoffs.receivers import Receiver

require("google.adk", extra="google-adk", feature="the Google ADK adapter")

from google.adk.agents.base_agent import BaseAgent  # noqa: E402
from google.adk.agents.callback_context import CallbackContext  # noqa: E402
from google.adk.plugins.base_plugin import BasePlugin  # noqa: E402
from google.adk.tools.base_tool import BaseTool  # noqa: E402
from google.adk.tools.tool_context import ToolContext  # noqa: E402
from google.genai import types  # noqa: E402

__all__ = [
    "BRIEF_KEY",
    "RECEIPT_KEY",
    "REFUSAL_KEY",
    "HaltOnRefusal",
    "HandoffTool",
    "ReceiptGate",
]

RECEIPT_KEY: Final = "handoffs_receipt"
"""Session state key of the signed receipt in transit (the gate consumes it)."""
BRIEF_KEY: Final = "handoffs_brief"
"""Session state key of the brief of an admitted receipt (``{handoffs_brief}``):
:meth:`Handover.to_text <handoffs.adapters.Handover.to_text>`."""
REFUSAL_KEY: Final = "handoffs_refusal"
"""Session state key of the last refusal: ``{"invocation_id", "agent", "decision"}``."""
ADAPTER: Final = "google-adk"


class HandoffTool(BaseTool):
    """The sending agent's handoff tool: signs the model's content and hands it on.

    Args:
        signer: stamps governance and signs (a :class:`handoffs.contracts.Sender`).
        to: the agent to transfer to after signing (ADK's ``transfer_to_agent``); ``None``
            in a pipeline, where the next agent follows anyway.
        case: the case of a run, from its session state (default
            :func:`~handoffs.adapters.case_of`: state ``case_id`` and ``evidence_refs``).
        transport: carries the signed bytes (default: in process).
        state_key: where the signed receipt goes in session state.
        name: the tool's name.
        description: the tool's description (default: the contract's).
    """

    def __init__(self, *, signer: ReceiptSigner, to: str | None = None,
                 case: Callable[[Mapping[str, Any]], Case] = case_of,
                 transport: Transport | None = None, state_key: str = RECEIPT_KEY,
                 name: str = "hand_off", description: str | None = None) -> None:
        contract = signer.contract
        super().__init__(name=name, description=description or (
            f"Hand the case on: {contract.description} Fill only the decision content; "
            "governance is stamped by the system."))
        self.signer, self.to, self.case = signer, to, case
        self.transport, self.state_key = transport, state_key
        self.schema = content_schema(contract)

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(name=self.name, description=self.description,
                                         parameters_json_schema=self.schema)

    async def run_async(self, *, args: dict[str, Any],
                        tool_context: ToolContext) -> dict[str, Any]:
        """Sign ``args`` (the model's content); the result is what the model reads back:
        the receipt's reference, or the sender's refusal with its reasons.
        """
        try:
            message = sign_content(args, signer=self.signer,
                                   case=case_in(tool_context.state.to_dict(), self.case))
        except HandoffsError as exc:
            handover = refused(self.signer.contract, exc, adapter=ADAPTER)
            return {"handoff": "refused", "reason": refusal_text(handover),
                    "decision": handover.decision.to_json()}
        if self.transport is not None:
            message = self.transport(message)
        tool_context.state[self.state_key] = message.decode("utf-8", "replace")
        if self.to is not None:
            tool_context.actions.transfer_to_agent = self.to
        tool_context.actions.skip_summarization = True
        return {"handoff": "signed", "receipt": _receipt_id(message), "to": self.to}


def _receipt_id(message: bytes) -> Any:
    try:
        document = json.loads(message)
    except ValueError:
        return None
    return document.get("id") if isinstance(document, Mapping) else None


class ReceiptGate:
    """The receiving agent's ``before_agent_callback``: gates the receipt in session
    state before the agent runs; skips the agent (with ``escalate``) on refusal.

    Args:
        receiver: the receiving side's receiver contract behind its gate.
        state_key: where the sender put the signed receipt (consumed here).
        on_handover: called with every :class:`~handoffs.adapters.Handover` it decides.
        on_overruled: when the gate admits the receipt but decides another action than
            the proposal (or escalates): ``"refuse"`` (default) skips the agent with
            ``escalate`` and the reason ``decided-otherwise``; ``"continue"`` runs it on
            an accepted ruling, the brief's decision the gate's action and the proposal
            as ``overruled_proposal``.
    """

    def __init__(self, *, receiver: Receiver, state_key: str = RECEIPT_KEY,
                 on_handover: Callable[[Handover], None] | None = None,
                 on_overruled: str = REFUSE) -> None:
        self.receiver, self.state_key, self.on_handover = receiver, state_key, on_handover
        self.on_overruled = overruled_mode(on_overruled)

    def __call__(self, callback_context: CallbackContext) -> types.Content | None:
        """Gate; ``None`` lets the agent run on the brief, content skips it."""
        state = callback_context.state
        carried = state.get(self.state_key)
        state[self.state_key] = None  # consumed: a receipt is gated once
        handover = admit(carried if isinstance(carried, str | bytes) else None,
                         receiver=self.receiver, overruled=self.on_overruled,
                         adapter=ADAPTER)
        if self.on_handover is not None:
            self.on_handover(handover)
        if handover.accepted and handover.receipt is not None:
            state[BRIEF_KEY] = handover.to_text()
            return None
        state[BRIEF_KEY] = None
        state[REFUSAL_KEY] = {"invocation_id": callback_context.invocation_id,
                              "agent": callback_context.agent_name,
                              "decision": handover.routed.to_json()}
        callback_context.actions.escalate = True
        return types.Content(role="model", parts=[types.Part(text=refusal_text(handover))])


class HaltOnRefusal(BasePlugin):
    """An ``App`` plugin: after a :class:`ReceiptGate` refused a handoff, every later
    agent of the same invocation is skipped (ADK's ``SequentialAgent`` ignores
    ``escalate``). Each skipped agent's event says which handoff was refused.
    """

    def __init__(self, name: str = "handoffs_halt_on_refusal") -> None:
        super().__init__(name=name)

    async def before_agent_callback(self, *, agent: BaseAgent,
                                    callback_context: CallbackContext) -> types.Content | None:
        """Skip ``agent`` when this invocation already refused a handoff."""
        refusal = callback_context.state.get(REFUSAL_KEY)
        if not isinstance(refusal, Mapping) or (
                refusal.get("invocation_id") != callback_context.invocation_id):
            return None
        return types.Content(role="model", parts=[types.Part(
            text=f"skipped: the handoff to {refusal.get('agent')} was refused")])
