"""Lab report rendering in a fresh interpreter: Markdown without the report extra, and
the same HTML bytes under another hash seed (the in-process tests are in
``tests/unit/test_render.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from handoffs.lab.reports import render_html
from worlds.reports import SAMPLE, payment_report


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return payment_report()


@pytest.fixture(scope="module")
def html(report: dict[str, Any]) -> str:
    return render_html(report)


def test_markdown_needs_no_extra() -> None:
    code = (
        "import json, sys\n"
        "sys.modules['jinja2'] = None\nsys.modules['matplotlib'] = None\n"
        "from handoffs.lab._render import render_markdown\n"
        f"report = json.loads(open({str(SAMPLE)!r}, encoding='utf-8').read())\n"
        "print(render_markdown(report).splitlines()[0])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert "PASS" in done.stdout


def test_html_is_deterministic(html: str, report: dict[str, Any], tmp_path: Path) -> None:
    assert render_html(report) == html
    # A fresh interpreter with another hash seed renders the same bytes.
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    code = (
        "import json, sys\nfrom handoffs.lab._render import render_html\n"
        f"sys.stdout.write(render_html(json.loads(open({str(path)!r}).read())))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True,
                          env={**os.environ, "PYTHONHASHSEED": "12345"})
    assert done.stdout.decode("utf-8") == html
