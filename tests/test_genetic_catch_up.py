"""GeneticSampler learns the trials other workers finish while its own trial's objective runs (a
background thread started at the end of ``before_trial``, joined in ``after_trial``), so the next
planning, which several workers do one at a time under the planning lock, learns only the rest.
One process alone starts no thread."""

from __future__ import annotations

import threading
from pathlib import Path

import optuna
import pytest

from ciq_optuna.samplers import GeneticSampler, _genetic
from ciq_optuna.study.storage import resolve_storage

_THREAD = "ciq-genetic-catch-up"


def _space(trial: optuna.Trial) -> float:
    return float(trial.suggest_int("x", 0, 63) + trial.suggest_categorical("y", ["a", "b", "c"]).count("b"))


def _catch_up_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == _THREAD]


def _pair(url: str, tmp_path: Path) -> tuple[optuna.Study, optuna.Study, GeneticSampler]:
    """Two workers on one study, each with its own storage object and sampler; ``b``'s is returned."""
    sampler_b = GeneticSampler(seed=2, pool_size=8)
    a = optuna.create_study(
        storage=resolve_storage(url, default_path=tmp_path / "x.db", heartbeat_interval=None),
        study_name="w",
        sampler=GeneticSampler(seed=1, pool_size=8),
    )
    b = optuna.load_study(
        storage=resolve_storage(url, default_path=tmp_path / "x.db", heartbeat_interval=None),
        study_name="w",
        sampler=sampler_b,
    )
    return a, b, sampler_b


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_a_worker_learns_the_others_trials_while_its_objective_runs(
    database: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = request.getfixturevalue("postgres_db_url") if database == "postgresql" else f"sqlite:///{tmp_path}/w.db"
    a, b, sampler = _pair(url, tmp_path)
    b.optimize(_space, n_trials=2)  # b's first sync is the study as found
    a.optimize(_space, n_trials=3)  # another worker's trials: b learns them next, then catches up

    ready = threading.Event()
    catch_up = sampler._catch_up_with

    def when_ready(study: optuna.Study) -> None:
        ready.wait(30)
        catch_up(study)

    monkeypatch.setattr(sampler, "_catch_up_with", when_ready)
    seen = []

    def objective(trial: optuna.Trial) -> float:
        value = _space(trial)
        threads = _catch_up_threads()
        a.optimize(_space, n_trials=4)  # finished while b's objective runs
        ready.set()
        for thread in threads:
            thread.join(30)
        seen.append((len(threads), sampler._n, trial.number))
        return value

    before = sampler._n
    b.optimize(objective, n_trials=1)
    threads, learned, number = seen[0]
    assert threads == 1
    assert learned == before + 1 + 3 + 4  # b's last trial and a's 3 at planning, a's 4 during the objective
    assert _catch_up_threads() == []  # joined by after_trial

    rows = []
    add_row = sampler._add_row
    monkeypatch.setattr(sampler, "_add_row", lambda *args: rows.append(args[2]) or add_row(*args))
    b.optimize(_space, n_trials=1)
    assert rows == [number]  # the next planning learns b's own last trial only


def test_one_process_alone_starts_no_thread(tmp_path: Path) -> None:
    storage = resolve_storage(f"sqlite:///{tmp_path}/one.db", default_path=tmp_path / "x.db", heartbeat_interval=None)
    first = optuna.create_study(storage=storage, study_name="one", sampler=GeneticSampler(seed=3, pool_size=8))
    first.optimize(_space, n_trials=12)  # the history a resumed study finds
    resumed = optuna.load_study(storage=storage, study_name="one", sampler=GeneticSampler(seed=4, pool_size=8))
    counts = []

    def objective(trial: optuna.Trial) -> float:
        counts.append(len(_catch_up_threads()))
        return _space(trial)

    resumed.optimize(objective, n_trials=12)
    assert counts == [0] * 12


def test_a_failed_background_read_is_left_to_the_next_planning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, sampler = _pair(f"sqlite:///{tmp_path}/w.db", tmp_path)
    b.optimize(_space, n_trials=2)
    a.optimize(_space, n_trials=3)
    read = _genetic.cached_trials
    failed = []

    def fails_in_the_background(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
        if threading.current_thread().name == _THREAD:
            failed.append(1)
            raise OSError("connection lost")
        return read(study)

    monkeypatch.setattr(_genetic, "cached_trials", fails_in_the_background)

    def objective(trial: optuna.Trial) -> float:
        a.optimize(_space, n_trials=2)
        return _space(trial)

    b.optimize(objective, n_trials=2)
    assert len(failed) >= 2  # a thread in each of b's trials (and in a's: it sees b's trials), each read failed
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in b.trials)
    b.optimize(_space, n_trials=1)  # its planning learns what the failed reads left
    assert sampler._n == len(b.trials) - 1  # every trial but the last, learned by the planning itself
