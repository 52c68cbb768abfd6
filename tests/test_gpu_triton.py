"""The Triton runtime measure on a real GPU (marker ``gpu``: skipped without one).

Compiles the rmsnorm example as the trial would, launches it through Triton's own launcher on
cupy buffers, gates the candidate's outputs against the baseline's and times both interleaved.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ciq_optuna.gpu.errors import MeasurementError
from ciq_optuna.gpu.harness import metrics_from
from ciq_optuna.gpu.stats import StoppingRule

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]
RMSNORM = f"{ROOT / 'examples' / 'triton' / 'rmsnorm.py'}:rmsnorm_kernel"


@pytest.fixture(scope="module")
def measure(cupy_gpu):
    pytest.importorskip("triton", reason="needs Triton (pip install 'ciq-optuna[triton]')")
    from ciq_optuna.compilers.triton import load_kernel
    from ciq_optuna.gpu.triton_runtime import TritonRuntimeMeasure

    cc = int(cupy_gpu.cuda.Device(0).compute_capability)
    arch = f"sm_{cc}" + ("a" if cc >= 90 else "")
    rule = StoppingRule(warmup=5, min_repeats=20, max_repeats=200, max_seconds=3)
    return TritonRuntimeMeasure(load_kernel(RMSNORM), arch, rule=rule, timeout=240)


def test_candidate_and_baseline_are_checked_and_timed(measure) -> None:
    baseline = measure.kernel.baseline_app()
    candidate = {**baseline, "BLOCK_N": 2048, "num_warps": 8}
    result = measure.evaluate({"baseline": (baseline, []), "candidate": (candidate, ["-O1"])})
    summaries = result["summaries"]
    for arm in ("baseline", "candidate"):
        assert len(summaries[arm]["samples"]) >= 20
        assert all(s > 0 for s in summaries[arm]["samples"])
    metrics = metrics_from(result)
    assert metrics["time_ms"] > 0 and 0.05 < metrics["time_ratio"] < 20
    assert result["environment"]["gpu"]
    assert any(measure.cache_dir.iterdir())  # the arms are kept for the next evaluations
    phases = measure.user_attrs()["runtime_phases_s"]
    assert set(phases) == {"start", "compile", "check", "timing", "total"}
    assert phases["total"] >= sum(v for k, v in phases.items() if k != "total") > 0


def test_a_candidate_that_recompiles_to_another_binary_is_refused(measure) -> None:
    baseline = measure.kernel.baseline_app()
    with pytest.raises(MeasurementError, match="another binary"):
        measure.evaluate({"baseline": (baseline, []), "candidate": (baseline, [])}, check_hash="0" * 64)
