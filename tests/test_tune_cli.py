"""The main job end to end with the real ptxas: tune, resume, ACF, byte-for-byte reproduction, bad input."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from installed_ptxas import PTXAS

from ciq_optuna.acf import read_acf
from ciq_optuna.cli import main
from ciq_optuna.compilers.cubin import code_hash
from ciq_optuna.summary import best_trials

ROOT = Path(__file__).resolve().parents[1]
STENCIL = ROOT / "examples" / "stencil" / "stencil.sm_90a.ptx"
ATTENTION = ROOT / "examples" / "attention" / "attention.sm_80.ptx"

pytestmark = pytest.mark.skipif(PTXAS is None, reason="no ptxas installed")

TINY_SPACE = """
schema = 1
name = "ptxas"
compiler = "ptxas"
cuda = "{cuda}"
version = 1
description = "only -O levels: -O2, -O3 and no flag give the same code"

[[control]]
name = "opt_level"
flag = "-O{{value}}"
kind = "choice"
values = [0, 1, 2, 3]
default = 3
not_passed = true
description = "optimisation level"
"""


@pytest.fixture()
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CIQ_OPTUNA_STORAGE", raising=False)
    return tmp_path


def _study(path: Path) -> optuna.Study:
    storage = f"sqlite:///{path / 'ciq-optuna.db'}"
    (summary,) = optuna.get_all_study_summaries(storage)
    return optuna.load_study(study_name=summary.study_name, storage=storage)


def test_tune_writes_acf_summary_and_resumes(workdir: Path, capsys: pytest.CaptureFixture) -> None:
    rc = main(
        [
            "tune",
            str(STENCIL),
            "--arch",
            "sm_90a",
            "--minimize",
            "registers",
            "--trials",
            "10",
            "--seed",
            "1",
            "--quiet",
            "--no-simplify",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "registers *" in out and "baseline" in out and "spill-bytes" in out
    acf = read_acf(workdir / "stencil.sm_90a.acf")
    study = _study(workdir)
    assert len(study.trials) == 10
    assert study.trials[0].user_attrs["baseline"] is True and study.trials[0].user_attrs["flags"] == []
    best = best_trials(study)[0]
    assert acf.flags == best.user_attrs["flags"]
    assert acf.binary["code_sha256"] == best.user_attrs["binary_hash"]
    assert acf.objectives[0]["value"] == best.value
    assert acf.objectives[0]["baseline"] == study.trials[0].value
    assert acf.provenance["trial"] == best.number
    assert study.user_attrs["ciq_optuna"]["compiler"]["version"] == PTXAS.version

    rc = main(
        [
            "tune",
            str(STENCIL),
            "--arch",
            "sm_90a",
            "--minimize",
            "registers",
            "--trials",
            "14",
            "--quiet",
            "--no-simplify",
        ]
    )
    assert rc == 0
    assert len(_study(workdir).trials) == 14
    rc = main(
        [
            "tune",
            str(STENCIL),
            "--arch",
            "sm_90a",
            "--minimize",
            "registers",
            "--trials",
            "14",
            "--quiet",
            "--no-simplify",
        ]
    )
    assert rc == 0 and len(_study(workdir).trials) == 14


def test_exported_options_reproduce_the_best_binary_byte_for_byte(workdir: Path) -> None:
    assert (
        main(
            [
                "tune",
                str(ATTENTION),
                "--arch",
                "sm_80",
                "--minimize",
                "spill-bytes",
                "--trials",
                "12",
                "--seed",
                "3",
                "--quiet",
            ]
        )
        == 0
    )
    study = _study(workdir)
    best = best_trials(study)[0]
    acf_path = workdir / "attention.sm_80.acf"
    acf = read_acf(acf_path)
    assert acf.flags == best.user_attrs["flags"] and acf.flags, "the winner passes at least one flag"
    assert main(["acf", "export", str(acf_path), "-o", "best.opts"]) == 0
    # The stock ptxas, with the options file and the same -v the tuning compile used: the same bytes.
    subprocess.run(
        [
            str(PTXAS.path),
            "-v",
            "-arch=sm_80",
            "--options-file",
            "best.opts",
            str(ATTENTION),
            "-o",
            "stock.cubin",
        ],
        check=True,
        capture_output=True,
    )
    assert (
        hashlib.sha256((workdir / "stock.cubin").read_bytes()).hexdigest() == best.user_attrs["cubin_sha256"]
    )
    assert acf.binary["tuning_cubin_sha256"] == best.user_attrs["cubin_sha256"]
    # Without -v only the recorded command line differs: the code is the same, and the file is the
    # one whose sha256 the ACF records for sha256sum.
    subprocess.run(
        [str(PTXAS.path), "-arch=sm_80", "--options-file", "best.opts", str(ATTENTION), "-o", "plain.cubin"],
        check=True,
        capture_output=True,
    )
    plain = (workdir / "plain.cubin").read_bytes()
    assert code_hash(plain) == best.user_attrs["binary_hash"]
    assert hashlib.sha256(plain).hexdigest() == acf.binary["cubin_sha256"] != acf.binary["tuning_cubin_sha256"]
    assert main(["acf", "verify", str(acf_path), str(ATTENTION)]) == 0


def test_multi_objective_writes_the_pareto_front(workdir: Path, capsys: pytest.CaptureFixture) -> None:
    rc = main(
        [
            "tune",
            str(STENCIL),
            "--arch",
            "sm_90a",
            "--minimize",
            "registers,cubin-size",
            "--trials",
            "8",
            "--seed",
            "2",
            "--quiet",
        ]
    )
    assert rc == 0
    study = _study(workdir)
    front = sorted(t.number for t in best_trials(study))
    points = {tuple(t.values) for t in study.best_trials}
    assert len(front) == len(points), "one ACF per Pareto point"
    written = sorted(int(p.stem.split("-")[1]) for p in (workdir / "stencil.sm_90a.pareto").glob("*.acf"))
    assert written == front and written
    assert "Pareto" in capsys.readouterr().out


def test_measure_command_is_reused_for_identical_binaries(workdir: Path) -> None:
    space = workdir / "tiny.toml"
    space.write_text(TINY_SPACE.format(cuda=PTXAS.release))
    rc = main(
        [
            "tune",
            str(STENCIL),
            "--arch",
            "sm_90a",
            "--space",
            str(space),
            "--minimize",
            "size",
            "--measure-cmd",
            "wc -c < {cubin} | sed 's/^/size=/'",
            "--measure-regex",
            "size=([0-9]+)",
            "--measure-name",
            "size",
            "--trials",
            "5",
            "--quiet",
        ]
    )
    assert rc == 0
    study = _study(workdir)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(complete) == 5
    reused = [t for t in complete if "reused_from" in t.user_attrs]
    # no flag, -O2 and -O3 compile to the same code (ptxas-notes); only one of them is measured
    assert len(reused) >= 2
    for t in reused:
        source = study.trials[t.user_attrs["reused_from"]]
        assert source.user_attrs["binary_hash"] == t.user_attrs["binary_hash"] and source.value == t.value


def test_the_installed_command_runs(workdir: Path) -> None:
    exe = shutil.which("ciq-optuna") or str(Path(sys.executable).with_name("ciq-optuna"))
    res = subprocess.run(
        [exe, "tune", str(STENCIL), "--arch", "sm_90a", "--minimize", "spill-bytes", "--trials", "3"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert "wrote stencil.sm_90a.acf" in res.stdout
    assert "tuning" in res.stderr  # the progress bar


def _bad_inputs(tmp: Path) -> dict[str, tuple[list[str], str]]:
    broken = tmp / "broken.ptx"
    broken.write_text(STENCIL.read_text().replace(".entry", ".entyr", 1))
    bad_space = tmp / "bad.toml"
    bad_space.write_text("schema = 1\nname = 'ptxas'\n[[control]]\nname = 3\n")
    base = ["tune", str(STENCIL), "--arch", "sm_90a", "--minimize", "registers", "--trials", "3", "--quiet"]
    return {
        "missing kernel": (
            ["tune", str(tmp / "nope.ptx"), "--arch", "sm_90a", "--minimize", "registers"],
            "kernel not found",
        ),
        "unknown arch": (base[:2] + ["--arch", "sm_999"] + base[4:], "unknown architecture 'sm_999'"),
        "unknown metric": (base[:4] + ["--minimize", "speed"] + base[6:], "unknown metric 'speed'"),
        "broken ptx": (["tune", str(broken)] + base[2:], "does not compile"),
        "compiler missing": (base + ["--compiler-path", str(tmp / "no-ptxas")], "ptxas"),
        "malformed space": (base + ["--space", str(bad_space)], "bad.toml"),
        "acf into a directory": (base + ["--acf", str(tmp)], "is a directory"),
        "acf into a missing directory": (base + ["--acf", str(tmp / "no" / "x.acf")], "does not exist"),
        "pool size 1": (base + ["--pool-size", "1"], "--pool-size must be at least 2"),
        "negative timeout": (base + ["--timeout", "-1"], "--timeout: must be a positive number"),
        "measure name is a compile metric": (
            base + ["--measure-cmd", "echo 5", "--measure-regex", "([0-9]+)", "--measure-name", "registers"],
            "is a compile metric",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing kernel",
        "unknown arch",
        "unknown metric",
        "broken ptx",
        "compiler missing",
        "malformed space",
        "acf into a directory",
        "acf into a missing directory",
        "pool size 1",
        "negative timeout",
        "measure name is a compile metric",
    ],
)
def test_bad_input_gives_one_line_and_leaves_the_study_intact(workdir: Path, case: str) -> None:
    assert (
        main(
            ["tune", str(STENCIL), "--arch", "sm_90a", "--minimize", "registers", "--trials", "3", "--quiet"]
        )
        == 0
    )
    before = [(t.number, t.state, t.values) for t in _study(workdir).trials]
    argv, message = _bad_inputs(workdir)[case]
    res = subprocess.run(
        [sys.executable, "-m", "ciq_optuna.cli", *argv],
        capture_output=True,
        text=True,
        cwd=workdir,
        timeout=300,
    )
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ciq-optuna") and ": error: " in lines[0], res.stderr
    assert message in lines[0]
    assert "Traceback" not in res.stderr
    assert [(t.number, t.state, t.values) for t in _study(workdir).trials] == before


@pytest.mark.parametrize("damage", ["truncate", "edit", "garbage", "version"])
def test_damaged_acf_is_refused(workdir: Path, damage: str, capsys: pytest.CaptureFixture) -> None:
    assert (
        main(
            ["tune", str(STENCIL), "--arch", "sm_90a", "--minimize", "registers", "--trials", "2", "--quiet"]
        )
        == 0
    )
    path = workdir / "stencil.sm_90a.acf"
    text = path.read_text()
    if damage == "truncate":
        path.write_text(text[: len(text) // 2])
    elif damage == "edit":
        path.write_text(text.replace('arch = "sm_90a"', 'arch = "sm_80"'))
    elif damage == "garbage":
        path.write_bytes(b"\x00\xff not an acf")
    capsys.readouterr()
    if damage == "version":
        acf = read_acf(path)
        with pytest.raises(Exception, match="tuned for ptxas"):
            acf.check_compiler("ptxas", "12.4.131")
        return
    assert main(["acf", "flags", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ciq-optuna: error: ") and len(err.strip().splitlines()) == 1


def test_a_failing_baseline_stops_the_tune_with_its_error(
    workdir: Path, capsys: pytest.CaptureFixture
) -> None:
    argv = [
        "tune",
        str(STENCIL),
        "--arch",
        "sm_90a",
        "--minimize",
        "t",
        "--trials",
        "5",
        "--quiet",
        "--measure-cmd",
        "exit 3",
        "--measure-regex",
        "t=([0-9]+)",
        "--measure-name",
        "t",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "the baseline (the compiler's defaults) failed: measure command exited with 3" in err
    assert len(_study(workdir).trials) == 1
    # fixed, the same command resumes the study and evaluates the baseline again first
    argv[argv.index("exit 3")] = "echo t=7"
    assert main(argv) == 0
    study = _study(workdir)
    assert [t.user_attrs.get("baseline") for t in study.trials[:2]] == [True, True]
    assert study.trials[1].state == optuna.trial.TrialState.COMPLETE


def test_parallel_jobs_share_the_study_without_races(workdir: Path) -> None:
    for _ in range(3):
        assert (
            main(
                [
                    "tune",
                    str(STENCIL),
                    "--arch",
                    "sm_90a",
                    "--minimize",
                    "registers",
                    "--trials",
                    "6",
                    "--jobs",
                    "2",
                    "--quiet",
                    "--no-simplify",
                    "--study",
                    f"j{_}",
                ]
            )
            == 0
        )
    storage = f"sqlite:///{workdir / 'ciq-optuna.db'}"
    for summary in optuna.get_all_study_summaries(storage):
        trials = optuna.load_study(study_name=summary.study_name, storage=storage).trials
        assert len(trials) == 6 and trials[0].user_attrs["baseline"]
        assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
