"""Bad experiment inputs are refused before any work, as one-line typed errors: an
``[[injection]]`` naming no case (before any case reaches a receiver), a malformed
``[[injection]]`` table, bad tolerances, and a ``--budget`` naming a perturbation the
report's run did not apply.

The experiments use the user's pump contract (``tests/user_contract/mymodule.py``) and
its real strict receiver; the counting wrapper only counts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest

from handoffs.errors import UserCodeError
from handoffs.lab import (
    ExperimentError,
    GeneratedCases,
    IterableCases,
    Strategy,
    Tolerances,
    load_experiment,
    run,
)
from handoffs.lab.perturbations import Falsehood
from handoffs.receivers import Decision
from inline_executor import Inline
from worlds.user_contract import TOML, experiment


@attrs.define
class Counting:
    """The planner, counting the messages it decides."""

    inner: Any
    calls: int = 0

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def deterministic(self) -> bool:
        return True

    def receive(self, message: bytes | str | Mapping[str, Any]) -> Decision:
        self.calls += 1
        decision: Decision = self.inner.receive(message)
        return decision


class OneShot:
    """A case source that can be iterated once (a plain iterator underneath)."""

    description = "one-shot"

    def __init__(self, cases: list[Any]) -> None:
        self._iterator = iter(cases)

    def __iter__(self) -> Iterator[Any]:
        return self._iterator


def test_an_injection_naming_no_case_is_refused_before_any_case_runs(mymodule: Any) -> None:
    planner = Counting(mymodule.planner())
    bad = Falsehood(case_id="pump-404", field="calibrated", value=False)
    with pytest.raises(ExperimentError) as caught:
        run(experiment(mymodule, planner, injections=(bad,)))
    assert str(caught.value) == (
        "injection inject:pump-404:calibrated=false names case 'pump-404', which the case "
        "source (hypothesis:pump-maintenance/1.0.0:12:seed=3) does not yield @ $")
    assert caught.value.code == "unknown-case"
    assert planner.calls == 0


def test_an_injection_naming_a_case_runs_every_case(mymodule: Any) -> None:
    planner = Counting(mymodule.planner())
    good = Falsehood(case_id="generated-000012", field="calibrated", value=False)
    report = run(experiment(mymodule, planner, injections=(good,))).report
    assert report["experiment"]["cases"] == 12
    assert report["error_injection"]["case_id"] == "generated-000012"


def test_a_one_shot_source_is_read_ahead_and_loses_no_case(mymodule: Any) -> None:
    cases = list(GeneratedCases(mymodule.MY_CONTRACT, 12, seed=3))
    good = Falsehood(case_id="generated-000007", field="calibrated", value=False)
    one_shot = run(experiment(mymodule, mymodule.planner(), cases=OneShot(cases),
                              injections=(good,))).report
    assert one_shot["experiment"]["cases"] == 12
    assert one_shot["error_injection"]["case_id"] == "generated-000007"
    planner = Counting(mymodule.planner())
    bad = Falsehood(case_id="pump-404", field="calibrated", value=False)
    with pytest.raises(ExperimentError, match=r"names case 'pump-404', which the case source "
                                              r"\(one-shot\) does not yield"):
        run(experiment(mymodule, planner, cases=OneShot(cases), injections=(bad,)))
    assert planner.calls == 0


class Broken(Exception):
    pass


def test_a_source_that_fails_while_read_fails_where_it_fails(
        mymodule: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check does not judge a source it cannot read to the end: the run meets the
    failure in place, after deciding the cases before it whose shuffled-control window
    was read (so a run log can resume)."""
    # windows of 2 cases, each handed out once two cases past it are read
    monkeypatch.setattr("handoffs.lab._controls.SHUFFLE_WINDOW", 2)
    cases = list(GeneratedCases(mymodule.MY_CONTRACT, 12, seed=3))

    def failing() -> Iterator[Any]:
        yield from cases[:5]
        raise Broken

    far = Falsehood(case_id="generated-000011", field="calibrated", value=False)
    for source in (OneShot([]), None):
        planner = Counting(mymodule.planner())
        if source is not None:
            source._iterator = failing()
        chosen = source if source is not None else IterableCases(failing)
        with pytest.raises(UserCodeError) as caught:
            run(experiment(mymodule, planner, cases=chosen, injections=(far,)), chunk_size=2,
                executor=Inline())
        assert planner.calls >= 2  # the first chunk of two cases, before the failure
        assert isinstance(caught.value.__cause__, Broken)
        assert caught.value.role == "case source"
        assert str(caught.value).endswith(" raised while reading case 6: Broken:  @ $")




@pytest.mark.parametrize(("injection", "message"), [
    ('[[injection]]\ncase_id = "generated-000001"\nfield = "calibrated"\n',
     "injection 1: an injection needs 'value'"),
    ('[[injection]]\ncase_id = "generated-000001"\nfield = "calibrated"\nvalue = true\n'
     'feild = "x"\n',
     "unknown key 'feild' in [injection[0]]; did you mean 'field'?"),
    ('[[injection]]\ncase_id = 7\nfield = "calibrated"\nvalue = true\n',
     "injection 1: case_id must be a non-empty string, got 7"),
    ('[[injection]]\ncase_id = "generated-000001"\nfield = ""\nvalue = true\n',
     "injection 1: field must be a non-empty string, got ''"),
], ids=["missing", "unknown-key", "case-id-type", "empty-field"])
def test_a_malformed_injection_table_is_named(user_dir: Path, injection: str,
                                              message: str) -> None:
    path = user_dir / "experiment.toml"
    path.write_text(TOML + "\n" + injection)
    with pytest.raises(ExperimentError) as caught:
        load_experiment(path)
    where = ".injection[0].feild" if "feild" in injection else ""
    assert str(caught.value) == f"{path}: {message} @ ${where}"


def test_injection_must_be_an_array_of_tables(user_dir: Path) -> None:
    path = user_dir / "experiment.toml"
    path.write_text('injection = "pump-7"\n' + TOML)
    with pytest.raises(ExperimentError, match=r"injection must be an array of tables "
                                              r"\(\[\[injection\]\]\), got str"):
        load_experiment(path)


def test_a_refused_run_leaves_the_run_log_as_it_was(mymodule: Any, tmp_path: Path) -> None:
    """No cases, or an injection naming none, is refused before the run log is opened:
    an earlier run's log at that path keeps every line."""
    log = tmp_path / "run.jsonl"
    run(experiment(mymodule, mymodule.planner()), run_log=log)
    before = log.read_bytes()
    bad = Falsehood(case_id="pump-404", field="calibrated", value=False)
    for changes, code in (({"injections": (bad,)}, "unknown-case"),
                          ({"cases": IterableCases(())}, "no-cases")):
        with pytest.raises(ExperimentError) as caught:
            run(experiment(mymodule, mymodule.planner(), **changes), run_log=log)
        assert caught.value.code == code
        assert log.read_bytes() == before
    fresh = tmp_path / "fresh.jsonl"
    with pytest.raises(ExperimentError):
        run(experiment(mymodule, mymodule.planner(), injections=(bad,)), run_log=fresh)
    assert not fresh.exists()


@pytest.mark.parametrize(("tolerances", "message"), [
    ({"regret_delta": "abc"}, "tolerance regret_delta must be a finite number >= 0, got 'abc'"),
    ({"max_regret": float("inf")}, "tolerance max_regret must be a finite number >= 0, got inf"),
    ({"hard_violations": 1.5}, "tolerance hard_violations must be an integer >= 0, got 1.5"),
    ({"max_tokens": True}, "tolerance max_tokens must be an integer >= 0, got True"),
    ({"controls_must_fail": "no"}, "tolerance controls_must_fail must be true or false, "
                                   "got 'no'"),
    ({"gate_perturbations": 5}, "tolerance gate_perturbations must be a perturbation id or "
                                "a non-empty list of them ('none' is the unperturbed run), "
                                "got 5"),
    ({"gate_perturbations": []}, "tolerance gate_perturbations must be a perturbation id or "
                                 "a non-empty list of them ('none' is the unperturbed run), "
                                 "got ()"),
    ({"gate_perturbations": ["none", ""]}, "tolerance gate_perturbations must be a "
                                           "perturbation id or a non-empty list of them "
                                           "('none' is the unperturbed run), got ('none', '')"),
], ids=lambda v: json.dumps(v) if isinstance(v, dict) else "")
def test_bad_tolerances_are_named(tolerances: dict[str, Any], message: str) -> None:
    with pytest.raises(ExperimentError) as caught:
        Tolerances.from_json(tolerances)
    assert str(caught.value) == f"{message} @ $.{next(iter(tolerances))}"


def test_good_tolerances_still_load() -> None:
    tolerances = Tolerances.from_json({"regret_delta": 0.5, "hard_violations": 2,
                                       "gate_perturbations": "none", "max_regret": None})
    assert (tolerances.regret_delta, tolerances.hard_violations,
            tolerances.gate_perturbations) == (0.5, 2, ("none",))


# --------------------------------------------------------------- strict experiment files


@pytest.mark.parametrize(("edit", "table", "key", "suggestion"), [
    # A misspelt seed would otherwise draw other cases and flip the verdict.
    (("hypothesis = 6", "hypothesis = 6\nsead = 4"), "cases", "sead", "seed"),
    (("[governance]", '[evidence]\nstaet = "mymodule:state_of"\n\n[governance]'),
     "evidence", "staet", "state"),
    (('name = "pump"', 'name = "pump"\nepocks = 2'), "experiment", "epocks", "epochs"),
    (('object = "mymodule:GOVERNANCE"', 'object = "mymodule:GOVERNANCE"\nobject_arg = {}'),
     "governance", "object_arg", "object_args"),
    (('receiver = "mymodule:planner"', 'receiver = "mymodule:planner"\ngate = true'),
     "strategy[0]", "gate", "gated"),
    (("[[strategy]]", "[tolerances]\nregret_delt = 0.1\n\n[[strategy]]"),
     "tolerances", "regret_delt", "regret_delta"),
    (("[[strategy]]", "[perturbations]\nstandrad = false\n\n[[strategy]]"),
     "perturbations", "standrad", "standard"),
    (("[[strategy]]", "[tolerance]\nregret_delta = 0.1\n\n[[strategy]]"),
     "", "tolerance", "tolerances"),
])
def test_a_typo_in_any_table_is_refused_with_a_suggestion(
        user_dir: Path, edit: tuple[str, str], table: str, key: str, suggestion: str) -> None:
    from handoffs.errors import UnknownExperimentKey

    path = user_dir / "experiment.toml"
    path.write_text(TOML.replace(*edit, 1))
    with pytest.raises(UnknownExperimentKey) as caught:
        load_experiment(path)
    error = caught.value
    assert (error.key, error.table, error.suggestion) == (key, table, suggestion)
    assert error.code == "unknown-experiment-key"
    assert error.json_path == (f"$.{table}.{key}" if table else f"$.{key}")
    if table:
        assert str(error).startswith(f"{path}: unknown ")
        assert f" {key!r} in [{table}]; did you mean {suggestion!r}? @ " in str(error)
    else:
        assert str(error) == (f"{path}: unknown table [{key}]; did you mean [{suggestion}]? "
                              f"@ $.{key}")


def test_a_typo_in_a_model_table_names_its_toml_path(user_dir: Path) -> None:
    from handoffs.errors import UnknownExperimentKey

    path = user_dir / "experiment.toml"
    path.write_text(TOML.replace('receiver = "mymodule:planner"',
                                 '[strategy.model]\nroute = "m"\nbase_url = "http://127.0.0.1:1"'
                                 '\ntemprature = 0'))
    with pytest.raises(UnknownExperimentKey, match=r"unknown model key 'temprature' in "
                                                   r"\[strategy\[0\]\.model\]; did you mean "
                                                   r"'temperature'\?") as caught:
        load_experiment(path)
    assert caught.value.json_path == "$.strategy[0].model.temprature"


def test_a_key_for_another_case_source_is_refused(user_dir: Path) -> None:
    path = user_dir / "experiment.toml"
    path.write_text(TOML.replace("hypothesis = 6", 'source = "mymodule:cases"\nseed = 4'))
    with pytest.raises(ExperimentError, match=r"cases\.seed is read only with "
                                              r"cases\.hypothesis @ \$\.cases\.seed"):
        load_experiment(path)


# ------------------------------------------------------------------ errors in user code


class RaisingEncoder:
    """An encoder with a bug."""

    def encode(self, evidence: Any) -> dict[str, Any]:
        raise ZeroDivisionError("division by zero")


def test_a_raising_encoder_is_named_with_its_case(mymodule: Any) -> None:
    planner = Counting(mymodule.planner())
    broken = experiment(mymodule, planner, strategies=(
        Strategy(name="receipt", encoder=RaisingEncoder(), receiver=planner, gated=True),))
    with pytest.raises(UserCodeError) as caught:
        run(broken, executor=Inline())
    error = caught.value
    assert error.code == "user-code-error"
    assert error.callable_name == f"{__name__}.RaisingEncoder.encode"
    assert error.case_id == "generated-000001"
    assert str(error) == (f"the encoder of strategy 'receipt' {__name__}.RaisingEncoder.encode "
                          "raised on case 'generated-000001': ZeroDivisionError: division by "
                          "zero @ $")
    assert isinstance(error.__cause__, ZeroDivisionError)
    assert planner.calls == 0


def test_a_raising_state_function_and_unjsonable_evidence_are_named(mymodule: Any) -> None:
    cases = list(GeneratedCases(mymodule.MY_CONTRACT, 3, seed=3))

    def state_of(evidence: Any) -> Any:
        return evidence.state_of_pump  # misspelt

    with pytest.raises(UserCodeError, match=(
            r"^the state function .*state_of raised on case 'generated-000001': "
            r"AttributeError: .*state_of_pump")):
        run(experiment(mymodule, mymodule.planner(), cases=IterableCases(lambda: cases),
                       state_of=state_of), executor=Inline())
    odd = [attrs.evolve(cases[0], evidence_refs=(object(),)), *cases[1:]]
    with pytest.raises(UserCodeError, match=(
            r"^the case JSON function handoffs\.lab\._experiment\.default_case_json raised "
            r"on case 'generated-000001': ")):
        run(experiment(mymodule, mymodule.planner(), cases=IterableCases(lambda: odd),
                       evidence_refs_of=lambda e: ["ref"]), executor=Inline())


def test_a_raising_structure_function_names_its_line(mymodule: Any, tmp_path: Path) -> None:
    from handoffs.lab import JSONLinesCases

    path = tmp_path / "cases.jsonl"
    path.write_text('{"id": 1}\n\n{"id": 2}\n', encoding="utf-8")

    def structure(row: dict[str, Any]) -> Any:
        if row["id"] == 2:
            raise ValueError("no pump 2")
        return row

    cases = list(GeneratedCases(mymodule.MY_CONTRACT, 1, seed=3))
    source = JSONLinesCases(path, structure)
    with pytest.raises(UserCodeError) as caught:
        list(source)
    assert str(caught.value) == (
        f"the structure function {__name__}.test_a_raising_structure_function_names_its_line"
        f".<locals>.structure raised on {path} line 3: ValueError: no pump 2 @ $")
    del cases


class RaisingReceiver:
    """A receiver with a bug: the lab records its decisions as errors (fail closed)."""

    name = "flaky"
    deterministic = True

    def receive(self, message: Any) -> Decision:
        raise RuntimeError("my receiver broke")


def test_a_raising_receiver_fails_closed_and_is_named(mymodule: Any) -> None:
    from handoffs.lab.reports import render_markdown

    report = run(experiment(mymodule, RaisingReceiver()), executor=Inline()).report
    assert report["gate"]["passed"] is False
    failure = report["failures"]["cases"][0]
    assert failure["verdict"] == "ERROR"
    assert failure["reasons"] == ["receiver-raised:RuntimeError"]
    assert failure["case_id"].startswith("generated-")
    text = render_markdown(report)
    assert ("> Receiver errors: receipt's receiver 'flaky' raised (RuntimeError) on 12 "
            f"decisions, for example on case {failure['case_id']!r}. Each decided the "
            "fail-closed action.") in text
