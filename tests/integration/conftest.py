"""Fixtures shared by tests/integration (the helpers themselves live in tests/)."""

from http_evidence import evidence_server  # noqa: F401 - the fixture of an HTTP evidence source
from test_decision_log import db  # noqa: F401 - the fixture of a decision log's path
