"""CPU per call of four calls a PostgreSQL worker makes, base against new.

    nice -n 10 python benchmarks/worker_calls.py --base /tmp/base [--sizes 100 1000 5000] [--others 3] [--rounds 3]

On one study of PostgreSQL 15 (started by tests/conftest.py's PostgresServer), filled with
finished trials up to each size (``storage_calls.prefill``) plus ``--others`` RUNNING trials of
another process (with parameters and a fresh heartbeat, as other workers leave them), a process
times, with the code on its ``PYTHONPATH``:

- ``budget check``: tune's stop callback after each trial: ``done_reaches(study, target)`` where
  the tree has it, else ``finished_count(study) >= target`` (a target not reached);
- ``stale check``: ``fail_stale(study)`` with the storage's once-per-interval gate reset, i.e.
  the check a worker makes every heartbeat interval (nothing is stale);
- ``lock hold``: taking and releasing the planning lock (``PlanLock.held``) with nothing inside;
- ``planning step``: what a worker's sampler does under the planning lock, on a RUNNING trial of
  this process: the lock held (lazily where the tree has ``held(lazy=...)``, as its
  ``LockedSampler`` holds it), the study read once, the claim written (system attribute
  ``GeneticSampler:key``), the lock released;
- ``trial write``: a trial of this process created, given 12 parameters and 6 user attributes,
  and told COMPLETE (``storage_calls``' rows; the writes of a trial without the search).

CPU ms per call: the median of 5 batches of ``--calls`` calls (a quarter of them for the stale
check and the trial write). The base tree (``--base``) and this one alternate, ``--rounds``
times each; the table gives the median over the rounds and new/base.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(1, str(REPO / "tests"))

from storage_calls import DISTRIBUTIONS, STUDY, USER_ATTRS, prefill  # noqa: E402

CALLS = ("budget check", "stale check", "lock hold", "trial write", "planning step")


def child(url: str, calls: int) -> dict[str, list[float]]:
    """CPU ms per call of each of :data:`CALLS`, 5 batches each, with the tree on ``PYTHONPATH``."""
    from ciq_optuna.study import budget
    from ciq_optuna.study.leases import PlanLock, fail_stale
    from ciq_optuna.study.metadata import finished_count
    from ciq_optuna.study.storage import resolve_storage

    storage = resolve_storage(url, default_path=Path("unused.db"))
    study = optuna.load_study(storage=storage, study_name=STUDY)
    target = len(study.get_trials(deepcopy=False)) + 10_000
    reaches = getattr(budget, "done_reaches", None)
    lock = PlanLock(storage, STUDY)

    def budget_check() -> None:
        if reaches is not None:
            reaches(study, target)
        else:
            _ = finished_count(study) >= target

    def stale_check() -> None:
        storage._last_stale_check.clear()
        fail_stale(study)

    def lock_hold() -> None:
        with lock.held():
            pass

    def trial_write() -> None:
        trial_id = storage.create_new_trial(study._study_id)
        for name, dist in DISTRIBUTIONS.items():
            storage.set_trial_param(trial_id, name, 1, dist)
        for key in USER_ATTRS:
            storage.set_trial_user_attr(trial_id, key, {"spill-bytes": 0, "registers": [32, 40]})
        storage.set_trial_state_values(trial_id, TrialState.COMPLETE, [1.0])

    import inspect

    from ciq_optuna.study._optuna import read_study_once

    planned = storage.create_new_trial(study._study_id)
    lazy = {"lazy": True} if "lazy" in inspect.signature(lock.held).parameters else {}

    def planning_step() -> None:
        with lock.held(**lazy), read_study_once(study):
            storage.get_all_trials(study._study_id, deepcopy=False)
            storage.set_trial_system_attr(planned, "GeneticSampler:key", '{"x": 1}')

    out: dict[str, list[float]] = {}
    quarter = max(calls // 4, 1)
    steps = (budget_check, stale_check, lock_hold, trial_write, planning_step)
    for name, call, n in zip(CALLS, steps, (calls, quarter, calls, quarter, calls)):
        call()
        runs = []
        for _ in range(5):
            c0 = time.process_time()
            for _ in range(n):
                call()
            runs.append((time.process_time() - c0) / n * 1000)
        out[name] = runs
    storage.set_trial_state_values(planned, TrialState.FAIL)  # no RUNNING trial left for the next child
    return out


def others(url: str, count: int) -> tuple[Any, list[int]]:
    """``count`` RUNNING trials of another process, with parameters and heartbeats renewed until
    released: the storage and the trial ids."""
    from ciq_optuna.study.storage import resolve_storage

    storage = resolve_storage(url, default_path=Path("unused.db"))
    study = optuna.load_study(storage=storage, study_name=STUDY)
    ids = []
    for _ in range(count):
        trial_id = storage.create_new_trial(study._study_id)
        ids.append(trial_id)
        for name, dist in DISTRIBUTIONS.items():
            storage.set_trial_param(trial_id, name, 1, dist)
        storage.flush_trial(trial_id)
        storage.hold_heartbeat(trial_id)
    return storage, ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=False, help="root of the base tree (git archive BASE | tar -x)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--others", type=int, default=3, help="RUNNING trials of another process")
    parser.add_argument("--calls", type=int, default=200, help="calls per batch (stale check, trial write: a quarter)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    if args.child:
        print(json.dumps(child(args.child, args.calls)))
        return
    from conftest import PostgresServer

    from ciq_optuna.study.storage import resolve_storage

    trees = {"base": args.base, "new": str(REPO)}
    print(f"# {' '.join(sys.argv)}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {os.getloadavg()[0]:.1f}")
    print("| trials in study | call | base CPU ms/call | new CPU ms/call | new/base |")
    print("|---:|---|---:|---:|---:|")
    server = PostgresServer().start()
    other = None
    try:
        url = server.url()
        storage = resolve_storage(url, default_path=Path("unused.db"))
        study = optuna.create_study(storage=storage, study_name=STUDY)
        for size in args.sizes:
            prefill(storage, study._study_id, size)
            other = other or others(url, args.others)
            got: dict[str, dict[str, list[float]]] = {tree: {c: [] for c in CALLS} for tree in trees}
            for _ in range(args.rounds):
                for tree, path in trees.items():
                    env = {**os.environ, "PYTHONPATH": path}
                    done = subprocess.run(
                        [sys.executable, __file__, "--child", url, "--calls", str(args.calls)],
                        env=env, capture_output=True, text=True, check=True,
                    )
                    for name, runs in json.loads(done.stdout).items():
                        got[tree][name].append(statistics.median(runs))
            for name in CALLS:
                base, new = (statistics.median(got[tree][name]) for tree in ("base", "new"))
                print(f"| {size} | {name} | {base:.3f} | {new:.3f} | {new / base:.2f} |", flush=True)
    finally:
        if other is not None:  # no heartbeats once the server is gone
            for trial_id in other[1]:
                other[0].release_heartbeat(trial_id)
        server.stop()


if __name__ == "__main__":
    main()
