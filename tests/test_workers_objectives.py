"""A cheap objective for the worker tests, and a worker entry point that runs it.

Not a test module (it holds no tests): ``python tests/test_workers_objectives.py --storage URL
--study NAME`` is one worker process. The objective kind ``test-sleep`` evaluates three
parameters in an isolated process that sleeps ``sleep`` seconds (``$CIQ_TEST_SLEEP`` overrides,
to make one worker slow) and appends one JSON line per evaluation to the file ``log``: which
process evaluated which configuration, so tests can prove nothing ran twice.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ciq_optuna.isolation import run_isolated  # noqa: E402
from ciq_optuna.samplers import GeneticSampler  # noqa: E402
from ciq_optuna.workers import add_worker_arguments, register_objective_factory, run_worker_command  # noqa: E402

KIND = "test-sleep"


def evaluate(params: dict, sleep_s: float, log_path: str, number: int) -> float:
    """The evaluation: log it, sleep, return a deterministic function of the parameters."""
    line = json.dumps({"pid": os.getpid(), "trial": number, "params": params, "start": time.time()})
    with open(log_path, "a") as log:
        log.write(line + "\n")
    time.sleep(sleep_s)
    return (params["x"] - 37) ** 2 + (params["y"] - 11) ** 2 + {"a": 0, "b": 5, "c": 9, "d": 2}[params["c"]]


def make_objective(study: optuna.Study):
    """Objective factory for studies whose objective kind is ``test-sleep``."""
    meta = study.user_attrs["objective"]
    sleep_s = float(os.environ.get("CIQ_TEST_SLEEP", meta["sleep"]))

    def objective(trial: optuna.trial.Trial) -> float:
        params = {
            "x": trial.suggest_int("x", 0, 99),
            "y": trial.suggest_int("y", 0, 99),
            "c": trial.suggest_categorical("c", ["a", "b", "c", "d"]),
        }
        return run_isolated(
            evaluate, params, sleep_s, meta["log"], trial.number, timeout=meta.get("timeout", 60)
        )

    return objective


def make_sampler(study: optuna.Study) -> optuna.samplers.BaseSampler:
    """The study's GeneticSampler, pool size from the study's objective metadata."""
    return GeneticSampler(pool_size=int(study.user_attrs["objective"]["pool_size"]))


def register() -> None:
    """Register the ``test-sleep`` objective kind with the worker machinery."""
    register_objective_factory(KIND, make_objective, sampler=make_sampler)


def create_study(storage, name: str, *, budget: int, pool_size: int, sleep: float, log: Path) -> optuna.Study:
    """A study the ``test-sleep`` workers can join."""
    study = optuna.create_study(storage=storage, study_name=name, sampler=GeneticSampler(pool_size=pool_size))
    study.set_user_attr("budget", budget)
    study.set_user_attr("objective", {"kind": KIND, "sleep": sleep, "log": str(log), "pool_size": pool_size})
    return study


def read_log(log: Path) -> list[dict]:
    """The evaluations recorded by :func:`evaluate`."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(prog="test-worker")
    add_worker_arguments(parser)
    register()
    return run_worker_command(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
