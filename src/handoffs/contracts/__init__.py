"""Decision-receipt contracts: define, build, validate, sign and diff.

Everything agent code needs to define, sign, validate and decide is importable from
here::

    from handoffs.contracts import Contract, decision_field, Policy, Rule, Is, Sender

A :class:`Sender` turns decision content into signed receipt bytes;
:meth:`Receipt.build`, :func:`issue_grant` and :func:`sign_receipt` are the low-level
layer underneath it.
"""

from typing import TYPE_CHECKING

from handoffs._errors import (
    ContractDefinitionError,
    KeyRingError,
    MalformedJSON,
    PolicyError,
    ProofError,
    ReceiptValidationError,
    UnknownContract,
    UnknownKey,
    UntrustedGovernance,
    Violation,
)
from handoffs._lazy import attach
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
from handoffs.contracts._fields import Interval, decision_field
from handoffs.contracts._jwks import key_ring_from_agent_card, key_ring_from_jwks
from handoffs.contracts._keys import KeyEntry, KeyRing, SigningKey
from handoffs.contracts._policy import (
    AllOf,
    AnyOf,
    Condition,
    Field,
    Is,
    Not,
    Outcome,
    Over,
    Policy,
    Predicate,
    Rule,
    Under,
)
from handoffs.contracts._proofs import VerifiedProof
from handoffs.contracts._receipt import (
    GOVERNANCE_FIELDS,
    IDENTIFIER_RULE,
    DecisionContent,
    EvidenceRef,
    Governance,
    Receipt,
    case_id_from,
)
from handoffs.contracts._registry import Registry
from handoffs.contracts._schema import iter_violations, to_json_schema, validate, write_schema
from handoffs.contracts._sender import GrantIssuer, GrantSource, Sender
from handoffs.contracts._signing import (
    ANY_AUDIENCE,
    AuthorityGrant,
    VerifiedReceipt,
    issue_grant,
    sign_receipt,
    verify_receipt,
)

if TYPE_CHECKING:
    from handoffs.contracts._diff import (
        ContractDiff,
        Finding,
        FindingCode,
        VersionBumpError,
        diff,
        diff_policies,
    )
    from handoffs.contracts._fingerprint import policy_document, policy_fingerprint

# Imported on first use: importing the package costs only what its eager names
# need (benchmarks/cli.py).
_LAZY = {
    "ContractDiff": "handoffs.contracts._diff",
    "Finding": "handoffs.contracts._diff",
    "FindingCode": "handoffs.contracts._diff",
    "VersionBumpError": "handoffs.contracts._diff",
    "diff": "handoffs.contracts._diff",
    "diff_policies": "handoffs.contracts._diff",
    "policy_document": "handoffs.contracts._fingerprint",
    "policy_fingerprint": "handoffs.contracts._fingerprint",
}

# Importable, resolved on first use, but not public: not in __all__ (see
# docs/reference/compatibility.md).
_NOT_PUBLIC = {
    "ENVELOPE_MEMBERS": "handoffs.contracts._receipt",
    "MISSING": "handoffs.contracts._fields",
    "Always": "handoffs.contracts._policy",
    "Compare": "handoffs.contracts._policy",
    "Expr": "handoffs.contracts._policy",
    "FieldKind": "handoffs.contracts._fields",
    "FieldSpec": "handoffs.contracts._fields",
    "WeakKey": "handoffs._errors",
    "HandoffsError": "handoffs._errors",
    "Category": "handoffs.contracts._diff",
    "Direction": "handoffs.contracts._diff",
    "diff_schemas": "handoffs.contracts._diff",
}
__getattr__, __dir__ = attach(__name__, {**_LAZY, **_NOT_PUBLIC})

__all__ = [
    "ANY_AUDIENCE",
    "GOVERNANCE_FIELDS",
    "IDENTIFIER_RULE",
    "AllOf",
    "AnyOf",
    "Authority",
    "AuthorityGrant",
    "Condition",
    "ContextDependency",
    "Contract",
    "ContractDefinitionError",
    "ContractDiff",
    "DecisionContent",
    "Encoder",
    "EvidenceFresh",
    "EvidenceRef",
    "Field",
    "Finding",
    "FindingCode",
    "Governance",
    "GovernanceService",
    "GrantIssuer",
    "GrantSource",
    "HardConstraint",
    "Interval",
    "Is",
    "KeyEntry",
    "KeyRing",
    "KeyRingError",
    "LossMatrix",
    "MalformedJSON",
    "Not",
    "OnMissing",
    "Outcome",
    "Over",
    "Policy",
    "PolicyError",
    "PolicyResolvable",
    "Predicate",
    "ProofError",
    "Receipt",
    "ReceiptEncoder",
    "ReceiptValidationError",
    "Registry",
    "RoleHeld",
    "Rule",
    "Sender",
    "SigningKey",
    "Uncertainty",
    "Under",
    "UnknownContract",
    "UnknownKey",
    "UntrustedGovernance",
    "VerifiedProof",
    "VerifiedReceipt",
    "VersionBumpError",
    "Violation",
    "case_id_from",
    "decision_field",
    "diff",
    "diff_policies",
    "issue_grant",
    "iter_violations",
    "key_ring_from_agent_card",
    "key_ring_from_jwks",
    "policy_document",
    "policy_fingerprint",
    "sign_receipt",
    "to_json_schema",
    "validate",
    "verify_receipt",
    "write_schema",
]
