"""The ablation lab: ablate until the decision changes.

Declare an :class:`Experiment` (a contract, a case source, strategies of encoder ×
receiver, perturbations and tolerances), :func:`run` it on any
``concurrent.futures.Executor``, and read the JSON report: agreement, regret and
hard violations per strategy × perturbation, schema-valid falsehoods, counterfactual
triggers, minimal sufficient messages, the release gate and the release artefact::

    from handoffs.lab import run
    from handoffs.examples.payment_lab import payment_experiment

    result = run(payment_experiment())
    result.report["strategy_results"]   # the essay's table
    result.exit_code                    # the release gate: 0 pass, 1 fail

The essay's baseline receivers (:class:`ScoreReceiver`, :class:`AdvisoryActionReceiver`,
:class:`FullRecordReceiver`) and the :class:`GovernanceChecker` that admits their
unsigned messages are lab instruments: they are here, not in :mod:`handoffs.receivers`.
"""

from handoffs.lab._baselines import (
    AdvisoryActionReceiver,
    FullRecordReceiver,
    GovernanceChecker,
    ScoreReceiver,
)
from handoffs.lab._controls import (
    AUTHORITATIVE_SENDER,
    CONTROLS,
    AuthorityReading,
    Baselines,
    ControlExpectations,
    ControlReading,
    NoSuchReading,
    SenderClaimReading,
    control_expectations,
    read_baselines,
)
from handoffs.lab._diff import DiffBudget, ReportDiff, diff_reports
from handoffs.lab._experiment import (
    CaseSource,
    Experiment,
    ExperimentError,
    GeneratedCases,
    IterableCases,
    JSONLinesCases,
    ReferenceReceiver,
    Strategy,
    Tolerances,
    UnknownExperimentKey,
    UserCodeError,
)
from handoffs.lab._minimal import (
    MinimalMessage,
    Reference,
    Trigger,
    counterfactual_triggers,
    minimal_message,
)
from handoffs.lab._partition import MessagePartition, PartitionCell, message_partition
from handoffs.lab._perturb import (
    NOT_APPLICABLE,
    REMOVED,
    SUBJECT,
    UNCHANGED,
    ActionAdded,
    AuthoritativeSender,
    CaseContext,
    ConstantMessage,
    Falsehood,
    LossChanged,
    MergeEnumValues,
    Mutate,
    NoMessage,
    Perturbation,
    PolicyVersionChanged,
    Relay,
    RemoveDecisionField,
    RemoveGovernanceField,
    RoundNumeric,
    Scoring,
    ShortenEvidenceRefs,
    ShuffledMessage,
    Variant,
    WidenInterval,
    declare_perturbation,
    standard_perturbations,
)
from handoffs.lab._release import evaluate_gate, release_artefact, sign_artefact, verify_artefact
from handoffs.lab._render import render_html, render_markdown
from handoffs.lab._report import ReportError, validate_report
from handoffs.lab._runlog import RunLogError
from handoffs.lab._runner import LabRun, rescore, run
from handoffs.lab._toml import load_experiment

__all__ = [
    "AUTHORITATIVE_SENDER",
    "CONTROLS",
    "NOT_APPLICABLE",
    "REMOVED",
    "SUBJECT",
    "UNCHANGED",
    "ActionAdded",
    "AdvisoryActionReceiver",
    "AuthoritativeSender",
    "AuthorityReading",
    "Baselines",
    "CaseContext",
    "CaseSource",
    "ConstantMessage",
    "ControlExpectations",
    "ControlReading",
    "DiffBudget",
    "Experiment",
    "ExperimentError",
    "Falsehood",
    "FullRecordReceiver",
    "GeneratedCases",
    "GovernanceChecker",
    "IterableCases",
    "JSONLinesCases",
    "LabRun",
    "LossChanged",
    "MergeEnumValues",
    "MessagePartition",
    "MinimalMessage",
    "Mutate",
    "NoMessage",
    "NoSuchReading",
    "PartitionCell",
    "Perturbation",
    "PolicyVersionChanged",
    "Reference",
    "ReferenceReceiver",
    "Relay",
    "RemoveDecisionField",
    "RemoveGovernanceField",
    "ReportDiff",
    "ReportError",
    "RoundNumeric",
    "RunLogError",
    "ScoreReceiver",
    "Scoring",
    "SenderClaimReading",
    "ShortenEvidenceRefs",
    "ShuffledMessage",
    "Strategy",
    "Tolerances",
    "Trigger",
    "UnknownExperimentKey",
    "UserCodeError",
    "Variant",
    "WidenInterval",
    "control_expectations",
    "counterfactual_triggers",
    "declare_perturbation",
    "diff_reports",
    "evaluate_gate",
    "load_experiment",
    "message_partition",
    "minimal_message",
    "read_baselines",
    "release_artefact",
    "render_html",
    "render_markdown",
    "rescore",
    "run",
    "sign_artefact",
    "standard_perturbations",
    "validate_report",
    "verify_artefact",
]
