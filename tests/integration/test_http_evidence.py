"""``HTTPEvidenceResolver`` against an evidence source over real HTTP on 127.0.0.1
(:mod:`http_evidence`)."""

from __future__ import annotations

import socket
from datetime import timedelta
from typing import Any

import pytest

from handoffs.receivers import HTTPEvidenceResolver, Verdict
from handoffs.receivers._services import EvidenceError
from http_evidence import _EvidenceHandler, _serve
from worlds.gate import T0, WORLD, codes, raw, strict
from worlds.gate import ref as _ref


def test_http_evidence_resolver_over_real_http(evidence_server: str) -> None:
    _serve("conflict-03")
    resolver = HTTPEvidenceResolver(routes={"evidence://": evidence_server + "/"})
    gate = WORLD.gate(evidence=resolver, readback=1.0)
    decision = strict(gate).receive(raw(WORLD.signed("conflict-03")))
    assert (decision.verdict, decision.action, decision.readback) == (
        Verdict.ACCEPT, "ESCALATE", "agree")
    found = resolver.resolve(_ref("evidence://conflict/3/policy"))
    assert found.observed_at == T0 - timedelta(hours=1)
    assert found.claims == {"policy_current": True, "evidence_conflict": True,
                            "high_value": False}


def test_http_readback_catches_a_lie(evidence_server: str) -> None:
    _serve("policy-02")
    gate = WORLD.gate(evidence=HTTPEvidenceResolver(routes={"evidence://": evidence_server}),
                      readback=1.0)
    lie = WORLD.signed("policy-02", state={"policy_current": True},
                       mutate=lambda d: d.update(proposed_action="RELEASE"))
    decision = strict(gate).receive(raw(lie))
    assert (decision.verdict, codes(decision)) == (Verdict.REJECT, ["readback-mismatch"])


@pytest.mark.parametrize(
    ("path", "response", "match"),
    [
        ("/missing/1/x", None, "HTTP 404"),
        ("/moved/1/x", (302, {"Location": "http://example.invalid/"}, b""), "HTTP 302"),
        ("/huge/1/x", (200, {}, b"x" * 2048), "more than 1024 bytes"),
        ("/badjson/1/x", (200, {"Content-Type": "application/json"}, b"{"), "malformed JSON"),
        ("/badtime/1/x", (200, {"Last-Modified": "yesterday"}, b"ok"), "bad Last-Modified"),
    ],
)
def test_http_evidence_failures_are_evidence_errors(
    evidence_server: str, path: str, response: Any, match: str
) -> None:
    if response is not None:
        _EvidenceHandler.routes[path] = response
    resolver = HTTPEvidenceResolver(routes={"evidence://": evidence_server}, max_bytes=1024)
    with pytest.raises(EvidenceError, match=match) as info:
        resolver.resolve(_ref("evidence:/" + path))
    assert info.value.code == "evidence-unresolved"


def test_http_resolver_fetches_configured_routes_only(evidence_server: str) -> None:
    resolver = HTTPEvidenceResolver(routes={"evidence://a/": evidence_server + "/base",
                                            "evidence://a/b/": evidence_server + "/deeper"})
    assert resolver.url_for("evidence://a/b/c d") == evidence_server + "/deeper/c%20d"
    assert resolver.url_for("evidence://a/x") == evidence_server + "/base/x"
    with pytest.raises(EvidenceError, match="no evidence route"):
        resolver.resolve(_ref("https://attacker.example/steal"))
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    unreachable = HTTPEvidenceResolver(routes={"evidence://": f"http://127.0.0.1:{closed_port}"},
                                       timeout=0.5)
    with pytest.raises(EvidenceError, match="failed"):
        unreachable.resolve(_ref("evidence://x/1/y"))
    with pytest.raises(ValueError, match="http"):
        HTTPEvidenceResolver(routes={"evidence://": "file:///etc/"})
    with pytest.raises(TypeError, match="routes"):
        HTTPEvidenceResolver(routes={})
    with pytest.raises(ValueError, match="timeout"):
        HTTPEvidenceResolver(routes={"e://": "http://h/"}, timeout=0)
