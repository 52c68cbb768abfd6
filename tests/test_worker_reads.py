"""What a worker reads besides its trials: the budget check after each trial (read only when the
trials changed since the last read could reach the target), the stale-trial check (one plain
statement), and the planning lock's lease renewed on the storage's heartbeat thread."""

from __future__ import annotations

import datetime
import threading
from pathlib import Path

import optuna
import pytest
import sqlalchemy as sa
from optuna.trial import TrialState

from ciq_optuna.study import _optuna
from ciq_optuna.study._optuna import models
from ciq_optuna.study.budget import budget_status, done_reaches, held_reaches
from ciq_optuna.study.storage import resolve_storage


def _url(database: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue("postgres_db_url") if database == "postgresql" else f"sqlite:///{tmp_path}/w.db"


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_budget_checks_read_only_when_the_unread_trials_could_reach_the_target(
    database: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _url(database, tmp_path, request)
    one = resolve_storage(url, default_path=tmp_path / "x.db", heartbeat_interval=None)
    two = resolve_storage(url, default_path=tmp_path / "x.db", heartbeat_interval=None)
    mine = optuna.create_study(storage=one, study_name="b")
    mine.optimize(lambda t: t.suggest_int("x", 0, 9), n_trials=3)
    other = optuna.load_study(storage=two, study_name="b")
    running = [other.ask() for _ in range(2)]
    mine.get_trials(deepcopy=False)  # the last read: 3 done, 2 running elsewhere
    reads = []
    read = _optuna.read_trials
    monkeypatch.setattr(_optuna, "read_trials", lambda *a: reads.append(1) or read(*a))

    assert not done_reaches(mine, 10) and not held_reaches(mine, 10)
    assert reads == []  # 3 done + at most 2 changed < 10: no read of the study
    for trial in running:
        other.tell(trial, 1.0)
    other.optimize(lambda t: t.suggest_int("x", 0, 9), n_trials=3)  # 8 done in all
    assert not done_reaches(mine, 11) and reads == []  # 3 + 2 running then + 3 new < 11
    assert done_reaches(mine, 8) and reads  # could reach 8: read, and it does
    assert not done_reaches(mine, 9)
    waiting = other.ask()  # running elsewhere: holds a slot, not counted
    assert held_reaches(mine, 9) and not done_reaches(mine, 9)
    other.tell(waiting, state=TrialState.FAIL)  # without an error: a stale failure, no slot
    assert not held_reaches(mine, 9)
    status = budget_status(mine)
    assert (status["done"], status["stale"]) == (8, 1)


def _stale_rows(url: str, tmp_path: Path) -> tuple[optuna.storages.BaseStorage, int, dict[str, int]]:
    """A study with a trial whose heartbeat is an hour old, one beaten now, one without heartbeat."""
    storage = resolve_storage(url, default_path=tmp_path / "x.db", heartbeat_interval=1, grace_period=2)
    study = optuna.create_study(storage=storage, study_name="s")
    old, fresh = (storage.create_new_trial(study._study_id) for _ in range(2))
    unbeaten = storage.backend.create_new_trial(study._study_id)  # plain Optuna: no heartbeat
    beats = models.TrialHeartbeatModel.__table__
    with storage.backend.engine.begin() as conn:
        hour_ago = conn.execute(sa.select(sa.func.now())).scalar().replace(tzinfo=None) - datetime.timedelta(hours=1)
        conn.execute(sa.update(beats).where(beats.c.trial_id == old).values(heartbeat=hour_ago))
    return storage, study._study_id, {"old": old, "fresh": fresh, "unbeaten": unbeaten}


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_stale_check_in_one_statement_finds_what_optunas_orm_query_finds(
    database: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The batched storage's check (``running_beats`` through its own connection) and the plain
    RDB storage's agree with Optuna's ORM query on the heartbeats, and expire a trial without
    heartbeat only once it was seen without one for the grace period."""
    url = _url(database, tmp_path, request)
    storage, sid, ids = _stale_rows(url, tmp_path)
    orm = optuna.storages.RDBStorage._get_stale_trial_ids(storage.backend, sid)
    assert orm == [ids["old"]]
    assert storage._get_stale_trial_ids(sid) == [ids["old"]]
    assert storage.backend._get_stale_trial_ids(sid) == [ids["old"]]
    first_seen = storage.backend._unbeaten[ids["unbeaten"]]
    storage.backend._unbeaten[ids["unbeaten"]] = first_seen - 3  # seen 3 s ago without heartbeat
    assert sorted(storage.backend._get_stale_trial_ids(sid)) == sorted([ids["old"], ids["unbeaten"]])


def test_planning_lock_lease_is_renewed_on_the_heartbeat_thread(
    postgres_db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While held, the planning lock's session is touched every renewal period by the storage's
    heartbeat thread (no thread of its own); once released, no more."""
    from ciq_optuna.study import leases

    monkeypatch.setattr(leases, "PLAN_LOCK_RENEW_S", 0.1)
    storage = resolve_storage(postgres_db_url, default_path=tmp_path / "x.db")
    optuna.create_study(storage=storage, study_name="l")
    lock = leases.PlanLock(storage, "l")
    touched: list[str] = []
    renew = lock._renew_once
    lock._renew_once = lambda: touched.append(threading.current_thread().name) or renew()  # type: ignore[method-assign]
    threads = threading.active_count()
    with lock.held():
        threading.Event().wait(0.55)
        assert threading.active_count() <= threads + 1  # at most the heartbeat thread, started now
    held = len(touched)
    threading.Event().wait(0.3)
    assert held >= 3 and len(touched) == held
    assert set(touched) == {"ciq-optuna-heartbeats"}
