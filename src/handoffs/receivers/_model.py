"""The model receiver: step (5) asks a language model, constrained to the contract's actions.

The essay's release experiment begins "Declare the receiver. Freeze its prompt or
policy, tools, model route". :class:`ModelReceiver` is that declaration: its prompt
template (and the template's SHA-256), model route, sampling parameters, response
format and tools are fixed at construction and recorded in every decision, with the
call's tokens in and out and its latency.

What the model sees is what the strategy's encoder sent: the message's members other
than the governance stamp and the envelope (a receipt's decision state and proposal,
a full record, a bare action), rendered as canonical JSON into the template. The
answer is constrained by a JSON-schema response format to ``{"action": <one of the
contract's actions>}`` and checked again on arrival; anything else fails closed with
a typed reason:

===================  ========  =====================================================
reason code          verdict   when
===================  ========  =====================================================
``malformed-answer``  REJECT   the answer is not a JSON object with a string action
``invalid-action``    REJECT   the action is not one of the contract's
``model-timeout``     ESCALATE every attempt timed out
``model-error``       ESCALATE HTTP error after retries, a body that is not a completion
``budget-exceeded``   ESCALATE the run's call or token budget is spent
===================  ========  =====================================================
"""

from __future__ import annotations

import hashlib
import json
import string
import threading
from collections.abc import Mapping
from typing import Any, Final

import attrs

from handoffs._codes import TRANSIENT_CODES
from handoffs._errors import InvalidArgument
from handoffs._json import dumps
from handoffs._members import PROTECTED_MEMBERS
from handoffs._memo import by_identity
from handoffs.contracts import Contract
from handoffs.receivers._chat import ChatClient, ChatRequest, Completion, ModelError, ServedModel
from handoffs.receivers._decision import Decision, Reason, Step, Verdict
from handoffs.receivers._gate import Admitted, Gate, Ruling
from handoffs.receivers._receivers import Admission

__all__ = ["RESPONSE_FORMATS", "TEMPLATE_FIELDS", "ModelReceiver"]

RESPONSE_FORMATS: Final = ("json_schema", "json_object", "text")
"""How the answer is constrained: OpenAI's ``json_schema`` (OpenAI, vLLM, Ollama),
llama.cpp's ``json_object`` + ``schema``, or ``text`` (unconstrained, still validated)."""

TEMPLATE_FIELDS: Final = ("message", "authority", "actions", "contract", "fail_closed_action")
"""The ``$names`` a prompt template may use (``string.Template`` syntax)."""

_HIDDEN: Final = PROTECTED_MEMBERS

DEFAULT_SYSTEM: Final = (
    "You are the receiver of a handoff message. Decide the action the message "
    "supports. Answer with a JSON object {\"action\": ...} naming exactly one action."
)
DEFAULT_TEMPLATE: Final = (
    "Contract: $contract\nAllowed actions: $actions\n"
    "If the message does not support a decision, answer $fail_closed_action.\n"
    "Sender authority: $authority\nMessage:\n$message\n"
)


def _is_admission(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, Gate | Admission):
        raise InvalidArgument(f"{attribute.name} must be a Gate or another Admission, got "
                        f"{type(value).__name__}")


def _is_client(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, ChatClient):
        raise InvalidArgument(f"{attribute.name} must implement ChatClient (complete(request)), "
                        f"got {type(value).__name__}")


def _text(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{attribute.name} must be a non-empty string, got {value!r}")


def _template(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{attribute.name} must be a non-empty string")
    try:
        string.Template(value).substitute(dict.fromkeys(TEMPLATE_FIELDS, ""))
    except (KeyError, ValueError) as exc:
        raise InvalidArgument(f"{attribute.name}: unknown or malformed placeholder {exc}; the "
                         f"template may use {', '.join('$' + n for n in TEMPLATE_FIELDS)}"
                         ) from exc


def _format(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in RESPONSE_FORMATS:
        raise InvalidArgument(f"{attribute.name} must be one of {list(RESPONSE_FORMATS)}, "
                         f"got {value!r}")


def _temperature(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 2:
        raise InvalidArgument(f"{attribute.name} must be a number in [0, 2], got {value!r}")


def _max_tokens(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidArgument(f"{attribute.name} must be a positive integer, got {value!r}")


def _tools(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        raise InvalidArgument("tools must be a collection of tool names, not one string")
    return tuple(str(t) for t in value)


@attrs.frozen
class _Parts:
    """What a receiver's requests under one contract share (not to be changed)."""

    template: string.Template
    fields: Mapping[str, str]
    system: tuple[tuple[str, str], ...]
    response_format: Mapping[str, Any] | None


_PARTS_KEPT: Final = 64


@attrs.frozen(kw_only=True)
class ModelReceiver:
    """A receiver contract whose step (5) asks a language model.

    Steps (1)-(4) are its admission's (a :class:`~handoffs.receivers.Gate` for receipts, the lab's
    :class:`~handoffs.receivers.GovernanceChecker` for the other forms): an inadmissible
    message never reaches the model. Then the template is rendered with the message, the request
    sent through ``client`` and the answer validated (see the module's table).

    Attributes:
        gate: its admission.
        client: the chat client (:class:`OpenAICompatibleClient`, or any
            :class:`ChatClient`; the lab wraps it with its call cache).
        model_route: the model as the server names it (recorded; sent as ``model``).
        name: the receiver's name.
        template: the user message, a ``string.Template`` over ``TEMPLATE_FIELDS``.
        system: the system message (empty: none is sent).
        temperature / seed / max_tokens: sampling parameters.
        response_format: one of ``RESPONSE_FORMATS``.
        tools: names of the tools the model may call (recorded; none is offered to
            the model by this receiver).
        concurrency: calls the lab may have in flight for this receiver (``None``:
            the client's ``max_concurrency``, else 8).
    """

    gate: Gate | Admission = attrs.field(validator=_is_admission)
    client: ChatClient = attrs.field(validator=_is_client)
    model_route: str = attrs.field(validator=_text)
    name: str = attrs.field(default="model", validator=_text)
    template: str = attrs.field(default=DEFAULT_TEMPLATE, validator=_template)
    system: str = DEFAULT_SYSTEM
    temperature: float = attrs.field(default=0.0, validator=_temperature)
    seed: int | None = 0
    max_tokens: int = attrs.field(default=16, validator=_max_tokens)
    response_format: str = attrs.field(default="json_schema", validator=_format)
    tools: tuple[str, ...] = attrs.field(default=(), converter=_tools)
    concurrency: int | None = None
    record: Mapping[str, Any] = attrs.field(init=False, eq=False)
    _served: dict[ServedModel, None] = attrs.field(
        init=False, eq=False, repr=False, factory=dict)
    _served_lock: threading.Lock = attrs.field(init=False, eq=False, repr=False,
                                               factory=threading.Lock)
    _parts: dict[int, tuple[Contract[Any, Any], _Parts]] = attrs.field(
        init=False, eq=False, repr=False, factory=dict)

    def __attrs_post_init__(self) -> None:
        if self.concurrency is not None and (not isinstance(self.concurrency, int)
                                             or self.concurrency < 1):
            raise InvalidArgument(f"concurrency must be a positive integer, got "
                             f"{self.concurrency!r}")
        object.__setattr__(self, "record", self.declaration())

    # ------------------------------------------------------------- declaration

    @property
    def deterministic(self) -> bool:
        """At temperature 0 with a deterministic admission (the lab memoises it)."""
        return self.temperature == 0 and self.gate.deterministic

    @property
    def hidden(self) -> frozenset[str]:
        """The members the prompt does not show (the governance stamp and the
        envelope, which only the admission reads); every other member it shows, by
        value (see :meth:`render`).
        """
        return _HIDDEN

    @property
    def max_in_flight(self) -> int:
        """Calls the lab may have in flight for this receiver."""
        if self.concurrency is not None:
            return self.concurrency
        found = getattr(self.client, "max_concurrency", None)
        return found if isinstance(found, int) and found > 0 else 8

    def parameters(self) -> dict[str, Any]:
        """The sampling parameters, as recorded."""
        return {"temperature": self.temperature, "seed": self.seed,
                "max_tokens": self.max_tokens}

    def declaration(self) -> dict[str, Any]:
        """What is frozen: template and system digests, route, parameters, format, tools."""
        return {
            "prompt_sha256": hashlib.sha256(
                (self.system + "\x00" + self.template).encode("utf-8")).hexdigest(),
            "model_route": self.model_route,
            "parameters": self.parameters(),
            "response_format": self.response_format,
            "tools": list(self.tools),
        }

    def served(self) -> list[dict[str, str]]:
        """Every distinct served identity (the members of
        :class:`~handoffs.receivers.models.ServedModel` the server named) this receiver's
        answers have named, in the order first seen, in this process.
        """
        with self._served_lock:
            return [{key: value for key, value in served.to_json().items() if value}
                    for served in self._served]

    def __getstate__(self) -> dict[str, Any]:
        return {a.name: getattr(self, a.name) for a in attrs.fields(type(self))
                 if a.name not in ("_served", "_served_lock", "_parts")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_served", {})
        object.__setattr__(self, "_served_lock", threading.Lock())
        object.__setattr__(self, "_parts", {})

    def fingerprint(self) -> str:
        """A digest of the declaration and the receiver's name (keys the call cache)."""
        return hashlib.sha256(dumps({"name": self.name, **self.declaration()})
                              .encode("utf-8")).hexdigest()

    # ---------------------------------------------------------------- request

    @staticmethod
    def action_schema(contract: Contract[Any, Any]) -> dict[str, Any]:
        """The JSON Schema an answer must meet: ``{"action": <one of the actions>}``
        (the structured-output schema of each request).
        """
        return {
            "type": "object",
            "properties": {"action": {"type": "string",
                                      "enum": [str(a.value) for a in contract.actions]}},
            "required": ["action"],
            "additionalProperties": False,
        }

    def render(self, document: Mapping[str, Any], contract: Contract[Any, Any]) -> str:
        """The user message for one document admitted under ``contract``."""
        return self._render(document, self._parts_for(contract))

    @staticmethod
    def _render(document: Mapping[str, Any], parts: _Parts) -> str:
        authority = document.get("authority")
        return parts.template.substitute(
            parts.fields,
            message=dumps({k: v for k, v in document.items() if k not in _HIDDEN}),
            authority=authority if isinstance(authority, str) else "unknown",
        )

    def request(self, document: Mapping[str, Any], contract: Contract[Any, Any], *,
                sample: int = 0) -> ChatRequest:
        """The chat request for one document admitted under ``contract``.

        ``sample``: which draw of a sampled receiver this is (see :meth:`receive`); a
        declared ``seed`` is sent as ``seed + sample``, so that a seeded server gives
        each draw its own answer, reproducibly.
        """
        parts = self._parts_for(contract)
        return ChatRequest(model=self.model_route,
                           messages=(*parts.system, ("user", self._render(document, parts))),
                           temperature=float(self.temperature),
                           seed=None if self.seed is None else self.seed + sample,
                           max_tokens=self.max_tokens, response_format=parts.response_format,
                           sample=sample)

    def _parts_for(self, contract: Contract[Any, Any]) -> _Parts:
        """What every request under ``contract`` shares (made once per contract)."""
        return by_identity(self._parts, contract, lambda: self._make_parts(contract),
                           limit=_PARTS_KEPT)

    def _make_parts(self, contract: Contract[Any, Any]) -> _Parts:
        schema = self.action_schema(contract)
        response_format: dict[str, Any] | None
        if self.response_format == "json_schema":
            response_format = {"type": "json_schema", "json_schema": {
                "name": "decision", "strict": True, "schema": schema}}
        elif self.response_format == "json_object":
            response_format = {"type": "json_object", "schema": schema}
        else:
            response_format = None
        return _Parts(
            template=string.Template(self.template),
            fields={"actions": ", ".join(str(a.value) for a in contract.actions),
                    "contract": contract.id,
                    "fail_closed_action": str(contract.fail_closed_action.value)},
            system=(("system", self.system),) if self.system else (),
            response_format=response_format)

    # ---------------------------------------------------------------- decide

    def receive(self, message: bytes | str | Mapping[str, Any], *,
                sample: int = 0) -> Decision:
        """Admit, ask the model, check its answer; never raises.

        ``sample``: the draw of a sampled receiver (temperature above 0, or an
        admission that is not deterministic) that this decision is: the lab repeats
        such a receiver once per epoch with ``sample`` = the epoch, and the request
        carries it (:attr:`ChatRequest.sample`; the seed moves with it), so that ``n``
        draws of one prompt are ``n`` calls. The decision records it as ``sample``.
        """
        if sample == 0:
            return self.gate.decide(message, rule=self._rule, receiver=self.name,
                                    record=self.record)
        return self.gate.decide(message, rule=lambda admitted: self._rule(admitted, sample),
                                receiver=self.name, record=self.record)

    def _rule(self, admitted: Admitted, sample: int = 0) -> Ruling:
        contract = admitted.contract
        try:
            completion = self.client.complete(self.request(admitted.document, contract,
                                                           sample=sample))
        except Exception as exc:  # rule_on fails closed on any failure
            return self.rule_on(contract, exc, sample=sample)
        return self.rule_on(contract, completion, sample=sample)

    def rule_on(self, contract: Contract[Any, Any], answer: Completion | BaseException,
                *, sample: int = 0) -> Ruling:
        """Step (5)'s ruling on the model's answer (or on the failed call) to the
        request for a document admitted under ``contract``: the action it names if it
        is one of the contract's, else the fail-closed action with a reason (see the
        module's table). :meth:`receive` is admission, :meth:`request`, the client's
        call and this; the lab runs the same parts apart, so that the request is made
        once and the ruling is made where the answer arrives.
        """
        fail = str(contract.fail_closed_action.value)
        drawn = {} if self.deterministic else {"sample": sample}
        if isinstance(answer, BaseException):
            reason = Reason(answer.code if isinstance(answer, ModelError)
                            and answer.code in TRANSIENT_CODES else "model-error",
                            f"{self.name}: {answer.message}" if isinstance(answer, ModelError)
                            else f"{self.name}: {type(answer).__name__}: {answer}",
                            Step.POLICY)
            return Ruling(action=fail, verdict=Verdict.ESCALATE, reasons=(reason,),
                          record={"tokens_in": 0, "tokens_out": 0, "latency_ms": 0.0,
                                  "cached": False, **drawn})
        completion = answer
        usage = {**_usage(completion), **drawn}
        if completion.served is not None and completion.served not in self._served:
            with self._served_lock:
                self._served[completion.served] = None
        action = _answer(completion.content)
        if action is None and completion.response_format == "text":
            # asked as plain text (the server constrains no form): parsed from the text
            action = _answer_in_text(completion.content)
        if action is None:
            return Ruling(action=fail, verdict=Verdict.REJECT, reasons=(Reason(
                "malformed-answer",
                f"{self.name} answered {completion.content[:80]!r}, not {{\"action\": ...}}",
                Step.POLICY),), record={**usage, "answer": completion.content[:200]})
        values = {str(a.value) for a in contract.actions}
        if action not in values:
            return Ruling(action=fail, verdict=Verdict.REJECT, reasons=(Reason(
                "invalid-action",
                f"{self.name} answered {action!r}, not an action of {contract.id}",
                Step.POLICY, "$.action"),), record={**usage, "answer": action[:200]})
        return Ruling(action=action, record=usage)


def _usage(completion: Completion) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "tokens_in": completion.tokens_in, "tokens_out": completion.tokens_out,
        "latency_ms": round(completion.latency_ms, 3), "cached": completion.cached}
    if completion.served is not None:  # who answered: the served model and its build
        usage["served_model"] = completion.served.to_json()
    if completion.response_format is not None:  # the form the client negotiated
        usage["response_format_sent"] = completion.response_format
    return usage


def _answer_in_text(content: str) -> str | None:
    """The action of the first ``{"action": "<text>"}`` object inside free text."""
    decoder = json.JSONDecoder()
    at = content.find("{")
    while at >= 0:
        try:
            data, _ = decoder.raw_decode(content, at)
        except (ValueError, RecursionError):
            data = None
        if isinstance(data, dict) and set(data) == {"action"} \
                and isinstance(data["action"], str):
            return str(data["action"])
        at = content.find("{", at + 1)
    return None


def _answer(content: str) -> str | None:
    """The action of an ``{"action": "<text>"}`` answer, else ``None``."""
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or set(data) != {"action"}:
        return None
    action = data["action"]
    return action if isinstance(action, str) else None
