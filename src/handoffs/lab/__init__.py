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

The essay's baseline receivers (:class:`~handoffs.receivers.ScoreReceiver`,
:class:`~handoffs.receivers.AdvisoryActionReceiver`,
:class:`~handoffs.receivers.FullRecordReceiver`) and the
:class:`~handoffs.receivers.GovernanceChecker` that admits their unsigned messages are
measured here; they are receivers on the gate's pipeline, in :mod:`handoffs.receivers`.
In a unit test, :func:`assert_sufficient` runs the lab on one receiver and fails with
a table of the cases it decides otherwise than the contract's reference. The
perturbations are :mod:`handoffs.lab.perturbations`; reading, rendering, comparing
and releasing a report is :mod:`handoffs.lab.reports`.
"""

from handoffs.lab._controls import read_baselines
from handoffs.lab._experiment import (
    Experiment,
    ExperimentError,
    GeneratedCases,
    IterableCases,
    JSONLinesCases,
    Strategy,
    Tolerances,
)
from handoffs.lab._minimal import counterfactual_triggers, minimal_message
from handoffs.lab._partition import message_partition
from handoffs.lab._population import Population
from handoffs.lab._runner import rescore, run
from handoffs.lab._sufficient import assert_sufficient
from handoffs.lab._toml import load_experiment

__all__ = [
    "Experiment",
    "ExperimentError",
    "GeneratedCases",
    "IterableCases",
    "JSONLinesCases",
    "Population",
    "Strategy",
    "Tolerances",
    "assert_sufficient",
    "counterfactual_triggers",
    "load_experiment",
    "message_partition",
    "minimal_message",
    "read_baselines",
    "rescore",
    "run",
]
