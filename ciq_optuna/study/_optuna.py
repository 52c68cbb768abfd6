"""Every use of Optuna's private storage internals, in one place (tests/test_optuna_private.py).

Optuna has no public API to write several attributes of a trial in one transaction, nor to read
the trial list of a study incrementally, so :class:`BatchedStorage` builds on
``optuna.storages._CachedStorage`` (the wrapper Optuna itself puts around every ``RDBStorage``) and on
the ``RDBStorage`` helpers that write one row without committing. An Optuna upgrade that renames
any of them fails ``tests/test_optuna_private.py`` by name; the supported range is pinned in
pyproject.toml.

What it changes, for one trial run by this process (created by ``create_new_trial``, or a queued
trial it moved to RUNNING):

- A new trial is created in one transaction of plain SQL statements (the rows and numbering of
  ``RDBStorage._create_new_trial``, without its ORM objects) together with its first heartbeat
  (on PostgreSQL in the insert's statement itself); a heartbeat asked for again within
  ``BEAT_AGAIN_S`` (the lease and Optuna's heartbeat both start right away) is not written.
- The heartbeats of all trials this process runs are renewed by one thread per storage
  (:class:`_Beater`), not a thread per trial (Optuna's) plus one for its lease: Optuna's trial
  loop gets :func:`get_heartbeat_thread`, which holds the trial on that thread.

- Parameters and user/system attributes are kept in memory and written with the final state and
  values in ONE transaction: about 35 commits per trial become one. A finished trial is therefore
  stored whole or not at all. The rows set so far are also written ``FLUSH_DELAY`` seconds after
  a trial's first parameter and at each heartbeat, so a worker killed during a longer evaluation
  leaves its configuration behind and the retry evaluates it again (a worker killed within
  ``FLUSH_DELAY`` of sampling leaves a trial without parameters, whose retry samples anew).
- System attributes named in ``write_through`` (the sampler's claim of a configuration, which other
  workers read to avoid duplicates) are written at once, as before.
- These statements run on connections this process keeps (one; on PostgreSQL a second one in
  autocommit for the reads of the study) instead of a pool checkout per statement, which
  cost more than the statement and, on PostgreSQL, a ping of the server each.
- This process reads its own running trials from memory (``get_trial``), the trial list is kept by
  number and extended with the rows that changed since the last read (no sort of the whole list),
  and the stale-trial check runs at most once per heartbeat interval instead of before every trial,
  as one plain SQL statement (``running_beats``) instead of Optuna's ORM queries.
- Whether the study holds a number of trials can be bounded without reading it
  (:meth:`BatchedStorage.unread_bound`: one ``count(*)`` of the trials created since the last read).
- Reading the study: one index look-up when only this process's trials can have changed; else
  the trials that changed (Optuna's incremental read) in ONE plain SQL statement instead of
  Optuna's seven ORM queries; Optuna's look for a WAITING trial is one index look-up among the
  trials created since the last read, not a read of the study (or none: the budget check's
  count of those trials, just made, also tells how many are WAITING).
- On PostgreSQL a trial is created by one query (the study row locked, then the trial inserted)
  and written by one statement, both in autocommit: no BEGIN and COMMIT round trips.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import functools
import itertools
import json
import logging
import os
import random
import threading
import time
import weakref
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from typing import Any

import optuna
from optuna import distributions
from optuna.storages import RDBStorage
from optuna.storages._cached_storage import _CachedStorage, _StudyInfo
from optuna.storages._heartbeat import BaseHeartbeatThread
from optuna.storages._heartbeat import get_heartbeat_thread as _optuna_heartbeat_thread
from optuna.storages._rdb import models
from optuna.storages._rdb.storage import _create_scoped_session
from optuna.study import _optimize as _optimize_module
from optuna.study._frozen import FrozenStudy
from optuna.trial import FrozenTrial, TrialState

from ciq_optuna.samplers import _optuna as _sampler_private
from ciq_optuna.samplers._optuna import (
    cached_trials,
    non_domination_rank,
    storage_of,
    study_id_of,
    trial_id_of,
)

__all__ = [
    "BatchedStorage",
    "FrozenStudy",
    "PRIVATE_NAMES",
    "cached_trials",
    "get_heartbeat_thread",
    "models",
    "non_domination_rank",
    "read_study_once",
    "running_beats",
    "scoped_session",
    "set_dashboard_pareto_front",
    "storage_of",
    "study_id_of",
    "trial_id_of",
    "trials_of_this_trial",
]

_logger = logging.getLogger("ciq_optuna.storage")

#: Seconds after a running trial's first parameter is set until its rows so far are written (one
#: transaction), so that a worker killed during a long evaluation leaves its configuration behind.
FLUSH_DELAY = 0.2

#: Seconds after a heartbeat of a trial during which another one for it is not written (far below
#: the heartbeat interval and the grace period: the lease is renewed as before).
BEAT_AGAIN_S = 1.0

#: Seconds during which the look for WAITING trials made by the budget check (``unread_bound``)
#: answers Optuna's look before the next trial, once: the next trial is asked for within
#: milliseconds, and the answer is the one a look made at the budget check's time gives.
WAITING_LOOK_S = 0.5

#: Most unfinished trial ids listed in one read of the changed trials (SQLite allows 32,766 bind
#: parameters per statement); above it, every trial from the lowest of them on is read.
MAX_LISTED_IDS = 5000

#: Every private name this module uses, checked by tests/test_optuna_private.py.
PRIVATE_NAMES = (
    "optuna.storages._cached_storage._CachedStorage",
    "optuna.storages._cached_storage._CachedStorage._backend",
    "optuna.storages._cached_storage._CachedStorage._studies",
    "optuna.storages._cached_storage._CachedStorage._lock",
    "optuna.storages._cached_storage._CachedStorage._add_trials_to_cache",
    "optuna.storages._cached_storage._CachedStorage._read_trials_from_remote_storage",
    "optuna.storages._cached_storage._CachedStorage._trial_id_to_study_id_and_number",
    "optuna.storages._cached_storage._StudyInfo",
    "optuna.storages._cached_storage._StudyInfo.unfinished_trial_ids",
    "optuna.storages._cached_storage._StudyInfo.last_finished_trial_id",
    "optuna.storages._rdb.models.StudyModel.__table__",
    "optuna.storages._rdb.models.TrialHeartbeatModel.__table__",
    "optuna.storages._rdb.models.TrialModel.__table__",
    "optuna.storages._rdb.models.TrialParamModel.__table__",
    "optuna.storages._rdb.models.TrialUserAttributeModel.__table__",
    "optuna.storages._rdb.models.TrialSystemAttributeModel.__table__",
    "optuna.storages._rdb.models.TrialValueModel.__table__",
    "optuna.storages._rdb.models.TrialValueModel.value_to_stored_repr",
    "optuna.storages._rdb.models.TrialValueModel.stored_repr_to_value",
    "optuna.storages._rdb.models.TrialValueModel.TrialValueType",
    "optuna.storages._rdb.models.TrialIntermediateValueModel.__table__",
    "optuna.storages._rdb.models.TrialIntermediateValueModel.stored_repr_to_intermediate_value",
    "optuna.storages._rdb.models.TrialIntermediateValueModel.TrialIntermediateValueType",
    "optuna.storages._heartbeat.get_heartbeat_thread",
    "optuna.storages._heartbeat.BaseHeartbeatThread",
    "optuna.study._optimize.get_heartbeat_thread",
    "optuna.storages._rdb.models.TrialModel",
    "optuna.storages._rdb.models.TrialHeartbeatModel",
    "optuna.storages._rdb.storage._create_scoped_session",
    "optuna.storages.RDBStorage.scoped_session",
    "optuna.study._frozen.FrozenStudy",
    "optuna.study._frozen.FrozenStudy._study_id",
    "optuna_dashboard._app.get_pareto_front_trials",
    *_sampler_private.PRIVATE_NAMES,
)

#: ``RDBStorage``'s session context manager (commit, or rollback and re-raise as Optuna's errors).
scoped_session = _create_scoped_session


class _Open:
    """A running trial of this process: its trial as the study will see it, and unwritten rows."""

    __slots__ = ("trial", "params", "user_attrs", "system_attrs", "write_lock")

    def __init__(self, trial: FrozenTrial) -> None:
        self.trial = trial
        #: Held while rows of this trial are written: the final write waits for a flush in
        #: flight (e.g. retrying through a database outage), so no taken row is ever dropped.
        self.write_lock = threading.Lock()
        self.params: dict[str, tuple[float, distributions.BaseDistribution]] = {}
        self.user_attrs: dict[str, Any] = {}
        self.system_attrs: dict[str, Any] = {}

    def has_rows(self) -> bool:
        return bool(self.params or self.user_attrs or self.system_attrs)

    def take(self) -> _Open:
        """The unwritten rows, moved to a new object (this one keeps none)."""
        rows = _Open(self.trial)
        rows.params, rows.user_attrs, rows.system_attrs = self.params, self.user_attrs, self.system_attrs
        self.params, self.user_attrs, self.system_attrs = {}, {}, {}
        return rows

    def give_back(self, rows: _Open) -> None:
        """Rows whose write failed: written again with the next ones (newer values win)."""
        self.params = {**rows.params, **self.params}
        self.user_attrs = {**rows.user_attrs, **self.user_attrs}
        self.system_attrs = {**rows.system_attrs, **self.system_attrs}


#: Seconds the beater thread of a storage waits with nothing to do before it ends (the next trial
#: of a ``tune`` registers within milliseconds; a storage left alone does not keep a thread).
BEATER_IDLE_S = 30.0


class _Beater:
    """One thread per storage (and process) that renews the heartbeats of every trial this process
    runs and writes a trial's first rows ``FLUSH_DELAY`` after its first parameter (and runs the
    calls of :meth:`repeat`, e.g. the renewal of the planning lock's lease while it is held).

    Optuna starts a heartbeat thread per trial (and ciq-optuna's lease a second one while the
    trial is planned, plus a timer for the first rows): three thread starts and joins per trial,
    ~0.5 ms of CPU. Here a trial is registered instead (:meth:`hold`, :meth:`release`; nested
    holds count) and this thread records its heartbeat every ``heartbeat_interval`` seconds while
    it is held, exactly as a heartbeat thread would: the first at once unless one was recorded
    less than ``BEAT_AGAIN_S`` ago. :meth:`release` of the last hold waits for a heartbeat in
    flight, as joining Optuna's thread does. The thread ends when nothing was held for
    ``BEATER_IDLE_S`` seconds or its storage is gone, and is started again when needed (also in a
    forked child, where the parent's thread does not exist).
    """

    def __init__(self, storage: BatchedStorage) -> None:
        self._storage = weakref.ref(storage)
        self._cond = threading.Condition()
        self._held: dict[int, int] = {}  # trial id -> number of holds
        self._due: dict[int, float] = {}  # trial id -> monotonic time of its next heartbeat
        self._flush_due: dict[int, float] = {}  # trial id -> monotonic time to write its rows
        self._busy: set[int] = set()  # trial ids whose heartbeat is being recorded now
        self._calls: dict[object, tuple[float, Callable[[], None]]] = {}  # key -> (interval, call)
        self._call_due: dict[object, float] = {}  # key -> monotonic time of its next call
        self._calling: set[object] = set()  # keys whose call runs now
        self._wake_at = -1.0  # when the thread wakes next (-1: no thread waiting)
        self._thread: threading.Thread | None = None
        self._pid = 0

    def hold(self, trial_id: int, last_beat: float | None) -> None:
        """Renew trial ``trial_id``'s heartbeat until the matching :meth:`release`."""
        with self._cond:
            count = self._held.get(trial_id, 0)
            self._held[trial_id] = count + 1
            if count == 0:
                soon = time.monotonic()
                if last_beat is not None and soon - last_beat < BEAT_AGAIN_S:
                    interval = self._interval()
                    soon = last_beat + interval if interval else soon
                self._due[trial_id] = soon
                self._wake(soon)

    def release(self, trial_id: int) -> None:
        """End one hold of ``trial_id`` (the last one: its heartbeats stop)."""
        with self._cond:
            count = self._held.get(trial_id, 0) - 1
            if count > 0:
                self._held[trial_id] = count
                return
            self._held.pop(trial_id, None)
            self._due.pop(trial_id, None)
            while trial_id in self._busy:
                self._cond.wait()

    def flush_later(self, trial_id: int, delay: float) -> None:
        """Write trial ``trial_id``'s rows so far in ``delay`` seconds (unless :meth:`forget` first)."""
        with self._cond:
            due = time.monotonic() + delay
            self._flush_due[trial_id] = due
            self._wake(due)

    def repeat(self, key: object, interval: float, call: Callable[[], None]) -> None:
        """Run ``call()`` every ``interval`` seconds on this thread until :meth:`cancel` of ``key``."""
        with self._cond:
            due = time.monotonic() + interval
            self._calls[key] = (interval, call)
            self._call_due[key] = due
            self._wake(due)

    def cancel(self, key: object) -> None:
        """No more calls of :meth:`repeat`'s ``key``; waits for one in flight."""
        with self._cond:
            self._calls.pop(key, None)
            self._call_due.pop(key, None)
            while key in self._calling:
                self._cond.wait()

    def forget(self, trial_id: int) -> None:
        """No delayed write of trial ``trial_id``'s rows (it was written whole)."""
        with self._cond:
            self._flush_due.pop(trial_id, None)

    def _interval(self) -> float | None:
        storage = self._storage()
        return storage.get_heartbeat_interval() if storage is not None else None

    def _wake(self, due: float) -> None:
        """Have the thread look at the schedule by ``due`` (``self._cond`` held)."""
        if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="ciq-optuna-heartbeats", daemon=True)
            self._pid = os.getpid()
            self._wake_at = -1.0
            self._thread.start()
        elif self._wake_at < 0 or due < self._wake_at:
            self._cond.notify_all()

    def _run(self) -> None:
        idle_since = time.monotonic()
        while True:
            with self._cond:
                now = time.monotonic()
                beats = [t for t, due in self._due.items() if due <= now]
                flushes = [t for t, due in self._flush_due.items() if due <= now]
                calls = [(k, self._calls[k]) for k, due in self._call_due.items() if due <= now]
                if not beats and not flushes and not calls:
                    if self._held or self._flush_due or self._calls:
                        idle_since = now
                    elif now - idle_since > BEATER_IDLE_S or self._storage() is None:
                        self._thread, self._wake_at = None, -1.0
                        return
                    dues = [*self._due.values(), *self._flush_due.values(), *self._call_due.values()]
                    nxt = min(dues, default=now + BEATER_IDLE_S)
                    self._wake_at = nxt
                    self._cond.wait(min(max(nxt - now, 0.0) + 0.001, BEATER_IDLE_S))
                    self._wake_at = -1.0
                    continue
                interval = self._interval() or 0.0
                for t in beats:
                    self._due[t] = now + interval if interval else float("inf")
                for t in flushes:
                    del self._flush_due[t]
                for k, (every, _) in calls:
                    self._call_due[k] = now + every
                self._busy.update(beats)
                self._calling.update(k for k, _ in calls)
            try:
                for k, (_, call) in calls:
                    try:
                        call()
                    except Exception as exc:  # the call's own failure: it runs again at its next time
                        _logger.warning("repeated call %r failed: %s", k, exc)
                storage = self._storage()
                if storage is not None:
                    for t in flushes:
                        storage._flush_quietly(t)
                    for t in beats:
                        try:
                            storage.record_heartbeat(t)
                        except Exception as exc:  # a heartbeat thread would end here; try again next time
                            _logger.warning("heartbeat of trial id %d not recorded: %s", t, exc)
                del storage
            finally:
                with self._cond:
                    self._busy.difference_update(beats)
                    self._calling.difference_update(k for k, _ in calls)
                    self._cond.notify_all()


class _Lease(BaseHeartbeatThread):
    """Optuna's heartbeat-thread interface for a trial of a :class:`BatchedStorage`: ``start`` holds
    the trial on the storage's beater thread (:class:`_Beater`), ``join`` releases it."""

    def __init__(self, storage: BatchedStorage, trial_id: int) -> None:
        self._storage = storage
        self._trial_id = trial_id

    def start(self) -> None:
        self._storage.hold_heartbeat(self._trial_id)

    def join(self) -> None:
        self._storage.release_heartbeat(self._trial_id)


class BatchedStorage(_CachedStorage):
    """An RDB storage that writes each trial of this process in one transaction when it finishes.

    Use it wherever an ``RDBStorage`` is used (``optuna.create_study(storage=...)``); several
    processes may share a study as before (see the module docstring for what is written when).
    """

    def __init__(self, backend: RDBStorage, *, write_through: Iterable[str] = ()) -> None:
        super().__init__(backend)
        self.write_through = frozenset(write_through)
        self._open: dict[int, _Open] = {}
        self._by_number: dict[int, list[FrozenTrial]] = {}
        self._holes: dict[int, int] = {}  # numbers not read yet per study (no O(n) scan for them)
        self._last_stale_check: dict[int, float] = {}
        self._beaten: dict[int, float] = {}  # monotonic time of the last heartbeat of an open trial
        self._unfinished_numbers: dict[int, set[int]] = {}  # per study: numbers of unfinished trials
        self._seen: dict[int, int] = {}  # per study: the highest trial id committed at the last read
        # per study: the database's version (_Connections.version) taken just before the last read
        self._verified: dict[int, Any] = {}
        self._read_once: dict[int, tuple[int, bool]] = {}  # per study: (thread, read yet) in read_once
        # per study: the last look for WAITING trials made by unread_bound: (after, when, none)
        self._waiting_look: dict[int, tuple[int, float, bool]] = {}
        self._conns = _Connections(backend)
        self._beater = _Beater(self)

    def __getstate__(self) -> dict[Any, Any]:
        state = super().__getstate__()
        state["_conns"] = None  # connections are not pickled: the copy opens its own
        state["_beater"] = None  # nor the thread: the copy starts its own
        state["_verified"] = {}  # versions of this process's connection mean nothing to the copy
        return state

    def __setstate__(self, state: dict[Any, Any]) -> None:
        super().__setstate__(state)
        self._conns = _Connections(self._backend)
        self._beater = _Beater(self)

    def _db(self, call: Any) -> Any:
        """``call()`` through the backend's retry during a database outage, when it has one."""
        retrying = getattr(self._backend, "retrying", None)
        return retrying(call) if retrying is not None else call()

    @property
    def backend(self) -> RDBStorage:
        """The wrapped ``RDBStorage``."""
        return self._backend

    def __getattr__(self, name: str) -> Any:
        """The wrapped storage's public attributes (``url``, ``engine``, ``grace_period``...)."""
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._backend, name)

    # ---------------------------------------------------------------- trials of this process

    def create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> int:
        if template_trial is None:  # a trial this process runs now: created with its first heartbeat
            beat = self.get_heartbeat_interval() is not None
            trial = _with_retries(lambda: self._db(lambda: create_running_trial(self._conns, study_id, beat)))
            with self._lock:
                if study_id not in self._studies:
                    self._studies[study_id] = _StudyInfo()
                self._add_trials_to_cache(study_id, [trial])
                self._open[trial._trial_id] = _Open(_copy(trial))
                if beat:
                    self._beaten[trial._trial_id] = time.monotonic()
            return trial._trial_id
        trial_id = super().create_new_trial(study_id, template_trial)
        with self._lock:
            study_id_, number = self._trial_id_to_study_id_and_number[trial_id]
            trial = self._studies[study_id_].trials[number]
            if trial.state == TrialState.RUNNING:
                self._open[trial_id] = _Open(_copy(trial))
        return trial_id

    def set_trial_param(
        self,
        trial_id: int,
        param_name: str,
        param_value_internal: float,
        distribution: distributions.BaseDistribution,
    ) -> None:
        with self._lock:
            pending = self._open.get(trial_id)
            if pending is not None:
                study_id, _ = self._trial_id_to_study_id_and_number[trial_id]
                known = self._studies[study_id].param_distribution.get(param_name)
                if known is not None:
                    distributions.check_distribution_compatibility(known, distribution)
                first = not pending.trial.params
                pending.params[param_name] = (param_value_internal, distribution)
                pending.trial.params[param_name] = distribution.to_external_repr(param_value_internal)
                pending.trial.distributions[param_name] = distribution
                if first:
                    self._beater.flush_later(trial_id, FLUSH_DELAY)
                return
        super().set_trial_param(trial_id, param_name, param_value_internal, distribution)

    def set_trial_user_attr(self, trial_id: int, key: str, value: Any) -> None:
        with self._lock:
            pending = self._open.get(trial_id)
            if pending is not None:  # one copy for both: neither is handed out (get_trial copies)
                pending.user_attrs[key] = pending.trial.user_attrs[key] = copy.deepcopy(value)
                return
        super().set_trial_user_attr(trial_id, key, value)

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        with self._lock:
            pending = self._open.get(trial_id)
            if pending is not None:
                pending.trial.system_attrs[key] = copy.deepcopy(value)
                if key not in self.write_through:
                    pending.system_attrs[key] = pending.trial.system_attrs[key]
                    return
        if pending is not None:  # a running trial of this process: no need to check its state first
            self._db(lambda: write_attr(self._conns, trial_id, key, value))
            return
        super().set_trial_system_attr(trial_id, key, value)

    def set_trial_state_values(
        self, trial_id: int, state: TrialState, values: Sequence[float] | None = None
    ) -> bool:
        with self._lock:
            pending = self._open.get(trial_id)
        if pending is None:
            changed = super().set_trial_state_values(trial_id, state, values)
            if changed and state == TrialState.RUNNING:  # a queued trial this process now runs
                trial = self._backend.get_trial(trial_id)
                with self._lock:
                    self._open[trial_id] = _Open(trial)
            return changed
        if not state.is_finished():
            return super().set_trial_state_values(trial_id, state, values)
        with pending.write_lock:
            return self._finish(pending, trial_id, state, values)

    def _finish(
        self, pending: _Open, trial_id: int, state: TrialState, values: Sequence[float] | None
    ) -> bool:
        """Write ``pending``'s rows with the final state and values (``pending.write_lock`` held)."""
        now = datetime.datetime.now()
        with self._lock:
            study_id, _ = self._trial_id_to_study_id_and_number[trial_id]
            study = self._studies[study_id]
            rows = pending.take()
            cached = {name: study.param_distribution.get(name) for name in rows.params}
        try:
            written = self._db(lambda: write_trial(self._conns, trial_id, rows, cached, state, values, now))
        except optuna.exceptions.UpdateFinishedTrialError:
            with self._lock:  # finished by another process (stale): read it back from the storage
                self._open.pop(trial_id, None)
                self._beaten.pop(trial_id, None)
            raise
        except Exception:
            with self._lock:  # e.g. the database is down: the rows are written by a later call
                pending.give_back(rows)
            raise
        self._beater.forget(trial_id)
        with self._lock:
            self._open.pop(trial_id, None)
            self._beaten.pop(trial_id, None)
            if not written:
                return False
            for name, (_, dist) in rows.params.items():
                study.param_distribution.setdefault(name, dist)
            done = pending.trial
            done.state = state
            done.values = list(values) if values is not None else None
            done.datetime_complete = now
            self._add_trials_to_cache(study_id, [done])
            study.unfinished_trial_ids.discard(trial_id)  # known whole: no need to read it back
        return True

    def record_heartbeat(self, trial_id: int) -> None:
        """Write the trial's rows so far, then the heartbeat (the beater thread calls this every
        ``heartbeat_interval`` seconds while the trial is held): a trial that runs longer than one interval has its
        parameters stored, so the retry of a killed worker's trial evaluates the same configuration.

        A heartbeat asked for within ``BEAT_AGAIN_S`` of the previous one of this process is not
        written: each trial is held twice (the lease while it is planned, Optuna's heartbeat while
        it is evaluated) right after its creation, which already recorded one.
        """
        now = time.monotonic()
        with self._lock:
            last = self._beaten.get(trial_id)
            if last is not None and now - last < BEAT_AGAIN_S:
                return
        self.flush_trial(trial_id)
        super().record_heartbeat(trial_id)
        with self._lock:
            if trial_id in self._open:
                self._beaten[trial_id] = now

    def hold_heartbeat(self, trial_id: int) -> None:
        """Renew trial ``trial_id``'s heartbeat from this process until :meth:`release_heartbeat`
        (one thread for all trials: see :class:`_Beater`)."""
        with self._lock:
            last = self._beaten.get(trial_id)
        self._beater.hold(trial_id, last)

    def release_heartbeat(self, trial_id: int) -> None:
        """End one :meth:`hold_heartbeat` of trial ``trial_id``."""
        self._beater.release(trial_id)

    @contextlib.contextmanager
    def repeating(self, interval: float, call: Callable[[], None]) -> Iterator[None]:
        """Run ``call()`` every ``interval`` seconds on the heartbeat thread (:class:`_Beater`, no
        thread of its own) until the block ends; the end waits for a call in flight. ``call``
        handles its own errors."""
        key = object()
        self._beater.repeat(key, interval, call)
        try:
            yield
        finally:
            self._beater.cancel(key)

    def _flush_quietly(self, trial_id: int) -> None:
        """:meth:`flush_trial` from the beater thread: a failure is logged (the rows stay pending)."""
        try:
            self.flush_trial(trial_id)
        except Exception as exc:  # the final write or the next heartbeat writes them
            _logger.debug("rows of trial id %d not written yet: %s", trial_id, exc)

    def flush_trial(self, trial_id: int) -> None:
        """Write the unwritten rows (parameters, attributes) of this process's running trial now.

        Called ``FLUSH_DELAY`` seconds after the trial's first parameter and at every heartbeat:
        a trial whose worker is killed after that is retried with the same configuration.
        """
        with self._lock:
            pending = self._open.get(trial_id)
        if pending is None:
            return
        with pending.write_lock:
            with self._lock:
                if self._open.get(trial_id) is not pending or not pending.has_rows():
                    return  # finished meanwhile (its final write took every row), or nothing new
                rows = pending.take()
                study_id, _ = self._trial_id_to_study_id_and_number[trial_id]
                study = self._studies[study_id]
                cached = {name: study.param_distribution.get(name) for name in rows.params}
            try:
                self._db(lambda: write_trial(self._conns, trial_id, rows, cached, None, None, None))
            except Exception:
                with self._lock:
                    pending.give_back(rows)
                raise
            with self._lock:
                for name, (_, dist) in rows.params.items():
                    study.param_distribution.setdefault(name, dist)

    def get_trial(self, trial_id: int) -> FrozenTrial:
        with self._lock:
            pending = self._open.get(trial_id)
            if pending is not None:
                return _copy(pending.trial)
        return super().get_trial(trial_id)

    # ---------------------------------------------------------------- reading the study

    def _add_trials_to_cache(self, study_id: int, trials: list[FrozenTrial]) -> None:
        super()._add_trials_to_cache(study_id, trials)
        listed = self._by_number.setdefault(study_id, [])
        holes = self._holes.get(study_id, 0)
        unfinished = self._unfinished_numbers.setdefault(study_id, set())
        for trial in trials:
            if trial.state.is_finished():
                unfinished.discard(trial.number)
            else:
                unfinished.add(trial.number)
            if len(listed) <= trial.number:
                holes += trial.number - len(listed)
                listed.extend([None] * (trial.number - len(listed)))  # type: ignore[list-item]
                listed.append(trial)
            else:
                holes -= listed[trial.number] is None
                listed[trial.number] = trial
        self._holes[study_id] = holes

    def _read_trials_from_remote_storage(self, study_id: int) -> None:
        """Read the trials that changed, unless one light query shows that nothing did.

        When every unfinished trial known is one this process runs, the study changed elsewhere
        only if it has a new trial: ``max(trial_id)`` of the study tells (one index look-up
        instead of the full read of the changed trials, i.e. O(1) for a single process). Trial ids
        of a study grow in commit order: every trial is created with the study's row locked
        (``SELECT ... FOR UPDATE``; SQLite serialises all writes), so a trial committed later
        never has a lower id than one already seen.

        Otherwise the trials that changed (Optuna's incremental read: the unfinished ones known
        and those after the last finished one) are read in one SQL statement
        (:func:`read_trials`) instead of Optuna's seven ORM queries, which cost a worker sharing
        its study several ms of CPU per read.
        """
        version = self._conns.version()
        with self._lock:
            if version is not None and self._verified.get(study_id) == version and not self._holes.get(study_id):
                return  # no other connection committed since the last read: the cache is the study
            study = self._studies.get(study_id)
            listed = self._by_number.get(study_id)
            quiet = (
                study is not None
                and bool(listed)
                and not self._holes.get(study_id)
                and study.unfinished_trial_ids <= self._open.keys()
            )
            if quiet:
                known = listed[-1]._trial_id
        if quiet and self._db(lambda: _last_trial_id(self._conns, study_id)) == known:
            with self._lock:
                self._seen[study_id] = known
                self._verified[study_id] = version
            return
        with self._lock:  # Optuna's incremental read, through one plain SQL statement (read_trials)
            study = self._studies.setdefault(study_id, _StudyInfo())
            after = study.last_finished_trial_id
            trials = self._db(lambda: read_trials(self._conns, study_id, study.unfinished_trial_ids, after))
            # every trial committed so far has an id up to this (all those above ``after`` were read)
            self._seen[study_id] = max([after, *(t._trial_id for t in trials)])
            self._verified[study_id] = version
            if not trials:
                return
            self._add_trials_to_cache(study_id, trials)
            for trial in trials:
                if not trial.state.is_finished():
                    study.unfinished_trial_ids.add(trial._trial_id)
                    continue
                study.last_finished_trial_id = max(study.last_finished_trial_id, trial._trial_id)
                study.unfinished_trial_ids.discard(trial._trial_id)

    def get_all_trials(
        self,
        study_id: int,
        deepcopy: bool = True,
        states: Container[TrialState] | None = None,
    ) -> list[FrozenTrial]:
        if _only_waiting(states) and self._no_waiting_trial(study_id):
            return []  # Optuna's look for a WAITING trial to run: none, and no read of the study
        self._read_unless_read_once(study_id)
        return self._as_read(study_id, deepcopy, states)

    def trials_as_read(self, study_id: int) -> list[FrozenTrial]:
        """The study's trials as its last read left them (this process's running trials as they are
        now), without reading it: ``get_all_trials(study_id, deepcopy=False)`` but for the read."""
        return self._as_read(study_id, False, None)

    def _as_read(self, study_id: int, deepcopy: bool, states: Container[TrialState] | None) -> list[FrozenTrial]:
        with self._lock:
            listed = self._by_number.get(study_id, [])
            if states is not None and _only_unfinished(states):  # e.g. Optuna's look for WAITING
                trials = [listed[n] for n in sorted(self._unfinished_numbers.get(study_id, ()))]
                own = {p.trial.number: p.trial for p in self._open.values()}
                for i, t in enumerate(trials):
                    mine = own.get(t.number)
                    if mine is not None and mine._trial_id == t._trial_id and not t.state.is_finished():
                        trials[i] = mine
            else:
                trials = list(listed)
                for pending in self._open.values():
                    n = pending.trial.number
                    if (
                        n < len(trials)
                        and trials[n] is not None
                        and trials[n]._trial_id == pending.trial._trial_id
                    ):
                        if not trials[n].state.is_finished():
                            trials[n] = pending.trial
                if self._holes.get(study_id):  # numbers not read yet (another process is creating them)
                    trials = [t for t in trials if t is not None]
            if states is not None:
                trials = [t for t in trials if t.state in states]
            return copy.deepcopy(trials) if deepcopy else trials

    @contextlib.contextmanager
    def read_once(self, study_id: int) -> Iterator[None]:
        """Within the block, the calling thread reads the study from the database once, at its
        first look; later looks in the block see the trials as that read left them.

        For the planning lock's hold (:class:`ciq_optuna.study.leases.LockedSampler`): a sampler
        reads the study when it starts planning, then again to see the configurations other
        workers claimed; while the lock is held no other worker claims one (claims are written
        under the lock), so the second read would only fetch the others' running trials again.
        """
        me = threading.get_ident()
        with self._lock:
            outer = self._read_once.get(study_id)
            if outer is None:
                self._read_once[study_id] = (me, False)
        try:
            yield
        finally:
            if outer is None:
                with self._lock:
                    self._read_once.pop(study_id, None)

    def _read_unless_read_once(self, study_id: int) -> None:
        """:meth:`_read_trials_from_remote_storage`, unless this thread already read in :meth:`read_once`."""
        with self._lock:
            once = self._read_once.get(study_id)
            mine = once is not None and once[0] == threading.get_ident()
            if mine and once[1]:
                return
        self._read_trials_from_remote_storage(study_id)
        if mine:
            with self._lock:
                self._read_once[study_id] = (once[0], True)

    def _no_waiting_trial(self, study_id: int) -> bool:
        """Whether the study surely has no WAITING trial, told by one index look-up.

        A trial is WAITING only from its creation on (enqueued, or a stale trial's retry), and a
        trial committed after a read of the study has a higher id than every trial that read saw
        (see :meth:`_read_trials_from_remote_storage`). So when no trial this process knows is
        WAITING, a WAITING trial can only be among those with an id above the last read's:
        looking there costs a worker sharing the study one small query instead of a read of
        every trial that changed (the other workers' running and new trials). That look may be
        the one :meth:`unread_bound` has just made (once, within ``WAITING_LOOK_S``): the answer is
        then as of that moment, as if the look had been made then; a WAITING trial created after it
        is found by the next look.
        """
        version = self._conns.version()
        with self._lock:
            seen = self._seen.get(study_id)
            listed = self._by_number.get(study_id, [])
            if seen is None or any(
                listed[n] is not None and listed[n].state == TrialState.WAITING
                for n in self._unfinished_numbers.get(study_id, ())
            ):
                return False
            if version is not None and self._verified.get(study_id) == version:
                return True  # nothing committed by another connection since the last read
            look = self._waiting_look.pop(study_id, None)
            if look is not None and look[0] == seen and time.monotonic() - look[1] < WAITING_LOOK_S:
                return look[2]  # the budget check just looked (unread_bound)
        return self._db(lambda: self._conns.read(self._conns.sql.waiting_after, {"sid": study_id, "after": seen})) is None

    def unread_bound(self, study_id: int) -> int | None:
        """At most how many trials of the study a read now would show changed (each could have
        finished since the last read): the other processes' trials unfinished at that read, plus
        the trials created since (one ``count(*)`` over the new trial ids, none where SQLite shows
        no other connection committed). None when the study was not read yet or has numbers not
        read. This process's own trials are known as they are (:meth:`trials_as_read`).

        The same statement counts the WAITING ones among the new trials: that answers Optuna's
        look for a WAITING trial when it comes within ``WAITING_LOOK_S`` (:meth:`_no_waiting_trial`;
        the budget check after a trial, then the next trial's ask: one query, not two)."""
        version = self._conns.version()
        with self._lock:
            seen = self._seen.get(study_id)
            study = self._studies.get(study_id)
            if seen is None or study is None or self._holes.get(study_id):
                return None
            if version is not None and self._verified.get(study_id) == version:
                return 0
            others = len(study.unfinished_trial_ids - self._open.keys())
        new, waiting = self._db(lambda: self._conns.row(self._conns.sql.count_after, {"sid": study_id, "after": seen}))
        with self._lock:
            self._waiting_look[study_id] = (seen, time.monotonic(), not waiting)
        return others + int(new or 0)

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        """The backend's stale trials, at most once per heartbeat interval; with a backend that
        judges leases from rows (``stale_among``), its rows come from one plain SQL statement
        (``running_beats``) instead of Optuna's ORM queries."""
        interval = self.get_heartbeat_interval() or 0
        now = time.monotonic()
        if now - self._last_stale_check.get(study_id, -1e9) < interval:
            return []
        self._last_stale_check[study_id] = now
        among = getattr(self._backend, "stale_among", None)
        if among is None:
            return super()._get_stale_trial_ids(study_id)
        sql = self._conns.sql
        return among(self._db(lambda: self._conns.rows(sql.running_beats, {"sid": study_id})))


class _Sql:
    """The statements of this module, built once per database dialect: building a SQLAlchemy
    statement costs about as much as running it, and each trial runs about ten."""

    def __init__(self, dialect: str) -> None:
        import sqlalchemy as sa
        from optuna.storages._rdb import models

        studies, trials = models.StudyModel.__table__, models.TrialModel.__table__
        params = models.TrialParamModel.__table__
        sid, tid = sa.bindparam("sid"), sa.bindparam("tid")
        self.last_id = sa.select(sa.func.max(trials.c.trial_id)).where(trials.c.study_id == sid)
        self.lock_study = sa.select(studies.c.study_id).where(studies.c.study_id == sid).with_for_update()
        earlier = trials.c.study_id == sid
        previous = sa.select(trials.c.number).where(earlier).order_by(trials.c.trial_id.desc()).limit(1)
        self.new_trial = (  # numbered as RDBStorage numbers it: the count of the study's earlier trials
            sa.insert(trials)
            .values(
                number=sa.func.coalesce(
                    previous.scalar_subquery() + 1,
                    sa.select(sa.func.count(trials.c.trial_id)).where(earlier).scalar_subquery(),
                ),
                study_id=sid,
                state=sa.bindparam("state", type_=trials.c.state.type),
                datetime_start=sa.bindparam("start", type_=trials.c.datetime_start.type),
            )
            .returning(trials.c.trial_id, trials.c.number)
        )
        beats = models.TrialHeartbeatModel.__table__
        self.heartbeat = sa.insert(beats).values(heartbeat=sa.func.current_timestamp())
        #: PostgreSQL: the trial and its first heartbeat in one statement (a data-modifying CTE).
        self.new_trial_beat = None
        if dialect == "postgresql":
            made = self.new_trial.cte("made")
            beat = sa.insert(beats).from_select(
                ["trial_id", "heartbeat"], sa.select(made.c.trial_id, sa.func.current_timestamp())
            )
            self.new_trial_beat = sa.select(made.c.trial_id, made.c.number).add_cte(beat.cte("beat"))
        self.finish = (
            sa.update(trials)
            .where(trials.c.trial_id == tid, trials.c.state == TrialState.RUNNING)
            .values(
                state=sa.bindparam("st", type_=trials.c.state.type),
                datetime_complete=sa.bindparam("done", type_=trials.c.datetime_complete.type),
            )
        )
        self.state_of = sa.select(trials.c.state).where(trials.c.trial_id == tid)
        self.params = sa.insert(params)
        self.values = sa.insert(models.TrialValueModel.__table__)
        study_of_trial = sa.select(trials.c.study_id).where(trials.c.trial_id == tid).scalar_subquery()
        self.distribution_of = (
            sa.select(params.c.distribution_json)
            .join(trials, trials.c.trial_id == params.c.trial_id)
            .where(trials.c.study_id == study_of_trial, params.c.param_name == sa.bindparam("name"))
            .limit(1)
        )
        self.attrs = {
            model: _upsert(dialect, model.__table__)
            for model in (models.TrialUserAttributeModel, models.TrialSystemAttributeModel)
        }
        self.waiting_after = (
            sa.select(trials.c.trial_id)
            .where(trials.c.study_id == sid, trials.c.trial_id > sa.bindparam("after"))
            .where(trials.c.state == TrialState.WAITING)
            .limit(1)
        )
        self.study_exists = sa.select(studies.c.study_id).where(studies.c.study_id == sid)
        self.count_after = (  # the trials created after a read, and how many of them are WAITING
            sa.select(
                sa.func.count(), sa.func.coalesce(sa.func.sum(sa.case((trials.c.state == TrialState.WAITING, 1), else_=0)), 0)
            )
            .select_from(trials)
            .where(trials.c.study_id == sid, trials.c.trial_id > sa.bindparam("after"))
        )
        self.running_beats = (  # each RUNNING trial, its last heartbeat (or none) and the database's time
            sa.select(trials.c.trial_id, beats.c.heartbeat, sa.func.now())
            .select_from(trials.outerjoin(beats, beats.c.trial_id == trials.c.trial_id))
            .where(trials.c.study_id == sid, trials.c.state == TrialState.RUNNING)
        )
        self.changed = _changed_trials(sa, models, trials, sid, dialect)
        self._direct: dict[tuple[int, tuple[str, ...], bool], _Direct] = {}
        self._dialect_name = dialect

    def direct(self, statement: Any, dialect: Any, keys: tuple[str, ...], many: bool) -> _Direct | None:
        """``statement`` compiled as SQLAlchemy compiles it for parameters ``keys`` (``many``: for
        several rows), to run through the driver: PostgreSQL only (None elsewhere)."""
        if self._dialect_name != "postgresql":
            return None
        cache = (id(statement), keys, many)
        found = self._direct.get(cache)
        if found is None:
            found = self._direct[cache] = _Direct(statement, dialect, keys, many)
        return found

    @staticmethod
    @functools.cache
    def trial_write(finish: bool) -> str:
        """PostgreSQL: a trial's rows as ONE statement (data-modifying CTEs; autocommit makes it
        one transaction): the trial's update to its final state (``finish``; else a look that it is
        still RUNNING), then its parameters, user attributes, system attributes and values, each
        inserted only when that trial row was found RUNNING. It returns how many trial rows that
        was (0 or 1). One BEGIN, five statements and one COMMIT (seven round trips) become one.

        The rows of each table come as one JSON text (``json_to_recordset``), so that the text is
        the same for any number of rows: built once and prepared by psycopg after a few runs (a
        VALUES list per row count was a new statement for each count of a trial's parameters
        and attributes), and each table's rows cost one ``json.dumps`` on the client (psycopg
        dumps arrays element by element, in Python). Parameters: ``tid``, ``st`` (a state's name),
        ``done``, and ``p`` (parameters), ``u`` and ``s`` (user and system attributes), ``v``
        (values): each a JSON list of rows, objects keyed by column."""
        trials = models.TrialModel.__table__
        running = f"trial_id = %(tid)s AND state = '{TrialState.RUNNING.name}'"
        if finish:
            done = f"UPDATE {trials.name} SET state = %(st)s, datetime_complete = %(done)s WHERE {running} RETURNING trial_id"
        else:
            done = f"SELECT trial_id FROM {trials.name} WHERE {running}"
        value_type = models.TrialValueModel.__table__.c.value_type.type.name
        parts = [f"done AS ({done})"]
        inserts = (
            (models.TrialParamModel, "p", (("param_name", "varchar"), ("param_value", "float8"), ("distribution_json", "text"))),
            (models.TrialUserAttributeModel, "u", (("key", "varchar"), ("value_json", "text"))),
            (models.TrialSystemAttributeModel, "s", (("key", "varchar"), ("value_json", "text"))),
            (models.TrialValueModel, "v", (("objective", "int"), ("value", "float8"), ("value_type", "text"))),
        )
        for model, name, columns in inserts:
            names = ", ".join(column for column, _ in columns)
            typed = ", ".join(f"{column} {kind}" for column, kind in columns)
            chosen = ", ".join(f"r.{c}::{value_type}" if c == "value_type" else f"r.{c}" for c, _ in columns)
            conflict = " ON CONFLICT (trial_id, key) DO UPDATE SET value_json = excluded.value_json" if name in "us" else ""
            parts.append(
                f"w_{name} AS (INSERT INTO {model.__table__.name} (trial_id, {names}) "
                f"SELECT done.trial_id, {chosen} FROM done, json_to_recordset(%({name})s::json) AS r ({typed}){conflict})"
            )
        return "WITH " + ",\n".join(parts) + "\nSELECT count(*) FROM done"

    def direct_rows(self, insert: Any, dialect: Any, keys: tuple[str, ...], rows: int) -> _Direct:
        """``insert`` for ``rows`` rows of parameters ``keys`` as ONE statement (a VALUES list,
        parameters named ``<key>_r<row>``), run through the driver: psycopg's ``executemany``
        costs about twice as much client CPU for the ten-odd rows of a trial. PostgreSQL only."""
        import sqlalchemy as sa

        cache = (id(insert), keys, ("rows", rows))
        found = self._direct.get(cache)
        if found is None:
            table = insert.table
            listed = [{k: sa.bindparam(f"{k}_r{i}", type_=table.c[k].type) for k in keys} for i in range(rows)]
            found = self._direct[cache] = _Direct(insert.values(listed), dialect, (), False)
        return found


class _Direct:
    """A statement of :class:`_Sql` compiled once and run through psycopg itself, without
    SQLAlchemy's execution (its contexts and result objects cost ~0.15 ms of CPU per statement,
    ~2/3 of a small statement's client cost): the same SQL text and parameters SQLAlchemy would
    send, each bind parameter through its type's bind processor (e.g. a TrialState as its name);
    results as the driver returns them (a TrialState column: its name). Errors are raised as
    SQLAlchemy's (``IntegrityError``, ``OperationalError`` with ``connection_invalidated``...),
    as ``Connection.execute`` raises them, so the outage retry and the held connections' release
    work as before."""

    def __init__(self, statement: Any, dialect: Any, keys: tuple[str, ...], many: bool) -> None:
        compiled = statement.compile(dialect=dialect, column_keys=list(keys), for_executemany=many)
        self.sql = str(compiled)
        self.dialect = dialect
        self.fixed: dict[str, Any] = {}
        self.processors: dict[str, Any] = {}
        for bind, name in compiled.bind_names.items():
            process = bind.type.bind_processor(dialect)
            if process is not None:
                self.processors[name] = process
            if not bind.required and bind.value is not None:
                self.fixed[name] = bind.value

    def bind(self, given: dict[str, Any]) -> dict[str, Any]:
        """The parameters as the driver gets them: fixed values added, each through its type's processor."""
        out = {**self.fixed, **given}
        for name, process in self.processors.items():
            if name in out:
                out[name] = process(out[name])
        return out

    def run(self, conn: Any, params: dict[str, Any] | list[dict[str, Any]]) -> _Result:
        """Execute on ``conn``'s driver connection (``params``: one row, or a list of rows)."""
        if isinstance(params, list) and len(params) == 1:
            params = params[0]
        if isinstance(params, list):
            return driver_execute(conn.connection.dbapi_connection, self.dialect, self.sql, [self.bind(p) for p in params])
        return driver_execute(conn.connection.dbapi_connection, self.dialect, self.sql, self.bind(params))


def driver_execute(raw: Any, dialect: Any, sql: str, params: dict[str, Any] | list[dict[str, Any]]) -> _Result:
    """Run ``sql`` (psycopg's ``%(name)s`` placeholders) on psycopg connection ``raw`` (a list of
    ``params``: once per row), errors raised as SQLAlchemy raises them (``OperationalError`` with
    ``connection_invalidated``...), so that the outage retry sees a lost connection as before."""

    def run(cursor: Any) -> _Result:
        if isinstance(params, list):
            cursor.executemany(sql, params)
            return _Result([], cursor.rowcount)
        cursor.execute(sql, params)
        return _Result(cursor.fetchall() if cursor.description is not None else [], cursor.rowcount)

    return _on_cursor(raw, dialect, sql, params, run, client=False)


def driver_script(raw: Any, dialect: Any, sql: str, params: dict[str, Any]) -> list[_Result]:
    """Run ``sql``, several statements separated by ``;``, as ONE query on psycopg connection
    ``raw``: the parameters bound by psycopg on the client (``ClientCursor``), the statements run
    by the server one after the other in one transaction (each with a snapshot of its own, as in
    a transaction of separate statements) in one round trip. The result of each statement;
    errors as :func:`driver_execute` raises them."""

    def run(cursor: Any) -> list[_Result]:
        cursor.execute(sql, params)
        results = []
        while True:
            results.append(_Result(cursor.fetchall() if cursor.description is not None else [], cursor.rowcount))
            if not cursor.nextset():
                return results

    return _on_cursor(raw, dialect, sql, params, run, client=True)


def _on_cursor(raw: Any, dialect: Any, sql: str, params: Any, run: Callable[[Any], Any], client: bool) -> Any:
    """``run(cursor)`` on a new cursor of ``raw`` (``client``: a ``ClientCursor``), closed after;
    psycopg's errors raised as SQLAlchemy's (:func:`driver_execute`)."""
    import psycopg
    import sqlalchemy.exc

    cursor = psycopg.ClientCursor(raw) if client else raw.cursor()
    try:
        return run(cursor)
    except psycopg.Error as exc:
        raise sqlalchemy.exc.DBAPIError.instance(
            sql,
            params,
            exc,
            psycopg.Error,
            connection_invalidated=dialect.is_disconnect(exc, raw, cursor),
            dialect=dialect,
        ) from exc
    finally:
        cursor.close()


class _Result:
    """The rows and row count of a :class:`_Direct` statement, read as from a SQLAlchemy result."""

    __slots__ = ("rows", "rowcount")

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self.rows, self.rowcount = rows, rowcount

    def all(self) -> list[Any]:
        return self.rows

    def scalar(self) -> Any:
        return self.rows[0][0] if self.rows else None

    def one(self) -> Any:
        if len(self.rows) != 1:
            raise AssertionError(f"one row expected, {len(self.rows)} returned")
        return self.rows[0]


def _execute(conns: _Connections, conn: Any, statement: Any, params: dict[str, Any] | list[dict[str, Any]]) -> Any:
    """``conn.execute(statement, params)``; on PostgreSQL through the driver (:class:`_Direct`)."""
    first = params[0] if isinstance(params, list) else params
    many = isinstance(params, list) and len(params) > 1
    if many and conn.dialect.name == "postgresql" and getattr(statement, "is_insert", False):
        keys = tuple(sorted(first))
        rows = conns.sql.direct_rows(statement, conn.dialect, keys, len(params))
        return rows.run(conn, {f"{k}_r{i}": row[k] for i, row in enumerate(params) for k in keys})
    direct = conns.sql.direct(statement, conn.dialect, tuple(sorted(first)), many)
    if direct is None:
        return conn.execute(statement, params)
    return direct.run(conn, params)


def _changed_trials(sa: Any, models: Any, trials: Any, sid: Any, dialect: str) -> Any:
    """One statement for the rows of the changed trials of a study (those with an id above
    ``:gt`` and those in ``:inc``): the trial rows and the rows of its five child tables as one
    UNION ALL, ordered by trial, kind and row id (one round trip, one snapshot).

    Columns: kind (0 trial, 1 parameter, 2 value, 3 user attribute, 4 system attribute,
    5 intermediate value), trial_id, an integer (number, param_id, objective, attribute id, step),
    a text (state, parameter name, value type, attribute key, intermediate value type), a float
    (parameter value, value, intermediate value), a second text (distribution or attribute JSON),
    and the trial's start and completion times.
    """
    if dialect == "postgresql":  # one array parameter: the statement's text stays the same
        from sqlalchemy.dialects.postgresql import ARRAY

        listed = trials.c.trial_id == sa.func.any(sa.bindparam("inc", type_=ARRAY(sa.Integer)))
    else:
        listed = trials.c.trial_id.in_(sa.bindparam("inc", expanding=True))
    changed = sa.or_(trials.c.trial_id > sa.bindparam("gt"), listed)
    mine = sa.and_(trials.c.study_id == sid, changed)
    text, num, when = sa.String(), sa.Float(precision=53), sa.DateTime()

    def none(kind: Any) -> Any:
        return sa.cast(sa.null(), kind)

    parts = [
        sa.select(
            sa.literal(0).label("kind"),
            trials.c.trial_id,
            trials.c.number.label("i"),
            sa.cast(trials.c.state, text).label("s"),
            none(num).label("f"),
            none(text).label("j"),
            trials.c.datetime_start.label("start"),
            trials.c.datetime_complete.label("done"),
        ).where(mine)
    ]
    children = (
        (1, models.TrialParamModel, "param_id", "param_name", "param_value", "distribution_json"),
        (2, models.TrialValueModel, "objective", "value_type", "value", None),
        (3, models.TrialUserAttributeModel, "trial_user_attribute_id", "key", None, "value_json"),
        (4, models.TrialSystemAttributeModel, "trial_system_attribute_id", "key", None, "value_json"),
        (5, models.TrialIntermediateValueModel, "step", "intermediate_value_type", "intermediate_value", None),
    )
    for kind, model, i, s, f, j in children:
        table = model.__table__
        parts.append(
            sa.select(
                sa.literal(kind),
                table.c.trial_id,
                table.c[i],
                sa.cast(table.c[s], text),
                sa.cast(table.c[f], num) if f else none(num),
                table.c[j] if j else none(text),
                none(when),
                none(when),
            )
            .join_from(table, trials, trials.c.trial_id == table.c.trial_id)
            .where(mine)
        )
    return sa.union_all(*parts).order_by(sa.text("trial_id"), sa.text("kind"), sa.text("i"))


def _upsert(dialect: str, table: Any) -> Any:
    """Insert-or-replace of attribute rows (SQLite, PostgreSQL); None for other databases."""
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    elif dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        return None
    stmt = insert(table)
    return stmt.on_conflict_do_update(
        index_elements=[table.c.trial_id, table.c.key], set_={"value_json": stmt.excluded.value_json}
    )


_SQL: dict[str, _Sql] = {}


def _sql(dialect: str) -> _Sql:
    if dialect not in _SQL:
        _SQL[dialect] = _Sql(dialect)
    return _SQL[dialect]


class _Held:
    """One connection of the engine's pool kept by this process between statements (a lock lets
    one thread use it at a time): a checkout per statement costs more than the statement itself,
    and on PostgreSQL each checkout also pings the server (``pool_pre_ping``).

    A statement that fails gives the connection back to the pool (invalidated when the error is
    a lost connection), so the next use checks out a fresh one, pinged: a retried call after a
    database restart runs on a live connection, as a checkout with pre-ping would.
    """

    def __init__(self, engine: Any, autocommit: bool) -> None:
        self._engine = engine
        self._autocommit = autocommit
        self._lock = threading.Lock()
        self._conn: Any = None
        self._pid = 0
        self.serial = 0  # which connection this process opened (a new one after an error or a fork)

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        with self._lock:
            if self._conn is None or self._pid != os.getpid():  # after a fork: the parent's is not ours
                conn = self._engine.connect()
                if self._autocommit:
                    conn = conn.execution_options(isolation_level="AUTOCOMMIT")
                self._conn, self._pid, self.serial = conn, os.getpid(), next(_SERIALS)
            try:
                yield self._conn
            except BaseException as exc:
                self._release(exc)
                raise

    def _release(self, exc: BaseException) -> None:
        import sqlalchemy.exc

        conn, self._conn = self._conn, None
        lost = isinstance(exc, sqlalchemy.exc.DBAPIError) and exc.connection_invalidated
        with contextlib.suppress(Exception):
            if lost or isinstance(exc, (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError)):
                conn.invalidate()
            conn.close()


_SERIALS = itertools.count(1)


class _Connections:
    """The connections of :class:`BatchedStorage`'s own statements: one for transactions, and on
    PostgreSQL one in autocommit for the light reads (no BEGIN and ROLLBACK round trips)."""

    def __init__(self, backend: RDBStorage) -> None:
        self.backend = backend
        engine = backend.engine
        self.sql = _sql(engine.dialect.name)
        self._writes = _Held(engine, autocommit=False)
        self._reads = _Held(engine, autocommit=True) if engine.dialect.name == "postgresql" else self._writes
        self._sqlite = engine.dialect.name == "sqlite"
        self.dialect = engine.dialect
        #: A trial's rows are written by one statement (``_Sql.trial_write``), not a transaction.
        self.one_statement_writes = engine.dialect.name == "postgresql"

    @contextlib.contextmanager
    def begin(self) -> Iterator[Any]:
        """A connection in a transaction, committed at the end of the block (rolled back on error)."""
        with self._writes.connection() as conn, conn.begin():
            yield conn

    @contextlib.contextmanager
    def reading(self) -> Iterator[Any]:
        """A connection for read-only statements (PostgreSQL: in autocommit)."""
        if self._reads is self._writes:
            with self.begin() as conn:
                yield conn
        else:
            with self._reads.connection() as conn:
                yield conn

    @contextlib.contextmanager
    def single(self) -> Iterator[Any]:
        """A connection for one write statement, committed when it ends (PostgreSQL: the autocommit
        connection, as one statement is atomic by itself: no BEGIN and COMMIT round trips): the
        connection :meth:`reading` gives."""
        with self.reading() as conn:
            yield conn

    def script(self, conn: Any, parts: list[tuple[Any, dict[str, Any]]]) -> list[_Result]:
        """PostgreSQL: the statements of ``parts`` (statement, parameters) as one query on ``conn``
        (:func:`driver_script`; on the autocommit connection, one transaction), their results.
        A parameter name shared by two statements must have the same value in both."""
        texts, bound = [], {}
        for statement, params in parts:
            direct = self.sql.direct(statement, conn.dialect, tuple(sorted(params)), False)
            texts.append(direct.sql)
            bound.update(direct.bind(params))
        return driver_script(conn.connection.dbapi_connection, conn.dialect, ";\n".join(texts), bound)

    def read(self, statement: Any, params: dict[str, Any]) -> Any:
        """The scalar result of one read-only ``statement``."""
        with self.reading() as conn:
            return _execute(self, conn, statement, params).scalar()

    def row(self, statement: Any, params: dict[str, Any]) -> Any:
        """The one row of one read-only ``statement``."""
        with self.reading() as conn:
            return _execute(self, conn, statement, params).one()

    def rows(self, statement: Any, params: dict[str, Any]) -> list[Any]:
        """The rows of one read-only ``statement``."""
        with self.reading() as conn:
            return list(_execute(self, conn, statement, params).all())

    def version(self) -> tuple[int, int] | None:
        """A value that is the same at two calls only if no other connection committed to the
        database in between (SQLite's ``PRAGMA data_version`` on the held connection, with which
        connection it is), None where there is none (PostgreSQL) or it cannot be read. Costs no
        SQL statement of SQLAlchemy's: the pragma runs on the driver's connection."""
        if not self._sqlite:
            return None
        try:
            with self._writes.connection() as conn:
                raw = conn.connection.driver_connection
                return self._writes.serial, raw.execute("PRAGMA data_version").fetchone()[0]
        except Exception:  # the next statement reports a real problem; without a value: read
            return None


def _only_waiting(states: Container[TrialState] | None) -> bool:
    """Whether ``states`` is Optuna's look for WAITING trials, ``(TrialState.WAITING,)``."""
    return isinstance(states, (tuple, list, set, frozenset)) and set(states) == {TrialState.WAITING}


def _only_unfinished(states: Container[TrialState]) -> bool:
    """Whether ``states`` names unfinished states only (then finished trials need no look)."""
    try:
        return all(not TrialState(state).is_finished() for state in states)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        return False


def _last_trial_id(conns: _Connections, study_id: int) -> int | None:
    """The highest trial id of a study (an index look-up, whatever the size of the study)."""
    return conns.read(conns.sql.last_id, {"sid": study_id})


def read_trials(conns: _Connections, study_id: int, unfinished: Iterable[int], last_finished: int) -> list[FrozenTrial]:
    """The trials of a study with an id above ``last_finished`` and those of ``unfinished`` (up to
    it), ordered by id: what ``RDBStorage._get_trials`` returns to Optuna's ``_CachedStorage``, read
    in one statement (:func:`_changed_trials`) without ORM objects. KeyError for an unknown study."""
    inc = [trial_id for trial_id in unfinished if trial_id <= last_finished]
    if len(inc) > MAX_LISTED_IDS:  # too many bind parameters for one statement: all from the lowest on
        last_finished, inc = min(inc) - 1, []
    with conns.reading() as conn:
        rows = _execute(conns, conn, conns.sql.changed, {"sid": study_id, "gt": last_finished, "inc": inc}).all()
        if not rows and _execute(conns, conn, conns.sql.study_exists, {"sid": study_id}).scalar() is None:
            raise KeyError(f"no study with study_id {study_id}")
    value_of = models.TrialValueModel.stored_repr_to_value
    value_type = models.TrialValueModel.TrialValueType
    step_value_of = models.TrialIntermediateValueModel.stored_repr_to_intermediate_value
    step_type = models.TrialIntermediateValueModel.TrialIntermediateValueType
    out: list[FrozenTrial] = []
    for _, group in itertools.groupby(rows, key=lambda row: row[1]):
        first, *children = group  # the trial's own row (kind 0) sorts first
        _, trial_id, number, state, _, _, start, done = first
        params, dists, values, user, system, steps = {}, {}, {}, {}, {}, {}
        for kind, _, i, s, f, j, _, _ in children:
            if kind == 1:
                dists[s] = _distribution(j)
                params[s] = dists[s].to_external_repr(f)
            elif kind == 2:
                values[i] = value_of(f, value_type[s])
            elif kind == 3:
                user[s] = json.loads(j)
            elif kind == 4:
                system[s] = json.loads(j)
            elif kind == 5:
                steps[i] = step_value_of(f, step_type[s])
        out.append(
            FrozenTrial(
                number=number,
                state=TrialState[state],
                value=None,
                values=[values[k] for k in sorted(values)] if values else None,
                datetime_start=_local(start),
                datetime_complete=_local(done),
                params=params,
                distributions=dists,
                user_attrs=user,
                system_attrs=system,
                intermediate_values=steps,
                trial_id=trial_id,
            )
        )
    return out


@functools.lru_cache(maxsize=4096)
def _distribution(text: str) -> distributions.BaseDistribution:
    """A parameter's distribution from its JSON (a study has few: one parse each, shared)."""
    return distributions.json_to_distribution(text)


def _local(utc: datetime.datetime | None) -> datetime.datetime | None:
    """A stored naive UTC time as the naive local time Optuna's trials carry."""
    if utc is None:
        return None
    return utc.replace(tzinfo=datetime.timezone.utc).astimezone().replace(tzinfo=None)


def create_running_trial(conns: _Connections, study_id: int, beat: bool) -> FrozenTrial:
    """Create a RUNNING trial, and its first heartbeat when ``beat``, in one transaction of SQL
    statements: the same rows and trial number as ``RDBStorage._create_new_trial`` (the study row
    locked, then the trial inserted), without its ORM objects.

    The number is that of the study's trial created just before, plus one: trials are numbered 0,
    1, 2... in the order of their ids, each under the study's row lock, so this equals Optuna's
    count of the earlier trials, in one index look-up instead of a count over the study (which
    stays the fallback, e.g. for a study without trials). The insert is a statement of its own
    after the lock, so on PostgreSQL it sees every trial committed by the lock's previous holder;
    there the heartbeat is inserted by the same statement, and both statements go as one query on
    the autocommit connection (:meth:`_Connections.script`): one round trip, not BEGIN, two
    statements and COMMIT.
    """
    sql = conns.sql
    start = datetime.datetime.now()
    row = {"sid": study_id, "state": TrialState.RUNNING, "start": _utc(start)}
    if conns.one_statement_writes:  # PostgreSQL: the lock and the insert in one round trip
        import sqlalchemy.exc

        make = sql.new_trial_beat if beat else sql.new_trial
        try:
            with conns.single() as conn:
                locked, made = conns.script(conn, [(sql.lock_study, {"sid": study_id}), (make, row)])
        except sqlalchemy.exc.IntegrityError:  # the insert of a trial of no study
            locked = None
        if not locked or not locked.rows:
            raise KeyError(f"no study with study_id {study_id}")
        trial_id, number = made.one()
        return _running_trial(trial_id, number, start)
    with conns.begin() as conn:
        if _execute(conns, conn, sql.lock_study, {"sid": study_id}).scalar() is None:
            raise KeyError(f"no study with study_id {study_id}")
        if beat and sql.new_trial_beat is not None:
            trial_id, number = _execute(conns, conn, sql.new_trial_beat, row).one()
        else:
            trial_id, number = _execute(conns, conn, sql.new_trial, row).one()
            if beat:
                _execute(conns, conn, sql.heartbeat, {"trial_id": trial_id})
    return _running_trial(trial_id, number, start)


def _running_trial(trial_id: int, number: int, start: datetime.datetime) -> FrozenTrial:
    """The trial just created by :func:`create_running_trial`, as Optuna's cache holds it."""
    return FrozenTrial(
        number=number,
        state=TrialState.RUNNING,
        value=None,
        values=None,
        datetime_start=start,
        datetime_complete=None,
        params={},
        distributions={},
        user_attrs={},
        system_attrs={},
        intermediate_values={},
        trial_id=trial_id,
    )


def _utc(local: datetime.datetime) -> datetime.datetime:
    """A naive local time as the naive UTC time RDBStorage stores."""
    return local.astimezone(datetime.timezone.utc).replace(tzinfo=None)


def _with_retries(call: Any, tries: int = 5) -> Any:
    """``call()``, tried again (up to ``tries`` times, random pause up to 2 s) when the database
    reports a conflict such as a lock timeout: what ``RDBStorage._create_new_trial`` does."""
    import sqlalchemy.exc

    for attempt in range(1, tries + 1):
        try:
            return call()
        except sqlalchemy.exc.OperationalError as exc:
            if attempt == tries:
                raise optuna.exceptions.StorageInternalError("creating a trial failed") from exc
            time.sleep(random.random() * 2.0)
    raise AssertionError("not reached")


def _copy(trial: FrozenTrial) -> FrozenTrial:
    """A copy whose dicts may be changed without touching ``trial`` (cheaper than a deep copy)."""
    out = copy.copy(trial)
    out._params = dict(trial.params)
    out._distributions = dict(trial.distributions)
    out._user_attrs = dict(trial.user_attrs)
    out._system_attrs = dict(trial.system_attrs)
    return out


def write_trial(
    conns: _Connections,
    trial_id: int,
    pending: _Open,
    cached: dict[str, distributions.BaseDistribution | None],
    state: TrialState | None,
    values: Sequence[float] | None,
    now: datetime.datetime | None,
) -> bool:
    """Write a trial's buffered rows, and its values and final state when ``state`` is given, in
    one transaction of SQL statements (one per table, no ORM objects); on PostgreSQL as one
    statement in autocommit (:meth:`_Sql.trial_write`), the same transaction in one round trip.

    Returns False, like ``RDBStorage.set_trial_state_values``, when another process changed the
    trial first (an IntegrityError); raises ``UpdateFinishedTrialError`` when it is already finished.
    """
    import sqlalchemy.exc
    from optuna.storages._rdb import models

    sql = conns.sql
    params = [
        {
            "param_name": name,
            "param_value": value,
            "distribution_json": distributions.distribution_to_json(dist),
        }
        for name, (value, dist) in pending.params.items()
    ]
    value_rows = []
    for objective, value in enumerate(values or ()):
        stored, kind = models.TrialValueModel.value_to_stored_repr(value)
        value_rows.append({"objective": objective, "value": stored, "value_type": kind})
    unchecked = [(name, dist) for name, (_, dist) in pending.params.items() if cached.get(name) is None]
    try:
        if conns.one_statement_writes:
            if not (state is not None or params or pending.user_attrs or pending.system_attrs):
                return True
            if unchecked:  # first use of these names here: check the study's
                with conns.reading() as conn:
                    for name, dist in unchecked:
                        _check_distribution(conns, conn, trial_id, name, dist)
            bound: dict[str, Any] = {
                "tid": trial_id,
                "st": state.name if state is not None else None,
                "done": _utc(now) if now is not None else None,
            }
            bound["p"] = json.dumps(params)
            bound["u"] = json.dumps(_attr_rows(pending.user_attrs))
            bound["s"] = json.dumps(_attr_rows(pending.system_attrs))
            bound["v"] = json.dumps([{**row, "value_type": row["value_type"].name} for row in value_rows])
            with conns.single() as conn:
                raw = conn.connection.dbapi_connection
                if driver_execute(raw, conn.dialect, sql.trial_write(state is not None), bound).scalar() == 1:
                    return True
            with conns.reading() as conn:
                _check_updatable(conns, conn, trial_id)
            return False  # RUNNING again by now: changed by another process meanwhile
        with conns.begin() as conn:
            if state is not None:
                done = _execute(
                    conns,
                    conn,
                    sql.finish, {"tid": trial_id, "st": state, "done": _utc(now) if now is not None else None}
                )
                if done.rowcount != 1:
                    _check_updatable(conns, conn, trial_id)
            elif pending.params or pending.user_attrs or pending.system_attrs:
                _check_updatable(conns, conn, trial_id)
            for name, dist in unchecked:
                _check_distribution(conns, conn, trial_id, name, dist)
            if params:
                _execute(conns, conn, sql.params, [{"trial_id": trial_id, **row} for row in params])
            _upsert_attrs(conns, conn, models.TrialUserAttributeModel, trial_id, pending.user_attrs)
            _upsert_attrs(conns, conn, models.TrialSystemAttributeModel, trial_id, pending.system_attrs)
            if value_rows:
                _execute(conns, conn, sql.values, [{"trial_id": trial_id, **row} for row in value_rows])
    except sqlalchemy.exc.IntegrityError:
        return False
    except sqlalchemy.exc.SQLAlchemyError as exc:  # as RDBStorage reports a failed commit
        raise optuna.exceptions.StorageInternalError(f"writing trial id {trial_id} failed") from exc
    return True


def _attr_rows(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    """Attribute rows of a trial, keys and values as stored (JSON)."""
    return [{"key": k, "value_json": json.dumps(v)} for k, v in attrs.items()]


def _check_updatable(conns: _Connections, conn: Any, trial_id: int) -> None:
    """KeyError for an unknown trial, ``UpdateFinishedTrialError`` for a finished one."""
    state = _execute(conns, conn, conns.sql.state_of, {"tid": trial_id}).scalar()
    if state is None:
        raise KeyError(f"no trial with trial_id {trial_id}")
    if isinstance(state, str):  # as the driver returns it (_Direct): the name
        state = TrialState[state]
    conns.backend.check_trial_is_updatable(trial_id, state)


def _check_distribution(
    conns: _Connections, conn: Any, trial_id: int, name: str, dist: distributions.BaseDistribution
) -> None:
    """ValueError when the study already has parameter ``name`` with an incompatible distribution."""
    previous = _execute(conns, conn, conns.sql.distribution_of, {"tid": trial_id, "name": name}).scalar()
    if previous is not None:
        distributions.check_distribution_compatibility(_distribution(previous), dist)


def _upsert_attrs(conns: _Connections, conn: Any, model: Any, trial_id: int, attrs: dict[str, Any]) -> None:
    """Insert or replace ``attrs`` of a trial in one statement (SQLite, PostgreSQL), else row by row."""
    if not attrs:
        return
    rows = [{"trial_id": trial_id, **row} for row in _attr_rows(attrs)]
    upsert = conns.sql.attrs[model]
    if upsert is not None:
        _execute(conns, conn, upsert, rows)
        return
    import sqlalchemy

    table = model.__table__
    for row in rows:  # other databases: delete and insert
        conn.execute(sqlalchemy.delete(table).where(table.c.trial_id == trial_id, table.c.key == row["key"]))
        conn.execute(sqlalchemy.insert(table), [row])


def running_beats(engine: Any, study_id: int) -> list[Any]:
    """Each RUNNING trial of a study (id), its last heartbeat (None without one) and the database's
    time now, in one statement on a connection of ``engine``."""
    with engine.connect() as conn:
        return list(conn.execute(_sql(engine.dialect.name).running_beats, {"sid": study_id}).all())


def write_attr(conns: _Connections, trial_id: int, key: str, value: Any) -> None:
    """Write one system attribute of a running trial now (one statement, committed at once)."""
    from optuna.storages._rdb import models

    with conns.single() as conn:
        _upsert_attrs(conns, conn, models.TrialSystemAttributeModel, trial_id, {key: value})


def get_heartbeat_thread(trial_id: int, storage: optuna.storages.BaseStorage) -> BaseHeartbeatThread:
    """What renews trial ``trial_id``'s heartbeat between its ``start()`` and ``join()``: a hold on
    the beater thread of a :class:`BatchedStorage` with heartbeats (no thread per trial), else
    Optuna's own heartbeat thread (a NullHeartbeatThread without heartbeats)."""
    if isinstance(storage, BatchedStorage) and storage.get_heartbeat_interval() is not None:
        return _Lease(storage, trial_id)
    return _optuna_heartbeat_thread(trial_id, storage)


# Optuna's trial loop (``_run_trial``) starts a heartbeat thread per trial through this name: a
# BatchedStorage's trials are held on its beater thread instead; any other storage gets Optuna's.
_optimize_module.get_heartbeat_thread = get_heartbeat_thread


def read_study_once(study: optuna.Study) -> contextlib.AbstractContextManager[None]:
    """A block in which ``study`` is read from its storage once (:meth:`BatchedStorage.read_once`);
    with another storage, a block that changes nothing."""
    storage = storage_of(study)
    if isinstance(storage, BatchedStorage):
        return storage.read_once(study_id_of(study))
    return contextlib.nullcontext()


def trials_of_this_trial(study: optuna.Study) -> list[FrozenTrial]:
    """The study's trials as read once at the start of the current trial (no storage read when
    the sampler read them already); ``Study._get_trials(use_cache=True)``."""
    return cached_trials(study)


def set_dashboard_pareto_front(front: Callable[[list[FrozenTrial], list[optuna.study.StudyDirection]], list[FrozenTrial]]) -> None:
    """Make optuna-dashboard (in this process) mark ``front(trials, directions)`` as the best trials
    of a multi-objective study. It has no public hook: its study API calls the module-level
    ``optuna_dashboard._app.get_pareto_front_trials``."""
    import optuna_dashboard._app as dashboard_app

    dashboard_app.get_pareto_front_trials = front
