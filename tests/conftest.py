"""Shared test fixtures.

PostgreSQL (marker ``postgres``)
    ``postgres_server`` (session) starts a real PostgreSQL server from the Debian packages
    (``/usr/lib/postgresql/<major>/bin``: initdb, pg_ctl) in a temporary directory, listening on a
    free loopback port, with password authentication, and stops it at the end of the session.
    When the tests run as root the server runs as the ``postgres`` user (initdb refuses root).
    Without the binaries the tests are skipped, except in CI (``CI=true``) where they fail.

    ``postgres_url`` (session): ``postgresql+psycopg://ciq:<password>@127.0.0.1:<port>/ciq``.
    ``postgres_db_url`` (function): a URL to a fresh, empty database for one test.
    ``postgres_server.restart()`` restarts the server (``pg_ctl restart -m fast``): every open
    connection is cut, as in a real database restart. ``halt()`` / ``resume()`` stop it and start
    it again (an outage of any length).
    ``postgres_server.password`` is random per session: grep outputs for it.

    Outside pytest (benchmarks): ``PostgresServer(workdir).start()`` / ``.stop()``.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


def _find_bindir() -> Path | None:
    """The newest PostgreSQL server binary directory, or None."""
    env = os.environ.get("CIQ_PG_BINDIR")
    candidates = [env] if env else sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_major, reverse=True)
    for path in candidates:
        if path and (Path(path) / "initdb").is_file() and (Path(path) / "pg_ctl").is_file():
            return Path(path)
    return None


def _major(path: str) -> int:
    try:
        return int(Path(path).parent.name)
    except ValueError:
        return 0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresServer:
    """A throw-away PostgreSQL server owned by the test session (or a benchmark).

    ``fsync`` is on by default so that benchmarks measure a real server; tests pass
    ``fast=True`` (fsync and synchronous_commit off: data loss on power cut is irrelevant here).
    """

    user = "ciq"

    def __init__(self, workdir: Path | None = None, *, fast: bool = False, bindir: Path | None = None):
        found = bindir or _find_bindir()
        if found is None:
            raise FileNotFoundError("PostgreSQL server binaries (initdb, pg_ctl) not found")
        self.bindir = found
        self.fast = fast
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="ciq-pg-"))
        self.datadir = self.workdir / "data"
        self.logfile = self.workdir / "server.log"
        self.password = "pw-" + secrets.token_hex(12)
        self.port = _free_port()
        self._run_as: list[str] = []
        self._counter = 0

    def url(self, database: str = "ciq") -> str:
        """SQLAlchemy URL of ``database`` on this server (with the password)."""
        return f"postgresql+psycopg://{self.user}:{self.password}@127.0.0.1:{self.port}/{database}"

    def _cmd(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        env = dict(os.environ, PGPASSWORD=self.password)
        return subprocess.run(
            [*self._run_as, *argv], check=check, capture_output=True, text=True, env=env, timeout=120
        )

    def start(self) -> PostgresServer:
        """initdb, start the server and create the database ``ciq``."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            try:
                entry = pwd.getpwnam("postgres")
            except KeyError:
                raise FileNotFoundError("running as root and there is no 'postgres' user") from None
            os.chown(self.workdir, entry.pw_uid, entry.pw_gid)
            self._run_as = ["runuser", "-u", "postgres", "--"]
        pwfile = self.workdir / "pwfile"
        pwfile.write_text(self.password + "\n")
        if os.geteuid() == 0:
            os.chown(pwfile, pwd.getpwnam("postgres").pw_uid, -1)
        self._cmd(
            str(self.bindir / "initdb"),
            "-D",
            str(self.datadir),
            "-U",
            self.user,
            f"--pwfile={pwfile}",
            "--auth=scram-sha-256",
            "-E",
            "UTF8",
            "--no-locale",
        )
        pwfile.unlink()
        self._pg_ctl("start")
        self.create_database("ciq")
        return self

    def _pg_ctl(self, action: str, *extra: str) -> None:
        options = f"-p {self.port} -k {self.workdir} -c listen_addresses=127.0.0.1 -c max_connections=200"
        if self.fast:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._cmd(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.datadir),
            "-l",
            str(self.logfile),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            *extra,
            action,
        )

    def create_database(self, name: str) -> str:
        """Create database ``name`` and return its URL."""
        self._cmd(
            str(self.bindir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, name
        )
        return self.url(name)

    def fresh_database(self) -> str:
        """A new empty database (``ciq_test_<n>``); returns its URL."""
        self._counter += 1
        return self.create_database(f"ciq_test_{self._counter}")

    def restart(self) -> None:
        """Restart the server, cutting every connection (``pg_ctl restart -m fast``)."""
        self._pg_ctl("restart", "-m", "fast")

    def halt(self) -> None:
        """Stop the server (``pg_ctl stop -m fast``) but keep its data: :meth:`resume` starts it again."""
        self._cmd(str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        """Start the server stopped by :meth:`halt` (same port, same data)."""
        self._pg_ctl("start")

    def stop(self) -> None:
        """Stop the server and delete its directory."""
        if self.datadir.exists():
            self._cmd(
                str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "immediate", "stop", check=False
            )
        shutil.rmtree(self.workdir, ignore_errors=True)


def _unavailable(reason: str) -> None:
    """Skip, or fail in CI where the server must be there (.ci/install-system.sh installs it)."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: run .ci/install-system.sh)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def cupy_gpu():
    """cupy with at least one CUDA device; the test is skipped (with the reason) without one."""
    try:
        import cupy
    except ImportError:
        pytest.skip("needs cupy and an NVIDIA GPU (pip install 'ciq-optuna[gpu]'): cupy is not installed")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("needs an NVIDIA GPU: cupy sees no CUDA device")
    except Exception as exc:  # no driver
        pytest.skip(f"needs an NVIDIA GPU: {exc}")
    return cupy


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A running PostgreSQL server for the whole session (see the module docstring)."""
    if _find_bindir() is None:
        _unavailable("PostgreSQL server binaries not found (apt-get install postgresql)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg (3) is not installed (pip install 'ciq-optuna[postgres]')")
    server = PostgresServer(fast=True)
    try:
        server.start()
    except (FileNotFoundError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        server.stop()
        _unavailable(f"cannot start PostgreSQL: {detail.strip().splitlines()[-1] if detail.strip() else exc}")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PostgresServer) -> str:
    """URL of the session's PostgreSQL database ``ciq`` (shared by tests: use distinct study names)."""
    return postgres_server.url()


@pytest.fixture()
def postgres_db_url(postgres_server: PostgresServer) -> str:
    """URL of a fresh, empty PostgreSQL database for this test only."""
    return postgres_server.fresh_database()


@pytest.fixture()
def postgres_restart(postgres_server: PostgresServer):
    """A function that restarts the session's PostgreSQL server (cuts every connection)."""
    return postgres_server.restart
