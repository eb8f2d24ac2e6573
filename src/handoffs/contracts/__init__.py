"""Decision-receipt contracts: define, build, validate, sign and diff.

Everything agent code needs to build, sign, validate and decide is importable from
here::

    from handoffs.contracts import Contract, Receipt, decision_field, Policy, Rule, Is
"""

from handoffs._errors import (
    ContractDefinitionError,
    HandoffsError,
    KeyRingError,
    MalformedJSON,
    ProofError,
    ReceiptValidationError,
    UnknownContract,
    UnknownKey,
    Violation,
    WeakKey,
)
from handoffs.contracts import payment
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
from handoffs.contracts._encoders import (
    Encoder,
    GovernanceService,
    ReceiptEncoder,
    UntrustedGovernance,
    compose,
)
from handoffs.contracts._fields import MISSING, FieldKind, FieldSpec, Interval, decision_field
from handoffs.contracts._keys import KeyEntry, KeyRing, SigningKey
from handoffs.contracts._policy import (
    AllOf,
    Always,
    AnyOf,
    Condition,
    Is,
    Not,
    Outcome,
    Over,
    Policy,
    Predicate,
    Rule,
    Under,
)
from handoffs.contracts._proofs import VerifiedProof, sign, verify
from handoffs.contracts._receipt import (
    ENVELOPE_MEMBERS,
    GOVERNANCE_FIELDS,
    DecisionContent,
    EvidenceRef,
    Governance,
    Receipt,
    payload_bytes,
)
from handoffs.contracts._registry import BUILTIN, Registry
from handoffs.contracts._schema import iter_violations, schema_id, to_json_schema, validate
from handoffs.contracts._signing import (
    AuthorityGrant,
    VerifiedReceipt,
    issue_grant,
    sign_receipt,
    verify_receipt,
)

__all__ = [
    "BUILTIN",
    "ENVELOPE_MEMBERS",
    "GOVERNANCE_FIELDS",
    "MISSING",
    "AllOf",
    "Always",
    "AnyOf",
    "Authority",
    "AuthorityGrant",
    "Condition",
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
    "HandoffsError",
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
    "PolicyResolvable",
    "Predicate",
    "ProofError",
    "Receipt",
    "ReceiptEncoder",
    "ReceiptValidationError",
    "Registry",
    "RoleHeld",
    "Rule",
    "SigningKey",
    "Uncertainty",
    "Under",
    "UnknownContract",
    "UnknownKey",
    "UntrustedGovernance",
    "VerifiedProof",
    "VerifiedReceipt",
    "Violation",
    "WeakKey",
    "compose",
    "decision_field",
    "issue_grant",
    "iter_violations",
    "payload_bytes",
    "payment",
    "schema_id",
    "sign",
    "sign_receipt",
    "to_json_schema",
    "validate",
    "verify",
    "verify_receipt",
]
