"""Round trips of a PostgreSQL worker per trial: creating a trial and writing it are one query each
(no BEGIN and COMMIT), and trials created at once by several processes' storages are still
numbered 0, 1, 2... in the order of their ids, without repeats."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import optuna
import psycopg
import pytest
import sqlalchemy as sa
from optuna.trial import TrialState

from ciq_optuna.study.storage import resolve_storage


@pytest.fixture
def queries(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts of the queries (``execute``) and commits psycopg sends, by kind."""
    counts: Counter[str] = Counter()
    execute, commit = psycopg.Cursor.execute, psycopg.Connection.commit

    def counted_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        counts["execute"] += 1
        return execute(self, query, *args, **kwargs)

    def counted_commit(self: Any) -> None:
        counts["commit"] += 1
        commit(self)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted_execute)
    monkeypatch.setattr(psycopg.Connection, "commit", counted_commit)
    return counts


def test_a_trial_is_created_and_written_in_one_query_each(
    postgres_db_url: str, tmp_path: Path, queries: Counter[str]
) -> None:
    storage = resolve_storage(postgres_db_url, default_path=tmp_path / "x.db")
    study = optuna.create_study(storage=storage, study_name="q", directions=["minimize", "minimize"])
    study.optimize(lambda t: (t.suggest_int("x", 0, 9), t.suggest_float("y", 0, 1)), n_trials=2)
    sid = study._study_id
    queries.clear()
    trial_id = storage.create_new_trial(sid)
    assert queries == Counter(execute=1)  # the study's row locked and the trial inserted, in one query
    dist = optuna.distributions.IntDistribution(0, 9)
    storage.set_trial_param(trial_id, "x", 4, dist)
    storage.set_trial_param(trial_id, "y", 1 / 3, optuna.distributions.FloatDistribution(0, 1))
    storage.set_trial_user_attr(trial_id, "u", {"a": [1, 2]})
    storage.set_trial_system_attr(trial_id, "s", "v")
    queries.clear()
    assert storage.set_trial_state_values(trial_id, TrialState.COMPLETE, [0.1 + 0.2, float("inf")])
    assert queries == Counter(execute=1)
    with pytest.raises(optuna.exceptions.UpdateFinishedTrialError):
        storage.set_trial_state_values(trial_id, TrialState.COMPLETE, [1.0, 2.0])

    stored = optuna.load_study(study_name="q", storage=postgres_db_url).trials[-1]
    assert (stored.number, stored.state, stored.values) == (2, TrialState.COMPLETE, [0.1 + 0.2, float("inf")])
    assert (stored.params, stored.user_attrs, stored.system_attrs) == ({"x": 4, "y": 1 / 3}, {"u": {"a": [1, 2]}}, {"s": "v"})


def test_trials_created_at_once_by_several_storages_are_numbered_without_repeats(
    postgres_db_url: str, tmp_path: Path
) -> None:
    storages = [resolve_storage(postgres_db_url, default_path=tmp_path / "x.db") for _ in range(4)]
    sid = optuna.create_study(storage=storages[0], study_name="n")._study_id
    start = threading.Barrier(len(storages))
    errors: list[BaseException] = []

    def create(storage: optuna.storages.BaseStorage) -> None:
        try:
            start.wait()
            for _ in range(30):
                storage.set_trial_state_values(storage.create_new_trial(sid), TrialState.FAIL)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=create, args=(s,)) for s in storages]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    engine = sa.create_engine(postgres_db_url)
    with engine.connect() as conn:
        numbers = conn.execute(sa.text("SELECT number FROM trials WHERE study_id = :s ORDER BY trial_id"), {"s": sid})
        assert [n for (n,) in numbers] == list(range(120))
    engine.dispose()


def test_creating_a_trial_of_no_study_is_a_key_error(postgres_db_url: str, tmp_path: Path) -> None:
    storage = resolve_storage(postgres_db_url, default_path=tmp_path / "x.db")
    optuna.create_study(storage=storage, study_name="k")
    with pytest.raises(KeyError):
        storage.create_new_trial(9999)


def test_the_budget_checks_look_answers_the_next_look_for_a_waiting_trial(
    postgres_db_url: str, tmp_path: Path, queries: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = resolve_storage(postgres_db_url, default_path=tmp_path / "x.db")
    other = resolve_storage(postgres_db_url, default_path=tmp_path / "x.db")
    study = optuna.create_study(storage=mine, study_name="w")
    study.optimize(lambda t: t.suggest_int("x", 0, 9), n_trials=2)
    sid = study._study_id
    waiting = (TrialState.WAITING,)

    queries.clear()
    assert mine.unread_bound(sid) == 0
    assert mine.get_all_trials(sid, states=waiting) == [] and queries == Counter(execute=1)
    assert mine.get_all_trials(sid, states=waiting) == [] and queries == Counter(execute=2)  # once only

    optuna.load_study(study_name="w", storage=other).enqueue_trial({"x": 3})
    assert mine.unread_bound(sid) == 1
    assert [t.system_attrs["fixed_params"] for t in mine.get_all_trials(sid, states=waiting)] == [{"x": 3}]

    study.optimize(lambda t: t.suggest_int("x", 0, 9), n_trials=1)  # runs the enqueued trial
    monkeypatch.setattr("ciq_optuna.study._optuna.WAITING_LOOK_S", 0.0)
    assert mine.unread_bound(sid) == 0
    optuna.load_study(study_name="w", storage=other).enqueue_trial({"x": 4})
    found = [t.system_attrs["fixed_params"] for t in mine.get_all_trials(sid, states=waiting)]  # after the look
    assert found == [{"x": 4}]
