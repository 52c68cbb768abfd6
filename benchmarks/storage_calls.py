"""CPU per trial of the storage calls one ``ciq-optuna tune`` trial makes, without the search.

    nice -n 10 python benchmarks/storage_calls.py [--storage sqlite postgresql] [--sizes 100 1000 5000] \
        [--workers 1 2 4] [--evaluate-ms 250]

One trial's calls, in the order tune makes them on the storage ``resolve_storage`` opens (the
default of ``tune``): create the trial, Optuna's look for a WAITING trial, then under the planning
lock (as ``LockedSampler.before_trial`` holds it: in ``BatchedStorage.read_once`` where the tree
has it) the sampler's two looks at the study and its claim (a system attribute written at once),
12 parameters, 6 user attributes, the final state and value, the budget gate's read. The study is first filled with finished trials up to each size (rows
inserted in one transaction, see :func:`prefill`). The CPU of this process per trial is the
median of 5 runs of ``--trials`` trials; the wall clock per trial is shown too (PostgreSQL: fsync
and round trips to the server process).

``--workers W``: W processes run these trials at the same time on the one study (each its own
storage, as workers do); the CPU per trial is the median over the workers of each one's median
run, i.e. what one trial costs one worker while W share the study (the reads then fetch the other
workers' new and running trials). Each size is filled once; runs with more workers come later, on
a study a little larger.

To compare two versions of the code side by side, run the script of one tree with the other on
``PYTHONPATH`` (e.g. ``git archive BASE | tar -x -C /tmp/base``, then
``PYTHONPATH=/tmp/base python benchmarks/storage_calls.py``) in the same shell loop.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import optuna
from optuna.distributions import CategoricalDistribution, IntDistribution, distribution_to_json
from optuna.trial import TrialState

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(1, str(REPO / "tests"))

from ciq_optuna.study.leases import PlanLock  # noqa: E402
from ciq_optuna.study.storage import resolve_storage  # noqa: E402

DISTRIBUTIONS = {
    f"p{i}": CategoricalDistribution([0, 1, 2, 3]) if i % 2 else IntDistribution(0, 9) for i in range(12)
}
USER_ATTRS = ("flags", "compiler_version", "binary_hash", "cubin_sha256", "metrics", "measured")
STUDY = "storage-calls"


def one_trial(storage: optuna.storages.BaseStorage, study_id: int, lock: PlanLock, evaluate_s: float = 0.0) -> None:
    """The storage calls of one tune trial (see the module docstring); ``evaluate_s`` seconds of
    sleep stand for the compile before the final state."""
    trial_id = storage.create_new_trial(study_id)
    storage.get_all_trials(study_id, deepcopy=False, states=(TrialState.WAITING,))
    once = getattr(storage, "read_once", None)  # as LockedSampler holds the lock, where the tree has it
    with lock.held(), once(study_id) if once is not None else contextlib.nullcontext():
        storage.get_all_trials(study_id, deepcopy=False)
        storage.get_all_trials(study_id, deepcopy=False)
        storage.set_trial_system_attr(trial_id, "ciq_optuna:claim", f"{trial_id:016x}")
    for name, dist in DISTRIBUTIONS.items():
        storage.set_trial_param(trial_id, name, 1, dist)
    for key in USER_ATTRS:
        storage.set_trial_user_attr(trial_id, key, {"spill-bytes": 0, "registers": [32, 40]})
    time.sleep(evaluate_s)
    storage.set_trial_state_values(trial_id, TrialState.COMPLETE, [1.0])
    storage.get_all_trials(study_id, deepcopy=False)


def prefill(storage: optuna.storages.BaseStorage, study_id: int, size: int) -> None:
    """Add finished trials until the study holds ``size``: the rows Optuna writes for a COMPLETE
    trial, inserted in one transaction (``add_trials`` takes one per trial: minutes at 5,000 on
    PostgreSQL)."""
    import sqlalchemy as sa
    from optuna.storages._rdb import models

    engine = storage._backend.engine
    with engine.begin() as conn:
        have = conn.execute(
            sa.select(sa.func.count()).select_from(models.TrialModel.__table__).where(
                models.TrialModel.__table__.c.study_id == study_id
            )
        ).scalar()
        now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        for number in range(have, size):
            trial_id = conn.execute(
                sa.insert(models.TrialModel.__table__)
                .values(number=number, study_id=study_id, state=TrialState.COMPLETE,
                        datetime_start=now, datetime_complete=now)
                .returning(models.TrialModel.__table__.c.trial_id)
            ).scalar()
            conn.execute(sa.insert(models.TrialParamModel.__table__), [
                {"trial_id": trial_id, "param_name": name, "param_value": 1,
                 "distribution_json": distribution_to_json(dist)}
                for name, dist in DISTRIBUTIONS.items()
            ])
            conn.execute(sa.insert(models.TrialUserAttributeModel.__table__), [
                {"trial_id": trial_id, "key": key, "value_json": json.dumps({"spill-bytes": 0})}
                for key in USER_ATTRS
            ])
            conn.execute(sa.insert(models.TrialValueModel.__table__), [
                {"trial_id": trial_id, "objective": 0, "value": 1.0, "value_type": "FINITE"}
            ])


def worker(url: str, trials: int, evaluate_s: float = 0.0) -> list[tuple[float, float]]:
    """(CPU ms, wall ms) per trial of each of 5 runs of ``trials`` trials in this process."""
    storage = resolve_storage(url, default_path=Path("unused.db"))
    study = optuna.load_study(storage=storage, study_name=STUDY)
    lock = PlanLock(storage, STUDY)
    for _ in range(3):  # the first read of the study is a one-off
        one_trial(storage, study._study_id, lock, evaluate_s)
    out = []
    for _ in range(5):
        c0, w0 = time.process_time(), time.perf_counter()
        for _ in range(trials):
            one_trial(storage, study._study_id, lock, evaluate_s)
        out.append(((time.process_time() - c0) / trials * 1000, (time.perf_counter() - w0) / trials * 1000))
    return out


def measure(
    url: str, sizes: list[int], trials: int, workers: list[int], evaluate_s: float = 0.0
) -> Iterator[tuple[int, int, float, float]]:
    """(workers, trials in the study when the timed runs start, CPU ms per trial, wall ms per
    trial) per size and worker count, each as soon as it is measured."""
    storage = resolve_storage(url, default_path=Path("unused.db"))
    study = optuna.create_study(storage=storage, study_name=STUDY, load_if_exists=True)
    for size in sizes:
        prefill(storage, study._study_id, size)
        for count in workers:
            start = len(study.get_trials(deepcopy=False))
            if count == 1:
                runs = [worker(url, trials, evaluate_s)]
            else:
                procs = [
                    subprocess.Popen(
                        [sys.executable, __file__, "--worker", url, "--trials", str(trials),
                         "--evaluate-ms", str(evaluate_s * 1000)],
                        stdout=subprocess.PIPE,
                        text=True,
                    )
                    for _ in range(count)
                ]
                runs = [json.loads(p.communicate()[0]) for p in procs]
                if any(p.returncode for p in procs):
                    raise SystemExit("a worker failed")
            cpu = statistics.median(statistics.median(c for c, _ in run) for run in runs)
            wall = statistics.median(statistics.median(w for _, w in run) for run in runs)
            yield count, start, cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--trials", type=int, default=40, help="trials per timed run (5 runs per size)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1], help="processes sharing the study")
    parser.add_argument(
        "--evaluate-ms", type=float, default=0.0,
        help="sleep per trial before its final state, standing for the compile (the other workers' "
        "trials are then running during a read; from 200 ms on their parameters are flushed)",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # one worker process of a --workers run
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    if args.worker:
        print(json.dumps(worker(args.worker, args.trials, args.evaluate_ms / 1000)))
        return
    import ciq_optuna

    print(f"# {' '.join(sys.argv)}  (ciq_optuna from {Path(ciq_optuna.__file__).parent})")
    print("| storage | workers | trials in study | CPU ms/trial (each worker) | wall ms/trial (each worker) |")
    print("|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="ciq-storage-calls-") as tmp:
        for kind in args.storage:
            server = None
            if kind == "postgresql":
                from conftest import PostgresServer

                server = PostgresServer().start()
                url = server.url()
            else:
                url = f"sqlite:///{tmp}/calls.db"
            try:
                for count, size, cpu, wall in measure(url, args.sizes, args.trials, args.workers, args.evaluate_ms / 1000):
                    print(f"| {kind} | {count} | {size} | {cpu:.2f} | {wall:.2f} |", flush=True)
            finally:
                if server is not None:
                    server.stop()


if __name__ == "__main__":
    main()
