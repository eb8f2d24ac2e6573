"""A contract with every decision-field kind (pump maintenance) and Hypothesis
strategies of receipts, shared by the receipt, diff and gate tests. Test modules import
it from here rather than from one another.
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Any

import attrs
from hypothesis import strategies as st

from handoffs.contracts import (
    Authority,
    Contract,
    DecisionContent,
    EvidenceRef,
    FieldKind,
    FieldSpec,
    Governance,
    Interval,
    LossMatrix,
    Receipt,
    Registry,
    Uncertainty,
    decision_field,
)
from handoffs.contracts.policy import Over, Policy, Rule
from handoffs.examples.payment import PAYMENT_RELEASE

__all__ = [
    "PUMP",
    "REGISTRY",
    "Mode",
    "PumpState",
    "Step",
    "digests",
    "evidence",
    "identifiers",
    "receipts",
    "states",
    "times",
    "uris",
    "values_of",
]


class Mode(enum.Enum):
    AUTO = "AUTO"
    MANUAL = "MANUAL"
    OFF = "OFF"


class Step(enum.Enum):
    CONTINUE = "CONTINUE"
    STOP = "STOP"


@attrs.frozen
class PumpState:
    mode: Mode = decision_field("How the pump is operated.")
    cycles: int = decision_field("Cycles since the last inspection.", minimum=0,
                                 maximum=1_000_000)
    temperature: float = decision_field("Bearing temperature in °C.", minimum=-40.0,
                                        maximum=200.0)
    failure_probability: Interval = decision_field(
        "Certified probability of failure in the next window.", minimum=0.0, maximum=1.0)
    running: bool = decision_field("Whether the pump is running.")


PUMP = Contract(
    name="pump-receipts",
    version="1.0.0",
    description="A maintenance specialist hands a pump to the controller.",
    actions=Step,
    state=PumpState,
    policy=Policy(rules=(Rule("failure-likely", Over("failure_probability", 0.05), Step.STOP),),
                  default=Step.CONTINUE),
    loss=LossMatrix({(Step.CONTINUE, Step.CONTINUE): 0, (Step.STOP, Step.STOP): 0,
                     (Step.STOP, Step.CONTINUE): 2, (Step.CONTINUE, Step.STOP): 40}),
    fail_closed_action=Step.STOP,
    counterfactual_trigger="Recompute if the failure estimate or its cost changes.",
    max_notes_length=200,
)
REGISTRY = Registry.of(PAYMENT_RELEASE, PUMP)

# ------------------------------------------------------------------ strategies

identifiers = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:/@-]{0,40}", fullmatch=True)
uris = st.from_regex(r"[a-z][a-z0-9+.-]{0,8}:[!-~]{1,60}", fullmatch=True)
digests = st.from_regex(r"sha256:[0-9a-f]{64}", fullmatch=True)
evidence = st.one_of(uris.map(EvidenceRef), st.builds(EvidenceRef, uris, digests))
times = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(9999, 12, 31),
                     timezones=st.just(UTC))


def values_of(spec: FieldSpec) -> st.SearchStrategy[Any]:
    """Every valid value of one decision field."""
    lo, hi = spec.minimum, spec.maximum
    if spec.kind is FieldKind.BOOL:
        return st.booleans()
    if spec.kind is FieldKind.ENUM:
        return st.sampled_from(list(spec.enum_type or ()))
    if spec.kind is FieldKind.INT:
        return st.integers(int(lo or 0), int(hi or 0))
    floats = st.floats(lo, hi, allow_nan=False, allow_infinity=False)
    if spec.kind is FieldKind.FLOAT:
        return floats
    return st.tuples(floats, floats).map(lambda pair: Interval(*sorted(pair)))


def states(contract: Contract[Any, Any]) -> st.SearchStrategy[Any]:
    """Decision states of ``contract``; every new field kind joins ``values_of``."""
    return st.builds(contract.state, **{spec.name: values_of(spec) for spec in contract.fields})


@st.composite
def receipts(draw: st.DrawFn, contract: Contract[Any, Any]) -> Receipt[Any, Any]:
    content = DecisionContent(
        proposed_action=draw(st.sampled_from(list(contract.actions))),
        decision_state=draw(states(contract)),
        uncertainty=draw(st.sampled_from(list(Uncertainty))),
        counterfactual_trigger=draw(st.none() | st.text(min_size=1, max_size=40)),
        notes=draw(st.none() | st.text(max_size=contract.max_notes_length)),
    )
    governance = Governance(
        case_id=draw(identifiers), sender=draw(identifiers), receiver=draw(identifiers),
        authority=draw(st.sampled_from(list(Authority))), policy_version=draw(identifiers),
        valid_until=draw(times), evidence_refs=draw(st.lists(evidence, min_size=1, max_size=4)),
    )
    receipt_id = f"urn:uuid:{draw(st.uuids())}"
    return Receipt.build(contract, content, governance, id=receipt_id)
