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

from handoffs._lazy import attach
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
from handoffs.lab._release import evaluate_gate, release_artefact, sign_artefact, verify_artefact
from handoffs.lab._render import render_html, render_markdown
from handoffs.lab._report import ReportError, validate_report
from handoffs.lab._runlog import RunLogError
from handoffs.lab._runner import LabRun, rescore, run
from handoffs.lab._toml import load_experiment

# Importable, resolved on first use, but not public: not in __all__ (see
# docs/reference/compatibility.md).
_NOT_PUBLIC = {
    "GeneratedCase": "handoffs.lab._experiment",
    "region_sufficient": "handoffs.lab._minimal",
}
__getattr__, __dir__ = attach(__name__, _NOT_PUBLIC)

__all__ = [
    "AUTHORITATIVE_SENDER",
    "CONTROLS",
    "AdvisoryActionReceiver",
    "AuthorityReading",
    "Baselines",
    "CaseSource",
    "ControlExpectations",
    "ControlReading",
    "DiffBudget",
    "Experiment",
    "ExperimentError",
    "FullRecordReceiver",
    "GeneratedCases",
    "GovernanceChecker",
    "IterableCases",
    "JSONLinesCases",
    "LabRun",
    "MessagePartition",
    "MinimalMessage",
    "NoSuchReading",
    "PartitionCell",
    "Reference",
    "ReferenceReceiver",
    "ReportDiff",
    "ReportError",
    "RunLogError",
    "ScoreReceiver",
    "SenderClaimReading",
    "Strategy",
    "Tolerances",
    "Trigger",
    "UnknownExperimentKey",
    "UserCodeError",
    "control_expectations",
    "counterfactual_triggers",
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
    "validate_report",
    "verify_artefact",
]
