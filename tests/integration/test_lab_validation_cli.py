"""Bad experiment inputs refused by the installed ``handoffs lab`` command in a process of
its own, as one line on stderr (the in-process tests of the same refusals are in
``tests/unit/test_lab_validation.py``)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from handoffs.lab import run
from worlds.user_contract import HANDOFFS, TOML, experiment


def test_the_command_line_refuses_an_unknown_injection_case_in_one_line(
        user_dir: Path) -> None:
    (user_dir / "experiment.toml").write_text(
        TOML + '\n[[injection]]\ncase_id = "pump-404"\nfield = "calibrated"\nvalue = true\n')
    done = subprocess.run([HANDOFFS, "lab", "run", "experiment.toml", "--out", "report",
                           "--no-progress"], cwd=user_dir, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "error: injection inject:pump-404:calibrated=true names case 'pump-404', which the "
        "case source (hypothesis:pump-maintenance/1.0.0:6:seed=0) does not yield @ $ "
        "[unknown-case]"]
    assert not (user_dir / "report" / "report.json").exists()


@pytest.fixture(scope="module")
def report_path(tmp_path_factory: pytest.TempPathFactory, mymodule: Any) -> Path:
    from handoffs.cli._lab import _write_report

    out = tmp_path_factory.mktemp("report")
    report = run(experiment(mymodule, mymodule.planner(),
                            perturbations=None)).report
    _write_report(report, out)
    return out / "report.json"


@pytest.mark.parametrize(("budget", "message"), [
    ("gate_perturbations=remove-decision-field:nothing",
     "error: gate_perturbations names perturbations the run did not apply: "
     "['remove-decision-field:nothing']; "),
    ('gate_perturbations=["none", "bogus"]',
     "error: gate_perturbations names perturbations the run did not apply: ['bogus']; "),
    ("hard_violations=0.5", "error: tolerance hard_violations must be an integer >= 0, "
                            "got 0.5 @ $.hard_violations [usage]"),
    ("regret_delta=lots", "error: tolerance regret_delta must be a finite number >= 0, "
                          "got 'lots' @ $.regret_delta [usage]"),
])
def test_a_bad_budget_is_refused_before_the_gate_runs(report_path: Path, budget: str,
                                                      message: str) -> None:
    artefact = report_path.with_name(f"artefact-{abs(hash(budget))}.json")
    done = subprocess.run([HANDOFFS, "lab", "gate", str(report_path), "--budget", budget,
                           "--artefact", str(artefact)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith(message)
    assert done.stdout == ""
    assert not artefact.exists()


def test_a_budget_naming_a_perturbation_the_run_applied_gates(report_path: Path) -> None:
    done = subprocess.run([HANDOFFS, "lab", "gate", str(report_path), "--budget",
                           'gate_perturbations=["none", "remove-decision-field:calibrated"]',
                           "--artefact", str(report_path.with_name("ok.json"))],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode in (0, 1), done.stderr
    assert "receipt under remove-decision-field:calibrated: agreement" in done.stdout


def test_the_command_line_names_a_raising_encoder(user_dir: Path) -> None:
    (user_dir / "bad.py").write_text(
        "class BadEncoder:\n"
        "    def encode(self, evidence):\n"
        "        raise ZeroDivisionError('division by zero in my encoder')\n",
        encoding="utf-8")
    path = user_dir / "experiment.toml"
    path.write_text(TOML.replace('encoder = "mymodule:encoder"', 'encoder = "bad:BadEncoder"'))
    done = subprocess.run([HANDOFFS, "lab", "run", "experiment.toml", "--out", "report",
                           "--no-progress"], cwd=user_dir, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "error: the encoder of strategy 'receipt' bad.BadEncoder.encode raised on case "
        "'generated-000001': ZeroDivisionError: division by zero in my encoder @ $ "
        "[user-code-error]\n")
