"""Experiments: a contract, a case source, a reference, strategies, perturbations, tolerances.

An :class:`Experiment` is the essay's seven-step release experiment written down:
the receivers are frozen inside :class:`Strategy` objects, the full-evidence
reference is the contract's policy applied to the true decision state (or a
declared procedure), the consequence is the contract's loss matrix and hard
constraints, the candidate encodings are the strategies' encoders, and the
perturbations ablate, coarsen, mutate, control and change the boundary.

Case sources stream: :class:`IterableCases` (a Python iterable or a factory of one),
:class:`JSONLinesCases` (one JSON object a line) and :class:`GeneratedCases`
(Hypothesis-drawn decision states of the contract). Every source can be iterated
more than once, which is what resuming an interrupted run needs.

One concern, kept in one module although it is past 800 lines: the experiment as the
user declares it (its parts, their validation, and the errors that name a bad part).
The case sources are the most separable part, but they raise this module's errors
(:class:`ExperimentError`, :class:`UserCodeError`) while :class:`Experiment` holds a
:class:`CaseSource`, so a module of their own would import this one and be imported
by it; moving them, or the errors, is a change of the lab's public face, not of the
engine.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

import attrs

from handoffs._cases import GeneratedCase
from handoffs._errors import (
    ExperimentError,
    InvalidArgument,
    MalformedJSON,
    UnknownExperimentKey,
    UserCodeError,
)
from handoffs._json import loads
from handoffs._memo import memo_value
from handoffs.contracts import (
    Authority,
    Contract,
    Encoder,
    EvidenceRef,
    FieldKind,
    FieldSpec,
    GovernanceService,
    Interval,
    ReceiptEncoder,
)
from handoffs.lab._fingerprint import receiver_fingerprint
from handoffs.receivers import Decision, Reason, Receiver, Step, Verdict

__all__ = [
    "CaseSource",
    "Experiment",
    "ExperimentError",
    "GeneratedCases",
    "IterableCases",
    "JSONLinesCases",
    "ReferenceReceiver",
    "Strategy",
    "Tolerances",
    "UnknownExperimentKey",
    "UserCodeError",
    "wire_value",
]


def refuse_unknown(table: Mapping[str, Any], known: Iterable[str], *, path: str,
                   noun: str = "key") -> None:
    """Raise :class:`UnknownExperimentKey` for the first key of ``table`` not in ``known``."""
    accepted = frozenset(known)
    unknown = sorted(k for k in table if k not in accepted)
    if unknown:
        raise UnknownExperimentKey(str(unknown[0]), table=path, known=accepted, noun=noun)


def qualified_name(obj: Any) -> str:
    """``module.qualname`` of a function, class or bound method; the class's for an
    instance (a callable object, an encoder).
    """
    target = obj
    func = getattr(obj, "__func__", None)
    if func is not None:
        target = func
    name = getattr(target, "__qualname__", None)
    if name is None:
        target = type(obj)
        name = target.__qualname__
    module = getattr(target, "__module__", None)
    return f"{module}.{name}" if module else str(name)


# ------------------------------------------------------------------------- values


def wire_value(value: Any) -> Any:
    """A decision-field value in its JSON form (enums by value, intervals as objects)."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Interval):
        return {"lo": value.lo, "hi": value.hi}
    return value


def typed_value(spec: FieldSpec, value: Any) -> Any:
    """Read one decision field's JSON value; raise ``ValueError`` when it is not valid."""
    if spec.kind is FieldKind.ENUM:
        assert spec.enum_type is not None  # noqa: S101 - guaranteed by state_fields
        typed: Any = spec.enum_type(value)
    elif spec.kind is FieldKind.INTERVAL:
        if not isinstance(value, Mapping) or set(value) != {"lo", "hi"}:
            raise InvalidArgument(f"{spec.name}: an interval is an object with lo and hi")
        typed = Interval(value["lo"], value["hi"])
    else:
        typed = value
    if not spec.contains(typed):
        raise InvalidArgument(f"{spec.name}: {value!r} is not a valid {spec.kind.value}")
    return typed


# --------------------------------------------------------------- reference receiver


_CACHE_LIMIT: Final = 4096


class _NoState:
    """A message without a decision state (its memo key)."""

    __slots__ = ()


_NO_STATE: Final = _NoState()


@attrs.frozen
class ReferenceReceiver:
    """The contract's reference policy, applied to a message's ``decision_state``.

    With ``defaults=True`` it is the essay's *benign-default receiver*: a field that
    is missing takes its declared ``if_missing`` value (fields declared without one
    stay missing). With ``defaults=False`` it is the *three-valued receiver*: a
    missing field, or an interval straddling a threshold, leaves the decision
    undetermined, and the receiver fails closed with the contract's
    ``fail_closed_action``. Either way it ignores governance, authority and proofs:
    the lab uses it for *semantic* agreement, kept apart from admissibility.

    It never raises: a message without a readable ``decision_state`` is rejected.
    """

    contract: Contract[Any, Any]
    defaults: bool = True
    _cache: dict[Any, Decision] = attrs.field(factory=dict, eq=False, repr=False, init=False)

    @property
    def name(self) -> str:
        """``reference-benign-defaults`` or ``reference-three-valued``."""
        return "reference-benign-defaults" if self.defaults else "reference-three-valued"

    @property
    def deterministic(self) -> bool:
        """Always true."""
        return True

    def memo_key(self, message: Mapping[str, Any]) -> Hashable:
        """The part of the message the decision depends on: the decision state."""
        state = message.get("decision_state", _NO_STATE)
        return _NO_STATE if state is _NO_STATE else memo_value(state)

    def receive(self, message: bytes | str | Mapping[str, Any]) -> Decision:
        """Decide from the message's decision state alone."""
        if isinstance(message, bytes | str):
            try:
                message = loads(message)
            except MalformedJSON as exc:
                return self._reject("invalid-json", exc.message, Step.PARSE)
        if not isinstance(message, Mapping):
            return self._reject("not-an-object", "a message is a JSON object", Step.PARSE)
        state = message.get("decision_state")
        if not isinstance(state, Mapping):
            return self._reject("no-decision-state", "the message carries no decision_state",
                                Step.PARSE, "$.decision_state")
        key = self.memo_key(message)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        decision = self._decide(state)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = decision
        return decision

    def _decide(self, state: Mapping[str, Any]) -> Decision:
        view: dict[str, Any] = {}
        for spec in self.contract.fields:
            if spec.name in state:
                try:
                    view[spec.name] = typed_value(spec, state[spec.name])
                except (ValueError, TypeError) as exc:
                    return self._reject("invalid-value", str(exc), Step.PARSE,
                                        f"$.decision_state.{spec.name}")
            elif self.defaults and not spec.fails_closed:
                view[spec.name] = spec.if_missing
        unknown = sorted(set(state) - set(self.contract.field_map))
        if unknown:
            return self._reject("unknown-field", f"unknown decision fields {unknown}",
                                Step.PARSE, f"$.decision_state.{unknown[0]}")
        outcome = self.contract.policy.evaluate(view)
        if outcome.action is None:
            return Decision(
                verdict=Verdict.ESCALATE,
                action=self.contract.fail_closed_action.value,
                step=Step.POLICY,
                reasons=(Reason("undetermined", f"rule {outcome.rule} is undetermined on "
                                "this state", Step.POLICY, "$.decision_state"),),
                receiver=self.name,
                contract=self.contract.id,
                record={"rule": outcome.rule},
            )
        return Decision(verdict=Verdict.ACCEPT, action=outcome.action.value, step=Step.POLICY,
                        receiver=self.name, contract=self.contract.id,
                        record={"rule": outcome.rule})

    def _reject(self, code: str, message: str, step: Step, path: str = "$") -> Decision:
        return Decision(
            verdict=Verdict.REJECT,
            action=self.contract.fail_closed_action.value,
            step=step,
            reasons=(Reason(code, message, step, path),),
            receiver=self.name,
            contract=self.contract.id,
        )


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


# -------------------------------------------------------------------- case sources


@runtime_checkable
class CaseSource(Protocol):
    """A re-iterable stream of cases (the sender's evidence), in a fixed order."""

    @property
    def description(self) -> str:
        """Where the cases come from (recorded in the report)."""
        ...

    def __iter__(self) -> Iterator[Any]:
        """Iterate the cases from the first, every time."""
        ...


@attrs.frozen
class IterableCases:
    """Cases from a Python iterable, or from a factory that returns a fresh one.

    A factory (a callable) is what makes a generator re-iterable; a plain iterator
    given directly can be consumed only once, so resuming needs a factory.
    """

    source: Iterable[Any] | Callable[[], Iterable[Any]]
    description: str = "python"

    def __iter__(self) -> Iterator[Any]:
        """Iterate the cases."""
        if callable(self.source):
            return iter(self.source())
        return iter(self.source)


@attrs.frozen
class JSONLinesCases:
    """Cases from a JSON Lines file: one JSON object a line, read lazily.

    ``structure`` turns each object into evidence (default: keep the dict). Blank
    lines are skipped; a bad line is an error naming the line.
    """

    path: Path = attrs.field(converter=Path)
    structure: Callable[[dict[str, Any]], Any] | None = None

    @property
    def description(self) -> str:
        """``jsonl:<path>``."""
        return f"jsonl:{self.path}"

    def __iter__(self) -> Iterator[Any]:
        """Read and structure the cases one line at a time."""
        with self.path.open("rb") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    value = loads(line)
                except MalformedJSON as exc:
                    raise MalformedJSON(f"{self.path} line {number}: {exc.message}",
                                        code=exc.code, json_path=exc.json_path) from exc
                if not isinstance(value, dict):
                    raise MalformedJSON(f"{self.path} line {number} is not a JSON object",
                                        code="not-an-object")
                if self.structure is None:
                    yield value
                    continue
                try:
                    evidence = self.structure(value)
                except Exception as exc:
                    raise UserCodeError(role="structure function",
                                        callable_name=qualified_name(self.structure),
                                        case_id=None, error=exc,
                                        at=f"on {self.path} line {number}") from exc
                yield evidence


def draw(strategy: Any, count: int, *, seed: int) -> list[Any]:
    """Draw up to ``count`` examples from a Hypothesis strategy, reproducibly.

    Used outside tests (case generation, falsehood pools); the same seed always
    gives the same examples. Hypothesis stops early when the space is exhausted.
    """
    import hypothesis
    from hypothesis import HealthCheck, Phase, given, settings

    drawn: list[Any] = []

    @hypothesis.seed(seed)
    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(value: Any) -> None:
        drawn.append(value)

    collect()
    return drawn[:count]


def _states(value: Iterable[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    return tuple(value)


@attrs.frozen
class GeneratedCases:
    """``count`` cases that cover the contract's policy geometry, then realistic draws.

    First the states the policy analysis
    (:func:`handoffs.contracts.analysis.analyse`) says a test set needs: a witness of
    every live region, both sides of every boundary (per field and on the products
    and sums the guards compare) and the hard constraints' witnesses and boundaries.
    Then Hypothesis draws realistic states (numbers spread over the declared bounds,
    no subnormal floats, intervals inside the range, fair booleans). Without z3 (the
    ``lab`` extra) only the draws are made, and the report's coverage says so.
    Drawing happens in batches, so memory does not grow with ``count``; the same
    ``seed`` gives the same cases.
    """

    contract: Contract[Any, Any]
    count: int
    seed: int = 0
    batch: int = 500
    witnesses: tuple[Mapping[str, Any], ...] = attrs.field(default=(), converter=_states)
    """The proofs' witness states (``witness-001``, ...), after the geometry's states and
    in place of draws (always all of them, even past ``count``): every strategy is
    asked where the decision can move."""

    @property
    def description(self) -> str:
        """``hypothesis:<contract>:<count>:<seed>``."""
        return f"hypothesis:{self.contract.id}:{self.count}:seed={self.seed}"

    def __iter__(self) -> Iterator[GeneratedCase]:
        """The geometry's states, the witnesses, then draws batch by batch."""
        from handoffs.contracts.analysis import geometry

        found = geometry(self.contract)
        produced = 0
        for state in found.states()[: self.count]:
            yield GeneratedCase(
                case_id=f"generated-{produced + 1:06d}",
                state=state,
                evidence_refs=(f"urn:handoffs:generated:{self.seed}:{produced + 1}",),
            )
            produced += 1
        for number, witness in enumerate(self.witnesses, start=1):
            yield GeneratedCase(
                case_id=f"witness-{number:03d}",
                state=self.contract.state(**witness),
                evidence_refs=(f"urn:handoffs:witness:{self.seed}:{number}",),
            )
            produced += 1
        strategy = found.realistic_states()
        round_ = 0
        while produced < self.count:
            want = min(self.batch, self.count - produced)
            states = draw(strategy, want, seed=self.seed * 1_000_003 + round_)
            round_ += 1
            if not states:  # pragma: no cover - Hypothesis always draws at least one
                raise ExperimentError("Hypothesis drew no states for this contract")
            for state in states:
                if produced >= self.count:
                    break
                yield GeneratedCase(
                    case_id=f"generated-{produced + 1:06d}",
                    state=state,
                    evidence_refs=(f"urn:handoffs:generated:{self.seed}:{produced + 1}",),
                )
                produced += 1


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
    return _jsonable(evidence)


_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
_ATTRS_FIELDS: dict[type, tuple[str, ...]] = {}


def _jsonable(value: Any) -> Any:  # noqa: PLR0911 - one return per JSON shape
    kind = type(value)
    if kind in _SCALARS:
        return value
    names = _ATTRS_FIELDS.get(kind)
    if names is not None:
        return {name: _jsonable(getattr(value, name)) for name in names}
    if kind is list or kind is tuple:
        if _SCALARS.issuperset(map(type, value)):
            return list(value)
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Interval):
        return {"lo": value.lo, "hi": value.hi}
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if attrs.has(kind):
        names = _ATTRS_FIELDS[kind] = tuple(a.name for a in attrs.fields(kind))
        return {name: _jsonable(getattr(value, name)) for name in names}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, frozenset | set):
        return sorted((_jsonable(v) for v in value), key=repr)
    return value


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
        seed: seed for generated values (falsehood pools, shuffling).
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
