"""The model receiver and its chat-completions client, over real HTTP on 127.0.0.1.

The server is :mod:`chat_server`, a scripted test double for a remote model
provider; everything on the client side is the library's real code.
"""

from __future__ import annotations

import json
import pickle
import threading
from typing import Any

import attrs
import pytest

from chat_server import (
    completion,
    payment_policy,
    prompt_of,
    self_signed,
    sequence,
    serving,
)
from handoffs.examples.payment import (
    PAYMENT_RELEASE,
    ActionOnlyEncoder,
    FullRecordEncoder,
    decision_contract_encoder,
    synthetic_cases,
)
from handoffs.examples.payment_lab import payment_gate
from handoffs.lab._memo import memo_key
from handoffs.receivers import FunctionReceiver, GovernanceChecker, Verdict, _chat
from handoffs.receivers._chat import ModelTimeout, ServedModel, retry_after
from handoffs.receivers.models import (
    ChatRequest,
    ModelError,
    ModelReceiver,
    OpenAICompatibleClient,
)

ACTIONS = ["RELEASE", "HOLD", "REJECT_DUPLICATE", "ESCALATE"]


def _case(name: str = "routine-01") -> Any:
    return next(c for c in synthetic_cases(4) if c.case_id == name)


def _receipt(name: str = "routine-01") -> dict[str, Any]:
    from handoffs.examples.payment import GOVERNANCE

    case = _case(name)
    stamp = GOVERNANCE.stamp(case_id=case.case_id, evidence_refs=case.evidence_refs).to_json()
    return {"contract": PAYMENT_RELEASE.id, "id": "urn:uuid:6f1d3c1e-5d0b-4d4e-9d27-6c2f0f6b8a10",
            **decision_contract_encoder().encode(case), **stamp}


_OPEN: list[OpenAICompatibleClient] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Any:
    yield
    while _OPEN:
        _OPEN.pop().close()


def _client(url: str, **options: Any) -> OpenAICompatibleClient:
    options.setdefault("backoff", 0.01)
    client = OpenAICompatibleClient(base_url=url, **options)
    _OPEN.append(client)
    return client


def _receiver(url: str, **options: Any) -> ModelReceiver:
    client = options.pop("client", None) or _client(url)
    return ModelReceiver(gate=payment_gate(), client=client, model_route="scripted/payment",
                         **options)


def test_the_prompt_shows_what_the_encoder_sent_and_the_answer_is_constrained() -> None:
    with serving() as server:
        receiver = _receiver(server.url)
        decision = receiver.receive(_receipt())
    assert (decision.verdict, decision.action) == (Verdict.ACCEPT, "RELEASE")
    (body,) = server.requests
    prompt = prompt_of(body)
    shown = json.loads(prompt[prompt.index("{"):])
    assert set(shown) == {"decision_state", "proposed_action", "uncertainty",
                          "counterfactual_trigger"}
    assert "case_id" not in prompt
    assert "urn:uuid" not in prompt
    assert "Allowed actions: RELEASE, HOLD, REJECT_DUPLICATE, ESCALATE" in prompt
    assert body["model"] == "scripted/payment"
    assert (body["temperature"], body["seed"], body["max_tokens"]) == (0.0, 0, 16)
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "decision", "strict": True, "schema": ModelReceiver.action_schema(PAYMENT_RELEASE)}}
    assert body["messages"][0]["role"] == "system"
    record = decision.record
    assert record["model_route"] == "scripted/payment"
    assert record["parameters"] == {"temperature": 0.0, "seed": 0, "max_tokens": 16}
    assert record["response_format"] == "json_schema"
    assert len(record["prompt_sha256"]) == 64
    assert record["tokens_in"] == len(prompt) // 4
    assert record["tokens_out"] == 5
    assert record["latency_ms"] > 0
    assert record["cached"] is False


def test_the_served_model_and_its_build_are_recorded_per_call() -> None:
    """Regression (#23): a decision named the route it asked for, not what answered.
    Each call records the response's ``model`` and ``system_fingerprint`` (llama.cpp's
    ``llama-server`` puts its build there) and the ``Server`` header."""
    answer = {**completion('{"action": "RELEASE"}'), "model": "smollm2-135m-instruct-q4_1",
              "system_fingerprint": "b4567-1a2b3c4"}
    with serving(sequence((200, {}, answer), (200, {}, completion('{"action": "HOLD"}')))
                 ) as server:
        receiver = _receiver(server.url)
        first = receiver.receive(_receipt())
        second = receiver.receive(_receipt())
    assert first.record["served_model"]["model"] == "smollm2-135m-instruct-q4_1"
    assert first.record["served_model"]["system_fingerprint"] == "b4567-1a2b3c4"
    assert first.record["served_model"]["server"].startswith("BaseHTTP/")
    # a server that does not say gives nulls, not a guess from the route
    assert second.record["served_model"]["model"] == "scripted"
    assert second.record["served_model"]["system_fingerprint"] is None
    assert ServedModel(model="", system_fingerprint=None).to_json() == {
        "model": None, "system_fingerprint": None, "server": None}


def _llama_cpp_like(body: dict[str, Any]) -> Any:
    """A stand-in for llama.cpp's server (remote provider): ``json_schema`` answered
    with HTTP 500 naming it, ``json_object`` + schema answered."""
    form = (body.get("response_format") or {}).get("type")
    if form == "json_schema":
        return 500, {}, {"error": {"message": "unsupported response_format type "
                                              "'json_schema'"}}
    return payment_policy(body)


def _text_only(body: dict[str, Any]) -> Any:
    """A stand-in for a server that takes no ``response_format`` at all (HTTP 400), and
    answers in prose around the JSON."""
    if body.get("response_format"):
        return 400, {}, {"error": {"message": "response_format is not supported"}}
    return 200, {}, completion('Sure. {"action": "HOLD"} is my answer.')


def test_structured_output_is_negotiated_once_per_route_without_spending_retries() -> None:
    """Regression (#23): llama.cpp's server answers the ``json_schema`` form with HTTP
    500, which the client retried (47 s lost) before failing ``model-error``. The client
    steps down to ``json_object`` + schema at once (no retry: ``max_retries=0``) and
    keeps that form for the route."""
    with serving(_llama_cpp_like) as server:
        client = _client(server.url, max_retries=0, backoff=30.0)
        receiver = _receiver(server.url, client=client)
        first, second = receiver.receive(_receipt()), receiver.receive(_receipt("policy-02"))
    assert (first.action, second.action) == ("RELEASE", "ESCALATE")
    assert [b["response_format"]["type"] for b in server.requests] == [
        "json_schema", "json_object", "json_object"]
    assert server.requests[1]["response_format"]["schema"] == ModelReceiver.action_schema(
        PAYMENT_RELEASE)
    assert first.record["response_format"] == "json_schema"  # as declared
    assert first.record["response_format_sent"] == "json_object"  # as it went


def test_a_server_without_structured_output_gets_text_and_a_parser() -> None:
    with serving(_text_only) as server:
        client = _client(server.url, max_retries=0)
        decision = _receiver(server.url, client=client).receive(_receipt())
    assert [b.get("response_format") for b in server.requests][-1] is None
    assert len(server.requests) == 3
    assert (decision.verdict, decision.action) == (Verdict.ACCEPT, "HOLD")
    assert decision.record["response_format_sent"] == "text"


def test_a_transient_error_is_retried_not_negotiated() -> None:
    script = sequence((503, {}, {"error": "overloaded"}), (200, {}, completion(
        '{"action": "RELEASE"}')))
    with serving(script) as server:
        client = _client(server.url, max_retries=1, backoff=0.01)
        decision = _receiver(server.url, client=client).receive(_receipt())
    assert decision.action == "RELEASE"
    assert [b["response_format"]["type"] for b in server.requests] == ["json_schema"] * 2
    assert decision.record["response_format_sent"] == "json_schema"


def test_negotiation_can_be_turned_off() -> None:
    with serving(_llama_cpp_like) as server:
        client = _client(server.url, max_retries=0,
                                        negotiate_format=False)
        decision = _receiver(server.url, client=client).receive(_receipt())
    assert decision.reasons[0].code == "model-error"
    assert len(server.requests) == 1


def test_llama_cpp_form_of_the_response_format() -> None:
    with serving() as server:
        _receiver(server.url, response_format="json_object").receive(_receipt())
    assert server.requests[0]["response_format"] == {
        "type": "json_object", "schema": ModelReceiver.action_schema(PAYMENT_RELEASE)}
    assert ModelReceiver.action_schema(PAYMENT_RELEASE)["properties"]["action"]["enum"] == ACTIONS


def test_every_message_form_is_rendered() -> None:
    full = {**FullRecordEncoder().encode(_case()), "authority": "ADVISE"}
    action = {**ActionOnlyEncoder().encode(_case()), "authority": "DECIDE"}
    with serving() as server:
        checker = GovernanceChecker(PAYMENT_RELEASE, required=())
        receiver = ModelReceiver(gate=checker, client=_client(server.url),
                                 model_route="m", template="$authority|$message")
        receiver.receive(full)
        receiver.receive(action)
    prompts = [prompt_of(b) for b in server.requests]
    assert prompts[0].startswith("ADVISE|{")
    assert '"investigation_notes"' in prompts[0]
    assert prompts[1] == 'DECIDE|{"action":"RELEASE"}'


@pytest.mark.parametrize(("content", "code"), [
    ("RELEASE", "malformed-answer"),
    ('{"action": "PAY_NOW"}', "invalid-action"),
    ('{"action": "RELEASE", "why": "x"}', "malformed-answer"),
    ('{"action": true}', "malformed-answer"),
    ("[]", "malformed-answer"),
    ("False", "malformed-answer"),
])
def test_answers_outside_the_action_set_fail_closed(content: str, code: str) -> None:
    with serving(sequence((200, {}, completion(content)))) as server:
        decision = _receiver(server.url).receive(_receipt())
    assert decision.verdict is Verdict.REJECT
    assert decision.action == "ESCALATE"  # the contract's fail-closed action
    assert [r.code for r in decision.reasons] == [code]
    assert decision.record["tokens_out"] == 5  # the failed answer still cost tokens


def test_a_body_that_is_not_a_completion_is_a_model_error() -> None:
    with serving(sequence((200, {}, {"choices": []}))) as server:
        decision = _receiver(server.url).receive(_receipt())
    assert decision.verdict is Verdict.ESCALATE
    assert [r.code for r in decision.reasons] == ["model-error"]


def test_an_inadmissible_message_never_reaches_the_model() -> None:
    with serving() as server:
        message = _receipt()
        del message["policy_version"]
        decision = _receiver(server.url).receive(message)
    assert decision.verdict is Verdict.REJECT
    assert server.requests == []


class FakeClock:
    """The model client's clock in a test: time passes only when the client sleeps, and
    every sleep is recorded (no test times a wait).
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 1000.0
        self.slept: list[float] = []
        monkeypatch.setattr(_chat, "_monotonic", lambda: self.now)
        monkeypatch.setattr(_chat, "_sleep", self.sleep)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_429_with_retry_after_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock(monkeypatch)
    script = sequence((429, {"retry-after": "0.3"}, {"error": "slow down"}),
                      (200, {}, completion('{"action": "HOLD"}')))
    with serving(script) as server:
        answer = _client(server.url).complete(_request())
    assert answer.content == '{"action": "HOLD"}'
    assert len(server.requests) == 2
    assert clock.slept == [0.3]  # waited as told, not the 10 ms backoff


def test_a_retry_without_retry_after_backs_off(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock(monkeypatch)
    script = sequence((429, {}, {"error": "slow down"}),
                      (200, {}, completion('{"action": "HOLD"}')))
    with serving(script) as server:
        _client(server.url).complete(_request())
    assert len(clock.slept) == 1
    assert 0 <= clock.slept[0] <= 0.01  # full jitter under the first backoff step


def test_a_500_then_success_is_retried_with_backoff() -> None:
    script = sequence((500, {}, {"error": "boom"}), (503, {}, "down"),
                      (200, {}, completion('{"action": "RELEASE"}')))
    with serving(script) as server:
        answer = _client(server.url, seed=1).complete(_request())
    assert answer.content == '{"action": "RELEASE"}'
    assert len(server.requests) == 3
    assert answer.latency_ms > 0


def test_retries_are_bounded_and_other_statuses_are_not_retried() -> None:
    with serving(sequence((500, {}, "boom"))) as server, \
            pytest.raises(ModelError, match="HTTP 500"):
        _client(server.url, max_retries=2).complete(_request())
    assert len(server.requests) == 3
    with serving(sequence((401, {}, {"error": "bad key"}))) as server, \
            pytest.raises(ModelError, match="HTTP 401") as caught:
        _client(server.url).complete(_request())
    assert caught.value.code == "model-error"
    assert len(server.requests) == 1


def test_timeouts_fail_closed_as_model_timeout() -> None:
    with serving(delay=0.5) as server:
        client = _client(server.url, timeout=0.1, max_retries=1)
        with pytest.raises(ModelTimeout):
            client.complete(_request())
        decision = _receiver(server.url, client=client).receive(_receipt())
    assert decision.verdict is Verdict.ESCALATE
    assert decision.action == "ESCALATE"
    assert [r.code for r in decision.reasons] == ["model-timeout"]


def test_a_server_is_verified_over_tls_and_refused_when_no_trusted_ca_signed_it(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every client of a process verifies with one TLS context (httpx's default, made
    once per ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``): a server whose certificate no
    trusted CA signed is refused, and trusted once ``SSL_CERT_FILE`` names it."""
    tls, certificate = self_signed(tmp_path)
    with serving(tls=tls) as server:
        assert server.url.startswith("https://")
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        with pytest.raises(ModelError, match="CERTIFICATE_VERIFY_FAILED"):
            _client(server.url, max_retries=0).complete(_request())
        assert server.requests == []
        monkeypatch.setenv("SSL_CERT_FILE", str(certificate))
        first, second = _client(server.url), _client(server.url)
        assert first.complete(_request()).content == second.complete(_request()).content
        assert len(server.requests) == 2
        monkeypatch.delenv("SSL_CERT_FILE")
        with pytest.raises(ModelError, match="CERTIFICATE_VERIFY_FAILED"):
            _client(server.url, max_retries=0).complete(_request())


def test_the_concurrency_limit_holds() -> None:
    with serving(delay=0.05, gather=3) as server:
        client = _client(server.url, max_concurrency=3)
        threads = [threading.Thread(target=client.complete, args=(_request(),))
                   for _ in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=10)
    assert len(server.requests) == 12
    assert server.max_in_flight == 3


def test_the_rate_limits_space_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock(monkeypatch)
    heavy = sequence((200, {}, completion('{"action": "HOLD"}', tokens_in=600)))
    with serving(heavy) as server:
        requests = _client(server.url, requests_per_minute=120)  # bursts up to 120
        for _ in range(3):
            requests.complete(_request())
        assert clock.slept == []  # a burst within the limit does not wait
        # 10 tokens a second: the first call is estimated at 51 tokens but used 605, so
        # the bucket is in debt by 5 and the second call (its estimate: prompt
        # characters / 4 + 10 tokens) waits until 5 + that estimate are back, in waits
        # of at most a second.
        tokens = _client(server.url, tokens_per_minute=600)
        tokens.complete(_request(max_tokens=50))
        assert clock.slept == []
        tokens.complete(_request(max_tokens=10))
    assert len(server.requests) == 5
    second = _request(max_tokens=10).prompt_chars() / 4 + 10
    assert clock.slept[0] == 1.0
    assert sum(clock.slept) == pytest.approx((5 + second) / 10)
    assert len(clock.slept) == 2


def test_the_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HANDOFFS_TEST_KEY", "sk-test-123")
    with serving() as server:
        client = _client(server.url, api_key_env="HANDOFFS_TEST_KEY")
        client.complete(_request())
        copy = pickle.loads(pickle.dumps(client))  # noqa: S301 - our own object
        _OPEN.append(copy)
        copy.complete(_request())
    assert [h.get("authorization") for h in server.headers] == ["Bearer sk-test-123"] * 2
    assert "sk-test" not in repr(client)


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="base_url"):
        OpenAICompatibleClient(base_url="localhost:8000")
    with pytest.raises(ValueError, match="max_concurrency"):
        OpenAICompatibleClient(base_url="http://127.0.0.1:1/v1", max_concurrency=0)
    client = OpenAICompatibleClient(base_url="http://127.0.0.1:1/v1")
    with pytest.raises(ValueError, match="placeholder"):
        ModelReceiver(gate=payment_gate(), client=client, model_route="m", template="$case")
    with pytest.raises(ValueError, match="response_format"):
        ModelReceiver(gate=payment_gate(), client=client, model_route="m",
                      response_format="grammar")
    with pytest.raises(ValueError, match="temperature"):
        ModelReceiver(gate=payment_gate(), client=client, model_route="m", temperature=3)
    with pytest.raises(TypeError, match="ChatClient"):
        ModelReceiver(gate=payment_gate(), client=object(),  # type: ignore[arg-type]
                      model_route="m")


def test_the_declaration_is_frozen_and_fingerprinted() -> None:
    client = OpenAICompatibleClient(base_url="http://127.0.0.1:1/v1")
    a = ModelReceiver(gate=payment_gate(), client=client, model_route="m")
    b = ModelReceiver(gate=payment_gate(), client=client, model_route="m", template="$message")
    c = ModelReceiver(gate=payment_gate(), client=client, model_route="m", temperature=0.7)
    assert a.fingerprint() != b.fingerprint() != c.fingerprint()
    assert a.record["prompt_sha256"] != b.record["prompt_sha256"]
    assert a.deterministic
    assert not c.deterministic
    assert a.max_in_flight == 8


def test_memo_keys_follow_the_prompt() -> None:
    client = OpenAICompatibleClient(base_url="http://127.0.0.1:1/v1")
    receiver = ModelReceiver(gate=payment_gate(), client=client, model_route="m")
    one, other = _receipt("routine-01"), _receipt("routine-02")
    assert memo_key(receiver, one) == memo_key(receiver, other)  # only the ids differ
    changed = {**one, "decision_state": {**one["decision_state"], "high_value": True}}
    assert memo_key(receiver, changed) != memo_key(receiver, one)
    assert memo_key(receiver, b"{}") is None
    assert receiver.request(one, PAYMENT_RELEASE) == receiver.request(other, PAYMENT_RELEASE)


def test_function_receivers_may_declare_what_they_read() -> None:
    checker = GovernanceChecker(PAYMENT_RELEASE, required=())
    reading = FunctionReceiver(lambda admitted: "RELEASE", gate=checker, name="f",
                               prompt="p", model_route="r", deterministic=True,
                               reads=("decision_state",))
    blind = FunctionReceiver(lambda admitted: "RELEASE", gate=checker, name="f",
                             prompt="p", model_route="r", deterministic=True)
    one, other = _receipt("routine-01"), _receipt("routine-02")
    # a declaration is used only with projection on (the run then checks it)
    assert memo_key(reading, one) is None
    assert memo_key(reading, one, projection=True) == memo_key(reading, other, projection=True)
    assert memo_key(reading, one, projection=True) != memo_key(
        reading, {**one, "decision_state": {}}, projection=True)
    assert memo_key(blind, one, projection=True) is None
    gated = FunctionReceiver(lambda admitted: "RELEASE", gate=payment_gate(), name="f",
                             prompt="p", model_route="r", deterministic=True,
                             reads=("case_id",))
    assert memo_key(gated, one, projection=True) != memo_key(gated, other, projection=True)


def test_retry_after_forms() -> None:
    assert retry_after("2") == 2.0
    assert retry_after(None) is None
    assert retry_after("soon") is None
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0


def _request(**changes: Any) -> ChatRequest:
    options: dict[str, Any] = {"model": "m", "messages": (("user", "hello"),)}
    options.update(changes)
    return ChatRequest(**options)


def test_a_request_body_is_its_json_and_a_changed_request_has_its_own() -> None:
    request = _request(response_format={"type": "json_object"})
    assert json.loads(request.body()) == request.to_json()
    assert request.body() is request.body()
    changed = attrs.evolve(request, response_format=None, seed=3)
    assert json.loads(changed.body()) == changed.to_json() != request.to_json()
    assert pickle.loads(pickle.dumps(changed)).body() == changed.body()  # noqa: S301 - our own object


def test_the_payment_policy_double_answers_like_the_contract() -> None:
    for case in synthetic_cases(1):
        receipt = _receipt(case.case_id)
        reply = payment_policy({"messages": [{"role": "user",
                                              "content": "x " + json.dumps(receipt)}]})
        answer = json.loads(reply[2]["choices"][0]["message"]["content"])["action"]
        assert answer == PAYMENT_RELEASE.decide(case.state()).value


def test_each_draw_of_a_sampled_receiver_is_its_own_request_and_records_its_index() -> None:
    with serving() as server:
        receiver = _receiver(server.url, temperature=0.7, seed=5)
        draws = [receiver.receive(_receipt(), sample=i) for i in range(3)]
        deterministic = _receiver(server.url).receive(_receipt())
    seeds = [body["seed"] for body in server.requests]
    assert seeds == [5, 6, 7, 0]  # a declared seed moves with the draw
    assert [d.record["sample"] for d in draws] == [0, 1, 2]
    assert "sample" not in deterministic.record
    assert "sample" not in server.requests[0]  # the index is not sent
    request = receiver.request(_receipt(), PAYMENT_RELEASE, sample=2)
    assert (request.sample, request.seed) == (2, 7)
    unseeded = _receiver(server.url, temperature=0.7, seed=None)
    assert unseeded.request(_receipt(), PAYMENT_RELEASE, sample=2).seed is None


def test_rule_on_is_the_second_half_of_receive() -> None:
    receiver = _receiver("http://127.0.0.1:9/v1")
    answer = completion(json.dumps({"action": "HOLD"}))["choices"][0]["message"]["content"]
    from handoffs.receivers.models import Completion

    ruling = receiver.rule_on(PAYMENT_RELEASE, Completion(content=answer, tokens_in=3))
    assert (ruling.action, ruling.verdict, ruling.reasons) == ("HOLD", Verdict.ACCEPT, ())
    assert ruling.record["tokens_in"] == 3
    failed = receiver.rule_on(PAYMENT_RELEASE, ModelTimeout("slow"))
    assert (failed.action, failed.verdict) == ("ESCALATE", Verdict.ESCALATE)
    assert [r.code for r in failed.reasons] == ["model-timeout"]
    crashed = receiver.rule_on(PAYMENT_RELEASE, RuntimeError("bug"))
    assert [r.code for r in crashed.reasons] == ["model-error"]
    bad = receiver.rule_on(PAYMENT_RELEASE, Completion(content='{"action": "PAY"}'))
    assert [r.code for r in bad.reasons] == ["invalid-action"]


def test_a_model_receiver_fingerprint_names_what_served_it() -> None:
    """Over real HTTP to the scripted chat server (a test double for a provider)."""
    from handoffs.lab._fingerprint import receiver_fingerprint

    with serving() as server:
        receiver = _receiver(server.url)
        before = receiver_fingerprint(receiver)
        try:
            decision = receiver.receive(_receipt())
        finally:
            receiver.client.close()  # type: ignore[attr-defined]
    assert before["served"] == []
    served = {k: v for k, v in decision.record["served_model"].items() if v}
    assert served["model"] == "scripted"
    assert served["server"].startswith("BaseHTTP/")
    after = receiver_fingerprint(receiver)
    assert after["served"] == [served]
    assert after["digest"] == before["digest"]  # observed, not declared
    assert (after["kind"], after["model_route"]) == ("model", "scripted/payment")
    import attrs

    warmer = attrs.evolve(receiver, temperature=0.5)
    assert receiver_fingerprint(warmer)["digest"] != before["digest"]
