"""The relay: sufficiency is not transitive (essay, Part IV).

Three agents handle one pump. A, the vibration analyst, certifies the failure
probability as an interval and records whether its two vibration sources agree. B,
the maintenance planner, schedules maintenance (ROUTINE or EXPEDITE, threshold 0.20)
and never needs the source agreement. C, the loop controller of a safety-critical
cooling loop, continues or stops the pump: it stops on an unresolved source conflict
and above 0.05.

1. **Local tests pass, the end-to-end test fails.** A's receipt is sufficient for B
   (the lab's minimal messages never need ``sources``). B's handover to C, written in
   the contract B's team designed (``loop-handover``, no ``sources``), is sufficient
   against the facts B holds. Against C's full-evidence reference the same messages
   fail: B dropped a field that was irrelevant to B and decisive for C.
2. **Natural-language re-encoding** (B summarises in prose, C's intake reads it back)
   softens the conflict into a preference and the interval into a point. The lab's
   relay and merge perturbations, applied to A's stable receipt, predict exactly
   these failures before any relay is built.
3. **Identity composition.** A stable receipt signed by A and carried unchanged
   through every hop, each hop adding its own signed transformation, passes: C
   decides from A's decisive state. B's re-encoded receipt, carried the same way, is
   refused: it is no longer the originator's (and B holds no grant to author it).

Run from the repository root::

    python examples/relay.py [--out DIR]
    handoffs lab run examples/relay.toml --out relay-report/
    handoffs lab run examples/relay-chain.toml --out relay-chain/   # exits 1: end to end

Synthetic data only: 24 analyses, four of each of six scenarios. The prose summariser
is a deterministic stand-in written to show two documented failure modes of free-text
relays; it is not a language model and measures no model's behaviour.
"""

from __future__ import annotations

import argparse
import enum
import hashlib
import json
import re
import uuid
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import attrs
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from handoffs.contracts import (
    Authority,
    Contract,
    GovernanceService,
    HardConstraint,
    Interval,
    LossMatrix,
    Receipt,
    ReceiptEncoder,
    Registry,
    Uncertainty,
    decision_field,
    issue_grant,
)
from handoffs.contracts.policy import Is, Over, Policy, Rule
from handoffs.examples.payment_lab import FixedClock
from handoffs.integrity import KeyRing, SigningKey
from handoffs.lab import (
    Edge,
    EndToEnd,
    Experiment,
    IterableCases,
    Strategy,
    Tolerances,
    Topology,
    run,
)
from handoffs.receivers import (
    CarriedReceiptReceiver,
    Decision,
    Gate,
    StrictContractReceiver,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
    carry,
)
from handoffs.receivers.chains import HandoffChain, IdentityCompositionReceiver

DECISION_TIME: Final = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
"""The instant the loop controller decides."""
ANALYST, PLANNER, CONTROLLER, POLICY = (
    "vibration-analyst", "maintenance-planner", "loop-controller", "policy-service")


class SourceAgreement(enum.Enum):
    """How the analyst's two vibration sources relate."""

    AGREE = "AGREE"
    PREFER_LOWER = "PREFER_LOWER"
    CONFLICT = "CONFLICT"


class PlanAction(enum.Enum):
    """The maintenance planner's actions."""

    ROUTINE = "ROUTINE"
    EXPEDITE = "EXPEDITE"


class LoopAction(enum.Enum):
    """The loop controller's actions."""

    CONTINUE = "CONTINUE"
    STOP = "STOP"


@attrs.frozen
class AnalysisState:
    """What the analyst establishes: a certified interval and the source agreement."""

    failure_probability: Interval = decision_field(
        "Certified probability that the pump fails in the next operating window.",
        minimum=0, maximum=1)
    sources: SourceAgreement = decision_field(
        "AGREE; PREFER_LOWER (they differ and the documented precedence rule picks the "
        "lower one); CONFLICT (an unresolved disagreement).",
        if_missing=SourceAgreement.AGREE)


@attrs.frozen
class HandoverState:
    """What B's team put in the handover to C: the failure probability only."""

    failure_probability: Interval = decision_field(
        "Certified probability that the pump fails in the next operating window.",
        minimum=0, maximum=1)


_C, _S = LoopAction.CONTINUE, LoopAction.STOP
_LOOP_LOSS: Final[LossMatrix[LoopAction]] = LossMatrix(
    {(_C, _C): 0, (_S, _S): 0, (_S, _C): 2, (_C, _S): 40})
_UNSAFE: Final = HardConstraint("unsafe-continue", chosen=_C, allowed_references=frozenset({_C}),
                                description="CONTINUE when the loop should stop.")
_ABOVE: Final = Rule("risk-above-threshold", Over("failure_probability", 0.05), _S)

PLANNING: Final = Contract(
    name="pump-planning", version="1.0.0",
    description="The analyst hands the failure analysis to the maintenance planner, who "
                "schedules ROUTINE or EXPEDITE maintenance.",
    actions=PlanAction, state=AnalysisState,
    policy=Policy(rules=(Rule("expedite", Over("failure_probability", 0.2),
                              PlanAction.EXPEDITE),),
                  default=PlanAction.ROUTINE, default_name="routine"),
    loss=LossMatrix({(PlanAction.ROUTINE, PlanAction.ROUTINE): 0,
                     (PlanAction.EXPEDITE, PlanAction.EXPEDITE): 0,
                     (PlanAction.ROUTINE, PlanAction.EXPEDITE): 10,
                     (PlanAction.EXPEDITE, PlanAction.ROUTINE): 1}),
    fail_closed_action=PlanAction.EXPEDITE,
    counterfactual_trigger="Recompute if the failure analysis changes.",
)
"""Edge A → B: the planner reads the failure probability only."""

HANDOVER: Final = Contract(
    name="loop-handover", version="1.0.0",
    description="The planner hands its conclusion to the loop controller, which continues "
                "or stops the pump.",
    actions=LoopAction, state=HandoverState,
    policy=Policy(rules=(_ABOVE,), default=_C, default_name="continue"),
    loss=_LOOP_LOSS, hard_constraints=(_UNSAFE,), fail_closed_action=_S,
    counterfactual_trigger="Recompute if the failure probability changes.",
)
"""Edge B → C as B's team designed it: no source agreement."""

SAFETY: Final = Contract(
    name="loop-safety", version="1.0.0",
    description="The loop controller's full decision: continue or stop the pump of a "
                "safety-critical cooling loop.",
    actions=LoopAction, state=AnalysisState,
    policy=Policy(rules=(Rule("unresolved-conflict",
                              Is("sources", SourceAgreement.CONFLICT), _S), _ABOVE),
                  default=_C, default_name="continue"),
    loss=_LOOP_LOSS, hard_constraints=(_UNSAFE,), fail_closed_action=_S,
    counterfactual_trigger="Recompute if the failure analysis or the source agreement "
                           "changes.",
)
"""C's contract on A's full analysis: the end-to-end reference."""


# --------------------------------------------------------------------------- cases


@attrs.frozen
class Analysis:
    """The analyst's full record of one case (A's evidence)."""

    case_id: str
    lo: float
    hi: float
    sources: SourceAgreement

    def analysis_state(self) -> AnalysisState:
        """A's decisive state."""
        return AnalysisState(failure_probability=Interval(self.lo, self.hi),
                             sources=self.sources)

    def handover_state(self) -> HandoverState:
        """What B holds for C: the interval it received from A."""
        return HandoverState(failure_probability=Interval(self.lo, self.hi))

    def uncertainty(self) -> Uncertainty:
        """CONFLICT when the sources conflict."""
        if self.sources is SourceAgreement.CONFLICT:
            return Uncertainty.CONFLICT
        return Uncertainty.RESOLVED

    @property
    def evidence_refs(self) -> tuple[str, ...]:
        """The vibration readings."""
        return (f"evidence://vibration/{self.case_id}/readings",)


SCENARIOS: Final = (
    ("calm", 0.01, 0.03, SourceAgreement.AGREE),
    ("conflict", 0.02, 0.04, SourceAgreement.CONFLICT),
    ("preferred", 0.02, 0.04, SourceAgreement.PREFER_LOWER),
    ("elevated", 0.06, 0.09, SourceAgreement.AGREE),
    ("straddling", 0.03, 0.06, SourceAgreement.AGREE),
    ("high", 0.25, 0.35, SourceAgreement.AGREE),
)
"""(name, interval, source agreement) of the six scenarios."""


CLAIMS_VERIFIED_UPSTREAM = (
    "the receivers act on what a well-formed message says; the example trusts its "
    "senders' claims (the lab measures what a false one would cost)")
"""The example's waiver of the gate's default bound on surviving catastrophic falsehoods."""
_WAIVED = Tolerances(claims_verified_upstream=CLAIMS_VERIFIED_UPSTREAM)

def analyses(variants: int = 4) -> Iterator[Analysis]:
    """The synthetic fixture: ``variants`` analyses of each scenario."""
    for name, lo, hi, sources in SCENARIOS:
        for v in range(variants):
            yield Analysis(case_id=f"{name}-{v + 1:02d}", lo=lo, hi=hi, sources=sources)


def safety_reference(case: Analysis) -> str:
    """C's full-evidence reference: the safety policy on A's whole analysis."""
    return str(SAFETY.decide(case.analysis_state()).value)


def _stamp(sender: str, receiver: str, policy_version: str) -> GovernanceService:
    return GovernanceService(sender=sender, receiver=receiver, policy_version=policy_version,
                             valid_until=datetime(2027, 1, 1, tzinfo=UTC))


GOVERNANCE_AB: Final = _stamp(ANALYST, PLANNER, "PLAN-2")
"""A → B."""
GOVERNANCE_BC: Final = _stamp(PLANNER, CONTROLLER, "LOOP-1")
"""B → C: every message C gets in this example comes through B."""


# ------------------------------------------------------------------ receivers


def _unsigned_gate(identity: str, contract: Contract[Any, Any]) -> Gate:
    # **Unsafe by declaration**: the unsigned lab messages need UnsafeNoProofs.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeConfigurationWarning)
        return Gate(identity=identity, trust=UnsafeNoProofs(), registry=Registry.of(contract),
                    replay=None, clock=FixedClock(DECISION_TIME))


def planner() -> StrictContractReceiver:
    """B, deciding from A's planning receipt (unsigned, **unsafe** gate)."""
    return StrictContractReceiver(_unsigned_gate(PLANNER, PLANNING))


def handover_controller() -> StrictContractReceiver:
    """C, deciding from B's typed handover (unsigned, **unsafe** gate)."""
    return StrictContractReceiver(_unsigned_gate(CONTROLLER, HANDOVER))


def safety_controller() -> StrictContractReceiver:
    """C, deciding from a loop-safety receipt (unsigned, **unsafe** gate)."""
    return StrictContractReceiver(_unsigned_gate(CONTROLLER, SAFETY))


# ------------------------------------------------------------------ encoders


def analyst_encoder() -> ReceiptEncoder[Analysis, AnalysisState, PlanAction]:
    """A → B: the whole analysis in the planning contract."""
    return ReceiptEncoder(contract=PLANNING, state_of=Analysis.analysis_state,
                          uncertainty_of=Analysis.uncertainty, name="analysis_receipt")


def handover_encoder() -> ReceiptEncoder[Analysis, HandoverState, LoopAction]:
    """B → C: B's typed handover, exact interval, no source agreement."""
    return ReceiptEncoder(contract=HANDOVER, state_of=Analysis.handover_state,
                          name="typed_handover")


def stable_encoder() -> ReceiptEncoder[Analysis, AnalysisState, LoopAction]:
    """A's loop-safety receipt, which B forwards unchanged."""
    return ReceiptEncoder(contract=SAFETY, state_of=Analysis.analysis_state,
                          uncertainty_of=Analysis.uncertainty, name="stable_receipt")


_PHRASES: Final = {
    SourceAgreement.AGREE: "the two vibration sources agree",
    SourceAgreement.PREFER_LOWER: "the readings lean towards the lower source",
    # A summary that keeps the broad conclusion has no words for an open conflict.
    SourceAgreement.CONFLICT: "the readings lean towards the lower source",
}
_ABOUT: Final = re.compile(r"about (\d+(?:\.\d+)?)%")


def summarise(state: AnalysisState) -> str:
    """B's prose summary for C: the midpoint as "about x %", one phrase for the sources."""
    interval = state.failure_probability
    mid = (interval.lo + interval.hi) / 2
    return f"Failure risk about {mid:.1%}; {_PHRASES[state.sources]}."


def read_summary(text: str) -> AnalysisState:
    """C's intake: read B's prose back into the loop-safety state.

    Raises:
        ValueError: the text states no failure risk.
    """
    found = _ABOUT.search(text)
    if found is None:
        raise ValueError(f"no failure risk in {text!r}")
    p = float(found.group(1)) / 100
    if "agree" in text:
        sources = SourceAgreement.AGREE
    elif "lean towards the lower" in text:
        sources = SourceAgreement.PREFER_LOWER
    else:
        sources = SourceAgreement.CONFLICT
    return AnalysisState(failure_probability=Interval.point(p), sources=sources)


@attrs.frozen
class ProseRelayEncoder:
    """B re-encodes A's analysis as prose; C's intake reads it back into loop-safety
    form. The conflict becomes a preference and the interval a point.
    """

    name: str = "prose_relay"

    def encode(self, evidence: Analysis) -> dict[str, Any]:
        """The re-read receipt content, with the prose as ``notes``."""
        text = summarise(evidence.analysis_state())
        state = read_summary(text)
        return {
            "proposed_action": SAFETY.decide(state).value,
            "decision_state": {
                "failure_probability": {"lo": state.failure_probability.lo,
                                        "hi": state.failure_probability.hi},
                "sources": state.sources.value,
            },
            "uncertainty": Uncertainty.RESOLVED.value,
            "counterfactual_trigger": SAFETY.counterfactual_trigger,
            "notes": text,
        }


# ------------------------------------------------------------- signed chains


@attrs.frozen
class Parties:
    """The example's keys and the controller's pinned key ring."""

    analyst: SigningKey
    planner: SigningKey
    policy_service: SigningKey
    ring: KeyRing

    @classmethod
    def of_example(cls) -> Parties:
        """The example's fixed keys: both agents may sign investigator hops; only the
        policy service issues grants.

        Each secret is the SHA-256 of a public label, so that every run signs the same
        bytes (signatures, and so message sizes, reproduce from run to run). Such keys
        are public by construction: never use them outside an example.
        """
        analyst, planner_key, policy = (
            SigningKey(Ed25519PrivateKey.from_private_bytes(
                hashlib.sha256(f"handoffs relay example: {name}".encode()).digest()))
            for name in (ANALYST, PLANNER, POLICY))
        ring = KeyRing()
        since = DECISION_TIME - timedelta(days=30)
        for key, name, roles, purpose in (
                (analyst, ANALYST, {"investigator"}, "assertionMethod"),
                (planner_key, PLANNER, {"investigator"}, "assertionMethod"),
                (policy, POLICY, {"policy-service"}, "capabilityDelegation")):
            ring = ring.enrol(key.public_key_multibase, controller=name, roles=roles,
                              not_before=since, purposes={purpose})
        return cls(analyst=analyst, planner=planner_key, policy_service=policy, ring=ring)


PARTIES: Final = Parties.of_example()
"""The encoders sign and the receivers verify with these."""
_RECEIPTS: Final = uuid.UUID("7a0c2f55-0d55-4e8e-9a55-3f1b6f0c2a11")


def _signed_receipt(case: Analysis, content: dict[str, Any], *, sender: str,
                    key: SigningKey, granted: bool) -> dict[str, Any]:
    until = DECISION_TIME + timedelta(hours=4)
    service = GovernanceService(sender=sender, receiver=CONTROLLER, policy_version="LOOP-1",
                                valid_until=until)
    receipt = Receipt.build(
        SAFETY, content, service.stamp(case_id=case.case_id, evidence_refs=case.evidence_refs),
        id=f"urn:uuid:{uuid.uuid5(_RECEIPTS, f'{sender}/{case.case_id}')}")
    grant = issue_grant(
        PARTIES.policy_service, issuer=POLICY, subject=sender, audience=CONTROLLER,
        contract=SAFETY, case_id=case.case_id, policy_version="LOOP-1",
        authority={Authority.ADVISE}, valid_until=until,
        created=DECISION_TIME - timedelta(hours=1),
        grant_id=f"urn:uuid:{uuid.uuid5(_RECEIPTS, f'grant/{sender}/{case.case_id}')}",
    ) if granted else None
    return receipt.sign(key, grant=grant,
                        created=DECISION_TIME - timedelta(minutes=50)).to_json()


@attrs.frozen
class SignedCarrierEncoder:
    """A carried-receipt message: a signed loop-safety receipt and the chain A → B → C.

    With ``prose=False`` it carries A's receipt unchanged, each hop pinning it. With
    ``prose=True`` B replaces it with its own re-encoding (signed by B, which holds no
    grant for loop-safety receipts) and pins that one in its hop.
    """

    prose: bool = False

    @property
    def name(self) -> str:
        """``signed_carrier`` or ``signed_prose_carrier``."""
        return "signed_prose_carrier" if self.prose else "signed_carrier"

    def encode(self, evidence: Analysis) -> dict[str, Any]:
        """``{"receipt": ..., "chain": ...}``."""
        original = _signed_receipt(evidence, stable_encoder().encode(evidence),
                                   sender=ANALYST, key=PARTIES.analyst, granted=True)
        carried = original
        if self.prose:
            carried = _signed_receipt(evidence, ProseRelayEncoder().encode(evidence),
                                      sender=PLANNER, key=PARTIES.planner, granted=False)
        chain = HandoffChain.start(case_id=evidence.case_id,
                                   id=f"urn:uuid:{uuid.uuid5(_RECEIPTS, evidence.case_id)}")
        chain = chain.add_hop(PARTIES.analyst, sender=ANALYST, role="investigator",
                              receiver=PLANNER, authority="ADVISE",
                              valid_until=DECISION_TIME + timedelta(hours=3),
                              transformation=carry("certified the failure probability and the "
                                                   "source agreement", original),
                              created=DECISION_TIME - timedelta(minutes=40),
                              proof_id=_hop_proof_id(evidence, 0, self.prose))
        note = ("summarised in prose for the loop controller" if self.prose
                else "forwarded unchanged; maintenance scheduled")
        chain = chain.add_hop(PARTIES.planner, role="investigator", receiver=CONTROLLER,
                              authority="ADVISE", valid_until=DECISION_TIME + timedelta(hours=2),
                              transformation=carry(note, carried),
                              created=DECISION_TIME - timedelta(minutes=30),
                              proof_id=_hop_proof_id(evidence, 1, self.prose))
        return CarriedReceiptReceiver.message(carried, chain.to_json())


def _hop_proof_id(evidence: Analysis, hop: int, prose: bool) -> str:
    """A hop proof's id, fixed per case, hop and strategy (the example reproduces)."""
    return f"urn:uuid:{uuid.uuid5(_RECEIPTS, f'hop/{evidence.case_id}/{hop}/{prose}')}"


def signed_carrier_encoder() -> SignedCarrierEncoder:
    """A's receipt carried unchanged."""
    return SignedCarrierEncoder(prose=False)


def signed_prose_encoder() -> SignedCarrierEncoder:
    """B's re-encoding carried in its place."""
    return SignedCarrierEncoder(prose=True)


def chain_receiver() -> IdentityCompositionReceiver:
    """C's identity-composition receiver (ADVISE chains: no approval required).

    Without a replay store, as the gate below: the lab decides the same chains again
    under every perturbation. A deployment keeps the default store (or a shared one).
    """
    return IdentityCompositionReceiver(keyring=PARTIES.ring, identity=CONTROLLER,
                                       clock=FixedClock(DECISION_TIME), required_roles=(),
                                       fail_closed_action="STOP", replay=None)


def carrier() -> CarriedReceiptReceiver:
    """C, deciding a carried receipt: the chain, the binding, then the signed receipt."""
    gate = Gate(identity=CONTROLLER, trust=PARTIES.ring, registry=Registry.of(SAFETY),
                replay=None, clock=FixedClock(DECISION_TIME))
    return CarriedReceiptReceiver(chain_receiver=chain_receiver(),
                                  receipt_receiver=StrictContractReceiver(gate),
                                  fail_closed_action="STOP")


# --------------------------------------------------------------------- experiments


def _cases() -> IterableCases:
    return IterableCases(analyses, description="python:examples.relay.analyses")


def edge_ab_experiment() -> Experiment:
    """Local test of edge A → B."""
    return Experiment(
        name="relay-edge-ab", contract=PLANNING, cases=_cases(),
        strategies=(Strategy(name="a_to_b", encoder=analyst_encoder(), receiver=planner(),
                             gated=True),),
        governance=GOVERNANCE_AB, state_of=Analysis.analysis_state,
        tolerances=_WAIVED,
    )


def edge_bc_experiment() -> Experiment:
    """Local test of edge B → C: the reference is C's handover policy on what B holds."""
    return Experiment(
        name="relay-edge-bc", contract=HANDOVER, cases=_cases(),
        strategies=(Strategy(name="b_to_c", encoder=handover_encoder(),
                             receiver=handover_controller(), gated=True),),
        governance=GOVERNANCE_BC, state_of=Analysis.handover_state,
        tolerances=_WAIVED,
    )


def end_to_end_experiment() -> Experiment:
    """The same messages and receiver as :func:`edge_bc_experiment`, scored against C's
    full-evidence reference instead.
    """
    return attrs.evolve(edge_bc_experiment(), name="relay-end-to-end",
                        reference=safety_reference)


def relay_topology() -> Topology:
    """A → B → C in one run: each edge's local test and the end-to-end test side by side.

    Edge B → C carries the failure probability B received, nothing else; the end-to-end
    reference is C's safety policy on A's whole analysis.
    """
    return Topology(
        name="relay-chain", cases=_cases(),
        description="The analyst, the planner and the loop controller: each edge, and "
                    "the controller's decision against A's whole analysis.",
        edges=(
            Edge(sender=ANALYST, to=PLANNER, contract=PLANNING, encoder=analyst_encoder(),
                 state_of=Analysis.analysis_state, receiver=planner(),
                 governance=GOVERNANCE_AB,
                 tolerances=_WAIVED),
            Edge(sender=PLANNER, to=CONTROLLER, contract=HANDOVER,
                 carries={"failure_probability": "failure_probability"},
                 receiver=handover_controller(), governance=GOVERNANCE_BC,
                 tolerances=_WAIVED),
        ),
        end_to_end=EndToEnd(contract=SAFETY, state_of=Analysis.analysis_state,
                            tolerances=_WAIVED),
    )


def relay_experiment() -> Experiment:
    """Everything C could receive from B about A's analysis, on the loop-safety contract."""
    return Experiment(
        name="relay-loop-safety",
        description="What reaches the loop controller through the planner: A's stable "
                    "receipt, B's prose, and both carried through a signed chain.",
        contract=SAFETY, cases=_cases(),
        strategies=(
            Strategy(name="stable_receipt", encoder=stable_encoder(),
                     receiver=safety_controller(), gated=True),
            Strategy(name="prose_relay", encoder=ProseRelayEncoder(),
                     receiver=safety_controller(), receipts=True),
            Strategy(name="signed_carrier", encoder=signed_carrier_encoder(),
                     receiver=carrier(), gated=True),
            Strategy(name="signed_prose_carrier", encoder=signed_prose_encoder(),
                     receiver=carrier()),
        ),
        governance=GOVERNANCE_BC, state_of=Analysis.analysis_state,
        subject="stable_receipt",
        tolerances=_WAIVED,
        assumptions={
            "case_mix": "Four synthetic analyses for each of six scenarios.",
            "receiver": "The loop controller recomputes from loop-safety receipts; a "
                        "carried receipt is admitted only with its signed chain.",
            "loss": "An unnecessary stop costs 2, a wrong continue 40.",
        },
    )


def widened_authority() -> Decision:
    """B turns its summary into an instruction: a DECIDE hop no approval grants."""
    case = next(analyses())
    message = SignedCarrierEncoder(prose=True).encode(case)
    chain = HandoffChain.start(case_id=case.case_id)
    chain = chain.add_hop(PARTIES.analyst, sender=ANALYST, role="investigator",
                          receiver=PLANNER, authority="ADVISE",
                          valid_until=DECISION_TIME + timedelta(hours=3),
                          transformation="certified the failure probability",
                          created=DECISION_TIME - timedelta(minutes=40))
    chain = chain.add_hop(PARTIES.planner, role="investigator", receiver=CONTROLLER,
                          authority="DECIDE", action="CONTINUE",
                          valid_until=DECISION_TIME + timedelta(hours=2),
                          transformation=message["receipt"]["notes"],
                          created=DECISION_TIME - timedelta(minutes=30))
    return chain_receiver().receive(chain.to_json())


# -------------------------------------------------------------------------- report


def _row(report: dict[str, Any], strategy: str, perturbation: str = "none") -> dict[str, Any]:
    for row in report["results"]:
        if row["strategy"] == strategy and row["perturbation"] == perturbation:
            return dict(row)
    raise KeyError(f"{strategy} under {perturbation}")


def _line(report: dict[str, Any], strategy: str, label: str,
          perturbation: str = "none") -> str:
    row = _row(report, strategy, perturbation)
    return (f"  {label:<46} agreement {row['agreement']:.2f}  mean regret "
            f"{row['mean_regret']:5.2f}  hard violations {row['hard_violations']}")


_MERGE: Final = "merge-enum-values:decision_state.sources:CONFLICT->PREFER_LOWER"
_COLLAPSE: Final = "relay:2:soften:collapse"


def main(argv: list[str] | None = None) -> int:
    """Run the relay's experiments, print the conclusion, optionally write the reports."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--out", type=Path, help="write the reports here")
    args = parser.parse_args(argv)
    reports = {
        "edge-ab": run(edge_ab_experiment()).report,
        "edge-bc": run(edge_bc_experiment()).report,
        "end-to-end": run(end_to_end_experiment()).report,
        "relay": run(relay_experiment()).report,
    }
    ab, bc, e2e, relay = (reports[k] for k in ("edge-ab", "edge-bc", "end-to-end", "relay"))
    print("The relay: sufficiency is not transitive.\n")
    print("1. Local tests and the end-to-end test (typed messages)")
    print(_line(ab, "a_to_b", "A -> B, planner's reference"))
    print(f"     B's minimal messages never need: "
          f"{', '.join(ab['minimal_messages']['fields_never_needed'])}")
    print(_line(bc, "b_to_c", "B -> C, handover reference (what B holds)"))
    print(_line(e2e, "b_to_c", "B -> C, C's full-evidence reference"))
    print("\n2. Re-encoding in prose, and what the lab predicts from A's stable receipt")
    case = next(c for c in analyses() if c.sources is SourceAgreement.CONFLICT)
    print(f"     A's state: {case.lo:g} <= p <= {case.hi:g}, sources {case.sources.value}; "
          f"B writes: \"{summarise(case.analysis_state())}\"")
    print(_line(relay, "stable_receipt", "stable receipt (A's state, forwarded)"))
    print(_line(relay, "prose_relay", "prose relay (point, preference)"))
    print(_line(relay, "stable_receipt", "stable receipt under the relay perturbation",
                _COLLAPSE))
    print(_line(relay, "stable_receipt", "stable receipt, CONFLICT merged into preference",
                _MERGE))
    print("\n3. Identity composition (signed receipts and chains)")
    print(_line(relay, "signed_carrier", "A's receipt carried with signed hops"))
    print(_line(relay, "signed_prose_carrier", "B's re-encoding carried in its place"))
    refused = carrier().receive(SignedCarrierEncoder(prose=True).encode(case))
    print(f"     refused: {refused.verdict.value} {refused.action}: "
          f"{', '.join(sorted({r.code for r in refused.reasons}))}")
    widened = widened_authority()
    print(f"     B's prose sent as a DECIDE hop: {widened.verdict.value}: "
          f"{', '.join(r.code for r in widened.reasons)}")
    end = _row(e2e, "b_to_c")
    print(f"\nConclusion: every edge passes its local test, yet end to end the controller "
          f"agrees on {end['agreement']:.0%} of cases with {end['hard_violations']} hard "
          "violations. Carry one stable receipt through every hop and add signed "
          "transformations, or let the last receiver go back to the evidence.")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        for name, value in reports.items():
            (args.out / f"report-{name}.json").write_text(json.dumps(value, indent=2) + "\n",
                                                          encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
