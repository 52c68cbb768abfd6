"""A compiler that hangs, crashes or prints what cannot be read fails its trial, never wins it.

Every test runs the real ptxas through the fault-injecting wrapper of
``benchmarks/fault_table.py`` (a Python script passed as ``--compiler-path``), and checks the
process table (/proc) for helpers a fault left behind.
"""

from __future__ import annotations

import importlib.util
import math
import re
import sys
from pathlib import Path

import optuna
import pytest
import tomllib

from ciq_optuna.compilers import Ptxas, find_compiler
from ciq_optuna.compilers.locate import CompilerNotFoundError, compiler_info
from ciq_optuna.errors import CiqError
from ciq_optuna.objectives.command import CommandMeasure
from ciq_optuna.objectives.compile import normalize_measurement
from ciq_optuna.objectives.metrics import compile_metrics
from ciq_optuna.space.search import Candidate
from ciq_optuna.tune import TuneConfig, tune

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "fault_table.py"
_spec = importlib.util.spec_from_file_location("fault_table", _PATH)
fault_table = importlib.util.module_from_spec(_spec)
sys.modules["fault_table"] = fault_table
_spec.loader.exec_module(fault_table)


@pytest.fixture(scope="module")
def real_ptxas() -> Path:
    return find_compiler("ptxas", release="13.0").path


def _wrapper(tmp_path: Path, real_ptxas: Path, plan: list[str]) -> tuple[Path, str]:
    folder = tmp_path / "wrapper"
    return fault_table.write_wrapper(folder, real_ptxas, plan), f"ciq-fault-helper:{folder}"


def test_compiler_path_accepts_a_wrapper_that_execs_the_real_ptxas(tmp_path: Path, real_ptxas: Path) -> None:
    wrapper, _ = _wrapper(tmp_path, real_ptxas, [])
    info = find_compiler("ptxas", wrapper)
    assert info.path == wrapper and info.version == compiler_info("ptxas", real_ptxas).version
    liar = tmp_path / "liar" / "ptxas"
    liar.parent.mkdir()
    liar.write_text(
        "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\necho 'release 13.0, V13.0.88'\n"
    )
    liar.chmod(0o755)
    with pytest.raises(CompilerNotFoundError, match="is not ptxas"):
        find_compiler("ptxas", liar)


EXPECTED = {
    "hang": "ptxas timed out after 1 s",
    "crash": "ptxas killed by signal 11 (SIGSEGV)",
    "no-cubin": "ptxas exited with status 0 but wrote no out.cubin",
    "garbage-v": "ptxas -v reported entry function(s) none but the cubin holds 'stencil25_3d'; "
    "first unexpected output line: '\\x7fELF?? ptxas ###'",
    "other-function": "ptxas -v reported entry function(s) 'stencil25_3d_other' but the cubin holds "
    "'stencil25_3d'; first unexpected output line: \"ptxas info : Compiling entry function "
    "'stencil25_3d_other' for 'sm_80'\"",
    "other-arch": "ptxas wrote a cubin for sm_90, not the requested sm_80",
}


@pytest.mark.parametrize("fault", sorted(EXPECTED))
def test_each_fault_fails_the_compile_with_one_line(tmp_path: Path, real_ptxas: Path, fault: str) -> None:
    wrapper, marker = _wrapper(tmp_path, real_ptxas, [fault])
    res = Ptxas(find_compiler("ptxas", wrapper)).compile(
        fault_table.STENCIL,
        "sm_80",
        [],
        output=tmp_path / "out.cubin",
        timeout=1.0 if fault == "hang" else 60.0,
    )
    assert fault_table.compile_log(tmp_path / "wrapper") == [fault]
    assert not res.ok and res.cubin is None and res.code_hash is None
    assert res.error == EXPECTED[fault]
    assert fault_table.leftover_processes(marker) == []


def test_truncated_report_is_not_measured_never_zero(tmp_path: Path, real_ptxas: Path) -> None:
    wrapper, _ = _wrapper(tmp_path, real_ptxas, ["truncated-v", "healthy"])
    ptxas = Ptxas(find_compiler("ptxas", wrapper))
    res = ptxas.compile(fault_table.STENCIL, "sm_80", [], output=tmp_path / "a.cubin")
    assert res.ok and res.cubin_info.registers == {"stencil25_3d": 56}
    assert res.parsed == {"stencil25_3d": ["stack_frame", "spill_stores", "spill_loads"]}
    metrics = compile_metrics(res)
    for name in ("registers", "shared", "barriers", "constant"):
        assert metrics[name] is None
    assert metrics["stack"] == 0.0 and metrics["cubin-size"] > 0
    healthy = ptxas.compile(fault_table.STENCIL, "sm_80", [], output=tmp_path / "b.cubin")
    assert compile_metrics(healthy)["registers"] == 56.0 and compile_metrics(healthy)["shared"] == 3840.0
    assert healthy.parsed["stencil25_3d"][:3] == ["registers", "barriers", "stack_frame"]


def test_a_missing_non_objective_metric_shows_as_missing(
    tmp_path: Path, real_ptxas: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # the baseline check compiles healthy; every trial's -v report then lacks the Used line
    wrapper, _ = _wrapper(tmp_path, real_ptxas, ["healthy"] + ["truncated-v"] * 10)
    config = TuneConfig(
        kernel=fault_table.STENCIL,
        arch="sm_80",
        minimize=["cubin-size"],
        trials=3,
        storage=f"sqlite:///{tmp_path / 'db.sqlite'}",
        compiler_path=str(wrapper),
        progress=False,
        simplify=False,
        acf=tmp_path / "best.acf",
    )
    result = tune(config)
    assert result.summary.loc["registers", "best"] == "missing"
    assert result.summary.loc["cubin-size *", "best"] > 0
    doc = tomllib.loads(result.acf_paths[0].read_text())
    assert "registers" not in doc["metrics"]["best"]
    assert "registers" in doc["metrics"]["not_measured"]["best"]
    for t in result.study.trials:
        assert t.user_attrs["metrics"]["registers"] is None


def test_the_fault_table_has_no_completed_faulty_trial(tmp_path: Path) -> None:
    # one hang only: each costs the timeout, which stays long enough for a healthy compile on a busy machine
    table = fault_table.run_table(tmp_path, trials=40, per_fault=2, hangs=1, seed=3, timeout=6.0)
    rows = table["rows"]
    for fault in fault_table.FAULTS:
        injected = 1 if fault == "hang" else 2
        assert rows[fault]["injected"] == injected == rows[fault]["failed"], fault
        assert rows[fault]["completed"] == 0, fault
    assert rows["healthy"]["completed"] == rows["healthy"]["injected"] >= 40 - 13
    assert table["best_fault"] == "healthy"
    assert table["best_value"] == table["healthy_best"]
    assert table["best_value"] == fault_table.real_registers(table["real_ptxas"], table["best_flags"])
    (acf,) = table["acf"]
    doc = tomllib.loads(acf.read_text())
    assert doc["provenance"]["trial"] == table["best_trial"]
    assert doc["metrics"]["best"]["registers"] == table["best_value"] > 0
    for t in table["study"].trials:
        if t.state == optuna.trial.TrialState.FAIL:
            assert t.user_attrs["error"] and "\n" not in t.user_attrs["error"]
    assert fault_table.leftover_processes(table["marker"]) == []


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ("echo 'no number here'", "has no match"),
        ("echo 'time=1.5'; echo 'time=2.5'", "matched 2 times in stdout ('1.5', '2.5')"),
        ("echo 'time=nan'", "not a finite, non-negative number"),
        ("echo 'time=inf'", "not a finite, non-negative number"),
        ("echo 'time=-3'", "not a finite, non-negative number"),
        ("echo 'time=1e999'", "not a finite, non-negative number"),
    ],
)
def test_measure_command_never_takes_a_default(tmp_path: Path, script: str, reason: str) -> None:
    measure = CommandMeasure(
        script, "time", r"time=(\S+)", kernel=tmp_path / "k.ptx", arch="sm_80", timeout=10
    )
    with pytest.raises(CiqError, match=f"^measure .*{re.escape(reason)}"):
        measure(tmp_path / "x.cubin", Candidate())


def test_measure_command_reads_one_match_from_stderr(tmp_path: Path) -> None:
    measure = CommandMeasure(
        "echo 'time=0.25' >&2", "time", r"time=(\S+)", kernel=tmp_path / "k.ptx", arch="sm_80"
    )
    assert measure(tmp_path / "x.cubin", Candidate()) == {"time": 0.25}


@pytest.mark.parametrize(
    "value", [math.nan, math.inf, -math.inf, None, "1.0", {"time": math.nan}, {"time": None}]
)
def test_a_callable_measurement_that_is_not_a_finite_number_fails(value: object) -> None:
    with pytest.raises(CiqError, match="measurement"):
        normalize_measurement(value, "time")


def test_callable_faults_fail_their_trials_and_the_search_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    answers = iter([1.0, math.nan, None, math.inf, "fast", 0.5, 0.75, 2.0])

    def measure(cubin: Path, candidate: Candidate) -> object:
        return next(answers, 3.0)

    config = TuneConfig(
        kernel=fault_table.STENCIL,
        arch="sm_80",
        minimize=["time"],
        measure_name="time",
        trials=8,
        storage=f"sqlite:///{tmp_path / 'db.sqlite'}",
        progress=False,
        simplify=False,
        screen=False,
        seed=1,
    )
    result = tune(config, measure=measure)
    trials = sorted(result.study.trials, key=lambda t: t.number)
    # one call per trial that measured (a binary already measured is reused, not measured again)
    calls = [
        t for t in trials if "measured" in t.user_attrs or "measurement" in t.user_attrs.get("error", "")
    ]
    assert [t.state == optuna.trial.TrialState.COMPLETE for t in calls[:6]] == [
        True,
        False,
        False,
        False,
        False,
        True,
    ]
    reasons = [t.user_attrs["error"] for t in calls[1:5]]
    assert reasons == [
        "measurement 'time' is nan, not a finite number",
        "measurement returned NoneType; expected a number or a dict of numbers",
        "measurement 'time' is inf, not a finite number",
        "measurement returned str; expected a number or a dict of numbers",
    ]
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert all(math.isfinite(t.value) for t in complete)
    assert result.best[0].value == min(t.value for t in complete) == 0.5
