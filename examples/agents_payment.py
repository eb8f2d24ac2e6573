"""The payment cases through a real OpenAI Agents SDK handoff, full history vs receipt only.

Topology: an evidence agent reads a case dossier and hands the case to the case owner
through :func:`handoffs.adapters.openai_agents.gated_handoff`: the model fills only the
contract's content, a :class:`~handoffs.contracts.Sender` stamps governance and signs,
the case owner's gate (readback on) decides in ``on_invoke_handoff`` before the case
owner runs, and a refusal goes to an escalation desk. Two channel arms: the case owner
sees the whole conversation (``full_history``) or the handover alone
(``receipt_only``). Each arm runs the essay's 28 cases plus the essay's injected error
(``policy-01`` reported current by the evidence model: a schema-valid falsehood).

The models are the SDK's ``agents.testing.ScriptedModel`` with deterministic
responders — stand-ins, not language models: the evidence model writes the decision
content of the dossier it is shown; the case owner applies the contract's policy to the
decision state of the receipt it reads, and answers ESCALATE when it finds none. So the
figures measure the topology (what is admitted, what reaches the case owner, at what
input size), not any model's judgement. Run::

    python examples/agents_payment.py [--out DIR]

Needs the ``openai-agents`` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import attrs
from agents import Agent, RunConfig, Runner
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from handoffs.adapters import Case, Handover
from handoffs.adapters.openai_agents import FULL_HISTORY, RECEIPT_ONLY, gated_handoff
from handoffs.contracts import (
    GovernanceService,
    GrantIssuer,
    KeyRing,
    Registry,
    Sender,
    SigningKey,
)
from handoffs.examples import payment
from handoffs.receivers import (
    Gate,
    InMemoryEvidenceResolver,
    InMemoryPolicyService,
    Readback,
    ResolvedEvidence,
    StrictContractReceiver,
)

CONTRACT: Final = payment.PAYMENT_RELEASE
NOW: Final = datetime(2026, 6, 1, 12, tzinfo=UTC)
TOOL: Final = "transfer_to_case_owner"
ARMS: Final = (FULL_HISTORY, RECEIPT_ONLY)
INJECTED: Final = "policy-01"
"""The essay's injected error: the evidence model reports this case's stale policy as
current (and proposes RELEASE)."""


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
    receipts = [h["receipt"] for h in _handovers(call) if h["receipt"] is not None]
    if not receipts:
        return [assistant_message(CONTRACT.fail_closed_action.value)]
    outcome = CONTRACT.evaluate(receipts[-1]["decision_state"])
    action = outcome.action if outcome.determined and outcome.action else (
        CONTRACT.fail_closed_action)
    return [assistant_message(action.value)]


async def _run_case(case: payment.PaymentCase, arm: str, sender: Sender[Any, Any],
                    receiver: StrictContractReceiver) -> Outcome:
    owner_model = ScriptedModel([ModelStep.respond(_owner_step)])
    desk_model = ScriptedModel([[assistant_message("ESCALATE")]])
    owner = Agent(name="case_owner", model=owner_model,
                  instructions="Decide the payment case from the receipt you are handed.")
    desk = Agent(name="escalation", model=desk_model,
                 instructions="A handoff was refused; take the case to a human.")
    handovers: list[Handover] = []
    evidence = Agent(
        name="evidence", model=ScriptedModel([ModelStep.respond(_evidence_step)]),
        instructions="Read the dossier and hand the case to the case owner.",
        handoffs=[gated_handoff(owner, signer=sender, receiver=receiver, escalation=desk,
                                channel=arm, on_handover=lambda _c, h: handovers.append(h))])
    result = await Runner.run(evidence, _dossier(case),
                              context=Case(case.case_id, case.evidence_refs),
                              run_config=RunConfig(tracing_disabled=True))
    (handover,) = handovers
    owner_input = owner_model.calls[0].input if owner_model.calls else None
    return Outcome(
        case_id=case.case_id, arm=arm, injected=case.case_id == INJECTED,
        reference=CONTRACT.decide(case.state()).value, chosen=str(result.final_output),
        handled_by=result.last_agent.name, gate=handover.decision.verdict.value,
        reasons=tuple(r.code for r in handover.decision.reasons),
        owner_input_chars=None if owner_input is None else len(json.dumps(owner_input)),
        owner_input_items=None if owner_input is None else len(owner_input),
    )


async def run_experiment() -> list[Outcome]:
    """Every case through both arms, one gate (and replay store) per arm."""
    sender, trust, evidence = _world()
    outcomes = []
    for arm in ARMS:
        receiver = StrictContractReceiver(Gate(
            identity="case-owner", trust=trust, registry=Registry.of(CONTRACT),
            roles={"case-owner"},
            policy_service=InMemoryPolicyService({"PAY-7.4": True}), evidence=evidence,
            readback=Readback.ALWAYS, clock=lambda: NOW + timedelta(minutes=1)))
        for case in payment.synthetic_cases():
            outcomes.append(await _run_case(case, arm, sender, receiver))
    return outcomes


def summarise(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    """Per arm: agreement, regret and hard violations against the full evidence, what
    the gate admitted and refused, and the case owner's input size."""
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
        })
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    """The summary as a Markdown table."""
    lines = [
        "| arm | cases | agreement | mean regret | hard violations | gate accepted | "
        "gate refused (first reason) | injected error caught | case-owner runs | "
        "case-owner input, median chars | median items |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        refused = ", ".join(f"{k} × {v}" for k, v in row["gate_refused"].items()) or "none"
        lines.append(
            f"| `{row['arm']}` | {row['cases']} | {row['agreement']} | {row['regret']} | "
            f"{row['hard_violations']} | {row['gate_accepted']} | {refused} | "
            f"{row['injected_caught']} | "
            f"{row['case_owner_runs']} | {row['owner_input_chars_median']} | "
            f"{row['owner_input_items_median']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write report.json and report.md here")
    args = parser.parse_args(argv)
    outcomes = asyncio.run(run_experiment())
    rows = summarise(outcomes)
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
