"""Topologies: every edge's local figures and the end-to-end figures in one run
(issue #35, the cold-chain shape).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

import cold_chain as cc
from handoffs.lab import ExperimentError, IterableCases, Tolerances
from handoffs.lab._topology import (
    Edge,
    EndToEnd,
    Topology,
    load_topology,
    render_topology_html,
    render_topology_markdown,
    run_topology,
)

ROOT = Path(__file__).resolve().parents[2]
FILE = ROOT / "tests" / "data" / "cold-chain.toml"


def _brute_force() -> tuple[float, int]:
    """End to end by hand: C's handover decision against its full-evidence decision."""
    cases = list(cc.shipments())
    agree = hard = 0
    for case in cases:
        handed = cc.HANDOVER.decide(cc.HandoverState(excursion_hours=case.excursion_hours))
        full = cc.RELEASE.decide(case.inspection())
        agree += handed is full
        hard += handed is cc.Release.RELEASE and full is cc.Release.QUARANTINE
    return agree / len(cases), hard


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return run_topology(attrs.evolve(load_topology(FILE), perturbations=None)).report


def test_each_edge_passes_and_end_to_end_fails(report: dict[str, Any]) -> None:
    agreement, hard = _brute_force()
    assert (agreement, hard) == (0.75, 10)
    rows = {(row["scope"], row["edge"]): row for row in report["rows"]}
    assert [(r["scope"], r["edge"]) for r in report["rows"]] == [
        ("edge", "inspector->planner"), ("edge", "planner->pharmacist"),
        ("end-to-end", "planner->pharmacist")]
    assert rows[("edge", "inspector->planner")]["agreement"] == 1.0
    assert rows[("edge", "planner->pharmacist")]["agreement"] == 1.0
    end = rows[("end-to-end", "planner->pharmacist")]
    assert (end["agreement"], end["hard_violations"]) == (agreement, hard)
    assert rows[("edge", "inspector->planner")]["gate"]["passed"]
    assert rows[("edge", "planner->pharmacist")]["gate"]["passed"]
    assert not end["gate"]["passed"]
    assert (report["gate"]["passed"], report["gate"]["exit_code"]) == (False, 1)
    assert report["gate"]["reasons"]
    assert all(r.startswith("end-to-end planner->pharmacist") for r in report["gate"]["reasons"])


def test_the_first_edges_advice_keeps_what_a_later_hop_reads(report: dict[str, Any]) -> None:
    ab = report["reports"]["inspector->planner"]
    assert "seal" not in ab["minimal_messages"]["fields_never_needed"]
    assert not any("seal" in w and ("unnecessary" in w or "needs" in w)
                   for w in ab["gate"]["warnings"])
    assert any("seal" in w and "downstream: keep it" in w for w in ab["gate"]["warnings"])
    assert report["needed_downstream"]["inspector->planner"]["seal"] == [
        "end-to-end (cold-release/1.0.0)"]
    # Without the topology the same edge says the opposite.
    from handoffs.lab import run
    from handoffs.lab._topology import _experiments

    alone = run(_experiments(load_topology(FILE))[0][2]).report
    assert "seal" in alone["minimal_messages"]["fields_never_needed"]


def test_every_format_sets_the_rows_side_by_side(report: dict[str, Any]) -> None:
    json.dumps(report)  # JSON-ready
    markdown = render_topology_markdown(report)
    assert "**FAIL**" in markdown
    assert "| end-to-end | planner->pharmacist |" in markdown
    assert "| edge | inspector->planner |" in markdown
    assert "0.750" in markdown
    assert "| 10 |" in markdown
    page = render_topology_html(report)
    assert "<td>end-to-end</td>" in page
    assert "<td>0.750</td>" in page
    assert "seal (read by end-to-end (cold-release/1.0.0))" in page


def test_the_lab_run_command_runs_a_topology(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from handoffs.cli._lab import lab

    result = CliRunner().invoke(lab, ["run", str(FILE), "--out", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert "end-to-end" in result.output
    written = json.loads((tmp_path / "topology.json").read_text("utf-8"))
    assert written["gate"]["passed"] is False
    assert (tmp_path / "topology.md").is_file()
    assert (tmp_path / "topology.html").is_file()


# ----------------------------------------------------------------------- bad input


def _edges() -> tuple[Edge, Edge]:
    topology = load_topology(FILE)
    return topology.edges  # type: ignore[return-value]


def _topology(*edges: Edge) -> Topology:
    return Topology(name="t", cases=IterableCases(cc.shipments), edges=edges,
                    end_to_end=EndToEnd(contract=cc.RELEASE,
                                        state_of=cc.Shipment.inspection))


def test_a_cycle_is_refused_at_its_place() -> None:
    ab, bc = _edges()
    back = attrs.evolve(bc, to="inspector", name="")
    with pytest.raises(ExperimentError) as info:
        _topology(ab, back)
    assert (info.value.code, info.value.json_path) == ("topology-cycle", "$.edges[1].to")


def test_edges_that_do_not_join_are_refused() -> None:
    ab, bc = _edges()
    with pytest.raises(ExperimentError) as info:
        _topology(ab, attrs.evolve(bc, sender="someone"))
    assert (info.value.code, info.value.json_path) == ("topology-broken", "$.edges[1].sender")


def test_carrying_a_member_the_hop_never_received_is_refused() -> None:
    ab, bc = _edges()
    with pytest.raises(ExperimentError, match="never received") as info:
        _topology(ab, attrs.evolve(bc, carries={"excursion_hours": "temperature"}))
    assert (info.value.code, info.value.json_path) == (
        "topology-unreceived", "$.edges[1].carries.excursion_hours")


def test_an_unreceived_member_in_a_file_names_its_place(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(FILE.read_text("utf-8").replace(
        'carries = { excursion_hours = "excursion_hours" }',
        'carries = { excursion_hours = "probe_hours" }'), "utf-8")
    with pytest.raises(ExperimentError) as info:
        load_topology(bad)
    assert (info.value.code, info.value.json_path) == (
        "topology-unreceived", "$.edge[1].carries.excursion_hours")
    cyclic = tmp_path / "cyclic.toml"
    cyclic.write_text(FILE.read_text("utf-8").replace('to = "pharmacist"',
                                                      'to = "inspector"'), "utf-8")
    with pytest.raises(ExperimentError) as info:
        load_topology(cyclic)
    assert (info.value.code, info.value.json_path) == ("topology-cycle", "$.edge[1].to")


def test_the_end_to_end_reference_decides_the_final_receivers_actions() -> None:
    ab, bc = _edges()
    with pytest.raises(ExperimentError) as info:
        Topology(name="t", cases=IterableCases(cc.shipments), edges=(ab, bc),
                 end_to_end=EndToEnd(contract=cc.PLANNING))
    assert (info.value.code, info.value.json_path) == ("topology-actions",
                                                       "$.end_to_end.contract")


def test_the_relay_chain_file_runs_like_the_python(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from handoffs.cli._lab import lab

    monkeypatch.syspath_prepend(str(ROOT))
    from examples.relay import relay_topology

    result = CliRunner().invoke(lab, ["run", str(ROOT / "examples" / "relay-chain.toml"),
                                      "--out", str(tmp_path), "--no-progress"])
    assert result.exit_code == 1, result.output
    written = json.loads((tmp_path / "topology.json").read_text("utf-8"))
    expected = run_topology(relay_topology()).report
    keys = ("scope", "edge", "agreement", "mean_regret", "hard_violations")
    assert [[r[k] for k in keys] for r in written["rows"]] == [
        [r[k] for k in keys] for r in expected["rows"]]
    assert [r["agreement"] for r in written["rows"]] == [1.0, 1.0, 20 / 24]
    assert (tmp_path / "relay-chain-vibration-analyst_to_maintenance-planner"
            / "report.json").is_file()


def test_relay_dropping_the_seal_on_cs_contract_reads_disagreement() -> None:
    from handoffs.contracts import ReceiptEncoder
    from handoffs.lab import Experiment, Strategy, run
    from handoffs.lab.perturbations import Relay

    receiver = cc._gate("pharmacist", cc.RELEASE)
    experiment = Experiment(
        name="cold-release-relay", contract=cc.RELEASE, cases=IterableCases(cc.shipments),
        strategies=(Strategy(name="inspection", encoder=ReceiptEncoder(
            contract=cc.RELEASE, state_of=cc.Shipment.inspection), receiver=receiver,
            gated=True),),
        governance=cc.GOVERNANCE_BC, state_of=cc.Shipment.inspection,
        perturbations=(Relay(drop=("decision_state.seal",)),))
    rows = {row["perturbation"]: row for row in run(experiment).report["results"]}
    assert rows["none"]["agreement"] == 1.0
    assert rows["relay:2:drop=decision_state.seal"]["agreement"] < 1.0
    with pytest.raises(ExperimentError, match="names no member"):
        Relay(drop=("decision_state.temperature",)).prepare(cc.RELEASE, seed=0)


def test_the_gate_bounds_each_row_by_its_own_tolerances() -> None:
    topology = load_topology(FILE)
    loose = attrs.evolve(topology, perturbations=(), end_to_end=attrs.evolve(
        topology.end_to_end, tolerances=Tolerances(agreement_epsilon=0.25, regret_delta=30,
                                                   hard_violations=10)))
    report = run_topology(loose).report
    assert report["gate"]["passed"] is True
    assert [r["gate"]["passed"] for r in report["rows"]] == [True, True, True]
    strict_ab = attrs.evolve(loose, edges=(
        attrs.evolve(loose.edges[0], tolerances=Tolerances(max_mean_bytes=10)),
        loose.edges[1]))
    report = run_topology(strict_ab).report
    assert [r["gate"]["passed"] for r in report["rows"]] == [False, True, True]
    assert report["gate"]["reasons"][0].startswith("edge inspector->planner:")


def test_an_edge_that_is_not_a_receiver_is_refused_at_its_place() -> None:
    ab, bc = _edges()
    with pytest.raises(ExperimentError) as info:
        _topology(ab, attrs.evolve(bc, receiver=object()))
    assert (info.value.code, info.value.json_path) == ("topology-broken",
                                                       "$.edges[1].receiver")
