"""Several worker processes on one study: SQLite here; PostgreSQL in test_postgres_workers.py.

Each worker is a real process (``tests/test_workers_objectives.py``) running the cheap
``test-sleep`` objective in isolated evaluation processes.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import optuna
import test_workers_objectives as objectives
from optuna.trial import TrialState

from ciq_optuna.study.storage import resolve_storage

WORKER_SCRIPT = Path(objectives.__file__).resolve()


def start_worker(
    storage: str | None,
    study: str,
    out_dir: Path,
    *,
    name: str,
    n_jobs: int = 1,
    heartbeat: int = 1,
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """Start one worker process; its stdout and stderr go to ``out_dir/<name>.out``."""
    argv = [sys.executable, str(WORKER_SCRIPT), "--study", study, "--n-jobs", str(n_jobs)]
    argv += ["--heartbeat", str(heartbeat)]
    if storage is not None:
        argv += ["--storage", storage]
    out = open(out_dir / f"{name}.out", "w")  # noqa: SIM115 - closed by the child's exit
    full_env = dict(os.environ, **(env or {}))
    full_env.pop("CIQ_TEST_SLEEP", None)
    full_env.update(env or {})
    return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=full_env, text=True)


def wait_all(procs: list[subprocess.Popen], timeout: float = 120) -> list[int]:
    """Exit statuses of ``procs`` (kills them all if one overruns ``timeout``)."""
    codes = []
    try:
        for proc in procs:
            codes.append(proc.wait(timeout=timeout))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return codes


def outputs(out_dir: Path) -> str:
    """Everything the workers printed."""
    return "\n".join(p.read_text() for p in sorted(out_dir.glob("*.out")))


def check_study(study: optuna.Study, budget: int, pool_size: int, log: Path) -> None:
    """The promises of a finished multi-worker study (see the test docstrings)."""
    trials = study.get_trials(deepcopy=False)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == budget, collections.Counter(t.state.name for t in trials)
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    # No configuration evaluated twice (a killed evaluation is retried: see the SIGKILL test).
    evaluations = objectives.read_log(log)
    configs = [json.dumps(e["params"], sort_keys=True) for e in evaluations]
    assert len(configs) == len(set(configs)) == budget
    assert len({json.dumps(t.params, sort_keys=True) for t in complete}) == budget
    # GeneticSampler: trial n is in generation n // pool_size, pool_size trials per generation.
    sizes = collections.Counter(t.user_attrs["generation"] for t in complete)
    assert sizes == {g: pool_size for g in range(budget // pool_size)}
    for t in complete:
        assert t.user_attrs["generation"] == t.number // pool_size


def test_sqlite_study_shared_by_three_worker_processes(tmp_path: Path) -> None:
    """Three processes (two threads each) on one SQLite file reach the budget exactly."""
    budget, pool = 16, 4
    db = tmp_path / "study.db"
    url = f"sqlite:///{db}"
    log = tmp_path / "evaluations.jsonl"
    objectives.create_study(
        resolve_storage(url, default_path=db), "shared", budget=budget, pool_size=pool, sleep=0.2, log=log
    )
    procs = [start_worker(url, "shared", tmp_path, name=f"w{i}", n_jobs=2) for i in range(3)]
    assert wait_all(procs) == [0] * 3, outputs(tmp_path)
    study = optuna.load_study(study_name="shared", storage=resolve_storage(url, default_path=db))
    check_study(study, budget, pool, log)
    assert "Traceback" not in outputs(tmp_path)
