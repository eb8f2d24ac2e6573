"""Start-up cost of the command line and of the gate's import, in CPU time.

Three ratios, each of two fresh processes run side by side:

- ``help/click ratio``: ``handoffs --help`` ÷ ``python -c 'import click'`` (the floor
  of any click program). Target ≤ 2: the root group answers from its command table
  and imports no command (so none of the contracts, receivers or lab).
- ``version/click ratio``: ``handoffs --version`` ÷ the same.
- ``import handoffs.receivers / its libraries ratio``: ``python -c 'import
  handoffs.receivers'`` ÷ a ``python -c`` importing exactly the third-party modules
  that import loads (found by a probe process first, and listed), so the ratio is
  the cost of the library's own code over the libraries it stands on. Target ≤ 2.

Method: every sample is a whole fresh interpreter; its CPU time is the children's
user + system time (``resource.getrusage(RUSAGE_CHILDREN)`` before and after). The
targets are interleaved round-robin (one discarded warm-up round, which also writes
the byte-code caches users' installs have, then ROUNDS rounds), so that a busy
machine slows all of them alike. Reported: the median per target and, per ratio, the
median over rounds of the per-round ratio. The ``handoffs`` samples run what the
installed script runs (``from handoffs.cli import main; main()``) with this
interpreter, so they measure the code on ``sys.path`` (``PYTHONPATH`` is kept).

Run: ``python benchmarks/cli.py [--rounds R] [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys

_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
_SCRIPT = "import sys\nfrom handoffs.cli import main\nsys.argv[0] = 'handoffs'\nmain({args!r})"
_PROBE = ("import sys\nbefore = set(sys.modules)\nimport handoffs.receivers\n"
          "import json\nprint(json.dumps(sorted(set(sys.modules) - before)))")


def cpu_of(code: str) -> float:
    """CPU seconds (user + system) of a fresh ``python -c code`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], capture_output=True,  # noqa: S603
                   timeout=120, check=True, env=_ENV)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def receivers_libraries() -> list[str]:
    """The third-party modules ``import handoffs.receivers`` loads, in load-safe order."""
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True,  # noqa: S603
                          text=True, timeout=120, check=True, env=_ENV)
    loaded = json.loads(done.stdout)
    stdlib = sys.stdlib_module_names
    return sorted((m for m in loaded
                   if m.split(".")[0] not in stdlib and m.split(".")[0] != "handoffs"
                   and not m.split(".")[0].startswith("_")),
                  key=lambda m: (m.count("."), m))


def libraries_code(modules: list[str]) -> str:
    """A program importing ``modules`` (a module that cannot be imported alone is skipped,
    as the library's own import would have loaded it through its parent).
    """
    return ("import importlib\n"
            f"for name in {modules!r}:\n"
            "    try:\n"
            "        importlib.import_module(name)\n"
            "    except ImportError:\n"
            "        pass\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--quick", action="store_true", help="3 rounds (a smoke run for CI)")
    options = parser.parse_args()
    rounds = 3 if options.quick else options.rounds
    if rounds < 1:
        parser.error("--rounds must be at least 1")
    modules = receivers_libraries()
    top = sorted({m.split(".")[0] for m in modules})
    targets = {
        "python -c pass": "pass",
        "python -c 'import click'": "import click",
        "handoffs --help": _SCRIPT.format(args=["--help"]),
        "handoffs --version": _SCRIPT.format(args=["--version"]),
        "import handoffs.receivers": "import handoffs.receivers",
        "its libraries": libraries_code(modules),
    }
    cpu: dict[str, list[float]] = {name: [] for name in targets}
    for index in range(rounds + 1):
        sample = {name: cpu_of(code) for name, code in targets.items()}
        if index == 0:  # warm-up: file-system caches, byte-code caches written
            continue
        for name, value in sample.items():
            cpu[name].append(value)

    def ratio(numerator: str, denominator: str) -> float:
        return statistics.median(n / d for n, d in zip(cpu[numerator], cpu[denominator],
                                                         strict=True))

    print(f"{rounds} rounds, a fresh process per sample, CPU time (user + system)")
    for name in targets:
        print(f"  {name:<28} {statistics.median(cpu[name]) * 1000:8.1f} ms")
    print(f"its libraries: {len(modules)} modules of {', '.join(top)}")
    click = "python -c 'import click'"
    print(f"help/click ratio: {ratio('handoffs --help', click):.2f}")
    print(f"version/click ratio: {ratio('handoffs --version', click):.2f}")
    print("import handoffs.receivers / its libraries ratio: "
          f"{ratio('import handoffs.receivers', 'its libraries'):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
