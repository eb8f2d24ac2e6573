"""Experiments: a contract, a case source, a reference, strategies, perturbations, tolerances.

An :class:`Experiment` is the essay's seven-step release experiment written down:
the receivers are frozen inside :class:`Strategy` objects, the full-evidence
reference is the contract's policy applied to the true decision state (or a
declared procedure), the consequence is the contract's loss matrix and hard
constraints, the candidate encodings are the strategies' encoders, and the
perturbations ablate, coarsen, mutate, control and change the boundary.

The experiment as the user declares it: its parts, their validation and the default
readers of a case. The case sources are in :mod:`handoffs.lab._sources`, the reference
receiver in :mod:`handoffs.lab._reference`, value conversion in
:mod:`handoffs.lab._values` and the errors in :mod:`handoffs.errors`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from handoffs._errors import ExperimentError, refuse_unknown
from handoffs.contracts import (
    Authority,
    Contract,
    Encoder,
    EvidenceRef,
    GovernanceService,
    ReceiptEncoder,
)
from handoffs.lab._fingerprint import receiver_fingerprint
from handoffs.lab._reference import ReferenceReceiver
from handoffs.lab._sources import CaseSource
from handoffs.lab._values import jsonable
from handoffs.receivers import Receiver

__all__ = [
    "Experiment",
    "Strategy",
    "Tolerances",
    "default_case_id",
    "default_case_json",
    "default_evidence_refs",
    "default_state_of",
]


# --------------------------------------------------------------------- strategies


def _check_name(_: Any, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value or any(c in value for c in " \t\n/"):
        raise ExperimentError(f"{attribute.name} {value!r} must be a non-empty name without "
                              "spaces or slashes")


@attrs.frozen(kw_only=True)
class Strategy:
    """One handoff strategy: an encoder paired with a frozen receiver.

    Attributes:
        name: strategy name, unique in the experiment (e.g. ``"decision_contract"``).
        encoder: writes message content from the sender's evidence.
        receiver: decides each message (the essay's "strict" receiver for it).
        authority: the authority the governance service stamps (``DECIDE`` makes the
            receiver an actuator: the essay's negative control).
        receipts: whether messages are contract receipts (named contract and receipt
            id; schema validity is measured). Defaults to true for a
            :class:`~handoffs.contracts.ReceiptEncoder`.
        gated: whether the release gate applies to this strategy.
    """

    name: str = attrs.field(validator=_check_name)
    encoder: Encoder[Any]
    receiver: Receiver
    authority: Authority = Authority.ADVISE
    receipts: bool = attrs.field()
    gated: bool = False

    @receipts.default
    def _receipts_default(self) -> bool:
        return isinstance(self.encoder, ReceiptEncoder)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready description (the report's ``experiment.strategies`` rows)."""
        record: Mapping[str, Any] = getattr(self.receiver, "record", None) or {}
        return {
            "name": self.name,
            "encoder": str(getattr(self.encoder, "name", type(self.encoder).__name__)),
            "receiver": str(getattr(self.receiver, "name", type(self.receiver).__name__)),
            "authority": self.authority.value,
            "deterministic": bool(self.receiver.deterministic),
            "receipts": self.receipts,
            "gated": self.gated,
            "record": dict(record) if isinstance(record, Mapping) else {},
            "receiver_fingerprint": receiver_fingerprint(self.receiver),
        }


def _non_negative(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                              or not value >= 0
                              or (isinstance(value, float) and not math.isfinite(value))):
        raise ExperimentError(f"tolerance {attribute.name} must be a finite number >= 0, "
                              f"got {value!r}", json_path=f"$.{attribute.name}")


def _count(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or value < 0):
        raise ExperimentError(f"tolerance {attribute.name} must be an integer >= 0, "
                              f"got {value!r}", json_path=f"$.{attribute.name}")


def _flag(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, bool):
        raise ExperimentError(f"tolerance {attribute.name} must be true or false, "
                              f"got {value!r}", json_path=f"$.{attribute.name}")


def _waiver(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ExperimentError(f"tolerance {attribute.name} names what verifies the claims "
                              f"upstream (a non-empty string), got {value!r}",
                              json_path=f"$.{attribute.name}")


def _figures(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in ("population", "stress"):
        raise ExperimentError(f"tolerance {attribute.name} must be 'population' or 'stress', "
                              f"got {value!r}", json_path=f"$.{attribute.name}")


def _str_tuple(value: Any) -> Any:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple):
        return tuple(value)
    return value


def _perturbation_ids(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if (not isinstance(value, tuple) or not value
            or not all(isinstance(v, str) and v for v in value)):
        raise ExperimentError(f"tolerance {attribute.name} must be a perturbation id or a "
                              f"non-empty list of them ('none' is the unperturbed run), "
                              f"got {value!r}", json_path=f"$.{attribute.name}")


@attrs.frozen(kw_only=True)
class Tolerances:
    """Declared release tolerances: one threshold per metric, never a blended score.

    A gated strategy passes under each of ``gate_perturbations`` when every metric
    is within its threshold. Hard violations are 0 unless declared otherwise.

    Attributes:
        agreement_epsilon: ε; pass when ``1 - agreement <= ε``.
        regret_delta: δ; pass when mean consequence-weighted regret ``<= δ``.
        max_regret: bound on the largest single regret (``None``: no bound).
        hard_violations: hard violations allowed (default 0).
        governance_failures: messages allowed to fail the governance check.
        max_mean_bytes: bound on mean payload bytes (``None``: no bound).
        surviving_catastrophic_falsehoods: catastrophic falsehoods a gated receiver
            may let through (default 0: what cannot be averaged is bounded; ``None``:
            reported, not gated).
        claims_verified_upstream: a named waiver of the bound on surviving
            catastrophic falsehoods: what verifies the sender's claims before they
            reach this receiver (readback, signatures over the evidence, ...). Recorded
            in the gate, the artefact and printed beside the verdict.
        max_tokens: model tokens (in + out, every strategy) the run may spend
            (``None``: no bound); the report's ``cost`` totals are checked.
        controls_must_fail: fail the gate when a falsifying control (no message,
            shuffled, constant) meets the agreement and regret thresholds.
        gate_perturbations: perturbation ids the gated strategies must withstand.
        require_proof: fail a gated row whose verdict is ``unknown`` or ``sampled``
            (nothing proved it either way).
        default_filling_epsilon / default_filling_delta / default_filling_hard_violations:
            tolerances of the default-filling (semantic) receiver, which takes a
            missing field at its declared ``if_missing``: checked, like ε, δ and hard
            violations, on its population figures under each subject row that removes
            a decision field (``None``: not gated).
        figures: what ε and δ are compared with: ``"population"`` (default: the
            pessimistic end of the population interval, i.e. the upper bound of the
            disagreement rate and of the mean regret; a tolerance of 0 is checked on the
            count, since no finite sample bounds a rate at 0) or ``"stress"`` (the
            population check and the generated cases' figures too: the stricter view).
            The controls are judged on the population figures either way.
    """

    agreement_epsilon: float = attrs.field(default=0.0, validator=_non_negative)
    regret_delta: float = attrs.field(default=0.0, validator=_non_negative)
    max_regret: float | None = attrs.field(default=None, validator=_non_negative)
    hard_violations: int = attrs.field(default=0, validator=_count)
    governance_failures: int = attrs.field(default=0, validator=_count)
    max_mean_bytes: float | None = attrs.field(default=None, validator=_non_negative)
    surviving_catastrophic_falsehoods: int | None = attrs.field(default=0, validator=_count)
    claims_verified_upstream: str | None = attrs.field(default=None, validator=_waiver)
    controls_must_fail: bool = attrs.field(default=True, validator=_flag)
    gate_perturbations: tuple[str, ...] = attrs.field(
        default=("none",), converter=_str_tuple, validator=_perturbation_ids)
    max_tokens: int | None = attrs.field(default=None, validator=_count)
    require_proof: bool = attrs.field(default=False, validator=_flag)
    figures: str = attrs.field(default="population", validator=_figures)
    default_filling_epsilon: float | None = attrs.field(default=None, validator=_non_negative)
    default_filling_delta: float | None = attrs.field(default=None, validator=_non_negative)
    default_filling_hard_violations: int | None = attrs.field(default=None, validator=_count)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (the report's ``tolerances`` and the artefact's regret budget)."""
        return {
            "agreement_epsilon": self.agreement_epsilon,
            "regret_delta": self.regret_delta,
            "max_regret": self.max_regret,
            "hard_violations": self.hard_violations,
            "governance_failures": self.governance_failures,
            "max_mean_bytes": self.max_mean_bytes,
            "surviving_catastrophic_falsehoods": self.surviving_catastrophic_falsehoods,
            "claims_verified_upstream": self.claims_verified_upstream,
            "controls_must_fail": self.controls_must_fail,
            "gate_perturbations": list(self.gate_perturbations),
            "max_tokens": self.max_tokens,
            "require_proof": self.require_proof,
            "figures": self.figures,
            "default_filling_epsilon": self.default_filling_epsilon,
            "default_filling_delta": self.default_filling_delta,
            "default_filling_hard_violations": self.default_filling_hard_violations,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Tolerances:
        """Read the JSON (or TOML) form; unknown keys are an error."""
        refuse_unknown(data, (a.name for a in attrs.fields(cls)), path="tolerances",
                       noun="tolerance")
        try:
            return cls(**dict(data))
        except TypeError as exc:
            raise ExperimentError(f"bad tolerances: {exc}") from exc



# ---------------------------------------------------------------------- experiment


def _attr_or_key(name: str) -> Callable[[Any], Any]:
    def get(evidence: Any) -> Any:
        if isinstance(evidence, Mapping):
            return evidence[name]
        return getattr(evidence, name)

    get.__name__ = f"get_{name}"
    get.__qualname__ = f"evidence[{name!r}]"  # named so in errors (qualified_name)
    get.__module__ = ""
    return get


def default_state_of(evidence: Any) -> Any:
    """The decision state of a piece of evidence: its ``state`` (called if callable)."""
    state = evidence["state"] if isinstance(evidence, Mapping) else evidence.state
    return state() if callable(state) else state


def default_case_id(evidence: Any) -> str:
    """The case id: the evidence's ``case_id`` attribute or key."""
    return str(_attr_or_key("case_id")(evidence))


def default_evidence_refs(evidence: Any) -> tuple[str | EvidenceRef, ...]:
    """The evidence references: the evidence's ``evidence_refs`` attribute or key."""
    return tuple(_attr_or_key("evidence_refs")(evidence))


def default_case_json(evidence: Any) -> Any:
    """JSON form of a case for the case-set digest (attrs, dataclasses, mappings)."""
    return jsonable(evidence)



def _strategies(value: Iterable[Strategy]) -> tuple[Strategy, ...]:
    return tuple(value)


def _tuple(value: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class Experiment:
    """A release experiment: everything a lab run needs, declared before any work.

    Attributes:
        name: experiment name (kebab-case or snake_case).
        contract: the contract whose receipts are tested.
        cases: the case source (evidence, streamed).
        strategies: encoder × receiver pairs compared on every case.
        governance: the deterministic service that stamps governance members.
        state_of: the full-evidence truth: evidence → the contract's decision state.
        reference: the full-evidence reference procedure (evidence → action); by
            default the contract's policy on ``state_of(evidence)``.
        case_id_of / evidence_refs_of: read a case's id and evidence references.
        subject: the strategy whose message the ablations, coarsenings and
            falsehoods change (default: the first strategy that sends receipts).
        perturbations: perturbations to apply (default: the standard set generated
            from the contract, see :func:`handoffs.lab.perturbations.standard_perturbations`).
        injections: declared schema-valid falsehoods in named cases (the essay's
            error injection); the first is reported under ``error_injection``.
        tolerances: the release thresholds.
        semantic_receiver: decides *semantic* agreement (default: the contract's
            reference policy with declared defaults, the essay's benign-default
            receiver).
        confirming_receiver: confirms minimal messages (default: the three-valued
            reference receiver, which fails closed when a field is missing).
        epochs: repetitions of sampled (non-deterministic) receivers.
        tokenizer: counts tokens of a canonical payload (``None``: not measured).
        description / assumptions: prose for the report.
        case_json: a case's JSON form for the case-set digest.
        minimal_method: ``"region"`` (against the reference policy) or ``"ddmin"``
            (delta debugging on the confirming receiver, for black-box policies);
            ``"auto"`` picks region unless the policy has opaque predicates.
        minimal_max_calls: receiver calls allowed per minimal-message search on the
            confirming receiver (confirmation and delta debugging together).
        minimal_max_tokens: model tokens (in + out) allowed per minimal-message
            search (``None``: no bound). A search that spends its budget stops, claims
            no minimal message and fails the release gate.
        example_limit: bound on per-case examples kept in the report.
        seed: seed for generated values (falsehood pools, the shuffled control's
            pairing: :func:`~handoffs.lab._controls.shuffle_cycle`).
        population: the :class:`~handoffs.lab._population.Population` the population
            figures are rates over (independent draws of a declared case distribution).
            ``None``: with :class:`GeneratedCases`, 1000 draws uniform over the declared
            bounds and enums; with the experiment's own cases, those cases (a sample).
    """

    name: str = attrs.field(validator=_check_name)
    contract: Contract[Any, Any]
    cases: CaseSource
    strategies: tuple[Strategy, ...] = attrs.field(converter=_strategies)
    governance: GovernanceService
    state_of: Callable[[Any], Any] = default_state_of
    reference: Callable[[Any], Any] | None = None
    case_id_of: Callable[[Any], str] = default_case_id
    evidence_refs_of: Callable[[Any], Sequence[str | EvidenceRef]] = default_evidence_refs
    subject: str | None = None
    perturbations: tuple[Any, ...] | None = attrs.field(
        default=None, converter=attrs.converters.optional(_tuple))
    injections: tuple[Any, ...] = attrs.field(default=(), converter=_tuple)
    tolerances: Tolerances = attrs.field(factory=Tolerances)
    semantic_receiver: Receiver | None = None
    confirming_receiver: Receiver | None = None
    epochs: int = 1
    tokenizer: Callable[[str], int] | None = None
    description: str = ""
    assumptions: Mapping[str, str] = attrs.field(factory=dict)
    case_json: Callable[[Any], Any] = default_case_json
    minimal_method: str = "auto"
    minimal_max_calls: int = 64
    minimal_max_tokens: int | None = None
    example_limit: int = 100
    seed: int = 0
    population: Any = None  # a handoffs.lab._population.Population (which imports this)

    def __attrs_post_init__(self) -> None:
        if not self.strategies:
            raise ExperimentError("an experiment needs at least one strategy")
        names = [s.name for s in self.strategies]
        if len(set(names)) != len(names):
            raise ExperimentError(f"strategy names must be unique: {names}")
        for strategy in self.strategies:
            if not isinstance(strategy.receiver, Receiver):
                raise ExperimentError(f"strategy {strategy.name}: the receiver does not "
                                      "implement the Receiver protocol")
        if self.subject is not None and self.subject not in names:
            raise ExperimentError(f"subject {self.subject!r} is not a strategy; "
                                  f"strategies: {names}")
        if not isinstance(self.epochs, int) or self.epochs < 1:
            raise ExperimentError(f"epochs must be a positive integer, got {self.epochs!r}")
        if self.minimal_method not in ("auto", "region", "ddmin"):
            raise ExperimentError(f"minimal_method must be auto, region or ddmin, got "
                                  f"{self.minimal_method!r}")
        for name in ("minimal_max_calls", "minimal_max_tokens"):
            value = getattr(self, name)
            if (value is not None or name == "minimal_max_calls") and (
                    isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ExperimentError(f"{name} must be a positive integer, got {value!r}")
        if self.example_limit < 0:
            raise ExperimentError("example_limit must be >= 0")
        for name in self.tolerances.gate_perturbations:
            if not isinstance(name, str) or not name:
                raise ExperimentError(f"gate perturbation ids are strings, got {name!r}")

    @property
    def subject_strategy(self) -> Strategy:
        """The strategy whose message the field perturbations change."""
        if self.subject is not None:
            return next(s for s in self.strategies if s.name == self.subject)
        return next((s for s in self.strategies if s.receipts), self.strategies[0])

    @property
    def semantic(self) -> Receiver:
        """The semantic receiver (declared, or the benign-default reference receiver)."""
        if self.semantic_receiver is not None:
            return self.semantic_receiver
        return ReferenceReceiver(self.contract, defaults=True)

    @property
    def confirming(self) -> Receiver:
        """The receiver that confirms minimal messages."""
        if self.confirming_receiver is not None:
            return self.confirming_receiver
        return ReferenceReceiver(self.contract, defaults=False)

    def gated_strategies(self) -> tuple[Strategy, ...]:
        """Strategies the release gate applies to (declared, else the subject)."""
        gated = tuple(s for s in self.strategies if s.gated)
        return gated or (self.subject_strategy,)
