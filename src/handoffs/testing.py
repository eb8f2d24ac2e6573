"""Test helpers for any contract: Hypothesis strategies and a sufficiency assertion.

Strategies (each takes the contract first and returns a Hypothesis
``SearchStrategy``):

- :func:`states` draws complete decision states: first the policy's geometry (a
  witness of every live region, both sides of every boundary), then realistic
  values;
- :func:`receipts` draws typed receipts that pass the contract's JSON Schema and
  survive a ``Receipt.to_json`` → ``Receipt.from_json`` round trip;
- :func:`falsehoods` draws schema-valid decision states that differ from a given
  true state (the lab's "schema-valid is not truth-valid" perturbation);
- :func:`cases` draws evidence for an experiment that defines how to make it.

The pytest helper :func:`assert_sufficient` checks a receiver against the
contract's reference policy and fails with a readable table of the cases where
it is not sufficient::

    from hypothesis import given
    from handoffs.testing import receipts

    @given(receipts(MY_CONTRACT))
    def test_receiver_never_crashes(receipt):
        decision = MY_RECEIVER.receive(receipt.to_json())
        assert decision.action is not None
"""

from __future__ import annotations

import concurrent.futures as cf
import enum
import itertools
import json
import math
import re
import string
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs
from jsonschema import Draft202012Validator

from handoffs._errors import InvalidArgument, MissingExtra
from handoffs._json import MAX_SAFE_INTEGER
from handoffs.contracts import (
    Authority,
    Contract,
    DecisionContent,
    Encoder,
    EvidenceRef,
    FieldKind,
    FieldSpec,
    Governance,
    GovernanceService,
    Interval,
    Receipt,
    ReceiptEncoder,
    Uncertainty,
    to_json_schema,
)
from handoffs.contracts.analysis import geometry_states, realistic_value
from handoffs.receivers import Receiver

try:
    from hypothesis import strategies as st
except ImportError as exc:  # the testing extra is absent
    raise MissingExtra("handoffs.testing", extra="testing", module="hypothesis") from exc

if TYPE_CHECKING:
    from handoffs.lab import Experiment

__all__ = [
    "assert_sufficient",
    "cases",
    "evidence_refs",
    "falsehoods",
    "governances",
    "identifiers",
    "receipts",
    "states",
]

S = TypeVar("S")
A = TypeVar("A", bound=enum.Enum)
T = TypeVar("T")

_IDENT_FIRST: Final = string.ascii_letters + string.digits
_IDENT_REST: Final = _IDENT_FIRST + "._:/@-"
_SCHEME_REST: Final = string.ascii_lowercase + string.digits + "+.-"
# Naive bounds: Hypothesis's datetimes() takes naive limits and adds the timezone.
_MIN_TIME: Final = datetime(2000, 1, 1)
_MAX_TIME: Final = datetime(2999, 12, 31, 23, 59, 59)


# --------------------------------------------------------------------------- values


def identifiers(*, max_size: int = 128) -> st.SearchStrategy[str]:
    """Identifiers as receipts use them for ``case_id``, ``sender``, ``receiver`` and
    ``policy_version``: an ASCII letter or digit, then letters, digits and ``._:/@-``.

    Args:
        max_size: longest identifier drawn (at most 128, the schema's bound).
    """
    if not 1 <= max_size <= 128:
        raise InvalidArgument(f"max_size must be between 1 and 128, got {max_size}")
    return st.builds(
        str.__add__,
        st.sampled_from(_IDENT_FIRST),
        st.text(alphabet=_IDENT_REST, max_size=max_size - 1),
    )


def _uris() -> st.SearchStrategy[str]:
    scheme = st.builds(
        str.__add__,
        st.sampled_from(string.ascii_lowercase),
        st.text(alphabet=_SCHEME_REST, max_size=8),
    )
    # Any printable, non-space character: categories L, M, N, P, S (no Z, no C).
    rest = st.text(
        alphabet=st.characters(codec="utf-8", categories=("L", "M", "N", "P", "S")),
        min_size=1,
        max_size=80,
    )
    return st.builds(lambda s, r: f"{s}:{r}", scheme, rest)


def evidence_refs(*, max_size: int = 4) -> st.SearchStrategy[tuple[EvidenceRef, ...]]:
    """Non-empty tuples of evidence references, some pinned by a SHA-256 digest.

    Args:
        max_size: most references drawn (the schema allows up to 32).
    """
    if not 1 <= max_size <= 32:
        raise InvalidArgument(f"max_size must be between 1 and 32, got {max_size}")
    digest = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64).map(
        lambda h: f"sha256:{h}"
    )
    ref = st.builds(EvidenceRef, _uris(), st.none() | digest)
    return st.lists(ref, min_size=1, max_size=max_size).map(tuple)


def _times() -> st.SearchStrategy[datetime]:
    return st.datetimes(min_value=_MIN_TIME, max_value=_MAX_TIME, timezones=st.just(UTC))


def governances(*, authority: Authority | None = None) -> st.SearchStrategy[Governance]:
    """Governance stamps with arbitrary (valid) identities, validity and evidence.

    Args:
        authority: fix the authority; by default both ``ADVISE`` and ``DECIDE`` occur.
    """
    authorities = st.just(authority) if authority is not None else st.sampled_from(Authority)
    return st.builds(
        Governance,
        case_id=identifiers(),
        sender=identifiers(max_size=40),
        receiver=identifiers(max_size=40),
        authority=authorities,
        policy_version=identifiers(max_size=20),
        valid_until=_times(),
        evidence_refs=evidence_refs(),
    )


# --------------------------------------------------------------------------- states


def _clip(value: float, spec: FieldSpec) -> float:
    lo = spec.minimum if spec.minimum is not None else value
    hi = spec.maximum if spec.maximum is not None else value
    return min(max(value, lo), hi)


def _boundaries(contract: Contract[Any, Any], spec: FieldSpec) -> list[float]:
    """Values at and just across every threshold the policy compares ``spec`` with."""
    found: set[float] = set()
    for name, threshold in contract.policy.thresholds():
        if name != spec.name:
            continue
        if spec.kind is FieldKind.INT:
            whole = (math.floor(threshold) - 1, math.floor(threshold), math.ceil(threshold),
                     math.ceil(threshold) + 1)
            found.update(int(_clip(v, spec)) for v in whole)
        else:
            near = (math.nextafter(threshold, -math.inf), threshold,
                    math.nextafter(threshold, math.inf))
            found.update(_clip(v, spec) for v in near)
    if spec.minimum is not None and spec.maximum is not None:
        found.update((spec.minimum, spec.maximum))
    if spec.kind is FieldKind.INT:
        return sorted({int(v) for v in found})
    return sorted(float(v) for v in found)


def _bounds(spec: FieldSpec) -> tuple[float, float]:
    if spec.minimum is None or spec.maximum is None:  # pragma: no cover - checked by FieldSpec
        raise InvalidArgument(f"numeric field {spec.name} has no bounds")
    return spec.minimum, spec.maximum


def _value_strategy(contract: Contract[Any, Any], spec: FieldSpec) -> st.SearchStrategy[Any]:
    domain = spec.domain()
    if domain is not None:
        return st.sampled_from(domain)
    lo, hi = _bounds(spec)
    edges = _boundaries(contract, spec)
    if spec.kind is FieldKind.INT:
        ints = st.integers(
            min_value=max(math.ceil(lo), -MAX_SAFE_INTEGER),
            max_value=min(math.floor(hi), MAX_SAFE_INTEGER),
        )
        return st.sampled_from(edges) | ints if edges else ints
    realistic: st.SearchStrategy[Any] = realistic_value(spec)
    if spec.kind is FieldKind.FLOAT:
        return st.sampled_from(edges) | realistic if edges else realistic
    return st.sampled_from([Interval.point(e) for e in edges]) | realistic if edges else realistic


def states(contract: Contract[S, Any]) -> st.SearchStrategy[S]:
    """Complete decision states of ``contract``: every field in its domain.

    Half the draws come from the policy's geometry
    (:func:`handoffs.contracts.analysis.geometry_states`: a witness of every live
    region, both sides of every boundary, per field and on products and sums, and the
    hard constraints' boundaries). The rest, and what failing examples shrink
    towards, are realistic values: booleans and enums over their whole domain, numbers
    spread over their declared bounds (no subnormal floats), narrow intervals inside
    the range, with extra weight on each constant threshold and the values just
    across it. Without z3 (the ``lab`` extra) only the realistic values are drawn.
    """
    _check_contract(contract)
    fields = {spec.name: _value_strategy(contract, spec) for spec in contract.fields}
    realistic: st.SearchStrategy[S] = st.builds(contract.state, **fields)
    cover = geometry_states(contract)
    return realistic | st.sampled_from(cover) if cover else realistic


def _check_contract(contract: object) -> None:
    if not isinstance(contract, Contract):
        raise InvalidArgument(f"expected a handoffs Contract, got {type(contract).__name__}")


# --------------------------------------------------------------------------- receipts


def receipts(
    contract: Contract[S, A],
    *,
    governance: Governance | GovernanceService | None = None,
    honest: bool = True,
) -> st.SearchStrategy[Receipt[S, A]]:
    """Valid, unsigned receipts under ``contract``.

    Every receipt drawn passes the contract's JSON Schema and round-trips:
    ``Receipt.from_json(r.to_json(), registry=Registry.of(contract)) == r``.

    Args:
        contract: the contract whose receipts to draw.
        governance: a fixed :class:`~handoffs.contracts.Governance` stamp; or a
            :class:`~handoffs.contracts.GovernanceService` that stamps each receipt (with a drawn
            case id and evidence, ``DECIDE`` only if the service may decide); or ``None`` to
            draw governance members freely.
        honest: when True the proposed action is the reference policy's action for
            the drawn state; when False it is any action (a sender that disagrees).
    """
    _check_contract(contract)
    stamps: st.SearchStrategy[Governance]
    if governance is None:
        stamps = governances()
    elif isinstance(governance, Governance):
        stamps = st.just(governance)
    elif isinstance(governance, GovernanceService):
        service = governance
        allowed = list(Authority) if service.may_decide else [Authority.ADVISE]
        stamps = st.builds(
            lambda case_id, refs, authority: service.stamp(
                case_id=case_id, evidence_refs=refs, authority=authority),
            identifiers(), evidence_refs(), st.sampled_from(allowed),
        )
    else:
        raise InvalidArgument(
            "governance must be a Governance, a GovernanceService or None, got "
            f"{type(governance).__name__}"
        )
    notes = st.none() | st.text(
        alphabet=st.characters(codec="utf-8"), max_size=min(contract.max_notes_length, 200)
    )

    @st.composite
    def draw_receipt(draw: st.DrawFn) -> Receipt[S, A]:
        state = draw(states(contract))
        proposed = contract.decide(state) if honest else draw(st.sampled_from(contract.actions))
        content: DecisionContent[S, A] = DecisionContent(
            proposed_action=proposed,
            decision_state=state,
            uncertainty=draw(st.sampled_from(Uncertainty)),
            notes=draw(notes),
        )
        receipt_id = f"urn:uuid:{draw(st.uuids())}"
        return Receipt.build(contract, content, draw(stamps), id=receipt_id)

    return draw_receipt()


# --------------------------------------------------------------------------- falsehoods


def _state_validator(contract: Contract[Any, Any]) -> Draft202012Validator:
    schema = to_json_schema(contract)["properties"]["decision_state"]
    return Draft202012Validator(schema)


def _differs(spec: FieldSpec, value: Any, truth: Any) -> bool:
    # Booleans are not numbers here: a bool field only ever holds bools, and
    # ``FieldSpec.contains`` keeps numbers free of them.
    del spec
    return bool(value != truth)


def _unequal_to(spec: FieldSpec, truth: Any) -> Callable[[Any], bool]:
    def differs(value: Any) -> bool:
        return _differs(spec, value, truth)

    return differs


def _false_values(contract: Contract[Any, Any], spec: FieldSpec, truth: Any) -> list[Any]:
    """Deterministic, labelled candidates: the finite complement, or numeric boundaries."""
    domain = spec.domain()
    if domain is not None:
        return [v for v in domain if _differs(spec, v, truth)]
    if spec.kind is FieldKind.INTERVAL:
        edges = _boundaries(contract, spec)
        return [v for v in (Interval.point(e) for e in edges) if _differs(spec, v, truth)]
    return [v for v in _boundaries(contract, spec) if _differs(spec, v, truth)]


def falsehoods(
    contract: Contract[S, Any],
    state: S,
    *,
    fields: Iterable[str] | None = None,
    max_changed: int = 1,
) -> st.SearchStrategy[S]:
    """Schema-valid decision states that differ from the true ``state``.

    Each state drawn changes between 1 and ``max_changed`` of ``fields`` (default:
    every decision field) to a value of the right type and bounds that is not the
    true value. Finite domains are enumerated first (boolean flips, the other enum
    members); numbers favour the policy's thresholds. Every drawn state is
    re-validated against the contract's ``decision_state`` JSON Schema with
    ``jsonschema``, so a value the schema would catch is never offered as a
    falsehood.

    Args:
        contract: the contract.
        state: the true decision state.
        fields: the fields that may be falsified.
        max_changed: how many fields at most change at once.

    Raises:
        ValueError: ``InvalidArgument`` (also a TypeError), unknown field names, ``max_changed`` <
            1, or no field can be
            falsified (every candidate has a one-value domain).
    """
    _check_contract(contract)
    if not isinstance(state, contract.state):
        raise InvalidArgument(
            f"state must be a {contract.state.__name__}, got {type(state).__name__}"
        )
    names = list(fields) if fields is not None else [spec.name for spec in contract.fields]
    unknown = sorted(set(names) - set(contract.field_map))
    if unknown:
        raise InvalidArgument(f"{contract.id} has no decision fields {unknown}")
    if max_changed < 1:
        raise InvalidArgument(f"max_changed must be at least 1, got {max_changed}")
    specs = [contract.field_map[name] for name in names]
    choices: dict[str, st.SearchStrategy[Any]] = {}
    for spec in specs:
        truth = getattr(state, spec.name)
        listed = _false_values(contract, spec, truth)
        drawn = _value_strategy(contract, spec).filter(_unequal_to(spec, truth))
        if spec.domain() is not None:
            if listed:
                choices[spec.name] = st.sampled_from(listed)
        else:
            choices[spec.name] = (st.sampled_from(listed) | drawn) if listed else drawn
    if not choices:
        raise InvalidArgument(f"no field of {names} can take a value other than the truth")
    validator = _state_validator(contract)

    def falsify(changes: dict[str, Any]) -> S:
        false_state: S = attrs.evolve(state, **changes)  # type: ignore[misc]
        document = contract.dump_state(false_state)
        errors = list(validator.iter_errors(document))
        if errors:  # pragma: no cover - a generator bug, never a legitimate draw
            raise AssertionError(
                f"generated falsehood is not schema-valid: {errors[0].message}")
        return false_state

    @st.composite
    def draw_changes(draw: st.DrawFn) -> dict[str, Any]:
        count = draw(st.integers(min_value=1, max_value=min(max_changed, len(choices))))
        picked = draw(st.lists(st.sampled_from(sorted(choices)), min_size=count,
                               max_size=count, unique=True))
        return {name: draw(choices[name]) for name in picked}

    return draw_changes().map(falsify)


# --------------------------------------------------------------------------- cases


def cases(
    source: Contract[Any, Any] | Experiment,
    *,
    limit: int = 1000,
) -> st.SearchStrategy[Any]:
    """Cases (the sender's evidence) in the shape an experiment reads them.

    For a contract: ``GeneratedCase`` objects with a drawn case
    id, a complete decision state from :func:`states` and evidence references; the
    lab's default readers (``state``, ``case_id``, ``evidence_refs``) accept them.
    For an :class:`~handoffs.lab.Experiment`: cases drawn from the first ``limit``
    cases of its case source (which must be finite and non-empty).

    Args:
        source: a contract, or an experiment whose cases to sample.
        limit: how many of an experiment's cases to sample from.
    """
    from handoffs.lab import Experiment
    from handoffs.lab._experiment import GeneratedCase

    if isinstance(source, Experiment):
        if limit < 1:
            raise InvalidArgument(f"limit must be at least 1, got {limit}")
        pool = list(itertools.islice(iter(source.cases), limit))
        if not pool:
            raise InvalidArgument(f"experiment {source.name} has no cases")
        return st.sampled_from(pool)
    _check_contract(source)
    refs = st.lists(_uris(), min_size=1, max_size=3).map(tuple)
    return st.builds(GeneratedCase, case_id=identifiers(max_size=40), state=states(source),
                     evidence_refs=refs)


# --------------------------------------------------------------------------- sufficiency

_DEFAULT_SERVICE: Final = GovernanceService(
    sender="handoffs-testing-sender",
    receiver="handoffs-testing-receiver",
    policy_version="testing",
    valid_until=datetime(9999, 12, 31, tzinfo=UTC),
)


class _Inline(cf.Executor):
    """Runs each submitted call at once, in the calling thread (no pool to start)."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> cf.Future[T]:
        future: cf.Future[T] = cf.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # delivered through the future, as a pool would
            future.set_exception(exc)
        return future


def _as_evidence(contract: Contract[Any, Any], items: Iterable[Any]) -> list[Any]:
    from handoffs.lab._experiment import GeneratedCase

    evidence: list[Any] = []
    for number, item in enumerate(items, start=1):
        if isinstance(item, contract.state):
            case_id = f"case-{number:06d}"
            evidence.append(GeneratedCase(case_id=case_id, state=item,
                                          evidence_refs=(f"urn:handoffs:testing:{case_id}",)))
        else:
            evidence.append(item)
    return evidence


def _cell(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, Mapping) and set(value) == {"lo", "hi"}:
        return f"[{_cell(value['lo'])}, {_cell(value['hi'])}]"
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True,
                                                          ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _text_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c)
              for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines.extend("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
                 for r in rows)
    return "\n".join(lines)


def assert_sufficient(
    contract: Contract[S, A],
    receiver: Receiver,
    cases: Iterable[Any],
    *,
    epsilon: float = 0.0,
    delta: float = 0.0,
    hard_violations: int = 0,
    encoder: Encoder[Any] | None = None,
    governance: GovernanceService | None = None,
    state_of: Callable[[Any], Any] | None = None,
    max_rows: int = 20,
) -> None:
    """Assert that ``receiver`` decides ``cases`` as the contract's reference does.

    Runs the lab engine on one strategy (``encoder`` × ``receiver``) without
    perturbations and applies the release gate with the given tolerances: the
    disagreement rate must be at most ``epsilon``, the mean consequence-weighted
    regret at most ``delta``, and hard violations at most ``hard_violations``;
    every message must also pass the governance check. On failure it raises
    ``AssertionError`` with the gate's reasons and a table of the failing cases
    (case, decision state, reference action, chosen action, verdict, regret, hard
    violations, reason codes).

    Args:
        contract: the contract; its policy is the full-evidence reference, its loss
            matrix scores regret and its hard constraints are counted apart.
        receiver: the receiver under test (a :class:`~handoffs.receivers.Receiver`).
        cases: evidence the lab can read (e.g. from :func:`cases`), or plain
            decision states of the contract (ids are made up for them).
        epsilon: tolerated disagreement rate ``1 - agreement``.
        delta: tolerated mean regret.
        hard_violations: tolerated number of hard violations.
        encoder: what writes each message (default: the contract's
            :class:`~handoffs.contracts.ReceiptEncoder`).
        governance: the governance service that stamps each message (default: a
            testing service, sender ``handoffs-testing-sender``, receiver
            ``handoffs-testing-receiver``, policy version ``testing``, valid until
            9999).
        state_of: reads the true decision state from a case (default: its
            ``state``).
        max_rows: most failing cases shown in the message.

    Raises:
        AssertionError: the receiver is not sufficient within the tolerances.
        ValueError: ``InvalidArgument`` (also a TypeError), no cases, or a receiver that is not a
            ``Receiver``.
        ExperimentError: bad tolerances (before any work starts).
    """
    from handoffs.lab import Experiment, IterableCases, Strategy, Tolerances, run
    from handoffs.lab._experiment import default_state_of
    from handoffs.lab._runlog import read_run_log

    _check_contract(contract)
    if not isinstance(receiver, Receiver):
        raise InvalidArgument(f"receiver must implement handoffs.receivers.Receiver, got "
                        f"{type(receiver).__name__}")
    evidence = _as_evidence(contract, cases)
    if not evidence:
        raise InvalidArgument("assert_sufficient needs at least one case")
    tolerances = Tolerances(agreement_epsilon=epsilon, regret_delta=delta,
                            hard_violations=hard_violations)
    reader = state_of or default_state_of
    strategy = Strategy(
        name=re.sub(r"[\s/]+", "-", str(getattr(receiver, "name", ""))) or "subject",
        encoder=encoder or ReceiptEncoder(contract=contract, state_of=reader),
        receiver=receiver,
        gated=True,
    )
    experiment = Experiment(
        name="assert-sufficient",
        contract=contract,
        cases=IterableCases(evidence, description="handoffs.testing.assert_sufficient"),
        strategies=(strategy,),
        governance=governance or _DEFAULT_SERVICE,
        state_of=reader,
        perturbations=(),
        tolerances=tolerances,
        example_limit=0,
    )
    with tempfile.TemporaryDirectory(prefix="handoffs-testing-") as folder:
        log_path = Path(folder) / "run.jsonl"
        result = run(experiment, executor=_Inline(), run_log=log_path,
                     created=datetime(2000, 1, 1, tzinfo=UTC))
        if result.exit_code == 0:
            return
        _, records = read_run_log(log_path)
        failing = _failing_rows(contract, evidence, records, reader)
    gate = result.report["gate"]
    row = next(r for r in result.report["results"] if r["perturbation"] == "none")
    summary = (
        f"{receiver.name} is not sufficient for {contract.id} on {len(evidence)} cases: "
        f"agreement {row['agreement']:.4g} (ε = {epsilon:g}), mean regret "
        f"{row['mean_regret']:.4g} (δ = {delta:g}), hard violations {row['hard_violations']} "
        f"(allowed {hard_violations})"
    )
    lines = [summary, *(f"  - {reason}" for reason in gate["reasons"])]
    if failing:
        columns = ("case", "reference", "chosen", "verdict", "regret", "hard violations",
                   "reasons", "decision state")
        shown = failing[:max_rows]
        lines += ["", _text_table(columns, shown)]
        if len(failing) > len(shown):
            lines.append(f"... and {len(failing) - len(shown)} more failing cases")
    raise AssertionError("\n".join(lines))


def _failing_rows(contract: Contract[Any, Any], evidence: Sequence[Any],
                  records: Iterable[Mapping[str, Any]], reader: Callable[[Any], Any]
                  ) -> list[tuple[str, ...]]:
    from handoffs.lab._experiment import wire_value
    from handoffs.lab._runlog import COLUMNS

    column = {name: index for index, name in enumerate(COLUMNS)}
    actions = {a.value: a for a in contract.actions}
    failing: list[tuple[str, ...]] = []
    for record in records:
        if "rows" not in record:
            continue
        start = int(record["start"])
        for row in record["rows"]:
            if row[column["perturbation"]] != 0:
                continue
            reference = str(row[column["reference"]])
            chosen = str(row[column["action"]])
            case_index = start + int(row[column["case"]])
            state = contract.view(reader(evidence[case_index]))
            if chosen in actions and reference in actions:
                regret = contract.loss(actions[chosen], actions[reference])
                violated = contract.hard_violations(actions[chosen], actions[reference],
                                                    truth=state)
            else:
                regret, violated = math.nan, ()
            if chosen == reference and not violated:
                continue
            case_id = str(record["cases"][int(row[column["case"]])][0])
            failing.append((
                case_id,
                reference,
                chosen,
                str(row[column["verdict"]]),
                _cell(regret),
                ", ".join(violated) or "-",
                ", ".join(row[column["reasons"]] or ()) or "-",
                " ".join(f"{k}={_cell(wire_value(v))}" for k, v in state.items()),
            ))
    return failing
