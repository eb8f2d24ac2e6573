"""The relay perturbation does what its name says: nested drops, checked paths, and
descriptions that match the change each perturbation makes (issue #35).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from handoffs.lab import Experiment, ExperimentError, Strategy, run
from handoffs.lab._toml import load_experiment
from handoffs.lab.perturbations import Relay, standard_perturbations
from handoffs.lab.perturbations._base import REMOVED, UNCHANGED
from handoffs.lab.perturbations._registry import perturbation_from_json
from worlds.gauge import GAUGE, MESSAGE, ctx, variants

ROOT = Path(__file__).resolve().parents[2]


def test_relay_drops_a_nested_decision_field() -> None:
    [v] = variants(Relay(hops=2, drop=("decision_state.armed",)))
    assert "armed" not in v.message["decision_state"]
    assert set(v.message["decision_state"]) == set(MESSAGE["decision_state"]) - {"armed"}
    assert MESSAGE["decision_state"]["armed"] is False  # the base message is untouched
    relay = Relay(drop=("decision_state.armed",))
    assert relay.id == "relay:2:drop=decision_state.armed"
    assert "drops decision_state.armed" in relay.description


@pytest.mark.parametrize(("drop", "hint"), [
    ("armed", "did you mean decision_state.armed?"),
    ("decision_state.seal", "decision fields: ['armed', 'band', 'count', 'level', 'ratio']"),
    ("seal", "members: "),
])
def test_a_drop_path_naming_no_member_is_refused(drop: str, hint: str) -> None:
    with pytest.raises(ExperimentError, match=r"names no member of gauge/1\.0\.0") as info:
        Relay(drop=("notes", drop)).prepare(GAUGE, seed=0)
    assert (info.value.code, info.value.json_path) == ("unknown-drop-path", "$.drop[1]")
    assert hint in info.value.message


@pytest.mark.parametrize("drop", ["decision_state.a.b", "notes.x", ".armed", "decision_state.",
                                  "proof"])
def test_a_malformed_drop_path_is_refused_on_construction(drop: str) -> None:
    with pytest.raises(ExperimentError) as info:
        Relay(drop=(drop,))
    assert (info.value.code, info.value.json_path) == ("unknown-drop-path", "$.drop[0]")


def test_an_unknown_drop_path_fails_to_load(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    with pytest.raises(ExperimentError, match="names no member"):
        perturbation_from_json({"kind": "relay", "drop": ["seal"]}, contract=GAUGE)
    source = (ROOT / "examples" / "relay.toml").read_text("utf-8")
    bad = tmp_path / "relay.toml"
    bad.write_text(source.replace("[perturbations]\nstandard = true", '''[perturbations]
standard = false
[[perturbations.extra]]
kind = "relay"
drop = ["decision_state.seal"]'''), "utf-8")
    with pytest.raises(ExperimentError) as info:
        load_experiment(bad)
    assert info.value.code == "unknown-drop-path"
    assert info.value.json_path == "$.perturbations.extra[0].drop[0]"
    assert "perturbations.extra[0]" in info.value.message


def test_dropping_a_decisive_nested_field_reads_disagreement(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    from examples import relay

    experiment = Experiment(
        name="relay-drop", contract=relay.SAFETY, cases=relay._cases(),
        strategies=(Strategy(name="stable", encoder=relay.stable_encoder(),
                             receiver=relay.safety_controller(), gated=True),),
        governance=relay.GOVERNANCE_BC, state_of=relay.Analysis.analysis_state,
        perturbations=(Relay(drop=("decision_state.sources",)), Relay(drop=("notes",))),
    )
    rows = {row["perturbation"]: row for row in run(experiment).report["results"]}
    assert rows["none"]["agreement"] == 1.0
    assert rows["relay:2:drop=decision_state.sources"]["agreement"] < 1.0
    assert rows["relay:2:drop=notes"]["agreement"] == 1.0


def _diff(before: Any, after: Any, path: str = "") -> set[str]:
    """The member paths (``decision_state.x``) whose values differ."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: set[str] = set()
        for key in set(before) | set(after):
            out |= _diff(before.get(key, REMOVED), after.get(key, REMOVED),
                         f"{path}.{key}" if path else key)
        return out
    return set() if before == after else {path}


def _member(p: Any) -> str | None:
    target = p.target
    if target is None:
        return None
    if target in GAUGE.field_map:
        return f"decision_state.{target}"
    return target


def test_every_description_names_a_change_the_message_undergoes() -> None:
    """Each perturbation whose id and description name a member changes that member (on
    some message), and changes nothing it does not name; the relay's drops, re-stamping
    and softening happen as described."""
    messages = [MESSAGE, *({**MESSAGE, "decision_state": {**MESSAGE["decision_state"],
                                                           "level": level, "armed": True},
                            "uncertainty": "MISSING"} for level in ("MID", "HIGH"))]
    pool = [*standard_perturbations(GAUGE),
            Relay(hops=2, drop=("decision_state.armed", "notes"), soften_uncertainty=True,
                  collapse_intervals=True)]
    checked = 0
    for p in pool:
        prepared = p.prepare(GAUGE, seed=0)
        changed: set[str] = set()
        for message in messages:
            for v in prepared.variants(message, ctx(), "s"):
                if v is not UNCHANGED:
                    changed |= _diff(message, dict(v.message))
        member = _member(p)
        if member is not None:
            name = member.removeprefix("decision_state.")
            assert (name.replace("_", "-") in p.id.replace("_", "-")
                    or name in p.description), p.id
            touched = {c for c in changed if c == member or c.startswith(member + ".")}
            assert touched, f"{p.id} claims {member} but never changes it"
            checked += 1
        if isinstance(p, Relay):
            for dropped in p.drop:
                assert dropped in p.description
                assert dropped in changed or dropped == "notes", dropped
            assert "sender" in changed  # re-stamped
            assert "id" in changed  # re-encoded: a new receipt id
            # CONFLICT softened to RESOLVED; intervals collapsed to points.
            assert ("uncertainty" in changed) is p.soften_uncertainty
            assert any(c.startswith("decision_state.band") for c in changed) is (
                p.collapse_intervals)
    assert checked >= 10
