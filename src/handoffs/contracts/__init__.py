"""Decision-receipt contracts: define, build, validate, sign and diff.

Everything agent code needs to define, sign, validate and decide is importable from
here::

    from handoffs.contracts import Contract, decision_field, Policy, Rule, Is, Sender

A :class:`Sender` turns decision content into signed receipt bytes;
:meth:`Receipt.build`, :func:`issue_grant` and :func:`sign_receipt` are the low-level
layer underneath it.
"""

from handoffs._errors import (
    ContractDefinitionError,
    HandoffsError,
    KeyRingError,
    MalformedJSON,
    PolicyError,
    ProofError,
    ReceiptValidationError,
    UnknownContract,
    UnknownKey,
    UntrustedGovernance,
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
from handoffs.contracts._diff import (
    Category,
    ContractDiff,
    Direction,
    Finding,
    FindingCode,
    VersionBumpError,
    diff,
    diff_schemas,
)
from handoffs.contracts._encoders import (
    Encoder,
    GovernanceService,
    ReceiptEncoder,
    compose,
)
from handoffs.contracts._fields import MISSING, FieldKind, FieldSpec, Interval, decision_field
from handoffs.contracts._keys import KeyEntry, KeyRing, SigningKey
from handoffs.contracts._policy import (
    AllOf,
    Always,
    AnyOf,
    Compare,
    Condition,
    Expr,
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
from handoffs.contracts._schema import (
    iter_violations,
    render_schema,
    schema_id,
    to_json_schema,
    validate,
    write_schema,
)
from handoffs.contracts._sender import GrantIssuer, GrantSource, Sender
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
    "Category",
    "Compare",
    "Condition",
    "ContextDependency",
    "Contract",
    "ContractDefinitionError",
    "ContractDiff",
    "DecisionContent",
    "Direction",
    "Encoder",
    "EvidenceFresh",
    "EvidenceRef",
    "Expr",
    "Field",
    "FieldKind",
    "FieldSpec",
    "Finding",
    "FindingCode",
    "Governance",
    "GovernanceService",
    "GrantIssuer",
    "GrantSource",
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
    "WeakKey",
    "compose",
    "decision_field",
    "diff",
    "diff_schemas",
    "issue_grant",
    "iter_violations",
    "payload_bytes",
    "payment",
    "render_schema",
    "schema_id",
    "sign",
    "sign_receipt",
    "to_json_schema",
    "validate",
    "verify",
    "verify_receipt",
    "write_schema",
]
