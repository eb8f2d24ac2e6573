"""Proofs about perturbed messages: a perturbation's symbolic form composed with the
policy, and one solver query per (perturbation, receiver) that either proves the
receiver decides as the reference on every state of the declared domain or returns a
witness state (internal; see ``analysis``).

A *symbolic form* says what a perturbation does to the decision state a receiver
reads, as data the analysis compiles to z3 (:class:`MergeValues`, :class:`RoundValue`,
:class:`WidenValue`, :class:`DropField`), and whether the reference follows another
policy (an added action, a new policy version). The query is

    exists s in the domain:  got(perturb(s)) != reference(s)
                             or loss(got, reference) != 0
                             or a hard constraint is broken,

where ``got`` is the receiver's action: the contract's policy over the perturbed
state under the receiver's semantics (``strict``: a missing field is refused, so the
fail-closed action; ``benign-defaults``: a missing field takes its declared
``if_missing`` value; ``three-valued``: a missing field leaves every condition that
reads it unknown), and an undetermined policy fails closed, as the receivers do.

An optional field's absence (``None``, known not to apply) is a value: an unchanged
field keeps it, and rounding, merging and widening leave an absent value absent (a
sentinel is never treated as a number); removing an optional field makes it missing,
which is not the same as absent.

Arithmetic is exact: rounding reproduces the perturbation's float grid (each
multiple of the step as the float the code computes), widening uses exact rationals.
Every witness is confirmed by the caller with the perturbation's own code before it
is reported; a model the code does not confirm makes the answer ``unknown``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any, Final

import attrs

from handoffs._errors import InvalidArgument
from handoffs._solver import z3_module
from handoffs.contracts._analysis._geometry import (
    _clip,
    _materialise,
    _round_state,
    _Solver,
)
from handoffs.contracts._analysis._results import State
from handoffs.contracts._contract import Contract
from handoffs.contracts._fields import MISSING, FieldKind, Interval

__all__ = [
    "SEMANTICS",
    "Change",
    "DropField",
    "MergeValues",
    "ProofAnswer",
    "RoundValue",
    "SymbolicForm",
    "WidenValue",
    "perturbed_state",
    "prove_form",
    "undecidable",
]

SEMANTICS: Final = ("strict", "benign-defaults", "three-valued")
"""How a receiver that decides by the contract's policy reads a perturbed state."""

_GRID_LIMIT: Final = 4096
"""Most multiples of a rounding step modelled one by one as the floats the code
computes; past it the exact products are used."""


def _wire(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def _wires(values: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(_wire(v) for v in values)


@attrs.frozen
class MergeValues:
    """An enum field's ``values`` are sent as ``into`` (wire values)."""

    field: str
    values: tuple[Any, ...] = attrs.field(converter=_wires)
    into: Any = attrs.field(converter=_wire)


@attrs.frozen
class RoundValue:
    """A number is sent as the nearest multiple of ``step`` (ties to even, as Python's
    ``round``), clamped to ``[minimum, maximum]``; an integer field is then rounded to
    an integer.
    """

    field: str
    step: float
    minimum: float | None = None
    maximum: float | None = None


@attrs.frozen
class WidenValue:
    """An interval ``[lo, hi]`` is sent as ``[lo - width/2, hi + width/2]``, clamped."""

    field: str
    width: float
    minimum: float | None = None
    maximum: float | None = None


@attrs.frozen
class DropField:
    """The field is removed from the decision state."""

    field: str


Change = MergeValues | RoundValue | WidenValue | DropField
"""One field's change in a symbolic form."""


@attrs.frozen
class SymbolicForm:
    """What a perturbation does, as data the policy analysis compiles.

    Attributes:
        changes: changes of the decision state (at most one per field); empty when
            the perturbation leaves the state as it is.
        reference: a policy the reference follows instead of the contract's (its
            actions need a ``value``; where it is undetermined the case keeps the
            contract's reference), or ``None``.
        admission: the perturbation changes only what a receiver's admission reads
            (governance members, evidence references, the policy version), never the
            decision state: a strict receiver then either refuses every perturbed
            message or none, whatever the state.
    """

    changes: tuple[Change, ...] = ()
    reference: Any = None
    admission: bool = False


@attrs.frozen
class ProofAnswer:
    """The solver's answer for one form under one receiver semantics.

    Attributes:
        status: ``proved``, ``refuted`` or ``unknown``.
        state: the witness state, when refuted.
        reason: why the answer is ``unknown``.
        seconds: CPU time spent.
    """

    status: str
    state: State | None = None
    reason: str = ""
    seconds: float = 0.0


class _PolicyView:
    """What :class:`handoffs.contracts._smt.Decision` reads of a contract: its policy
    and fail-closed action (another policy over the same fields for a new reference).
    """

    def __init__(self, contract: Contract[Any, Any], policy: Any) -> None:
        self.policy = policy
        self.fail_closed_action = contract.fail_closed_action


def _decision_class(smt: Any) -> Any:
    z3 = z3_module()

    class Partial(smt.Decision):  # type: ignore[misc]
        """A policy over a state some of whose fields are missing (unknown)."""

        def __init__(self, contract: Any, state: Any, index: Mapping[str, int],
                     missing: frozenset[str]) -> None:
            self.missing = missing
            super().__init__(contract, state, index)

        def _absent(self, name: str) -> tuple[Any, Any]:
            if name in self.missing:  # a missing optional field: absent or not, unknown
                return z3.BoolVal(False), z3.BoolVal(False)
            return super()._absent(name)  # type: ignore[no-any-return]

        def _is(self, condition: Any) -> tuple[Any, Any]:
            if condition.field in self.missing:
                return z3.BoolVal(False), z3.BoolVal(False)
            return super()._is(condition)  # type: ignore[no-any-return]

        def _threshold(self, condition: Any) -> tuple[Any, Any]:
            if condition.field in self.missing:
                return z3.BoolVal(False), z3.BoolVal(False)
            return super()._threshold(condition)  # type: ignore[no-any-return]

        def expression(self, expr: Any) -> tuple[Any, Any, Any]:
            name = getattr(expr, "name", None)
            if type(expr).__name__ == "Field" and name in self.missing:
                zero = z3.RealVal(0)
                return zero, zero, z3.BoolVal(False)
            return super().expression(expr)  # type: ignore[no-any-return]

    return Partial


def _clamp(value: Fraction, minimum: float | None, maximum: float | None) -> Fraction:
    if minimum is not None:
        value = max(value, Fraction(minimum))
    if maximum is not None:
        value = min(value, Fraction(maximum))
    return value


def _real(value: Fraction) -> Any:
    return z3_module().RealVal(f"{value.numerator}/{value.denominator}")


def _term_clamp(term: Any, minimum: float | None, maximum: float | None) -> Any:
    z3 = z3_module()
    if minimum is not None:
        low = _real(Fraction(minimum))
        term = z3.If(term < low, low, term)
    if maximum is not None:
        high = _real(Fraction(maximum))
        term = z3.If(term > high, high, term)
    return term


class _Compiler:
    """Links the perturbed state's variables to the true state's under a form."""

    def __init__(self, contract: Contract[Any, Any], truth: Any, sent: Any) -> None:
        self.contract = contract
        self.truth = truth
        self.sent = sent
        self.z3 = z3_module()
        self.counter = 0

    def link(self, form: SymbolicForm, semantics: str) -> tuple[list[Any], frozenset[str],
                                                                bool]:
        """``(constraints, missing fields, refused)`` for the perturbed state."""
        changed = {c.field: c for c in form.changes}
        unknown = sorted(set(changed) - set(self.contract.field_map))
        if unknown:
            raise InvalidArgument(f"the symbolic form changes unknown fields {unknown}")
        constraints: list[Any] = []
        missing: set[str] = set()
        refused = False
        z3 = self.z3
        for spec in self.contract.fields:
            a = self.truth.vars[spec.name]
            b = self.sent.vars[spec.name]
            change = changed.get(spec.name)
            held = self.truth.presence(spec.name)
            if held is not None and not isinstance(change, DropField):
                # absent stays absent, at the canonical value; a value is changed as given
                constraints.append(self.sent.presence(spec.name) == held)
                constraints += [z3.Implies(z3.Not(held), x == y) for x, y in zip(a, b,
                                                                              strict=True)]
            if change is None:
                constraints += [x == y for x, y in zip(a, b, strict=True)]
            elif isinstance(change, DropField):
                if semantics == "strict":
                    refused = True
                elif semantics == "benign-defaults" and spec.if_missing is not MISSING:
                    constraints += self._pinned(spec, spec.if_missing, b)
                else:
                    missing.add(spec.name)
            elif isinstance(change, MergeValues):
                constraints.append(_when(held, self._merge(spec, change, a[0], b[0])))
            elif isinstance(change, RoundValue):
                constraints.append(_when(held, *self._round(spec, change, a[0], b[0])))
            else:
                constraints.append(_when(held, *self._widen(spec, change, a, b)))
        return constraints, frozenset(missing), refused

    def _pinned(self, spec: Any, value: Any, b: Sequence[Any]) -> list[Any]:
        pins: list[Any] = self.sent.pin(spec.name, value)
        if value is None:  # the declared default is absence: at the canonical value
            pins.append(self.z3.Or(*(self.sent.present.get(spec.name, self.z3.BoolVal(True)),
                                     self.z3.And(*self.sent._canonical(spec)))))
        return pins

    def _merge(self, spec: Any, change: MergeValues, a: Any, b: Any) -> Any:
        z3 = self.z3
        if spec.kind is not FieldKind.ENUM:
            raise InvalidArgument(f"merge-values: {spec.name} is not an enum field")
        wires = [_wire(v) for v in spec.domain() or ()]
        if change.into not in wires:
            raise InvalidArgument(f"merge-values: {change.into!r} is no value of {spec.name}")
        merged = [wires.index(v) for v in change.values if v in wires and v != change.into]
        if not merged:
            return b == a
        return b == z3.If(z3.Or(*(a == i for i in merged)), wires.index(change.into), a)

    def _round(self, spec: Any, change: RoundValue, a: Any, b: Any) -> list[Any]:
        z3 = self.z3
        if spec.kind not in (FieldKind.INT, FieldKind.FLOAT):
            raise InvalidArgument(f"round-value: {spec.name} is not a numeric field")
        step = Fraction(change.step)
        if step <= 0:
            raise InvalidArgument("round-value: the step must be > 0")
        self.counter += 1
        k = z3.Int(f"round.{self.counter}")
        x = z3.ToReal(a) if spec.kind is FieldKind.INT else a
        half = _real(step / 2)
        low = x - half <= z3.ToReal(k) * _real(step)
        high = z3.ToReal(k) * _real(step) <= x + half
        tie = z3.Or(z3.ToReal(k) * _real(step) == x - half,
                    z3.ToReal(k) * _real(step) == x + half)
        out = [low, high, z3.Implies(tie, k % 2 == 0)]
        lo = float(spec.minimum or 0)
        hi = float(spec.maximum or 0)
        first = math.floor(lo / change.step) - 1
        last = math.ceil(hi / change.step) + 1
        if last - first <= _GRID_LIMIT:
            value: Any = None
            for j in range(last, first - 1, -1):
                grid = float(_clamp(Fraction(j * change.step), change.minimum, change.maximum))
                exact = Fraction(round(grid)) if spec.kind is FieldKind.INT else Fraction(grid)
                term = _real(exact)
                value = term if value is None else z3.If(k == j, term, value)
            out.append(z3.And(k >= first, k <= last))
        else:
            value = _term_clamp(z3.ToReal(k) * _real(step), change.minimum, change.maximum)
            if spec.kind is FieldKind.INT and step.denominator != 1:
                raise InvalidArgument("round-value: an integer field with a fractional step and "
                                 "a wide range is not modelled")
        out.append((z3.ToReal(b) if spec.kind is FieldKind.INT else b) == value)
        return out

    def _widen(self, spec: Any, change: WidenValue, a: Sequence[Any],
               b: Sequence[Any]) -> list[Any]:
        if spec.kind is not FieldKind.INTERVAL:
            raise InvalidArgument(f"widen-value: {spec.name} is not an interval field")
        half = _real(Fraction(change.width) / 2)
        return [b[0] == _term_clamp(a[0] - half, change.minimum, change.maximum),
                b[1] == _term_clamp(a[1] + half, change.minimum, change.maximum)]


def _when(held: Any, *formulas: Any) -> Any:
    """``formulas`` hold when the true value is present (always for a required field)."""
    z3 = z3_module()
    both = z3.And(*formulas)
    return both if held is None else z3.Implies(held, both)


def undecidable(contract: Contract[Any, Any]) -> str:
    """Why the solver cannot decide perturbations of ``contract`` (the policy or a hard
    constraint holds an opaque predicate, or z3 is not installed), or ``""``.
    """
    from handoffs._errors import MissingExtra
    from handoffs.contracts._analysis._geometry import _conditions, _opaque

    if any(_opaque(c) for c in _conditions(contract)):
        return "the policy holds an opaque predicate"
    try:
        z3_module()
    except MissingExtra as exc:
        return f"the solver is not available: {exc}"
    return ""


def _action_index(contract: Contract[Any, Any], form: SymbolicForm) -> dict[str, int]:
    """Every action value (the contract's, then a new reference policy's) by index."""
    values: list[str] = [a.value for a in contract.actions]
    for rule in () if form.reference is None else form.reference.rules:
        if rule.action.value not in values:
            values.append(rule.action.value)
    return {v: i for i, v in enumerate(values)}


def prove_form(contract: Contract[Any, Any], form: SymbolicForm, semantics: str, *,
               loss: Mapping[tuple[str, str], float],
               hard: Sequence[tuple[str, str, frozenset[str], Any]],
               confirm: Callable[[State], bool], timeout_ms: int,
               refused: bool = False) -> ProofAnswer:
    """Ask whether a receiver of ``semantics`` decides as the reference on every state
    under ``form``.

    Args:
        contract: the contract (its policy must be declarative).
        form: the perturbation's symbolic form.
        semantics: ``strict``, ``benign-defaults`` or ``three-valued``.
        loss: the scoring's loss per ``(chosen, reference)`` action value.
        hard: the scoring's hard constraints ``(name, chosen, allowed references,
            when)`` (``when`` a condition on the true state, or ``None``).
        confirm: the perturbation's own code on a candidate witness state: true when
            the receiver's action, loss or hard violations differ there.
        timeout_ms: the solver's time limit.
        refused: the receiver refuses every perturbed message (fail-closed action).

    Returns:
        ``proved`` (no state differs), ``refuted`` with a witness state the code
        confirms, or ``unknown`` (time limit, or a model the code does not confirm).
    """
    import time

    from handoffs.contracts import _smt

    started = time.process_time()
    z3 = z3_module()
    index = _action_index(contract, form)
    truth = _smt.StateVars(contract.fields, "t.")
    sent = _smt.StateVars(contract.fields, "m.")
    compiler = _Compiler(contract, truth, sent)
    links, missing, drop_refused = compiler.link(form, semantics)
    reference = _smt.Decision(contract, truth, index)
    ref_action = reference.action
    if form.reference is not None:
        view: Any = _PolicyView(contract, form.reference)
        other = _smt.Decision(view, truth, index)
        ref_action = z3.If(other.open, reference.action, other.action)
    if refused or drop_refused:
        got = z3.IntVal(index[contract.fail_closed_action.value])
    else:
        got = _decision_class(_smt)(contract, sent, index, missing).action
    terms, severe = _differs(got, ref_action, reference, index=index, loss=loss, hard=hard)
    unknown: list[str] = []
    solver = _Solver(z3, timeout_ms, unknown)
    solver.add(*truth.domain, *links)
    if severe:  # a witness that breaks a hard constraint first, when there is one
        status, model = solver.check("perturbation (hard constraints)", z3.Or(*severe))
        if status == "sat":
            raw = {name: truth.value(model, name) for name in truth.specs}
            states = _materialise(contract, [raw], lambda s: confirm(s[0]))
            if states is not None:
                return ProofAnswer("refuted", states[0],
                                   seconds=time.process_time() - started)
    status, model = solver.check("perturbation", z3.Or(*terms, *severe))
    seconds = time.process_time() - started
    if status == "unsat":
        return ProofAnswer("proved", seconds=seconds)
    if status != "sat":
        return ProofAnswer("unknown", reason=f"the solver's time limit ({timeout_ms} ms)",
                           seconds=seconds)
    raw = {name: truth.value(model, name) for name in truth.specs}
    states = _materialise(contract, [raw], lambda s: confirm(s[0]))
    if states is None:
        states = _nearby(contract, raw, confirm)
    seconds = time.process_time() - started
    if states is None:
        return ProofAnswer("unknown", reason="the solver's witness does not hold under the "
                                             "perturbation's own code", seconds=seconds)
    return ProofAnswer("refuted", states[0], seconds=seconds)


_NEARBY_SCALES: Final = (1e-9, 1e-7, 1e-5, 1e-3)
_NEARBY_TRIES: Final = 40


def _nearby(contract: Contract[Any, Any], raw: Mapping[str, Any],
            confirm: Callable[[State], bool]) -> tuple[State, ...] | None:
    """A state next to the solver's model that the code confirms, when the model itself
    sits exactly on a tie or a cut that float arithmetic places on the other side:
    one numeric field moved at a time by a growing fraction of its range (seeded, so
    the answer is reproducible).
    """
    import random

    base = _round_state(contract, raw, 17)
    numeric = [s for s in contract.fields
               if s.kind in (FieldKind.INT, FieldKind.FLOAT, FieldKind.INTERVAL)]
    rng = random.Random(0)  # noqa: S311 - a reproducible search, not a secret
    for scale in _NEARBY_SCALES:
        for _ in range(_NEARBY_TRIES if numeric else 0):
            spec = rng.choice(numeric)
            span = float(spec.maximum or 0) - float(spec.minimum or 0)
            step = span * scale * rng.uniform(-1, 1)
            value = base[spec.name]
            if value is None:  # absent: nothing to move
                continue
            if spec.kind is FieldKind.INT:
                moved: Any = int(_clip(spec, value + (1 if step >= 0 else -1)))
            elif spec.kind is FieldKind.FLOAT:
                moved = _clip(spec, float(f"{value + step:.12g}"))
            else:
                lo = _clip(spec, float(f"{value.lo + step:.12g}"))
                hi = _clip(spec, float(f"{value.hi + step:.12g}"))
                moved = Interval(min(lo, hi), max(lo, hi))
            state = {**base, spec.name: moved}
            try:
                if confirm(state):
                    return (state,)
            except (ValueError, TypeError):
                continue
    return None


def _differs(got: Any, ref_action: Any, reference: Any, *, index: Mapping[str, int],
             loss: Mapping[tuple[str, str], float],
             hard: Sequence[tuple[str, str, frozenset[str], Any]]
             ) -> tuple[list[Any], list[Any]]:
    """The ways the received action can differ: another action or a loss on the
    diagonal (a changed loss matrix); and, apart, another action that breaks a hard
    constraint (a violation the reference itself commits is the policy's, not the
    perturbation's).
    """
    z3 = z3_module()
    terms = [got != ref_action]
    severe: list[Any] = []
    for (chosen, ref), cost in loss.items():
        if cost and chosen == ref and chosen in index:
            terms.append(z3.And(got == index[chosen], ref_action == index[ref]))
    for _, chosen, allowed, when in hard:
        if chosen not in index:
            continue
        applies = z3.BoolVal(True)
        if when is not None:
            applies = z3.Not(reference.condition(when)[1])
        severe.append(z3.And(got != ref_action, got == index[chosen], applies,
                             *(ref_action != index[a] for a in allowed if a in index)))
    return terms, severe


def perturbed_state(contract: Contract[Any, Any], form: SymbolicForm, semantics: str,
                    state: State) -> dict[str, Any] | None:
    """What the form makes of one true state, read back from the solver: the
    perturbed state's values by field (a missing field is absent), or ``None`` when a
    ``strict`` receiver refuses it. For checking a form against its perturbation's own
    code (the tests do, on witnesses and on random states).

    Raises:
        ValueError: the form does not compile, or the solver finds no perturbed state.
    """
    from handoffs.contracts import _smt

    z3 = z3_module()
    truth = _smt.StateVars(contract.fields, "t.")
    sent = _smt.StateVars(contract.fields, "m.")
    links, missing, refused = _Compiler(contract, truth, sent).link(form, semantics)
    if refused:
        return None
    pins = [*truth.domain]
    for spec in contract.fields:
        pins += truth.pin(spec.name, state[spec.name])
    solver = _Solver(z3, 10_000, [])
    status, model = solver.check("perturbed state", *links, *pins)
    if status != "sat":
        raise InvalidArgument(f"the form gives no perturbed state for {state!r} ({status})")
    return {name: sent.value(model, name) for name in sent.specs if name not in missing}
