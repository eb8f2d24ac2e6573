"""Every strategy's catastrophic decisions reach the verdict line, gated or not; an
ungated strategy with hard violations is named there (issue #35).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from handoffs.cli._lab import print_summary
from handoffs.lab import Experiment, Strategy, run
from handoffs.lab.reports import findings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def relay_report(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    monkeypatch.syspath_prepend(str(ROOT))
    from examples import relay

    experiment = Experiment(
        name="relay-ungated", contract=relay.SAFETY, cases=relay._cases(),
        strategies=(
            Strategy(name="stable_receipt", encoder=relay.stable_encoder(),
                     receiver=relay.safety_controller(), gated=True),
            Strategy(name="prose_relay", encoder=relay.ProseRelayEncoder(),
                     receiver=relay.safety_controller(), receipts=True),
        ),
        governance=relay.GOVERNANCE_BC, state_of=relay.Analysis.analysis_state,
        subject="stable_receipt", perturbations=(),
    )
    return dict(run(experiment).report)


def test_an_ungated_strategy_with_hard_violations_is_named(
        relay_report: dict[str, object]) -> None:
    report = relay_report
    prose = next(r for r in report["strategy_results"]  # type: ignore[attr-defined]
                 if r["strategy"] == "prose_relay")
    assert prose["catastrophic_errors"] > 0
    assert report["gate"]["passed"] is True  # type: ignore[index]
    [line] = [f for f in findings(report) if f.startswith("Catastrophic decisions")]
    assert "stable_receipt 0 (gated)" in line
    assert f"prose_relay {prose['catastrophic_errors']} (not gated)" in line
    assert "the gate does not bound prose_relay" in line
    warnings = report["gate"]["warnings"]  # type: ignore[index]
    assert any("prose_relay is not gated" in w for w in warnings)


def test_the_cli_verdict_line_counts_them(relay_report: dict[str, object]) -> None:
    runner = CliRunner()
    with runner.isolation() as (out, _, _):
        print_summary(relay_report)
        text = out.getvalue().decode()
    assert "Release gate: PASS" in text
    assert "catastrophic decision(s): prose_relay" in text
    assert "(not gated)" in text
