"""Leases of RUNNING trials and of the planning lock (ciq_optuna/study/leases.py), on SQLite.

The multi-process versions (SIGKILL, PostgreSQL outage) are in test_postgres_worker_faults.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import optuna
from optuna.trial import TrialState

from ciq_optuna.study.leases import PlanLock, locked_sampler, trial_lease
from ciq_optuna.study.storage import resolve_storage
from ciq_optuna.workers import fail_stale


def _study(tmp_path: Path) -> optuna.Study:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    storage = resolve_storage(url, default_path=tmp_path / "study.db", heartbeat_interval=1, grace_period=1)
    return optuna.create_study(storage=storage, study_name="leases")


def test_running_trial_without_heartbeat_expires_after_the_grace_period(tmp_path: Path) -> None:
    """A trial whose owner died before its first heartbeat (Optuna never fails it) is failed
    once it has been seen without heartbeat for the grace period, and its slot queued again."""
    study = _study(tmp_path)
    # RUNNING, never a heartbeat: made by plain Optuna (a ciq-optuna trial is created with one)
    orphan = study._storage.backend.create_new_trial(study._study_id)
    fail_stale(study)
    assert study._storage.get_trial(orphan).state == TrialState.RUNNING  # first seen now
    time.sleep(1.3)
    fail_stale(study)
    assert study._storage.get_trial(orphan).state == TrialState.FAIL
    retries = [t for t in study.get_trials(deepcopy=False) if t.system_attrs.get("failed_trial") == 0]
    assert [t.state for t in retries] == [TrialState.WAITING]


def test_trial_lease_keeps_a_planning_trial_alive(tmp_path: Path) -> None:
    """While a trial is being planned (before Optuna's own heartbeat starts) its lease is
    renewed: it is not failed however long planning takes."""
    study = _study(tmp_path)
    trial_id = study._storage.create_new_trial(study._study_id)
    with trial_lease(study._storage, trial_id):
        for _ in range(3):
            time.sleep(0.8)
            fail_stale(study)
    assert study._storage.get_trial(trial_id).state == TrialState.RUNNING


def test_locked_sampler_plans_under_the_lock_and_the_lease(tmp_path: Path) -> None:
    """A study run through ``locked_sampler`` completes its trials; the lock file is where
    every process of the study looks for it."""
    study = _study(tmp_path)
    sampler = locked_sampler(optuna.samplers.RandomSampler(seed=0), study._storage, "leases")
    study = optuna.load_study(study_name="leases", storage=study._storage, sampler=sampler)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 3
    assert (tmp_path / "study.db.lock").exists()
    assert isinstance(sampler._plan_lock, PlanLock)
