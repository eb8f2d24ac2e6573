"""Receivers: the fail-closed runtime gate and the receiver contracts behind it.

A :class:`Gate` admits a decision receipt in four numbered steps — (1) parse with
limits and pick the named contract version, (2) verify proofs, grant, audience,
validity and replay, (3) check the contract's receiver-context dependencies,
(4) resolve evidence, verify digests and optionally read decisive claims back — and
a receiver contract applies its rule as step (5). The result is always a typed
:class:`Decision`; bad input never raises::

    from handoffs.receivers import Gate, StrictContractReceiver

    gate = Gate(identity="case-owner", trust=keyring, registry=MY_CONTRACT,
                roles={"case-owner"}, policy_service=policies, evidence=resolver)
    decision = StrictContractReceiver(gate).receive(raw_bytes)
    decision.verdict, decision.action, decision.reasons

Receiver contracts (all implement :class:`Receiver`): :class:`StrictContractReceiver`,
:class:`AuthoritativeActuator`, :class:`FunctionReceiver`, :class:`ModelReceiver` (a
language model behind an OpenAI-compatible API, through :class:`OpenAICompatibleClient`)
and, for signed multi-hop handoff chains,
:class:`~handoffs.receivers.chains.IdentityCompositionReceiver` (with the chain format and
builders, in :mod:`handoffs.receivers.chains`); each stands behind an
:class:`Admission` (a :class:`Gate` for signed receipts). The essay's baseline receivers
are lab instruments and live in :mod:`handoffs.lab`.
:class:`SQLiteDecisionLog` records every decision and doubles as a replay store that
holds across processes (a :class:`ReplayLog`: the replay claim and the decision row
commit together).
"""

from typing import TYPE_CHECKING

from handoffs._json import JSONLimits
from handoffs._lazy import attach
from handoffs.receivers._decision import Decision, Reason, Receiver, Step, Verdict
from handoffs.receivers._gate import (
    Admitted,
    Gate,
    ReceiverRule,
    Ruling,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
)
from handoffs.receivers._receivers import (
    Admission,
    AuthoritativeActuator,
    FunctionReceiver,
    StrictContractReceiver,
)
from handoffs.receivers._replay import (
    DecisionLog,
    MemoryReplayStore,
    ReplayClaim,
    ReplayedReceipt,
    ReplayLog,
    ReplayStore,
    ReplayStoreError,
)
from handoffs.receivers._services import (
    EvidenceError,
    EvidenceResolver,
    HTTPEvidenceResolver,
    InMemoryEvidenceResolver,
    InMemoryPolicyService,
    PolicyService,
    PolicyStatus,
    Readback,
    ResolvedEvidence,
)

if TYPE_CHECKING:
    from handoffs.receivers._carried import CarriedReceiptReceiver, carried_receipt, carry
    from handoffs.receivers._chat import (
        ChatClient,
        ChatRequest,
        Completion,
        ModelError,
        OpenAICompatibleClient,
        ServedModel,
    )
    from handoffs.receivers._log import DecisionLogError, LogSummary, SQLiteDecisionLog
    from handoffs.receivers._model import ModelReceiver, action_schema

# Imported on first use: importing the package costs only what its eager names
# need (benchmarks/cli.py).
_LAZY = {
    "CarriedReceiptReceiver": "handoffs.receivers._carried",
    "carried_receipt": "handoffs.receivers._carried",
    "carry": "handoffs.receivers._carried",
    "ChatClient": "handoffs.receivers._chat",
    "ChatRequest": "handoffs.receivers._chat",
    "Completion": "handoffs.receivers._chat",
    "ModelError": "handoffs.receivers._chat",
    "OpenAICompatibleClient": "handoffs.receivers._chat",
    "ServedModel": "handoffs.receivers._chat",
    "DecisionLogError": "handoffs.receivers._log",
    "LogSummary": "handoffs.receivers._log",
    "SQLiteDecisionLog": "handoffs.receivers._log",
    "ModelReceiver": "handoffs.receivers._model",
    "action_schema": "handoffs.receivers._model",
}

# Importable, resolved on first use, but not public: not in __all__ (see
# docs/reference/compatibility.md).
_NOT_PUBLIC = {
    "Clock": "handoffs.receivers._gate",
    "ModelTimeout": "handoffs.receivers._chat",
}
__getattr__, __dir__ = attach(__name__, {**_LAZY, **_NOT_PUBLIC})

__all__ = [
    "Admission",
    "Admitted",
    "AuthoritativeActuator",
    "CarriedReceiptReceiver",
    "ChatClient",
    "ChatRequest",
    "Completion",
    "Decision",
    "DecisionLog",
    "DecisionLogError",
    "EvidenceError",
    "EvidenceResolver",
    "FunctionReceiver",
    "Gate",
    "HTTPEvidenceResolver",
    "InMemoryEvidenceResolver",
    "InMemoryPolicyService",
    "JSONLimits",
    "LogSummary",
    "MemoryReplayStore",
    "ModelError",
    "ModelReceiver",
    "OpenAICompatibleClient",
    "PolicyService",
    "PolicyStatus",
    "Readback",
    "Reason",
    "Receiver",
    "ReceiverRule",
    "ReplayClaim",
    "ReplayLog",
    "ReplayStore",
    "ReplayStoreError",
    "ReplayedReceipt",
    "ResolvedEvidence",
    "Ruling",
    "SQLiteDecisionLog",
    "ServedModel",
    "Step",
    "StrictContractReceiver",
    "UnsafeConfigurationWarning",
    "UnsafeNoProofs",
    "Verdict",
    "action_schema",
    "carried_receipt",
    "carry",
]
