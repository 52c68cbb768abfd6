"""The README's Python API script runs as written (real ptxas), and the API stays cheap to import."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

import ciq_optuna
from ciq_optuna.api import kernel_kind
from ciq_optuna.errors import CiqError

REPO = Path(__file__).resolve().parents[1]


def _readme_script() -> str:
    section = (REPO / "README.md").read_text().split("## Python API", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_script_runs_and_writes_an_acf(tmp_path: Path) -> None:
    script = _readme_script().replace("examples/", f"{REPO}/examples/")
    res = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr
    assert "wrote stencil.api.acf" in res.stdout
    acf = (tmp_path / "stencil.api.acf").read_text()
    assert 'arch = "sm_90a"' in acf and "registers" in acf
    flags = subprocess.run(
        [sys.executable, "-m", "ciq_optuna.cli", "acf", "flags", str(tmp_path / "stencil.api.acf")],
        capture_output=True,
        text=True,
    )
    assert flags.returncode == 0, flags.stderr


def test_import_is_lazy_and_names_resolve() -> None:
    code = "import sys, ciq_optuna; print(sorted(m for m in ('optuna', 'numpy', 'pandas', 'sqlalchemy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    for name in ciq_optuna.__all__:
        assert getattr(ciq_optuna, name) is not None
    with pytest.raises(AttributeError):
        ciq_optuna.no_such_name  # noqa: B018


def test_kernel_kinds_and_unknown_front_end() -> None:
    assert kernel_kind("a/k.ptx") == "ptx" and kernel_kind("k.cu") == "cu"
    assert kernel_kind("kernels/add.py:add_kernel") == "triton"
    with pytest.raises(CiqError, match="not found|no such|does not exist|missing"):
        ciq_optuna.compile_objective("kernels/add.py:add_kernel", arch="sm_90a")
    with pytest.raises(CiqError, match="expected a .ptx or .cu file"):
        ciq_optuna.compile_objective("k.txt", arch="sm_90a")


def test_triton_kernel_through_the_python_api(tmp_path: Path) -> None:
    """A real Triton kernel (compiled ahead of time, no GPU) tuned with study.optimize."""
    pytest.importorskip("triton")
    kernel = f"{REPO / 'examples' / 'triton' / 'rmsnorm.py'}:rmsnorm_kernel"
    objective = ciq_optuna.compile_objective(kernel, arch="sm_90a", metrics=["registers"], workdir=tmp_path)
    study = optuna.create_study(sampler=ciq_optuna.GeneticSampler(seed=0))
    study.optimize(objective, n_trials=3, catch=(ciq_optuna.TrialFailed,))
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert done and all(t.value > 0 for t in done)
    assert any(k.startswith("ptxas.") for k in done[0].params)
    assert any(not k.startswith("ptxas.") for k in done[0].params)  # meta-parameters too
    acf = ciq_optuna.write_trial_acf(tmp_path / "best.acf", study, study.best_trial, objective)
    assert "[triton]" in acf.read_text()


def test_temporary_workdir_made_only_when_a_binary_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``workdir`` the binaries go to a temporary folder, made on first use: an objective
    that keeps none, or whose folder is set later (as ``ciq-optuna tune`` does), leaves none behind."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    kernel = REPO / "examples" / "stencil" / "stencil.sm_90a.ptx"
    objective = ciq_optuna.compile_objective(kernel, arch="sm_90a", metrics=["registers"])
    objective.workdir = tmp_path / "set-later"
    fresh = ciq_optuna.compile_objective(kernel, arch="sm_90a", metrics=["registers"])
    assert not list(tmp_path.glob("ciq-optuna-*"))
    study = optuna.create_study(sampler=ciq_optuna.GeneticSampler(seed=0))
    study.optimize(fresh, n_trials=1)
    made = list(tmp_path.glob("ciq-optuna-*"))
    assert made == [fresh.workdir]
    assert [p.name for p in (fresh.workdir / "binaries").iterdir()] == [
        fresh.binary_path(study.trials[0].user_attrs["binary_hash"]).name
    ]
