#!/usr/bin/env python3
"""Policy analysis: its cost, and the coverage it buys generated cases.

(a) Cost. CPU time (``time.process_time``) of ``analyse`` on the built-in
``payment-release`` contract and on two generated contracts with 30 rules over 10
and 20 fields (numbers, booleans, an enum; guards with thresholds, products and
sums of two fields), median over ``--rounds``.

(b) Coverage. For each contract, at equal case counts (the number of states the
geometry needs, and ten times that), the live regions witnessed and the boundaries
covered by the lab's generator (``GeneratedCases``: the geometry first, then
realistic draws) and by plain Hypothesis draws (floats, booleans and enum members
over the declared bounds, as the generator drew before the analysis), measured
side by side in one run with the same coverage tracker.

(c) Proofs (issue #33). CPU time to prove or refute every standard perturbation of
each contract that has a symbolic form (under the strict receiver's semantics, in
process, so that ``time.process_time`` counts the solver), printed beside the
analysis time with their ratio (target: within 2x), and the verdicts.

The last line is ``boundaries covered, new vs plain: <x> % vs <y> %``.
"""

from __future__ import annotations

import argparse
import enum
import random
import statistics
import sys
import time
from typing import Any

import attrs
from hypothesis import strategies as st

from handoffs.contracts import Contract, Interval, LossMatrix, decision_field
from handoffs.contracts.analysis import analyse, coverage, geometry
from handoffs.contracts.policy import Field, Is, Over, Policy, Rule, Under
from handoffs.examples.payment import PAYMENT_RELEASE
from handoffs.lab import GeneratedCases
from handoffs.lab._proofs import _run_tasks, _Task
from handoffs.lab._sources import draw
from handoffs.lab.perturbations import standard_perturbations


class Act(enum.Enum):
    A = "A"
    B = "B"
    C = "C"
    D = "D"


class Tier(enum.Enum):
    LOW = "LOW"
    MID = "MID"
    HIGH = "HIGH"


def generated_contract(fields: int, rules: int, seed: int) -> Contract[Any, Act]:
    """A contract with ``fields`` decision fields and ``rules`` random rules."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible benchmark, not a secret
    kinds = ["number", "number", "bool", "number", "interval", "enum"]
    attributes: dict[str, Any] = {}
    numbers: list[str] = []
    flags: list[str] = []
    for i in range(fields):
        kind = kinds[i % len(kinds)]
        name = f"f{i}"
        if kind == "number":
            attributes[name] = decision_field(name, minimum=0, maximum=100)
            numbers.append(name)
        elif kind == "interval":
            attributes[name] = decision_field(name, minimum=0, maximum=1)
        elif kind == "bool":
            attributes[name] = decision_field(name)
            flags.append(name)
        else:
            attributes[name] = decision_field(name)
    annotations = {f"f{i}": {"number": float, "interval": Interval, "bool": bool,
                             "enum": Tier}[kinds[i % len(kinds)]] for i in range(fields)}
    state = attrs.make_class(f"Generated{fields}", attributes, frozen=True)
    state.__annotations__ = annotations
    for attribute in attrs.fields(state):
        object.__setattr__(attribute, "type", annotations[attribute.name])
    enums = [f"f{i}" for i in range(fields) if kinds[i % len(kinds)] == "enum"]

    def atom() -> Any:
        pick = rng.random()
        a, b = rng.sample(numbers, 2)
        if pick < 0.35:
            return Over(a, round(rng.uniform(10, 90), 1))
        if pick < 0.5:
            return Under(a, round(rng.uniform(10, 90), 1))
        if pick < 0.65:
            return Field(a) * Field(b) > round(rng.uniform(500, 5000), 0)
        if pick < 0.8:
            return Field(a) + Field(b) < round(rng.uniform(20, 150), 0)
        if pick < 0.9 and flags:
            return Is(rng.choice(flags), True)
        return Is(rng.choice(enums), rng.choice(list(Tier))) if enums else Over(a, 50)

    made = []
    for r in range(rules):
        condition = atom() if rng.random() < 0.6 else atom() & atom()
        made.append(Rule(f"r{r}", condition, rng.choice(list(Act))))
    loss = LossMatrix({(x, y): 0.0 if x is y else 1.0 for x in Act for y in Act})
    return Contract(name=f"generated-{fields}", version="1.0.0", description="benchmark",
                    actions=Act, state=state, policy=Policy(rules=made, default=Act.D),
                    loss=loss, fail_closed_action=Act.D, counterfactual_trigger="any")


def plain_states(contract: Contract[Any, Any], count: int, seed: int) -> list[Any]:
    """Plain Hypothesis draws over the declared bounds (the generator before #18)."""
    def value(spec: Any) -> Any:
        domain = spec.domain()
        if domain is not None:
            return st.sampled_from(domain)
        floats = st.floats(spec.minimum, spec.maximum, allow_nan=False, allow_infinity=False)
        if spec.kind.value == "interval":
            return st.tuples(floats, floats).map(lambda p: Interval(min(p), max(p)))
        return floats

    strategy = st.fixed_dictionaries({s.name: value(s) for s in contract.fields}).map(
        lambda d: contract.state(**d))
    return draw(strategy, count, seed=seed)


def timed(contract: Contract[Any, Any], rounds: int) -> tuple[float, Any]:
    times = []
    result = None
    for _ in range(rounds):
        started = time.process_time()
        result = analyse(contract)
        times.append(time.process_time() - started)
    return statistics.median(times), result


def proofs(contract: Contract[Any, Any], rounds: int) -> tuple[float, dict[str, int]]:
    """CPU seconds (median of ``rounds``) to decide every standard perturbation with a
    symbolic form under the strict receiver, and the verdict counts.
    """
    tasks = []
    for perturbation in standard_perturbations(contract):
        prepared = perturbation.prepare(contract, seed=0)
        form = prepared.symbolic(contract)
        if form is not None:
            tasks.append(_Task(("strict", prepared.id), prepared, form, "strict", "s", False))
    times = []
    counts: dict[str, int] = {}
    for _ in range(rounds):
        started = time.process_time()
        found = _run_tasks(contract, tasks, 5000)
        times.append(time.process_time() - started)
        counts = {}
        for proof in found.values():
            counts[proof.verdict] = counts.get(proof.verdict, 0) + 1
    return statistics.median(times), counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run for CI: one round, smaller generated contracts "
                             "(6 and 8 fields, 10 rules); not for figures")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    rounds = 1 if args.quick else args.rounds
    sizes = ((6, 10), (8, 10)) if args.quick else ((10, 30), (20, 30))
    contracts = [("payment-release (6 fields, 7 rules)", PAYMENT_RELEASE)] + [
        (f"generated ({fields} fields, {rules} rules)",
         generated_contract(fields, rules, seed=seed))
        for seed, (fields, rules) in enumerate(sizes, start=1)]
    shares: list[tuple[float, float]] = []
    for label, contract in contracts:
        seconds, result = timed(contract, rounds)
        print(f"{label}: analysis {seconds:.3f} s CPU (median of {rounds}); "
              f"{len(result.live)} live / {len(result.regions)} regions, "
              f"{len(result.dead)} dead, {len(result.boundaries)} boundaries, "
              f"{len(result.unknown)} unknown queries", flush=True)
        proved, counts = proofs(contract, rounds)
        print(f"  proofs of {sum(counts.values())} standard perturbations: {proved:.3f} s CPU "
              f"(median of {rounds}), {proved / seconds:.2f}x the analysis; "
              + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())), flush=True)
        found = geometry(contract).analysis
        assert found is not None
        need = len(found.cover_states())
        for count in ((need,) if args.quick else (need, 10 * need)):
            new = [c.state for c in GeneratedCases(contract, count, seed=0)]
            plain = plain_states(contract, count, seed=0)
            ours, theirs = coverage(contract, found, new), coverage(contract, found, plain)
            region_ratio = len(ours.regions_witnessed) / max(len(theirs.regions_witnessed), 1)
            if ours.boundaries_found:
                shares.append((ours.boundaries_covered / ours.boundaries_found,
                               theirs.boundaries_covered / ours.boundaries_found))
                ratio_text = (f"{ours.boundaries_covered / theirs.boundaries_covered:.2f}"
                              if theirs.boundaries_covered else "plain covers none")
            else:
                ratio_text = "n/a: no numeric cut"
            print(f"  {count} cases: regions {len(ours.regions_witnessed)}/"
                  f"{len(ours.regions_live)} new vs {len(theirs.regions_witnessed)} plain "
                  f"(ratio {region_ratio:.2f}); boundaries {ours.boundaries_covered}/"
                  f"{ours.boundaries_found} new vs {theirs.boundaries_covered} plain "
                  f"(ratio {ratio_text})", flush=True)
    print("the machine is shared (2 cores, several engineers): CPU times, not wall times")
    new = statistics.mean(n for n, _ in shares)
    plain = statistics.mean(p for _, p in shares)
    print(f"boundaries covered, new vs plain: {100 * new:.1f} % vs {100 * plain:.1f} % "
          "(mean over the contracts with numeric cuts and the case counts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
