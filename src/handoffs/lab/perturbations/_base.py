"""The base of perturbations: the data shapes (:class:`Variant`, :class:`CaseContext`,
:class:`Scoring`), the markers, :func:`declare_perturbation` and :class:`Perturbation`
with its generic engine (one member changed, as a patch).
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Final, TypeVar

import attrs

from handoffs._errors import ExperimentError
from handoffs._memo import by_identity
from handoffs.contracts import Contract, FieldKind, FieldSpec
from handoffs.contracts.analysis import SymbolicForm

__all__ = [
    "NOT_APPLICABLE",
    "REMOVED",
    "SUBJECT",
    "UNCHANGED",
    "CaseContext",
    "Declaration",
    "Perturbation",
    "Scoring",
    "Text",
    "Variant",
    "declare_perturbation",
]


SUBJECT: Final = "@subject"
"""Marker in :attr:`Perturbation.strategies`: the experiment's subject strategy."""


# ------------------------------------------------------------------- data shapes


@attrs.frozen
class Scoring:
    """How decisions are scored: the loss per (chosen, reference) action value and the
    hard constraints as ``(name, chosen, allowed references)``.

    ``added`` names actions outside the contract's set (``action-added``): a constraint
    whose allowlist (``allowed_references``) is not empty was written without them, so
    it does not say whether choosing its action is allowed when the reference is one of
    them. Such a decision is no violation; :meth:`unstated` names the constraint, a
    finding about the constraint.
    """

    loss: Mapping[tuple[str, str], float]
    hard: tuple[tuple[str, str, frozenset[str]], ...]
    name: str = "contract"
    conditioned: frozenset[str] = frozenset()
    added: frozenset[str] = frozenset()

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
                     and not (allowed and reference in self.added)
                     and (n not in self.conditioned or n in holding))

    def unstated(self, chosen: str, reference: str,
                 holding: Collection[str] = ()) -> tuple[str, ...]:
        """Names of the hard constraints on ``chosen`` whose allowlist does not say
        whether ``reference``, an added action, is allowed (counted apart from
        :meth:`violations`, as findings about the constraints).
        """
        if reference not in self.added:
            return ()
        return tuple(n for n, c, allowed in self.hard if c == chosen and allowed
                     and reference not in allowed
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

class Variant:
    """One perturbed message.

    A variant either carries its whole ``message``, or describes it exactly as a
    *patch* of the message the perturbation was given (``Variant.patched``): one
    member set to a new value, or removed. A patched variant builds its message only
    when something reads :attr:`message`. Treat variants as immutable.

    Attributes:
        message: what the receiver gets.
        label: distinguishes variants of one perturbation on one case (falsehoods).
        reference: the reference action when the perturbation changes it (boundary
            changes); ``None`` keeps the case's reference.
        falsehood: ``(field, true value, false value)`` in wire form, for falsehoods.
        falsified: the reference policy's action if the falsehood were true.
        base: the message a patch applies to (``None`` for a whole message).
        patch: ``(member, value)``; ``value`` is :attr:`.Perturbation.REMOVED` for a removal.
    """

    __slots__ = ("_message", "base", "falsehood", "falsified", "label", "patch", "reference")

    def __init__(
        self,
        message: Mapping[str, Any],
        *,
        label: str | None = None,
        reference: str | None = None,
        falsehood: tuple[str, Any, Any] | None = None,
        falsified: str | None = None,
    ) -> None:
        self._message: Mapping[str, Any] | None = message
        self.label = label
        self.reference = reference
        self.falsehood = falsehood
        self.falsified = falsified
        self.base: Mapping[str, Any] | None = None
        self.patch: tuple[str, Any] | None = None

    @classmethod
    def patched(cls, base: Mapping[str, Any], member: str, value: Any, *,
                label: str | None = None, reference: str | None = None,
                falsehood: tuple[str, Any, Any] | None = None,
                falsified: str | None = None) -> Variant:
        """``base`` with ``member`` set to ``value`` (or removed: :attr:`.Perturbation.REMOVED`)."""
        variant = cls.__new__(cls)
        variant._message = None
        variant.label = label
        variant.reference = reference
        variant.falsehood = falsehood
        variant.falsified = falsified
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
        return f"Variant({what}, label={self.label!r})"


class CaseContext:
    """What a perturbation may know about the case it perturbs (treat it as immutable).

    Attributes:
        index: position of the case in the stream.
        case_id: the case id.
        truth: the true decision state as a typed view (field → value).
        reference: the reference action value from the full evidence.
        contract: the experiment's contract.
        decide: the (memoised) reference policy on a complete typed view.
        neighbour: the unperturbed message, for a strategy, of the case whose message
            this case gets under the shuffled control (``None`` when it has none).
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
    """What a perturbation class is, declared once (see
    :func:`~handoffs.lab.perturbations.declare_perturbation`).

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
    experiment's subject). :meth:`change` answers a new value, or one of the markers
    :attr:`REMOVED`, :attr:`UNCHANGED` and :attr:`NOT_APPLICABLE` (class attributes,
    so a subclass writes ``self.UNCHANGED``).
    """

    kind: ClassVar[str] = "ablation"
    default_strategies: ClassVar[tuple[str, ...] | None] = None
    declaration: ClassVar[Declaration | None] = None

    REMOVED: ClassVar[Any] = REMOVED
    """From :meth:`change` or in :attr:`Variant.patch`: the member is removed."""
    UNCHANGED: ClassVar[Any] = UNCHANGED
    """From :meth:`change`: the message is sent as it is (one unchanged variant)."""
    NOT_APPLICABLE: ClassVar[Any] = NOT_APPLICABLE
    """From :meth:`change`: the perturbation does not apply (no variant)."""

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

    def symbolic(self, contract: Contract[Any, Any]) -> SymbolicForm | None:
        """What this perturbation does, as data the policy analysis compiles
        (:class:`~handoffs.contracts.analysis.SymbolicForm`), so that the lab can prove
        or refute its rows instead of sampling them; ``None`` (the default): the rows
        are ``sampled``.

        Declare one only when :meth:`variants` is a deterministic function of the
        message that the form describes exactly: the lab checks each witness with
        :meth:`variants` itself, and a form that disagrees with the code is a bug.
        """
        del contract
        return None

    def change(self, value: Any) -> Any:
        """The declared member's new value (:attr:`.Perturbation.REMOVED` removes it),
        given its current value; or :attr:`.Perturbation.UNCHANGED`, or
        :attr:`.Perturbation.NOT_APPLICABLE`. Called only when the member is present.
        """
        raise NotImplementedError(f"{type(self).__name__} writes neither change nor variants")

    def variants(self, message: Mapping[str, Any], ctx: CaseContext,
                 strategy: str) -> Iterator[Variant]:
        """The perturbed messages for one case and strategy (none: not applicable).

        The generic engine: the declared ``member``'s value through :meth:`change`,
        as a patch of the message.
        """
        parent, name = _member_of(self)
        holder = _state_of(message) if parent else message
        if holder is None or name not in holder:
            return
        new = self.change(holder[name])
        if new is NOT_APPLICABLE:
            return
        if new is UNCHANGED:
            yield Variant(message)
            return
        yield _set_patch(message, (parent, name), new)

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


_MEMBERS: dict[int, tuple[Perturbation, tuple[str | None, str]]] = {}
_MEMBERS_KEPT: Final = 1024


def _member_of(perturbation: Perturbation) -> tuple[str | None, str]:
    """The declared member a generic perturbation changes, split (:func:`_split_target`),
    rendered once per perturbation object.
    """
    return by_identity(_MEMBERS, perturbation, lambda: _declared_member(perturbation),
                       limit=_MEMBERS_KEPT)


def _declared_member(perturbation: Perturbation) -> tuple[str | None, str]:
    member = perturbation._declared().member
    if member is None:
        raise NotImplementedError(f"{type(perturbation).__name__} declares no member "
                                  "and writes no variants")
    return _split_target(_render(member, perturbation))


def _set_patch(message: Mapping[str, Any], target: str | tuple[str | None, str],
               value: Any) -> Variant:
    """``message`` with ``target`` (a member or ``decision_state.<field>``, or the two
    split) set or removed (:attr:`.Perturbation.REMOVED`), as a patch.
    """
    parent, name = _split_target(target) if isinstance(target, str) else target
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
