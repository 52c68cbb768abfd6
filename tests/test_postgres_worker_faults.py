"""Worker processes on a real PostgreSQL server under faults (docs/workers.md, "Leases").

Six ``test-sleep`` workers share one study. (1) Four are SIGKILLed at random moments, one of
them while it sleeps inside the planning lock (test hook ``CIQ_OPTUNA_TEST_PAUSE_IN_PLAN_LOCK``);
(2) the server is stopped for 30 s mid-run; (3) both at once. In each: every process still
alive exits 0 by itself within a bounded time after the budget is met, the study holds exactly
the budget, no configuration is counted twice, no trial is left RUNNING or WAITING.
The full-size version (15 workers, budget 300, a real tune) is benchmarks/worker_faults.py.
"""

from __future__ import annotations

import collections
import json
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import optuna
import pytest
import test_workers_objectives as objectives
from optuna.trial import TrialState
from test_workers_processes import outputs, start_worker

from ciq_optuna.study.budget import budget_status
from ciq_optuna.study.leases import PLAN_LOCK_LEASE_S, PLAN_LOCK_RENEW_S, TEST_PAUSE_ENV, PlanLock
from ciq_optuna.study.storage import resolve_storage

pytestmark = pytest.mark.postgres

WORKERS, BUDGET, POOL = 6, 24, 4
#: Seconds every live process has, after the budget is met, to exit by itself.
EXIT_WITHIN_S = 60.0
#: Seconds the whole run may take before the budget must be met.
BUDGET_WITHIN_S = 240.0


def _done(storage, name: str) -> int | None:
    try:
        return budget_status(optuna.load_study(study_name=name, storage=storage))["done"]
    except Exception:  # the server is stopped
        return None


def _run(server, url: str, tmp_path: Path, *, kills: int, outage_s: float, seed: int) -> None:
    """Run the scenario and check every promise (see the module docstring)."""
    rng = random.Random(seed)
    name = "faults"
    log = tmp_path / "evaluations.jsonl"
    # The test process itself does not retry: it must see the outage as "no answer".
    storage = resolve_storage(url, default_path=tmp_path / "unused.db", reconnect_timeout=0)
    objectives.create_study(storage, name, budget=BUDGET, pool_size=POOL, sleep=0.2, log=log)
    procs = {}
    for i in range(WORKERS):
        env = {TEST_PAUSE_ENV: "600"} if i == 0 and kills else None
        procs[f"w{i}"] = start_worker(url, name, tmp_path, name=f"w{i}", env=env)
    victims = [f"w{i}" for i in rng.sample(range(1, WORKERS), max(kills - 1, 0))]
    kill_at = sorted(rng.randint(2, BUDGET // 2) for _ in victims)
    outage_at = BUDGET // 3 if outage_s else None
    outage = threading.Thread(target=lambda: (server.halt(), time.sleep(outage_s), server.resume()))
    paused_killed = not kills
    start = time.monotonic()
    met: float | None = None
    exited: dict[str, float] = {}
    try:
        while True:
            time.sleep(0.2)
            now = time.monotonic()
            if not paused_killed and "inside the planning lock" in (tmp_path / "w0.out").read_text():
                procs["w0"].send_signal(signal.SIGKILL)
                paused_killed = True
            if outage.is_alive() and kill_at and victims:  # a kill while the database is away
                procs[victims.pop(0)].send_signal(signal.SIGKILL)
                kill_at.pop(0)
            done = None if outage.is_alive() else _done(storage, name)
            while done is not None and kill_at and done >= kill_at[0]:
                kill_at.pop(0)
                procs[victims.pop(0)].send_signal(signal.SIGKILL)
            if done is not None and outage_at is not None and done >= outage_at:
                outage_at = None
                outage.start()
            if met is None and done is not None and done >= BUDGET:
                met = now
            for label, proc in procs.items():
                if label not in exited and proc.poll() is not None:
                    exited[label] = now
            if len(exited) == len(procs):
                break
            assert met is not None or now - start < BUDGET_WITHIN_S, f"budget not met\n{outputs(tmp_path)}"
            assert met is None or now - met < EXIT_WITHIN_S, (
                f"still running: {_alive(procs)}\n{outputs(tmp_path)}"
            )
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if outage.is_alive():
            outage.join()
    assert paused_killed and not victims and (outage_s == 0 or not outage.is_alive())
    killed = {label for label, proc in procs.items() if proc.returncode == -signal.SIGKILL}
    assert len(killed) == kills, outputs(tmp_path)
    assert all(proc.returncode == 0 for label, proc in procs.items() if label not in killed), outputs(
        tmp_path
    )
    assert "Traceback" not in outputs(tmp_path)
    _check_study(optuna.load_study(study_name=name, storage=storage), log)


def _alive(procs: dict[str, subprocess.Popen]) -> list[str]:
    return [label for label, proc in procs.items() if proc.poll() is None]


def _check_study(study: optuna.Study, log: Path) -> None:
    trials = study.get_trials(deepcopy=False)
    states = collections.Counter(t.state.name for t in trials)
    assert not states.get("RUNNING") and not states.get("WAITING"), states
    counted = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(counted) == BUDGET, states
    assert states.get("PRUNED", 0) == sum("cancelled" in t.user_attrs for t in trials)
    assert not [t for t in trials if t.state == TrialState.FAIL and "error" in t.user_attrs]
    configs = collections.Counter(json.dumps(t.params, sort_keys=True) for t in counted)
    assert set(configs.values()) == {1}, configs.most_common(3)
    # A configuration evaluated more than once is the retry of a trial whose owner died.
    stale = {json.dumps(t.params, sort_keys=True) for t in trials if t.state == TrialState.FAIL}
    evaluated = collections.Counter(json.dumps(e["params"], sort_keys=True) for e in objectives.read_log(log))
    assert {c for c, n in evaluated.items() if n > 1} <= stale


def test_four_workers_sigkilled_one_inside_the_planning_lock(
    postgres_server, postgres_db_url, tmp_path
) -> None:
    _run(postgres_server, postgres_db_url, tmp_path, kills=4, outage_s=0, seed=1)


def test_workers_ride_out_a_30_s_database_outage(postgres_server, postgres_db_url, tmp_path) -> None:
    _run(postgres_server, postgres_db_url, tmp_path, kills=0, outage_s=30, seed=2)


def test_sigkills_and_a_database_outage_at_once(postgres_server, postgres_db_url, tmp_path) -> None:
    _run(postgres_server, postgres_db_url, tmp_path, kills=4, outage_s=30, seed=3)


def test_planning_lock_is_renewed_by_a_live_owner_and_expires_when_it_stops(
    postgres_db_url, tmp_path
) -> None:
    """A worker paused inside the planning lock (test hook) keeps it while it renews the lease;
    once it is stopped (SIGSTOP: alive, silent, its connection open) the lock is free again
    within one lease period."""
    log = tmp_path / "evaluations.jsonl"
    storage = resolve_storage(postgres_db_url, default_path=tmp_path / "unused.db")
    objectives.create_study(storage, "lease", budget=4, pool_size=2, sleep=0.2, log=log)
    owner = start_worker(postgres_db_url, "lease", tmp_path, name="owner", env={TEST_PAUSE_ENV: "600"})
    acquired: list[float] = []
    try:
        deadline = time.monotonic() + 120
        while "inside the planning lock" not in (tmp_path / "owner.out").read_text():
            assert time.monotonic() < deadline and owner.poll() is None, outputs(tmp_path)
            time.sleep(0.2)
        lock = PlanLock(storage, "lease")

        def take() -> None:
            with lock.held():
                acquired.append(time.monotonic())

        waiter = threading.Thread(target=take, daemon=True)
        waiter.start()
        time.sleep(PLAN_LOCK_LEASE_S + 3)
        assert not acquired  # the live owner renewed its lease
        owner.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        waiter.join(PLAN_LOCK_LEASE_S + 20)
        assert acquired and acquired[0] - stopped <= PLAN_LOCK_LEASE_S + PLAN_LOCK_RENEW_S + 5
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
