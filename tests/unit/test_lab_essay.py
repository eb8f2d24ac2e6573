"""The essay's printed table, figure for figure, from ``report.json``.

``handoffs lab run`` (no argument) runs the built-in payment experiment through the
general engine; every number the essay's lab prints must come out of the report
under the essay's own keys. Source: decision-sufficiency essay, Part III, the lab
code and its printed JSON output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from handoffs.cli._lab import lab

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "payment.toml"

# The essay's printed output, verbatim (numbers as printed).
ESSAY_ASSUMPTIONS = {
    "cases": 28,
    "case_mix": "Four synthetic variants for each of seven independently decisive scenarios.",
    "receiver": "Advisory messages are recomputed; signed DECIDE messages are executed.",
    "loss": "Synthetic asymmetric matrix; unsafe release costs more than unnecessary escalation.",
}
ESSAY_STRATEGIES = [
    {"strategy": "full_record", "agreement": 1, "mean_regret": 0, "catastrophic_errors": 0,
     "governance_pass_rate": 1, "mean_bytes": 3017.5},
    {"strategy": "decision_contract", "agreement": 1, "mean_regret": 0,
     "catastrophic_errors": 0, "governance_pass_rate": 1, "mean_bytes": 623.5714285714286},
    {"strategy": "risk_score", "agreement": 0.5714285714285714,
     "mean_regret": 2.2857142857142856, "catastrophic_errors": 0, "governance_pass_rate": 1,
     "mean_bytes": 294.57142857142856},
    {"strategy": "action_only_advisory", "agreement": 0.42857142857142855,
     "mean_regret": 2.5714285714285716, "catastrophic_errors": 0, "governance_pass_rate": 1,
     "mean_bytes": 298.57142857142856},
    {"strategy": "action_only_authoritative", "agreement": 1, "mean_regret": 0,
     "catastrophic_errors": 0, "governance_pass_rate": 1, "mean_bytes": 298.57142857142856},
]
ESSAY_DECISION_ABLATION = [
    {"removed_field": "identity_verified", "agreement": 0.8571, "mean_regret": 14.2857,
     "catastrophic_errors": 4},
    {"removed_field": "screening_clear", "agreement": 0.8571, "mean_regret": 14.2857,
     "catastrophic_errors": 4},
    {"removed_field": "duplicate_signal", "agreement": 0.8571, "mean_regret": 11.4286,
     "catastrophic_errors": 4},
    {"removed_field": "policy_current", "agreement": 0.8571, "mean_regret": 17.1429,
     "catastrophic_errors": 4},
    {"removed_field": "evidence_conflict", "agreement": 0.8571, "mean_regret": 17.1429,
     "catastrophic_errors": 4},
    {"removed_field": "high_value", "agreement": 0.8571, "mean_regret": 17.1429,
     "catastrophic_errors": 4},
]
ESSAY_GOVERNANCE_ABLATION = [
    {"removed_field": field, "semantic_agreement": 1,
     "strict_receiver_agreement": 0.42857142857142855, "governance_failures": 28}
    for field in ("case_id", "sender", "receiver", "authority", "policy_version",
                  "valid_until", "evidence_refs")
]
ESSAY_ERROR_INJECTION = {
    "case_id": "policy-01", "schema_still_valid": True, "reference_action": "ESCALATE",
    "baseline_action": "ESCALATE", "altered_action": "RELEASE", "synthetic_loss": 120,
}


def _run(args: list[str]) -> dict[str, Any]:
    result = CliRunner().invoke(lab, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = Path(args[args.index("--out") + 1])
    report: dict[str, Any] = json.loads((out / "report.json").read_text("utf-8"))
    return report


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("essay")
    return _run(["run", "--out", str(out), "--no-progress"])


@pytest.fixture(scope="module")
def toml_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("essay-toml")
    return _run(["run", str(EXAMPLE), "--out", str(out), "--no-progress"])


def _exact(got: Any, want: Any) -> None:
    """Equal values, and floats equal to the last bit (no tolerance)."""
    if isinstance(want, dict):
        assert set(want) <= set(got)
        for key, value in want.items():
            _exact(got[key], value)
    elif isinstance(want, list):
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            _exact(a, b)
    elif isinstance(want, bool | str):
        assert got == want
        assert type(got) is type(want)
    else:
        assert got == want
        assert float(got).hex() == float(want).hex()


def test_assumptions(report: dict[str, Any]) -> None:
    assert report["assumptions"] == ESSAY_ASSUMPTIONS


def test_strategy_results_every_figure(report: dict[str, Any]) -> None:
    assert report["strategy_results"] == ESSAY_STRATEGIES
    _exact(report["strategy_results"], ESSAY_STRATEGIES)
    rows = {r["strategy"]: r for r in report["strategy_results"]}
    assert rows["risk_score"]["agreement"] == 0.5714285714285714
    assert rows["action_only_advisory"]["agreement"] == 0.42857142857142855
    assert rows["decision_contract"]["mean_bytes"] == 623.5714285714286
    assert rows["full_record"]["mean_bytes"] == 3017.5


@pytest.mark.parametrize("index", range(6), ids=[r["removed_field"]
                                                  for r in ESSAY_DECISION_ABLATION])
def test_decision_field_ablation(report: dict[str, Any], index: int) -> None:
    got = report["decision_field_ablation"][index]
    want = ESSAY_DECISION_ABLATION[index]
    assert {k: got[k] for k in want} == want
    _exact(got, want)
    # The strict receiver fails closed on the same messages: no catastrophic error.
    assert got["strict_receiver_agreement"] == 0.42857142857142855
    assert got["strict_receiver_catastrophic_errors"] == 0


def test_decision_field_ablation_order(report: dict[str, Any]) -> None:
    assert [r["removed_field"] for r in report["decision_field_ablation"]] == [
        r["removed_field"] for r in ESSAY_DECISION_ABLATION]


def test_governance_field_ablation(report: dict[str, Any]) -> None:
    assert report["governance_field_ablation"] == ESSAY_GOVERNANCE_ABLATION
    _exact(report["governance_field_ablation"], ESSAY_GOVERNANCE_ABLATION)


def test_error_injection(report: dict[str, Any]) -> None:
    got = report["error_injection"]
    assert {k: got[k] for k in ESSAY_ERROR_INJECTION} == ESSAY_ERROR_INJECTION
    assert (got["field"], got["value"], got["true_value"]) == ("policy_current", True, False)
    assert got["hard_violations"] == ["unsafe-release"]


def test_full_precision_outside_the_essay_table(report: dict[str, Any]) -> None:
    rows = {(r["strategy"], r["perturbation"]): r for r in report["results"]}
    row = rows[("decision_contract", "remove-decision-field:policy_current")]
    assert row["semantic_agreement"] == 24 / 28
    assert row["semantic_mean_regret"] == 480 / 28
    assert row["semantic_hard_violations"] == 4


def test_the_essay_asserts_hold(report: dict[str, Any]) -> None:
    by_name = {r["strategy"]: r for r in report["strategy_results"]}
    assert by_name["decision_contract"]["mean_bytes"] < by_name["full_record"]["mean_bytes"]
    assert by_name["action_only_advisory"]["agreement"] < 1
    injection = report["error_injection"]
    assert injection["altered_action"] != injection["reference_action"]
    assert report["gate"]["passed"] is True
    assert report["gate"]["exit_code"] == 0


def test_toml_declaration_prints_the_same_table(report: dict[str, Any],
                                                toml_report: dict[str, Any]) -> None:
    for key in ("assumptions", "strategy_results", "decision_field_ablation",
                "governance_field_ablation", "error_injection"):
        assert toml_report[key] == report[key], key
    strip = ("mean_latency_ms",)
    assert [{k: v for k, v in r.items() if k not in strip} for r in toml_report["results"]] \
        == [{k: v for k, v in r.items() if k not in strip} for r in report["results"]]
