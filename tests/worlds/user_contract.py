"""The user's own contract (``tests/user_contract/mymodule.py``): an experiment over it,
its TOML form and the ``handoffs`` command, shared by the lab validation tests in process
and as subprocesses. The fixtures ``mymodule`` and ``user_dir`` are in ``conftest.py``.
Test modules import it from here rather than from one another.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from handoffs.lab import Experiment, GeneratedCases, Population, Strategy, Tolerances
from worlds import TEST_DRAWS

__all__ = ["HANDOFFS", "TOML", "USER_CONTRACT", "experiment"]

USER_CONTRACT = Path(__file__).resolve().parents[1] / "user_contract"
"""The directory of ``mymodule.py``."""
HANDOFFS = str(Path(sys.executable).with_name("handoffs"))


def experiment(mymodule: Any, receiver: Any, **changes: Any) -> Experiment:
    defaults: dict[str, Any] = {
        "name": "pump-validation",
        "contract": mymodule.MY_CONTRACT,
        "cases": GeneratedCases(mymodule.MY_CONTRACT, 12, seed=3),
        "population": Population(draws=TEST_DRAWS, seed=3),
        "strategies": (Strategy(name="receipt", encoder=mymodule.encoder(),
                                receiver=receiver, gated=True),),
        "governance": mymodule.GOVERNANCE,
        "perturbations": (),
        "tolerances": Tolerances(controls_must_fail=False),
    }
    return Experiment(**{**defaults, **changes})


TOML = """\
[experiment]
name = "pump"
contract = "mymodule:MY_CONTRACT"

[cases]
hypothesis = 6
draws = 200  # worlds.TEST_DRAWS

[governance]
object = "mymodule:GOVERNANCE"

[[strategy]]
name = "receipt"
encoder = "mymodule:encoder"
receiver = "mymodule:planner"
"""
