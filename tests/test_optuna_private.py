"""Optuna internals used by ciq_optuna.study._optuna: they exist, and the batched storage keeps
Optuna's semantics (what another process or plain Optuna reads back), including after a kill."""

from __future__ import annotations

import datetime
import importlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from ciq_optuna.study._optuna import PRIVATE_NAMES, BatchedStorage, create_running_trial
from ciq_optuna.study.storage import resolve_storage

REPO = Path(__file__).resolve().parents[1]


def _instances() -> dict[type, object]:
    """Real objects whose instance attributes PRIVATE_NAMES names (a class alone lacks them)."""
    rdb = optuna.storages.RDBStorage("sqlite:///:memory:")
    study = optuna.create_study()
    trial = study.ask()
    study.tell(trial, 1.0)
    return {
        optuna.storages.RDBStorage: rdb,
        optuna.storages._cached_storage._CachedStorage: optuna.storages._cached_storage._CachedStorage(rdb),
        optuna.storages._cached_storage._StudyInfo: optuna.storages._cached_storage._StudyInfo(),
        optuna.study.Study: study,
        optuna.trial.Trial: trial,
        optuna.trial.FrozenTrial: study.trials[0],
        optuna.study._frozen.FrozenStudy: study._storage.get_all_studies()[0],
    }


@pytest.mark.parametrize("dotted", PRIVATE_NAMES)
def test_every_private_optuna_name_still_exists(dotted: str) -> None:
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        break
    else:  # pragma: no cover
        pytest.fail(f"no module in {dotted}")
    message = f"Optuna {optuna.__version__} has no {dotted}: update ciq_optuna/study/_optuna.py"
    for name in parts[split:]:
        if not hasattr(obj, name) and isinstance(obj, type) and obj in _instances():
            assert hasattr(_instances()[obj], name), message  # an instance attribute
            return
        assert hasattr(obj, name), message
        obj = getattr(obj, name)


def test_private_names_are_listed_once() -> None:
    assert len(set(PRIVATE_NAMES)) == len(PRIVATE_NAMES)


def test_no_private_optuna_use_outside_the_two_modules() -> None:
    """Every ``._name`` use on a study, trial, storage or distribution, and every import of a
    private Optuna or optuna-dashboard module, lives in study/_optuna.py or samplers/_optuna.py."""
    allowed = {REPO / "ciq_optuna" / "study" / "_optuna.py", REPO / "ciq_optuna" / "samplers" / "_optuna.py"}
    use = re.compile(
        r"(?<![.\w])(study|trial|frozen|storage|param_distribution|distribution)\._(?!_)[a-z]"
        r"|(from|import) optuna(_dashboard)?[.\w]*\._"
    )
    found = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for path in sorted((REPO / "ciq_optuna").rglob("*.py"))
        if path not in allowed
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if use.search(line)
    ]
    assert not found, "private Optuna use outside study/_optuna.py:\n" + "\n".join(found)


def _objective(trial: optuna.Trial) -> float:
    x = trial.suggest_int("x", 0, 50)
    c = trial.suggest_categorical("c", ["a", "b", "(not passed)"])
    trial.set_user_attr("flags", [f"-x{x}", c])
    trial.set_user_attr("metrics", {"registers": x, "spill": 0.5})
    trial.storage.set_trial_system_attr(trial._trial_id, "note", x)
    if x % 7 == 0:
        raise ValueError("seven")
    return float(x) + (c == "a")


def test_batched_trials_read_back_like_plain_optuna(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    storage = resolve_storage(None, default_path=db, heartbeat_interval=None)
    assert isinstance(storage, BatchedStorage)
    study = optuna.create_study(
        storage=storage, study_name="s", sampler=optuna.samplers.RandomSampler(seed=1)
    )
    study.enqueue_trial({"x": 14, "c": "a"})
    study.optimize(_objective, n_trials=30, catch=(ValueError,))
    plain = optuna.load_study(study_name="s", storage=optuna.storages.RDBStorage(f"sqlite:///{db}"))
    ours, theirs = study.get_trials(), plain.get_trials()
    assert len(theirs) == 30
    assert theirs[0].params == {"x": 14, "c": "a"} and theirs[0].state == TrialState.FAIL
    for a, b in zip(ours, theirs):
        assert (a.number, a.state, a.values, a.params, a.distributions) == (
            b.number,
            b.state,
            b.values,
            b.params,
            b.distributions,
        )
        assert a.user_attrs == b.user_attrs and a.user_attrs["flags"][0] == f"-x{a.params['x']}"
        assert b.system_attrs["note"] == b.params["x"]
        assert a.datetime_complete == b.datetime_complete
    assert study.best_trial.number == plain.best_trial.number


def test_times_and_first_heartbeat_stored_as_optuna_stores_them(tmp_path: Path, monkeypatch) -> None:
    """Trial times are stored in UTC whatever the local zone (plain Optuna reads the same times
    back), and a trial is created with its first heartbeat (its lease starts with it)."""
    import sqlalchemy

    monkeypatch.setenv("TZ", "Asia/Kolkata")  # UTC+5:30: a local time stored as UTC would show
    time.tzset()
    try:
        db = tmp_path / "tz.db"
        storage = resolve_storage(None, default_path=db, heartbeat_interval=60)
        study = optuna.create_study(storage=storage, study_name="tz")
        trial = study.ask()
        with sqlalchemy.create_engine(f"sqlite:///{db}").connect() as conn:
            beats = conn.execute(sqlalchemy.text("SELECT trial_id FROM trial_heartbeats")).scalars().all()
        assert beats == [trial._trial_id]
        study.tell(trial, 1.0)
        ours = study.trials[0]
        theirs = optuna.load_study(study_name="tz", storage=optuna.storages.RDBStorage(f"sqlite:///{db}")).trials[0]
        assert (ours.number, ours.datetime_start, ours.datetime_complete) == (
            theirs.number,
            theirs.datetime_start,
            theirs.datetime_complete,
        )
        assert abs((theirs.datetime_start - datetime.datetime.now()).total_seconds()) < 60
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_a_second_process_sees_new_trials_and_its_writes(tmp_path: Path) -> None:
    db = tmp_path / "two.db"
    one = resolve_storage(None, default_path=db, heartbeat_interval=None)
    two = resolve_storage(None, default_path=db, heartbeat_interval=None)
    s1 = optuna.create_study(storage=one, study_name="s")
    s1.optimize(_objective, n_trials=3, catch=(ValueError,))
    s2 = optuna.load_study(storage=two, study_name="s")
    running = s2.ask()
    assert len(s1.get_trials()) == 4  # the light query saw the new trial
    assert s1.get_trials()[-1].state == TrialState.RUNNING
    running.suggest_int("x", 0, 50)
    s2.tell(running, 1.0)
    assert s1.get_trials()[-1].state == TrialState.COMPLETE and "x" in s1.get_trials()[-1].params
    # a parameter whose distribution conflicts with the study's is refused, as by Optuna
    t = s2.ask()
    with pytest.raises(ValueError):
        t.suggest_float("x", 0.0, 1.0)


def test_a_trial_enqueued_by_another_process_is_run_without_a_read_of_the_study_otherwise(
    tmp_path: Path, monkeypatch
) -> None:
    """Optuna's look for WAITING trials finds one enqueued (or re-queued) by another process while
    other processes' trials run; when there is none it reads no trial."""
    import ciq_optuna.study._optuna as private

    db = tmp_path / "w.db"
    one = resolve_storage(None, default_path=db, heartbeat_interval=None)
    two = resolve_storage(None, default_path=db, heartbeat_interval=None)
    s1 = optuna.create_study(storage=one, study_name="s")
    s1.optimize(_objective, n_trials=2, catch=(ValueError,))
    s2 = optuna.load_study(storage=two, study_name="s")
    other = s2.ask()  # another process's running trial: every read of s1 is a real one now
    reads = []
    real = private.read_trials
    monkeypatch.setattr(private, "read_trials", lambda *a: reads.append(a) or real(*a))
    s1.get_trials(deepcopy=False)  # reads the other process's running trial
    reads.clear()
    sid = s1._study_id
    assert one.get_all_trials(sid, deepcopy=False, states=(TrialState.WAITING,)) == []
    assert reads == []  # one index look-up, no read of the changed trials
    s2.enqueue_trial({"x": 7})
    waiting = one.get_all_trials(sid, deepcopy=False, states=(TrialState.WAITING,))
    assert [t.state for t in waiting] == [TrialState.WAITING]
    assert waiting[0].system_attrs["fixed_params"] == {"x": 7}
    trial = s1.ask()  # Optuna pops the enqueued trial
    assert trial.number == waiting[0].number and trial.suggest_int("x", 0, 50) == 7
    s1.tell(trial, 1.0)
    s2.tell(other, 2.0)
    assert one.get_all_trials(sid, deepcopy=False, states=(TrialState.WAITING,)) == []


def test_trials_numbered_as_optuna_numbers_them_beside_plain_optuna(tmp_path: Path) -> None:
    """Trial numbers from the previous trial's number are Optuna's count of earlier trials, also
    when plain Optuna, a template trial and a second study create trials in between, and when a
    trial without a number (as if caught between Optuna's insert and numbering) comes before."""
    import sqlalchemy

    db = tmp_path / "n.db"
    ours = resolve_storage(None, default_path=db, heartbeat_interval=None)
    plain = optuna.storages.RDBStorage(f"sqlite:///{db}")
    s1 = optuna.create_study(storage=ours, study_name="a")
    other = optuna.create_study(storage=ours, study_name="b")
    s2 = optuna.load_study(storage=plain, study_name="a")
    for i in range(12):
        [s1, s2, other][i % 3].ask()
        if i % 4 == 0:
            s1.add_trial(optuna.trial.create_trial(value=1.0))
    with sqlalchemy.create_engine(f"sqlite:///{db}").begin() as conn:
        conn.execute(sqlalchemy.text("UPDATE trials SET number = NULL WHERE trial_id = (SELECT max(trial_id) FROM trials WHERE study_id = 1)"))
    create_running_trial(ours._conns, s1._study_id, beat=False)  # not through the study: it reads them all
    with sqlalchemy.create_engine(f"sqlite:///{db}").begin() as conn:
        rows = conn.execute(sqlalchemy.text("SELECT study_id, number FROM trials ORDER BY trial_id")).all()
    for study_id in (1, 2):
        numbers = [n for sid, n in rows if sid == study_id]
        count = len(numbers)
        if study_id == 1:
            assert numbers[-2] is None and numbers[-1] == count - 1  # counted when the previous has none
            numbers = numbers[:-2] + [count - 2, count - 1]
        assert numbers == list(range(count)) and count >= 4, (study_id, numbers)


def test_killed_tune_keeps_every_finished_trial_and_resumes(tmp_path: Path) -> None:
    """SIGKILL in the middle of a search: every finished trial is stored whole; the same
    command resumes and completes the budget."""
    db = tmp_path / "k.db"
    script = textwrap.dedent(
        f"""
        import optuna, time
        from ciq_optuna.study.storage import resolve_storage
        storage = resolve_storage(None, default_path={str(db)!r}, heartbeat_interval=1, grace_period=2)
        study = optuna.create_study(storage=storage, study_name="k", load_if_exists=True)
        def objective(trial):
            x = trial.suggest_int("x", 0, 1000)
            trial.set_user_attr("flags", [str(x)])
            time.sleep(0.05)
            return x
        study.optimize(objective, n_trials=400)
        """
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-c", script], env=env)
    plain = optuna.storages.RDBStorage(f"sqlite:///{db}")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        time.sleep(0.5)
        try:
            done = optuna.load_study(study_name="k", storage=plain).get_trials(states=(TrialState.COMPLETE,))
        except KeyError:
            continue
        if len(done) >= 5:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    trials = optuna.load_study(study_name="k", storage=optuna.storages.RDBStorage(f"sqlite:///{db}")).trials
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) >= 5
    for t in complete:  # whole: parameters, attributes and value together
        assert t.user_attrs["flags"] == [str(t.params["x"])] and t.value == t.params["x"]
    assert all(t.state in (TrialState.COMPLETE, TrialState.RUNNING) for t in trials)
    time.sleep(4)  # the heartbeat goes stale (grace 2 s; SQLite time has 1 s steps); the next run fails it
    storage = resolve_storage(None, default_path=db, heartbeat_interval=1, grace_period=2)
    study = optuna.load_study(study_name="k", storage=storage)
    study.optimize(lambda t: t.suggest_int("x", 0, 1000), n_trials=2)
    states = [t.state for t in study.trials]
    assert TrialState.RUNNING not in states
    assert sum(s == TrialState.COMPLETE for s in states) == len(complete) + 2


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_read_trials_returns_what_optunas_orm_read_returns(
    database: str, tmp_path: Path, request, monkeypatch
) -> None:
    """The one-statement read of changed trials equals ``RDBStorage._get_trials`` field by field:
    every distribution kind, infinite and multi-objective values, intermediate values (NaN, inf),
    attributes, WAITING/FAIL/RUNNING trials, the included-ids filter; KeyError for no study."""
    from ciq_optuna.study._optuna import read_trials

    url = request.getfixturevalue("postgres_db_url") if database == "postgresql" else f"sqlite:///{tmp_path}/r.db"
    storage = resolve_storage(url, default_path=tmp_path / "x.db")
    study = optuna.create_study(storage=storage, directions=["minimize", "maximize"])
    dists = {
        "f": optuna.distributions.FloatDistribution(1e-3, 1.0, log=True),
        "g": optuna.distributions.FloatDistribution(0.0, 1.0, step=0.25),
        "i": optuna.distributions.IntDistribution(2, 64, step=2),
        "c": optuna.distributions.CategoricalDistribution(["a", None, 3, 2.5, True]),
    }
    params = {"f": 0.01, "g": 0.75, "i": 8, "c": None}
    study.add_trial(
        optuna.trial.create_trial(
            params=params, distributions=dists, values=[float("inf"), -float("inf")],
            user_attrs={"flags": ["-O3"], "m": {"x": 1}}, system_attrs={"s": 2},
            intermediate_values={0: 1.5, 3: float("nan"), 7: float("-inf")},
        )
    )
    study.add_trial(optuna.trial.create_trial(state=TrialState.FAIL, user_attrs={"error": "boom"}))
    study.enqueue_trial({"i": 4, "c": "a"})
    running = study.ask({"f": dists["f"]})
    running.set_user_attr("u", [1, 2])
    study.tell(study.ask(dists), [2.0, 3.0])
    study.enqueue_trial({"i": 6})
    storage.flush_trial(running._trial_id)  # its parameter now, not by the timer between two reads
    backend = storage._backend
    sid = study._study_id
    ids = [t._trial_id for t in backend.get_all_trials(sid, deepcopy=False)]
    for included, greater_than in ((set(), -1), ({ids[2], ids[4]}, ids[3]), (set(), ids[1]), ({ids[0]}, ids[-1])):
        ours = read_trials(storage._conns, sid, included, greater_than)
        theirs = backend._get_trials(sid, None, included, greater_than)
        assert [t._trial_id for t in ours] == [t._trial_id for t in theirs]
        for a, b in zip(ours, theirs):
            assert repr(a) == repr(b)  # every field, NaN included (repr, since NaN != NaN)
    assert [t.state for t in read_trials(storage._conns, sid, set(), -1)] == [
        TrialState.COMPLETE, TrialState.FAIL, TrialState.RUNNING, TrialState.COMPLETE, TrialState.WAITING
    ]
    assert running.number == 2  # the first enqueued trial, asked for and running with its attribute
    monkeypatch.setattr("ciq_optuna.study._optuna.MAX_LISTED_IDS", 1)  # too many ids: read all above the lowest
    many = read_trials(storage._conns, sid, {ids[0], ids[2]}, ids[3])
    assert [t._trial_id for t in many] == ids and [repr(t) for t in many] == [repr(t) for t in read_trials(storage._conns, sid, set(), -1)]
    with pytest.raises(KeyError):
        read_trials(storage._conns, sid + 1000, set(), -1)


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_another_storages_running_trial_is_seen_with_its_later_changes(database: str, tmp_path: Path, request) -> None:
    """A read of the study sees each later change of another storage's running trial: its claim
    (written at once), parameters and attributes flushed later (an attribute rewritten in place
    too, with a value of the same length), its final state and values; and this storage's own
    running trial failed by another one (as a stale trial)."""
    from ciq_optuna.study.storage import WRITE_THROUGH_ATTRS

    url = request.getfixturevalue("postgres_db_url") if database == "postgresql" else f"sqlite:///{tmp_path}/c.db"
    one = resolve_storage(url, default_path=tmp_path / "x.db", heartbeat_interval=None)
    two = resolve_storage(url, default_path=tmp_path / "x.db", heartbeat_interval=None)
    s1 = optuna.create_study(storage=one, study_name="s")
    s1.optimize(_objective, n_trials=2, catch=(ValueError,))
    s2 = optuna.load_study(storage=two, study_name="s")
    other = s2.ask()

    def latest() -> optuna.trial.FrozenTrial:
        return one.get_all_trials(s1._study_id, deepcopy=False)[other.number]

    assert latest().state == TrialState.RUNNING and latest().params == {}
    claim = sorted(WRITE_THROUGH_ATTRS)[0]
    two.set_trial_system_attr(other._trial_id, claim, "plan-1")
    assert latest().system_attrs[claim] == "plan-1"
    other.suggest_int("x", 0, 50)
    other.set_user_attr("m", "aa")
    two.flush_trial(other._trial_id)
    assert latest().params == {"x": other.params["x"]} and latest().user_attrs == {"m": "aa"}
    other.set_user_attr("m", "bb")
    two.flush_trial(other._trial_id)
    assert latest().user_attrs == {"m": "bb"}
    s2.tell(other, 4.0)
    assert latest().state == TrialState.COMPLETE and latest().value == 4.0
    s2.ask()  # another running trial elsewhere: this storage's reads are not the one index look-up
    mine = s1.ask()
    mine.suggest_int("x", 0, 50)
    one.flush_trial(mine._trial_id)
    assert s1.get_trials(deepcopy=False)[mine.number].state == TrialState.RUNNING
    two.backend.set_trial_state_values(mine._trial_id, TrialState.FAIL)  # failed as stale elsewhere
    assert s1.get_trials(deepcopy=False)[mine.number].state == TrialState.FAIL


def test_trials_are_held_on_one_heartbeat_thread_of_their_storage(tmp_path: Path) -> None:
    """Optuna's trial loop holds each trial on its BatchedStorage's beater thread (through the
    name it calls, replaced in ciq_optuna.study._optuna) instead of starting a heartbeat thread:
    no thread per trial, and a trial that runs longer than the interval still has its heartbeat
    renewed and its parameter written meanwhile. Other storages keep Optuna's thread."""
    import sqlalchemy
    from optuna.storages._heartbeat import HeartbeatThread

    from ciq_optuna.study._optuna import get_heartbeat_thread

    db = tmp_path / "h.db"
    storage = resolve_storage(None, default_path=db, heartbeat_interval=1, grace_period=3)
    study = optuna.create_study(storage=storage, study_name="s")
    plain = sqlalchemy.create_engine(f"sqlite:///{db}")
    seen = []

    def beat_and_params(trial_id: int) -> tuple[str, int]:
        with plain.connect() as conn:
            beat = conn.execute(sqlalchemy.text(f"SELECT heartbeat FROM trial_heartbeats WHERE trial_id = {trial_id}"))
            params = conn.execute(sqlalchemy.text(f"SELECT count(*) FROM trial_params WHERE trial_id = {trial_id}"))
            return str(beat.scalar()), params.scalar()

    def objective(trial: optuna.Trial) -> float:
        x = trial.suggest_int("x", 0, 9)
        names = [t.name for t in threading.enumerate()]
        seen.append((dict(storage._beater._held), names))
        if trial.number == 2:  # longer than two heartbeat intervals
            first = beat_and_params(trial._trial_id)
            time.sleep(2.6)
            seen.append((first, beat_and_params(trial._trial_id)))
        return float(x)

    study.optimize(objective, n_trials=4)
    trial_ids = [t._trial_id for t in study.trials]
    for i in (0, 1, 3):
        held, names = seen[i + (i == 3)]
        assert held == {trial_ids[i]: 1}, held  # Optuna's hold; the lease's ended with the planning
        assert "ciq-optuna-heartbeats" in names and not any("_record_heartbeat" in n for n in names), names
    (beat0, params0), (beat1, params1) = seen[3]
    assert beat1 > beat0 and params1 == 1, seen[3]  # renewed; the parameter written before the end
    assert storage._beater._held == {}
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 4
    rdb = optuna.storages.RDBStorage(f"sqlite:///{db}", heartbeat_interval=1)
    assert isinstance(get_heartbeat_thread(trial_ids[0], rdb), HeartbeatThread)


def test_a_read_of_an_unchanged_sqlite_study_runs_no_statement(tmp_path: Path) -> None:
    """SQLite: when no other connection committed since the last read of the study (PRAGMA
    data_version), reading it again, or looking for WAITING trials, runs no SQL statement; what
    another process commits is seen at the next read."""
    import sqlalchemy

    db = tmp_path / "v.db"
    one = resolve_storage(None, default_path=db, heartbeat_interval=None)
    two = resolve_storage(None, default_path=db, heartbeat_interval=None)
    s1 = optuna.create_study(storage=one, study_name="s")
    s1.optimize(_objective, n_trials=3, catch=(ValueError,))
    statements: list[str] = []
    sqlalchemy.event.listen(one.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    s1.get_trials(deepcopy=False)
    statements.clear()
    for _ in range(3):
        assert len(s1.get_trials(deepcopy=False)) == 3
        assert one.get_all_trials(s1._study_id, deepcopy=False, states=(TrialState.WAITING,)) == []
    assert statements == []
    s2 = optuna.load_study(storage=two, study_name="s")
    s2.enqueue_trial({"x": 3})
    assert [t.state for t in s1.get_trials(deepcopy=False)][-1] == TrialState.WAITING
    assert statements  # read for real
    trial = s1.ask()  # and run by this process
    assert trial.suggest_int("x", 0, 50) == 3
    s1.tell(trial, 1.0)
    running = s2.ask()
    assert [t.state for t in s1.get_trials(deepcopy=False)][-2:] == [TrialState.COMPLETE, TrialState.RUNNING]
    s2.tell(running, 2.0)
    assert s1.get_trials(deepcopy=False)[-1].state == TrialState.COMPLETE
def test_in_read_once_the_study_is_read_at_the_first_look_only(tmp_path: Path, monkeypatch) -> None:
    """Under the planning lock a sampler looks at the study twice: the first look reads what
    other processes wrote before (fresh), the second reads nothing; after the block every look
    reads again."""
    import ciq_optuna.study._optuna as private

    db = tmp_path / "once.db"
    one = resolve_storage(None, default_path=db, heartbeat_interval=None)
    two = resolve_storage(None, default_path=db, heartbeat_interval=None)
    s1 = optuna.create_study(storage=one, study_name="s")
    s1.optimize(_objective, n_trials=2, catch=(ValueError,))
    s2 = optuna.load_study(storage=two, study_name="s")
    running = s2.ask()  # another process's running trial: every look of s1 is a real read
    reads = []
    real = private.read_trials
    monkeypatch.setattr(private, "read_trials", lambda *a: reads.append(a) or real(*a))
    s1.get_trials(deepcopy=False)
    later = s2.ask()  # created before the block: the block's first look sees it
    reads.clear()
    with private.read_study_once(s1):
        assert [t.number for t in s1.get_trials(deepcopy=False)][-2:] == [running.number, later.number]
        assert len(reads) == 1
        s2.tell(running, 1.0)
        assert s1.get_trials(deepcopy=False)[running.number].state == TrialState.RUNNING  # not read again
        assert len(reads) == 1
    assert s1.get_trials(deepcopy=False)[running.number].state == TrialState.COMPLETE
    assert len(reads) == 2


def test_read_once_holds_for_the_planning_lock_of_a_tune_worker(tmp_path: Path, monkeypatch) -> None:
    """The locked sampler's before_trial runs in read_once on the storage tune opens (a mistake in
    the wiring, or an Optuna change of the study passed to the sampler, would lose it silently)."""
    import ciq_optuna.study._optuna as private
    from ciq_optuna.study.leases import locked_sampler

    storage = resolve_storage(None, default_path=tmp_path / "lk.db", heartbeat_interval=None)
    assert isinstance(storage, BatchedStorage)
    entered = []
    real = BatchedStorage.read_once
    monkeypatch.setattr(BatchedStorage, "read_once", lambda self, sid: entered.append(sid) or real(self, sid))
    sampler = locked_sampler(optuna.samplers.RandomSampler(seed=0), storage, "lk")
    study = optuna.create_study(storage=storage, study_name="lk", sampler=sampler)
    study.optimize(_objective, n_trials=2, catch=(ValueError,))
    assert entered == [study._study_id] * 2
    assert private.read_study_once(optuna.create_study()).__class__.__name__ == "nullcontext"


def test_statements_run_through_the_driver_raise_sqlalchemys_errors(postgres_db_url: str, tmp_path: Path) -> None:
    """On PostgreSQL the storage's own statements bypass SQLAlchemy's execution (``_Direct``): a
    constraint violation is still SQLAlchemy's IntegrityError, a connection the server ended is
    an OperationalError marked invalidated, and the next statement runs on a fresh connection."""
    import sqlalchemy

    from ciq_optuna.study import _optuna as private

    storage = resolve_storage(postgres_db_url, default_path=tmp_path / "x.db", heartbeat_interval=None)
    study = optuna.create_study(storage=storage, study_name="d")
    for value in (1.0, 2.0):
        study.add_trial(optuna.trial.create_trial(value=value))
    conns, tid = storage._conns, study.trials[0]._trial_id
    keys = ("objective", "trial_id", "value", "value_type")
    assert conns.sql.direct(conns.sql.values, conns.backend.engine.dialect, keys, False) is not None
    row = {"trial_id": tid, "objective": 0, "value": 1.0, "value_type": "FINITE"}
    with pytest.raises(sqlalchemy.exc.IntegrityError), conns.begin() as conn:  # the value of objective 0 exists
        private._execute(conns, conn, conns.sql.values, [row])
    with conns.reading() as conn:
        pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
    with sqlalchemy.create_engine(postgres_db_url, isolation_level="AUTOCOMMIT").connect() as admin:
        admin.execute(sqlalchemy.text("SELECT pg_terminate_backend(:p)"), {"p": pid})
        gone = sqlalchemy.text("SELECT count(*) FROM pg_stat_activity WHERE pid = :p")
        for _ in range(100):  # the server ends the session asynchronously
            if admin.execute(gone, {"p": pid}).scalar() == 0:
                break
            time.sleep(0.1)
    with pytest.raises(sqlalchemy.exc.OperationalError) as lost:
        private.read_trials(conns, study._study_id, [], -1)
    assert lost.value.connection_invalidated
    assert [t.number for t in private.read_trials(conns, study._study_id, [], -1)] == [0, 1]
