"""``ciq-optuna check`` timing a runtime objective on a real GPU (marker ``gpu``: skipped without one).

A two-trial nvcc tune of examples/gpu/nvcc_gemm/sgemm.cu for the GPU's architecture, its ACF given
a ``time_ms`` objective and stored with the example's ``KernelLaunch``; ``check`` then times the
tuning against the defaults with the harness ``validate`` uses.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ciq_optuna.acf import read_acf, write_acf
from ciq_optuna.cli import main

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]
GEMM = ROOT / "examples" / "gpu" / "nvcc_gemm"


def test_check_times_a_runtime_objective_on_the_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, cupy_gpu
) -> None:
    cc = cupy_gpu.cuda.Device(0).compute_capability  # "90": major and minor digits
    arch = f"sm_{cc}" + ("a" if int(cc) >= 90 else "")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CIQ_OPTUNA_STORAGE", raising=False)
    for name in ("sgemm.cu", "gemm_launch.py"):
        shutil.copy(GEMM / name, tmp_path / name)
    argv = ["tune", "sgemm.cu", "--arch", arch, "--minimize", "registers", "--trials", "2", "--quiet"]
    assert main([*argv, "--no-simplify", "--acf", "sgemm.acf"]) == 0
    acf = read_acf(tmp_path / "sgemm.acf")
    acf.objectives.append({"name": "time_ms", "direction": "minimize", "value": 1.0, "baseline": 1.0})
    write_acf(tmp_path / "sgemm.acf", acf)
    add = ["store", "add", "sgemm.acf", "--kernel", "sgemm.cu", "--store", "store"]
    assert main([*add, "--launch", "gemm_launch.py:gemm_launch"]) == 0
    capsys.readouterr()
    code = main(["check", "store", "--json", "--repeats", "30", "--require-runtime"])
    doc = json.loads(capsys.readouterr().out)
    (row,) = doc["results"]
    time_ms = row["objectives"][1]
    assert time_ms["checked"] and time_ms["tuned_ms"] > 0 and time_ms["default_ms"] > 0
    assert doc["runtime_not_checked"] == 0
    assert code == (1 if row["stale"] else 0)
