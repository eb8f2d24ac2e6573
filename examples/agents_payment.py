"""The payment cases through a real OpenAI Agents SDK handoff, full history vs receipt only.

Topology: an evidence agent reads a case dossier and hands the case to the case owner
through :func:`handoffs.adapters.openai_agents.gated_handoff`: the model fills only the
contract's content, a :class:`~handoffs.contracts.Sender` stamps governance and signs,
the case owner's gate (readback on) decides in ``on_invoke_handoff`` before the case
owner runs, and a refusal goes to an escalation desk. Two channel arms: the case owner
sees the whole conversation (``full_history``) or the handover alone
(``receipt_only``). Each arm runs the essay's 28 cases plus the essay's injected error
(``policy-01`` reported current by the evidence model: a schema-valid falsehood).

By default the models are the SDK's ``agents.testing.ScriptedModel`` with deterministic
responders — stand-ins, not language models: the evidence model writes the decision
content of the dossier it is shown; the case owner applies the contract's policy to the
decision state of the receipt it reads, and answers ESCALATE when it finds none. So the
figures measure the topology (what is admitted, what reaches the case owner, at what
input size), not any model's judgement. Run::

    python examples/agents_payment.py [--out DIR]

With a model configured, the case owner is a language model behind an
OpenAI-compatible chat-completions API (OpenAI, vLLM, llama.cpp's server, Ollama),
called through the SDK's own ``OpenAIChatCompletionsModel``; it reads its channel
(the whole conversation, or the handover alone) and must answer ``{"action": ...}``
with one of the contract's actions — anything else fails closed (ESCALATE) and is
counted. The evidence model stays scripted, so the injected falsehood is the same
in every run::

    HANDOFFS_MODEL_URL=http://127.0.0.1:8080/v1 HANDOFFS_MODEL_ROUTE=smollm2-135m-instruct \
        python examples/agents_payment.py [--out DIR]

(or ``--model-url`` / ``--model-route``; the key is read from ``OPENAI_API_KEY``, or
the variable ``--api-key-env`` names; ``--response-format json_object`` for llama.cpp's
server). Needs the ``openai-agents`` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import attrs
from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    RunConfig,
    RunHooks,
    Runner,
)
from agents.exceptions import AgentsException
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from openai import APIError, AsyncOpenAI

from handoffs.adapters import Case, Handover
from handoffs.adapters.openai_agents import FULL_HISTORY, RECEIPT_ONLY, gated_handoff
from handoffs.contracts import GovernanceService, GrantIssuer, Registry, Sender
from handoffs.examples import payment
from handoffs.integrity import KeyRing, SigningKey
from handoffs.receivers import (
    Gate,
    InMemoryEvidenceResolver,
    InMemoryPolicyService,
    ResolvedEvidence,
    StrictContractReceiver,
)
from handoffs.receivers.models import ModelReceiver

CONTRACT: Final = payment.PAYMENT_RELEASE
NOW: Final = datetime(2026, 6, 1, 12, tzinfo=UTC)
TOOL: Final = "transfer_to_case_owner"
ARMS: Final = (FULL_HISTORY, RECEIPT_ONLY)
INJECTED: Final = "policy-01"
"""The essay's injected error: the evidence model reports this case's stale policy as
current (and proposes RELEASE)."""
SCRIPTED: Final = "scripted"
"""The ``owner_model`` of a run whose case owner is the scripted stand-in."""
OWNER_INSTRUCTIONS: Final = (
    "You are the case owner of a payment-release case, handed over by an evidence "
    "specialist. Decide from what you were handed: the gate's decision and, when it "
    "admitted the handover, the verified receipt's content. Answer with a JSON object "
    '{"action": "<action>"} and nothing else, where <action> is one of '
    f"{', '.join(a.value for a in CONTRACT.actions)}. Without a verified receipt, answer "
    f"{CONTRACT.fail_closed_action.value}.")


@attrs.frozen(kw_only=True)
class OwnerModel:
    """The case owner's language model behind an OpenAI-compatible chat-completions API.

    Attributes:
        base_url: the server (``.../v1``).
        route: the model name the server routes by.
        api_key_env: the environment variable holding the key, read at the first call
            (a local server accepts any key: without the variable, ``"unused"`` is sent).
        temperature / seed / max_tokens: sampling parameters.
        response_format: ``"json_schema"`` (OpenAI, vLLM, Ollama), ``"json_object"``
            (llama.cpp's server) or ``"none"``: the answer constrained to the actions.
        timeout / max_retries: per call (the ``openai`` client's own retries).
    """

    base_url: str
    route: str
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    seed: int | None = 0
    max_tokens: int = 32
    response_format: str = attrs.field(default="json_schema")
    timeout: float = 60.0
    max_retries: int = 1

    @response_format.validator
    def _known(self, _: Any, value: str) -> None:
        if value not in ("json_schema", "json_object", "none"):
            raise ValueError(f"response_format must be json_schema, json_object or none, "
                             f"got {value!r}")

    def client(self) -> AsyncOpenAI:
        """An ``AsyncOpenAI`` client for the server (close it when the run is done)."""
        return AsyncOpenAI(base_url=self.base_url,
                           api_key=os.environ.get(self.api_key_env) or "unused",
                           timeout=self.timeout, max_retries=self.max_retries)

    def settings(self) -> ModelSettings:
        """Temperature, seed, token bound and the response format (in the request body)."""
        schema = ModelReceiver.action_schema(CONTRACT)
        body: dict[str, Any] = {}
        if self.response_format == "json_schema":
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "decision", "strict": True, "schema": schema}}
        elif self.response_format == "json_object":
            body["response_format"] = {"type": "json_object", "schema": schema}
        return ModelSettings(temperature=self.temperature, max_tokens=self.max_tokens,
                             extra_args=None if self.seed is None else {"seed": self.seed},
                             extra_body=body or None)


@attrs.frozen
class Outcome:
    """One case through one arm."""

    case_id: str
    arm: str
    injected: bool
    reference: str
    chosen: str
    handled_by: str
    gate: str
    reasons: tuple[str, ...]
    owner_input_chars: int | None
    owner_input_items: int | None
    owner_failed_closed: str | None = None
    """Why the case owner's answer was replaced by the fail-closed action (a reason
    code: ``malformed-answer``, ``invalid-action``, ``model-error``), or ``None``."""
    owner_tokens: int = 0
    """Model tokens (in + out) of the case owner's calls."""


def _world() -> tuple[Sender[Any, Any], KeyRing, InMemoryEvidenceResolver]:
    service_key, sender_key = SigningKey.generate(), SigningKey.generate()
    trust = (
        KeyRing()
        .enrol(service_key.public_key_multibase, controller="policy-service",
               roles=["policy-service"], purposes=["capabilityDelegation"],
               not_before=NOW - timedelta(days=30))
        .enrol(sender_key.public_key_multibase, controller="evidence-specialist",
               roles=["proposer"], not_before=NOW - timedelta(days=30))
    )
    sender: Sender[Any, Any] = Sender(
        contract=CONTRACT, key=sender_key,
        governance=GovernanceService(sender="evidence-specialist", receiver="case-owner",
                                     policy_version="PAY-7.4", valid_for=timedelta(hours=1)),
        grants=GrantIssuer(key=service_key, issuer="policy-service"), clock=lambda: NOW)
    records = {
        ref: ResolvedEvidence(content=f"record {ref}".encode(),
                              observed_at=NOW - timedelta(hours=2),
                              claims=attrs.asdict(case.state()))
        for case in payment.synthetic_cases() for ref in case.evidence_refs
    }
    return sender, trust, InMemoryEvidenceResolver(records)


def _dossier(case: payment.PaymentCase) -> str:
    """The user's message to the evidence agent: the whole case record."""
    return json.dumps(attrs.asdict(case), sort_keys=True)


def _evidence_step(call: ModelCall) -> Any:
    """The evidence stand-in: the decision content of the dossier it was given."""
    record = json.loads(call.input if isinstance(call.input, str)
                        else call.input[0]["content"])
    case = payment.PaymentCase(**{**record, "evidence_refs": tuple(record["evidence_refs"])})
    content = {**payment.decision_contract_encoder().encode(case), "notes": None}
    if case.case_id == INJECTED:  # the schema-valid falsehood
        content["decision_state"]["policy_current"] = True
        content["proposed_action"] = "RELEASE"
    return [function_call(TOOL, content, call_id=f"call-{case.case_id}")]


def _handovers(call: ModelCall) -> Iterator[dict[str, Any]]:
    for item in call.input if isinstance(call.input, list) else []:
        text = item.get("output", item.get("content")) if isinstance(item, dict) else None
        try:
            value = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            continue
        if isinstance(value, dict) and "handoff" in value:
            yield value


def _owner_step(call: ModelCall) -> Any:
    """The case-owner stand-in: the contract's policy on the receipt it reads."""
    receipts = [h["content"] for h in _handovers(call) if h["content"] is not None]
    if not receipts:
        return [assistant_message(json.dumps({"action": CONTRACT.fail_closed_action.value}))]
    outcome = CONTRACT.evaluate(receipts[-1]["decision_state"])
    action = outcome.action if outcome.determined and outcome.action else (
        CONTRACT.fail_closed_action)
    return [assistant_message(json.dumps({"action": action.value}))]


def owner_action(answer: object) -> tuple[str, str | None]:
    """The case owner's action from its answer ``{"action": "<action>"}``, or the
    fail-closed action with the reason code (``malformed-answer``, ``invalid-action``).
    """
    fail = CONTRACT.fail_closed_action.value
    try:
        data = json.loads(answer) if isinstance(answer, str) else None
    except ValueError:
        data = None
    if not isinstance(data, dict) or set(data) != {"action"} or not isinstance(
            data["action"], str):
        return fail, "malformed-answer"
    if data["action"] not in {a.value for a in CONTRACT.actions}:
        return fail, "invalid-action"
    return data["action"], None


class _OwnerInput:
    """What the case owner's model was given (the SDK's ``on_llm_start`` hook)."""

    def __init__(self) -> None:
        self.items: list[Any] | None = None

    def __call__(self, agent_name: str, items: list[Any]) -> None:
        if agent_name == "case_owner" and self.items is None:
            self.items = list(items)


async def _run_case(case: payment.PaymentCase, arm: str, sender: Sender[Any, Any],
                    receiver: StrictContractReceiver, *, model: OwnerModel | None,
                    client: AsyncOpenAI | None) -> Outcome:
    seen = _OwnerInput()

    class Hooks(RunHooks[Any]):
        async def on_llm_start(self, context: Any, agent: Agent[Any], system_prompt: Any,
                               input_items: list[Any]) -> None:
            seen(agent.name, input_items)

    owner_model: Any = (
        ScriptedModel([ModelStep.respond(_owner_step)]) if model is None or client is None
        else OpenAIChatCompletionsModel(model=model.route, openai_client=client))
    desk_model = ScriptedModel([[assistant_message("ESCALATE")]])
    owner = Agent(name="case_owner", model=owner_model, instructions=OWNER_INSTRUCTIONS,
                  model_settings=ModelSettings() if model is None else model.settings())
    desk = Agent(name="escalation", model=desk_model,
                 instructions="A handoff was refused; take the case to a human.")
    handovers: list[Handover] = []
    evidence = Agent(
        name="evidence", model=ScriptedModel([ModelStep.respond(_evidence_step)]),
        instructions="Read the dossier and hand the case to the case owner.",
        handoffs=[gated_handoff(owner, signer=sender, receiver=receiver, escalation=desk,
                                channel=arm, on_handover=lambda _c, h: handovers.append(h))])
    failed: str | None = None
    tokens = 0
    try:
        result = await Runner.run(evidence, _dossier(case),
                                  context=Case(case.case_id, case.evidence_refs),
                                  run_config=RunConfig(tracing_disabled=True), hooks=Hooks())
    except (AgentsException, APIError, OSError):  # the model call failed: fail closed
        handled_by, answer, failed = "case_owner", None, "model-error"
    else:
        handled_by, answer = result.last_agent.name, result.final_output
        tokens = sum(r.usage.input_tokens + r.usage.output_tokens for r in result.raw_responses)
    if handled_by == "case_owner":
        chosen, reason = owner_action(answer)
        failed = failed or reason
    else:
        chosen = str(answer)
    (handover,) = handovers
    owner_input = seen.items
    return Outcome(
        case_id=case.case_id, arm=arm, injected=case.case_id == INJECTED,
        reference=CONTRACT.decide(case.state()).value, chosen=chosen,
        handled_by=handled_by, gate=handover.decision.verdict.value,
        reasons=tuple(r.code for r in handover.decision.reasons),
        owner_input_chars=None if owner_input is None else len(json.dumps(owner_input)),
        owner_input_items=None if owner_input is None else len(owner_input),
        owner_failed_closed=failed, owner_tokens=tokens,
    )


async def run_experiment(model: OwnerModel | None = None, *,
                         cases: Iterable[payment.PaymentCase] | None = None) -> list[Outcome]:
    """Every case (default: the essay's 28) through both arms, one gate (and replay
    store) per arm; the case owner is ``model`` when given, else the scripted stand-in."""
    chosen = list(payment.synthetic_cases() if cases is None else cases)
    client = None if model is None else model.client()
    try:
        return await _run_arms(chosen, model, client)
    finally:
        if client is not None:
            await client.close()


async def _run_arms(cases: list[payment.PaymentCase], model: OwnerModel | None,
                    client: AsyncOpenAI | None) -> list[Outcome]:
    sender, trust, evidence = _world()
    outcomes = []
    for arm in ARMS:
        receiver = StrictContractReceiver(Gate(
            identity="case-owner", trust=trust, registry=Registry.of(CONTRACT),
            roles={"case-owner"},
            policy_service=InMemoryPolicyService({"PAY-7.4": True}), evidence=evidence,
            readback=1.0, clock=lambda: NOW + timedelta(minutes=1)))
        for case in cases:
            outcomes.append(await _run_case(case, arm, sender, receiver, model=model,
                                            client=client))
    return outcomes


def summarise(outcomes: list[Outcome], model: OwnerModel | None = None
              ) -> list[dict[str, Any]]:
    """Per arm: agreement, regret and hard violations against the full evidence, what
    the gate admitted and refused, the case owner's input size, how many of its answers
    failed closed, and its model tokens."""
    rows = []
    for arm in ARMS:
        mine = [o for o in outcomes if o.arm == arm]
        actions = CONTRACT.actions
        chosen = [(actions(o.chosen), actions(o.reference)) for o in mine]
        sizes = [o.owner_input_chars for o in mine if o.owner_input_chars is not None]
        items = [o.owner_input_items for o in mine if o.owner_input_items is not None]
        refusals = Counter(o.reasons[0] for o in mine if o.gate != "ACCEPT" and o.reasons)
        rows.append({
            "arm": arm,
            "cases": len(mine),
            "agreement": round(sum(c == r for c, r in chosen) / len(mine), 3),
            "regret": round(sum(CONTRACT.loss(c, r) for c, r in chosen) / len(mine), 3),
            "hard_violations": sum(bool(CONTRACT.hard_violations(c, r)) for c, r in chosen),
            "gate_accepted": sum(o.gate == "ACCEPT" for o in mine),
            "injected_caught": sum(o.injected and o.handled_by == "escalation" for o in mine),
            "gate_refused": dict(sorted(refusals.items())),
            "case_owner_runs": len(sizes),
            "owner_input_chars_median": statistics.median(sizes) if sizes else None,
            "owner_input_items_median": statistics.median(items) if items else None,
            "owner_model": SCRIPTED if model is None else model.route,
            "owner_failed_closed": sum(o.owner_failed_closed is not None for o in mine),
            "owner_tokens": sum(o.owner_tokens for o in mine),
        })
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    """The summary as a Markdown table."""
    lines = [
        "| arm | cases | agreement | mean regret | hard violations | gate accepted | "
        "gate refused (first reason) | injected error caught | case-owner runs | "
        "case-owner input, median chars | median items | case-owner model | "
        "answers failed closed | model tokens |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        refused = ", ".join(f"{k} × {v}" for k, v in row["gate_refused"].items()) or "none"
        lines.append(
            f"| `{row['arm']}` | {row['cases']} | {row['agreement']} | {row['regret']} | "
            f"{row['hard_violations']} | {row['gate_accepted']} | {refused} | "
            f"{row['injected_caught']} | "
            f"{row['case_owner_runs']} | {row['owner_input_chars_median']} | "
            f"{row['owner_input_items_median']} | `{row['owner_model']}` | "
            f"{row['owner_failed_closed']} | {row['owner_tokens']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write report.json and report.md here")
    parser.add_argument("--model-url", help="the case owner's OpenAI-compatible server "
                        "(default: $HANDOFFS_MODEL_URL; none: the scripted stand-in)")
    parser.add_argument("--model-route", help="its model (default: $HANDOFFS_MODEL_ROUTE)")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY",
                        help="the variable holding its key (default: OPENAI_API_KEY)")
    parser.add_argument("--response-format", default="json_schema",
                        choices=("json_schema", "json_object", "none"))
    args = parser.parse_args(argv)
    url = args.model_url or os.environ.get("HANDOFFS_MODEL_URL")
    route = args.model_route or os.environ.get("HANDOFFS_MODEL_ROUTE")
    model = None
    if url or args.model_route:
        if not (url and route):
            parser.error("a model needs a server and a route: --model-url (or "
                         "$HANDOFFS_MODEL_URL) and --model-route (or $HANDOFFS_MODEL_ROUTE)")
        model = OwnerModel(base_url=url, route=route, api_key_env=args.api_key_env,
                           response_format=args.response_format)
    outcomes = asyncio.run(run_experiment(model))
    rows = summarise(outcomes, model)
    table = render(rows)
    print(table)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "report.json").write_text(json.dumps(
            {"summary": rows, "outcomes": [attrs.asdict(o) for o in outcomes]}, indent=2),
            encoding="utf-8")
        (args.out / "report.md").write_text(table + "\n", encoding="utf-8")
        print(f"wrote {args.out / 'report.json'} and {args.out / 'report.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
