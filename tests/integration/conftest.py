"""Fixtures shared by tests/integration (the helpers themselves live in tests/)."""

from pathlib import Path

import pytest

from http_evidence import evidence_server  # noqa: F401 - the fixture of an HTTP evidence source


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A decision log's path (a SQLite file not yet created)."""
    return str(tmp_path / "decisions.sqlite")
