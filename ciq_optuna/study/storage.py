"""Storage URLs: where a study lives, how the database is tuned, and keeping passwords secret.

One study is one Optuna RDB, shared by every worker:

- SQLite (the embedded default, one machine). Optuna's stock SQLite commits every write with a
  rollback journal and a full fsync; :func:`resolve_storage` opens the file in WAL mode with
  ``synchronous=NORMAL`` and a busy timeout, which keeps it an ordinary SQLite database that
  optuna-dashboard and ``sqlite3`` read, at a fraction of the per-trial overhead
  (see BENCHMARKS.md, "Workers and storage").
- PostgreSQL (workers on several processes or machines): ``pool_pre_ping`` so that a worker
  re-opens its connections after the server restarts.

Both get heartbeats: a RUNNING trial whose worker stops sending them (SIGKILL, power loss,
network split) is failed after ``grace_period`` seconds by the next worker that asks for a
trial, and its configuration is queued again (:class:`RetryHeartbeatStaleTrialCallback`).

The URL comes from the argument, else the environment variable ``CIQ_OPTUNA_STORAGE``, else
the default SQLite file. A URL may carry a password: show it only through :func:`redact`.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy
from sqlalchemy.engine import make_url

from ciq_optuna.errors import CiqError

#: Environment variable holding the storage URL (keeps the password off the command line).
STORAGE_ENV = "CIQ_OPTUNA_STORAGE"

#: Seconds between two heartbeats of a running trial.
DEFAULT_HEARTBEAT_INTERVAL = 10

#: Seconds without a heartbeat after which a RUNNING trial is failed and retried.
DEFAULT_GRACE_PERIOD = 30

#: How many times the configuration of a trial whose worker died is retried.
DEFAULT_MAX_RETRY = 3

#: Seconds a SQLite writer waits for the lock held by another worker before giving up.
SQLITE_BUSY_TIMEOUT_S = 60.0

#: SQLite variants measured by benchmarks/throughput.py; "tuned" is what resolve_storage uses.
SQLITE_MODES = ("optuna-default", "wal-normal", "wal-off", "tuned")

_logger = logging.getLogger("ciq_optuna.study.storage")
_PASSWORD_IN_URL = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)(?P<pw>[^@\s]*)(?P<tail>@)")


class StorageError(CiqError):
    """A storage URL that cannot be used (bad syntax, missing driver, server unreachable)."""


def redact(url: str) -> str:
    """Return ``url`` with its password replaced by ``***``; safe to print or store.

    >>> redact("postgresql://tuner:hunter2@db:5432/ciq")
    'postgresql://tuner:***@db:5432/ciq'
    """
    try:
        parsed = make_url(url)
    except Exception:
        return _PASSWORD_IN_URL.sub(r"\g<head>***\g<tail>", url)
    if parsed.password is None:
        return _PASSWORD_IN_URL.sub(r"\g<head>***\g<tail>", url)
    return parsed.render_as_string(hide_password=True)


DEFAULT_STORAGE_FILE = Path("ciq-optuna.db")
"""The SQLite file every command uses when neither a URL nor $CIQ_OPTUNA_STORAGE is given."""


def storage_url(url: str | None, *, default_path: Path) -> str:
    """The URL to use: ``url``, else ``$CIQ_OPTUNA_STORAGE``, else ``sqlite:///<default_path>``.

    A bare file path (no ``://``) is taken as a SQLite file.
    """
    chosen = url or os.environ.get(STORAGE_ENV) or ""
    if not chosen:
        return f"sqlite:///{Path(default_path).resolve()}"
    if "://" not in chosen:
        return f"sqlite:///{Path(chosen).resolve()}"
    return chosen


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite URL, or None for other databases and in-memory SQLite."""
    try:
        parsed = make_url(url)
    except Exception:
        return None
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database)


class ResilientRDBStorage(optuna.storages.RDBStorage):
    """An RDBStorage whose heartbeat survives a lost connection.

    Optuna's heartbeat thread ends at the first database error, so a short server restart
    would leave the running trial without heartbeats: another worker would fail it as stale
    while it is still being evaluated. Here a failed heartbeat is logged and the next one is
    tried at the next interval.
    """

    def record_heartbeat(self, trial_id: int) -> None:
        try:
            super().record_heartbeat(trial_id)
        except (optuna.exceptions.StorageInternalError, sqlalchemy.exc.SQLAlchemyError) as exc:
            _logger.warning("heartbeat of trial id %d not recorded: %s", trial_id, _one_line(exc, self.url))


def _sqlite_creator(path: str, journal_mode: str, synchronous: str) -> Callable[[], sqlite3.Connection]:
    """A DB-API connect function that applies the pragmas to every new connection."""

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(path, timeout=SQLITE_BUSY_TIMEOUT_S, check_same_thread=False)
        conn.execute(f"PRAGMA journal_mode={journal_mode}")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        return conn

    return connect


def engine_kwargs_for(url: str, *, sqlite_mode: str = "tuned") -> dict[str, Any]:
    """SQLAlchemy engine options for ``url``.

    ``sqlite_mode`` picks a SQLite variant: ``tuned`` (= ``wal-normal``: WAL journal,
    ``synchronous=NORMAL``, busy timeout), ``wal-off`` (no fsync at all: a power cut can lose
    the last trials), or ``optuna-default`` (what ``optuna.storages.RDBStorage`` does).
    """
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        path = sqlite_path(url)
        if path is None or sqlite_mode == "optuna-default":
            return {}
        if sqlite_mode not in SQLITE_MODES:
            raise ValueError(f"unknown sqlite_mode {sqlite_mode!r}; choose from {', '.join(SQLITE_MODES)}")
        synchronous = "OFF" if sqlite_mode == "wal-off" else "NORMAL"
        return {"creator": _sqlite_creator(str(path), "WAL", synchronous)}
    if backend in ("postgresql", "mysql"):
        # Check each pooled connection before use: after a server restart the old sockets are
        # dead and would fail the next statement; pre-ping replaces them transparently.
        return {"pool_pre_ping": True, "pool_recycle": 3600}
    return {}


def resolve_storage(
    url: str | None,
    *,
    default_path: Path,
    heartbeat_interval: int | None = DEFAULT_HEARTBEAT_INTERVAL,
    grace_period: int | None = None,
    max_retry: int | None = DEFAULT_MAX_RETRY,
    sqlite_mode: str = "tuned",
) -> optuna.storages.BaseStorage:
    """Open the study storage (see the module docstring for how the URL is chosen).

    ``heartbeat_interval`` (seconds, None disables heartbeats) and ``grace_period`` (seconds
    without a heartbeat before a RUNNING trial is failed; default three intervals) drive the
    recovery from dead workers; a failed trial's configuration is queued again at most
    ``max_retry`` times. Raises :class:`StorageError` with the password redacted.
    """
    chosen = storage_url(url, default_path=default_path)
    shown = redact(chosen)
    try:
        parsed = make_url(chosen)
    except Exception:
        raise StorageError(f"not a valid storage URL: {shown}") from None
    path = sqlite_path(chosen)
    if path is not None:
        if not path.parent.is_dir():
            raise StorageError(f"storage directory does not exist: {path.parent}")
    if heartbeat_interval is not None and grace_period is None:
        grace_period = 3 * heartbeat_interval
    hb_kwargs: dict[str, Any] = {}
    if heartbeat_interval is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            callback = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=max_retry)
        hb_kwargs = {
            "heartbeat_interval": heartbeat_interval,
            "grace_period": grace_period,
            "heartbeat_stale_trial_callback": callback,
        }
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return ResilientRDBStorage(
                chosen, engine_kwargs=engine_kwargs_for(chosen, sqlite_mode=sqlite_mode), **hb_kwargs
            )
    except ImportError:
        driver = parsed.get_backend_name()
        hint = " (pip install 'ciq-optuna[postgres]')" if driver == "postgresql" else ""
        raise StorageError(f"no database driver for {driver} storage {shown}{hint}") from None
    except sqlalchemy.exc.SQLAlchemyError as exc:
        reason = _one_line(exc, chosen)
        raise StorageError(f"cannot open storage {shown}: {reason}") from None


def _one_line(exc: BaseException, url: str) -> str:
    """The first line of a database error (the driver's own message), without the password."""
    seen: set[int] = set()
    while id(exc) not in seen and not isinstance(exc, sqlalchemy.exc.SQLAlchemyError):
        seen.add(id(exc))
        nxt = exc.__cause__ or exc.__context__
        if nxt is None:
            break
        exc = nxt
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
    return scrub(text, url)


def scrub(text: str, url: str | None) -> str:
    """Remove the password of ``url`` (and any URL password) from ``text``."""
    if url:
        try:
            password = make_url(url).password
        except Exception:
            password = None
        if password:
            text = text.replace(str(password), "***")
    return _PASSWORD_IN_URL.sub(r"\g<head>***\g<tail>", text)
