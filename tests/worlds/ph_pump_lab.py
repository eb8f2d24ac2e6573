"""The lab experiment on the p·h pump (ph_pump), under the expression and the predicate
policy. Test modules import it from here rather than from one another.
"""

from __future__ import annotations

from typing import Any

import ph_pump as pump
from handoffs.lab import (
    Experiment,
    IterableCases,
    Strategy,
    Tolerances,
)
from handoffs.lab.perturbations._coarsening import WidenInterval

__all__ = [
    "WIDEN",
    "experiment",
]


WIDEN = "widen-interval:failure_probability:0.1"


def experiment(contract: Any, cases: Any = pump.cases, **options: Any) -> Experiment:
    return Experiment(
        name="pump-ph", contract=contract,
        cases=IterableCases(cases, description="python:ph_pump.cases"),
        strategies=(Strategy(name="receipt", encoder=pump.encoder(contract),
                             receiver=pump.controller(contract), receipts=True, gated=True),),
        governance=pump.GOVERNANCE, state_of=pump.state_of,
        perturbations=(WidenInterval("failure_probability", 0.1),),
        tolerances=Tolerances(controls_must_fail=False, gate_perturbations=("none", WIDEN)),
        **options,
    )
