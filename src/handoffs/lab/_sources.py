"""Case sources: the streams of evidence an experiment is run on.

:class:`IterableCases` (a Python iterable or a factory of one),
:class:`JSONLinesCases` (one JSON object a line) and :class:`GeneratedCases`
(Hypothesis-drawn decision states of the contract). Every source can be iterated
more than once, which is what resuming an interrupted run needs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import attrs

from handoffs._callables import qualified_name
from handoffs._cases import GeneratedCase
from handoffs._errors import ExperimentError, MalformedJSON, UserCodeError
from handoffs._json import loads
from handoffs.contracts import Contract

__all__ = ["CaseSource", "GeneratedCases", "IterableCases", "JSONLinesCases", "draw"]


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
