"""Shared internal (not public): where each name that left a face since 0.1.0 lives now.

Importing such a name from its old face raises :class:`~handoffs.errors.MovedName`
(an ``ImportError``) that names the new place, rather than a bare "cannot import
name": ``from handoffs.contracts import Field`` says ``Field`` lives in
:mod:`handoffs.contracts.policy`. Each face that lost names ends with
``__getattr__ = moved_from(__name__)``; the table is the migration page's
(docs/reference/migration.md), which a test keeps equal to it. Nothing is
re-exported: the old import fails, with the fix in its message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, NoReturn

from handoffs._errors import MovedName

__all__ = ["MOVED", "RELEASE", "moved_from"]

RELEASE: Final = "0.2.0"
"""The release the names moved in."""

# old face -> name -> (new place, how to use it). A new place that is a module path
# plus the name ("handoffs.contracts.policy") means the name is importable there as is.
MOVED: Final[dict[str, dict[str, str]]] = {
    "handoffs": {
        "Contract": "handoffs.contracts",
        "Receipt": "handoffs.contracts",
        "UnsafeConfigurationWarning": "handoffs.receivers",
    },
    "handoffs.contracts": {
        **dict.fromkeys(("AllOf", "AnyOf", "Condition", "Field", "Is", "Not", "Outcome",
                         "Over", "Policy", "PolicyError", "Predicate", "Rule", "Under"),
                        "handoffs.contracts.policy"),
        **dict.fromkeys(("ContractDiff", "Finding", "FindingCode", "VersionBumpError",
                         "diff"), "handoffs.contracts.versions"),
        **dict.fromkeys(("KeyEntry", "KeyRing", "KeyRingError", "SigningKey",
                         "VerifiedProof"), "handoffs.integrity"),
        **dict.fromkeys(("UnknownKey", "Violation"), "handoffs.errors"),
        "GOVERNANCE_FIELDS": "Governance.FIELDS (handoffs.contracts)",
        "IDENTIFIER_RULE": "the message of the InvalidArgument an identifier raises",
        "case_id_from": "Governance.case_id_from(text) (handoffs.contracts)",
        "diff_policies": "ContractDiff.between_policies(...) (handoffs.contracts.versions)",
        "iter_violations": "ReceiptValidationError.violations, raised by "
                           "Contract.validate(document) (handoffs.contracts)",
        "key_ring_from_agent_card": "KeyRing.from_agent_card(...) (handoffs.integrity)",
        "key_ring_from_jwks": "KeyRing.from_jwks(...) (handoffs.integrity)",
        "policy_document": "Contract.policy_document() (handoffs.contracts)",
        "policy_fingerprint": "Contract.policy_fingerprint() (handoffs.contracts)",
        "sign_receipt": "receipt.sign(key, ...) (handoffs.contracts.Receipt)",
        "to_json_schema": "Contract.json_schema() (handoffs.contracts)",
        "validate": "Contract.validate(document) (handoffs.contracts)",
        "verify_receipt": "Receipt.verify(document, keyring, ...) (handoffs.contracts)",
        "write_schema": "export_release(root, contract) (handoffs.contracts.versions)",
    },
    "handoffs.integrity": {
        "cryptosuite": "the key's Multikey header, which picks the suite (Cryptosuite "
                       "in handoffs.integrity is the protocol)",
    },
    "handoffs.lab": {
        **dict.fromkeys(("ActionAdded", "CaseContext", "Falsehood", "LossChanged",
                         "Perturbation", "Relay", "RemoveDecisionField",
                         "RemoveGovernanceField", "Scoring", "Variant",
                         "declare_perturbation", "standard_perturbations"),
                        "handoffs.lab.perturbations"),
        **dict.fromkeys(("DiffBudget", "ReportDiff", "diff_reports", "evaluate_gate",
                         "release_artefact", "render_html", "render_markdown",
                         "validate_report"), "handoffs.lab.reports"),
        **dict.fromkeys(("AdvisoryActionReceiver", "FullRecordReceiver",
                         "GovernanceChecker", "ScoreReceiver"), "handoffs.receivers"),
        **dict.fromkeys(("NoSuchReading", "ReportError", "RunLogError",
                         "UnknownExperimentKey", "UserCodeError"), "handoffs.errors"),
        **dict.fromkeys(("AuthoritativeSender", "ConstantMessage", "MergeEnumValues",
                         "Mutate", "NoMessage", "PolicyVersionChanged", "RoundNumeric",
                         "ShortenEvidenceRefs", "ShuffledMessage", "WidenInterval"),
                        "standard_perturbations() / select_perturbations(...) "
                        "(handoffs.lab.perturbations)"),
        "AUTHORITATIVE_SENDER": "the id \"authoritative-sender\"",
        "CONTROLS": "the ids \"no-message\", \"shuffled-message\", \"constant-message\"",
        "NOT_APPLICABLE": "Perturbation.NOT_APPLICABLE (handoffs.lab.perturbations)",
        "REMOVED": "Perturbation.REMOVED (handoffs.lab.perturbations)",
        "UNCHANGED": "Perturbation.UNCHANGED (handoffs.lab.perturbations)",
        "SUBJECT": "the string \"@subject\"",
        "ReferenceReceiver": "the experiment's reference run (Experiment, handoffs.lab)",
        "control_expectations": "read_baselines(report, experiment=...) (handoffs.lab)",
        "sign_artefact": "release_artefact(report, key=...) (handoffs.lab.reports)",
        "verify_artefact": "verify(artefact, keyring, purpose=\"assertionMethod\") "
                           "(handoffs.integrity)",
    },
    "handoffs.receivers": {
        **dict.fromkeys(("ChatClient", "ChatRequest", "Completion", "ModelError",
                         "ModelReceiver", "OpenAICompatibleClient", "ServedModel"),
                        "handoffs.receivers.models"),
        **dict.fromkeys(("DerivedFrom", "HandoffChain", "Hop", "HopRole",
                         "IdentityCompositionReceiver", "SeparationOfDuties"),
                        "handoffs.receivers.chains"),
        **dict.fromkeys(("DecisionLogError", "EvidenceError", "ReplayStoreError",
                         "ReplayedReceipt"), "handoffs.errors"),
        "PolicyStatus": "True / False / None from PolicyService.resolve(version)",
        "Readback": "Gate(readback=fraction) (handoffs.receivers)",
        "ReceiverRule": "Callable[[Admitted], Ruling] (both in handoffs.receivers)",
        "action_schema": "ModelReceiver.action_schema(contract) "
                         "(handoffs.receivers.models)",
        "add_hop": "chain.add_hop(...) (handoffs.receivers.chains.HandoffChain)",
        "approve": "chain.approve(...) (handoffs.receivers.chains.HandoffChain)",
        "carried_receipt": "CarriedReceiptReceiver.message(receipt, chain) "
                           "(handoffs.receivers)",
        "handoff_chain_schema": "HandoffChain.json_schema() (handoffs.receivers.chains)",
        "start_chain": "HandoffChain.start(case_id=...) (handoffs.receivers.chains)",
    },
    "handoffs.service": {
        "create_app": "Service(config).app() (handoffs.service)",
        "load_config": "ServiceConfig.load(path, ...) (handoffs.service)",
    },
    "handoffs.testing": {
        "assert_sufficient": "handoffs.lab",
    },
}


def _is_module(place: str) -> bool:
    return place.startswith("handoffs") and " " not in place


def message(face: str, name: str) -> str:
    """What importing ``name`` from ``face`` says."""
    place = MOVED[face][name]
    if _is_module(place):
        return (f"{name} moved from {face} to {place} in handoffs {RELEASE}: "
                f"from {place} import {name} (see the migration table in the docs)")
    return (f"{face}.{name} was removed in handoffs {RELEASE}; use {place} instead "
            "(see the migration table in the docs)")


def moved_from(face: str) -> Callable[[str], NoReturn]:
    """The module ``__getattr__`` of ``face``: a moved name raises :class:`MovedName`
    naming its new place; any other missing name the usual ``AttributeError``.
    """
    table = MOVED.get(face, {})

    def __getattr__(name: str) -> NoReturn:  # noqa: N807 - the module hook's name
        if name in table:
            raise MovedName(message(face, name), name=name, face=face, place=table[name])
        raise AttributeError(f"module {face!r} has no attribute {name!r}")

    __getattr__.moved = table  # type: ignore[attr-defined]
    return __getattr__
