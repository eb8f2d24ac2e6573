"""Test helpers for any contract: Hypothesis strategies.

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

The lab's :func:`~handoffs.lab.assert_sufficient` checks a receiver against the
contract's reference policy on such cases and fails with a readable table of the
cases where it is not sufficient. A property test of a receiver::

    from hypothesis import given
    from handoffs.testing import receipts

    @given(receipts(MY_CONTRACT))
    def test_receiver_never_crashes(receipt):
        decision = MY_RECEIVER.receive(receipt.to_json())
        assert decision.action is not None
"""

from __future__ import annotations

import enum
import itertools
import math
import string
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs
from jsonschema import Draft202012Validator

from handoffs._cases import GeneratedCase
from handoffs._errors import InvalidArgument, MissingExtra
from handoffs._json import MAX_SAFE_INTEGER
from handoffs._moved import moved_from
from handoffs._neighbours import neighbours
from handoffs.contracts import (
    Authority,
    Contract,
    DecisionContent,
    EvidenceRef,
    FieldKind,
    FieldSpec,
    Governance,
    GovernanceService,
    Interval,
    Receipt,
    Uncertainty,
)
from handoffs.contracts.analysis import geometry

try:
    from hypothesis import strategies as st
except ImportError as exc:  # the testing extra is absent
    raise MissingExtra("handoffs.testing", extra="testing", module="hypothesis") from exc

if TYPE_CHECKING:
    from handoffs.lab import Experiment

__all__ = [
    "cases",
    "falsehoods",
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
        near = neighbours(threshold, integer=spec.kind is FieldKind.INT)
        if spec.kind is FieldKind.INT:
            found.update(int(_clip(v, spec)) for v in near)
        else:
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
    values = _present_strategy(contract, spec)
    return st.none() | values if spec.optional else values  # None: known not to apply


def _present_strategy(contract: Contract[Any, Any], spec: FieldSpec
                      ) -> st.SearchStrategy[Any]:
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
    realistic: st.SearchStrategy[Any] = geometry(contract).realistic_value(spec.name)
    if spec.kind is FieldKind.FLOAT:
        return st.sampled_from(edges) | realistic if edges else realistic
    return st.sampled_from([Interval.point(e) for e in edges]) | realistic if edges else realistic


def states(contract: Contract[S, Any]) -> st.SearchStrategy[S]:
    """Complete decision states of ``contract``: every field in its domain (an optional
    field's ``None``, known not to apply, included).

    Half the draws come from the policy's geometry (:meth:`Geometry.states()
    <handoffs.contracts.analysis.Geometry.states>`: a witness of every live
    region, both sides of every boundary, per field and on products and sums, and the
    hard constraints' boundaries). The rest, and what failing examples shrink towards,
    are realistic values: booleans and enums over their whole domain, numbers spread
    over their declared bounds (no subnormal floats), narrow intervals inside the range,
    with extra weight on each constant threshold and the values just across it. Without
    z3 (the ``lab`` extra) only the realistic values are drawn.
    """
    _check_contract(contract)
    fields = {spec.name: _value_strategy(contract, spec) for spec in contract.fields}
    realistic: st.SearchStrategy[S] = st.builds(contract.state, **fields)
    cover = geometry(contract).states()
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
    schema = contract.json_schema()["properties"]["decision_state"]
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
    domain = spec.values()
    if domain is not None:
        return [v for v in domain if _differs(spec, v, truth)]
    absent = [None] if spec.optional and truth is not None else []  # a presence flip
    if spec.kind is FieldKind.INTERVAL:
        edges = _boundaries(contract, spec)
        return absent + [v for v in (Interval.point(e) for e in edges)
                         if _differs(spec, v, truth)]
    return absent + [v for v in _boundaries(contract, spec) if _differs(spec, v, truth)]


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
    members); numbers favour the policy's thresholds. An optional field's presence
    flips are falsehoods too (``None`` for a true value, a value for a true
    ``None``). Every drawn state is re-validated against the contract's
    ``decision_state`` JSON Schema with ``jsonschema``, so a value the schema would
    catch is never offered as a falsehood.

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

    For a contract: records (what :class:`~handoffs.lab.GeneratedCases` yields) with
    a drawn case id, a complete decision state from :func:`states` and evidence references; the
    lab's default readers (``state``, ``case_id``, ``evidence_refs``) accept them.
    For an :class:`~handoffs.lab.Experiment`: cases drawn from the first ``limit``
    cases of its case source (which must be finite and non-empty).

    Args:
        source: a contract, or an experiment whose cases to sample.
        limit: how many of an experiment's cases to sample from.
    """
    from handoffs.lab import Experiment

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

# A name that left this face since 0.1.0 raises an ImportError naming its new place.
__getattr__ = moved_from(__name__)
