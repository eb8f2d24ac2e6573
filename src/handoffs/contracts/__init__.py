"""Decision-receipt contracts: define, build, validate and sign.

Everything agent code needs to define a contract, send a receipt and check one is
importable from here::

    from handoffs.contracts import Contract, decision_field, Sender
    from handoffs.contracts.policy import Policy, Rule, Is

The rule language (:class:`~handoffs.contracts.policy.Policy`, its rules, conditions
and fingerprint) is :mod:`handoffs.contracts.policy`; what changed between two
versions of a contract is :mod:`handoffs.contracts.versions`; keys, key rings and
cryptosuites are :mod:`handoffs.integrity`.

A :class:`Sender` turns decision content into signed receipt bytes;
:meth:`Receipt.build`, :func:`issue_grant` and :meth:`Receipt.sign` are the low-level
layer underneath it; :meth:`Receipt.verify` checks a signed receipt.
"""

from handoffs._audience import ANY_AUDIENCE, AnyAudience
from handoffs._errors import (
    ContractDefinitionError,
    MalformedJSON,
    ProofError,
    ReceiptValidationError,
    UnknownContract,
    UntrustedGovernance,
)
from handoffs._moved import moved_from
from handoffs.contracts._contract import (
    Authority,
    ContextDependency,
    Contract,
    EvidenceFresh,
    HardConstraint,
    LossMatrix,
    OnMissing,
    PolicyResolvable,
    RoleHeld,
    Uncertainty,
)
from handoffs.contracts._encoders import Encoder, GovernanceService, ReceiptEncoder
from handoffs.contracts._fields import FieldKind, FieldSpec, Interval, decision_field
from handoffs.contracts._receipt import (
    DecisionContent,
    EvidenceRef,
    Governance,
    Receipt,
)
from handoffs.contracts._registry import Registry
from handoffs.contracts._sender import GrantIssuer, GrantSource, Sender
from handoffs.contracts._signing import AuthorityGrant, VerifiedReceipt, issue_grant

__all__ = [
    "ANY_AUDIENCE",
    "AnyAudience",
    "Authority",
    "AuthorityGrant",
    "ContextDependency",
    "Contract",
    "ContractDefinitionError",
    "DecisionContent",
    "Encoder",
    "EvidenceFresh",
    "EvidenceRef",
    "FieldKind",
    "FieldSpec",
    "Governance",
    "GovernanceService",
    "GrantIssuer",
    "GrantSource",
    "HardConstraint",
    "Interval",
    "LossMatrix",
    "MalformedJSON",
    "OnMissing",
    "PolicyResolvable",
    "ProofError",
    "Receipt",
    "ReceiptEncoder",
    "ReceiptValidationError",
    "Registry",
    "RoleHeld",
    "Sender",
    "Uncertainty",
    "UnknownContract",
    "UntrustedGovernance",
    "VerifiedReceipt",
    "decision_field",
    "issue_grant",
]

# A name that left this face since 0.1.0 raises an ImportError naming its new place.
__getattr__ = moved_from(__name__)
