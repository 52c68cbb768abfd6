"""Storage URLs: where a study lives, how the database is tuned, and keeping passwords secret.

One study is one Optuna RDB, shared by every worker:

- SQLite (the embedded default, one machine). Optuna's stock SQLite commits every write with a
  rollback journal and a full fsync; :func:`resolve_storage` opens the file in WAL mode with
  ``synchronous=NORMAL`` and a busy timeout, which keeps it an ordinary SQLite database that
  optuna-dashboard and ``sqlite3`` read, at a fraction of the per-trial overhead
  (see BENCHMARKS.md, "Workers and storage").
- PostgreSQL (workers on several processes or machines): ``pool_pre_ping`` so that a worker
  re-opens its connections after the server restarts, and every call retried while the server
  is away (:class:`ResilientRDBStorage`).

Both get heartbeats, the lease of a RUNNING trial: a trial whose worker stops sending them
(SIGKILL, power loss, network split) is failed after ``grace_period`` seconds by the next worker
that asks for a trial, and its configuration is queued again
(:class:`RetryHeartbeatStaleTrialCallback`).

The URL comes from the argument, else the environment variable ``CIQ_OPTUNA_STORAGE``, else
the default SQLite file. A URL may carry a password: show it only through :func:`redact`.
"""

from __future__ import annotations

import datetime
import functools
import logging
import math
import os
import random
import re
import sqlite3
import threading
import time
import urllib.parse
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import optuna
import sqlalchemy
from optuna.trial import TrialState
from sqlalchemy.engine import make_url

from ciq_optuna.errors import CiqError
from ciq_optuna.samplers._genetic import CLAIM_ATTR
from ciq_optuna.study._optuna import BatchedStorage, running_beats

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
# Opening a new database while other processes create its tables: tries before giving up, and
# the time after which a failed open is not tried again (the race is over in milliseconds; a
# database locked for longer, past SQLite's busy timeout, is an error to report, not to wait out).
SCHEMA_RACE_TRIES = 8
SCHEMA_RACE_WINDOW_S = 10.0

#: SQLite variants measured by benchmarks/throughput.py; "tuned" is what resolve_storage uses.
SQLITE_MODES = ("optuna-default", "wal-normal", "wal-off", "tuned")

#: Trial system attributes written at once even while the trial runs: other workers read them.
WRITE_THROUGH_ATTRS = (CLAIM_ATTR,)

_logger = logging.getLogger("ciq_optuna.study.storage")
_T = TypeVar("_T")
_PASSWORD_IN_URL = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)(?P<pw>[^@\s]*)(?P<tail>@)")
#: What may stand right before and right after a password for it to be the whole of a word:
#: a line's or the text's ends, blanks, quotes, brackets, ``=``, and a URL credential's ``:`` and ``@``.
_WHOLE_BEFORE = r"(?<![^\s'\"`=:(\[{<,])"
_WHOLE_AFTER = r"(?![^\s'\"`@,;:.!?)\]}>])"


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


#: Seconds a process keeps retrying a storage call while the database is unreachable.
DEFAULT_RECONNECT_TIMEOUT_S = 300.0

#: First and longest pause (seconds) between two tries while the database is unreachable.
RETRY_FIRST_S, RETRY_MAX_S = 0.5, 5.0

_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.InterfaceError,
    sqlalchemy.exc.DisconnectionError,
)

#: RDBStorage methods (public, and the private ones Optuna's cache calls) retried on a lost connection.
_RETRIED = (
    "create_new_study delete_study set_study_user_attr set_study_system_attr get_study_id_from_name "
    "get_study_name_from_id get_study_directions get_study_user_attrs get_study_system_attrs "
    "get_trial_user_attrs get_trial_system_attrs get_all_studies create_new_trial _create_new_trial "
    "set_trial_param _set_trial_param get_trial_param set_trial_intermediate_value set_trial_user_attr "
    "set_trial_system_attr get_trial_id_from_study_id_trial_number get_trial get_all_trials _get_trials "
    "get_best_trial _get_best_trial_id"
).split()


def error_chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then the errors it was raised from (``__cause__``, else ``__context__``), each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def is_connection_error(exc: BaseException) -> bool:
    """Whether ``exc`` (or an error in its chain) is a lost or refused database connection."""
    return any(isinstance(e, _CONNECTION_ERRORS) for e in error_chain(exc))


def is_schema_race(exc: BaseException) -> bool:
    """Whether ``exc`` is what opening a new database gives while another process creates the
    same tables at the same moment (a table or version row already there, SQLite's write lock);
    opening again then finds the schema complete."""
    if isinstance(exc, sqlalchemy.exc.IntegrityError):
        return True
    text = str(getattr(exc, "orig", None) or exc)
    return "already exists" in text or "database is locked" in text


def retry_pauses(timeout: float) -> Iterator[float]:
    """Pauses (seconds) between tries: doubling from ``RETRY_FIRST_S`` to ``RETRY_MAX_S`` with
    jitter (so that many workers do not all come back at the same instant), until ``timeout``."""
    end = time.monotonic() + timeout
    pause = RETRY_FIRST_S
    while time.monotonic() < end:
        yield min(pause * random.uniform(0.8, 1.2), max(end - time.monotonic(), 0.0))
        pause = min(pause * 2, RETRY_MAX_S)


class ResilientRDBStorage(optuna.storages.RDBStorage):
    """An RDBStorage that rides out a database outage and expires every RUNNING trial's lease.

    - Every storage call that fails on a lost or refused connection is retried with backoff for
      ``reconnect_timeout`` seconds, so a database outage never reaches Optuna's trial loop (a
      trial told while the database is away is told when it comes back). Telling a trial again
      after a connection lost during its commit is recognised (same final state) and not an error.
    - Optuna's heartbeat thread ends at the first database error; here a failed heartbeat is
      logged and the next one is tried at the next interval.
    - The heartbeat is the lease of a RUNNING trial. Optuna never fails a RUNNING trial that has
      no heartbeat at all (its worker died before its first heartbeat, e.g. while planning); here
      such a trial expires once this process has seen it without heartbeat for ``grace_period``
      seconds. Every ciq-optuna process records a trial's first heartbeat as soon as it is created
      (:func:`ciq_optuna.study.leases.trial_lease`).
    - After an outage, no lease is declared expired for ``grace_period`` (+ two retry pauses)
      seconds: the owners, alive, need that long to renew the heartbeats they could not record
      while the database was away.
    """

    def __init__(self, *args: Any, reconnect_timeout: float = DEFAULT_RECONNECT_TIMEOUT_S, **kwargs: Any):
        self.reconnect_timeout = reconnect_timeout
        self._init_leases()
        super().__init__(*args, **kwargs)

    def _init_leases(self) -> None:
        self._state_lock = threading.Lock()
        self._local = threading.local()
        self._outage_since: float | None = None
        self._reconnected_at = -math.inf
        self._unbeaten: dict[int, float] = {}

    def __getstate__(self) -> dict[Any, Any]:
        state = super().__getstate__()
        for key in ("_state_lock", "_local", "_outage_since", "_reconnected_at", "_unbeaten"):
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict[Any, Any]) -> None:
        self._init_leases()
        super().__setstate__(state)

    def retrying(self, call: Callable[[], _T]) -> _T:
        """``call()``, retried with backoff while the database is unreachable (at most
        ``reconnect_timeout`` seconds); other errors, and the last one, are raised."""
        if getattr(self._local, "depth", 0):  # a retried call inside another: the outer one retries
            return call()
        self._local.depth = 1
        try:
            pauses = retry_pauses(self.reconnect_timeout)
            while True:
                try:
                    result = call()
                except Exception as exc:
                    if not is_connection_error(exc):
                        raise
                    pause = next(pauses, None)
                    if pause is None:
                        raise
                    self._lost(exc)
                    time.sleep(pause)
                    continue
                self._back()
                return result
        finally:
            self._local.depth = 0

    def _lost(self, exc: BaseException) -> None:
        with self._state_lock:
            if self._outage_since is not None:
                return
            self._outage_since = time.monotonic()
        _logger.warning(
            "database %s unavailable (%s); retrying for up to %.0f s",
            redact(self.url),
            _one_line(exc, self.url),
            self.reconnect_timeout,
        )

    def _back(self) -> None:
        if self._outage_since is None:
            return
        with self._state_lock:
            since, self._outage_since = self._outage_since, None
            if since is None:
                return
            self._reconnected_at = time.monotonic()
            self._unbeaten.clear()
        _logger.warning("database %s back after %.0f s", redact(self.url), time.monotonic() - since)

    def set_trial_state_values(
        self, trial_id: int, state: TrialState, values: Sequence[float] | None = None
    ) -> bool:
        tries = 0

        def tell() -> bool:
            nonlocal tries
            tries += 1
            try:
                return optuna.storages.RDBStorage.set_trial_state_values(self, trial_id, state, values)
            except optuna.exceptions.UpdateFinishedTrialError:
                # The connection was lost after an earlier try committed: the trial already
                # holds what this call stores.
                if tries > 1 and state.is_finished():
                    stored = optuna.storages.RDBStorage.get_trial(self, trial_id)
                    if stored.state == state and (values is None or stored.values == list(values)):
                        return True
                raise

        return self.retrying(tell)

    def record_heartbeat(self, trial_id: int) -> None:
        try:
            super().record_heartbeat(trial_id)
        except (optuna.exceptions.StorageInternalError, sqlalchemy.exc.SQLAlchemyError) as exc:
            if is_connection_error(exc):
                self._lost(exc)
            _logger.warning("heartbeat of trial id %d not recorded: %s", trial_id, _one_line(exc, self.url))
        else:
            self._back()

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        return self.stale_among(self.retrying(lambda: running_beats(self.engine, study_id)))

    def stale_among(self, rows: Iterable[Sequence[Any]]) -> list[int]:
        """The trials whose lease expired among ``rows`` (``running_beats``: each RUNNING trial of a
        study, its last heartbeat or None, the database's time): a heartbeat older than
        ``grace_period`` (Optuna's rule, on the database's clock), or no heartbeat while this
        process has seen the trial for ``grace_period`` seconds; none shortly after an outage."""
        grace = self.grace_period if self.grace_period is not None else 2 * (self.heartbeat_interval or 0)
        beaten, unbeaten = [], []
        for trial_id, beat, now_db in rows:
            if beat is None:
                unbeaten.append(trial_id)
            elif now_db.replace(tzinfo=None) - beat > datetime.timedelta(seconds=grace):
                beaten.append(trial_id)
        now = time.monotonic()
        with self._state_lock:
            if now - self._reconnected_at < grace + 2 * RETRY_MAX_S:
                return []
            self._unbeaten = {t: self._unbeaten.get(t, now) for t in unbeaten}
            expired = [t for t, seen in self._unbeaten.items() if now - seen > grace]
        return beaten + expired


def _retried(name: str) -> Callable[..., Any]:
    method = getattr(optuna.storages.RDBStorage, name)

    @functools.wraps(method)
    def call(self: ResilientRDBStorage, *args: Any, **kwargs: Any) -> Any:
        return self.retrying(lambda: method(self, *args, **kwargs))

    return call


for _name in _RETRIED:
    setattr(ResilientRDBStorage, _name, _retried(_name))


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
    reconnect_timeout: float = DEFAULT_RECONNECT_TIMEOUT_S,
    batched: bool = True,
) -> optuna.storages.BaseStorage:
    """Open the study storage (see the module docstring for how the URL is chosen).

    ``heartbeat_interval`` (seconds, None disables heartbeats) and ``grace_period`` (seconds
    without a heartbeat before a RUNNING trial is failed; default three intervals) drive the
    recovery from dead workers; a failed trial's configuration is queued again at most
    ``max_retry`` times. A call that loses the database is retried for ``reconnect_timeout``
    seconds. ``batched`` (the default) writes each trial of this process in one transaction when
    it finishes (:class:`ciq_optuna.study._optuna.BatchedStorage`); False gives the RDB storage
    alone. Raises :class:`StorageError` with the password redacted.
    """
    chosen = storage_url(url, default_path=default_path)
    shown = redact(chosen)
    try:
        parsed = make_url(chosen)
    except Exception:
        raise StorageError(f"not a valid storage URL: {shown}") from None
    if parsed.drivername == "postgresql":  # SQLAlchemy's default driver is psycopg2; ciq-optuna ships psycopg 3
        chosen = parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
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
    give_up = time.monotonic() + SCHEMA_RACE_WINDOW_S
    try:
        for tries_left in range(SCHEMA_RACE_TRIES - 1, -1, -1):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                    rdb = ResilientRDBStorage(
                        chosen,
                        engine_kwargs=engine_kwargs_for(chosen, sqlite_mode=sqlite_mode),
                        reconnect_timeout=reconnect_timeout,
                        **hb_kwargs,
                    )
                break
            except sqlalchemy.exc.SQLAlchemyError as exc:
                if not tries_left or time.monotonic() > give_up or not is_schema_race(exc):
                    raise
                time.sleep(random.uniform(0.05, 0.25))
        return BatchedStorage(rdb, write_through=WRITE_THROUGH_ATTRS) if batched else rdb
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
    """Remove the password of ``url`` (and any URL password) from ``text``.

    The password is replaced where it stands as a whole: as a URL's credential (``user:pw@``,
    decoded or percent-encoded), quoted, after ``=``, or as a word of its own. Where it is only
    part of a longer word (a password ``p`` in ``port``) the text is left alone.
    """
    if url:
        try:
            parsed = make_url(url)
        except Exception:
            parsed = None
        if parsed is not None and parsed.password:
            password = str(parsed.password)
            forms = (password, urllib.parse.quote(password, safe=""), urllib.parse.quote(password))
            for form in dict.fromkeys(forms):
                text = re.sub(_WHOLE_BEFORE + re.escape(form) + _WHOLE_AFTER, "***", text)
    return _PASSWORD_IN_URL.sub(r"\g<head>***\g<tail>", text)
