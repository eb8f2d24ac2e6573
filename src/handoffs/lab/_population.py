"""Population figures: rates over a declared case distribution, with 95 % intervals.

The generated cases of :class:`~handoffs.lab.GeneratedCases` crowd the policy's
boundaries (a witness of every region, both sides of every cut): rates over them are a
*stress* view, not what a receiver does to the cases it will meet. The *population*
view draws independent states from a declared :class:`CaseDistribution` (per field: a
range, enum weights or a rate; by default uniform over the declared bounds and enums)
and reports, for every strategy × perturbation row, agreement, mean regret and the
hard-violation rate with their intervals:

- agreement and hard-violation rate: Clopper–Pearson exact intervals
  (``scipy.stats.binomtest(...).proportion_ci(method="exact")``), valid near 0 and 1;
- mean regret: Student's *t* interval over the draws' regrets, clipped to the loss
  matrix's range; when every draw has the same regret (no spread to estimate), the
  upper end is the Clopper–Pearson bound on the share of draws that could have cost
  more, times the largest loss.

Every draw has its own random generator, seeded from the population's seed and the
draw's index, so the states do not depend on how a run is cut into chunks or which
executor runs them. When the experiment's cases are its own (a JSON Lines file, a
Python source), they *are* the sample: the population figures are their rates with
intervals, and ``population.source`` says ``cases``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs

from handoffs._cases import ABSENT_RATE, GeneratedCase
from handoffs._errors import ExperimentError
from handoffs.contracts import FieldKind, FieldSpec, Interval

if TYPE_CHECKING:
    from handoffs.contracts import Contract

__all__ = [
    "CaseDistribution",
    "DistributionError",
    "FieldDistribution",
    "Population",
    "PopulationCases",
    "binomial_interval",
    "draws_needed",
    "mean_interval",
]

DEFAULT_DRAWS: Final = 1000
DEFAULT_CONFIDENCE: Final = 0.95


class DistributionError(ExperimentError):
    """A case distribution or population declaration is not usable: a range outside the
    field's declared bounds, a weight for a value the enum lacks, a rate outside
    [0, 1], or too few draws for the interval width asked for.

    ``json_path`` names the field's path (``$.cases.distribution.<field>.<key>``).
    """

    code = "bad-distribution"


def _number(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise DistributionError(f"{path.removeprefix('$.')}: {value!r} is not a finite number",
                                json_path=path)
    return float(value)


def _pair(value: Any, path: str) -> tuple[float, float]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise DistributionError(f"{path.removeprefix('$.')}: a range is [low, high], got "
                                f"{value!r}", json_path=path)
    lo, hi = _number(value[0], path), _number(value[1], path)
    if lo > hi:
        raise DistributionError(f"{path.removeprefix('$.')}: the range [{lo}, {hi}] is empty "
                                "(low > high)", json_path=path)
    return lo, hi


@attrs.frozen(kw_only=True)
class FieldDistribution:
    """How one decision field is drawn.

    Attributes:
        field: the field's name.
        range: numbers and integers: ``(low, high)``, drawn uniformly; intervals: the
            range of the interval's centre.
        weights: enums: ``((value, weight), ...)``; values not named weigh 0.
        rate: booleans: the probability of ``true``.
        half_width: intervals: the range of the half-width, drawn uniformly
            (default: from 0 to a fortieth of the field's declared range).
        absent: optional fields (``T | None``): the probability that the field is
            ``None``, known not to apply (default: a quarter); the value, when
            present, is drawn as the other keys say.
    """

    field: str
    range: tuple[float, float] | None = None
    weights: tuple[tuple[Any, float], ...] | None = None
    rate: float | None = None
    half_width: tuple[float, float] | None = None
    absent: float | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (the report's ``population.distribution`` entries)."""
        out: dict[str, Any] = {}
        if self.range is not None:
            out["range"] = list(self.range)
        if self.weights is not None:
            out["weights"] = {_wire(v): w for v, w in self.weights}
        if self.rate is not None:
            out["rate"] = self.rate
        if self.half_width is not None:
            out["half_width"] = list(self.half_width)
        if self.absent is not None:
            out["absent"] = self.absent
        return out

    def draw(self, spec: FieldSpec, rng: random.Random) -> Any:
        """One value of the field (``None`` for an optional field drawn absent)."""
        if spec.optional and rng.random() < (ABSENT_RATE if self.absent is None
                                             else self.absent):
            return None
        return self._present(spec, rng)

    def _present(self, spec: FieldSpec, rng: random.Random) -> Any:
        if spec.kind is FieldKind.BOOL:
            return rng.random() < (0.5 if self.rate is None else self.rate)
        if spec.kind is FieldKind.ENUM:
            assert spec.enum_type is not None  # noqa: S101 - an enum field has its type
            if self.weights is None:
                return rng.choice(tuple(spec.enum_type))
            values = [v for v, _ in self.weights]
            return rng.choices(values, weights=[w for _, w in self.weights])[0]
        lo, hi = self.range if self.range is not None else _bounds(spec)
        if spec.kind is FieldKind.INT:
            return rng.randint(math.ceil(lo), math.floor(hi))
        value = round(rng.uniform(lo, hi), 9)
        if spec.kind is FieldKind.FLOAT:
            return _clip(spec, value)
        low, high = _bounds(spec)
        a, b = self.half_width if self.half_width is not None else (0.0, (high - low) / 40)
        half = rng.uniform(a, b)
        return Interval(_clip(spec, round(value - half, 9)), _clip(spec, round(value + half, 9)))


def _wire(value: Any) -> Any:
    return getattr(value, "value", value)


def _bounds(spec: FieldSpec) -> tuple[float, float]:
    return float(spec.minimum or 0), float(spec.maximum or 0)


def _clip(spec: FieldSpec, value: float) -> float:
    lo, hi = _bounds(spec)
    return min(max(value, lo), hi)


def _probability(value: Any, path: str) -> float:
    rate = _number(value, path)
    if not 0 <= rate <= 1:
        raise DistributionError(f"{path.removeprefix('$.')}: {rate} is not a probability "
                                "(outside [0, 1])", json_path=path)
    return rate


def _field_distribution(spec: FieldSpec, table: Any, path: str) -> FieldDistribution:
    if not isinstance(table, Mapping):
        raise DistributionError(f"{path.removeprefix('$.')} must be a table, got {table!r}",
                                json_path=path)
    allowed = {FieldKind.BOOL: ("rate",), FieldKind.ENUM: ("weights",),
               FieldKind.INT: ("range",), FieldKind.FLOAT: ("range",),
               FieldKind.INTERVAL: ("range", "half_width")}[spec.kind]
    if spec.optional:
        allowed = (*allowed, "absent")
    for key in table:
        if key not in allowed:
            raise DistributionError(
                f"{path.removeprefix('$.')}.{key}: a {spec.kind.value} field takes "
                f"{' and '.join(allowed)}"
                + (" (absent: only an optional field, T | None)" if key == "absent" else ""),
                json_path=f"{path}.{key}")
    changes: dict[str, Any] = {key: _probability(table[key], f"{path}.{key}")
                               for key in ("absent", "rate") if key in table}
    if "weights" in table:
        changes["weights"] = _weights(spec, table["weights"], f"{path}.weights")
    low, high = _bounds(spec)
    if "range" in table:
        lo, hi = _pair(table["range"], f"{path}.range")
        if lo < low or hi > high:
            raise DistributionError(
                f"{path.removeprefix('$.')}.range: [{lo}, {hi}] is outside the field's "
                f"declared bounds [{low}, {high}]", json_path=f"{path}.range")
        if spec.kind is FieldKind.INT and math.ceil(lo) > math.floor(hi):
            raise DistributionError(f"{path.removeprefix('$.')}.range: [{lo}, {hi}] holds "
                                    "no integer", json_path=f"{path}.range")
        changes["range"] = (lo, hi)
    if "half_width" in table:
        a, b = _pair(table["half_width"], f"{path}.half_width")
        if a < 0 or 2 * b > high - low:
            raise DistributionError(
                f"{path.removeprefix('$.')}.half_width: [{a}, {b}] must lie in "
                f"[0, {(high - low) / 2}] (half the field's declared range)",
                json_path=f"{path}.half_width")
        changes["half_width"] = (a, b)
    return FieldDistribution(field=spec.name, **changes)


def _weights(spec: FieldSpec, table: Any, path: str) -> tuple[tuple[Any, float], ...]:
    assert spec.enum_type is not None  # noqa: S101 - an enum field has its type
    if not isinstance(table, Mapping) or not table:
        raise DistributionError(f"{path.removeprefix('$.')}: weights are a table of "
                                "enum value = weight", json_path=path)
    by_value = {str(member.value): member for member in spec.enum_type}
    out = []
    for name, weight in table.items():
        member = by_value.get(str(name))
        if member is None:
            raise DistributionError(
                f"{path.removeprefix('$.')}.{name}: {name!r} is not a value of "
                f"{spec.name} ({', '.join(by_value)})", json_path=f"{path}.{name}")
        value = _number(weight, f"{path}.{name}")
        if value < 0:
            raise DistributionError(f"{path.removeprefix('$.')}.{name}: a weight is >= 0, "
                                    f"got {value}", json_path=f"{path}.{name}")
        out.append((member, value))
    if not any(w > 0 for _, w in out):
        raise DistributionError(f"{path.removeprefix('$.')}: every weight is 0",
                                json_path=path)
    return tuple(out)


@attrs.frozen
class CaseDistribution:
    """A distribution of a contract's decision states: one :class:`FieldDistribution`
    per field (fields not declared: uniform over their declared bounds or enum values,
    fair booleans, intervals narrower than a twentieth of the range; an optional field
    absent in a quarter of draws).
    """

    contract: Contract[Any, Any]
    fields: Mapping[str, FieldDistribution] = attrs.field(factory=dict)

    @classmethod
    def from_json(cls, contract: Contract[Any, Any], data: Mapping[str, Any], *,
                  path: str = "$.cases.distribution") -> CaseDistribution:
        """Read ``[cases.distribution]``: a table per field.

        Raises:
            DistributionError: an unknown field, a key the field's kind does not take,
                a range outside the declared bounds, a weight for an unknown enum
                value, a rate or an absence rate outside [0, 1], an absence rate for a
                field that is not optional; ``json_path`` names where.
        """
        if not isinstance(data, Mapping):
            raise DistributionError(f"{path.removeprefix('$.')} must be a table",
                                    json_path=path)
        fields = {}
        for name, table in data.items():
            spec = contract.field_map.get(name)
            if spec is None:
                raise DistributionError(
                    f"{path.removeprefix('$.')}.{name}: {contract.id} has no decision field "
                    f"{name!r} ({', '.join(contract.field_map)})", json_path=f"{path}.{name}")
            fields[name] = _field_distribution(spec, table, f"{path}.{name}")
        return cls(contract, fields)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form: every declared field's distribution."""
        return {name: d.to_json() for name, d in self.fields.items()}

    def draw(self, rng: random.Random) -> Any:
        """One decision state of the contract."""
        values = {}
        for spec in self.contract.fields:
            values[spec.name] = self.fields.get(spec.name, FieldDistribution(
                field=spec.name)).draw(spec, rng)
        return self.contract.state(**values)


def binomial_interval(successes: int, n: int, confidence: float = DEFAULT_CONFIDENCE
                      ) -> tuple[float, float]:
    """The Clopper–Pearson exact interval of a binomial proportion.

    Its ends are the beta distribution's quantiles (``scipy.special.betaincinv``):
    the same interval ``scipy.stats.binomtest(...).proportion_ci(method="exact")``
    finds by root search (to within that search's ``2e-12`` tolerance), at a
    two-thousandth of its cost; a report's population rows take dozens of them.
    """
    from scipy.special import betaincinv  # type: ignore[import-untyped]

    tail = (1 - confidence) / 2
    low = 0.0 if successes == 0 else float(betaincinv(successes, n - successes + 1, tail))
    high = 1.0 if successes == n else float(betaincinv(successes + 1, n - successes,
                                                       1 - tail))
    return low, high


def _mean(counts: Mapping[float, int], n: int) -> float:
    """The mean of values given as ``{value: count}``: a correctly rounded sum
    (``math.fsum``), so that the order the values arrived in does not show.
    """
    return math.fsum(v * c for v, c in counts.items()) / n


def mean_interval(counts: Mapping[float, int], n: int, *, largest: float,
                  confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """An interval for the mean of values given as ``{value: count}`` over ``n`` draws,
    each in ``[0, largest]``: Student's *t* clipped to the range; with no spread, the
    Clopper–Pearson bound on the share of draws that could have cost more.
    """
    from scipy.special import stdtrit  # Student's t quantile (what t.ppf computes)

    mean = _mean(counts, n)
    variance = (math.fsum(c * (v - mean) ** 2 for v, c in counts.items()) / (n - 1)
                if n > 1 else 0.0)
    if variance <= 0:
        _, share = binomial_interval(0, n, confidence)
        return mean, mean + (max(largest, mean) - mean) * share
    half = float(stdtrit(n - 1, (1 + confidence) / 2)) * math.sqrt(variance / n)
    return max(0.0, mean - half), min(max(largest, mean), mean + half)


def draws_needed(width: float, confidence: float = DEFAULT_CONFIDENCE) -> int:
    """The fewest draws whose Clopper–Pearson interval is at most ``width`` wide at
    every observed proportion (the widest is at one half).
    """
    lo, hi = 1, 2
    while _widest(hi, confidence) > width:
        lo, hi = hi, hi * 2
    while lo < hi:
        mid = (lo + hi) // 2
        if _widest(mid, confidence) > width:
            lo = mid + 1
        else:
            hi = mid
    return hi


def _widest(n: int, confidence: float) -> float:
    low, high = binomial_interval(n // 2, n, confidence)
    return high - low


def _positive_int(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise DistributionError(f"population {attribute.name} must be an integer >= 2, got "
                                f"{value!r}", json_path=f"$.cases.{attribute.name}")


@attrs.frozen(kw_only=True)
class Population:
    """The population the figures are rates over: a distribution and a number of draws.

    Attributes:
        distribution: the case distribution: per field, a table of ``range``,
            ``weights``, ``rate`` or ``half_width`` (the TOML form of
            ``[cases.distribution]``); ``None``: uniform over the declared bounds and
            enums.
        draws: independent states drawn (default 1000).
        seed: seeds the draws (each draw's generator is seeded from it and the
            draw's index).
        confidence: the intervals' confidence level (default 0.95).
        width: the widest interval the run may report on a rate; too few ``draws``
            for it is an error that says how many are needed (``None``: any).
    """

    distribution: Any = None
    draws: int = attrs.field(default=DEFAULT_DRAWS, validator=_positive_int)
    seed: int = 0
    confidence: float = DEFAULT_CONFIDENCE
    width: float | None = None

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.confidence, float) or not 0 < self.confidence < 1:
            raise DistributionError(f"population confidence must be in (0, 1), got "
                                    f"{self.confidence!r}", json_path="$.cases.confidence")
        if self.width is not None:
            if isinstance(self.width, bool) or not isinstance(self.width, int | float) \
                    or not 0 < self.width < 1:
                raise DistributionError(f"population width must be in (0, 1), got "
                                        f"{self.width!r}", json_path="$.cases.width")
            needed = draws_needed(float(self.width), self.confidence)
            if needed > self.draws:
                raise DistributionError(
                    f"{self.draws} draws give intervals up to "
                    f"{_widest(self.draws, self.confidence):.4g} wide; an interval at most "
                    f"{self.width} wide at {self.confidence:.0%} needs {needed} draws",
                    json_path="$.cases.draws")

    def cases(self, contract: Contract[Any, Any]) -> Any:
        """The draws over ``contract``'s states, as a re-iterable case source of
        generated cases (ids ``population-000001``...).

        Raises:
            ExperimentError: the distribution does not fit the contract (code
                ``bad-distribution``, its ``json_path`` naming the field).
        """
        return PopulationCases(resolved(self, contract), self.draws, self.seed)

    def to_json(self, contract: Contract[Any, Any]) -> dict[str, Any]:
        """The report's ``experiment.population``."""
        return {"source": "drawn", "draws": self.draws, "seed": self.seed,
                "confidence": self.confidence,
                "distribution": resolved(self, contract).to_json()}


def resolved(population: Population, contract: Contract[Any, Any]) -> CaseDistribution:
    """The population's distribution over ``contract``'s states (checked against it)."""
    if isinstance(population.distribution, CaseDistribution):
        return population.distribution
    return CaseDistribution.from_json(contract, population.distribution or {})


@attrs.frozen
class PopulationCases:
    """``count`` independent draws of a :class:`CaseDistribution`, as generated cases
    (ids ``population-000001``...), each from a generator seeded by ``(seed, index)``.
    """

    distribution: CaseDistribution
    count: int
    seed: int = 0

    @property
    def description(self) -> str:
        """``population:<contract>:<count>:seed=<seed>``."""
        return f"population:{self.distribution.contract.id}:{self.count}:seed={self.seed}"

    def __len__(self) -> int:
        """The number of draws."""
        return self.count

    def __iter__(self) -> Iterator[GeneratedCase]:
        """The draws, in index order."""
        for index in range(1, self.count + 1):
            rng = random.Random(f"handoffs-population:{self.seed}:{index}")  # noqa: S311 - reproducible draws, not secrets
            yield GeneratedCase(case_id=f"population-{index:06d}",
                                state=self.distribution.draw(rng),
                                evidence_refs=(f"urn:handoffs:population:{self.seed}:{index}",))


def population_row(counts: Sequence[Any], semantic: Sequence[Any] | None, *, largest: float,
                   confidence: float) -> dict[str, Any]:
    """A row's ``population`` figures from ``(cases, decisions, agree, regrets, hard)``
    of its receiver and ``(decisions, agree, regrets, hard)`` of the semantic
    (default-filling) receiver, if any.
    """
    cases, n, agree, regrets, hard = counts
    sem: dict[str, Any] = {"semantic": None}
    if semantic is not None and semantic[0]:
        m, s_agree, s_regrets, s_hard = semantic
        sem["semantic"] = {
            "agreement": s_agree / m,
            "agreement_interval": list(binomial_interval(s_agree, m, confidence)),
            "mean_regret": _mean(s_regrets, m),
            "mean_regret_interval": list(mean_interval(s_regrets, m, largest=largest,
                                                       confidence=confidence)),
            "hard_violation_rate": s_hard / m,
            "hard_violation_rate_interval": list(binomial_interval(s_hard, m, confidence)),
            "decisions": m,
        }
    return {
        "agreement": agree / n,
        "agreement_interval": list(binomial_interval(agree, n, confidence)),
        "mean_regret": _mean(regrets, n),
        "mean_regret_interval": list(mean_interval(regrets, n, largest=largest,
                                                   confidence=confidence)),
        "hard_violation_rate": hard / n,
        "hard_violation_rate_interval": list(binomial_interval(hard, n, confidence)),
        "draws": cases,
        "decisions": n,
        **sem,
    }


def population_of(experiment: Any) -> Population | None:
    """The population an experiment's figures are drawn from: its declared one; with
    generated cases, 1000 uniform draws seeded like the cases; ``None`` when the
    experiment's own cases are the sample.

    Raises:
        DistributionError: the declared population is not a :class:`Population`, or
            its distribution does not fit the contract.
    """
    from handoffs.lab._sources import GeneratedCases

    declared = experiment.population
    if declared is None:
        if isinstance(experiment.cases, GeneratedCases):
            return Population(seed=experiment.cases.seed)
        return None
    if not isinstance(declared, Population):
        raise DistributionError(f"population must be a Population, got "
                                f"{type(declared).__name__}", json_path="$.cases.distribution")
    resolved(declared, experiment.contract)
    return declared


POPULATION_KEYS: Final = ("distribution", "draws", "confidence", "width")


def population_from_toml(table: Mapping[str, Any], contract: Contract[Any, Any]
                         ) -> Population | None:
    """The population of ``[cases]`` (``distribution``, ``draws``, ``confidence``,
    ``width``; seeded by ``seed``), or ``None`` when none of them is declared (the
    default population of the case source applies).

    Raises:
        DistributionError: a bad key, naming its path.
    """
    if not any(key in table for key in POPULATION_KEYS):
        return None
    changes: dict[str, Any] = {"seed": table.get("seed", 0)}
    if "draws" in table:
        changes["draws"] = table["draws"]
    if "confidence" in table:
        value = table["confidence"]
        changes["confidence"] = float(value) if isinstance(value, int | float) \
            and not isinstance(value, bool) else value
    if "width" in table:
        changes["width"] = table["width"]
    return Population(distribution=CaseDistribution.from_json(
        contract, table.get("distribution", {})), **changes)
