"""CPU per trial of the storage calls one ``ciq-optuna tune`` trial makes, without the search.

    nice -n 10 python benchmarks/storage_calls.py [--storage sqlite postgresql] [--sizes 100 1000 5000]

One trial's calls, in the order tune makes them on the storage ``resolve_storage`` opens (the
default of ``tune``): create the trial, Optuna's look for a WAITING trial, the sampler's two reads
of the study and its claim (a system attribute written at once), 12 parameters, 6 user attributes,
the final state and value, the budget gate's read. The study is first filled with finished trials
up to each size. The CPU of this process per trial is the median of 5 runs of ``--trials`` trials;
the wall clock per trial is shown too (PostgreSQL: fsync and round trips to the server process).

To compare two versions of the code side by side, run the script of one tree with the other on
``PYTHONPATH`` (e.g. ``git archive BASE | tar -x -C /tmp/base``, then
``PYTHONPATH=/tmp/base python benchmarks/storage_calls.py``) in the same shell loop.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import optuna
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(1, str(REPO / "tests"))

from ciq_optuna.study.storage import resolve_storage  # noqa: E402

DISTRIBUTIONS = {
    f"p{i}": CategoricalDistribution([0, 1, 2, 3]) if i % 2 else IntDistribution(0, 9) for i in range(12)
}
USER_ATTRS = ("flags", "compiler_version", "binary_hash", "cubin_sha256", "metrics", "measured")


def one_trial(storage: optuna.storages.BaseStorage, study_id: int) -> None:
    """The storage calls of one tune trial (see the module docstring)."""
    trial_id = storage.create_new_trial(study_id)
    storage.get_all_trials(study_id, deepcopy=False, states=(TrialState.WAITING,))
    storage.get_all_trials(study_id, deepcopy=False)
    storage.get_all_trials(study_id, deepcopy=False)
    storage.set_trial_system_attr(trial_id, "ciq_optuna:claim", "0123456789abcdef")
    for name, dist in DISTRIBUTIONS.items():
        storage.set_trial_param(trial_id, name, 1, dist)
    for key in USER_ATTRS:
        storage.set_trial_user_attr(trial_id, key, {"spill-bytes": 0, "registers": [32, 40]})
    storage.set_trial_state_values(trial_id, TrialState.COMPLETE, [1.0])
    storage.get_all_trials(study_id, deepcopy=False)


def measure(url: str, sizes: list[int], trials: int) -> list[tuple[int, float, float]]:
    """(trials in the study when the timed runs start, CPU ms per trial, wall ms per trial) per size."""
    storage = resolve_storage(url, default_path=Path("unused.db"))
    study = optuna.create_study(storage=storage, study_name="storage-calls")
    out = []
    for size in sizes:
        missing = size - len(study.get_trials(deepcopy=False))
        if missing > 0:
            study.add_trials(
                [
                    optuna.trial.create_trial(
                        params={name: 1 for name in DISTRIBUTIONS},
                        distributions=DISTRIBUTIONS,
                        value=1.0,
                        user_attrs={key: {"spill-bytes": 0} for key in USER_ATTRS},
                    )
                    for _ in range(missing)
                ]
            )
        for _ in range(3):  # the first read of the added trials is a one-off
            one_trial(storage, study._study_id)
        start = len(study.get_trials(deepcopy=False))
        cpu, wall = [], []
        for _ in range(5):
            c0, w0 = time.process_time(), time.perf_counter()
            for _ in range(trials):
                one_trial(storage, study._study_id)
            cpu.append((time.process_time() - c0) / trials * 1000)
            wall.append((time.perf_counter() - w0) / trials * 1000)
        out.append((start, statistics.median(cpu), statistics.median(wall)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--trials", type=int, default=40, help="trials per timed run (5 runs per size)")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    import ciq_optuna

    print(f"# {' '.join(sys.argv)}  (ciq_optuna from {Path(ciq_optuna.__file__).parent})")
    print("| storage | trials in study | CPU ms/trial | wall ms/trial |")
    print("|---|---:|---:|---:|")
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
                for size, cpu, wall in measure(url, args.sizes, args.trials):
                    print(f"| {kind} | {size} | {cpu:.2f} | {wall:.2f} |", flush=True)
            finally:
                if server is not None:
                    server.stop()


if __name__ == "__main__":
    main()
