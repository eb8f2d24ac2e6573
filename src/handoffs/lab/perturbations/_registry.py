"""The registry: the standard set every contract gets, selection by id patterns, and the
JSON/TOML declarations (``{kind = "...", ...}``) of the shipped perturbations.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from handoffs._errors import ExperimentError
from handoffs.contracts import Contract, FieldKind, Governance, Uncertainty
from handoffs.contracts.policy import (
    Absent,
    AllOf,
    AnyOf,
    Condition,
    Is,
    Not,
    Over,
    Present,
    Under,
)
from handoffs.lab._values import wire_value
from handoffs.lab.perturbations._ablation import RemoveDecisionField, RemoveGovernanceField
from handoffs.lab.perturbations._base import Perturbation
from handoffs.lab.perturbations._boundary import (
    ActionAdded,
    AuthoritativeSender,
    LossChanged,
    PolicyVersionChanged,
    _loss_entries,
)
from handoffs.lab.perturbations._coarsening import (
    MergeEnumValues,
    RoundNumeric,
    ShortenEvidenceRefs,
    WidenInterval,
)
from handoffs.lab.perturbations._controls import ConstantMessage, NoMessage, ShuffledMessage
from handoffs.lab.perturbations._falsehood import Mutate
from handoffs.lab.perturbations._relay import Relay

__all__ = [
    "condition_from_json",
    "perturbation_from_json",
    "select_perturbations",
    "standard_perturbations",
]


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
    out += [RemoveGovernanceField(m) for m in Governance.FIELDS]
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


def condition_from_json(data: Mapping[str, Any]) -> Condition:  # noqa: PLR0911 - one per form
    """Read a condition: ``{field, is}``, ``{field, over|under[, inclusive]}``,
    ``{field, absent}`` (``true``: :class:`Absent`, ``false``: :class:`Present`),
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
    if "absent" in data:
        if not isinstance(data["absent"], bool):
            raise ExperimentError(f"absent is true or false: {dict(data)!r}")
        return Absent(field) if data["absent"] else Present(field)
    if "is" in data:
        return Is(field, data["is"])
    if "over" in data:
        return Over(field, float(data["over"]), inclusive)
    if "under" in data:
        return Under(field, float(data["under"]), inclusive)
    raise ExperimentError(f"a condition needs is, over, under or absent: {dict(data)!r}")


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
        built = factory(**options)
    except TypeError as exc:
        raise ExperimentError(f"perturbation {kind}: {exc}") from exc
    if isinstance(built, Relay):  # its drop paths name members: checked at load
        built.prepare(contract, seed=0)
    return built
