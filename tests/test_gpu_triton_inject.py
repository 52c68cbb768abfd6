"""The ptxas wrapper used for Triton, run with the real ptxas (no GPU needed to compile).

Triton itself is not installed here; what Triton does is reproduced by calling the wrapper the
way Triton calls ptxas (``--version`` first, then a compile with its own options).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ciq_optuna.compilers import code_hash, find_compiler, run_command
from ciq_optuna.errors import CiqError
from ciq_optuna.gpu.errors import MeasurementError
from ciq_optuna.gpu.triton_inject import PtxasInjection, write_ptxas_wrapper

SGEMM_CU = Path(__file__).resolve().parents[1] / "examples" / "gpu" / "nvcc_gemm" / "sgemm.cu"


@pytest.fixture(scope="module")
def ptxas():
    return find_compiler("ptxas")


@pytest.fixture(scope="module")
def ptx(tmp_path_factory, ptxas):
    nvcc = find_compiler("nvcc")
    out = tmp_path_factory.mktemp("ptx") / "sgemm.ptx"
    res = run_command([nvcc.path, "-ptx", "-arch=sm_90a", "-o", out, SGEMM_CU], timeout=120)
    assert res.ok, res.stderr
    return out


def _triton_like_compile(wrapper, ptx, out, env):
    """The shape of Triton's ptxas call: its options, then the input, ``-o`` and the output."""
    argv = [str(wrapper), "-lineinfo", "-v", "--fmad=true", "--gpu-name=sm_90a", str(ptx), "-o", str(out)]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)


def test_version_passes_through_untouched(tmp_path, ptxas):
    inj = PtxasInjection(ptxas.path, tmp_path)
    env = {"PATH": "/usr/bin:/bin"}
    inj.use(["-O0"], env)
    real = subprocess.run([str(ptxas.path), "--version"], capture_output=True, text=True).stdout
    wrapped = subprocess.run([str(inj.wrapper), "--version"], env=env, capture_output=True, text=True).stdout
    assert wrapped == real and "release" in real
    assert inj.calls() == []


def test_flags_reach_ptxas_and_change_the_binary(tmp_path, ptxas, ptx):
    inj = PtxasInjection(ptxas.path, tmp_path / "work")
    env = {"PATH": "/usr/bin:/bin"}
    inj.use([], env)
    r0 = _triton_like_compile(inj.wrapper, ptx, tmp_path / "base.cubin", env)
    assert r0.returncode == 0, r0.stderr
    inj.check_reached([])
    inj.use(["-O0"], env)
    r1 = _triton_like_compile(inj.wrapper, ptx, tmp_path / "o0.cubin", env)
    assert r1.returncode == 0, r1.stderr
    last = inj.check_reached(["-O0"], since=1)
    assert last[-1] == "-O0" and "--gpu-name=sm_90a" in last
    base = code_hash((tmp_path / "base.cubin").read_bytes())
    o0 = code_hash((tmp_path / "o0.cubin").read_bytes())
    assert base != o0  # the -O0 canary: controls reach the compiler
    direct = tmp_path / "direct.cubin"
    res = run_command(
        [ptxas.path, "-lineinfo", "-v", "--fmad=true", "--gpu-name=sm_90a", ptx, "-o", direct], timeout=120
    )
    assert res.ok and code_hash(direct.read_bytes()) == base  # no flags: same code as plain ptxas


def test_candidate_value_overrides_tritons_own_option(tmp_path, ptxas, ptx):
    inj = PtxasInjection(ptxas.path, tmp_path / "work")
    env = {"PATH": "/usr/bin:/bin"}
    inj.use(["--fmad=false"], env)
    r = _triton_like_compile(inj.wrapper, ptx, tmp_path / "nofma.cubin", env)
    assert r.returncode == 0
    assert "the last value of this option was used" in r.stderr
    assert inj.calls()[-1][-1] == "--fmad=false"


def test_check_reached_detects_a_cache_hit_and_missing_flags(tmp_path, ptxas, ptx):
    inj = PtxasInjection(ptxas.path, tmp_path / "work")
    env = {"PATH": "/usr/bin:/bin"}
    inj.use(["-O3"], env)
    with pytest.raises(MeasurementError, match="ptxas was not called: Triton reused a cached kernel"):
        inj.check_reached(["-O3"])
    _triton_like_compile(inj.wrapper, ptx, tmp_path / "a.cubin", env)
    with pytest.raises(MeasurementError, match=r"ptxas ran without the candidate's flags \['-O1'\]"):
        inj.check_reached(["-O1"])


def test_each_candidate_gets_a_fresh_triton_cache(tmp_path, ptxas):
    inj = PtxasInjection(ptxas.path, tmp_path)
    env: dict[str, str] = {}
    first = inj.use(["-O3"], env)
    second = inj.use(["-O2", "--maxrregcount=64"], env)
    assert first != second and first.is_dir() and second.is_dir()
    assert not any(second.iterdir())
    assert env["TRITON_CACHE_DIR"] == str(second)
    assert env["TRITON_ALWAYS_COMPILE"] == "1"
    assert env["TRITON_PTXAS_PATH"] == str(inj.wrapper) == env["TRITON_PTXAS_BLACKWELL_PATH"]
    assert inj.flags_file.read_text() == "-O2\n--maxrregcount=64\n"


def test_bad_flags_and_bad_ptxas_are_one_line_errors(tmp_path, ptxas):
    inj = PtxasInjection(ptxas.path, tmp_path)
    with pytest.raises(CiqError, match="single-line"):
        inj.use(["-O3\n-O0"], {})
    with pytest.raises(CiqError, match="ptxas not found or not executable"):
        write_ptxas_wrapper(tmp_path, tmp_path / "nope")
