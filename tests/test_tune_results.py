"""What tune shows and writes can be trusted: summary rows, winner choice, Pareto front, outputs, ACF hashes.

Every test runs the real ptxas (CUDA 13.0 from the toolkit, 13.5 from the pip wheel where needed).
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from installed_ptxas import PTXAS

from ciq_optuna.acf import read_acf
from ciq_optuna.cli import main
from ciq_optuna.compilers.locate import list_compilers
from ciq_optuna.simplify import simplify, without
from ciq_optuna.study.metadata import run_queued
from ciq_optuna.summary import best_trials, trial_metrics
from ciq_optuna.tune import TuneConfig, prepare

ROOT = Path(__file__).resolve().parents[1]
STENCIL = ROOT / "examples" / "stencil" / "stencil.sm_90a.ptx"
STENCIL80 = ROOT / "examples" / "stencil" / "stencil.sm_80.ptx"
SGEMM = ROOT / "examples" / "sgemm" / "sgemm.sm_90a.ptx"

pytestmark = pytest.mark.skipif(PTXAS is None, reason="no ptxas installed")

SPACE = """
schema = 1
name = "ptxas"
compiler = "ptxas"
cuda = "{cuda}"
version = 1
description = "test space"

[[control]]
name = "opt_level"
flag = "-O{{value}}"
kind = "choice"
values = [0, 1, 2, 3]
default = 3
not_passed = true
description = "optimisation level"

[[control]]
name = "no_opt_constants"
flag = "--disable-optimizer-constants"
kind = "switch"
default = false
description = "no change of the code on sm_90a"
"""

REGS_SPACE = """
schema = 1
name = "ptxas"
compiler = "ptxas"
cuda = "{cuda}"
version = 1
description = "register limit only"

[[control]]
name = "maxrregcount"
flag = "--maxrregcount={{value}}"
kind = "choice"
values = [24, 32]
default = 255
not_passed = true
description = "register limit"
"""


@pytest.fixture()
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CIQ_OPTUNA_STORAGE", raising=False)
    return tmp_path


def _space(workdir: Path, text: str = SPACE) -> Path:
    path = workdir / "space.toml"
    path.write_text(text.format(cuda=PTXAS.release))
    return path


def _study(path: Path) -> optuna.Study:
    storage = f"sqlite:///{path / 'ciq-optuna.db'}"
    (summary,) = optuna.get_all_study_summaries(storage)
    return optuna.load_study(study_name=summary.study_name, storage=storage)


def _cli(*argv: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ciq_optuna.cli", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
    )


# -- the summary ---------------------------------------------------------------------------


def test_a_reused_measurement_still_shows_in_the_summary(
    workdir: Path, capsys: pytest.CaptureFixture
) -> None:
    space = _space(workdir)
    measure = "if echo x {flags} | grep -q -- -O1; then echo t=1; else echo t=5; fi"
    argv = ["tune", str(STENCIL), "--arch", "sm_90a", "--space", str(space), "--minimize", "t"]
    argv += ["--measure-cmd", measure, "--measure-regex", "t=([0-9]+)", "--measure-name", "t", "--quiet"]
    assert main([*argv, "--trials", "1"]) == 0
    study = _study(workdir)
    # -O1 with a switch that does not change the code is measured; -O1 alone reuses that measurement
    study.enqueue_trial({"ptxas.opt_level": 1, "ptxas.no_opt_constants": True})
    study.enqueue_trial({"ptxas.opt_level": 1, "ptxas.no_opt_constants": False})
    capsys.readouterr()
    assert main([*argv, "--trials", "3", "--no-simplify"]) == 0
    out = capsys.readouterr().out
    study = _study(workdir)
    (best,) = best_trials(study)
    assert best.user_attrs["flags"] == ["-O1"] and "reused_from" in best.user_attrs
    row = [line for line in out.splitlines() if line.startswith("t *")]
    assert row and row[0].split()[2:4] == ["5", "1"], out
    acf = read_acf(workdir / "stencil.sm_90a.acf")
    assert acf.metrics["best"]["t"] == 1.0


def test_best_trials_reads_the_study_once_however_many_trials_reused_a_measurement() -> None:
    study = optuna.create_study(direction="minimize")
    dist = {"x": optuna.distributions.IntDistribution(0, 9)}

    def add(x: int, attrs: dict) -> None:
        study.add_trial(optuna.trial.create_trial(params={"x": x}, distributions=dist, value=0.0, user_attrs=attrs))

    add(0, {"flags": ["-a", "-b"], "metrics": {"spill-bytes": 0}, "measured": {"registers": 20}})
    add(1, {"flags": ["-b"], "metrics": {"spill-bytes": 0}, "measured": {"registers": 30}})
    for x in range(2, 10):  # equally good trials with fewer flags that reused trial 0's or 1's measurement
        add(x, {"flags": [], "metrics": {"spill-bytes": 0}, "reused_from": x % 2})
    reads = []
    get_trials = study.get_trials
    study.get_trials = lambda *a, **k: reads.append(1) or get_trials(*a, **k)  # type: ignore[method-assign]
    (best,) = best_trials(study)
    assert len(reads) == 1
    assert best.number == 2  # 20 registers as measured on trial 0, and no flags
    assert trial_metrics(study.trials[3], study)["registers"] == 30


def test_summary_has_units_one_header_line_and_whole_milliseconds(
    workdir: Path, capsys: pytest.CaptureFixture
) -> None:
    argv = ["tune", str(STENCIL), "--arch", "sm_90a", "--minimize", "registers", "--trials", "3", "--quiet"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("metric"))
    assert lines[header].split() == ["metric", "unit", "baseline", "best", "change", "change", "%"]
    assert lines[header + 1].startswith("registers *")  # no second header line
    rows = {line.split()[0]: line.split() for line in lines[header + 1 :] if line and line[0].isalpha()}
    assert rows["stack"][1] == "B" and rows["registers"][2] == "regs" and rows["compile-time"][1] == "ms"
    assert "." not in rows["compile-time"][2] and "." not in rows["compile-time"][3]


# -- the winner: secondary order, simplification, warnings ------------------------------------


def test_equal_objective_values_are_decided_by_fewer_registers(workdir: Path) -> None:
    space = _space(workdir)
    argv = ["tune", str(SGEMM), "--arch", "sm_90a", "--space", str(space), "--minimize", "spill-bytes"]
    assert main([*argv, "--trials", "16", "--seed", "3", "--quiet"]) == 0
    study = _study(workdir)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    # sgemm spills nothing under any -O level; -O0 and -O1 use fewer registers than the defaults
    assert {t.value for t in complete} == {0.0}
    fewest = min(trial_metrics(t)["registers"] for t in complete)
    assert fewest < trial_metrics(study.trials[0])["registers"]
    (best,) = best_trials(study)
    assert trial_metrics(best)["registers"] == fewest
    acf = read_acf(workdir / "sgemm.sm_90a.acf")
    assert acf.metrics["best"]["registers"] == fewest and acf.flags == best.user_attrs["flags"]


def test_simplification_does_not_make_registers_worse(workdir: Path) -> None:
    space = _space(workdir)
    config = TuneConfig(
        kernel=SGEMM, arch="sm_90a", minimize=["spill-bytes"], spaces=[space], workdir=workdir / "w"
    )
    _meta, objective = prepare(config)
    study = optuna.create_study(direction="minimize")
    study.enqueue_trial({"ptxas.opt_level": "(not passed)", "ptxas.no_opt_constants": False})
    study.enqueue_trial({"ptxas.opt_level": 0, "ptxas.no_opt_constants": False})
    baseline, o0 = run_queued(study, objective, 2, catch=())
    assert baseline.value == o0.value == 0.0
    assert trial_metrics(o0)["registers"] < trial_metrics(baseline)["registers"]
    # dropping -O0 keeps the objective (no spills) but costs registers: -O0 stays
    assert simplify(study, objective, o0).number == o0.number


def test_a_cost_in_another_metric_is_warned_about(workdir: Path, capsys: pytest.CaptureFixture) -> None:
    space = _space(workdir, REGS_SPACE)
    argv = ["tune", str(STENCIL80), "--arch", "sm_80", "--space", str(space), "--minimize", "registers"]
    assert main([*argv, "--trials", "6", "--seed", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    # 24 registers cost spills and a stack frame the defaults do not have
    assert "warning: spill-bytes got worse: 0 -> " in out
    assert "warning: stack got worse: 0 -> " in out


# -- several objectives ------------------------------------------------------------------------


def test_the_pareto_front_is_printed_simplified_and_reaches_its_corners(
    workdir: Path, capsys: pytest.CaptureFixture
) -> None:
    argv = ["tune", str(STENCIL80), "--arch", "sm_80", "--minimize", "registers,spill-bytes"]
    assert main([*argv, "--trials", "24", "--seed", "3", "--quiet"]) == 0
    out = capsys.readouterr().out
    study = _study(workdir)
    front = best_trials(study)
    table = out[out.index("Pareto front") :].split("\n\n")[0].splitlines()[1:]
    assert table[0].split()[:3] == ["trial", "registers", "(regs)"]
    assert sorted(int(line.split()[0]) for line in table[1:]) == sorted(t.number for t in front)
    # the corners: the fewest registers the space allows (--maxrregcount=24) and no spills
    assert min(t.values[0] for t in front) == 24
    assert min(t.values[1] for t in front) == 0
    # simplified by binary identity: dropping any flag left in a Pareto ACF changes the code
    _meta, objective = prepare(
        TuneConfig(kernel=STENCIL80, arch="sm_80", minimize=["registers", "spill-bytes"])
    )
    (space,) = objective.space.compilers
    done = {_key(t.params): t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE}
    for t in front:
        acf = read_acf(workdir / "stencil.sm_80.pareto" / f"trial-{t.number}.acf")
        assert acf.binary["code_sha256"] == t.user_attrs["binary_hash"] and acf.flags == t.user_attrs["flags"]
        config = space.config_from_params(t.params)
        for control in space.controls:
            value = config.get(control.name)
            if value is None or value == control.baseline_value() or not control.is_passed(value):
                continue
            other = done[_key(space.params_from_config(without(space, config, control.name)))]
            assert other.user_attrs["binary_hash"] != t.user_attrs["binary_hash"], (t.number, control.name)
    assert any("simplified_from" in t.user_attrs for t in study.trials)


def _key(params: dict) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


# -- output locations --------------------------------------------------------------------------


def test_bad_output_locations_are_found_before_the_first_trial(workdir: Path) -> None:
    base = ["tune", str(STENCIL), "--arch", "sm_90a", "--minimize", "registers", "--quiet"]
    assert _cli(*base, "--trials", "2", cwd=workdir).returncode == 0
    before = [(t.number, t.state, t.values) for t in _study(workdir).trials]
    cases = {
        "unwritable acf folder": (
            [*base, "--acf", "/proc/ciq-test.acf"],
            "--acf /proc/ciq-test.acf: directory /proc",
        ),
        "unusable workdir": ([*base, "--workdir", "/proc/ciq-test-work"], "--workdir /proc/ciq-test-work"),
        "kernel is a directory": (
            [base[0], str(workdir), *base[2:]],
            "is a directory; give the .ptx or .cu file",
        ),
    }
    for case, (argv, message) in cases.items():
        res = _cli(*argv, "--trials", "4", cwd=workdir)
        assert res.returncode == 2, (case, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ciq-optuna: error: ") and message in lines[0], (
            res.stderr
        )
        assert [(t.number, t.state, t.values) for t in _study(workdir).trials] == before, case


def test_an_acf_that_cannot_be_written_at_the_end_says_how_to_get_it(workdir: Path) -> None:
    (workdir / "out").mkdir()
    # the measurement replaces the ACF's folder by a file, after the up-front check passed
    measure = "rm -rf out && touch out; echo t=1"
    argv = ["tune", str(STENCIL), "--arch", "sm_90a", "--minimize", "t", "--trials", "2", "--quiet"]
    argv += ["--measure-cmd", measure, "--measure-regex", "t=([0-9]+)", "--measure-name", "t"]
    res = _cli(*argv, "--acf", "out/k.acf", cwd=workdir)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("ciq-optuna: error: cannot write out/k.acf") and "acf from-study" in line
    command = line[line.index("ciq-optuna acf from-study") :].replace("FILE.acf", "saved.acf").split()
    res = _cli(*command[1:], cwd=workdir)
    assert res.returncode == 0, res.stderr
    assert read_acf(workdir / "saved.acf").provenance["study"] == _study(workdir).study_name


# -- progress, Ctrl-C, resume -----------------------------------------------------------------


def test_progress_bar_total_is_the_trials_budget(workdir: Path) -> None:
    res = _cli(
        "tune", str(STENCIL), "--arch", "sm_90a", "--minimize", "registers", "--trials", "8", cwd=workdir
    )
    assert res.returncode == 0, res.stderr
    totals = {
        part.split("/")[1].split()[0] for part in res.stderr.replace("\r", "\n").split("|") if "/" in part
    }
    assert totals == {"8"}, res.stderr[-500:]


@pytest.mark.parametrize(
    ("sig", "status", "word"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")]
)
def test_ctrl_c_or_sigterm_stops_and_the_interrupted_trial_is_reported_on_resume(
    workdir: Path, sig: int, status: int, word: str
) -> None:
    measure = "sleep 2; echo t=1"
    argv = ["tune", str(STENCIL), "--arch", "sm_90a", "--minimize", "t", "--quiet", "--no-screen"]
    argv += ["--measure-cmd", measure, "--measure-regex", "t=([0-9]+)", "--measure-name", "t"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ciq_optuna.cli", *argv, "--trials", "200"],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # until a trial after the baseline is in its measurement
        time.sleep(0.3)
        if not list(workdir.glob(".ciq-optuna/*/binaries/*.cubin")):
            continue  # the baseline is not done: the study may not exist yet (opening it would race)
        running = [t for t in _study(workdir).trials if t.state == optuna.trial.TrialState.RUNNING]
        if running and running[0].number > 0 and running[0].datetime_start.timestamp() < time.time() - 1.0:
            break
    os.kill(proc.pid, sig)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == status, err
    (line,) = err.strip().splitlines()
    assert line.startswith(f"ciq-optuna: {word}: ") and "error" not in line
    assert "run the same command again" in line
    study = _study(workdir)
    interrupted = [t for t in study.trials if t.user_attrs.get("interrupted")]
    assert len(interrupted) == 1
    done = sum(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    res = _cli(*argv, "--trials", str(done), cwd=workdir)  # the interrupted trial does not count
    assert res.returncode == 0, res.stderr
    assert "1 failed (1 of them interrupted by Ctrl-C or SIGTERM)" in res.stdout


# -- applying and checking the ACF ------------------------------------------------------------


def test_the_printed_apply_command_gives_the_acfs_sha256(workdir: Path) -> None:
    argv = [
        "tune",
        str(STENCIL80),
        "--arch",
        "sm_80",
        "--minimize",
        "registers",
        "--trials",
        "6",
        "--seed",
        "2",
    ]
    res = _cli(*argv, "--quiet", cwd=workdir)
    assert res.returncode == 0, res.stderr
    (apply,) = [line for line in res.stdout.splitlines() if line.startswith("apply it: ")]
    command = apply.removeprefix("apply it: ").replace("ptxas ", f"{PTXAS.path} ", 1)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    subprocess.run(command, shell=True, check=True, cwd=workdir, env=env)
    acf = read_acf(workdir / "stencil.sm_80.acf")
    cubin = (workdir / "stencil.sm_80.cubin").read_bytes()
    assert hashlib.sha256(cubin).hexdigest() == acf.binary["cubin_sha256"]
    assert acf.binary["tuning_cubin_sha256"] != acf.binary["cubin_sha256"]  # -v is recorded in the cubin


def _wheel_ptxas() -> Path:
    found = [i for i in list_compilers("ptxas") if i.release != PTXAS.release]
    if not found:
        pytest.skip("only one ptxas release installed")
    return found[0].path


def test_verify_finds_the_acfs_compiler_and_export_warns_of_another_version(
    workdir: Path, capsys: pytest.CaptureFixture
) -> None:
    other = _wheel_ptxas()
    argv = ["tune", str(STENCIL), "--arch", "sm_90a", "--minimize", "registers", "--trials", "2", "--quiet"]
    assert main([*argv, "--compiler-path", str(other)]) == 0
    capsys.readouterr()
    assert main(["acf", "verify", "stencil.sm_90a.acf", str(STENCIL)]) == 0
    assert capsys.readouterr().out.startswith("OK: ")
    assert main(["acf", "export", "stencil.sm_90a.acf", "-o", "k.opts"]) == 0
    err = capsys.readouterr().err
    assert "warning: this ACF was tuned with ptxas" in err and str(other) in err


def test_an_acf_cut_before_its_format_line_gets_a_proper_message(
    workdir: Path, capsys: pytest.CaptureFixture
) -> None:
    argv = ["tune", str(STENCIL), "--arch", "sm_90a", "--minimize", "registers", "--trials", "2", "--quiet"]
    assert main(argv) == 0
    path = workdir / "stencil.sm_90a.acf"
    text = path.read_text()
    path.write_text(text[: text.index("format")])
    capsys.readouterr()
    assert main(["acf", "show", str(path)]) == 2
    err = capsys.readouterr().err
    assert "None" not in err and "no 'format' line (empty, truncated" in err


def test_tune_writes_the_study_note_of_its_best_trials(tmp_path: Path) -> None:
    """``tune`` hands the best trials it found to the dashboard's study note (one pass over the
    tied trials per run, not two): the note is the one made from the study afresh."""
    from optuna_dashboard import get_note

    from ciq_optuna.dashboard_view import study_note
    from ciq_optuna.study.storage import resolve_storage
    from ciq_optuna.tune import tune

    config = TuneConfig(
        kernel=STENCIL, arch="sm_90a", minimize=["registers", "spill-bytes"], trials=6, workdir=tmp_path,
        acf=tmp_path / "out.acf", progress=False, simplify=False, screen=False, seed=1,
    )
    result = tune(config, storage=resolve_storage(str(tmp_path / "s.db"), default_path=tmp_path / "s.db"))
    names = {t.number: p.name for t, p in zip(result.best, result.acf_paths, strict=True)}
    assert get_note(result.study) == study_note(result.study, names)
