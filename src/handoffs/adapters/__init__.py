"""Adapters: the gate between agents in the frameworks people use.

Each framework has one module and one extra of the same name, imported only when
you import the module (a missing extra raises :class:`~handoffs.MissingExtra`)::

    pip install 'handoffs[openai-agents]'      # handoffs.adapters.openai_agents
    pip install 'handoffs[langgraph]'          # handoffs.adapters.langgraph
    pip install 'handoffs[pydantic-ai]'        # handoffs.adapters.pydantic_ai
    pip install 'handoffs[a2a]'                # handoffs.adapters.a2a
    pip install 'handoffs[mcp]'                # handoffs.adapters.mcp

Every adapter does the same three things in its framework's own idiom:

* **sender side** — the model fills only the contract's semantic part, through the
  strict schema of :meth:`~handoffs.contracts.Contract.content_schema`; code stamps the
  governance members and signs (:class:`ReceiptSigner`, normally a
  :class:`handoffs.contracts.Sender`);
* **receiver side** — the gate decides before the receiving agent runs, and a refusal
  takes the framework's form of "go elsewhere" (:func:`hand_over` returns the
  :class:`Handover` every adapter routes on);
* **the ruling, not the proposal** — a receipt the gate admits but decides otherwise
  than proposed (another action, or an escalation: ``handoffs gate``'s exit 3) takes the
  refusal route with the reason :data:`DECIDED_OTHERWISE`; configured
  ``on_overruled="continue"`` (:data:`CONTINUE`), the receiving agent gets the gate's
  action as the decision and the proposal marked overruled, never a bare proposal;
* **channel arms** — what history reaches the receiving agent besides the receipt
  (full history or the receipt alone), named so the lab can compare them;
* **traces** — every gate decision is one OpenTelemetry span ``handoffs.gate``, a child of
  the current span (the framework's own where it traces with OpenTelemetry: Pydantic AI,
  Google ADK; Agent Framework opens its agent span after its middleware, so there the
  span current when the run starts), with ``handoffs.adapter``, ``handoffs.verdict``,
  ``handoffs.step``, ``handoffs.action``, ``handoffs.outcome``, ``handoffs.ruling.action``,
  ``handoffs.ruling.proposed_action``, ``handoffs.ruling.overruled`` and
  ``handoffs.reasons`` (a string array). The OpenAI Agents SDK, which traces on its own,
  also gets a custom span ``handoffs.gate`` in its trace. OpenTelemetry is the ``otel``
  extra, imported on the first decision; without it nothing is recorded.

This package stands on :mod:`handoffs.receivers` and :mod:`handoffs.contracts` only.
"""

from handoffs.adapters._handover import (
    CONTINUE,
    DECIDED_OTHERWISE,
    REFUSE,
    Case,
    Handover,
    ReceiptSigner,
    Transport,
    case_of,
    hand_over,
)

__all__ = [
    "CONTINUE",
    "DECIDED_OTHERWISE",
    "REFUSE",
    "Case",
    "Handover",
    "ReceiptSigner",
    "Transport",
    "case_of",
    "hand_over",
]
