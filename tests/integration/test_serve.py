"""``handoffs serve``: real processes on 127.0.0.1, real HTTP (httpx), a real SQLite file
or PostgreSQL server, an evidence server over HTTP; configuration and metrics.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from handoffs.service import ConfigError, ServiceConfig
from serve_world import (
    CONTRACT_SPEC,
    evidence_asked,
    evidence_server,
    receipt,
    serving,
    set_evidence_delay,
    write_config,
)
from stores import PostgresServer, free_port

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

JSON = {"Content-Type": "application/json"}
ANY_ADDRESS = "0.0.0.0"  # noqa: S104 - beyond loopback, on purpose


def metric(text: str, name: str) -> float:
    """The value of one unlabelled sample (or the sum over a family's labels)."""
    total, found = 0.0, False
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            head, _, value = line.rpartition(" ")
            if head == name or head.startswith(name + "{"):
                total, found = total + float(value), True
    assert found, f"no sample {name}"
    return total


@pytest.fixture(scope="module")
def evidence() -> Any:
    with evidence_server() as url:
        yield url


# ---------------------------------------------------------------- configuration


def test_config_from_file_then_environment(tmp_path: Path) -> None:
    path = write_config(tmp_path, store="decisions.sqlite", evidence="http://127.0.0.1:1/")
    config = ServiceConfig.load(path, environ={"HANDOFFS_PORT": "9001",
                                        "HANDOFFS_POLICY_CURRENT": "PAY-7.5, PAY-7.4"})
    assert (config.identity, config.port, config.host) == ("case-owner", 9001, "127.0.0.1")
    assert config.trust == tmp_path / "trust.json"
    assert config.store_url == str(tmp_path / "decisions.sqlite")  # relative to the file
    assert config.policy_current == ("PAY-7.5", "PAY-7.4")
    assert config.policy_superseded == ("PAY-7.3",)
    assert config.evidence_routes == {"evidence://": "http://127.0.0.1:1/"}
    assert [c.id for c in config.registry()] == ["payment-release/1.0.0"]
    assert config.group_commit == 0.001  # the default: gather for 1 ms
    assert (config.header_timeout, config.max_connections,
            config.max_connections_per_address) == (5.0, 256, 32)
    flagged = ServiceConfig.load(path, environ={}, overrides={"store.url": "postgresql://u@h/db",
                                                       "store.group_commit_ms": "0"})
    assert (flagged.store_url, flagged.group_commit) == ("postgresql://u@h/db", 0.0)


@pytest.mark.parametrize(("text", "environ", "path", "match"), [
    ('identity = "x"\nbogus = 1\n', {}, "$.bogus", "unknown setting 'bogus'"),
    ('identity = "x"\ntrust = "t"\ncontracts = []\n', {}, "$.store.url",
     "'store.url' is required"),
    ('identity = "x"\n', {"HANDOFFS_TRUST": "t", "HANDOFFS_CONTRACTS": "a:b",
                          "HANDOFFS_STORE_URL": "s", "HANDOFFS_PORT": "70000"},
     "$.server.port", "expected an integer in"),
    ('identity = 3\ntrust = "t"\ncontracts = []\n[store]\nurl = "s"\n', {}, "$.identity",
     "expected a non-empty string"),
    ('identity = "x"\ntrust = "t"\ncontracts = "a:b"\n[store]\nurl = "s"\n', {},
     "$.contracts", "expected a list of strings"),
])
def test_bad_configuration_says_where(tmp_path: Path, text: str, environ: dict[str, str],
                                      path: str, match: str) -> None:
    file = tmp_path / "serve.toml"
    file.write_text(text, "utf-8")
    with pytest.raises(ConfigError, match=match) as info:
        ServiceConfig.load(file, environ=environ)
    assert info.value.json_path == path


@pytest.mark.parametrize(("table", "path", "match"), [
    ('name = "a"\ntoken_sha256 = "secret"\nreceivers = ["r"]\n',
     "$.auth.callers[0].token_sha256", "64 hex digits"),
    ('name = "a"\nreceivers = ["r"]\n', "$.auth.callers[0].token_sha256",
     "'token_sha256' is required"),
    (f'name = "a"\ntoken_sha256 = "{"0" * 64}"\nreceivers = ["r"]\nrate = 0\n',
     "$.auth.callers[0].rate", "expected a number >= 0.001"),
    (f'name = "a"\ntoken_sha256 = "{"0" * 64}"\nreceivers = "r"\n',
     "$.auth.callers[0].receivers", "expected a list of strings"),
    (f'name = "a"\ntoken_sha256 = "{"0" * 64}"\nreceivers = ["r"]\ntoken = "x"\n',
     "$.auth.callers[0].token", "unknown key 'token'"),
])
def test_bad_callers_say_where(tmp_path: Path, table: str, path: str, match: str) -> None:
    file = tmp_path / "serve.toml"
    file.write_text('identity = "x"\ntrust = "t"\ncontracts = ["a:b"]\n[store]\nurl = "s"\n'
                    f"[[auth.callers]]\n{table}", "utf-8")
    with pytest.raises(ConfigError, match=match) as info:
        ServiceConfig.load(file, environ={})
    assert info.value.json_path == path


def test_callers_load_hashed(tmp_path: Path) -> None:
    file = tmp_path / "serve.toml"
    digest = "AB" * 32
    file.write_text('identity = "x"\ntrust = "t"\ncontracts = ["a:b"]\n[store]\nurl = "s"\n'
                    f'[[auth.callers]]\nname = "a"\ntoken_sha256 = "{digest}"\n'
                    'receivers = ["x"]\nrate = 5\n', "utf-8")
    (caller,) = ServiceConfig.load(file, environ={}).callers
    assert (caller.token_sha256, caller.receivers, caller.rate, caller.burst) == (
        "ab" * 32, ("x",), 5.0, 16)


def test_contracts_that_do_not_load_are_config_errors(tmp_path: Path) -> None:
    base = {"HANDOFFS_IDENTITY": "x", "HANDOFFS_TRUST": "t", "HANDOFFS_STORE_URL": "s"}
    module = CONTRACT_SPEC.split(":")[0]
    for spec, why in [
        ("nocolon", "expected MODULE:ATTR, e.g. mymodule:MY_CONTRACT"),
        ("no.such.module:X", "cannot import 'no.such.module': ModuleNotFoundError: No module "
                             "named 'no'"),
        (f"{module}:NOTHING", f"{module} has no attribute 'NOTHING'"),
        (f"{module}:__name__", "__name__ is a str, not a Contract, a Registry or an iterable "
                               "of contracts"),
    ]:
        config = ServiceConfig.load(None, environ={**base, "HANDOFFS_CONTRACTS": spec})
        with pytest.raises(ConfigError) as info:
            config.registry()
        assert str(info.value) == (f"contract source {spec!r} (the service's contracts): "
                                   f"{why} @ $.contracts")
        assert info.value.code == "bad-config"


def test_contracts_import_from_the_working_directory(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """As on the command line: a module beside the service, without PYTHONPATH."""
    source = Path(__file__).parents[1] / "user_contract" / "mymodule.py"
    (tmp_path / "serve_user_contract.py").write_text(source.read_text("utf-8"), "utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    config = ServiceConfig.load(None, environ={"HANDOFFS_IDENTITY": "x", "HANDOFFS_TRUST": "t",
                                        "HANDOFFS_STORE_URL": "s",
                                        "HANDOFFS_CONTRACTS": "serve_user_contract:MY_CONTRACT"})
    assert [c.id for c in config.registry()] == ["pump-maintenance/1.0.0"]


# -------------------------------------------------------------- a real service


def test_one_service_on_sqlite(tmp_path: Path, evidence: str) -> None:
    config = write_config(tmp_path, store="decisions.sqlite", evidence=evidence, readback=1,
                          extra="log_decisions = true\n")
    genuine = receipt("routine-01")
    with serving(config) as served, httpx.Client(base_url=served.url, timeout=30,
                                                 headers=JSON) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/readyz").status_code == 200
        first = client.post("/receipts", content=genuine)
        assert first.status_code == 200
        assert first.headers["content-type"] == "application/json"
        assert (first.json()["verdict"], first.json()["readback"]) == ("ACCEPT", "agree")
        again = client.post("/receipts", content=genuine)
        assert again.status_code == 422
        assert [r["code"] for r in again.json()["reasons"]] == ["replayed"], again.text
        garbage = client.post("/receipts", content=b"{oops")
        assert (garbage.status_code, garbage.json()["verdict"]) == (422, "REJECT")
        huge = client.post("/receipts", content=b" " * 70_000)
        assert (huge.status_code, huge.json()["error"]) == (413, "too-large")

        def chunks() -> Any:  # no Content-Length: the limit applies while reading
            for _ in range(70):
                yield b" " * 1000

        streamed = client.post("/receipts", content=chunks())
        assert streamed.status_code == 413
        assert client.get("/receipts").status_code == 405
        text = client.get("/metrics").text
        assert metric(text, "handoffs_decisions_total") == 3
        assert metric(text, "handoffs_replays_total") == 1
        assert metric(text, "handoffs_oversize_requests_total") == 2
        assert metric(text, "handoffs_readback_total") == 1
        assert metric(text, "handoffs_counterfactual_triggers_total") == 1
        assert metric(text, "handoffs_message_bytes_count") == 3
        assert metric(text, "handoffs_message_bytes_sum") == 2 * len(genuine) + 5
        assert metric(text, 'handoffs_refusal_reasons_total{code="replayed"}') == 1
        decisions = served.events("decision", wait=5)
        assert [(d["status"], d["verdict"]) for d in decisions] == [
            (200, "ACCEPT"), (422, "REJECT"), (422, "REJECT")]
        assert decisions[0]["receipt_id"] == first.json()["receipt_id"]
        assert served.stop() == 0
        assert served.events("stopped", wait=5)
    assert [e["event"] for e in served.seen if e["event"] in {"stopping", "stopped"}] == [
        "stopping", "stopped"]


def test_a_store_that_does_not_answer_gives_503(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/none"
    config = write_config(tmp_path, store=url, evidence=None)
    with serving(config) as served, httpx.Client(base_url=served.url, timeout=30,
                                                 headers=JSON) as client:
        assert client.get("/healthz").status_code == 200
        ready = client.get("/readyz")
        assert (ready.status_code, ready.json()) == (
            503, {"status": "unavailable", "reason": "store unavailable"})
        refused = client.post("/receipts", content=receipt())
        assert (refused.status_code, refused.headers["retry-after"]) == (503, "1")
        assert refused.json()["reasons"][-1] == {
            "code": "log-unavailable", "message": "store unavailable", "step": 3,
            "json_path": "$"}
        port = str(urlsplit(url).port)
        assert port not in ready.text + refused.text  # the details only in the log
        assert port in str(served.events("store-unavailable", wait=5)[0]["reasons"])
        assert port in served.events("not-ready", wait=5)[0]["detail"]
        text = client.get("/metrics").text
        assert metric(text, "handoffs_store_unavailable_total") == 1


def test_graceful_shutdown_finishes_the_request_in_flight(tmp_path: Path, evidence: str) -> None:
    config = write_config(tmp_path, store="decisions.sqlite", evidence=evidence,
                          extra="log_decisions = true\n")
    answers: list[httpx.Response] = []
    with serving(config) as served:
        set_evidence_delay(1.5)
        try:
            def send() -> None:
                with httpx.Client(timeout=30, headers=JSON) as client:
                    answers.append(client.post(served.url + "/receipts", content=receipt()))

            sender = threading.Thread(target=send)
            sender.start()
            # the gate is inside the request (waiting for its evidence) before the signal
            assert evidence_asked(timeout=30)
            assert served.events("non-json") == []
            assert served.stop(signal.SIGTERM) == 0
            sender.join(timeout=30)
        finally:
            set_evidence_delay(0)
    assert [a.status_code for a in answers] == [200]
    assert served.events("decision")[0]["verdict"] == "ACCEPT"


def test_replicas_on_one_postgresql_admit_a_receipt_once(
    tmp_path: Path, evidence: str, postgres: PostgresServer
) -> None:
    url = postgres.create_database("replicas")
    config = write_config(tmp_path, store=url, evidence=evidence)
    genuine = [receipt(case) for case in ("routine-01", "policy-01", "value-02")]
    with serving(config) as one, serving(config) as two:
        statuses: list[int] = []

        def blast(base: str) -> None:
            with httpx.Client(base_url=base, timeout=30, headers=JSON) as client:
                statuses.extend(client.post("/receipts", content=m).status_code
                                for m in genuine)

        threads = [threading.Thread(target=blast, args=(s.url,)) for s in (one, two, one, two)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert sorted(statuses) == [200] * 3 + [422] * 9
        with httpx.Client(base_url=one.url) as client:
            assert client.get("/readyz").status_code == 200
    from handoffs.service import open_store

    with open_store(url) as store:
        summary = store.summary()
    assert (summary.decisions, summary.by_verdict["ACCEPT"], summary.replays) == (12, 3, 9)


def test_serve_refuses_a_bad_configuration(tmp_path: Path) -> None:
    import subprocess

    from serve_world import HANDOFFS

    config = write_config(tmp_path, store="decisions.sqlite", evidence=None)
    (tmp_path / "trust.json").write_text("{}", "utf-8")
    result = subprocess.run([HANDOFFS, "serve", "--config", str(config)], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert result.stderr.startswith("error: bad trust file")


def test_opentelemetry_metrics_and_one_span_per_decision() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from handoffs.service._metrics import BoundaryMetrics
    from worlds.gate import WORLD, raw, strict

    reader, exporter = InMemoryMetricReader(), InMemorySpanExporter()
    tracers = TracerProvider()
    tracers.add_span_processor(SimpleSpanProcessor(exporter))
    metrics = BoundaryMetrics(otel=True, meter_provider=MeterProvider(metric_readers=[reader]),
                              tracer_provider=tracers)
    receiver = strict(WORLD.gate())
    genuine = raw(WORLD.signed("routine-01"))
    for message in (genuine, genuine, b"{oops"):
        with metrics.span(receiver.name) as attributes:
            decision = receiver.receive(message)
            attributes.update(metrics.observe(decision, message_bytes=len(message),
                                              seconds=0.001))
    spans = exporter.get_finished_spans()
    assert [span.name for span in spans] == ["handoffs.decide"] * 3
    assert [span.attributes["handoffs.verdict"] for span in spans] == [
        "ACCEPT", "REJECT", "REJECT"]
    assert spans[1].attributes["handoffs.reasons"] == ("replayed",)
    assert spans[0].attributes["handoffs.reasons"] == ()
    points = {metric.name: metric.data.data_points
              for resource in reader.get_metrics_data().resource_metrics
              for scope in resource.scope_metrics for metric in scope.metrics}
    assert sum(p.value for p in points["handoffs.decisions"]) == 3
    assert sum(p.value for p in points["handoffs.replays"]) == 1
    assert next(iter(points["handoffs.message_bytes"])).sum == 2 * len(genuine) + 5
    durations = points["handoffs.decision.duration"]
    assert sum(p.count for p in durations) == 3
    assert sum(p.sum for p in durations) == pytest.approx(0.003)
    assert {p.attributes["verdict"] for p in durations} == {"ACCEPT", "REJECT"}
    assert metric(metrics.exposition().decode(), "handoffs_decisions_total") == 3


def test_a_span_that_does_not_record_builds_no_attributes() -> None:
    """Sampled out, or on the API's proxy provider (no SDK): no attributes are built,
    and the decision is counted all the same."""
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    from handoffs.service._metrics import BoundaryMetrics
    from worlds.gate import WORLD, raw, strict

    metrics = BoundaryMetrics(otel=True, tracer_provider=TracerProvider(sampler=ALWAYS_OFF))
    receiver = strict(WORLD.gate())
    with metrics.span(receiver.name) as attributes:
        decision = receiver.receive(raw(WORLD.signed("routine-01")))
        observed = metrics.observe(decision, message_bytes=10, seconds=0.001,
                                   attributes=attributes is not None)
    assert (attributes, observed) == (None, {})
    assert metric(metrics.exposition().decode(), "handoffs_decisions_total") == 1
    assert metrics.observe(decision, message_bytes=10, seconds=0.001)[
        "handoffs.verdict"] == decision.verdict.value


def test_the_application_mounted_under_a_prefix_still_gates(tmp_path: Path,
                                                           evidence: str) -> None:
    """POST /receipts skips Starlette's router only at the root; mounted, it is routed."""
    from starlette.applications import Starlette
    from starlette.routing import Mount
    from starlette.testclient import TestClient

    from handoffs.service import Service

    service = Service(ServiceConfig.load(write_config(tmp_path, store="d.sqlite",
                                                      evidence=evidence)))
    outer = Starlette(routes=[Mount("/gate", app=service.app())])
    genuine = receipt("routine-01")
    with TestClient(outer) as client:
        answer = client.post("/gate/receipts", content=genuine, headers=JSON)
        assert (answer.status_code, answer.json()["verdict"]) == (200, "ACCEPT")
        assert client.post("/gate/receipts", content=receipt("routine-01"),
                           headers={"Content-Type": "text/plain"}).status_code == 415
        assert client.get("/gate/receipts").status_code == 405
    with TestClient(service.app()) as client:
        again = client.post("/receipts", content=genuine, headers=JSON)
        assert [r["code"] for r in again.json()["reasons"]] == ["replayed"], again.text
    service.store.close()


def test_the_gate_threads_answer_results_errors_and_cancelled_calls() -> None:
    """One thread while calls come one at a time; at most ``size`` under concurrency;
    an exception reaches the awaiting request; a cancelled call leaves its thread free.
    """
    import asyncio

    from handoffs.service._app import _Workers

    gate = threading.Event()

    def fail() -> None:
        raise LookupError("boom")

    async def scenario() -> None:
        workers = _Workers(3, "test-gate")
        assert [await workers.run(pow, 2, n) for n in range(5)] == [1, 2, 4, 8, 16]
        assert workers._threads == 1
        with pytest.raises(LookupError, match="boom"):
            await workers.run(fail)
        waiting = [workers.run(gate.wait, 30) for _ in range(5)]
        await asyncio.sleep(0.05)
        assert workers._threads == 3
        waiting[0].cancel()
        gate.set()
        assert await asyncio.gather(*waiting[1:]) == [True] * 4
        assert await workers.run(len, "four") == 4

    asyncio.run(scenario())


def test_a_decision_other_than_the_proposal_is_counted() -> None:
    """handoffs gate's exit 3 as a metric: accepted, but not the proposal."""
    from handoffs.receivers import Decision, Step, Verdict
    from handoffs.service._metrics import BoundaryMetrics

    metrics = BoundaryMetrics(otel=False)
    for agrees in (True, False, False):
        metrics.observe(Decision(verdict=Verdict.ACCEPT, action="HOLD", step=Step.POLICY,
                                 receiver="strict-contract",
                                 record={"agrees_with_proposal": agrees}),
                        message_bytes=100, seconds=0.001)
    metrics.observe(Decision(verdict=Verdict.ESCALATE, action="ESCALATE", step=Step.POLICY),
                    message_bytes=100, seconds=0.001)
    assert metric(metrics.exposition().decode(), "handoffs_decided_otherwise_total") == 2


def test_importing_the_service_loads_no_optional_library() -> None:
    import json as json_module
    import subprocess
    import sys

    probe = ("import handoffs.service, handoffs.service.postgres, handoffs.cli, sys, json\n"
             "heavy = ('starlette', 'uvicorn', 'prometheus_client', 'psycopg', 'psycopg_pool',"
             " 'opentelemetry', 'httpx')\n"
             "print(json.dumps(sorted(m for m in sys.modules"
             " if m.split('.')[0] in heavy)))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, check=True)
    assert json_module.loads(done.stdout) == []


# ------------------------------------------------------ callers, limits, faults

TOKEN, OTHER_TOKEN = "s3cret-case-owner-token", "s3cret-other-receiver-token"


def _callers(rate: str = "") -> str:
    import hashlib

    def digest(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    return (f'\n[[auth.callers]]\nname = "payments"\ntoken_sha256 = "{digest(TOKEN)}"\n'
            f'receivers = ["case-owner"]\n{rate}'
            f'\n[[auth.callers]]\nname = "elsewhere"\ntoken_sha256 = "{digest(OTHER_TOKEN)}"\n'
            'receivers = ["someone-else"]\n')


def test_callers_are_authenticated_and_bound_to_the_receiver(tmp_path: Path,
                                                             evidence: str) -> None:
    config = write_config(tmp_path, store="decisions.sqlite", evidence=evidence,
                          extra=_callers('rate = 0.001\nburst = 2\n'))
    genuine = receipt("routine-01")
    with serving(config) as served, httpx.Client(base_url=served.url, timeout=30,
                                                 headers=JSON) as client:
        anonymous = client.post("/receipts", content=genuine)
        assert (anonymous.status_code, anonymous.json()["error"]) == (401, "unauthenticated")
        assert anonymous.headers["www-authenticate"].startswith("Bearer")
        wrong = client.post("/receipts", content=genuine,
                            headers={"Authorization": f"Bearer {TOKEN}x"})
        assert (wrong.status_code, wrong.json()["error"]) == (401, "unauthenticated")
        for scheme in ("Basic", "Token", "Bearer-ish", "Digest"):  # the right token, no Bearer
            other_scheme = client.post("/receipts", content=genuine,
                                       headers={"Authorization": f"{scheme} {TOKEN}"})
            assert (other_scheme.status_code, other_scheme.json()["error"]) == (
                401, "unauthenticated"), scheme
        # Two Authorization headers (a valid one among them): which counts is
        # ambiguous, so neither does.
        for pair in ((f"Bearer {TOKEN}", f"Bearer {TOKEN}"), (f"Bearer {TOKEN}", "Bearer x"),
                     ("Bearer x", f"Bearer {TOKEN}")):
            twice = client.post("/receipts", content=genuine, headers=[
                ("Authorization", pair[0]), ("Authorization", pair[1])])
            assert (twice.status_code, twice.json()["error"]) == (400, "repeated-header")
        other = client.post("/receipts", content=genuine,
                            headers={"Authorization": f"Bearer {OTHER_TOKEN}"})
        assert (other.status_code, other.json()["error"]) == (403, "forbidden")
        # None of these reached the gate: the genuine receipt's id is still unspent.
        owner = {"Authorization": f"Bearer {TOKEN}"}
        first = client.post("/receipts", content=genuine, headers=owner)
        assert (first.status_code, first.json()["verdict"]) == (200, "ACCEPT")
        again = client.post("/receipts", content=genuine, headers=owner)
        assert [r["code"] for r in again.json()["reasons"]] == ["replayed"], again.text
        assert again.json()["earlier"]["admitted"] is True
        # Burst 2, then 0.001 receipts per second: the third is over the rate.
        limited = client.post("/receipts", content=genuine, headers=owner)
        assert (limited.status_code, limited.json()["error"]) == (429, "rate-limited")
        assert int(limited.headers["retry-after"]) >= 1
        text = client.get("/metrics").text
        assert metric(text, "handoffs_decisions_total") == 2
        assert metric(text, 'handoffs_refused_requests_total{reason="unauthenticated"}') == 6
        assert metric(text, 'handoffs_refused_requests_total{reason="repeated-header"}') == 3
        assert metric(text, 'handoffs_refused_requests_total{reason="forbidden"}') == 1
        assert metric(text, 'handoffs_refused_requests_total{reason="rate-limited"}') == 1


def test_only_json_bodies_are_gated(tmp_path: Path, evidence: str) -> None:
    config = write_config(tmp_path, store="decisions.sqlite", evidence=evidence)
    genuine = receipt("routine-01")
    with serving(config) as served, httpx.Client(base_url=served.url, timeout=30) as client:
        for content_type in (None, "text/plain", "application/x-www-form-urlencoded",
                             "text/json", "application/receipt+json",
                             "application/json; charset=latin-1", "application/jsonx"):
            headers = {"Content-Type": content_type} if content_type else {}
            answer = client.post("/receipts", content=genuine, headers=headers)
            assert (answer.status_code, answer.json()["error"]) == (
                415, "unsupported-media-type"), content_type
        for content_type in ("application/json; charset=utf-8", "Application/JSON"):
            answer = client.post("/receipts", content=b"{oops",
                                 headers={"Content-Type": content_type})
            assert answer.status_code == 422
        admitted = client.post("/receipts", content=genuine, headers=JSON)
        assert admitted.status_code == 200  # the refused posts spent nothing


def test_a_body_not_sent_in_time_is_refused_and_the_connection_closed(tmp_path: Path) -> None:
    import socket

    config = write_config(tmp_path, store="decisions.sqlite", evidence=None,
                          extra="body_timeout = 0.5\n")
    with serving(config) as served, socket.create_connection(("127.0.0.1", served.port),
                                                             timeout=30) as sock:
        sock.sendall(b"POST /receipts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                     b"\r\nContent-Length: 1000\r\n\r\n{\"half\":")
        answer = b""
        while chunk := sock.recv(65536):  # read to the end: the server closes
            answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408 ")
        assert b'"error":"body-timeout"' in body


def test_serve_binds_beyond_loopback_only_with_auth_or_insecure(tmp_path: Path) -> None:
    import subprocess

    from serve_world import HANDOFFS

    config = write_config(tmp_path, store="decisions.sqlite", evidence=None)
    refused = subprocess.run([HANDOFFS, "serve", "--config", str(config), "--host", ANY_ADDRESS],
                             capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 2
    assert "refusing to listen on 0.0.0.0 without authentication" in refused.stderr
    with serving(config, args=("--host", ANY_ADDRESS, "--insecure")) as served:
        assert served.events("insecure", wait=5)
    authenticated = write_config(tmp_path, store="decisions.sqlite", evidence=None,
                                 extra=_callers())
    with serving(authenticated, args=("--host", ANY_ADDRESS)) as served:
        assert served.events("listening")[0]["authenticated"] is True


def test_a_stalled_postgresql_answers_503_and_admits_nothing(
    tmp_path: Path, postgres: PostgresServer, evidence: str
) -> None:
    """Every server process stopped (SIGSTOP): each request and /readyz answer 503
    (the store's timeout cuts the call); nothing is admitted; after the thaw, all is well.
    """
    url = postgres.create_database("stall_http")
    config = write_config(tmp_path, store=url, evidence=evidence)  # store timeout: 2 s
    genuine = [receipt(case) for case in ("routine-01", "value-01", "policy-01")]
    with serving(config) as served, httpx.Client(base_url=served.url, timeout=60,
                                                 headers=JSON) as client:
        assert client.get("/readyz").status_code == 200
        answers: list[httpx.Response] = []
        with postgres.stalled():
            def send(message: bytes) -> None:
                with httpx.Client(timeout=60, headers=JSON) as own:
                    answers.append(own.post(served.url + "/receipts", content=message))

            threads = [threading.Thread(target=send, args=(m,)) for m in genuine]
            for thread in threads:
                thread.start()
            ready = client.get("/readyz")
            for thread in threads:
                thread.join(timeout=60)
        assert (ready.status_code, ready.json()["reason"]) == (503, "store unavailable")
        assert [a.status_code for a in answers] == [503] * 3
        for _ in range(100):  # ready again soon after the thaw
            if client.get("/readyz").status_code == 200:
                break
            time.sleep(0.1)
        after = [client.post("/receipts", content=m).status_code for m in genuine]
    from handoffs.service import open_store

    with open_store(url) as store:
        admitted = [r for r in store.rows() if r["verdict"] != "REJECT"]
    # A statement cut while the server was stopped may still commit on the thaw (its
    # id is then spent: the re-send is refused as a replay): each receipt is admitted
    # exactly once, never twice.
    assert sorted(r["receipt_id"] for r in admitted) == sorted(
        {r["receipt_id"] for r in admitted})
    assert len(admitted) == 3
    assert set(after) <= {200, 422}


def _read_to_close(sock: Any) -> bytes:
    answer = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_connections_above_the_cap_get_503_and_silent_ones_408(tmp_path: Path) -> None:
    import socket

    config = write_config(tmp_path, store="decisions.sqlite", evidence=None,
                          extra="max_connections = 2\nheader_timeout = 1\n")
    with serving(config) as served, contextlib.ExitStack() as held:
        address = ("127.0.0.1", served.port)
        silent = [held.enter_context(socket.create_connection(address, timeout=30))
                  for _ in range(2)]  # two silent connections fill the cap
        with socket.create_connection(address, timeout=30) as third:
            head = _read_to_close(third).partition(b"\r\n")[0]
            assert head == b"HTTP/1.1 503 Service Unavailable"
        for sock in silent:  # no request head within header_timeout: 408, closed
            answer = _read_to_close(sock)
            assert answer.startswith(b"HTTP/1.1 408 ")
            assert b'"error":"header-timeout"' in answer
        # A head sent a byte at a time never completes in time either (slowloris).
        with socket.create_connection(address, timeout=30) as slow:
            slow.sendall(b"GET /healthz HTTP/1.1\r\n")
            assert _read_to_close(slow).startswith(b"HTTP/1.1 408 ")
        # On a kept-alive connection, the next request's head is timed from its first byte.
        with socket.create_connection(address, timeout=30) as kept:
            kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            first = b""
            while b'"ok"}' not in first:
                first += kept.recv(4096)
            assert first.startswith(b"HTTP/1.1 200 ")
            kept.sendall(b"GET /healthz HTTP/1.1\r\n")
            assert _read_to_close(kept).startswith(b"HTTP/1.1 408 ")
        with httpx.Client(base_url=served.url, timeout=30) as client:
            assert client.get("/healthz").status_code == 200
            time.sleep(1.5)  # kept alive past header_timeout: idle is not a late head
            assert client.get("/healthz").status_code == 200
            text = client.get("/metrics").text
        assert metric(text, 'handoffs_refused_requests_total{reason="header-timeout"}') == 4
        assert metric(
            text, 'handoffs_refused_requests_total{reason="too-many-connections"}') == 1


def _authenticated(url: str, body: bytes, *, source: str = "127.0.0.1") -> httpx.Response:
    """One authenticated POST on a fresh connection from ``source``."""
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(base_url=url, timeout=30, transport=transport, headers={
            **JSON, "Authorization": f"Bearer {TOKEN}"}) as client:
        return client.post("/receipts", content=body)


def test_silent_sockets_cannot_hold_an_authenticated_request(tmp_path: Path) -> None:
    """2 × max_connections silent sockets from one address: an authenticated request
    from another address is answered at once, and one from the same address (retrying
    as a client does on 503 or a closed connection) within header_timeout + 1 s.
    """
    import socket

    header_timeout = 1.0
    config = write_config(tmp_path, store="decisions.sqlite", evidence=None, extra=(
        f"max_connections = 8\nmax_connections_per_address = 4\n"
        f"header_timeout = {header_timeout}\n{_callers()}"))
    with serving(config) as served, contextlib.ExitStack() as held:
        address = ("127.0.0.1", served.port)
        for _ in range(16):
            held.enter_context(socket.create_connection(address, timeout=30))
        time.sleep(0.2)  # the server has accepted (and refused) them all
        started = time.monotonic()
        other = _authenticated(served.url, receipt("routine-01"), source="127.0.0.2")
        assert other.status_code == 200
        assert time.monotonic() - started < 1.0
        started = time.monotonic()
        while True:
            try:
                same = _authenticated(served.url, receipt("value-01"))
            except httpx.TransportError:  # closed by the guard before it answered
                same = None
            waited = time.monotonic() - started
            if same is not None and same.status_code != 503:
                break
            assert waited <= header_timeout + 1, "still refused"
            time.sleep(0.05)
        assert same.status_code == 200
        assert waited <= header_timeout + 1
