"""Worker processes on one study in a real PostgreSQL server (tests/conftest.py starts it).

Eight concurrent workers reach the budget exactly; a SIGKILLed worker's trial is failed by
heartbeat and its configuration retried; a server restart is survived; the password never
shows up in any output or in the study.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import time
from pathlib import Path

import optuna
import pytest
import test_workers_objectives as objectives
from optuna.trial import TrialState
from test_workers_processes import check_study, outputs, start_worker, wait_all

from ciq_optuna.study.storage import STORAGE_ENV, resolve_storage

pytestmark = pytest.mark.postgres


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _everything_stored(study: optuna.Study) -> str:
    """Study and trial attributes, params and values as one string (to grep for secrets)."""
    parts = [
        json.dumps(study.user_attrs, default=str),
        json.dumps(study._storage.get_study_system_attrs(study._study_id), default=str),
    ]
    for t in study.get_trials(deepcopy=False):
        parts.append(json.dumps([t.params, t.user_attrs, t.system_attrs, t.values], default=str))
    return "\n".join(parts)


def test_eight_worker_processes_reach_the_budget_exactly(
    postgres_server, postgres_db_url, tmp_path: Path
) -> None:
    """8 processes, budget 16, GeneticSampler pool 4: 16 COMPLETE trials, 4 generations of 4,
    no configuration evaluated twice; the URL comes from the environment and its password
    appears nowhere."""
    budget, pool = 16, 4
    log = tmp_path / "evaluations.jsonl"
    storage = resolve_storage(postgres_db_url, default_path=tmp_path / "unused.db")
    objectives.create_study(storage, "eight", budget=budget, pool_size=pool, sleep=0.2, log=log)
    env = {STORAGE_ENV: postgres_db_url}
    procs = [start_worker(None, "eight", tmp_path, name=f"w{i}", env=env) for i in range(8)]
    assert wait_all(procs) == [0] * 8, outputs(tmp_path)
    study = optuna.load_study(study_name="eight", storage=storage)
    check_study(study, budget, pool, log)
    workers = {e["pid"] for e in objectives.read_log(log)}
    assert len(workers) == budget  # each evaluation in its own process
    printed = outputs(tmp_path)
    assert "Traceback" not in printed
    assert postgres_server.password not in printed
    assert postgres_server.password not in _everything_stored(study)


def test_sigkilled_worker_trial_fails_by_heartbeat_and_is_retried(postgres_db_url, tmp_path: Path) -> None:
    """Worker A is SIGKILLed mid-evaluation; worker B fails A's trial after the grace period
    (3 heartbeats of 1 s), evaluates the same configuration again, and completes the budget."""
    budget, pool = 6, 2
    log = tmp_path / "evaluations.jsonl"
    storage = resolve_storage(postgres_db_url, default_path=tmp_path / "unused.db")
    objectives.create_study(storage, "kill", budget=budget, pool_size=pool, sleep=0.2, log=log)
    victim = start_worker(postgres_db_url, "kill", tmp_path, name="victim", env={"CIQ_TEST_SLEEP": "60"})
    _wait_for(lambda: len(objectives.read_log(log)) >= 1, 60, "the victim to start evaluating")
    killed_eval = objectives.read_log(log)[0]

    def configuration_stored() -> bool:
        trial = optuna.load_study(study_name="kill", storage=storage).trials[killed_eval["trial"]]
        return bool(trial.params)

    # A running trial's configuration is written shortly after it is sampled (FLUSH_DELAY).
    _wait_for(configuration_stored, 10, "the victim's configuration to be stored")
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    # The evaluation process dies with its worker (PR_SET_PDEATHSIG through the fork server).
    _wait_for(lambda: not _alive(killed_eval["pid"]), 10, "the victim's evaluation to die")

    rescuer = start_worker(postgres_db_url, "kill", tmp_path, name="rescuer", n_jobs=2)
    assert wait_all([rescuer]) == [0], outputs(tmp_path)

    study = optuna.load_study(study_name="kill", storage=storage)
    trials = study.get_trials(deepcopy=False)
    stale = [t for t in trials if t.state == TrialState.FAIL]
    assert [t.number for t in stale] == [killed_eval["trial"]]
    assert "error" not in stale[0].user_attrs
    retries = [t for t in trials if t.system_attrs.get("failed_trial") == stale[0].number]
    assert len(retries) == 1
    assert retries[0].state == TrialState.COMPLETE
    assert retries[0].params == stale[0].params == killed_eval["params"]
    assert sum(t.state == TrialState.COMPLETE for t in trials) == budget
    evaluated = collections.Counter(json.dumps(e["params"], sort_keys=True) for e in objectives.read_log(log))
    assert evaluated.pop(json.dumps(killed_eval["params"], sort_keys=True)) == 2
    assert set(evaluated.values()) == {1}


def test_workers_survive_a_database_restart(postgres_server, postgres_db_url, tmp_path: Path) -> None:
    """The server restarts while three workers run: they reconnect and finish the budget."""
    budget, pool = 16, 4
    log = tmp_path / "evaluations.jsonl"
    storage = resolve_storage(postgres_db_url, default_path=tmp_path / "unused.db")
    objectives.create_study(storage, "restart", budget=budget, pool_size=pool, sleep=0.3, log=log)
    procs = [start_worker(postgres_db_url, "restart", tmp_path, name=f"w{i}", n_jobs=2) for i in range(3)]
    _wait_for(lambda: len(objectives.read_log(log)) >= 4, 90, "four evaluations")
    postgres_server.restart()
    assert wait_all(procs) == [0] * 3, outputs(tmp_path)
    study = optuna.load_study(study_name="restart", storage=storage)
    trials = study.get_trials(deepcopy=False)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == budget, collections.Counter(t.state.name for t in trials)
    # A trial whose result could not be stored during the restart is failed and retried.
    for t in trials:
        if t.state == TrialState.FAIL:
            assert any(r.system_attrs.get("failed_trial") == t.number for r in trials)
    assert len({json.dumps(t.params, sort_keys=True) for t in complete}) == budget
    assert postgres_server.password not in outputs(tmp_path)


def test_worker_errors_are_one_line_without_password(
    postgres_server, postgres_db_url, tmp_path: Path
) -> None:
    """A missing study and an unreachable server: exit status 2, one line, no password."""
    missing = start_worker(postgres_db_url, "no-such-study", tmp_path, name="missing")
    closed = postgres_db_url.replace(f":{postgres_server.port}/", ":1/")
    unreachable = start_worker(closed, "x", tmp_path, name="unreachable")
    assert wait_all([missing, unreachable]) == [2, 2]
    for name in ("missing", "unreachable"):
        lines = (tmp_path / f"{name}.out").read_text().strip().splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith("ciq-optuna worker: error: ")
        assert postgres_server.password not in lines[0]
        assert "ciq:***@127.0.0.1" in lines[0]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_real_tune_and_worker_on_postgres_never_show_the_password(
    postgres_server, postgres_db_url, tmp_path: Path
) -> None:
    """A real ``ciq-optuna tune`` (ptxas) on PostgreSQL, then a worker joining its study: the
    password is in no output, no ACF, no study or trial attribute."""
    import subprocess
    import sys

    from test_dashboard import _require_ptxas

    _require_ptxas()
    kernel = Path(__file__).resolve().parents[1] / "examples" / "sgemm" / "sgemm.sm_80.ptx"
    env = dict(os.environ, **{STORAGE_ENV: postgres_db_url})
    tune = [sys.executable, "-m", "ciq_optuna.cli", "tune", str(kernel), "--arch", "sm_80"]
    tune += ["--minimize", "registers", "--trials", "3", "--study", "pw", "--acf", str(tmp_path / "best.acf")]
    done = subprocess.run(tune, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    storage = resolve_storage(postgres_db_url, default_path=tmp_path / "unused.db")
    study = optuna.load_study(study_name="pw", storage=storage)
    study.set_user_attr("budget", len(study.trials) + 2)
    worker = start_worker(None, "pw", tmp_path, name="worker", env={STORAGE_ENV: postgres_db_url})
    # The worker script registers only the test objective: the tune study goes to objective_from_study.
    assert wait_all([worker]) == [0], outputs(tmp_path)
    study = optuna.load_study(study_name="pw", storage=storage)
    assert sum(t.state == TrialState.COMPLETE for t in study.trials) == study.user_attrs["budget"]
    everything = "\n".join(
        [
            done.stdout,
            done.stderr,
            outputs(tmp_path),
            _everything_stored(study),
            (tmp_path / "best.acf").read_text(),
        ]
    )
    assert "ciq:***@127.0.0.1" in everything  # the URL is shown, redacted
    assert postgres_server.password not in everything
