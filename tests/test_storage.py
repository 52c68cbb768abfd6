"""Storage URLs: choice of URL, SQLite tuning, heartbeats, password redaction."""

from __future__ import annotations

import multiprocessing
import sqlite3
import time
from pathlib import Path

import optuna
import pytest

from ciq_optuna.errors import CiqError
from ciq_optuna.study.storage import (
    STORAGE_ENV,
    StorageError,
    redact,
    resolve_storage,
    scrub,
    sqlite_path,
    storage_url,
)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://tuner:hunter2@db:5432/ciq", "postgresql://tuner:***@db:5432/ciq"),
        ("postgresql+psycopg2://u:p%40ss%3Aw0rd@10.0.0.1/c", "postgresql+psycopg2://u:***@10.0.0.1/c"),
        ("postgresql://u@db/ciq", "postgresql://u@db/ciq"),
        ("sqlite:////tmp/x.db", "sqlite:////tmp/x.db"),
        ("not a url://u:secret@host", "not a url://u:***@host"),
    ],
)
def test_redact(url: str, shown: str) -> None:
    assert redact(url) == shown
    assert "hunter2" not in redact(url) and "secret" not in redact(url)


def test_scrub_removes_the_decoded_password_from_any_text() -> None:
    url = "postgresql://u:p%40ss@db/c"
    assert scrub("failed for p@ss at postgresql://x:y@h/d", url) == "failed for *** at postgresql://x:***@h/d"


@pytest.mark.parametrize(
    ("text", "scrubbed"),
    [
        ("could not connect to port 1 of host p1", "could not connect to port 1 of host p1"),
        ("p", "***"),
        ("bad URL u:p@db:1/c", "bad URL u:***@db:1/c"),
        ("password 'p' rejected, \"p\" too", "password '***' rejected, \"***\" too"),
        ("conninfo: host=db password=p port=1", "conninfo: host=db password=*** port=1"),
        ("the password is p.", "the password is ***."),
    ],
)
def test_scrub_replaces_a_short_password_only_where_it_stands_whole(text: str, scrubbed: str) -> None:
    assert scrub(text, "postgresql://u:p@db:1/c") == scrubbed


def test_scrub_removes_the_percent_encoded_password() -> None:
    url = "postgresql://u:p%40ss%3A1@db/c"
    assert scrub("dsn u:p%40ss%3A1@db/c or p@ss:1", url) == "dsn u:***@db/c or ***"


def test_storage_url_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STORAGE_ENV, raising=False)
    default = tmp_path / "d.db"
    assert storage_url(None, default_path=default) == f"sqlite:///{default}"
    monkeypatch.setenv(STORAGE_ENV, "postgresql://u:p@h/env")
    assert storage_url(None, default_path=default) == "postgresql://u:p@h/env"
    assert storage_url("sqlite:///arg.db", default_path=default) == "sqlite:///arg.db"
    assert storage_url(str(tmp_path / "file.db"), default_path=default) == f"sqlite:///{tmp_path / 'file.db'}"


def test_sqlite_path() -> None:
    assert sqlite_path("sqlite:////a/b.db") == Path("/a/b.db")
    assert sqlite_path("sqlite:///:memory:") is None
    assert sqlite_path("postgresql://u:p@h/d") is None


def _pragmas(db: Path) -> tuple[str, ...]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("PRAGMA journal_mode").fetchone()
    finally:
        conn.close()


def test_sqlite_is_tuned_and_stays_a_plain_rdb(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    storage = resolve_storage(None, default_path=db)
    assert isinstance(storage.backend, optuna.storages.RDBStorage)
    study = optuna.create_study(storage=storage, study_name="s")
    study.optimize(lambda t: t.suggest_int("x", 0, 9), n_trials=3)
    with storage.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
    assert _pragmas(db) == ("wal",)
    # Optuna alone (and optuna-dashboard) read it as an ordinary SQLite study.
    assert len(optuna.load_study(study_name="s", storage=f"sqlite:///{db}").trials) == 3


def test_optuna_default_sqlite_mode_keeps_the_rollback_journal(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    resolve_storage(None, default_path=db, sqlite_mode="optuna-default", heartbeat_interval=None)
    assert _pragmas(db) == ("delete",)


def test_heartbeat_and_retry_are_configured(tmp_path: Path) -> None:
    storage = resolve_storage(None, default_path=tmp_path / "h.db", heartbeat_interval=2)
    assert storage.get_heartbeat_interval() == 2
    assert storage.grace_period == 6
    assert isinstance(
        storage.get_heartbeat_stale_trial_callback(), optuna.storages.RetryHeartbeatStaleTrialCallback
    )
    plain = resolve_storage(None, default_path=tmp_path / "n.db", heartbeat_interval=None)
    assert plain.get_heartbeat_interval() is None


def test_bad_urls_are_one_line_errors_without_password(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="storage directory does not exist"):
        resolve_storage(str(tmp_path / "missing" / "s.db"), default_path=tmp_path / "x.db")
    with pytest.raises(CiqError) as info:
        resolve_storage("nosuchdb://u:topsecret@h/d", default_path=tmp_path / "x.db")
    assert "topsecret" not in str(info.value) and "\n" not in str(info.value)


def test_unreachable_postgres_error_has_no_password(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(StorageError) as info:
        resolve_storage("postgresql://u:topsecret@127.0.0.1:1/d", default_path=tmp_path / "x.db")
    text = str(info.value)
    assert "topsecret" not in text and "u:***@127.0.0.1:1/d" in text and "\n" not in text


def _open_at(url: str, start: float, out: multiprocessing.Queue[str]) -> None:
    while time.time() < start:
        pass
    try:
        resolve_storage(url, default_path=Path("unused.db"))
        out.put("ok")
    except Exception as exc:  # the test reports what any process saw
        out.put(f"{type(exc).__name__}: {exc}")


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_processes_opening_one_new_database_at_once_all_succeed(tmp_path: Path, backend: str, request) -> None:
    """Four processes open the same new database at one instant, eight times: each creates the
    tables or finds them created (before the fix, 'table studies already exists', a duplicate
    alembic version row or 'database is locked' failed about one round in seven on SQLite)."""
    ctx = multiprocessing.get_context("fork")
    seen: list[str] = []
    for round_ in range(8):
        if backend == "sqlite":
            url = f"sqlite:///{tmp_path / f'new{round_}.db'}"
        else:
            url = request.getfixturevalue("postgres_server").fresh_database()
        out = ctx.Queue()
        start = time.time() + 0.3
        procs = [ctx.Process(target=_open_at, args=(url, start, out)) for _ in range(4)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=120)
        seen += [out.get(timeout=5) for _ in procs]
    assert [s for s in seen if s != "ok"] == []


def test_a_database_locked_past_the_busy_timeout_is_not_waited_out_eight_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The open is tried again only within the schema race's window: a database another process
    holds locked longer fails with one line after one busy timeout, not after eight."""
    from ciq_optuna.study import storage

    tries = []

    class Counting(storage.ResilientRDBStorage):
        def __init__(self, *args, **kwargs) -> None:
            tries.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(storage, "ResilientRDBStorage", Counting)
    monkeypatch.setattr(storage, "SQLITE_BUSY_TIMEOUT_S", 0.2)
    monkeypatch.setattr(storage, "SCHEMA_RACE_WINDOW_S", 0.0)
    path = tmp_path / "held.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StorageError, match="database is locked"):
            resolve_storage(f"sqlite:///{path}", default_path=tmp_path / "unused.db")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert len(tries) == 1
