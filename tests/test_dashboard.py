"""``ciq-optuna dashboard``: artifact locations, ACF upload, the command line, and a real browser.

The browser test runs a real ``ciq-optuna tune`` (real ptxas), starts the dashboard on it and
drives Debian's chromium through Playwright; with ``CIQ_OPTUNA_UPDATE_DOCS=1`` it also saves
its screenshots as docs/images/dashboard-study.png and dashboard-trial.png.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import optuna
import pytest

from ciq_optuna.dashboard import (
    ARTIFACTS_ENV,
    artifact_dir,
    artifact_store,
    is_loopback,
    trial_artifacts,
    upload_acf,
)
from ciq_optuna.study._optuna import study_id_of, trial_id_of
from ciq_optuna.summary import best_trials

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
KERNEL = REPO / "examples" / "sgemm" / "sgemm.sm_80.ptx"
IMAGES = REPO / "docs" / "images"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: run .ci/install-system.sh and pip install -e '.[dev]')")
    pytest.skip(reason)


def test_artifact_dir_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ARTIFACTS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert artifact_dir(tmp_path / "s.db") == tmp_path / "s.db-artifacts"
    assert artifact_dir(f"sqlite:///{tmp_path}/t.db") == tmp_path / "t.db-artifacts"
    assert artifact_dir("postgresql://u:p@db/ciq") == tmp_path / "ciq-optuna-artifacts"
    monkeypatch.setenv(ARTIFACTS_ENV, str(tmp_path / "shared"))
    assert artifact_dir(tmp_path / "s.db") == tmp_path / "shared"


def test_is_loopback() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4") and not is_loopback("example.org")


def test_upload_acf_to_finished_and_running_trials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ARTIFACTS_ENV, raising=False)
    db = tmp_path / "s.db"
    study = optuna.create_study(storage=f"sqlite:///{db}", study_name="a")
    acf = tmp_path / "best.acf"
    acf.write_text('format = "ciq-optuna-acf"\n')
    study.optimize(lambda t: t.suggest_int("x", 0, 3), n_trials=1)
    finished = study.trials[0]
    finished_id = upload_acf(study, finished, acf)

    running = study.ask()
    running_id = upload_acf(study, running, acf)
    study.tell(running, 1.0)

    store = artifact_store(db)
    for trial, artifact_id in ((study.trials[0], finished_id), (study.trials[1], running_id)):
        metas = trial_artifacts(study, trial)
        assert [m["artifact_id"] for m in metas] == [artifact_id]
        assert metas[0]["filename"] == "best.acf"
        with store.open_reader(artifact_id) as reader:
            assert reader.read() == acf.read_bytes()
    assert study.user_attrs["artifact_dir"] == str(tmp_path / "s.db-artifacts")


def _start_dashboard(storage: str, port: int, *extra: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "ciq_optuna.dashboard", storage, "--port", str(port), *extra]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)


def _stop(proc: subprocess.Popen) -> str:
    proc.terminate()
    try:
        out, _ = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out


def test_dashboard_missing_storage_file_is_one_line(tmp_path: Path) -> None:
    proc = _start_dashboard(str(tmp_path / "nope.db"), _free_port())
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert out.strip().splitlines() == [
        f"ciq-optuna dashboard: error: no such storage file: {tmp_path / 'nope.db'}"
    ]


def test_dashboard_warns_when_listening_beyond_loopback(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    optuna.create_study(storage=f"sqlite:///{db}", study_name="a")
    proc = _start_dashboard(str(db), _free_port(), "--host", "0.0.0.0")
    try:
        first = proc.stdout.readline()
    finally:
        _stop(proc)
    assert "warning: listening on 0.0.0.0" in first and "no authentication" in first


def _require_ptxas() -> None:
    from ciq_optuna.compilers.locate import find_compiler
    from ciq_optuna.errors import CiqError

    try:
        find_compiler("ptxas")
    except CiqError as exc:
        _unavailable(f"no ptxas for the tune run: {exc}")


def _wait_http(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"dashboard exited: {proc.stdout.read()}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"dashboard did not answer at {url}")


def _tune(tmp_path: Path) -> tuple[Path, str]:
    """A real ``ciq-optuna tune`` run (20 trials, registers and spill bytes) in tmp_path; returns (db, study)."""
    db = tmp_path / "tune.db"
    argv = [sys.executable, "-m", "ciq_optuna.cli", "tune", str(KERNEL), "--arch", "sm_80"]
    argv += ["--minimize", "registers", "--minimize", "spill-bytes", "--trials", "20", "--pool-size", "6"]
    argv += ["--seed", "1", "--storage", f"sqlite:///{db}", "--study", "sgemm-dashboard", "--quiet"]
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    if (
        proc.returncode != 0
        and "ptxas" in (proc.stdout + proc.stderr)
        and "not found" in (proc.stdout + proc.stderr)
    ):
        _unavailable("ptxas not found for the tune run")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return db, "sgemm-dashboard"


def _shoot(page, tmp_path: Path, name: str) -> None:  # type: ignore[no-untyped-def]
    shot = tmp_path / name
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    if os.environ.get("CIQ_OPTUNA_UPDATE_DOCS") == "1":
        IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, IMAGES / name)


@pytest.mark.browser
def test_dashboard_in_chromium_shows_study_trials_and_acf(tmp_path: Path) -> None:
    """What a person sees: objectives named on the study card and on each trial, one attribute
    per metric, Best Trial on the Pareto points only (the trials with an ACF), each control once
    in the parameter importance, the study note, and the ACF artifact."""
    if not CHROMIUM.exists():
        _unavailable("Debian's chromium is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install playwright)")
    _require_ptxas()
    db, name = _tune(tmp_path)
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{db}")
    points = best_trials(study)
    with_acf = [t for t in study.trials if trial_artifacts(study, t)]
    assert [t.number for t in with_acf] == [t.number for t in points], "tune attaches one ACF per Pareto point"
    best = points[0]
    metas = trial_artifacts(study, best)
    acf_name = metas[0]["filename"]
    study_id, trial_id = study_id_of(study), trial_id_of(best)

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    proc = _start_dashboard(str(db), port)
    try:
        _wait_http(f"{base}/api/studies", proc)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
            try:
                page = browser.new_page(viewport={"width": 1500, "height": 1100})
                page.goto(f"{base}/dashboard/", wait_until="networkidle")
                card = f"{name} · min registers (regs), min spill-bytes (B)"
                page.get_by_text(card).first.wait_for(timeout=30_000)

                page.goto(f"{base}/dashboard/studies/{study_id}", wait_until="networkidle")
                page.get_by_text("Hyperparameter Importance").first.wait_for(timeout=30_000)
                page.get_by_text("ptxas.maxrregcount", exact=True).first.wait_for(timeout=30_000)
                page.wait_for_timeout(1500)  # plots drawn
                body = page.inner_text("body")
                assert ".passed" not in body, "a control shown as two parameters"
                assert f"Best Trial (number={best.number})" in body or "Best Trials" in body
                _shoot(page, tmp_path, "dashboard-study.png")

                page.goto(f"{base}/dashboard/studies/{study_id}/note", wait_until="networkidle")
                page.get_by_text("Reading this dashboard").first.wait_for(timeout=30_000)  # tune's study note
                note = page.inner_text("body")
                assert "Pareto front: one trial per point" in note and acf_name in note

                # tall enough that the trial list (rendered only where visible) shows every trial
                page.set_viewport_size({"width": 1500, "height": 90 * len(study.trials) + 400})
                page.goto(f"{base}/dashboard/studies/{study_id}/trials", wait_until="networkidle")
                page.get_by_text(f"{len(study.trials)} Trials").first.wait_for(timeout=30_000)
                page.wait_for_timeout(500)
                list_text = page.inner_text("body")
                page.set_viewport_size({"width": 1500, "height": 1100})
                assert list_text.count("Best Trial") == len(points), (
                    f"Best Trial on {list_text.count('Best Trial')} trials, Pareto points {len(points)}"
                )
                assert len(study.best_trials) >= len(points)
                page.get_by_text(f"Trial {best.number}", exact=True).first.click()
                page.get_by_text(f"Trial {best.number} (trial_id={trial_id})").first.wait_for(timeout=30_000)
                page.get_by_text(acf_name).first.wait_for(timeout=30_000)
                body = page.inner_text("body")
                regs, spill = (int(v) for v in best.values)
                assert f"objectives registers {regs} regs, spill-bytes {spill} B" in body
                for attr in ("registers (regs)", "spill-bytes (B)", "cubin-size (B)", "flags", "binary_hash"):
                    assert attr in body, f"user attribute {attr} not shown"
                assert '"registers":' not in body, "the metrics still shown as one JSON blob"
                assert best.user_attrs["binary_hash"] in body
                _shoot(page, tmp_path, "dashboard-trial.png")
                # The artifact is downloadable: the dashboard serves the stored ACF bytes.
                url = f"{base}/artifacts/{study_id}/{trial_id}/{metas[0]['artifact_id']}"
                response = page.request.get(url)
                assert response.ok
                assert b"ciq-optuna-acf" in response.body()
            finally:
                browser.close()
    finally:
        _stop(proc)


def test_dashboard_api_shows_the_view_unless_as_stored(tmp_path: Path) -> None:
    """The study list through the view names the objectives; ``--as-stored`` shows the stored name."""
    import json

    db = tmp_path / "s.db"
    study = optuna.create_study(storage=f"sqlite:///{db}", study_name="k", directions=["minimize"])
    study.set_user_attr("ciq_optuna", {"metrics": ["registers"]})
    names = {}
    for extra in ((), ("--as-stored",)):
        port = _free_port()
        proc = _start_dashboard(str(db), port, *extra)
        try:
            _wait_http(f"http://127.0.0.1:{port}/api/studies", proc)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=10) as reply:
                names[extra] = [s["study_name"] for s in json.load(reply)["study_summaries"]]
        finally:
            _stop(proc)
    assert names == {(): ["k · min registers (regs)"], ("--as-stored",): ["k"]}
