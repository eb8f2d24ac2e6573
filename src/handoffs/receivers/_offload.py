"""Model calls in a process of their own, so that the lab's case work does not starve them.

A lab run's interpreter does two kinds of work at once: the case work (encoding,
perturbing, keying, deciding: CPU, holding the interpreter) and the model calls (HTTP:
mostly waiting, but each call's client work — building the request, parsing the
answer — needs the interpreter too, about a millisecond a call for ``httpx``). On one
interpreter the two take turns, so at a fast model the calls wait for the case work
and the case work for the calls (issue #34 measured a 20 ms stub served 4 calls in
flight of 16 while a lab ran).

:func:`offloaded` gives a client whose :meth:`~OffloadedClient.complete` sends the
request to **one call process** per interpreter (started on first use, shared by
every offloaded client, ended when its parent ends: it stops when its end of the
socket closes). That process holds the real
:class:`~handoffs.receivers.models.OpenAICompatibleClient`
(its connection pool, format negotiation and retries) and runs up to its
``max_concurrency`` calls at once on threads of its own; the lab's interpreter only
sends the request and takes the answer back (pickled over a socket pair: tens of
microseconds a call). Until the call process is ready — it imports the client, a few
hundred milliseconds after it is started — and if it ever ends, calls are made here,
as before, so that starting it never delays a call.

Only a client whose whole state can live elsewhere is offloaded: an
:class:`~handoffs.receivers.models.OpenAICompatibleClient` without client-side rate
limits (a limit is state one interpreter must hold), on a POSIX system. Any other
:class:`~handoffs.receivers.models.ChatClient` is called in this interpreter.
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import contextlib
import itertools
import os
import socket
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any, Final

from handoffs._errors import ModelError
from handoffs.receivers._chat import ChatClient, ChatRequest, Completion, OpenAICompatibleClient

__all__ = ["OffloadedClient", "call_process_running", "offloaded"]

_ENV: Final = "HANDOFFS_CALL_PROCESS"
"""``0`` in the environment: never offload (every call in the caller's interpreter)."""


class _Gone(Exception):
    """The call process ended (or never started) before it answered."""


class _CallProcess:
    """The parent's end of the call process: a socket pair, a reader thread that fills
    the futures of the calls in flight, and the set of clients the process holds.
    """

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        self.owner = os.getpid()  # a forked child must not write to this socket
        self.lock = threading.Lock()
        self.ready = threading.Event()
        self.gone = False
        self.waiting: dict[int, cf.Future[Completion]] = {}
        self.ids = itertools.count(1)
        self.clients: set[int] = set()
        paths = [p for p in sys.path if p]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
        try:
            self.process = subprocess.Popen(  # noqa: S603 - this interpreter, this module
                [sys.executable, "-m", __name__, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL,
                close_fds=True)
        finally:
            theirs.close()
        self.conn = Connection(ours.detach())
        self.reader = threading.Thread(target=self._read, name="handoffs-call-process",
                                       daemon=True)
        self.reader.start()

    def _read(self) -> None:
        try:
            while True:
                message = self.conn.recv()
                if message == "ready":
                    self.ready.set()
                    continue
                ident, ok, value = message
                with self.lock:
                    future = self.waiting.pop(ident, None)
                if future is None:
                    continue
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)
        except (EOFError, OSError):
            pass
        finally:
            with self.lock:
                self.gone = True
                waiting, self.waiting = self.waiting, {}
            for future in waiting.values():
                future.set_exception(_Gone())
            with contextlib.suppress(Exception):  # reap it (it has closed its end)
                self.process.wait(10)

    def call(self, key: int, client: OpenAICompatibleClient,
             request: ChatRequest) -> cf.Future[Completion]:
        """Send one call; its future is filled when the answer (or failure) arrives."""
        future: cf.Future[Completion] = cf.Future()
        with self.lock:
            if self.gone:
                raise _Gone
            ident = next(self.ids)
            self.waiting[ident] = future
            try:
                if key not in self.clients:
                    # with this interpreter's environment as it is now (the first call):
                    # what the client reads from it (api_key_env, httpx's proxy and
                    # certificate variables) it reads as it would have read it here
                    self.conn.send(("client", key, client, dict(os.environ)))
                    self.clients.add(key)
                self.conn.send(("call", ident, key, request))
            except OSError as exc:
                self.waiting.pop(ident, None)
                raise _Gone from exc
        return future

    def usable(self) -> bool:
        """Ready, alive, and this process's own (not inherited through a fork)."""
        return self.ready.is_set() and not self.gone and self.owner == os.getpid()

    def stop(self) -> None:
        """Close this end (the call process ends when it sees it closed) and reap it."""
        with self.lock:
            self.gone = True
        with contextlib.suppress(OSError):
            self.conn.close()
        with contextlib.suppress(Exception):
            self.process.wait(5)

    def forget(self, key: int) -> None:
        """Close the connection pool of client ``key`` in the call process."""
        with self.lock:
            if self.gone or key not in self.clients:
                return
            self.clients.discard(key)
            with contextlib.suppress(OSError):
                self.conn.send(("close", key))


_PROCESS: list[_CallProcess] = []
_PROCESS_LOCK: Final = threading.Lock()


def _process() -> _CallProcess | None:
    """The call process, started on first use; ``None`` if it cannot be started."""
    def live() -> bool:
        return bool(_PROCESS) and not _PROCESS[0].gone and _PROCESS[0].owner == os.getpid()

    if live():
        return _PROCESS[0]
    with _PROCESS_LOCK:
        if live():
            return _PROCESS[0]
        try:
            started = _CallProcess()
        except OSError:
            return None
        if not _PROCESS:
            atexit.register(_stop)
        _PROCESS[:] = [started]
        return started


def _stop() -> None:
    """At the interpreter's exit: end the call process (it would end anyway)."""
    for process in _PROCESS:
        if process.owner == os.getpid():
            process.stop()


def call_process_running() -> bool:
    """Whether this interpreter's call process is started and ready."""
    return bool(_PROCESS) and _PROCESS[0].usable()


_KEYS: Final = itertools.count(1)


class OffloadedClient:
    """A :class:`~handoffs.receivers.models.ChatClient` that makes ``inner``'s calls in
    the call process (see the module), or here while that process is not ready.

    Attributes:
        inner: the client, as declared (also the one called here).
    """

    def __init__(self, inner: OpenAICompatibleClient) -> None:
        self.inner = inner
        self.key = next(_KEYS)
        self.process = _process()

    @property
    def max_concurrency(self) -> int:
        """The inner client's concurrency bound."""
        return self.inner.max_concurrency

    def complete(self, request: ChatRequest) -> Completion:
        """The inner client's answer to ``request``, asked in the call process when it
        is ready, else here (the same retries, timeouts and errors either way).
        """
        process = self.process
        if process is not None and process.usable():
            try:
                return process.call(self.key, self.inner, request).result()
            except _Gone:
                pass  # the call process ended: asked here instead
        return self.inner.complete(request)

    def close(self) -> None:
        """Close the inner client's connections, here and in the call process."""
        self.inner.close()
        if self.process is not None:
            self.process.forget(self.key)

    def __reduce__(self) -> tuple[Any, ...]:
        # Another process (a process executor's worker) calls the client itself.
        return (_inner, (self.inner,))


def _inner(client: OpenAICompatibleClient) -> OpenAICompatibleClient:
    return client


def offloaded(client: ChatClient) -> ChatClient:
    """``client``, with its calls made in the call process when it can be offloaded (an
    :class:`~handoffs.receivers.models.OpenAICompatibleClient` without rate limits, on
    POSIX, unless ``HANDOFFS_CALL_PROCESS=0``); any other client as it is.
    """
    if not isinstance(client, OpenAICompatibleClient) or os.name != "posix" \
            or os.environ.get(_ENV) == "0" or client.requests_per_minute is not None \
            or client.tokens_per_minute is not None:
        return client
    return OffloadedClient(client)


# ------------------------------------------------------------- the call process


def _serve(fd: int) -> None:
    """The call process: take clients and calls from the parent, answer each call as
    it completes (on a thread per call in flight, up to each client's
    ``max_concurrency``); end when the parent's end closes.
    """
    conn = Connection(fd)
    sending = threading.Lock()
    clients: dict[int, tuple[OpenAICompatibleClient, cf.ThreadPoolExecutor]] = {}

    def answer(ident: int, client: OpenAICompatibleClient, request: ChatRequest) -> None:
        try:
            reply: tuple[int, bool, Any] = (ident, True, client.complete(request))
        except ModelError as exc:
            reply = (ident, False, exc)
        except Exception as exc:  # a client must raise ModelError only; say what it raised
            reply = (ident, False, ModelError(f"{type(exc).__name__}: {exc}"))
        with sending:
            try:
                conn.send(reply)
            except OSError:
                os._exit(0)  # the parent is gone

    with sending:
        conn.send("ready")
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            os._exit(0)  # the parent ended: so do the calls it asked for
        kind = message[0]
        if kind == "client":
            _, key, client, environment = message
            os.environ.clear()
            os.environ.update(environment)
            clients[key] = (client, cf.ThreadPoolExecutor(
                max_workers=client.max_concurrency, thread_name_prefix="handoffs-call"))
        elif kind == "call":
            _, ident, key, request = message
            client, pool = clients[key]
            pool.submit(answer, ident, client, request)
        elif kind == "close":
            found = clients.pop(message[1], None)
            if found is not None:  # its calls finish, then its pool closes
                threading.Thread(target=_close, args=found, daemon=True).start()


def _close(client: OpenAICompatibleClient, pool: cf.ThreadPoolExecutor) -> None:
    pool.shutdown(wait=True)
    client.close()


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
