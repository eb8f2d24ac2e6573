"""Chat completions over HTTP: the one client a model receiver needs.

:class:`ChatClient` is the interface (``complete(request) -> Completion``, raising
:class:`ModelError` or its subclass ``ModelTimeout``); :class:`OpenAICompatibleClient` is its
HTTP implementation for every server that speaks OpenAI's ``/v1/chat/completions``:
OpenAI itself, vLLM, llama.cpp's ``llama_cpp.server`` / ``llama-server`` and Ollama.

Why ``httpx`` and not the ``openai`` package: one light dependency with explicit
timeouts, a thread-safe connection pool (the lab calls from many threads) and an
async API should we need it, while *we* decide the retries (the SDK retries on its
own schedule, hiding each attempt from a rate limiter and a budget) and the body we
send (the SDK's structured-output helpers send ``{"type": "json_schema", ...}``,
which llama.cpp's server answers with HTTP 500; it needs ``{"type": "json_object",
"schema": ...}``). ``httpx`` is imported lazily: install the ``llm`` extra.
"""

from __future__ import annotations

import email.utils
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol, runtime_checkable

import attrs

from handoffs._errors import InvalidArgument, ModelError, ModelTimeout
from handoffs._json import dumps

__all__ = [
    "ChatClient",
    "ChatRequest",
    "Completion",
    "ModelError",
    "ModelTimeout",
    "OpenAICompatibleClient",
    "ServedModel",
]


@attrs.frozen(kw_only=True)
class ChatRequest:
    """One chat-completions request, everything that determines the answer.

    Attributes:
        model: the model route sent as ``model`` (e.g. ``"gpt-4o-mini"``, a vLLM or
            Ollama model name; llama.cpp's server accepts any name).
        messages: ``(role, content)`` pairs.
        temperature / seed / max_tokens: sampling parameters (``seed`` omitted if None).
        response_format: the ``response_format`` member as sent (``None``: omitted).
        tools: tool definitions as sent (empty: omitted).
        sample: which draw of a sampled receiver the request is (not sent: it keeps
            ``n`` draws of one prompt ``n`` requests, for a call cache; 0 for a
            deterministic receiver).
    """

    model: str
    messages: tuple[tuple[str, str], ...]
    temperature: float = 0.0
    seed: int | None = None
    max_tokens: int = 64
    response_format: Mapping[str, Any] | None = None
    tools: tuple[Mapping[str, Any], ...] = ()
    sample: int = 0
    _encoded: list[bytes] = attrs.field(init=False, factory=list, eq=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The request body."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": role, "content": content} for role, content in self.messages],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.seed is not None:
            body["seed"] = self.seed
        if self.response_format is not None:
            body["response_format"] = dict(self.response_format)
        if self.tools:
            body["tools"] = [dict(t) for t in self.tools]
        return body

    def body(self) -> bytes:
        """The request body as sent: :meth:`to_json` as canonical JSON (sorted keys,
        UTF-8), encoded once per request (a call cache's key and the call share it).
        """
        encoded = self._encoded
        if not encoded:
            encoded.append(dumps(self.to_json()).encode("utf-8"))
        return encoded[0]

    def prompt_chars(self) -> int:
        """Characters of all message contents (for token estimates before a call)."""
        return sum(len(content) for _, content in self.messages)


def _optional_text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@attrs.frozen(kw_only=True)
class ServedModel:
    """Who answered a call, as the server said: the served model's identity and build.

    A route (``model_route``) names what was asked for; this names what answered, so
    that a receiver's fingerprint can say which model and build its decisions came from.

    Attributes:
        model: the response's ``model`` (OpenAI: the dated snapshot behind an alias;
            vLLM, Ollama: the served model's name; llama.cpp: the model file or alias).
        system_fingerprint: the response's ``system_fingerprint`` (OpenAI: the backend
            configuration; llama.cpp's ``llama-server``: its build, ``b<number>-<commit>``).
        server: the HTTP ``Server`` header (the serving software, when it says).
    """

    model: str | None = attrs.field(default=None, converter=_optional_text)
    system_fingerprint: str | None = attrs.field(default=None, converter=_optional_text)
    server: str | None = attrs.field(default=None, converter=_optional_text)

    def to_json(self) -> dict[str, str | None]:
        """The record's JSON form (every member, ``null`` when the server was silent)."""
        return {"model": self.model, "system_fingerprint": self.system_fingerprint,
                "server": self.server}


@attrs.frozen(kw_only=True)
class Completion:
    """A model's answer and what it cost.

    Attributes:
        content: the assistant message's text.
        tokens_in / tokens_out: prompt and completion tokens (``usage``; 0 if absent).
        latency_ms: wall time of the call, retries included (0 for a cache hit).
        cached: whether it came from a call cache rather than the model.
        finish_reason: the choice's ``finish_reason`` when given.
        served: who answered (:class:`~handoffs.receivers.models.ServedModel`), when the
            call reached a server; ``None`` for an answer from a call cache or a client
            that does not say.
        response_format: the structured-output form the answer was asked in
            (``"json_schema"``, ``"json_object"`` or ``"text"``) when the client
            negotiated it (see :class:`OpenAICompatibleClient`); ``None`` otherwise.
    """

    content: str
    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: float = 0.0
    cached: bool = False
    finish_reason: str | None = None
    served: ServedModel | None = None
    response_format: str | None = None


@runtime_checkable
class ChatClient(Protocol):
    """Sends a :class:`ChatRequest`, returns a :class:`Completion`.

    Raises :class:`ModelError` (or its subclass ``ModelTimeout``) on failure, never anything else.
    """

    def complete(self, request: ChatRequest) -> Completion:
        """One answer for ``request``."""
        ...


# ----------------------------------------------------------------- rate limiting

# Where the client reads the time and waits (rate limits, backoff, Retry-After): the
# system's monotonic clock and sleep, looked up on every use so that a test can put a
# fake clock here instead of timing the waits.
_monotonic: Callable[[], float] = time.monotonic
_sleep: Callable[[float], None] = time.sleep


class _Bucket:
    """A token bucket: ``rate`` units per minute, bursts up to one minute's worth."""

    def __init__(self, per_minute: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = float(per_minute)
        self.level = self.capacity
        self.stamp = _monotonic()
        self.lock = threading.Lock()

    def take(self, amount: float) -> None:
        """Block until ``amount`` units are available, then take them."""
        amount = min(amount, self.capacity)
        while True:
            with self.lock:
                now = _monotonic()
                self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
                self.stamp = now
                if self.level >= amount:
                    self.level -= amount
                    return
                wait = (amount - self.level) / self.rate
            _sleep(min(wait, 1.0))

    def settle(self, amount: float) -> None:
        """Return units an estimate took but the call did not use (``amount`` > 0), or
        take what it used beyond the estimate (``amount`` < 0; the bucket may go into
        debt, which the next :meth:`take` waits out).
        """
        with self.lock:
            self.level = min(self.capacity, self.level + amount)


def retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if value is None:
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _positive(_: Any, attribute: attrs.Attribute[Any], value: float | None) -> None:
    if value is not None and not value > 0:
        raise InvalidArgument(f"{attribute.name} must be positive, got {value!r}")


def _non_negative_int(_: Any, attribute: attrs.Attribute[Any], value: int) -> None:
    if not isinstance(value, int) or value < 0:
        raise InvalidArgument(f"{attribute.name} must be a non-negative integer, got {value!r}")


_RETRY_STATUS: Final = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_FORM_NAMES: Final = ("json_schema", "json_object", "text")
_UNSUPPORTED_WORDS: Final = ("response_format", "json_schema", "schema")


def _forms(response_format: Mapping[str, Any] | None
           ) -> tuple[Mapping[str, Any] | None, ...]:
    """The structured-output forms to try for a request, strongest first: its own
    ``json_schema`` form, ``json_object`` with the same schema, no ``response_format``
    (text). Empty when the request is not sent as ``json_schema`` (nothing to negotiate).
    """
    if not response_format or response_format.get("type") != "json_schema":
        return ()
    spec = response_format.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, Mapping) else None
    if not isinstance(schema, Mapping):
        return ()
    return (response_format, {"type": "json_object", "schema": dict(schema)}, None)


def _body(request: ChatRequest, forms: tuple[Mapping[str, Any] | None, ...],
          form: int) -> bytes:
    if not forms or form == 0:  # the request's own form (forms[0] is its own)
        return request.body()
    return attrs.evolve(request, response_format=forms[form]).body()


def _unsupported(status: int, text: str) -> bool:
    """Whether an error answer means "this response_format is not supported here"."""
    if status in {400, 422}:
        return True
    lowered = text[:2000].lower()
    return status >= 500 and any(word in lowered for word in _UNSUPPORTED_WORDS)


_TLS: dict[tuple[str | None, str | None], Any] = {}
_TLS_LOCK: Final = threading.Lock()


def _tls_context(httpx: Any) -> Any:
    """The TLS context every client of this process verifies servers with: httpx's own
    default (certifi's CA bundle, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set),
    made once per pair of those variables rather than once per client (loading the CA
    bundle costs tens of milliseconds, for ``http://`` servers too).
    """
    where = (os.environ.get("SSL_CERT_FILE") or None, os.environ.get("SSL_CERT_DIR") or None)
    with _TLS_LOCK:
        context = _TLS.get(where)
        if context is None:
            context = _TLS[where] = httpx.create_ssl_context()
        return context


class _Runtime:
    """The client's live state (connection pool, limiter, semaphore): never pickled."""

    def __init__(self, client: OpenAICompatibleClient) -> None:
        import httpx

        self.httpx = httpx
        headers = {"content-type": "application/json", **dict(client.headers)}
        key = client.resolved_key()
        if key:
            headers["authorization"] = f"Bearer {key}"
        limits = httpx.Limits(max_connections=client.max_concurrency,
                              max_keepalive_connections=client.max_concurrency)
        self.http = httpx.Client(base_url=client.base_url.rstrip("/") + "/",
                                 headers=headers, timeout=client.timeout, limits=limits,
                                 verify=_tls_context(httpx))
        self.slots = threading.BoundedSemaphore(client.max_concurrency)
        self.requests = (None if client.requests_per_minute is None
                         else _Bucket(client.requests_per_minute))
        self.tokens = (None if client.tokens_per_minute is None
                       else _Bucket(client.tokens_per_minute))
        # structured-output form each model route settled on (index into _FORMS)
        self.forms: dict[str, int] = {}
        self.forms_lock = threading.Lock()


@attrs.frozen(kw_only=True)
class OpenAICompatibleClient:
    """A chat-completions client over HTTP (``POST {base_url}/chat/completions``).

    Attributes:
        base_url: e.g. ``"https://api.openai.com/v1"``, ``"http://127.0.0.1:8000/v1"``
            (vLLM, llama.cpp's server), ``"http://127.0.0.1:11434/v1"`` (Ollama).
        api_key: the key sent as ``Authorization: Bearer``; or
        api_key_env: the environment variable to read it from at first use
            (keys stay out of experiment files and pickles). Neither: no header.
        timeout: seconds per attempt (connect, read, write and pool).
        max_retries: further attempts after a 408/409/425/429/5xx answer, a timeout
            or a connection error.
        backoff: base of the exponential backoff in seconds (full jitter, capped at
            ``backoff_max``); a ``Retry-After`` header, when sent, is honoured instead.
        requests_per_minute / tokens_per_minute: client-side rate limits (token
            buckets; tokens are estimated before a call as prompt characters / 4 +
            ``max_tokens`` and settled from ``usage`` after it).
        max_concurrency: requests in flight at once (a semaphore; also the pool size).
        headers: extra headers.
        seed: seeds the jitter (``None``: random).
        negotiate_format: negotiate the structured-output form once per model route:
            a request sent as ``json_schema`` (OpenAI, vLLM, Ollama) that the server
            answers as unsupported — HTTP 400 or 422, or a 5xx whose body names
            ``response_format``, ``json_schema`` or ``schema`` (llama.cpp's server
            answers ``json_schema`` with HTTP 500) — is sent again at once as
            ``json_object`` with the schema, then as plain text (the answer parsed
            from the text), without spending a retry or a backoff; the first form
            that is answered is kept for the route. ``False``: every request is
            sent as it is.
    """

    base_url: str
    api_key: str | None = attrs.field(default=None, repr=False)
    api_key_env: str | None = None
    timeout: float = attrs.field(default=60.0, validator=_positive)
    max_retries: int = attrs.field(default=4, validator=_non_negative_int)
    backoff: float = attrs.field(default=0.5, validator=_positive)
    backoff_max: float = attrs.field(default=30.0, validator=_positive)
    requests_per_minute: float | None = attrs.field(default=None, validator=_positive)
    tokens_per_minute: float | None = attrs.field(default=None, validator=_positive)
    max_concurrency: int = attrs.field(default=8)
    headers: Mapping[str, str] = attrs.field(factory=dict)
    seed: int | None = None
    negotiate_format: bool = True
    _runtime: list[_Runtime] = attrs.field(init=False, factory=list, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.base_url, str) or not self.base_url.startswith(
                ("http://", "https://")):
            raise InvalidArgument(f"base_url must be an http(s) URL, got {self.base_url!r}")
        if not isinstance(self.max_concurrency, int) or self.max_concurrency < 1:
            raise InvalidArgument(f"max_concurrency must be a positive integer, got "
                             f"{self.max_concurrency!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        # The connection pool, locks and buckets are per process: rebuild them there.
        fields = {a.alias or a.name: getattr(self, a.name)
                  for a in attrs.fields(type(self)) if a.init}
        return (_rebuild_client, (type(self), fields))

    def resolved_key(self) -> str | None:
        """The API key (``api_key``, else the variable ``api_key_env`` names)."""
        if self.api_key is not None:
            return self.api_key
        if self.api_key_env is not None:
            return os.environ.get(self.api_key_env) or None
        return None

    def _live(self) -> _Runtime:
        runtime = self._runtime
        if not runtime:
            with _CLIENT_LOCK:
                if not runtime:
                    try:
                        runtime.append(_Runtime(self))
                    except ImportError as exc:
                        raise ModelError("the HTTP model client needs httpx: install "
                                         "handoffs[llm]") from exc
        return runtime[0]

    def close(self) -> None:
        """Close the connection pool (a later call opens a new one)."""
        with _CLIENT_LOCK:
            while self._runtime:
                self._runtime.pop().http.close()

    def __enter__(self) -> OpenAICompatibleClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def complete(self, request: ChatRequest) -> Completion:
        """Send ``request``, retrying as configured.

        Raises:
            ModelError: ``ModelTimeout``, every attempt timed out.
            ModelError: a non-retryable HTTP status, retries exhausted, or a response
                body that is not a chat completion.
        """
        live = self._live()
        forms = _forms(request.response_format) if self.negotiate_format else ()
        form = live.forms.get(request.model, 0) if forms else 0
        body = _body(request, forms, form)
        estimate = request.prompt_chars() / 4 + request.max_tokens
        jitter = random.Random(self.seed)  # noqa: S311 - jitter, not cryptography
        started = time.perf_counter()
        attempt = 0
        while True:
            if live.requests is not None:
                live.requests.take(1)
            if live.tokens is not None:
                live.tokens.take(estimate)
            wait: float | None = None
            try:
                with live.slots:
                    response = live.http.post("chat/completions", content=body)
            except live.httpx.TimeoutException as exc:
                failure: ModelError = ModelTimeout(
                    f"{self.base_url}: no answer within {self.timeout} s "
                    f"(attempt {attempt + 1}): {type(exc).__name__}")
            except live.httpx.HTTPError as exc:
                failure = ModelError(f"{self.base_url}: {type(exc).__name__}: {exc}")
            else:
                if response.status_code == 200:
                    return self._answered(live, response, started, estimate=estimate,
                                          route=request.model if forms else None,
                                          form=form)
                failure = ModelError(f"{self.base_url}: HTTP {response.status_code}: "
                                     f"{response.text[:200]}")
                if forms and form + 1 < len(forms) and request.model not in live.forms \
                        and _unsupported(response.status_code, response.text):
                    # the form is not supported here: the next one, at once, no retry spent
                    form += 1
                    body = _body(request, forms, form)
                    continue
                if response.status_code not in _RETRY_STATUS:
                    raise failure
                wait = retry_after(response.headers.get("retry-after"))
            if attempt >= self.max_retries:
                raise failure
            if wait is None:
                wait = jitter.uniform(0, min(self.backoff_max, self.backoff * 2 ** attempt))
            _sleep(min(wait, self.backoff_max))
            attempt += 1

    def _answered(self, live: _Runtime, response: Any, started: float, *,
                  estimate: float, route: str | None, form: int) -> Completion:
        """The completion of a 200 answer: tokens settled with the limiter and, for a
        negotiated ``route``, the form settled for it.
        """
        completion = self._parse(response, started)
        if live.tokens is not None:
            used = completion.tokens_in + completion.tokens_out
            if used:
                live.tokens.settle(estimate - used)
        if route is None:
            return completion
        with live.forms_lock:  # settled: the route keeps this form
            live.forms.setdefault(route, form)
        return attrs.evolve(completion, response_format=_FORM_NAMES[form])

    def _parse(self, response: Any, started: float) -> Completion:
        try:
            data = response.json()
            choice = data["choices"][0]
            content = choice["message"].get("content")
            usage = data.get("usage") or {}
            tokens_in = int(usage.get("prompt_tokens") or 0)
            tokens_out = int(usage.get("completion_tokens") or 0)
            finish = choice.get("finish_reason")
            served = ServedModel(model=data.get("model"),
                                 system_fingerprint=data.get("system_fingerprint"),
                                 server=response.headers.get("server"))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ModelError(f"{self.base_url}: not a chat completion: "
                             f"{type(exc).__name__}: {exc}") from exc
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise ModelError(f"{self.base_url}: the message content is not text")
        return Completion(content=content, tokens_in=tokens_in, tokens_out=tokens_out,
                          latency_ms=(time.perf_counter() - started) * 1000,
                          finish_reason=finish if isinstance(finish, str) else None,
                          served=served)


_CLIENT_LOCK: Final = threading.Lock()


def _rebuild_client(cls: type[OpenAICompatibleClient], fields: dict[str, Any]
                    ) -> OpenAICompatibleClient:
    return cls(**fields)

