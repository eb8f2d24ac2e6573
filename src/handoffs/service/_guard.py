"""What a connection may hold before it has sent a request: the service's connection guard.

Uvicorn reads a request head for as long as the client likes and counts every open
connection against its concurrency limit before a byte is read, so a few silent sockets
could make every request answer 503. :func:`guarded_protocol` wraps uvicorn's HTTP
protocol class (httptools or h11, whichever uvicorn picked) with three rules:

- **header timeout**: a connection that has not sent a complete request head within
  ``header_timeout`` seconds of opening (or of the first byte of its next request on a
  kept-alive connection) is answered 408 and closed;
- **per-address cap**: one client address holds at most ``max_connections_per_address``
  connections; a connection above it is answered 503 and closed at once;
- **total cap**: at most ``max_connections`` connections are open; a connection above
  it is answered 503 and closed at once (the requests in flight are never refused for
  connections that have sent nothing).

Idle kept-alive connections are closed by uvicorn's keep-alive timeout. Everything here
runs on the event loop thread: the counts need no lock.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any, Final

__all__ = ["guarded_protocol"]


def _answer(status: bytes, error: str, message: str) -> bytes:
    body = (b'{"error":"' + error.encode() + b'","message":"' + message.encode() + b'"}\n')
    return (b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\n"
            b"connection: close\r\nretry-after: 1\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


_TOO_MANY: Final = _answer(b"503 Service Unavailable", "too-many-connections",
                           "too many connections are open; retry")
_HEAD_TIMEOUT: Final = _answer(b"408 Request Timeout", "header-timeout",
                               "the request head was not sent in time")


def guarded_protocol(
    base: type[asyncio.Protocol],
    *,
    header_timeout: float,
    max_connections: int,
    max_connections_per_address: int,
    refused: Callable[[str], None] = lambda reason: None,
) -> type[asyncio.Protocol]:
    """``base`` (a uvicorn HTTP protocol class) under the connection guard.

    Args:
        base: uvicorn's HTTP protocol class (``uvicorn.protocols.http.auto``).
        header_timeout: seconds a connection has to send a complete request head.
        max_connections: connections open at once in this process.
        max_connections_per_address: connections open at once from one client address.
        refused: called with ``"too-many-connections"`` or ``"header-timeout"`` for
            each connection the guard closes (the service counts them).

    Returns:
        A subclass of ``base`` to pass as uvicorn's ``http`` protocol; its counts are
        its own (one per call).
    """
    by_address: Counter[str] = Counter()
    total = [0]

    class Guarded(base):  # type: ignore[valid-type, misc]
        """``base`` with a header timeout and connection caps (:func:`guarded_protocol`)."""

        _guard_address: str | None = None
        _guard_timer: asyncio.TimerHandle | None = None
        _guard_cycle: Any = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            peer = transport.get_extra_info("peername")
            address = str(peer[0]) if isinstance(peer, tuple) and peer else ""
            if total[0] >= max_connections or by_address[address] >= (
                    max_connections_per_address):
                refused("too-many-connections")
                transport.write(_TOO_MANY)
                transport.close()
                return
            self._guard_address = address
            by_address[address] += 1
            total[0] += 1
            self._guard_arm()

        def connection_lost(self, exc: Exception | None) -> None:
            address = self._guard_address
            if address is not None:
                self._guard_address = None
                total[0] -= 1
                by_address[address] -= 1
                if by_address[address] <= 0:
                    del by_address[address]
            self._guard_disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._guard_address is None:  # refused or closed: its bytes are not read
                return
            cycle = self.cycle
            # The first bytes of the next request head: timed unless they complete it.
            starts = self._guard_timer is None and (cycle is None or cycle.response_complete)
            super().data_received(data)
            if starts:
                if self.cycle is cycle and not self.transport.is_closing():
                    self._guard_arm()
            elif self._guard_timer is not None and self.cycle is not self._guard_cycle:
                self._guard_disarm()  # a new request's head is complete

        def _guard_arm(self) -> None:
            self._guard_cycle = self.cycle
            self._guard_timer = asyncio.get_running_loop().call_later(
                header_timeout, self._guard_expired)

        def _guard_disarm(self) -> None:
            if self._guard_timer is not None:
                self._guard_timer.cancel()
                self._guard_timer = None

        def _guard_expired(self) -> None:
            self._guard_timer = None
            transport = self.transport
            if self.cycle is not self._guard_cycle or transport.is_closing():
                return
            refused("header-timeout")
            transport.write(_HEAD_TIMEOUT)
            transport.close()

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded{base.__name__}"
    return Guarded
