"""The cupy/NVML paths on a real GPU (marker ``gpu``): skipped, with the reason, where there is none.

They compile examples/gpu/nvcc_gemm/sgemm.cu with nvcc for the GPU's architecture: as is, at
-O0, with a wrong result (``-DCIQ_WRONG_RESULT``) and with an illegal store
(``-DCIQ_ILLEGAL_ADDRESS``), then check that the harness measures the good ones and that the
gates fail the bad ones with their reason while the test process goes on.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from ciq_optuna.errors import CiqError
from ciq_optuna.gpu import CorrectnessError, RuntimeObjective, StoppingRule
from ciq_optuna.gpu.errors import EvaluationCrashed, LaunchError

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]
GEMM = ROOT / "examples" / "gpu" / "nvcc_gemm"
sys.path.insert(0, str(GEMM))

QUICK = StoppingRule(warmup=5, min_repeats=20, max_repeats=200, max_seconds=5)


@pytest.fixture(scope="module")
def arch(cupy_gpu):
    return f"sm_{cupy_gpu.cuda.Device(0).compute_capability}"


@pytest.fixture(scope="module")
def cubins(arch, tmp_path_factory):
    from ciq_optuna.compilers import get_compiler

    try:
        nvcc = get_compiler("nvcc")
    except CiqError as exc:
        pytest.skip(f"needs nvcc: {exc}")
    out = tmp_path_factory.mktemp("cubins")
    variants = {
        "baseline": [],
        "o0": ["-Xptxas", "-O0"],
        "wrong": ["-DCIQ_WRONG_RESULT"],
        "illegal": ["-DCIQ_ILLEGAL_ADDRESS"],
    }
    paths = {}
    for name, flags in variants.items():
        res = nvcc.compile(GEMM / "sgemm.cu", arch, flags, output=out / f"{name}.cubin", verbose=False)
        assert res.ok, res.error
        paths[name] = Path(res.cubin_path)
    return paths


def _launch(host_reference=True):
    from gemm_launch import gemm_launch

    return gemm_launch(512, 512, 512, host_reference=host_reference)


def test_baseline_passes_the_host_reference_and_is_timed_with_samples(cubins):
    measure = RuntimeObjective(_launch(), cubins["baseline"], rule=QUICK, timeout=300)
    metrics = measure(cubins["baseline"])
    assert set(metrics) >= {"time_ms", "time_p90_ms", "baseline_time_ms", "time_ratio", "time_rel_ci"}
    assert all(np.isfinite(v) and v > 0 for v in metrics.values())
    attrs = measure.user_attrs()
    assert (
        len(attrs["runtime_samples_ms"]) == len(attrs["baseline_samples_ms"]) == attrs["runtime_rounds"] >= 20
    )
    assert attrs["runtime_stop_reason"] in ("precision", "max_repeats", "max_seconds")
    json.dumps(attrs)  # storable as Optuna user attributes


def test_o0_candidate_is_measured_against_the_baseline(cubins):
    measure = RuntimeObjective(_launch(), cubins["baseline"], rule=QUICK, timeout=300)
    metrics = measure(cubins["o0"])
    assert metrics["time_ratio"] == pytest.approx(metrics["time_ms"] / metrics["baseline_time_ms"])


def test_wrong_result_fails_with_the_mismatch_as_reason(cubins):
    measure = RuntimeObjective(_launch(), cubins["baseline"], rule=QUICK, timeout=300)
    with pytest.raises(
        CorrectnessError, match=r"wrong result: output 0 \(seed 0\): 1 of 262144 elements differ"
    ):
        measure(cubins["wrong"])


def test_baseline_outputs_are_the_default_reference(cubins):
    measure = RuntimeObjective(_launch(host_reference=False), cubins["baseline"], rule=QUICK, timeout=300)
    with pytest.raises(CorrectnessError, match="worst at index \\(0, 0\\)"):
        measure(cubins["wrong"])


def test_illegal_address_fails_the_trial_not_the_worker(cubins):
    measure = RuntimeObjective(_launch(), cubins["baseline"], rule=QUICK, timeout=300)
    with pytest.raises((LaunchError, EvaluationCrashed), match="(?i)illegal|crash|launch"):
        measure(cubins["illegal"])
    assert measure(cubins["baseline"])["time_ms"] > 0  # the next trial runs normally


def test_l2_flusher_covers_twice_the_l2(cubins):
    import cupy

    from ciq_optuna.gpu.harness import L2Flusher

    flusher = L2Flusher()
    assert flusher.nbytes >= 2 * cupy.cuda.Device().attributes["L2CacheSize"]
    flusher()
    cupy.cuda.get_current_stream().synchronize()


def test_energy_and_power_from_nvml(cubins):
    pytest.importorskip("pynvml", reason="needs nvidia-ml-py for energy (pip install 'ciq-optuna[gpu]')")
    measure = RuntimeObjective(_launch(), cubins["baseline"], rule=QUICK, energy=True, timeout=300)
    metrics = measure(cubins["o0"])
    assert metrics["energy_mj"] > 0 and metrics["power_w"] > 0 and metrics["energy_ratio"] > 0


def test_locked_clocks_are_restored():
    pytest.importorskip("pynvml", reason="needs nvidia-ml-py (pip install 'ciq-optuna[gpu]')")
    from ciq_optuna.gpu.nvml import load_nvml, locked_clocks

    nvml = load_nvml()
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    try:
        with locked_clocks(0) as clocks:
            assert clocks["sm_mhz"] > 0
            with pytest.raises(RuntimeError):
                with locked_clocks(0):
                    raise RuntimeError("trial failed inside the lock")
    except CiqError as exc:
        pytest.skip(f"clock locking not permitted here: {exc}")
    assert nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM) > 0


def test_validate_keeps_nothing_for_an_identical_binary(cubins, arch, tmp_path, capsys):
    from ciq_optuna.acf import Acf, write_acf
    from ciq_optuna.compilers import get_compiler
    from ciq_optuna.gpu.cli import add_validate_arguments, run_validate

    version = get_compiler("nvcc").info.version
    acfs = []
    for name, flags in (("same", []), ("o0", ["-O0"])):
        acfs.append(
            write_acf(
                tmp_path / f"{name}.acf",
                Acf("ptxas", version, arch, flags, {}, {"name": "ptxas", "version": 1}, []),
            )
        )
    parser = argparse.ArgumentParser()
    add_validate_arguments(parser)
    args = parser.parse_args(
        [
            *map(str, acfs),
            "--launch",
            f"{GEMM / 'gemm_launch.py'}:gemm_launch",
            "--kernel",
            str(GEMM / "sgemm.cu"),
        ]
        + ["--arch", arch, "--sessions", "2", "--repeats", "40", "--warmup", "10"]
    )
    assert run_validate(args) == 0
    out = capsys.readouterr().out
    same = json.loads((tmp_path / "same.validation.json").read_text())
    assert same["decision"] == "REJECTED"
    assert len(same["samples"]["baseline"]) == 2 * 40
    assert same["environment"]["sessions"][0]["gpu"]
    o0 = json.loads((tmp_path / "o0.validation.json").read_text())
    assert o0["decision"] in ("KEPT", "REJECTED") and "of 2 kept" in out
