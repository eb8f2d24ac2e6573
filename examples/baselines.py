"""Falsifying baselines for the payment case (essay, Part III).

Before a relay is optimised, controls test whether it does any work. On the essay's
28 synthetic payment cases and five strategies, this example runs the three
falsifying controls (no message, a shuffled message, a constant message) and the
authority negative control (action-only messages with ADVISE against DECIDE, and a
sender claiming DECIDE), and reads each as the essay does: what the receiver infers
alone, whether content matters or only the extra call, whether the receiver reads the
channel at all, and whether a message looks sufficient only because the decision
moved to the sender.

Run from the repository root::

    python examples/baselines.py [--out DIR]
    handoffs lab run examples/baselines.toml --out baselines-report/

Each reading compares the control with the strategy's own baseline and with what a
receiver would score if it decided correctly for whatever message it was handed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Final

import attrs

from handoffs.examples.payment_lab import payment_experiment
from handoffs.lab import Experiment, read_baselines, run

SUBJECT: Final = "decision_contract"
_TITLES: Final = {"no-message": "No message", "shuffled-message": "Shuffled message",
                  "constant-message": "Constant message"}
CONTROLS: Final = tuple(_TITLES)
"""The perturbation ids of the three falsifying controls."""
AUTHORITATIVE_SENDER: Final = "authoritative-sender"
"""The perturbation id of the sender claiming DECIDE authority."""


def baselines_experiment(variants: int = 4) -> Experiment:
    """The built-in payment experiment with only the controls and the authority claim."""
    base = payment_experiment(variants=variants)
    keep = (*CONTROLS, AUTHORITATIVE_SENDER)
    assert base.perturbations is not None
    return attrs.evolve(base, name="payment-baselines",
                        perturbations=tuple(p for p in base.perturbations if p.id in keep),
                        injections=())


def read(report: dict[str, Any], experiment: Experiment) -> Any:
    """The readings of ``report`` (run from ``experiment``): ``read_baselines``'s."""
    return read_baselines(report, experiment=experiment)


def _matrix(report: dict[str, Any]) -> list[str]:
    rows = {(r["strategy"], r["perturbation"]): r for r in report["results"]}
    names = [s["name"] for s in report["experiment"]["strategies"]]
    columns = ("none", *CONTROLS, AUTHORITATIVE_SENDER)
    lines = ["  agreement (hard violations)".ljust(30)
             + "".join(c.removesuffix("-message").ljust(16) for c in columns)]
    for name in names:
        cells = []
        for column in columns:
            row = rows.get((name, column))
            cells.append("-".ljust(16) if row is None else
                         f"{row['agreement']:.2f} ({row['hard_violations']})".ljust(16))
        lines.append(f"  {name:<28}" + "".join(cells))
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the controls, print every reading, optionally write the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--out", type=Path, help="write report.json and baselines.json here")
    args = parser.parse_args(argv)
    experiment = baselines_experiment()
    report = run(experiment).report
    readings = read(report, experiment)
    print(f"Falsifying baselines for the payment case: {report['experiment']['contract']}, "
          f"{report['experiment']['cases']} cases\n")
    print("\n".join(_matrix(report)) + "\n")
    for control in CONTROLS:
        reading = readings.control(SUBJECT, control)
        print(f"{_TITLES[control]}: {reading.question}")
        print(f"  {SUBJECT}: {reading.reading}\n")
    ignoring = sorted({r.strategy for r in readings.controls if r.unchanged}
                      - {r.strategy for r in readings.controls if not r.unchanged})
    for name in ignoring:
        agreement = readings.control(name, CONTROLS[-1]).agreement
        print(f"No control changes {name} (agreement {agreement:.2f} throughout): its "
              "decisions do not depend on the message, which is what the constant control "
              "exists to expose.\n")
    print("Authority, the negative control: does an action-only message succeed only "
          "because the sender decides?")
    for negative in readings.authority:
        print(f"  {negative.reading}")
    claims = [r for r in readings.sender_claims if r.strategy == SUBJECT]
    for claim in claims:
        print(f"  {SUBJECT} when the sender claims DECIDE: {claim.reading}")
    falsified = [r for r in readings.controls if r.falsifies]
    print("\nConclusion: " + (
        "every control does worse than the message, as it must: the channel carries the "
        "decision. Only moving the decision to the sender makes a bare verdict look "
        "sufficient, and that changes the architecture rather than the message."
        if not falsified else
        f"{len(falsified)} control(s) meet the release thresholds: the architecture is "
        "falsified for " + ", ".join(sorted({r.strategy for r in falsified})) + "."))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "report.json").write_text(json.dumps(report, indent=2) + "\n",
                                              encoding="utf-8")
        (args.out / "baselines.json").write_text(
            json.dumps(readings.to_json(), indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
