"""The worker loop in one process: registry, budget gate, one-line errors (SQLite)."""

from __future__ import annotations

import argparse
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from ciq_optuna.errors import CiqError
from ciq_optuna.study.storage import resolve_storage
from ciq_optuna.workers import (
    CANCELLED_ATTR,
    add_worker_arguments,
    budget_status,
    build_objective,
    gated_objective,
    register_objective_factory,
    run_worker,
    run_worker_command,
)

KIND = "test-quadratic"


def _quadratic(study: optuna.Study):
    def objective(trial: optuna.trial.Trial) -> float:
        x = trial.suggest_int("x", -50, 50)
        if x == 13:
            raise RuntimeError("unlucky\nmore")
        return float(x * x)

    return objective


register_objective_factory(KIND, _quadratic, sampler=lambda study: optuna.samplers.RandomSampler(seed=3))


def _study(tmp_path: Path, budget: int | None, kind: str = KIND) -> tuple[str, optuna.Study]:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    storage = resolve_storage(url, default_path=tmp_path / "x.db", heartbeat_interval=None)
    study = optuna.create_study(storage=storage, study_name="s")
    study.set_user_attr("objective", {"kind": kind})
    if budget is not None:
        study.set_user_attr("budget", budget)
    return url, study


def test_registry_builds_the_objective(tmp_path: Path) -> None:
    _, study = _study(tmp_path, 3)
    assert callable(build_objective(study))


def test_worker_reaches_budget_with_threads(tmp_path: Path) -> None:
    url, study = _study(tmp_path, 10)
    ran = run_worker(url, "s", n_jobs=2, default_path=tmp_path / "x.db")
    status = budget_status(study)
    assert status["done"] == 10 and status["running"] == 0
    assert ran == 10 + status["cancelled"]
    assert run_worker(url, "s", default_path=tmp_path / "x.db") == 0  # nothing left to do


def test_failed_evaluations_count_and_carry_a_one_line_error(tmp_path: Path) -> None:
    url, study = _study(tmp_path, 3)
    study.enqueue_trial({"x": 13})
    run_worker(url, "s", default_path=tmp_path / "x.db")
    failed = [t for t in study.trials if t.state == TrialState.FAIL]
    assert [t.params["x"] for t in failed] == [13]
    assert failed[0].user_attrs["error"] == "RuntimeError: unlucky"
    assert budget_status(study)["done"] == 3


def test_trial_beyond_the_budget_is_cancelled(tmp_path: Path) -> None:
    _, study = _study(tmp_path, 2)
    held = [study.ask(), study.ask()]  # two trials another worker is running
    trial = study.ask()
    with pytest.raises(optuna.TrialPruned):
        gated_objective(study, _quadratic(study), 2)(trial)
    assert trial.user_attrs[CANCELLED_ATTR]
    assert trial.params == {}
    for t in held:
        study.tell(t, 1.0)


def test_a_retry_queued_after_the_budget_was_met_is_cancelled_not_left_waiting(tmp_path: Path) -> None:
    # Optuna fails a dead worker's trial, then queues its retry; another worker may have taken
    # the slot in between, so the retry is left over once the budget is met.
    url, study = _study(tmp_path, 3)
    run_worker(url, "s", default_path=tmp_path / "x.db")
    study.enqueue_trial({"x": 7})  # the late retry
    assert run_worker(url, "s", default_path=tmp_path / "x.db") == 0
    states = [t.state for t in study.get_trials(deepcopy=False)]
    assert TrialState.WAITING not in states
    left = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.PRUNED]
    assert len(left) == 1 and left[0].user_attrs[CANCELLED_ATTR] and left[0].params == {}
    assert budget_status(study)["done"] == 3


def test_missing_budget_and_unknown_kind(tmp_path: Path) -> None:
    url, _ = _study(tmp_path, None)
    with pytest.raises(CiqError, match="has no budget; give --n-trials or --timeout"):
        run_worker(url, "s", default_path=tmp_path / "x.db")
    assert run_worker(url, "s", n_trials=2, default_path=tmp_path / "x.db") == 2


def test_unknown_study_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url, _ = _study(tmp_path, 1)
    parser = argparse.ArgumentParser()
    add_worker_arguments(parser)
    code = run_worker_command(parser.parse_args(["--storage", url, "--study", "nope"]))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [f"ciq-optuna worker: error: no study named 'nope' in {url}"]


def test_study_without_ciq_metadata_is_refused(tmp_path: Path) -> None:
    url, _ = _study(tmp_path, 1, kind="never-registered")
    with pytest.raises(CiqError):
        run_worker(url, "s", default_path=tmp_path / "x.db")


def test_budget_status_counted_once_per_finished_trial_equals_a_full_count(tmp_path: Path) -> None:
    """budget_status keeps counts of finished trials between calls: after every kind of change
    (new trials, a RUNNING trial finishing, a queued one, a stale failure, a cancelled one, a
    second process's trials) it equals a count over every trial."""
    from ciq_optuna.study.budget import CANCELLED_ATTR, ERROR_ATTR, _scan

    db = tmp_path / "b.db"
    study = optuna.create_study(storage=resolve_storage(None, default_path=db), study_name="b")
    other = optuna.load_study(storage=resolve_storage(None, default_path=db), study_name="b")

    def check() -> None:
        assert budget_status(study) == _scan(study.get_trials(deepcopy=False))

    running = study.ask()
    check()
    for i in range(5):
        t = study.ask()
        study.tell(t, float(i))
        check()
    study.enqueue_trial({})
    check()
    failed = study.ask()  # the queued trial, failed with an error: counts
    failed.set_user_attr(ERROR_ATTR, "boom")
    study.tell(failed, state=TrialState.FAIL)
    check()
    stale = other.ask()
    check()
    other.tell(stale, state=TrialState.FAIL)  # no error: a stale failure
    check()
    cancelled = other.ask()
    cancelled.set_user_attr(CANCELLED_ATTR, "full")
    other.tell(cancelled, state=TrialState.PRUNED)
    check()
    study.tell(running, 1.0)
    check()
    assert budget_status(study) == {"done": 7, "running": 0, "waiting": 0, "stale": 1, "cancelled": 1}
