"""Import cost of ``handoffs.receivers`` against the libraries it stands on.

The **baseline** is what the gate cannot do without: ``attrs``, ``cattrs``,
``jsonschema_rs`` and cryptography's Ed25519. ``import handoffs.receivers`` should cost
at most twice as much; everything else (the lab, reports, Hypothesis,
python-jsonschema's error reporter, the CLI's click and rich) is imported only when
used.

Method: every sample is a fresh interpreter (``python -c CODE``) whose code measures the
process CPU time (``time.process_time``) around the import statement alone, so that
interpreter start-up, which both sides share, does not dilute the ratio. Targets are
interleaved round-robin (one discarded warm-up round, then ROUNDS rounds) so that a
busy machine slows all of them alike. The samples run without
``PYTHONDONTWRITEBYTECODE``, so the warm-up round writes the byte-code caches that
users' installs have and every measured round reads them. Reported: the median per target, and the
*paired* ratio (the median over rounds of the per-round ratio). ``handoffs --version``
is timed as a whole process (wall time), beside an empty interpreter.

Run: ``python benchmarks/imports.py [--rounds R]``. The last line is the headline:
``import ratio: <x>``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

BASELINE = ("import attrs, cattrs, jsonschema_rs\n"
            "from cryptography.hazmat.primitives.asymmetric import ed25519")
TARGETS = {
    "baseline (attrs, cattrs, jsonschema_rs, ed25519)": BASELINE,
    "import handoffs.receivers": "import handoffs.receivers",
    "import handoffs.contracts": "import handoffs.contracts",
}
_TIMED = ("import time\n"
          "_t = time.process_time()\n"
          "{code}\n"
          "print(time.process_time() - _t)\n")
_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def cpu_import(code: str) -> float:
    """CPU seconds that ``code`` takes in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", _TIMED.format(code=code)],  # noqa: S603
                          capture_output=True, text=True, timeout=60, check=True, env=_ENV)
    return float(done.stdout.strip().splitlines()[-1])


def wall_process(args: list[str]) -> float:
    """Wall seconds of a whole process."""
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], capture_output=True, timeout=60,  # noqa: S603
                   check=True, env=_ENV)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    rounds = parser.parse_args().rounds
    if rounds < 1:
        parser.error("--rounds must be at least 1")
    cpu: dict[str, list[float]] = {name: [] for name in TARGETS}
    wall: dict[str, list[float]] = {"python -c pass": [], "handoffs --version": []}
    for index in range(rounds + 1):
        sample = {name: cpu_import(code) for name, code in TARGETS.items()}
        empty = wall_process(["-c", "pass"])
        version = wall_process(["-m", "handoffs", "--version"])
        if index == 0:  # warm-up: file-system caches, byte-code caches written
            continue
        for name, value in sample.items():
            cpu[name].append(value)
        wall["python -c pass"].append(empty)
        wall["handoffs --version"].append(version)
    names = list(TARGETS)
    base, receivers = names[0], names[1]
    print(f"{rounds} rounds, fresh interpreter per sample, CPU time of the import alone")
    for name in names:
        print(f"  {name:<52} {statistics.median(cpu[name]) * 1000:8.1f} ms")
    print("whole processes, wall time")
    for name, values in wall.items():
        print(f"  {name:<52} {statistics.median(values) * 1000:8.1f} ms")
    ratio = statistics.median(r / b for r, b in zip(cpu[receivers], cpu[base], strict=True))
    print(f"import ratio: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
