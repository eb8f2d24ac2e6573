"""``handoffs serve``: real processes on 127.0.0.1, real HTTP (httpx), a real SQLite file
or PostgreSQL server, an evidence server over HTTP; configuration and metrics.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from handoffs.service._config import ConfigError, load_config
from serve_world import (
    CONTRACT_SPEC,
    evidence_server,
    receipt,
    serving,
    set_evidence_delay,
    write_config,
)
from stores import PostgresServer, free_port

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")


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
    config = load_config(path, environ={"HANDOFFS_PORT": "9001",
                                        "HANDOFFS_POLICY_CURRENT": "PAY-7.5, PAY-7.4"})
    assert (config.identity, config.port, config.host) == ("case-owner", 9001, "127.0.0.1")
    assert config.trust == tmp_path / "trust.json"
    assert config.store_url == str(tmp_path / "decisions.sqlite")  # relative to the file
    assert config.policy_current == ("PAY-7.5", "PAY-7.4")
    assert config.policy_superseded == ("PAY-7.3",)
    assert config.evidence_routes == {"evidence://": "http://127.0.0.1:1/"}
    assert [c.id for c in config.registry()] == ["payment-release/1.0.0"]
    flagged = load_config(path, environ={}, overrides={"store.url": "postgresql://u@h/db"})
    assert flagged.store_url == "postgresql://u@h/db"


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
        load_config(file, environ=environ)
    assert info.value.json_path == path


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
        config = load_config(None, environ={**base, "HANDOFFS_CONTRACTS": spec})
        with pytest.raises(ConfigError) as info:
            config.registry()
        assert str(info.value) == (f"contract source {spec!r} (the service's contracts): "
                                   f"{why} @ $.contracts")
        assert info.value.code == "bad-config"


def test_contracts_import_from_the_working_directory(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """As on the command line: a module beside the service, without PYTHONPATH."""
    source = Path(__file__).parent / "user_contract" / "mymodule.py"
    (tmp_path / "serve_user_contract.py").write_text(source.read_text("utf-8"), "utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    config = load_config(None, environ={"HANDOFFS_IDENTITY": "x", "HANDOFFS_TRUST": "t",
                                        "HANDOFFS_STORE_URL": "s",
                                        "HANDOFFS_CONTRACTS": "serve_user_contract:MY_CONTRACT"})
    assert [c.id for c in config.registry()] == ["pump-maintenance/1.0.0"]


# -------------------------------------------------------------- a real service


def test_one_service_on_sqlite(tmp_path: Path, evidence: str) -> None:
    config = write_config(tmp_path, store="decisions.sqlite", evidence=evidence, readback=1)
    genuine = receipt("routine-01")
    with serving(config) as served, httpx.Client(base_url=served.url, timeout=30) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/readyz").status_code == 200
        first = client.post("/receipts", content=genuine)
        assert first.status_code == 200
        assert first.headers["content-type"] == "application/json"
        assert (first.json()["verdict"], first.json()["readback"]) == ("ACCEPT", "agree")
        again = client.post("/receipts", content=genuine)
        assert again.status_code == 422
        assert [r["code"] for r in again.json()["reasons"]] == ["replayed"]
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
    with serving(config) as served, httpx.Client(base_url=served.url, timeout=30) as client:
        assert client.get("/healthz").status_code == 200
        ready = client.get("/readyz")
        assert (ready.status_code, ready.json()["status"]) == (503, "unavailable")
        refused = client.post("/receipts", content=receipt())
        assert (refused.status_code, refused.headers["retry-after"]) == (503, "1")
        assert [r["code"] for r in refused.json()["reasons"]] == [
            "replay-store-unavailable", "log-unavailable"]
        text = client.get("/metrics").text
        assert metric(text, "handoffs_store_unavailable_total") == 1


def test_graceful_shutdown_finishes_the_request_in_flight(tmp_path: Path, evidence: str) -> None:
    config = write_config(tmp_path, store="decisions.sqlite", evidence=evidence)
    answers: list[httpx.Response] = []
    with serving(config) as served:
        set_evidence_delay(1.5)
        try:
            def send() -> None:
                with httpx.Client(timeout=30) as client:
                    answers.append(client.post(served.url + "/receipts", content=receipt()))

            sender = threading.Thread(target=send)
            sender.start()
            assert served.events("non-json", wait=0.8) == []
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
            with httpx.Client(base_url=base, timeout=30) as client:
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
    from test_gate import WORLD, raw, strict

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
    assert spans[1].attributes["handoffs.reasons"] == "replayed"
    points = {metric.name: metric.data.data_points
              for resource in reader.get_metrics_data().resource_metrics
              for scope in resource.scope_metrics for metric in scope.metrics}
    assert sum(p.value for p in points["handoffs.decisions"]) == 3
    assert sum(p.value for p in points["handoffs.replays"]) == 1
    assert next(iter(points["handoffs.message_bytes"])).sum == 2 * len(genuine) + 5
    assert metric(metrics.exposition().decode(), "handoffs_decisions_total") == 3


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
