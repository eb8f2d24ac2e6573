"""Shared test configuration: Hypothesis profiles.

``HYPOTHESIS_PROFILE=thorough`` for a long local or nightly run; CI uses ``ci``;
the default ``fast`` keeps the suite quick; ``mutation`` is for ``tools/mutate.py``.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("fast", max_examples=40, deadline=None)
settings.register_profile(
    "ci", max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("thorough", max_examples=1000, deadline=None)
# CI's slow step: tests/unit/test_fuzz.py's 3 tests × 35,000 generated inputs each.
settings.register_profile(
    "fuzz", max_examples=35_000, deadline=None, database=None,
    suppress_health_check=list(HealthCheck),
)
# tools/mutate.py: few examples, derandomised and without a database, so that a
# mutant's verdict is the same on every run.
settings.register_profile(
    "mutation", max_examples=20, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
_DEFAULT = "ci" if os.environ.get("CI") else "fast"
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", _DEFAULT))


# ------------------------------------------------- stores: SQLite file, real PostgreSQL

import itertools  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from stores import PostgresServer, postgres_server, why_no_postgres  # noqa: E402

_databases = itertools.count()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL server for the session (skips when it cannot run here)."""
    reason = why_no_postgres()
    if reason is not None:
        pytest.skip(reason)
    with postgres_server() as server:
        yield server


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty store of each backend: a SQLite path or a PostgreSQL database URL."""
    if request.param == "sqlite":
        return str(tmp_path / "decisions.sqlite")
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.create_database(f"t{next(_databases)}")


# ------------------------------------------------------- the user's own contract

import shutil  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402

from worlds.user_contract import USER_CONTRACT  # noqa: E402


@pytest.fixture(scope="module")
def mymodule() -> Iterator[Any]:
    """``tests/user_contract/mymodule.py``, imported (its directory on ``sys.path``)."""
    sys.path.insert(0, str(USER_CONTRACT))
    try:
        import mymodule

        yield mymodule
    finally:
        sys.path.remove(str(USER_CONTRACT))


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    """A fresh directory holding a copy of ``mymodule.py``."""
    shutil.copy(USER_CONTRACT / "mymodule.py", tmp_path / "mymodule.py")
    return tmp_path


# ------------------------------------------------------------ no silent skips in CI

# A skip hides a test that did not run. Under CI (CI set), any skip not listed here
# fails the run; each entry is a node-id prefix and the reason it may skip.
ALLOWED_SKIPS: dict[str, str] = {}

_skipped: list[tuple[str, str]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Remember every skipped test and its reason."""
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skipped.append((report.nodeid, reason))


def unlisted_skips() -> list[tuple[str, str]]:
    """The skips this run saw that ``ALLOWED_SKIPS`` does not list."""
    return [(node, why) for node, why in _skipped
            if not any(node.startswith(prefix) for prefix in ALLOWED_SKIPS)]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under CI, an unlisted skip fails the run."""
    if not os.environ.get("CI"):
        return
    unlisted = unlisted_skips()
    if unlisted:
        lines = "\n".join(f"  {node}: {why}" for node, why in unlisted)
        print(f"\n{len(unlisted)} skipped test(s) not listed in conftest.ALLOWED_SKIPS:\n{lines}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
