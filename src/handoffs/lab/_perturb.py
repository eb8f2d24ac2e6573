"""Perturbations: generic interventions on the message between sender and receiver.

Every perturbation works for any contract; none knows about payments. The families:

- **ablation**: remove one decision field (a benign-default receiver then assumes the
  field's declared ``if_missing`` value) or one governance member;
- **coarsening**: merge enum values, round or widen numbers, shorten evidence
  references;
- **falsehood**: schema-valid values that differ from the truth, generated from the
  contract (finite domains enumerated, numbers drawn with Hypothesis and boundary
  values), each re-validated with ``jsonschema``; declared injections into named
  cases;
- **control**: no message, a message shuffled across cases, a constant message;
- **boundary**: an action added to the action set, the loss matrix changed, the
  policy version changed, an authoritative sender, a relay through k hops with
  re-encoding at each hop.

A perturbation yields :class:`Variant` s of one strategy's message for one case.
Messages are plain dicts; variants copy only what they change.
"""

from __future__ import annotations

import enum
import fnmatch
import itertools
import math
import re
import string
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Final, TypeVar

import attrs
from jsonschema import Draft202012Validator

from handoffs._json import canonical_bytes, dumps, loads
from handoffs.contracts._contract import Authority, Contract, Uncertainty
from handoffs.contracts._fields import FieldKind, FieldSpec, Interval
from handoffs.contracts._policy import (
    AllOf,
    AnyOf,
    Compare,
    Condition,
    Is,
    Not,
    Over,
    Policy,
    Predicate,
    Rule,
    Under,
)
from handoffs.contracts._receipt import GOVERNANCE_FIELDS
from handoffs.contracts._schema import to_json_schema
from handoffs.lab._experiment import ExperimentError, draw, typed_value, wire_value

__all__ = [
    "NOT_APPLICABLE",
    "REMOVED",
    "SUBJECT",
    "UNCHANGED",
    "ActionAdded",
    "AuthoritativeSender",
    "CaseContext",
    "ConstantMessage",
    "Falsehood",
    "LossChanged",
    "MergeEnumValues",
    "Mutate",
    "NoMessage",
    "Perturbation",
    "PolicyVersionChanged",
    "Relay",
    "RemoveDecisionField",
    "RemoveGovernanceField",
    "RoundNumeric",
    "Scoring",
    "ShortenEvidenceRefs",
    "ShuffledMessage",
    "Variant",
    "WidenInterval",
    "declare_perturbation",
    "perturbation_from_json",
    "select_perturbations",
    "standard_perturbations",
]

SUBJECT: Final = "@subject"
"""Marker in :attr:`Perturbation.strategies`: the experiment's subject strategy."""

_RELAY_NAMESPACE: Final = uuid.UUID("3b0f5f4e-8f55-4d55-a3d5-2f0d0f9a4c21")


# ------------------------------------------------------------------- data shapes


@attrs.frozen
class Scoring:
    """How decisions are scored: the loss per (chosen, reference) action value and the
    hard constraints as ``(name, chosen, allowed references)``.
    """

    loss: Mapping[tuple[str, str], float]
    hard: tuple[tuple[str, str, frozenset[str]], ...]
    name: str = "contract"
    conditioned: frozenset[str] = frozenset()

    @classmethod
    def of(cls, contract: Contract[Any, Any]) -> Scoring:
        """The contract's own loss matrix and hard constraints."""
        return cls(
            loss={(c.value, r.value): float(v) for (c, r), v in contract.loss.entries.items()},
            hard=tuple((h.name, h.chosen.value, frozenset(a.value for a in h.allowed_references))
                       for h in contract.hard_constraints),
            conditioned=frozenset(h.name for h in contract.hard_constraints
                                  if h.when is not None),
        )

    def regret(self, chosen: str, reference: str) -> float:
        """Loss of ``chosen`` against ``reference`` (a missing pair is an error)."""
        try:
            return self.loss[(chosen, reference)]
        except KeyError:
            raise ExperimentError(
                f"loss matrix {self.name!r} has no entry for ({chosen}, {reference})",
                code="incomplete-loss-matrix") from None

    def violations(self, chosen: str, reference: str,
                   holding: Collection[str] = ()) -> tuple[str, ...]:
        """Names of the hard constraints ``chosen`` breaks against ``reference``;
        ``holding`` names the state-conditioned ones (``when=``) whose condition holds
        on the case's true state (the others do not apply).
        """
        return tuple(n for n, c, allowed in self.hard if c == chosen and reference not in allowed
                     and (n not in self.conditioned or n in holding))


class _Sentinel:
    """A named marker value (it pickles as the module constant of its name)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name

    def __reduce__(self) -> str:
        return self._name


REMOVED: Final[Any] = _Sentinel("REMOVED")
"""In :attr:`Variant.patch`: the member is removed."""

UNCHANGED: Final[Any] = _Sentinel("UNCHANGED")
"""From :meth:`Perturbation.change`: the message is sent as it is (one unchanged variant)."""

NOT_APPLICABLE: Final[Any] = _Sentinel("NOT_APPLICABLE")
"""From :meth:`Perturbation.change`: the perturbation does not apply (no variant)."""

_TOUCHED: dict[str, frozenset[str]] = {}


class Variant:
    """One perturbed message.

    A variant either carries its whole ``message``, or describes it exactly as a
    *patch* of the message the perturbation was given (``Variant.patched``): one
    member set to a new value, or removed. A patched variant builds its message only
    when something reads :attr:`message`; the lab reads the patch instead, to measure,
    validate and memoise the variant without building it. Treat variants as immutable.

    Attributes:
        message: what the receiver gets.
        label: distinguishes variants of one perturbation on one case (falsehoods).
        reference: the reference action when the perturbation changes it (boundary
            changes); ``None`` keeps the case's reference.
        falsehood: ``(field, true value, false value)`` in wire form, for falsehoods.
        falsified: the reference policy's action if the falsehood were true.
        touched: top-level members changed (``None``: unknown, check everything).
        full_validation: validate the whole message with ``jsonschema`` (injections).
        base: the message a patch applies to (``None`` for a whole message).
        patch: ``(member, value)``; ``value`` is :data:`REMOVED` for a removal.
    """

    __slots__ = ("_message", "base", "falsehood", "falsified", "full_validation", "label",
                 "patch", "reference", "touched")

    def __init__(
        self,
        message: Mapping[str, Any],
        *,
        label: str | None = None,
        reference: str | None = None,
        falsehood: tuple[str, Any, Any] | None = None,
        falsified: str | None = None,
        touched: frozenset[str] | None = None,
        full_validation: bool = False,
    ) -> None:
        self._message: Mapping[str, Any] | None = message
        self.label = label
        self.reference = reference
        self.falsehood = falsehood
        self.falsified = falsified
        self.touched = touched
        self.full_validation = full_validation
        self.base: Mapping[str, Any] | None = None
        self.patch: tuple[str, Any] | None = None

    @classmethod
    def patched(cls, base: Mapping[str, Any], member: str, value: Any, *,
                label: str | None = None, reference: str | None = None,
                falsehood: tuple[str, Any, Any] | None = None, falsified: str | None = None,
                full_validation: bool = False) -> Variant:
        """``base`` with ``member`` set to ``value`` (or removed: :data:`REMOVED`)."""
        variant = cls.__new__(cls)
        variant._message = None
        variant.label = label
        variant.reference = reference
        variant.falsehood = falsehood
        variant.falsified = falsified
        touched = _TOUCHED.get(member)
        if touched is None:
            touched = _TOUCHED[member] = frozenset((member,))
        variant.touched = touched
        variant.full_validation = full_validation
        variant.base = base
        variant.patch = (member, value)
        return variant

    @property
    def message(self) -> Mapping[str, Any]:
        """What the receiver gets (a patched variant builds it on first use)."""
        message = self._message
        if message is None:
            assert self.base is not None  # noqa: S101 - a variant without a message is a patch
            assert self.patch is not None  # noqa: S101
            member, value = self.patch
            built = dict(self.base)
            if value is REMOVED:
                built.pop(member, None)
            else:
                built[member] = value
            message = self._message = built
        return message

    def __repr__(self) -> str:
        what = f"patch={self.patch!r}" if self.patch is not None else f"message={self.message!r}"
        return f"Variant({what}, label={self.label!r}, touched={self.touched!r})"


class CaseContext:
    """What a perturbation may know about the case it perturbs (treat it as immutable).

    Attributes:
        index: position of the case in the stream.
        case_id: the case id.
        truth: the true decision state as a typed view (field → value).
        reference: the reference action value from the full evidence.
        contract: the experiment's contract.
        decide: the (memoised) reference policy on a complete typed view.
        neighbour: the unperturbed message of another case for a strategy (shuffle).
        constant: the constant message for a strategy.
    """

    __slots__ = ("case_id", "constant", "contract", "decide", "index", "neighbour", "reference",
                 "truth")

    def __init__(
        self,
        *,
        index: int,
        case_id: str,
        truth: Mapping[str, Any],
        reference: str,
        contract: Contract[Any, Any],
        decide: Callable[[Mapping[str, Any]], str],
        neighbour: Callable[[str], Mapping[str, Any] | None],
        constant: Callable[[str], Mapping[str, Any] | None],
    ) -> None:
        self.index = index
        self.case_id = case_id
        self.truth = truth
        self.reference = reference
        self.contract = contract
        self.decide = decide
        self.neighbour = neighbour
        self.constant = constant

    def __repr__(self) -> str:
        return f"CaseContext(index={self.index!r}, case_id={self.case_id!r})"


def _names(value: Sequence[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def _strategies(value: Sequence[str] | None) -> tuple[str, ...] | None:
    return None if value is None else _names(value)


def _strategies_field() -> Any:
    """The ``strategies`` attribute every shipped perturbation declares: ``None`` (the
    kind's default) or strategy names; a single name is accepted for one.
    """
    return attrs.field(default=None, converter=_strategies)


Text = str | Callable[[Any], str]
"""A template formatted with the perturbation's attributes, or a function of it."""


class _AttributesOf:
    """The attributes of ``obj`` by name, for ``str.format_map``."""

    __slots__ = ("_obj",)

    def __init__(self, obj: object) -> None:
        self._obj = obj

    def __getitem__(self, name: str) -> Any:
        try:
            return getattr(self._obj, name)
        except AttributeError:
            raise KeyError(name) from None


def _render(text: Text, obj: object) -> str:
    return text.format_map(_AttributesOf(obj)) if isinstance(text, str) else text(obj)


@attrs.frozen
class Declaration:
    """What a perturbation class is, declared once (see :func:`declare_perturbation`).

    Templates are ``str.format`` strings over the instance's attributes
    (``"round-numeric:{field}:{step:g}"``); ``id``, ``description`` and ``target`` may
    also be functions of the instance.
    """

    kind: str
    id: Text
    description: Text
    target: Text | None = None
    member: str | None = None
    reads: tuple[str, ...] | None = None
    presence: tuple[str, ...] = ()
    subject: bool = False


_P = TypeVar("_P", bound="type[Perturbation]")

_KINDS: Final = frozenset({"ablation", "coarsening", "falsehood", "control", "boundary"})


def declare_perturbation(
    *, kind: str, id: Text, description: Text, target: Text | None = None,
    member: str | None = None, reads: Sequence[str] | None = None,
    presence: Sequence[str] = (), subject: bool = False,
) -> Callable[[_P], _P]:
    """Declare a :class:`Perturbation` subclass (a frozen attrs class) by what it is.

    Args:
        kind: its family: ``ablation``, ``coarsening``, ``falsehood``, ``control`` or
            ``boundary`` (the report groups by it).
        id: the stable identifier, a template over the attributes
            (``"cap-amount:{limit:g}"``) or a function of the instance.
        description: what it does, in words (template or function).
        target: the field or member it changes, if one (template or function).
        member: the member the generic engine changes, ``"<member>"`` or
            ``"decision_state.<field>"`` (a template). With it, the class writes only
            :meth:`Perturbation.change` and the engine builds the variant as a patch.
        reads: the message members its variants depend on by value (templates);
            default: the top-level member of ``member``, else unknown (``None``).
        presence: members whose presence (not value) the variants also depend on.
        subject: by default it applies to the experiment's subject strategy only
            (otherwise to every strategy).

    Raises:
        ExperimentError: an unknown kind; on the class, one that is not an attrs
            subclass of :class:`Perturbation`, or a template that names no attribute.
    """
    if kind not in _KINDS:
        raise ExperimentError(f"unknown perturbation kind {kind!r}; known: {sorted(_KINDS)}")
    declaration = Declaration(kind=kind, id=id, description=description, target=target,
                              member=member, reads=None if reads is None else tuple(reads),
                              presence=tuple(presence), subject=subject)

    def apply(cls: _P) -> _P:
        is_attrs: bool = isinstance(cls, type) and attrs.has(cls)  # a bool: mypy keeps _P
        if not (is_attrs and issubclass(cls, Perturbation)):
            raise ExperimentError(f"declare_perturbation declares a frozen attrs subclass of "
                                  f"Perturbation (@attrs.frozen below it), got {cls!r}")
        templates = [t for t in (id, description, target, member, *(reads or ()), *presence)
                     if isinstance(t, str)]
        for template in templates:
            try:
                names = [n for _, n, _, _ in string.Formatter().parse(template) if n is not None]
            except ValueError as exc:
                raise ExperimentError(f"{cls.__name__}: bad template {template!r}: {exc}") from exc
            for name in names:
                if not hasattr(cls, re.split(r"[.\[]", name)[0]):
                    raise ExperimentError(f"{cls.__name__}: a template names {{{name}}}, "
                                          "which is no attribute of the class")
        cls.declaration = declaration
        cls.kind = kind
        cls.default_strategies = (SUBJECT,) if subject else None
        return cls

    return apply


class Perturbation:
    """Base of perturbations (frozen attrs subclasses).

    A subclass is declared with :func:`declare_perturbation` (its kind, id,
    description, and the member it changes) and writes either :meth:`change` (one
    member's new value: the generic engine makes the variant) or :meth:`variants`.
    A subclass may instead set ``kind`` and write the properties below itself.
    ``strategies`` restricts which strategies a perturbation changes: ``None`` for
    every strategy whose message it applies to, or names (``"@subject"`` for the
    experiment's subject).
    """

    kind: ClassVar[str] = "ablation"
    default_strategies: ClassVar[tuple[str, ...] | None] = None
    declaration: ClassVar[Declaration | None] = None

    def _declared(self) -> Declaration:
        declaration = type(self).declaration
        if declaration is None:
            raise NotImplementedError(f"{type(self).__name__} is not declared; use "
                                      "declare_perturbation or write the property")
        return declaration

    @property
    def id(self) -> str:
        """Stable identifier, e.g. ``remove-decision-field:policy_current``."""
        return _render(self._declared().id, self)

    @property
    def target(self) -> str | None:
        """The field or member the perturbation changes, if one."""
        declaration = type(self).declaration
        if declaration is None or declaration.target is None:
            return None
        return _render(declaration.target, self)

    @property
    def description(self) -> str:
        """What the perturbation does, in words."""
        return _render(self._declared().description, self)

    @property
    def reads(self) -> frozenset[str] | None:
        """The message members the variants are a function of, or ``None``.

        When set, :meth:`variants` depends on nothing but these members of the message
        (whether present, and their values): not on the case context, the strategy or
        other members; and every variant is a patch of the message (see
        :meth:`Variant.patched`) or the message itself. Members that matter only by
        being present or absent are declared in :attr:`presence` instead. (The lab
        engine no longer reads it: computing variants once per distinct value of
        these members paid less than 2× in CPU time in ``benchmarks/lab.py``.)
        """
        declaration = type(self).declaration
        if declaration is None:
            return None
        if declaration.reads is not None:
            return frozenset(_render(r, self) for r in declaration.reads)
        if declaration.member is None:
            return None
        return frozenset({_split_target(_render(declaration.member, self))[0]
                          or _render(declaration.member, self)})

    @property
    def presence(self) -> frozenset[str]:
        """Members whose presence (not value) the variants also depend on, when
        :attr:`reads` is set.
        """
        declaration = type(self).declaration
        if declaration is None:
            return frozenset()
        return frozenset(_render(p, self) for p in declaration.presence)

    @property
    def applies_to(self) -> tuple[str, ...] | None:
        """Strategies this perturbation applies to (declared or the kind's default)."""
        declared: tuple[str, ...] | None = getattr(self, "strategies", None)
        return declared if declared is not None else self.default_strategies

    def prepare(self, contract: Contract[Any, Any], *, seed: int) -> Perturbation:
        """Bind to a contract before the run (falsehood pools); default: unchanged."""
        return self

    def scoring(self, base: Scoring) -> Scoring:
        """The scoring for this perturbation's decisions (default: the contract's)."""
        return base

    def change(self, value: Any) -> Any:
        """The declared member's new value (:data:`REMOVED` removes it), given its
        current value; or :data:`UNCHANGED`, or :data:`NOT_APPLICABLE`. Called only
        when the member is present.
        """
        raise NotImplementedError(f"{type(self).__name__} writes neither change nor variants")

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """The perturbed messages for one case and strategy (none: not applicable).

        The generic engine: the declared ``member``'s value through :meth:`change`,
        as a patch of the message.
        """
        member = self._declared().member
        if member is None:
            raise NotImplementedError(f"{type(self).__name__} declares no member and "
                                      "writes no variants")
        target = _render(member, self)
        present, value = _get(message, target)
        if not present:
            return
        new = self.change(value)
        if new is NOT_APPLICABLE:
            return
        if new is UNCHANGED:
            yield Variant(message, touched=frozenset())
            return
        yield _set_patch(message, target, new)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready description (the report's ``experiment.perturbations`` rows)."""
        applies = self.applies_to
        return {"id": self.id, "kind": self.kind, "target": self.target,
                "description": self.description,
                "strategies": None if applies is None else list(applies)}


def _state_of(message: Mapping[str, Any]) -> Mapping[str, Any] | None:
    state = message.get("decision_state")
    return state if isinstance(state, Mapping) else None


def _split_target(target: str) -> tuple[str | None, str]:
    if target.startswith("decision_state."):
        return "decision_state", target.removeprefix("decision_state.")
    return None, target


def _get(message: Mapping[str, Any], target: str) -> tuple[bool, Any]:
    parent, name = _split_target(target)
    holder = _state_of(message) if parent else message
    if holder is None or name not in holder:
        return False, None
    return True, holder[name]


def _set_patch(message: Mapping[str, Any], target: str, value: Any) -> Variant:
    """``message`` with ``target`` (a member or ``decision_state.<field>``) set or
    removed (:data:`REMOVED`), as a patch.
    """
    parent, name = _split_target(target)
    if parent:
        state = dict(_state_of(message) or {})
        if value is REMOVED:
            del state[name]
        else:
            state[name] = value
        return Variant.patched(message, "decision_state", state)
    return Variant.patched(message, name, value)


def _values(value: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(value)


def _positive(what: str) -> Callable[[Any, Any, Any], None]:
    def check(_: Any, __: Any, value: Any) -> None:
        if not value > 0:
            raise ExperimentError(f"{what} must be > 0, got {value!r}")
    return check


def _spec_of(contract: Contract[Any, Any], field: str, kinds: Collection[FieldKind],
             refusal: str) -> FieldSpec:
    spec = contract.field_map.get(field)
    if spec is None or spec.kind not in kinds:
        raise ExperimentError(refusal)
    return spec


def _clamp(value: float, spec_min: float | None, spec_max: float | None) -> float:
    if spec_min is not None:
        value = max(value, spec_min)
    if spec_max is not None:
        value = min(value, spec_max)
    return value


# ------------------------------------------------------------------------ ablation


@declare_perturbation(
    kind="ablation", subject=True, id="remove-decision-field:{field}", target="{field}",
    member="decision_state.{field}",
    description="Remove decision field {field} (a benign-default receiver assumes its "
                "declared if_missing value).")
@attrs.frozen
class RemoveDecisionField(Perturbation):
    """Remove one decision field from the message's ``decision_state``.

    Id ``remove-decision-field:<field>``.
    """

    field: str
    strategies: tuple[str, ...] | None = _strategies_field()

    def change(self, value: Any) -> Any:
        """:data:`REMOVED`."""
        return REMOVED


@declare_perturbation(
    kind="ablation", subject=True, id="remove-governance-field:{field}", target="{field}",
    member="{field}", reads=(), presence=("{field}",),
    description="Remove governance member {field}.")
@attrs.frozen
class RemoveGovernanceField(Perturbation):
    """Remove one governance member (``case_id``, ``sender``, ``authority``, ...).

    Id ``remove-governance-field:<member>``; the variant depends only on whether the
    member is present.
    """

    field: str
    strategies: tuple[str, ...] | None = _strategies_field()

    def change(self, value: Any) -> Any:
        """:data:`REMOVED`."""
        return REMOVED


# ---------------------------------------------------------------------- coarsening


@declare_perturbation(
    kind="coarsening", subject=True, target="{target_}", member="{target_}",
    id=lambda p: f"merge-enum-values:{p.target_}:{'+'.join(map(str, p.values))}->{p.into}",
    description=lambda p: f"Send {', '.join(map(str, p.values))} of {p.target_} as {p.into}.")
@attrs.frozen
class MergeEnumValues(Perturbation):
    """Merge enum values: any of ``values`` is sent as ``into``.

    ``target`` is a decision field (``decision_state.<field>``) or a top-level enum
    member such as ``uncertainty`` (merging CONFLICT into RESOLVED launders a
    conflict into smooth prose). Id ``merge-enum-values:<target>:<a>+<b>-><into>``.
    """

    target_: str = attrs.field(alias="target")
    values: tuple[Any, ...] = attrs.field(converter=_values)
    into: Any
    strategies: tuple[str, ...] | None = _strategies_field()

    def change(self, value: Any) -> Any:
        """``into`` for a merged value."""
        return self.into if value in self.values and value != self.into else UNCHANGED


@declare_perturbation(
    kind="coarsening", subject=True, id="round-numeric:{field}:{step:g}", target="{field}",
    member="decision_state.{field}", description="Round {field} to a multiple of {step:g}.")
@attrs.frozen
class RoundNumeric(Perturbation):
    """Round a numeric decision field to a multiple of ``step`` (within its bounds).

    Id ``round-numeric:<field>:<step>``.
    """

    field: str
    step: float = attrs.field(validator=_positive("round step"))
    minimum: float | None = attrs.field(default=None, kw_only=True)
    maximum: float | None = attrs.field(default=None, kw_only=True)
    integer: bool = attrs.field(default=False, kw_only=True)
    strategies: tuple[str, ...] | None = _strategies_field()

    def prepare(self, contract: Contract[Any, Any], *, seed: int) -> Perturbation:
        """Take the field's bounds and integer-ness from the contract."""
        spec = _spec_of(contract, self.field, (FieldKind.INT, FieldKind.FLOAT),
                        f"round-numeric: {self.field} is not a numeric field")
        return attrs.evolve(self, minimum=spec.minimum, maximum=spec.maximum,
                            integer=spec.kind is FieldKind.INT)

    def change(self, value: Any) -> Any:
        """The value rounded."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return NOT_APPLICABLE
        rounded: float = _clamp(round(value / self.step) * self.step, self.minimum, self.maximum)
        new_value: int | float = round(rounded) if self.integer else float(rounded)
        if self.integer:
            new_value = int(_clamp(new_value, self.minimum, self.maximum))
        return UNCHANGED if new_value == value else new_value


@declare_perturbation(
    kind="coarsening", subject=True, id="widen-interval:{field}:{width:g}", target="{field}",
    member="decision_state.{field}", description="Widen interval {field} by {width:g}.")
@attrs.frozen
class WidenInterval(Perturbation):
    """Widen an interval field by ``width`` (half on each side, within its bounds).

    Id ``widen-interval:<field>:<width>``.
    """

    field: str
    width: float = attrs.field(validator=_positive("widen width"))
    minimum: float | None = attrs.field(default=None, kw_only=True)
    maximum: float | None = attrs.field(default=None, kw_only=True)
    strategies: tuple[str, ...] | None = _strategies_field()

    def prepare(self, contract: Contract[Any, Any], *, seed: int) -> Perturbation:
        """Take the field's bounds from the contract."""
        spec = _spec_of(contract, self.field, (FieldKind.INTERVAL,),
                        f"widen-interval: {self.field} is not an interval field")
        return attrs.evolve(self, minimum=spec.minimum, maximum=spec.maximum)

    def change(self, value: Any) -> Any:
        """The interval widened."""
        if not isinstance(value, Mapping):
            return NOT_APPLICABLE
        try:
            lo = _clamp(float(value["lo"]) - self.width / 2, self.minimum, self.maximum)
            hi = _clamp(float(value["hi"]) + self.width / 2, self.minimum, self.maximum)
        except (KeyError, TypeError, ValueError):
            return NOT_APPLICABLE
        return {"lo": lo, "hi": hi}


def _shorten_uri(uri: str, depth: int | None) -> str:
    if depth is None:
        return uri
    scheme, sep, rest = uri.partition(":")
    if not sep:
        return uri
    slashes = len(rest) - len(rest.lstrip("/"))
    parts = rest[slashes:].split("/")
    return f"{scheme}:{rest[:slashes]}{'/'.join(parts[:depth])}"


def _shorten_id(p: ShortenEvidenceRefs) -> str:
    parts = [f"keep={p.keep}" if p.keep else "", f"depth={p.depth}" if p.depth else ""]
    return "shorten-evidence-refs:" + ",".join(part for part in parts if part)


def _shorten_description(p: ShortenEvidenceRefs) -> str:
    what = [f"keep the first {p.keep}"] if p.keep else []
    if p.depth:
        what.append(f"cut URIs to {p.depth} path segment(s) and drop digests")
    return "Shorten evidence references: " + "; ".join(what) + "."


@declare_perturbation(kind="coarsening", subject=True, id=_shorten_id, target="evidence_refs",
                      member="evidence_refs", description=_shorten_description)
@attrs.frozen
class ShortenEvidenceRefs(Perturbation):
    """Shorten evidence references: keep the first ``keep``, cut each URI to ``depth``
    path segments, and drop content digests.

    Id ``shorten-evidence-refs:keep=<k>`` and/or ``depth=<d>``.
    """

    keep: int | None = None
    depth: int | None = None
    strategies: tuple[str, ...] | None = _strategies_field()

    def __attrs_post_init__(self) -> None:
        if self.keep is None and self.depth is None:
            raise ExperimentError("shorten-evidence-refs needs keep or depth")
        if (self.keep is not None and self.keep < 1) or (self.depth is not None
                                                         and self.depth < 1):
            raise ExperimentError("keep and depth must be >= 1 (a receipt needs a reference)")

    def change(self, value: Any) -> Any:
        """The shortened references."""
        if not isinstance(value, list | tuple):
            return NOT_APPLICABLE
        kept = list(value[: self.keep] if self.keep else value)
        if self.depth:
            kept = [_shorten_uri(r["uri"] if isinstance(r, Mapping) else str(r), self.depth)
                    for r in kept]
        return kept


# ---------------------------------------------------------------------- falsehoods


def _field_schema(contract: Contract[Any, Any], name: str) -> dict[str, Any]:
    schema = to_json_schema(contract)
    return {"$schema": schema["$schema"],
            **schema["properties"]["decision_state"]["properties"][name]}


def _member_schema(contract: Contract[Any, Any], name: str) -> dict[str, Any]:
    schema = to_json_schema(contract)
    return {"$schema": schema["$schema"], **schema["properties"][name]}


def _boundary_values(spec: FieldSpec, thresholds: Sequence[float]) -> list[float]:
    lo = spec.minimum if spec.minimum is not None else 0.0
    hi = spec.maximum if spec.maximum is not None else 0.0
    values = [lo, hi]
    for t in thresholds:
        if spec.kind is FieldKind.INT:
            values += [math.floor(t) - 1, math.floor(t), math.ceil(t), math.ceil(t) + 1]
        else:
            values += [t, math.nextafter(t, -math.inf), math.nextafter(t, math.inf)]
    return [v for v in values if lo <= v <= hi]


def _numeric_pool(contract: Contract[Any, Any], spec: FieldSpec, samples: int,
                  seed: int) -> list[Any]:
    from hypothesis import strategies as st

    thresholds = [t for f, t in contract.policy.thresholds() if f == spec.name]
    lo = spec.minimum if spec.minimum is not None else 0.0
    hi = spec.maximum if spec.maximum is not None else 0.0
    bounds = _boundary_values(spec, thresholds)
    if spec.kind is FieldKind.INT:
        drawn = draw(st.integers(math.ceil(lo), math.floor(hi)), samples, seed=seed)
        points: list[Any] = [int(v) for v in bounds] + drawn
    elif spec.kind is FieldKind.FLOAT:
        drawn = draw(st.floats(lo, hi, allow_nan=False, allow_infinity=False), samples,
                     seed=seed)
        points = [float(v) for v in bounds] + drawn
    else:
        ends = st.one_of(st.sampled_from(bounds), st.floats(lo, hi, allow_nan=False))
        drawn = draw(st.tuples(ends, ends), samples, seed=seed)
        cells = sorted(set(bounds))
        points = [{"lo": a, "hi": b} for a, b in itertools.pairwise(cells)]
        points += [{"lo": min(a, b), "hi": max(a, b)} for a, b in drawn]
    unique: list[Any] = []
    seen: set[str] = set()
    for value in points:
        key = dumps(value)
        if key not in seen:
            seen.add(key)
            unique.append(value)
    return unique


def _falsify(message: Mapping[str, Any], state: Mapping[str, Any], ctx: CaseContext,
             name: str, value: Any, *, label: str, full_validation: bool = False) -> Variant:
    """``message`` with decision field ``name`` sent as ``value``, classified by the
    reference policy on the truth with that one field falsified.
    """
    view = dict(ctx.truth)
    view[name] = typed_value(ctx.contract.field_map[name], value)
    new_state = dict(state)
    new_state[name] = value
    return Variant.patched(message, "decision_state", new_state, label=label,
                           falsehood=(name, state[name], value), falsified=ctx.decide(view),
                           full_validation=full_validation)


@declare_perturbation(
    kind="falsehood", subject=True, id="mutate",
    description=lambda p: "Schema-valid falsehoods: each decision field (and the enum members "
                          f"{', '.join(p.members)}) set to a valid value that differs from the "
                          "truth.")
@attrs.frozen
class Mutate(Perturbation):
    """Schema-valid falsehoods: for every decision field, values that differ from the
    truth (every other value of a finite domain; boundary values and Hypothesis draws
    for numbers), and every other value of the top-level enum ``members``.

    Each candidate value is re-validated with ``jsonschema`` against the contract's
    schema (``schema_rejected`` counts refusals: a generator bug if not 0). Each
    falsehood is classified by the reference policy: ``no_effect``,
    ``changes_action`` or ``catastrophic`` (trusting it breaks a hard constraint).
    Id ``mutate``.
    """

    fields: tuple[str, ...] | None = attrs.field(default=None,
                                                 converter=attrs.converters.optional(tuple))
    members: tuple[str, ...] = attrs.field(default=("proposed_action", "uncertainty"),
                                           converter=_names)
    samples: int = 8
    pools: Mapping[str, tuple[Any, ...]] | None = attrs.field(default=None, eq=False,
                                                              repr=False, kw_only=True)
    schema_rejected: int = attrs.field(default=0, kw_only=True)
    strategies: tuple[str, ...] | None = _strategies_field()

    def prepare(self, contract: Contract[Any, Any], *, seed: int) -> Perturbation:
        """Generate and validate the candidate pools."""
        names = self.fields if self.fields is not None else tuple(s.name for s in contract.fields)
        pools: dict[str, tuple[Any, ...]] = {}
        rejected = 0
        for name in names:
            spec = contract.field_map.get(name)
            if spec is None:
                raise ExperimentError(f"mutate: {name} is not a decision field of "
                                      f"{contract.id}")
            if spec.domain() is not None:
                candidates = [wire_value(v) for v in spec.domain() or ()]
            else:
                candidates = _numeric_pool(contract, spec, self.samples, seed)
            validator = Draft202012Validator(_field_schema(contract, name))
            valid = [v for v in candidates if validator.is_valid(v)]
            rejected += len(candidates) - len(valid)
            pools[f"decision_state.{name}"] = tuple(valid)
        schema = to_json_schema(contract)
        for member in self.members:
            enum_values = schema["properties"].get(member, {}).get("enum")
            if enum_values is None:
                raise ExperimentError(f"mutate: {member} is not an enum member of the receipt")
            validator = Draft202012Validator(_member_schema(contract, member))
            valid = [v for v in enum_values if validator.is_valid(v)]
            rejected += len(enum_values) - len(valid)
            pools[member] = tuple(valid)
        return attrs.evolve(self, pools=pools, schema_rejected=rejected)

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """Every falsehood for this case."""
        if self.pools is None:
            raise ExperimentError("mutate was not prepared for a contract")
        state = _state_of(message)
        for target, pool in self.pools.items():
            parent, name = _split_target(target)
            if parent:
                if state is None or name not in state:
                    continue
                truth = state[name]
                for value in pool:
                    if not (value == truth and type(value) is type(truth)):
                        yield _falsify(message, state, ctx, name, value,
                                       label=f"{name}={dumps(value)}")
            elif name in message:
                truth = message[name]
                for value in pool:
                    if value != truth:
                        yield Variant.patched(message, name, value,
                                              label=f"{name}={dumps(value)}",
                                              falsehood=(name, truth, value),
                                              falsified=ctx.reference)


@declare_perturbation(
    kind="falsehood", subject=True, target="{field}",
    id=lambda p: f"inject:{p.case_id}:{p.field}={dumps(p.value)}",
    description=lambda p: f"In case {p.case_id}, send {p.field} = {dumps(p.value)}.")
@attrs.frozen
class Falsehood(Perturbation):
    """A declared schema-valid falsehood: in case ``case_id``, decision field ``field``
    is sent as ``value`` (the essay's error injection). Id
    ``inject:<case_id>:<field>=<value>``.
    """

    case_id: str
    field: str
    value: Any
    strategies: tuple[str, ...] | None = _strategies_field()

    def prepare(self, contract: Contract[Any, Any], *, seed: int) -> Perturbation:
        """Check that the value is schema-valid for the field."""
        if self.field not in contract.field_map:
            raise ExperimentError(f"injection: {self.field} is not a decision field of "
                                  f"{contract.id}")
        if not Draft202012Validator(_field_schema(contract, self.field)).is_valid(self.value):
            raise ExperimentError(f"injection: {self.value!r} is not schema-valid for "
                                  f"{self.field}; a falsehood must pass the schema")
        return self

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """The altered message, in the named case only."""
        state = _state_of(message)
        if ctx.case_id == self.case_id and state is not None and self.field in state:
            yield _falsify(message, state, ctx, self.field, self.value, label=self.field,
                           full_validation=True)


# ------------------------------------------------------------------------ controls


@declare_perturbation(kind="control", id="no-message",
                      description="Control: send an empty message.")
@attrs.frozen
class NoMessage(Perturbation):
    """Control: the receiver gets an empty message (what can it infer alone?)."""

    strategies: tuple[str, ...] | None = _strategies_field()

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """``{}``."""
        yield Variant({}, touched=None)


@declare_perturbation(kind="control", id="shuffled-message",
                      description="Control: send the message of another case.")
@attrs.frozen
class ShuffledMessage(Perturbation):
    """Control: each case gets another case's message (does the content matter?).

    Cases are paired within each chunk of the stream (the message of the previous
    case, the first taking the last), so the pairing does not depend on the executor.
    """

    strategies: tuple[str, ...] | None = _strategies_field()

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """The neighbour's message."""
        other = ctx.neighbour(strategy)
        if other is not None:
            yield Variant(other, touched=None)


@declare_perturbation(kind="control", id="constant-message",
                      description="Control: send the first case's message for every case.")
@attrs.frozen
class ConstantMessage(Perturbation):
    """Control: every case gets the first case's message (is the channel ignored?)."""

    strategies: tuple[str, ...] | None = _strategies_field()

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """The constant message."""
        constant = ctx.constant(strategy)
        if constant is not None:
            yield Variant(constant, touched=None)


# ------------------------------------------------------------------------ boundary


def _loss_entries(value: Mapping[Any, float] | Sequence[Mapping[str, Any]]
                  ) -> dict[tuple[str, str], float]:
    if isinstance(value, Mapping):
        out: dict[tuple[str, str], float] = {}
        for key, loss in value.items():
            chosen, reference = key
            out[(_action_value(chosen), _action_value(reference))] = float(loss)
        return out
    return {(str(row["chosen"]), str(row["reference"])): float(row["loss"]) for row in value}


def _action_value(action: Any) -> str:
    return str(action.value) if isinstance(action, enum.Enum | _AddedAction) else str(action)


@declare_perturbation(
    kind="boundary", id="loss-changed:{name}",
    description=lambda p: f"Loss matrix {p.name}: " + ", ".join(
        f"({c}, {r}) = {v:g}" for (c, r), v in sorted(p.entries.items())) + ".")
@attrs.frozen
class LossChanged(Perturbation):
    """Boundary: re-score the unperturbed decisions under a changed loss matrix.

    Messages are not changed, so a deterministic receiver is not called again: the
    decisions come from the memo (and :func:`handoffs.lab.rescore` does the same for
    a finished run log). Id ``loss-changed:<name>``.
    """

    name: str
    entries: Mapping[tuple[str, str], float] = attrs.field(converter=_loss_entries)
    strategies: tuple[str, ...] | None = _strategies_field()

    def scoring(self, base: Scoring) -> Scoring:
        """The base loss with the changed entries."""
        return attrs.evolve(base, loss={**base.loss, **self.entries}, name=self.name)

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """The unchanged message."""
        yield Variant(message, touched=frozenset())


@attrs.frozen
class _AddedAction:
    """An action outside the contract's enum; policies only read its ``value``."""

    value: str


@declare_perturbation(
    kind="boundary", id="action-added:{action}",
    description=lambda p: f"Add action {p.action}, chosen when {p.when.describe()} ("
                          + (f"before rule {p.before}" if p.before else "after every rule")
                          + ").")
@attrs.frozen
class ActionAdded(Perturbation):
    """Boundary: the receiver's action set gains ``action``, chosen when ``when`` holds
    (a rule inserted before rule ``before``, or last). Messages and receivers stay
    as they are; the reference changes wherever the new rule now decides.

    ``loss`` gives the new (chosen, reference) entries; pairs it leaves out cost
    ``default_loss``. Id ``action-added:<action>``.
    """

    action: str
    when: Condition
    before: str | None = None
    loss: Mapping[tuple[str, str], float] = attrs.field(factory=dict, converter=_loss_entries)
    default_loss: float = 1.0
    policy: Policy[Any] | None = attrs.field(default=None, eq=False, repr=False, kw_only=True)
    strategies: tuple[str, ...] | None = _strategies_field()

    def prepare(self, contract: Contract[Any, Any], *, seed: int) -> Perturbation:
        """Build the extended policy."""
        if self.action in {a.value for a in contract.actions}:
            raise ExperimentError(f"action-added: {self.action} is already an action")
        unknown = self.when.reads() - set(contract.field_map)
        if unknown:
            raise ExperimentError(f"action-added: the condition reads unknown fields "
                                  f"{sorted(unknown)}")
        rules = list(contract.policy.rules)
        rule: Rule[Any] = Rule(f"added-{self.action.lower()}", self.when,
                               _AddedAction(self.action))
        names = [r.name for r in rules]
        if self.before is not None and self.before not in names:
            raise ExperimentError(f"action-added: no rule named {self.before!r}; "
                                  f"rules: {names}")
        rules.insert(names.index(self.before) if self.before is not None else len(rules), rule)
        policy: Policy[Any] = Policy(rules=tuple(rules), default=contract.policy.default,
                                     default_name=contract.policy.default_name)
        return attrs.evolve(self, policy=policy)

    def scoring(self, base: Scoring) -> Scoring:
        """The base loss extended with the new action's row and column."""
        actions = {a for pair in base.loss for a in pair}
        extended = dict(base.loss)
        extended[(self.action, self.action)] = 0.0
        for other in actions:
            for pair in ((self.action, other), (other, self.action)):
                extended[pair] = self.loss.get(pair, self.default_loss)
        return attrs.evolve(base, loss=extended, name=f"{base.name}+{self.action}")

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """The unchanged message, scored against the extended policy's action."""
        if self.policy is None:
            raise ExperimentError("action-added was not prepared for a contract")
        outcome = self.policy.evaluate(ctx.truth)
        reference = ctx.reference if outcome.action is None else _action_value(outcome.action)
        yield Variant(message, reference=reference, touched=frozenset())


@declare_perturbation(
    kind="boundary", target="policy_version",
    id=lambda p: "policy-version-changed" + (f":{p.version}" if p.version else ""),
    description=lambda p: f"The message names policy version "
                          f"{p.version or '<stamped>-superseded'}"
                          + (", and the reference follows the new policy." if p.policy else "."))
@attrs.frozen
class PolicyVersionChanged(Perturbation):
    """Boundary: the message names policy version ``version`` (default: the stamped
    version with ``-superseded`` appended), not the one the receiver holds current.
    With ``policy``, the reference is that new policy's action. Id
    ``policy-version-changed[:<version>]``.
    """

    version: str | None = None
    policy: Policy[Any] | None = attrs.field(default=None, eq=False)
    strategies: tuple[str, ...] | None = _strategies_field()

    @property
    def reads(self) -> frozenset[str] | None:
        """``policy_version`` (``None`` with a new policy: the reference follows the case)."""
        return frozenset({"policy_version"}) if self.policy is None else None

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """The message naming the other version."""
        current = message.get("policy_version")
        if not isinstance(current, str):
            return
        reference = None
        if self.policy is not None:
            outcome = self.policy.evaluate(ctx.truth)
            reference = None if outcome.action is None else _action_value(outcome.action)
        yield Variant.patched(message, "policy_version", self.version or f"{current}-superseded",
                              reference=reference)


@declare_perturbation(kind="boundary", id="authoritative-sender", target="authority",
                      reads=("authority",), description="The sender claims DECIDE authority.")
@attrs.frozen
class AuthoritativeSender(Perturbation):
    """Boundary: the sender claims ``DECIDE`` authority (the receiver becomes an
    actuator). A negative control: success here moves the decision, it does not
    show the message is sufficient.
    """

    strategies: tuple[str, ...] | None = _strategies_field()

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """The message with ``authority: DECIDE`` (unchanged without an authority)."""
        if message.get("authority") == Authority.DECIDE.value or "authority" not in message:
            yield Variant(message, touched=frozenset())
        else:
            yield Variant.patched(message, "authority", Authority.DECIDE.value)


def _collapse(value: Any) -> Any:
    if isinstance(value, Mapping) and set(value) == {"lo", "hi"}:
        try:
            mid = (float(value["lo"]) + float(value["hi"])) / 2
        except (TypeError, ValueError):
            return value
        return {"lo": mid, "hi": mid}
    return value


def _relay_id(p: Relay) -> str:
    parts = [f"relay:{p.hops}", "drop=" + "+".join(p.drop) if p.drop else "",
             "soften" if p.soften_uncertainty else "", "collapse" if p.collapse_intervals else ""]
    return ":".join(part for part in parts if part)


def _relay_description(p: Relay) -> str:
    extra = [f"the first hop drops {', '.join(p.drop)}" if p.drop else "",
             "conflicts are softened to resolved" if p.soften_uncertainty else "",
             "intervals collapse to points" if p.collapse_intervals else ""]
    extra = [e for e in extra if e]
    tail = f"; {'; '.join(extra)}" if extra else ""
    return f"Relay through {p.hops} hop(s), re-encoded and re-stamped at each{tail}."


def _hops(_: Any, __: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ExperimentError(f"relay hops must be a positive integer, got {value!r}")


@declare_perturbation(kind="boundary", id=_relay_id, description=_relay_description)
@attrs.frozen
class Relay(Perturbation):
    """Boundary: the message passes through ``hops`` relays, each re-encoding it.

    Every hop round-trips the message through canonical JSON and re-stamps
    ``sender`` as ``relay-<i>``; ``drop`` lists members the first hop discards
    (irrelevant to it, decisive downstream); ``soften_uncertainty`` turns CONFLICT
    into RESOLVED and ``collapse_intervals`` turns intervals into point estimates, at
    every hop. Each hop issues a new receipt id; proofs and grants do not survive
    re-encoding. Id ``relay:<hops>[:drop=a+b][:soften][:collapse]``.
    """

    hops: int = attrs.field(default=2, validator=_hops)
    drop: tuple[str, ...] = attrs.field(default=(), converter=_names)
    soften_uncertainty: bool = False
    collapse_intervals: bool = False
    strategies: tuple[str, ...] | None = _strategies_field()

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """The message as the last hop forwards it."""
        current: dict[str, Any] = dict(message)
        for hop in range(1, self.hops + 1):
            current = loads(canonical_bytes(current))
            for member in ("proof", "grant"):
                current.pop(member, None)
            previous = current.get("id")
            if isinstance(previous, str):
                current["id"] = f"urn:uuid:{uuid.uuid5(_RELAY_NAMESPACE, f'{previous}/{hop}')}"
            if hop == 1:
                for member in self.drop:
                    current.pop(member, None)
            if "sender" in current:
                current["sender"] = f"relay-{hop}"
            if self.soften_uncertainty and current.get("uncertainty") == Uncertainty.CONFLICT.value:
                current["uncertainty"] = Uncertainty.RESOLVED.value
            state = _state_of(current)
            if self.collapse_intervals and state is not None:
                current["decision_state"] = {k: _collapse(v) for k, v in state.items()}
        yield Variant(current, touched=None)


# ------------------------------------------------------------------- standard set


def standard_perturbations(
    contract: Contract[Any, Any], *, hops: int = 2, controls: bool = True,
    boundary: bool = True, falsehoods: bool = True, coarsening: bool = True,
) -> tuple[Perturbation, ...]:
    """The perturbations every contract gets, generated from its declaration.

    In order: remove each decision field; remove each governance member; coarsen
    (merge each pair of enum values, round numbers and widen intervals to a tenth of
    their range, launder uncertainty, shorten evidence references); schema-valid
    falsehoods; the three falsifying controls; and the boundary changes that need no
    declaration (policy version changed, authoritative sender, relays). Adding an
    action or changing the loss matrix needs a declaration: see :class:`ActionAdded`
    and :class:`LossChanged`.
    """
    out: list[Perturbation] = [RemoveDecisionField(s.name) for s in contract.fields]
    out += [RemoveGovernanceField(m) for m in GOVERNANCE_FIELDS]
    if coarsening:
        for spec in contract.fields:
            if spec.kind is FieldKind.ENUM:
                values = [wire_value(v) for v in spec.domain() or ()]
                pairs = [(a, b) for i, a in enumerate(values) for b in values[i + 1:]]
                out += [MergeEnumValues(target=f"decision_state.{spec.name}", values=(b,),
                                        into=a) for a, b in pairs[:10]]
            elif spec.kind in (FieldKind.INT, FieldKind.FLOAT):
                span = float((spec.maximum or 0) - (spec.minimum or 0))
                step = max(1.0, math.ceil(span / 10)) if spec.kind is FieldKind.INT else span / 10
                if step > 0:
                    out.append(RoundNumeric(spec.name, step))
            elif spec.kind is FieldKind.INTERVAL:
                span = float((spec.maximum or 0) - (spec.minimum or 0))
                if span > 0:
                    out.append(WidenInterval(spec.name, span / 10))
        out.append(MergeEnumValues(target="uncertainty",
                                   values=(Uncertainty.CONFLICT.value, Uncertainty.MISSING.value),
                                   into=Uncertainty.RESOLVED.value))
        out += [ShortenEvidenceRefs(keep=1), ShortenEvidenceRefs(depth=1)]
    if falsehoods:
        out.append(Mutate())
    if controls:
        out += [NoMessage(), ShuffledMessage(), ConstantMessage()]
    if boundary:
        out += [PolicyVersionChanged(), AuthoritativeSender(), Relay(hops),
                Relay(hops, soften_uncertainty=True, collapse_intervals=True)]
    return tuple(out)


def select_perturbations(
    contract: Contract[Any, Any], *, standard: bool = True, include: Sequence[str] = (),
    exclude: Sequence[str] = (), extra: Sequence[Perturbation] = (),
    base: Sequence[Perturbation] | None = None,
) -> tuple[Perturbation, ...]:
    """Choose perturbations: the standard set (or ``base``) filtered by id patterns
    (``fnmatch``: ``include`` keeps matches, ``exclude`` drops them), plus ``extra``.
    """
    if not standard:
        pool: list[Perturbation] = []
    else:
        pool = list(base) if base is not None else list(standard_perturbations(contract))
    if include:
        pool = [p for p in pool if any(fnmatch.fnmatchcase(p.id, pat) for pat in include)]
    if exclude:
        pool = [p for p in pool if not any(fnmatch.fnmatchcase(p.id, pat) for pat in exclude)]
    ids = {p.id for p in pool}
    pool += [p for p in extra if p.id not in ids]
    return tuple(pool)


# ------------------------------------------------------------------- JSON / TOML


def condition_from_json(data: Mapping[str, Any]) -> Condition:
    """Read a condition: ``{field, is}``, ``{field, over|under[, inclusive]}``,
    ``{all: [...]}``, ``{any: [...]}`` or ``{not: {...}}``.
    """
    if "all" in data:
        return AllOf(tuple(condition_from_json(c) for c in data["all"]))
    if "any" in data:
        return AnyOf(tuple(condition_from_json(c) for c in data["any"]))
    if "not" in data:
        return Not(condition_from_json(data["not"]))
    field = data.get("field")
    if not isinstance(field, str):
        raise ExperimentError(f"a condition needs a field: {dict(data)!r}")
    inclusive = bool(data.get("inclusive", False))
    if "is" in data:
        return Is(field, data["is"])
    if "over" in data:
        return Over(field, float(data["over"]), inclusive)
    if "under" in data:
        return Under(field, float(data["under"]), inclusive)
    raise ExperimentError(f"a condition needs is, over or under: {dict(data)!r}")


def _typed_is(condition: Condition, contract: Contract[Any, Any]) -> Condition:
    """Turn ``Is(field, "VALUE")`` on enum fields into the enum member."""
    if isinstance(condition, Is):
        spec = contract.field_map.get(condition.field)
        if spec is not None and spec.enum_type is not None and isinstance(condition.value, str):
            return Is(condition.field, spec.enum_type(condition.value))
        return condition
    if isinstance(condition, Not):
        return Not(_typed_is(condition.operand, contract))
    if isinstance(condition, AllOf | AnyOf):
        return type(condition)(tuple(_typed_is(c, contract) for c in condition.operands))
    return condition


_FACTORIES: Final[dict[str, Callable[..., Perturbation]]] = {
    "remove-decision-field": RemoveDecisionField,
    "remove-governance-field": RemoveGovernanceField,
    "merge-enum-values": MergeEnumValues,
    "round-numeric": RoundNumeric,
    "widen-interval": WidenInterval,
    "shorten-evidence-refs": ShortenEvidenceRefs,
    "mutate": Mutate,
    "no-message": NoMessage,
    "shuffled-message": ShuffledMessage,
    "constant-message": ConstantMessage,
    "loss-changed": LossChanged,
    "action-added": ActionAdded,
    "policy-version-changed": PolicyVersionChanged,
    "authoritative-sender": AuthoritativeSender,
    "relay": Relay,
}


def perturbation_from_json(data: Mapping[str, Any], *,
                           contract: Contract[Any, Any]) -> Perturbation:
    """Build a perturbation from its JSON/TOML declaration ``{kind = "...", ...}``.

    Raises:
        ExperimentError: an unknown kind or bad arguments.
    """
    options = dict(data)
    kind = options.pop("kind", None)
    factory = _FACTORIES.get(str(kind))
    if factory is None:
        raise ExperimentError(f"unknown perturbation kind {kind!r}; known: "
                              f"{sorted(_FACTORIES)}")
    if "when" in options:
        options["when"] = _typed_is(condition_from_json(options["when"]), contract)
    if kind == "loss-changed" and isinstance(options.get("entries"), list):
        options["entries"] = _loss_entries(options["entries"])
    if kind == "action-added" and isinstance(options.get("loss"), list):
        options["loss"] = _loss_entries(options["loss"])
    try:
        return factory(**options)
    except TypeError as exc:
        raise ExperimentError(f"perturbation {kind}: {exc}") from exc


def _walk(condition: Condition) -> Iterator[Condition]:
    yield condition
    if isinstance(condition, Not):
        yield from _walk(condition.operand)
    elif isinstance(condition, AllOf | AnyOf):
        for operand in condition.operands:
            yield from _walk(operand)


def has_predicates(policy: Policy[Any]) -> bool:
    """Whether any rule uses an opaque :class:`Predicate` (no exact region search)."""
    return any(isinstance(c, Predicate) for rule in policy.rules for c in _walk(rule.when))


def has_arithmetic(policy: Policy[Any]) -> bool:
    """Whether any rule compares an arithmetic expression (:class:`Compare`)."""
    return any(isinstance(c, Compare) for rule in policy.rules for c in _walk(rule.when))


def opaque_conditions(policy: Policy[Any]) -> list[dict[str, Any]]:
    """The conditions whose cells the lab cannot derive, with the fields they hide:
    every :class:`Predicate`, and each :class:`Compare` for the fields it reads more
    than once (no cut point can be solved for them). The report lists them, so that an
    analysis that had to fall back is never silent.
    """
    found: list[dict[str, Any]] = []
    for rule in policy.rules:
        for condition in _walk(rule.when):
            if isinstance(condition, Predicate):
                fields = sorted(condition.fields)
                kind = "predicate"
            elif isinstance(condition, Compare):
                fields = sorted(n for n in condition.reads() if not condition.invertible(n))
                kind = "expression"
            else:
                continue
            if fields:
                found.append({"rule": rule.name, "kind": kind,
                              "condition": condition.describe(), "fields": fields})
    return found


def interval_of(value: Any) -> Interval | None:
    """An :class:`Interval` for a wire interval object, or ``None``."""
    if isinstance(value, Mapping) and set(value) == {"lo", "hi"}:
        try:
            return Interval(float(value["lo"]), float(value["hi"]))
        except (TypeError, ValueError):
            return None
    return None
