"""Model calls in a call process of their own (issue #34 item 3): the same answers and
the same failures as calls made in the caller's interpreter; a lab run's HTTP calls
leave the lab's interpreter once the call process is ready; calls fall back to the
caller's interpreter when the call process ends; clients whose state must stay in one
interpreter (rate limits) and other clients are never offloaded.

The model server is :mod:`chat_server` (a scripted test double for a remote provider
on 127.0.0.1); the client, the call process and the lab are the library's real code.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time
from typing import Any

import attrs
import pytest

from chat_server import completion, payment_policy, serving
from handoffs.errors import ModelError
from handoffs.examples.payment import PAYMENT_RELEASE
from handoffs.examples.payment_lab import payment_experiment, payment_gate
from handoffs.lab import run
from handoffs.receivers import GovernanceChecker
from handoffs.receivers._offload import OffloadedClient, _process, offloaded
from handoffs.receivers.models import ChatRequest, Completion, ModelReceiver, OpenAICompatibleClient

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the call process is POSIX-only")

REQUEST = ChatRequest(model="scripted/policy", messages=(("user", "no state here"),))


def _ready() -> None:
    process = _process()
    assert process is not None
    assert process.ready.wait(60), "the call process did not start within 60 s"


def test_an_offloaded_call_answers_what_a_call_here_answers() -> None:
    _ready()
    with serving() as server:
        here = OpenAICompatibleClient(base_url=server.url)
        there = offloaded(OpenAICompatibleClient(base_url=server.url))
        assert isinstance(there, OffloadedClient)
        mine, theirs = here.complete(REQUEST), there.complete(REQUEST)
        there.close()
        here.close()
    assert attrs.evolve(theirs, latency_ms=0.0) == attrs.evolve(mine, latency_ms=0.0)
    assert theirs.served is not None
    assert theirs.served.model == "scripted"
    assert len(server.requests) == 2


def test_the_client_reads_the_environment_as_of_its_first_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The call process was started earlier; the key variable set since is the one
    sent (as a client called here reads it at its first call)."""
    _ready()
    with serving() as server:
        monkeypatch.setenv("HANDOFFS_TEST_OFFLOAD_KEY", "sk-first")
        client = offloaded(OpenAICompatibleClient(base_url=server.url,
                                                  api_key_env="HANDOFFS_TEST_OFFLOAD_KEY"))
        assert isinstance(client, OffloadedClient)
        client.complete(REQUEST)
        client.close()
    assert server.headers[0]["authorization"] == "Bearer sk-first"


def test_an_offloaded_failure_is_the_same_typed_error() -> None:
    _ready()

    def refuse(_: dict[str, Any]) -> Any:
        return 403, {}, {"error": "forbidden"}

    with serving(refuse) as server:
        client = OpenAICompatibleClient(base_url=server.url, max_retries=0)
        with pytest.raises(ModelError) as here:
            client.complete(REQUEST)
        there = offloaded(client)
        with pytest.raises(ModelError) as offloaded_error:
            there.complete(REQUEST)
        there.close()
    assert type(offloaded_error.value) is type(here.value)
    assert str(offloaded_error.value) == str(here.value)
    assert offloaded_error.value.code == "model-error"


def test_a_lab_run_makes_no_http_call_in_its_own_interpreter(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the call process is ready, every call of the run is made there: the lab's
    interpreter only does the case work (and the answers are the same)."""
    _ready()
    here: list[str] = []
    complete = OpenAICompatibleClient.complete

    def recording(self: OpenAICompatibleClient, request: ChatRequest) -> Completion:
        here.append(threading.current_thread().name)
        return complete(self, request)

    monkeypatch.setattr(OpenAICompatibleClient, "complete", recording)
    base = payment_experiment(variants=2, profile="essay")
    with serving(delay=0.01) as server:
        client = OpenAICompatibleClient(base_url=server.url, max_concurrency=4)
        receivers = {
            "decision_contract": ModelReceiver(gate=payment_gate(), client=client,
                                               model_route="scripted/policy"),
            "full_record": ModelReceiver(
                gate=GovernanceChecker(PAYMENT_RELEASE, required=()), client=client,
                model_route="scripted/policy", name="model-full-record")}
        experiment = attrs.evolve(base, strategies=tuple(
            attrs.evolve(s, receiver=receivers[s.name]) if s.name in receivers else s
            for s in base.strategies))
        report = run(experiment, cache=False).report
    assert here == []
    totals = report["cost"]["totals"]
    assert totals["model_calls"] == len(server.requests) > 0
    contract_row = next(r for r in report["strategy_results"]
                        if r["strategy"] == "decision_contract")
    assert contract_row["agreement"] == 1.0  # the scripted model applies the policy


def test_calls_are_made_here_when_the_call_process_ends() -> None:
    _ready()
    process = _process()
    assert process is not None
    with serving() as server:
        client = offloaded(OpenAICompatibleClient(base_url=server.url))
        assert isinstance(client, OffloadedClient)
        assert client.complete(REQUEST).content
        os.kill(process.process.pid, signal.SIGKILL)
        process.process.wait(30)
        deadline = time.monotonic() + 30
        while not process.gone and time.monotonic() < deadline:
            time.sleep(0.01)
        assert process.gone
        # the next call is answered here, not lost
        assert client.complete(REQUEST).content == completion(
            '{"action": "ESCALATE"}')["choices"][0]["message"]["content"]
        # and a new client starts a new call process
        fresh = offloaded(OpenAICompatibleClient(base_url=server.url))
        assert isinstance(fresh, OffloadedClient)
        assert fresh.process is not process
        fresh.close()
        client.close()
    assert len(server.requests) == 2


def test_what_is_not_offloaded() -> None:
    limited = OpenAICompatibleClient(base_url="http://127.0.0.1:1/v1", requests_per_minute=60)
    tokens = OpenAICompatibleClient(base_url="http://127.0.0.1:1/v1", tokens_per_minute=600)
    assert offloaded(limited) is limited
    assert offloaded(tokens) is tokens

    class Own:
        def complete(self, request: ChatRequest) -> Completion:
            return Completion(content=payment_policy(request.to_json())[2]["choices"][0]
                              ["message"]["content"])

    own = Own()
    assert offloaded(own) is own  # type: ignore[arg-type]


def test_switched_off_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    client = OpenAICompatibleClient(base_url="http://127.0.0.1:1/v1")
    monkeypatch.setenv("HANDOFFS_CALL_PROCESS", "0")
    assert offloaded(client) is client


def test_a_pickled_offloaded_client_is_its_client() -> None:
    """A process executor's worker gets the declared client and calls it itself."""
    client = OpenAICompatibleClient(base_url="http://127.0.0.1:1/v1", max_concurrency=3)
    wrapped = offloaded(client)
    assert isinstance(wrapped, OffloadedClient)
    assert wrapped.max_concurrency == 3
    assert pickle.loads(pickle.dumps(wrapped)) == client  # noqa: S301 - our own bytes


def test_a_forked_child_does_not_use_its_parents_call_process() -> None:
    """The socket is the parent's: a child forked from it calls here (or starts its
    own call process), never writes into the parent's."""
    _ready()
    from handoffs.receivers._offload import call_process_running

    assert call_process_running()
    pid = os.fork()
    if pid == 0:  # the child: its inherited call process is not its own
        os._exit(0 if not call_process_running() else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert call_process_running()
