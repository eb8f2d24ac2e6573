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

How it runs is a :class:`RunOptions` value, given whole or as keywords
(``run(experiment, RunOptions(chunk_size=64))`` is ``run(experiment, chunk_size=64)``).

The essay's baseline receivers (:class:`~handoffs.receivers.ScoreReceiver`,
:class:`~handoffs.receivers.AdvisoryActionReceiver`,
:class:`~handoffs.receivers.FullRecordReceiver`) and the
:class:`~handoffs.receivers.GovernanceChecker` that admits their unsigned messages are
measured here; they are receivers on the gate's pipeline, in :mod:`handoffs.receivers`.
In a unit test, :func:`assert_sufficient` runs the lab on one receiver and fails with
a table of the cases it decides otherwise than the contract's reference. The
perturbations are :mod:`handoffs.lab.perturbations`; reading, rendering, comparing
and releasing a report is :mod:`handoffs.lab.reports`. A :class:`Topology` (a chain of
edges and the final receiver's full-evidence reference) runs every edge's local test
and the end-to-end test in one :func:`run_topology`.
"""

from handoffs._cases import GeneratedCase
from handoffs._errors import ExperimentError, ProjectionError
from handoffs._moved import moved_from
from handoffs.lab._cache import CallCache
from handoffs.lab._controls import (
    AuthorityReading,
    Baselines,
    ControlExpectations,
    ControlReading,
    SenderClaimReading,
    read_baselines,
)
from handoffs.lab._experiment import Experiment, Strategy, Tolerances
from handoffs.lab._minimal import (
    FieldRepresentation,
    MinimalMessage,
    Reference,
    Trigger,
    counterfactual_triggers,
    minimal_message,
)
from handoffs.lab._partition import MessagePartition, PartitionCell, message_partition
from handoffs.lab._population import Population
from handoffs.lab._runner import LabRun, RunOptions, rescore, run
from handoffs.lab._sources import CaseSource, GeneratedCases, IterableCases, JSONLinesCases
from handoffs.lab._sufficient import assert_sufficient
from handoffs.lab._toml import load_experiment
from handoffs.lab._topology import (
    Edge,
    EndToEnd,
    Topology,
    TopologyRun,
    is_topology_file,
    load_topology,
    run_topology,
)

__all__ = [
    "AuthorityReading",
    "Baselines",
    "CallCache",
    "CaseSource",
    "ControlExpectations",
    "ControlReading",
    "Edge",
    "EndToEnd",
    "Experiment",
    "ExperimentError",
    "FieldRepresentation",
    "GeneratedCase",
    "GeneratedCases",
    "IterableCases",
    "JSONLinesCases",
    "LabRun",
    "MessagePartition",
    "MinimalMessage",
    "PartitionCell",
    "Population",
    "ProjectionError",
    "Reference",
    "RunOptions",
    "SenderClaimReading",
    "Strategy",
    "Tolerances",
    "Topology",
    "TopologyRun",
    "Trigger",
    "assert_sufficient",
    "counterfactual_triggers",
    "is_topology_file",
    "load_experiment",
    "load_topology",
    "message_partition",
    "minimal_message",
    "read_baselines",
    "rescore",
    "run",
    "run_topology",
]

# A name that left this face since 0.1.0 raises an ImportError naming its new place.
__getattr__ = moved_from(__name__)
