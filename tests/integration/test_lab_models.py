"""The lab with model receivers over real HTTP on 127.0.0.1: the call cache (shared by
processes, persistent across runs and resumes), budgets, token accounting, TOML.

The model server is :mod:`chat_server`, a scripted test double for a remote model
provider; the lab, the receiver and the HTTP client are the library's real code.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from chat_server import ScriptedServer, completion, payment_policy, prompt_of, serving
from handoffs.errors import UserCodeError
from handoffs.examples.payment import PAYMENT_RELEASE, synthetic_cases
from handoffs.examples.payment_lab import payment_experiment, payment_gate
from handoffs.lab import IterableCases, load_experiment, run
from handoffs.lab._cache import Budget, CallCache, CallCacheError, LabClient
from handoffs.lab._render import render_markdown
from handoffs.receivers import GovernanceChecker, SQLiteDecisionLog, UnsafeConfigurationWarning
from handoffs.receivers.models import (
    ChatRequest,
    Completion,
    ModelReceiver,
    OpenAICompatibleClient,
)
from inline_executor import Inline


class Boom(Exception):
    pass


def _cases(fail_after: int | None, variants: int = 2) -> Callable[[], Iterator[Any]]:
    def factory() -> Iterator[Any]:
        for i, case in enumerate(synthetic_cases(variants)):
            if fail_after is not None and i == fail_after:
                raise Boom
            yield case

    return factory


def _experiment(url: str, *, fail_after: int | None = None, full_record: bool = True,
                **model: Any) -> Any:
    """The essay profile on 14 cases; the decision contract's receiver (and, with
    ``full_record``, the full record's) asks the scripted model."""
    base = payment_experiment(variants=2, profile="essay")
    client = OpenAICompatibleClient(base_url=url, backoff=0.01, max_concurrency=4)
    receivers = {"decision_contract": ModelReceiver(
        gate=payment_gate(), client=client, model_route="scripted/policy", **model)}
    if full_record:
        receivers["full_record"] = ModelReceiver(
            gate=GovernanceChecker(PAYMENT_RELEASE, required=()), client=client,
            model_route="scripted/policy", name="model-full-record", **model)
    strategies = tuple(attrs.evolve(s, receiver=receivers[s.name]) if s.name in receivers
                       else s for s in base.strategies)
    cases = IterableCases(_cases(fail_after), description="payment-14")
    return attrs.evolve(base, strategies=strategies, cases=cases)


def _prompts(server: ScriptedServer) -> list[str]:
    return [json.dumps(body, sort_keys=True) for body in server.requests]


def _strategy(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(r for r in report["strategy_results"] if r["strategy"] == name)


def test_each_distinct_prompt_is_asked_once_and_costs_are_reported(tmp_path: Path) -> None:
    with serving() as server:
        report = run(_experiment(server.url), cache=tmp_path / "calls.sqlite",
                     chunk_size=4).report
    prompts = _prompts(server)
    assert len(prompts) == len(set(prompts)) > 14  # one call per distinct request
    cost = {row["strategy"]: row for row in report["cost"]["strategies"]}
    assert set(cost) == {"decision_contract", "full_record"}
    assert sum(row["model_calls"] for row in cost.values()) == len(prompts)
    assert report["cost"]["totals"]["cache_hits"] == 0
    # tokens as the server counted them (prompt length // 4, 5 out per answer)
    assert report["cost"]["totals"]["tokens_in"] == sum(
        len(prompt_of(body)) // 4 for body in server.requests)
    assert report["cost"]["totals"]["tokens_out"] == 5 * len(prompts)
    assert cost["full_record"]["model_calls"] == 14  # one full record per case
    assert all(row["latency_ms"] > 0 for row in cost.values())
    # the model applies the policy to the state it is shown: it agrees on the receipts
    assert _strategy(report, "decision_contract")["agreement"] == 1.0
    assert report["cost"]["cache"]["path"] == str(tmp_path / "calls.sqlite")
    markdown = render_markdown(report)
    assert "| decision_contract |" in markdown
    assert "tokens in" in markdown


def test_calls_overlap_across_cases_and_the_call_threads_only_wait_for_the_model(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rendered: list[str] = []
    request = ModelReceiver.request

    def recording(self: ModelReceiver, document: Any, contract: Any, **options: Any) -> Any:
        rendered.append(threading.current_thread().name)
        return request(self, document, contract, **options)

    monkeypatch.setattr(ModelReceiver, "request", recording)
    with serving(delay=0.05, gather=4) as server:
        report = run(_experiment(server.url), cache=tmp_path / "calls.sqlite",
                     chunk_size=4).report
    # the model was kept busy: four calls (the client's bound) in flight at once, and
    # every distinct request asked once
    assert server.max_in_flight == 4
    assert report["cost"]["totals"]["model_calls"] == len(server.requests)
    # every prompt was produced by the scheduling pass or the deciding pass, none by
    # the threads that wait for the model
    assert rendered
    assert not [name for name in rendered if name.startswith("handoffs-calls")]


def test_requests_go_out_as_the_scheduling_pass_makes_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (#23): a chunk's scheduling pass made all its requests before it sent
    any, so 45 % of a run passed before the first call. The first call now leaves while
    the first chunk's pass is still making requests: here the pass holds at its second
    request until the model has seen a call (at most 10 s: a failure, not a hang, in a
    build that sends a chunk's requests only at the end of its pass)."""
    from handoffs.lab import _chunk

    made: list[int] = []
    called = threading.Event()
    made_at_first_call: list[int] = []
    send_ahead = _chunk.send_ahead

    def counting(*args: Any, **kwargs: Any) -> None:
        send_ahead(*args, **kwargs)
        made.append(1)
        if len(made) == 2:
            called.wait(10)

    def script(body: dict[str, Any]) -> Any:
        if not called.is_set():
            made_at_first_call.append(len(made))
            called.set()
        return payment_policy(body)

    monkeypatch.setattr(_chunk, "send_ahead", counting)
    with serving(script) as server:
        run(_experiment(server.url), cache=False, chunk_size=7)
    assert made_at_first_call == [2]
    assert len(made) > 2 * 2  # the first chunk had more to make after the first call


def test_a_repeated_run_and_other_processes_ask_nothing_again(tmp_path: Path) -> None:
    cache = tmp_path / "calls.sqlite"
    with serving() as server:
        first = run(_experiment(server.url), cache=cache, chunk_size=4).report
        asked = len(server.requests)
        # two worker processes, the same cache file: every answer comes from it
        again = run(_experiment(server.url), cache=cache, chunk_size=4,
                    executor="processes", workers=2).report
        assert len(server.requests) == asked
        fresh = run(_experiment(server.url), cache=cache, chunk_size=4, refresh=True).report
    assert again["cost"]["totals"]["model_calls"] == 0
    assert again["cost"]["totals"]["cache_hits"] >= first["cost"]["totals"]["model_calls"]
    assert again["strategy_results"] == first["strategy_results"]
    assert fresh["cost"]["totals"]["model_calls"] == asked  # --refresh asks again, once
    assert len(server.requests) == 2 * asked
    assert CallCache(cache).entries() == asked


def test_processes_share_one_cache_and_never_ask_twice(tmp_path: Path) -> None:
    with serving(delay=0.01) as server:
        report = run(_experiment(server.url), cache=tmp_path / "calls.sqlite", chunk_size=2,
                     executor="processes", workers=2).report
    prompts = _prompts(server)
    assert len(prompts) == len(set(prompts))
    assert report["cost"]["totals"]["model_calls"] == len(prompts)


def test_a_resumed_run_repeats_no_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # chunks are handed out once the shuffled control's window of their cases is read:
    # windows of 4 (each handed out once two cases past it are read), so that the
    # first two chunks are done when case 11 fails
    monkeypatch.setattr("handoffs.lab._controls.SHUFFLE_WINDOW", 4)
    log = tmp_path / "run.jsonl"
    with serving() as server:
        with pytest.raises(UserCodeError, match="Boom"):
            run(_experiment(server.url, fail_after=11), chunk_size=4, run_log=log,
                executor=Inline())
        first = _prompts(server)
        assert first
        report = run(_experiment(server.url), chunk_size=4, run_log=log, resume=True).report
        second = _prompts(server)[len(first):]
        complete = run(_experiment(server.url), chunk_size=4).report
    assert report["provenance"]["resumed_chunks"] == 2
    assert not set(first) & set(second)  # nothing asked twice
    assert (tmp_path / "run.jsonl.calls.sqlite").exists()
    assert report["strategy_results"] == complete["strategy_results"]


def test_the_budget_stops_the_model_and_fails_closed(tmp_path: Path) -> None:
    with serving() as server:
        report = run(_experiment(server.url, full_record=False), max_calls=3,
                     cache=tmp_path / "calls.sqlite").report
    assert len(server.requests) == 3
    assert report["cost"]["budget"] == {"max_calls": 3, "max_tokens": None}
    none = next(r for r in report["results"]
                if r["strategy"] == "decision_contract" and r["perturbation"] == "none")
    assert none["agreement"] < 1.0  # past the budget the receiver escalates
    with serving() as server:
        report = run(_experiment(server.url, full_record=False), max_tokens=1,
                     cache=False).report
    # The first answer spends the token budget; calls already in flight (at most the
    # client's 4) still finish, and no call starts after it.
    assert 1 <= len(server.requests) <= 4


def test_malformed_and_out_of_set_answers_fail_closed(tmp_path: Path) -> None:
    def script(body: dict[str, Any]) -> Any:
        state = json.loads(prompt_of(body)[prompt_of(body).index("{"):]).get(
            "decision_state", {})
        if state.get("high_value") is True:
            return 200, {}, completion('{"action": "PAY_NOW"}')  # not an action
        if state.get("duplicate_signal") is True:
            return 200, {}, completion("REJECT_DUPLICATE")  # not JSON
        return payment_policy(body)

    with serving(script) as server:
        report = run(_experiment(server.url, full_record=False), cache=False).report
    contract = _strategy(report, "decision_contract")
    # value-* and duplicate-* cases (4 of 14) fail closed: ESCALATE, right for the
    # high-value cases and wrong (but not catastrophic) for the duplicates
    assert contract["catastrophic_errors"] == 0
    assert contract["agreement"] == pytest.approx(12 / 14)


def test_failed_calls_are_asked_again(tmp_path: Path) -> None:
    failing = [True]

    def script(body: dict[str, Any]) -> Any:
        if failing[0]:
            return 503, {}, {"error": "down"}
        return payment_policy(body)

    cache = tmp_path / "calls.sqlite"
    with serving(script) as server:
        experiment = _experiment(server.url, full_record=False)
        receiver = experiment.strategies[1].receiver
        quick = attrs.evolve(receiver, client=attrs.evolve(receiver.client, max_retries=0))
        experiment = attrs.evolve(experiment, strategies=tuple(
            attrs.evolve(s, receiver=quick) if s.name == "decision_contract" else s
            for s in experiment.strategies))
        down = run(experiment, cache=cache).report
        assert CallCache(cache).entries() == 0  # failures are never cached
        asked = len(server.requests)
        failing[0] = False
        up = run(experiment, cache=cache).report
    assert _strategy(down, "decision_contract")["agreement"] < 1.0
    assert down["cost"]["totals"]["model_calls"] == asked
    assert _strategy(up, "decision_contract")["agreement"] == 1.0


def test_a_model_receiver_declared_in_toml(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "prompt.txt").write_text(
        "Decide for $contract. Allowed: $actions.\n$message\n", encoding="utf-8")
    (tmp_path / "model.toml").write_text('''
[experiment]
factory = "handoffs.examples.payment_lab:payment_experiment"
factory_args = { variants = 1, profile = "essay" }

[[strategy]]
name = "decision_contract"
encoder = "handoffs.examples.payment:decision_contract_encoder"
gated = true

[strategy.model]
route = "scripted/policy"
base_url = "http://127.0.0.1:9/v1"
base_url_env = "HANDOFFS_TEST_MODEL_URL"
api_key_env = "HANDOFFS_TEST_MODEL_KEY"
template_file = "prompt.txt"
gate = "handoffs.examples.payment_lab:payment_gate"
temperature = 0
seed = 7
max_tokens = 12
response_format = "json_object"
max_concurrency = 2
''', encoding="utf-8")
    with serving() as server:
        monkeypatch.setenv("HANDOFFS_TEST_MODEL_URL", server.url)
        monkeypatch.setenv("HANDOFFS_TEST_MODEL_KEY", "sk-local")
        experiment = load_experiment(tmp_path / "model.toml")
        report = run(experiment, cache=False).report
    (strategy,) = report["experiment"]["strategies"]
    assert strategy["record"]["model_route"] == "scripted/policy"
    assert strategy["record"]["parameters"] == {"temperature": 0, "seed": 7, "max_tokens": 12}
    assert strategy["record"]["response_format"] == "json_object"
    body = server.requests[0]
    assert prompt_of(body).startswith("Decide for payment-release/1.0.0. Allowed: RELEASE")
    assert body["response_format"]["type"] == "json_object"
    assert server.headers[0]["authorization"] == "Bearer sk-local"
    assert report["cost"]["strategies"][0]["model_calls"] == len(server.requests)


def test_bad_model_declarations_are_refused(tmp_path: Path) -> None:
    from handoffs.lab import ExperimentError

    (tmp_path / "bad.toml").write_text('''
[experiment]
factory = "handoffs.examples.payment_lab:payment_experiment"

[[strategy]]
name = "m"
encoder = "handoffs.examples.payment:decision_contract_encoder"
[strategy.model]
route = "x"
base_url = "http://127.0.0.1:9/v1"
temprature = 0
''', encoding="utf-8")
    with pytest.raises(ExperimentError, match="unknown model key 'temprature'"):
        load_experiment(tmp_path / "bad.toml")
    with pytest.raises(ExperimentError, match="max_calls must be a positive integer"):
        run(payment_experiment(variants=1), max_calls=0)


def test_the_release_gate_may_hold_a_token_budget() -> None:
    from handoffs.lab import Tolerances
    from handoffs.lab.reports import evaluate_gate

    with serving() as server:
        report = run(_experiment(server.url, full_record=False), cache=False).report
    spent = report["cost"]["totals"]["tokens_in"] + report["cost"]["totals"]["tokens_out"]
    assert report["gate"]["passed"]  # the scripted model decides as the policy does
    declared = Tolerances.from_json(report["experiment"]["tolerances"])
    tight = evaluate_gate(report, attrs.evolve(declared, max_tokens=spent - 1))
    assert not tight["passed"]
    assert tight["reasons"] == [f"the run spent {spent} model token(s), {spent - 1} allowed"]
    assert evaluate_gate(report, attrs.evolve(declared, max_tokens=spent))["passed"]


@attrs.frozen
class _Answering:
    """A chat client that answers at once (stands in for a remote model)."""

    def complete(self, request: ChatRequest) -> Completion:
        return Completion(content='{"action": "HOLD"}', tokens_in=10, tokens_out=5)


class _NoTokenCount(CallCache):
    def charge_tokens(self, run: str, tokens: int) -> None:
        raise CallCacheError("the budget row cannot be written")


def test_an_answer_is_stored_before_anything_else_happens_to_it(tmp_path: Path) -> None:
    path = tmp_path / "calls.sqlite"
    cache = _NoTokenCount(path)
    client = LabClient(inner=_Answering(), fingerprint="fp", receiver="r", cache=cache,
                       budget=Budget(run="run", max_tokens=1000, cache=cache))
    request = ChatRequest(model="m", messages=(("user", "hello"),))
    with pytest.raises(CallCacheError):
        client.complete(request)  # what fails after the answer arrived...
    # ...finds it already committed (seen through another connection), its claim gone
    other = CallCache(path)
    found = other.get(CallCache.key("fp", request))
    assert found is not None
    assert found.content == '{"action": "HOLD"}'
    assert found.cached
    assert other.claim(CallCache.key("fp", request))


def test_a_logging_gate_logs_each_decision_once_with_its_answer(tmp_path: Path) -> None:
    log = SQLiteDecisionLog(tmp_path / "decisions.sqlite")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeConfigurationWarning)  # no proofs: the lab's
        gate = attrs.evolve(payment_gate(), log=log)
    with serving(delay=0.01) as server:
        client = OpenAICompatibleClient(base_url=server.url, backoff=0.01, max_concurrency=4)
        receiver = ModelReceiver(gate=gate, client=client, model_route="scripted/policy")
        base = payment_experiment(variants=2, profile="essay")
        experiment = attrs.evolve(base, strategies=tuple(
            attrs.evolve(s, receiver=receiver) if s.name == "decision_contract" else s
            for s in base.strategies))
        report = run(experiment, chunk_size=4).report
    rows = log.rows(limit=10_000)
    # one row per decision the receiver made (a logging gate is never memoised), none
    # of them a placeholder from the scheduling pass
    assert len(rows) == sum(r["receiver_calls"] for r in report["results"]
                            if r["strategy"] == "decision_contract")
    assert not [r for r in rows if "model-error" in json.dumps(r["reasons"])]
    assert len(server.requests) == sum(1 for r in rows if r["step"] == 5)


_DRAWN = [str(a.value) for a in PAYMENT_RELEASE.actions]


def _drawing() -> Callable[[dict[str, Any]], Any]:
    """A 'model' that answers each sampled call of a prompt with the next action (the
    k-th call of a prompt gets action k), and deterministic calls with the policy."""
    counts: dict[str, int] = {}
    lock = threading.Lock()

    def script(body: dict[str, Any]) -> Any:
        if body["temperature"] == 0:
            return payment_policy(body)
        with lock:
            k = counts[prompt_of(body)] = counts.get(prompt_of(body), -1) + 1
        return 200, {}, completion(json.dumps({"action": _DRAWN[k % len(_DRAWN)]}))

    return script


def _sampled_experiment(url: str, *, fail_after: int | None = None,
                        full_record: bool = True) -> Any:
    """Three epochs; the decision contract's receiver samples (temperature 0.7), the
    full record's does not."""
    experiment = _experiment(url, fail_after=fail_after, full_record=full_record)
    sampled = {"decision_contract": {"temperature": 0.7, "seed": 0}}
    return attrs.evolve(experiment, epochs=3, strategies=tuple(
        attrs.evolve(s, receiver=attrs.evolve(s.receiver, **sampled[s.name]))
        if s.name in sampled else s for s in experiment.strategies))


def _draws(log: Path, strategy: str) -> dict[int, dict[int, str]]:
    """Per case, the unperturbed decision of ``strategy`` in each epoch (run log)."""
    from handoffs.lab._runlog import COLUMNS, read_run_log

    header, records = read_run_log(log)
    index = header["strategies"].index(strategy)
    out: dict[int, dict[int, str]] = {}
    for record in records:
        if record.get("complete") is True:
            continue
        for row in record["rows"]:
            cell = dict(zip(COLUMNS, row, strict=True))
            if cell["strategy"] == index and cell["perturbation"] == 0:
                out.setdefault(record["start"] + cell["case"], {})[cell["epoch"]] = \
                    cell["action"]
    return out


def test_each_sample_of_a_sampled_receiver_is_one_call_cached_and_resumable(
        tmp_path: Path) -> None:
    log, again = tmp_path / "run.jsonl", tmp_path / "again.jsonl"
    with serving(_drawing(), delay=0.02, gather=4) as server:
        report = run(_sampled_experiment(server.url), run_log=log, chunk_size=4).report
        asked = list(server.requests)
        # a repeated run on the same call cache asks nothing and draws the same
        repeated = run(_sampled_experiment(server.url), run_log=again, chunk_size=4,
                       cache=tmp_path / "run.jsonl.calls.sqlite").report
        assert len(server.requests) == len(asked)
    sampled = [b for b in asked if b["temperature"] > 0]
    fixed = [b for b in asked if b["temperature"] == 0]
    # n samples of one prompt are n calls, each with its own seed; none is asked twice
    by_prompt: dict[str, list[int]] = {}
    for body in sampled:
        by_prompt.setdefault(prompt_of(body), []).append(body["seed"])
    assert by_prompt
    assert all(sorted(seeds) == [0, 1, 2] for seeds in by_prompt.values())
    # the deterministic receiver is asked once per distinct prompt
    assert len({prompt_of(b) for b in fixed}) == len(fixed) >= 14
    # every case's three epochs are three distinct answers of the model ...
    draws = _draws(log, "decision_contract")
    assert len(draws) == 14
    assert all(len(set(by_epoch.values())) == 3 and set(by_epoch) == {0, 1, 2}
               for by_epoch in draws.values())
    # ... and the deterministic receiver's epochs are one decision
    assert all(set(epochs) == {0} for epochs in _draws(log, "full_record").values())
    assert _draws(again, "decision_contract") == draws
    cost = {row["strategy"]: row for row in report["cost"]["strategies"]}
    assert cost["decision_contract"]["model_calls"] == len(sampled)
    assert cost["full_record"]["model_calls"] == len(fixed)
    assert repeated["cost"]["totals"]["model_calls"] == 0
    assert repeated["strategy_results"] == report["strategy_results"]
    assert server.max_in_flight == 4


def test_sampled_calls_overlap_like_deterministic_ones(tmp_path: Path) -> None:
    with serving(_drawing(), delay=0.05, gather=4) as server:
        report = run(_sampled_experiment(server.url, full_record=False),
                     cache=tmp_path / "calls.sqlite", chunk_size=7).report
    assert all(body["temperature"] > 0 for body in server.requests)
    assert server.max_in_flight == 4  # the client's bound: the sampled calls overlapped
    assert report["cost"]["totals"]["model_calls"] == len(server.requests)


def test_a_resumed_run_draws_no_sample_twice(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # chunks are handed out once the shuffled control's window of their cases is read:
    # windows of 4 (each handed out once two cases past it are read), so that the
    # first two chunks are done when case 11 fails
    monkeypatch.setattr("handoffs.lab._controls.SHUFFLE_WINDOW", 4)
    log = tmp_path / "run.jsonl"
    with serving(_drawing()) as server:
        with pytest.raises(UserCodeError, match="Boom"):
            run(_sampled_experiment(server.url, fail_after=11), chunk_size=4, run_log=log,
                executor=Inline())
        first = len(server.requests)
        assert first
        report = run(_sampled_experiment(server.url), chunk_size=4, run_log=log,
                     resume=True).report
    keys = [(prompt_of(b), b["temperature"], b.get("seed")) for b in server.requests]
    assert len(keys) == len(set(keys))  # nothing asked twice, before or after the stop
    assert report["provenance"]["resumed_chunks"] == 2
    draws = _draws(log, "decision_contract")
    assert len(draws) == 14
    assert all(len(set(by_epoch.values())) == 3 for by_epoch in draws.values())


def test_the_call_cache_answers_a_whole_batch_in_one_look_up(tmp_path: Path) -> None:
    cache = CallCache(tmp_path / "calls.sqlite")
    keys = [f"{i:064x}" for i in range(1200)]  # more than one statement's worth
    for i, key in enumerate(keys[:1100]):
        cache.put(key, "r", Completion(content=f"answer {i}", tokens_in=i, tokens_out=1,
                                       latency_ms=3.0))
    found = cache.get_many([*keys, keys[0]])
    assert set(found) == set(keys[:1100])
    assert all(found[k] == cache.get(k) for k in keys[:1100:97])
    assert found[keys[7]].cached
    assert found[keys[7]].latency_ms == 0.0
    assert cache.get_many([]) == {}
    assert CallCache(cache.path, refresh=True).get_many(keys) == {}  # --refresh


class _Counting(CallCache):
    """The call cache, counting its look-ups."""

    looked: list[int] = []  # noqa: RUF012 - per test, reset by it

    def get(self, key: str) -> Completion | None:
        self.looked.append(1)
        return super().get(key)

    def get_many(self, keys: Any) -> dict[str, Completion]:
        self.looked.append(len(keys))
        return super().get_many(keys)


def test_a_scheduling_pass_looks_its_requests_up_in_batches(tmp_path: Path) -> None:
    with serving() as server:
        run(_experiment(server.url), cache=tmp_path / "calls.sqlite", chunk_size=7)
        asked = len(server.requests)
        _Counting.looked = []
        again = run(_experiment(server.url), cache=_Counting(tmp_path / "calls.sqlite"),
                    chunk_size=7).report
    assert len(server.requests) == asked
    assert again["cost"]["totals"]["cache_hits"] == asked
    # requests go out as the scheduling pass makes them, the first alone, then in
    # batches that double up to the pool's width (8): each batch is one look-up, so
    # a chunk's requests are not asked one by one
    assert sum(_Counting.looked) == asked
    assert max(_Counting.looked) > 2
    assert len(_Counting.looked) < asked


def test_scheduling_passes_take_turns_in_stream_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import time
    from types import SimpleNamespace

    from handoffs.lab import _memo

    shared = _memo._Shared(SimpleNamespace(concurrency=1))  # type: ignore[arg-type]
    for index in range(3):
        shared.expect(index)
    order: list[int] = []
    inside: list[int] = []

    def schedule(index: int) -> None:
        with shared.scheduling(index):
            inside.append(index)
            assert len(inside) == 1  # one pass at a time
            order.append(index)
            time.sleep(0.01)
            inside.remove(index)

    threads = [threading.Thread(target=schedule, args=(i,)) for i in (2, 1, 0)]
    for thread in threads:
        thread.start()
        time.sleep(0.02)  # the later chunks arrive first
    for thread in threads:
        thread.join(10)
    assert order == [0, 1, 2]
    # a chunk that never comes (a stopped run) is not waited for: abandoned, or at most
    # for the turn's bound
    shared.expect(5)
    waiting = threading.Thread(target=schedule, args=(6,))
    waiting.start()
    time.sleep(0.05)
    assert order == [0, 1, 2]
    shared.abandon()
    waiting.join(10)
    assert order == [0, 1, 2, 6]
    # a chunk expected but never handed over is waited for at most the turn's bound,
    # in waits the bound limits (what the pass waits is asserted, not timed)
    monkeypatch.setattr(_memo, "_TURN_WAIT", 0.1)
    waits: list[float] = []
    real_wait = shared.turns.wait

    def wait(timeout: float | None = None) -> bool:
        waits.append(-1.0 if timeout is None else timeout)
        return real_wait(timeout)

    monkeypatch.setattr(shared.turns, "wait", wait)
    shared.expect(7)
    schedule(8)
    assert order[-1] == 8
    assert waits
    assert all(0 <= w <= 0.1 for w in waits)
    assert 7 in shared.expected  # it was not handed over: the pass went ahead of it


@attrs.frozen
class _FailingEncoder:
    """An encoder that raises on one case (a bug in the user's encoder)."""

    inner: Any
    case_id: str

    def encode(self, evidence: Any) -> Any:
        if evidence.case_id == self.case_id:
            raise Boom
        return self.inner.encode(evidence)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.timeout(120)
def test_a_scheduling_pass_that_fails_sends_what_it_made_and_the_run_stops(
        tmp_path: Path) -> None:
    # Chunks of two cases: routine-01 and identity-01, then routine-02 (whose receipt
    # asks what routine-01's asks) and identity-02. The full record's encoder raises on
    # identity-01: the requests the first chunk's scheduling pass made before go out
    # all the same, so the second chunk, whose decisions wait for them, finishes, and
    # the run raises.
    with serving(delay=0.01) as server:
        experiment = _experiment(server.url)
        by_id = {c.case_id: c for c in experiment.cases}
        order = [by_id[n] for n in ("routine-01", "identity-01", "routine-02", "identity-02")]
        experiment = attrs.evolve(
            experiment, cases=IterableCases(lambda: iter(order), description="four"), injections=(),
            strategies=tuple(attrs.evolve(s, encoder=_FailingEncoder(s.encoder, "identity-01"))
                             if s.name == "full_record" else s for s in experiment.strategies))
        with pytest.raises(UserCodeError, match="Boom"):
            run(experiment, chunk_size=2, cache=tmp_path / "calls.sqlite")
    assert server.requests


def test_a_call_that_fails_before_send_returns_is_forgotten_not_deadlocked(
        tmp_path: Path) -> None:
    """An executor that runs the call inline hands back a future that has already
    failed; its done-callback runs at once, in the sending thread. The client must not
    hold its lock then (it deadlocked in the budget test), and forgets the failed call
    so that asking again sends it again."""
    cache = _NoTokenCount(tmp_path / "calls.sqlite")
    client = LabClient(inner=_Answering(), fingerprint="fp", receiver="r", cache=cache,
                       budget=Budget(run="run", max_tokens=1000, cache=cache))
    request = ChatRequest(model="m", messages=(("user", "hello"),))
    sent: list[int] = []

    def inline(function: Any, *args: Any) -> cf.Future[Completion]:
        sent.append(1)
        future: cf.Future[Completion] = cf.Future()
        try:
            future.set_result(function(*args))
        except CallCacheError as exc:
            future.set_exception(exc)
        return future

    key = CallCache.key("fp", request)
    futures: list[cf.Future[Completion]] = []
    # a daemon thread: a deadlock shows as a failed join, not a hung suite
    sender = threading.Thread(
        target=lambda: futures.append(client.send(key, request, inline)), daemon=True)
    sender.start()
    sender.join(timeout=30)
    assert not sender.is_alive(), "send deadlocked on its own lock"
    first = futures[0]
    assert isinstance(first.exception(), CallCacheError)
    second = client.send(key, request, inline)
    assert second is not first
    assert len(sent) == 2
