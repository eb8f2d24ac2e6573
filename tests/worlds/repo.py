"""Paths in the repository the tests read (the root, the checked-in schemas, the runnable
examples), and ``tools/mutate.py`` loaded as a module, shared by in-process and
subprocess tests. Test modules import it from here rather than from one another.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

__all__ = ["CHECKED_IN", "EXAMPLES", "ROOT", "SCHEMAS", "load_mutate", "named_mutant"]

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"
CHECKED_IN = SCHEMAS / "payment-release" / "1.0.0.json"
"""The checked-in schema of the payment contract."""
EXAMPLES = ("scout", "pump", "relay", "baselines")
"""The examples runnable as scripts from the repository root."""


def load_mutate() -> Any:
    """``tools/mutate.py`` as the module ``mutate`` (once per process)."""
    if "mutate" in sys.modules:
        return sys.modules["mutate"]
    spec = importlib.util.spec_from_file_location("mutate", ROOT / "tools" / "mutate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutate"] = module
    spec.loader.exec_module(module)
    return module


def named_mutant(mutants: list[Any], label: str) -> Any:
    """The named mutant ``label`` (``"receipt expiry <= → <"``) among ``mutants``."""
    return next(m for m in mutants if m.named and m.where == label)
