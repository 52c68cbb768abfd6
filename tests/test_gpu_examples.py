"""The GPU examples' CPU-side steps: their spaces, and the NVCC compile step with the real nvcc."""

from __future__ import annotations

import sys
from pathlib import Path

import optuna
import pytest

from ciq_optuna.compilers import get_compiler, xptxas_arg
from ciq_optuna.space.files import load_space
from ciq_optuna.space.search import SearchSpace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "gpu" / "nvcc_gemm"))


def test_nvcc_workflow_compiles_suggested_ptxas_controls(tmp_path):
    from gemm_launch import gemm_launch

    nvcc = get_compiler("nvcc")
    ptxas_space = load_space("ptxas", nvcc.info.release).for_arch("sm_90a")
    space = SearchSpace(compilers=[ptxas_space])
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=5))
    src = ROOT / "examples" / "gpu" / "nvcc_gemm" / "sgemm.cu"
    hashes = set()
    for i in range(3):
        flags = space.suggest(study.ask()).flags["ptxas"]
        nv_flags = ["-Xptxas", xptxas_arg(flags)] if flags else []
        res = nvcc.compile(src, "sm_90a", nv_flags, output=tmp_path / f"t{i}.cubin", verbose=True)
        assert res.ok, (flags, res.error)
        assert "sgemm" in res.functions
        hashes.add(res.code_hash)
    assert hashes
    launch = gemm_launch(256, 128, 64)
    assert launch.grid == (2, 4) and launch.block == (256,) and launch.outputs == (2,)
    with pytest.raises(ValueError):
        gemm_launch(100, 64, 64)
