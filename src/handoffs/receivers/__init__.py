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
:class:`AuthoritativeActuator`, :class:`FunctionReceiver`,
:class:`~handoffs.receivers.models.ModelReceiver` (a language model behind an
OpenAI-compatible API, in :mod:`handoffs.receivers.models`) and, for signed multi-hop
handoff chains, :class:`~handoffs.receivers.chains.IdentityCompositionReceiver` (with
the chain format and builders, in :mod:`handoffs.receivers.chains`); each stands behind
an admission (a :class:`Gate` for signed receipts). The essay's baseline receivers
(:class:`ScoreReceiver`, :class:`AdvisoryActionReceiver`, :class:`FullRecordReceiver`)
stand behind a :class:`GovernanceChecker` that checks no proof: they exist to be
measured in :mod:`handoffs.lab`.
:class:`SQLiteDecisionLog` records every decision and doubles as a replay store that
holds across processes (a :class:`ReplayLog`: the replay claim and the decision row
commit together).
"""

from handoffs._json import JSONLimits
from handoffs._logs import LogSummary, ReplayClaim
from handoffs._moved import moved_from
from handoffs.receivers._baselines import (
    AdvisoryActionReceiver,
    FullRecordReceiver,
    GovernanceChecker,
    ScoreReceiver,
)
from handoffs.receivers._carried import CarriedReceiptReceiver, carry
from handoffs.receivers._decision import Decision, Reason, Receiver, Step, Verdict
from handoffs.receivers._gate import (
    Admitted,
    Gate,
    Ruling,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
)
from handoffs.receivers._log import SQLiteDecisionLog
from handoffs.receivers._reads import Reads, decision_reads
from handoffs.receivers._receivers import (
    Admission,
    AuthoritativeActuator,
    FunctionReceiver,
    StrictContractReceiver,
)
from handoffs.receivers._replay import DecisionLog, MemoryReplayStore, ReplayLog, ReplayStore
from handoffs.receivers._services import (
    EvidenceResolver,
    HTTPEvidenceResolver,
    InMemoryEvidenceResolver,
    InMemoryPolicyService,
    PolicyService,
    ResolvedEvidence,
)

__all__ = [
    "Admission",
    "Admitted",
    "AdvisoryActionReceiver",
    "AuthoritativeActuator",
    "CarriedReceiptReceiver",
    "Decision",
    "DecisionLog",
    "EvidenceResolver",
    "FullRecordReceiver",
    "FunctionReceiver",
    "Gate",
    "GovernanceChecker",
    "HTTPEvidenceResolver",
    "InMemoryEvidenceResolver",
    "InMemoryPolicyService",
    "JSONLimits",
    "LogSummary",
    "MemoryReplayStore",
    "PolicyService",
    "Reads",
    "Reason",
    "Receiver",
    "ReplayClaim",
    "ReplayLog",
    "ReplayStore",
    "ResolvedEvidence",
    "Ruling",
    "SQLiteDecisionLog",
    "ScoreReceiver",
    "Step",
    "StrictContractReceiver",
    "UnsafeConfigurationWarning",
    "UnsafeNoProofs",
    "Verdict",
    "carry",
    "decision_reads",
]

# A name that left this face since 0.1.0 raises an ImportError naming its new place.
__getattr__ = moved_from(__name__)
