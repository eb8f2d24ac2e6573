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
and, for signed multi-hop handoff chains, :class:`IdentityCompositionReceiver`; each
stands behind an :class:`Admission` (a :class:`Gate` for signed receipts). The essay's
baseline receivers are lab instruments and live in :mod:`handoffs.lab`.
:class:`SQLiteDecisionLog` records every decision and doubles as a replay store that
holds across processes (a :class:`ReplayLog`: the replay claim and the decision row
commit together).
"""

from handoffs._json import JSONLimits
from handoffs.receivers._carried import (
    CARRY_PIN,
    CarriedReceiptReceiver,
    carried_receipt,
    carry,
    receipt_pin,
)
from handoffs.receivers._chat import (
    ChatClient,
    ChatRequest,
    Completion,
    ModelError,
    ModelTimeout,
    OpenAICompatibleClient,
)
from handoffs.receivers._decision import Decision, Memoisable, Reason, Receiver, Step, Verdict
from handoffs.receivers._gate import (
    Admitted,
    Clock,
    EvidenceError,
    EvidenceResolver,
    Gate,
    HTTPEvidenceResolver,
    InMemoryEvidenceResolver,
    InMemoryPolicyService,
    PolicyService,
    PolicyStatus,
    Readback,
    ReceiverRule,
    ResolvedEvidence,
    Ruling,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
    check_schema,
    utc_now,
)
from handoffs.receivers._identity import (
    HANDOFF_CHAIN_CONTRACT,
    HANDOFF_CHAIN_SCHEMA_ID,
    HOP_PROOF_PURPOSE,
    DerivedFrom,
    HandoffChain,
    Hop,
    HopRole,
    IdentityCompositionReceiver,
    SeparationOfDuties,
    add_hop,
    approve,
    handoff_chain_schema,
    start_chain,
)
from handoffs.receivers._log import DecisionLogError, LogSummary, SQLiteDecisionLog
from handoffs.receivers._model import ModelReceiver, action_schema
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

__all__ = [
    "CARRY_PIN",
    "HANDOFF_CHAIN_CONTRACT",
    "HANDOFF_CHAIN_SCHEMA_ID",
    "HOP_PROOF_PURPOSE",
    "Admission",
    "Admitted",
    "AuthoritativeActuator",
    "CarriedReceiptReceiver",
    "ChatClient",
    "ChatRequest",
    "Clock",
    "Completion",
    "Decision",
    "DecisionLog",
    "DecisionLogError",
    "DerivedFrom",
    "EvidenceError",
    "EvidenceResolver",
    "FunctionReceiver",
    "Gate",
    "HTTPEvidenceResolver",
    "HandoffChain",
    "Hop",
    "HopRole",
    "IdentityCompositionReceiver",
    "InMemoryEvidenceResolver",
    "InMemoryPolicyService",
    "JSONLimits",
    "LogSummary",
    "Memoisable",
    "MemoryReplayStore",
    "ModelError",
    "ModelReceiver",
    "ModelTimeout",
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
    "SeparationOfDuties",
    "Step",
    "StrictContractReceiver",
    "UnsafeConfigurationWarning",
    "UnsafeNoProofs",
    "Verdict",
    "action_schema",
    "add_hop",
    "approve",
    "carried_receipt",
    "carry",
    "check_schema",
    "handoff_chain_schema",
    "receipt_pin",
    "start_chain",
    "utc_now",
]
