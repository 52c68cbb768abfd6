"""The harness's control flow with a fake cupy (a mock of the GPU: none is on this machine).

The fake "cubin" is a text file naming what its kernel does; launches run numpy on the host and
CUDA events read a synthetic clock. This checks the plumbing of ``evaluate`` (load, correctness
gate, interleaved timing, metrics, user attributes) in-process; the real cupy path is covered by
tests/test_gpu_device.py on a GPU.
"""

from __future__ import annotations

import json
import sys
import types

import numpy as np
import pytest

from ciq_optuna.gpu import CorrectnessError, KernelLaunch, LaunchError, RuntimeObjective, StoppingRule
from ciq_optuna.gpu.harness import metrics_from

CLOCK = {"t": 0.0}


class _Event:
    def record(self, stream=None):
        self.t = CLOCK["t"]

    def synchronize(self):
        pass


class _Kernel:
    def __init__(self, behaviour: str):
        self.behaviour = behaviour
        self.launches = 0

    def __call__(self, grid, block, args, shared_mem=0):
        x, y = args[0], args[1]
        if self.behaviour == "crash":
            raise RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered")
        y[:] = x * 2 + (1 if self.behaviour == "wrong" else 0)
        CLOCK["t"] += {"slow": 1.10, "fast": 0.95}.get(self.behaviour, 1.0)


class _RawModule:
    def __init__(self, path):
        self.behaviour = open(path).read().strip()

    def get_function(self, name):
        if name != "k":
            raise RuntimeError(f"CUDA_ERROR_NOT_FOUND: named symbol not found ({name})")
        return _Kernel(self.behaviour)


def _fake_cupy() -> types.ModuleType:
    cp = types.ModuleType("cupy")
    cp.__version__ = "fake"
    cp.uint8 = np.uint8
    cp.RawModule = _RawModule
    cp.asnumpy = np.asarray
    cp.empty = lambda n, dtype: types.SimpleNamespace(data=types.SimpleNamespace(ptr=0))
    stream = types.SimpleNamespace(synchronize=lambda: None, ptr=0)
    runtime = types.SimpleNamespace(
        getDeviceCount=lambda: 1,
        memsetAsync=lambda ptr, value, n, s: None,
        runtimeGetVersion=lambda: 13000,
        driverGetVersion=lambda: 13000,
        getDeviceProperties=lambda i: {"name": b"Fake GPU", "major": 9, "minor": 0},
    )
    cp.cuda = types.SimpleNamespace(
        runtime=runtime,
        Event=_Event,
        Device=lambda i=0: types.SimpleNamespace(use=lambda: None, attributes={"L2CacheSize": 1 << 20}),
        get_current_stream=lambda: stream,
        get_elapsed_time=lambda a, b: b.t - a.t,
    )
    return cp


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy())
    cubins = {}
    for name in ("ok", "wrong", "crash", "slow", "fast"):
        cubins[name] = tmp_path / f"{name}.cubin"
        cubins[name].write_text(name)
    return cubins


def make_args(seed: int):
    x = np.random.default_rng(seed).standard_normal(16).astype(np.float32)
    return [x, np.zeros_like(x), np.int32(16)]


def reference(seed: int):
    return [make_args(seed)[0] * 2]


LAUNCH = KernelLaunch("k", (1,), (16,), make_args, outputs=(1,), reference=reference)
RULE = StoppingRule(warmup=2, min_repeats=20, max_repeats=50, rel_precision=0.005)


def test_candidate_time_ratio_and_samples_fake_cupy(fake_gpu):
    measure = RuntimeObjective(LAUNCH, fake_gpu["ok"], rule=RULE, isolate=False)
    metrics = measure(fake_gpu["slow"], None)
    assert metrics["time_ratio"] == pytest.approx(1.10)
    assert metrics["time_ms"] == pytest.approx(1.10) and metrics["baseline_time_ms"] == pytest.approx(1.0)
    assert metrics["time_p90_ms"] == pytest.approx(1.10)
    attrs = measure.user_attrs()
    assert attrs["runtime_stop_reason"] == "precision" and attrs["runtime_rounds"] == 20
    assert attrs["runtime_samples_ms"] == pytest.approx([1.10] * 20)
    assert attrs["gpu"] == "Fake GPU"
    json.dumps(attrs)
    assert metrics_from(measure.last_result) == metrics


def test_wrong_output_fails_the_gate_fake_cupy(fake_gpu):
    measure = RuntimeObjective(LAUNCH, fake_gpu["ok"], rule=RULE, isolate=False)
    with pytest.raises(
        CorrectnessError, match=r"^wrong result: output 0 \(seed 0\): 16 of 16 elements differ"
    ):
        measure(fake_gpu["wrong"])
    assert measure.last_result is None


def test_baseline_is_checked_against_the_reference_fake_cupy(fake_gpu):
    measure = RuntimeObjective(LAUNCH, fake_gpu["wrong"], rule=RULE, isolate=False)
    with pytest.raises(CorrectnessError, match=r"output 0 \(baseline, seed 0\)"):
        measure(fake_gpu["ok"])


def test_launch_errors_are_one_line_fake_cupy(fake_gpu, tmp_path):
    measure = RuntimeObjective(LAUNCH, fake_gpu["ok"], rule=RULE, isolate=False)
    with pytest.raises(
        LaunchError, match="^candidate failed on input seed 0: RuntimeError: CUDA_ERROR_ILLEGAL"
    ):
        measure(fake_gpu["crash"])
    with pytest.raises(LaunchError, match="cubin not found"):
        measure(tmp_path / "missing.cubin")
    other = KernelLaunch("nope", (1,), (16,), make_args, outputs=(1,))
    with pytest.raises(LaunchError, match="cannot load kernel 'nope' from ok.cubin"):
        RuntimeObjective(other, fake_gpu["ok"], rule=RULE, isolate=False)(fake_gpu["ok"])


def test_baseline_alone_fake_cupy(fake_gpu):
    measure = RuntimeObjective(LAUNCH, fake_gpu["ok"], rule=RULE, isolate=False)
    result = measure.evaluate(None)
    assert set(result["summaries"]) == {"baseline"}
    assert metrics_from(result)["time_ratio"] == 1.0


def test_unpicklable_launch_is_a_clear_error():
    from ciq_optuna.errors import CiqError

    bad = KernelLaunch("k", (1,), (1,), lambda seed: [], outputs=())
    with pytest.raises(CiqError, match="define make_args/reference as module-level functions"):
        RuntimeObjective(bad, "x.cubin")


def test_isolated_failures_keep_their_type_and_reason():
    from ciq_optuna.gpu.errors import EvaluationCrashed
    from ciq_optuna.gpu.objective import translate_failure
    from ciq_optuna.isolation import IsolatedFailure

    err = translate_failure(
        IsolatedFailure("raised CorrectnessError: wrong result: output 0 (seed 1): x", "exception")
    )
    assert type(err) is CorrectnessError and str(err) == "wrong result: output 0 (seed 1): x"
    err = translate_failure(IsolatedFailure("crashed with signal 11 (SIGSEGV)", "signal"))
    assert type(err) is EvaluationCrashed and str(err) == "evaluation crashed with signal 11 (SIGSEGV)"
    err = translate_failure(IsolatedFailure("raised ValueError: bad tile", "exception"))
    assert type(err) is EvaluationCrashed and str(err) == "evaluation raised ValueError: bad tile"


@pytest.mark.skipif("cupy" in sys.modules or __import__("importlib").util.find_spec("cupy") is not None,
                    reason="cupy is installed: the real path is tested on the GPU")  # fmt: skip
def test_isolated_evaluation_without_cupy_is_one_line(tmp_path):
    from ciq_optuna.gpu.errors import GpuUnavailableError

    (tmp_path / "b.cubin").write_text("ok")
    measure = RuntimeObjective(LAUNCH, tmp_path / "b.cubin", rule=RULE, timeout=120)
    with pytest.raises(
        GpuUnavailableError, match=r"^runtime measurement needs cupy: pip install 'ciq-optuna\[gpu\]'$"
    ):
        measure(tmp_path / "b.cubin")
