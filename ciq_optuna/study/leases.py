"""Leases on what processes share through a study: the planning lock and each RUNNING trial.

Every cross-process resource has an owner and a lease that the live owner renews; once the
lease expires, another process takes the resource over, so a holder that dies (SIGKILL, power
loss, network split) or stops (SIGSTOP) costs at most one lease period:

- **The planning lock** (:class:`PlanLock`), held while a sampler reads the trials and claims a
  configuration. PostgreSQL: a session advisory lock on a connection of its own, whose session
  the server ends when it has been idle for :data:`PLAN_LOCK_LEASE_S` seconds
  (``idle_session_timeout``); the owner renews the lease by touching the session every
  :data:`PLAN_LOCK_RENEW_S` seconds. The server releases the lock when the session ends (owner
  killed, or lease expired), and the next waiter gets it at once. SQLite (one machine): ``flock``
  on ``<database>.lock``, released by the kernel when the owner dies.
- **A RUNNING trial** (its budget slot and the configuration its sampler claimed): its lease is
  its heartbeat (``trial_heartbeats``), renewed every ``heartbeat_interval`` seconds and expired
  after ``grace_period``. Optuna starts a trial's heartbeat only once its parameters are planned;
  :func:`trial_lease` records it from the moment the trial exists (also while it waits for the
  planning lock), and :class:`ciq_optuna.study.storage.ResilientRDBStorage` expires a RUNNING
  trial that never had one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import socket
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import optuna
import sqlalchemy
from optuna.trial import FrozenTrial

from ciq_optuna.study._optuna import (
    BatchedStorage,
    driver_execute,
    get_heartbeat_thread,
    read_study_once,
    storage_of,
    trial_id_of,
)
from ciq_optuna.study.storage import redact, sqlite_path

#: Seconds between two looks at the study while other workers hold the remaining budget.
POLL_INTERVAL_S = 1.0
#: How many times a worker continues after a trial was finished under it (then it stops).
MAX_TAKEN_AWAY = 20
#: Seconds after which the planning lock of a silent owner is released (PostgreSQL).
PLAN_LOCK_LEASE_S = 10.0
#: Test hook (environment variable): seconds to sleep while holding the planning lock.
TEST_PAUSE_ENV = "CIQ_OPTUNA_TEST_PAUSE_IN_PLAN_LOCK"
#: Seconds between two renewals of the planning lock's lease by its owner.
PLAN_LOCK_RENEW_S = 2.0

_logger = logging.getLogger("ciq_optuna.leases")


def _backend(storage: optuna.storages.BaseStorage) -> Any:
    return getattr(storage, "_backend", storage)


@contextlib.contextmanager
def trial_lease(storage: optuna.storages.BaseStorage, trial_id: int) -> Iterator[None]:
    """Renew the lease (heartbeat) of trial ``trial_id`` from now until the block ends.

    Use it between the creation of a trial and the start of Optuna's own heartbeat thread (the
    sampler's ``before_trial``), where Optuna records no heartbeat.
    """
    beat = get_heartbeat_thread(trial_id, storage)
    beat.start()
    try:
        yield
    finally:
        beat.join()


class PlanLock:
    """A lock shared by every process working on one study (see the module docstring)."""

    def __init__(self, storage: optuna.storages.BaseStorage, study_name: str) -> None:
        self._storage = storage
        backend = _backend(storage)
        self._retrying = getattr(backend, "retrying", lambda call: call())
        engine = getattr(backend, "engine", None)
        url = str(getattr(backend, "url", ""))
        self._thread_lock = threading.Lock()
        self._key = int.from_bytes(
            hashlib.sha256(b"ciq-optuna:" + study_name.encode()).digest()[:8], "big", signed=True
        )
        self._url = url if engine is not None and engine.dialect.name == "postgresql" else None
        self._engine: sqlalchemy.Engine | None = None
        self._conn: sqlalchemy.Connection | None = None
        self._leased = True
        path = sqlite_path(url) if url else None
        self._file = path.with_name(path.name + ".lock") if path is not None else None

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold the lock for the duration of the block."""
        with self._thread_lock:
            if self._url is not None:
                with self._postgres():
                    yield
            elif self._file is not None:
                with open(self._file, "a") as handle:
                    fcntl.flock(handle, fcntl.LOCK_EX)
                    try:
                        yield
                    finally:
                        fcntl.flock(handle, fcntl.LOCK_UN)
            else:
                yield

    # PostgreSQL ---------------------------------------------------------------------------------

    def _connection(self) -> sqlalchemy.Connection:
        if self._conn is None:
            if self._engine is None:
                owner = f"ciq-optuna {socket.gethostname()}:{os.getpid()}"
                self._engine = sqlalchemy.create_engine(
                    self._url,
                    poolclass=sqlalchemy.pool.NullPool,
                    isolation_level="AUTOCOMMIT",
                    connect_args={"application_name": owner[:63]},
                )
            self._conn = self._engine.connect()
        return self._conn

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.invalidate()
                conn.close()

    def _execute(self, sql: str) -> None:
        """Run ``sql`` (``%(k)s``: the lock's key) through psycopg itself, as the storage's own
        statements run (SQLAlchemy's execution costs more than the statement); errors come as
        SQLAlchemy's, so the outage retry sees a lost connection."""
        try:
            conn = self._connection()
            driver_execute(conn.connection.dbapi_connection, conn.dialect, sql, {"k": self._key})
        except Exception:
            self._drop_connection()
            raise

    def _acquire(self) -> None:
        """Take the lock and start the session's lease in one statement (a session waiting for
        the lock is not idle; the lease counts from the end of the statement)."""
        if self._leased:
            try:
                self._execute(
                    f"SELECT set_config('idle_session_timeout', '{int(PLAN_LOCK_LEASE_S * 1000)}', false), "
                    "pg_advisory_lock(%(k)s)"
                )
                return
            except sqlalchemy.exc.ProgrammingError:  # PostgreSQL before 14
                self._leased = False
                _logger.warning("the server has no idle_session_timeout: the planning lock has no lease")
        self._execute("SELECT pg_advisory_lock(%(k)s)")

    def _release(self) -> None:
        """Release the lock and end the lease (the session then waits for the next hold): one statement."""
        if self._leased:
            self._execute("SELECT pg_advisory_unlock(%(k)s), set_config('idle_session_timeout', '0', false)")
        else:
            self._execute("SELECT pg_advisory_unlock(%(k)s)")

    @contextlib.contextmanager
    def _postgres(self) -> Iterator[None]:
        self._retrying(self._acquire)
        try:
            with self._renewing():
                yield
        finally:
            try:
                self._release()
            except Exception as exc:  # the session is gone, and the lock with it
                _logger.debug("planning lock on %s released with its session: %s", redact(self._url), exc)

    def _renewing(self) -> contextlib.AbstractContextManager[None]:
        """Renew the lease every ``PLAN_LOCK_RENEW_S`` seconds during the block: on the storage's
        heartbeat thread (``BatchedStorage.repeating``, no thread start per hold), else on a thread
        of its own."""
        if isinstance(self._storage, BatchedStorage):
            return self._storage.repeating(PLAN_LOCK_RENEW_S, self._renew_once)
        return self._renewing_thread()

    @contextlib.contextmanager
    def _renewing_thread(self) -> Iterator[None]:
        stop = threading.Event()
        keeper = threading.Thread(target=self._renew, args=(stop,), name="ciq-plan-lock-lease", daemon=True)
        keeper.start()
        try:
            yield
        finally:
            stop.set()
            keeper.join()

    def _renew(self, stop: threading.Event) -> None:
        while not stop.wait(PLAN_LOCK_RENEW_S):
            if not self._renew_once():
                return

    def _renew_once(self) -> bool:
        """Touch the lock's session (its lease); False when that failed (the lease is lost)."""
        if self._conn is None:  # lost already: a new session would not hold the lock
            return False
        try:
            self._execute("SELECT 1")
        except Exception as exc:
            _logger.warning("planning lock lease on %s lost: %s", redact(self._url), exc)
            return False
        return True


class LockedSampler(optuna.samplers.BaseSampler):
    """Delegates to ``inner``; its ``before_trial`` (where plans are made) runs under a :class:`PlanLock`,
    and the trial's lease is renewed from the start (see :func:`trial_lease`)."""

    def __init__(self, inner: optuna.samplers.BaseSampler, lock: PlanLock) -> None:
        self._inner = inner
        self._plan_lock = lock

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def infer_relative_search_space(self, study, trial):  # type: ignore[no-untyped-def]
        return self._inner.infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space):  # type: ignore[no-untyped-def]
        return self._inner.sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial, param_name, param_distribution):  # type: ignore[no-untyped-def]
        return self._inner.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        # one read of the study per hold: no other worker claims a configuration meanwhile
        with trial_lease(storage_of(study), trial_id_of(trial)), self._plan_lock.held(), read_study_once(study):
            _test_pause_in_plan_lock()
            self._inner.before_trial(study, trial)

    def after_trial(self, study, trial, state, values):  # type: ignore[no-untyped-def]
        self._inner.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self._inner.reseed_rng()


def locked_sampler(
    sampler: optuna.samplers.BaseSampler, storage: optuna.storages.BaseStorage, study_name: str
) -> LockedSampler:
    """``sampler`` planning under the study's :class:`PlanLock`, each trial under its lease."""
    return LockedSampler(sampler, PlanLock(storage, study_name))


def _test_pause_in_plan_lock() -> None:
    """Test hook: sleep ``$CIQ_OPTUNA_TEST_PAUSE_IN_PLAN_LOCK`` seconds while holding the planning
    lock, so that a test can SIGKILL a process at exactly that moment. Never set it otherwise."""
    raw = os.environ.get(TEST_PAUSE_ENV)
    if raw:
        print(f"test hook: pausing {raw} s inside the planning lock", file=sys.stderr, flush=True)
        time.sleep(float(raw))


def fail_stale(study: optuna.Study) -> None:
    """Fail the RUNNING trials whose lease expired and queue their configurations again."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


def trial_taken_away(exc: BaseException) -> bool:
    """Optuna could not record a trial because it is already finished: another worker failed it
    as stale (its heartbeats were lost) while this one was still evaluating it."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (ValueError, optuna.exceptions.UpdateFinishedTrialError)) and (
            "Cannot tell a" in str(current) or isinstance(current, optuna.exceptions.UpdateFinishedTrialError)
        ):
            return True
        current = current.__cause__ or current.__context__
    return False
