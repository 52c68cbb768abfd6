"""``ciq-optuna tune-all``: the three example kernels x two archs with the real ptxas, then a run that only reports."""

from __future__ import annotations

import shutil
from pathlib import Path

import optuna
import pytest

from ciq_optuna.cli import main
from ciq_optuna.compilers.locate import find_compiler
from ciq_optuna.errors import CiqError
from ciq_optuna.store import Store, lookup

ROOT = Path(__file__).resolve().parents[1]

try:
    PTXAS = find_compiler("ptxas", release="13.0")
except CiqError:
    PTXAS = None
pytestmark = pytest.mark.skipif(PTXAS is None, reason="no ptxas 13.0 installed")


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the example kernels and their manifest, with a small budget."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CIQ_OPTUNA_STORAGE", raising=False)
    for name in ("attention", "sgemm", "stencil"):
        shutil.copytree(ROOT / "examples" / name, tmp_path / name)
    text = (ROOT / "examples" / "manifest.toml").read_text()
    assert "trials = 24" in text
    (tmp_path / "manifest.toml").write_text(text.replace("trials = 24", "trials = 4"))
    return tmp_path


def _trial_count(db: Path) -> int:
    return sum(s.n_trials for s in optuna.get_all_study_summaries(f"sqlite:///{db}"))


def test_examples_tune_in_one_command_and_a_second_run_only_reports(
    repo: Path, capsys: pytest.CaptureFixture
) -> None:
    argv = ["tune-all", "manifest.toml", "--quiet", "--compiler-path", str(PTXAS.path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == "6 tuned, 0 in store, 0 failed"
    entries = Store(repo / "acf-store").scan().entries
    assert sorted((e.acf.kernel["name"], e.acf.arch) for e in entries) == sorted(
        (f"{k}.{a}.ptx", a) for k in ("attention", "sgemm", "stencil") for a in ("sm_80", "sm_90a")
    )
    for e in entries:
        kernel = repo / e.acf.kernel["name"].split(".")[0] / e.acf.kernel["name"]
        assert lookup(kernel, e.acf.arch, PTXAS, store=repo / "acf-store").flags == e.acf.flags
    trials = _trial_count(repo / "ciq-optuna.db")
    stored = {e.path: e.path.read_bytes() for e in entries}

    assert main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == "0 tuned, 6 in store, 0 failed"
    assert sum(" in store " in ln for ln in lines) == 6
    assert _trial_count(repo / "ciq-optuna.db") == trials
    assert {e.path: e.path.read_bytes() for e in Store(repo / "acf-store").scan().entries} == stored


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("stencil/stencil.{arch}.ptx", "stencil/missing.{arch}.ptx"), "manifest kernel not found: "),
        (
            (
                'archs = ["sm_80", "sm_90a"]\nminimize = ["registers"]',
                'archs = ["sm_80", "sm_42"]\nminimize = ["registers"]',
            ),
            "unknown architecture 'sm_42'",
        ),
        (('minimize = ["registers"]', 'minimize = ["speed"]'), "unknown metric 'speed'"),
        (("[[kernel]]", "[[kernels]]"), "unknown key 'kernels'"),
    ],
)
def test_bad_manifest_gives_one_line_and_tunes_nothing(
    repo: Path, capsys: pytest.CaptureFixture, edit: tuple[str, str], message: str
) -> None:
    manifest = repo / "manifest.toml"
    text = manifest.read_text()
    assert edit[0] in text
    manifest.write_text(text.replace(edit[0], edit[1], 1))
    assert main(["tune-all", str(manifest), "--quiet", "--compiler-path", str(PTXAS.path)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ciq-optuna: error: ") and message in err[0], err
    assert "tuning" not in captured.out
    assert not (repo / "acf-store").exists() and not (repo / "ciq-optuna.db").exists()


def test_an_interrupted_job_resumes_its_study(repo: Path, capsys: pytest.CaptureFixture) -> None:
    (repo / "one.toml").write_text(
        'store = "acf-store"\ntrials = 5\n[[kernel]]\npath = "stencil/stencil.{arch}.ptx"\n'
        'archs = ["sm_80"]\nminimize = ["registers"]\n'
    )
    kernel = "stencil/stencil.sm_80.ptx"
    common = ["--compiler-path", str(PTXAS.path), "--quiet", "--no-simplify"]
    assert main(["tune", kernel, "--arch", "sm_80", "--minimize", "registers", "--trials", "2", *common]) == 0
    (summary,) = optuna.get_all_study_summaries("sqlite:///ciq-optuna.db")
    assert summary.n_trials == 2
    assert main(["tune-all", "one.toml", "--quiet", "--compiler-path", str(PTXAS.path)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "1 tuned, 0 in store, 0 failed"
    (summary,) = optuna.get_all_study_summaries("sqlite:///ciq-optuna.db")
    study = optuna.load_study(study_name=summary.study_name, storage="sqlite:///ciq-optuna.db")
    assert sum(bool(t.user_attrs.get("baseline")) for t in study.trials) == 1
    assert len([t for t in study.trials if "simplified_from" not in t.user_attrs]) == 5
