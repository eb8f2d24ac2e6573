"""Test helpers for the stores: open one by URL, and a throwaway PostgreSQL server.

``postgres_server()`` runs the Debian ``postgresql`` binaries (``initdb``, ``pg_ctl``)
in a temporary directory, listening on a free loopback port. As root it runs them as
the ``pgtest`` user (``initdb`` refuses root; ``.ci/run`` creates the user). Without
the binaries or the user, the caller skips with the reason returned.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs

PG_USER = "pgtest"


# The test world's gates run on a fixed clock (tests/unit/test_gate.py's NOW), months behind
# the server's: a PostgreSQL store refuses such claims as ``clock-skew`` unless its
# retention (and so the tolerated lag, retain / 2) covers the gap.
WORLD_RETAIN = timedelta(days=3650)


def open_log(url: str, **options: Any) -> Any:
    """A decision log and replay store for ``url`` (a path or ``postgresql://``), with
    a retention that tolerates the test world's fixed clock unless ``retain`` is given.
    """
    from handoffs.service import open_store

    options.setdefault("retain", WORLD_RETAIN)
    return open_store(url, **options)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pg_bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if found:
        return Path(found[-1]).parent
    which = shutil.which("pg_ctl")
    return Path(which).parent if which else None


def why_no_postgres() -> str | None:
    """None if a throwaway server can run here, else the reason to skip."""
    if pg_bindir() is None:
        return "PostgreSQL binaries (initdb, pg_ctl) are not installed: apt-get install postgresql"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(PG_USER)
        except KeyError:
            return f"running as root and no {PG_USER!r} user to run initdb as (see .ci/run)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed: pip install 'handoffs[postgres]'"
    return None


@attrs.define
class PostgresServer:
    """A running throwaway server; ``url(db)`` names a database on it."""

    root: Path
    port: int
    bindir: Path

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = list(args)
        if os.geteuid() == 0:
            command = ["runuser", "-u", PG_USER, "--", *command]
        return subprocess.run(command, check=check, capture_output=True, text=True,
                              timeout=120)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    fsync: bool = False

    def start(self) -> None:
        # fsync only matters when the machine itself crashes; a killed or restarted
        # server keeps every commit it acknowledged (synchronous_commit stays on).
        options = (f"-c listen_addresses=127.0.0.1 -p {self.port} "
                   f"-c unix_socket_directories='' -c fsync={'on' if self.fsync else 'off'} "
                   "-c max_connections=200")
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.root / "data"), "-l",
                  str(self.root / "server.log"), "-o", options, "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.root / "data"), "-m", mode,
                  "-w", "-t", "60", "stop", check=False)

    def restart(self, mode: str = "immediate") -> None:
        """Stop (``immediate``: as after a crash, recovery from the WAL) and start."""
        self.stop(mode)
        self.start()

    def pids(self) -> list[int]:
        """The postmaster's process id and its children's (every backend)."""
        main = int((self.root / "data" / "postmaster.pid").read_text().split()[0])
        children = subprocess.run(["pgrep", "-P", str(main)], capture_output=True, text=True,
                                  check=False).stdout.split()
        return [main, *map(int, children)]

    @contextlib.contextmanager
    def stalled(self) -> Iterator[None]:
        """Freeze every process of the server (SIGSTOP), as a hung host; thaw after."""
        frozen = self.pids()
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            for pid in frozen:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


@contextlib.contextmanager
def postgres_server(*, fsync: bool = False) -> Iterator[PostgresServer]:
    """Start a throwaway server; stop it and delete its files afterwards."""
    bindir = pg_bindir()
    assert bindir is not None
    root = Path(tempfile.mkdtemp(prefix="handoffs-pg-"))
    if os.geteuid() == 0:
        entry = pwd.getpwnam(PG_USER)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    server = PostgresServer(root=root, port=free_port(), bindir=bindir, fsync=fsync)
    try:
        server._run(str(bindir / "initdb"), "-D", str(root / "data"), "-U", "postgres",
                    "--auth=trust", "-E", "UTF8", "--no-sync")
        server.start()
        yield server
    finally:
        server.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)
