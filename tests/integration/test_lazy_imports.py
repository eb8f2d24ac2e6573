"""What importing the production parts loads: none of the lab, the examples, the test
helpers or the optional libraries (``benchmarks/cli.py`` measures the cost)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Modules (and their submodules) that production imports must not load. jsonschema is
# python-jsonschema, the error reporter (jsonschema_rs validates).
HEAVY = ("hypothesis", "jsonschema", "click", "rich", "handoffs.lab", "handoffs.testing",
         "handoffs.examples", "handoffs.contracts.payment", "importlib.metadata",
         "http.client", "urllib.request", "handoffs.contracts._diff")


def loaded_after(code: str) -> list[str]:
    """The heavy modules a fresh interpreter has loaded after running ``code``."""
    probe = (f"{code}\nimport json, sys\n"
             f"heavy = {HEAVY!r}\n"
             "print(json.dumps(sorted(m for m in sys.modules\n"
             "                        if any(m == h or m.startswith(h + '.') for h in heavy))))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, check=True)
    return list(json.loads(done.stdout))


@pytest.mark.parametrize("code", [
    "import handoffs",
    "import handoffs.contracts",
    "import handoffs.receivers",
    "import handoffs.contracts.policy",
    "import handoffs.integrity",
    "from handoffs.contracts import Sender, Contract, Receipt",
    "from handoffs.receivers import Gate, StrictContractReceiver",
])
def test_production_imports_load_nothing_heavy(code: str) -> None:
    assert loaded_after(code) == []


def test_the_probe_sees_what_a_module_loads() -> None:
    assert "hypothesis" in loaded_after("import handoffs.testing")


def test_reporting_a_violation_loads_the_reference_reporter_on_demand() -> None:
    code = ("import attrs, enum\n"
            "from handoffs.contracts import Contract, LossMatrix, decision_field\n"
            "from handoffs.contracts.policy import Policy\n"
            "from handoffs.contracts._schema import iter_violations\n"
            "class A(enum.Enum):\n"
            "    GO = 'GO'\n"
            "@attrs.frozen\n"
            "class S:\n"
            "    ok: bool = decision_field('ok')\n"
            "c = Contract(name='c', version='1.0.0', description='d', actions=A, state=S,"
            " policy=Policy(rules=[], default=A.GO), loss=LossMatrix({(A.GO, A.GO): 0}),"
            " fail_closed_action=A.GO, counterfactual_trigger='t')\n"
            "assert list(iter_violations(c, {}))\n")
    assert loaded_after(code.replace("assert list(iter_violations(c, {}))\n", "")) == []
    assert "jsonschema" in loaded_after(code)


def test_the_version_needs_no_installed_metadata() -> None:
    from importlib.metadata import version

    import handoffs

    assert handoffs.__version__ == version("handoffs")  # what the build wrote from it
    assert loaded_after("import handoffs; handoffs.__version__") == []
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        handoffs.nope  # noqa: B018 - the attribute access is the test


@pytest.mark.parametrize("package", ["handoffs", "handoffs.contracts", "handoffs.receivers",
                                     "handoffs.receivers.chains", "handoffs.receivers.models",
                                     "handoffs.lab", "handoffs.lab.perturbations",
                                     "handoffs.contracts.policy", "handoffs.integrity"])
def test_every_public_name_resolves_and_is_listed(package: str) -> None:
    import importlib

    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        module.no_such_name  # noqa: B018 - the attribute access is the test


@pytest.mark.parametrize("module", ["handoffs", "handoffs.contracts", "handoffs.receivers",
                                    "handoffs.lab"])
def test_importing_the_library_loads_no_example(module: str) -> None:
    loaded = _loaded_after(f"import {module}")
    assert module in loaded
    assert [m for m in loaded if m.startswith("handoffs.examples")] == []


def test_the_example_check_can_fail() -> None:
    assert "handoffs.examples.payment" in _loaded_after("import handoffs.examples.payment")


def _loaded_after(statement: str) -> list[str]:
    code = f"import sys\n{statement}\nprint('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    return done.stdout.split()
