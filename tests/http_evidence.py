"""An evidence source over real HTTP on 127.0.0.1, serving the claims of
``test_gate``'s world (its fixture :func:`evidence_server`, its routes set by
:func:`_serve`), for the tests of ``HTTPEvidenceResolver`` and ``handoffs gate
--evidence``.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from email.utils import format_datetime
from typing import Any, ClassVar

import pytest

from worlds.gate import CASES, T0, evidence_for


class _EvidenceHandler(http.server.BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, tuple[int, dict[str, str], bytes]]] = {}

    def do_GET(self) -> None:
        status, headers, body = self.routes.get(self.path, (404, {}, b"not found"))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture(scope="module")
def evidence_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EvidenceHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def _serve(case_id: str, *, observed: datetime = T0 - timedelta(hours=1)) -> None:
    for uri, ev in evidence_for(CASES[case_id]).items():
        body = json.dumps({"uri": uri, "claims": dict(ev.claims or {})}).encode()
        _EvidenceHandler.routes["/" + uri.removeprefix("evidence://")] = (
            200, {"Content-Type": "application/json",
                  "Last-Modified": format_datetime(observed, usegmt=True)}, body)
