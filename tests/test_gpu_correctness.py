"""Correctness gate: outputs compared with stated tolerances, one-line reasons (numpy; cupy arrays on a GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from ciq_optuna.gpu.correctness import check_outputs, compare_outputs
from ciq_optuna.gpu.errors import CorrectnessError


def test_equal_within_tolerances_passes():
    e = np.linspace(0, 1, 100, dtype=np.float32)
    assert compare_outputs([e], [e * (1 + 1e-7)], rtol=1e-5, atol=0) is None


def test_mismatch_names_output_count_and_worst_element():
    e = np.zeros((4, 8), dtype=np.float32)
    g = e.copy()
    g[1, 2] = 0.5
    g[3, 7] = 2.0
    msg = compare_outputs([e, e], [e, g], rtol=1e-5, atol=1e-6, label="seed 2")
    assert msg == (
        "output 1 (seed 2): 2 of 32 elements differ beyond rtol=1e-05 atol=1e-06; "
        "worst at index (3, 7): got 2.0, expected 0.0"
    )


def test_nan_in_candidate_only_is_a_mismatch():
    e = np.ones(10)
    g = e.copy()
    g[4] = np.nan
    assert "index (4,)" in compare_outputs([e], [g], rtol=1e-3, atol=1e-3)
    assert compare_outputs([g], [g.copy()], rtol=0, atol=0) is None


def test_integer_outputs_must_match_exactly():
    e = np.arange(10, dtype=np.int32)
    g = e.copy()
    g[9] += 1
    assert "1 of 10 elements" in compare_outputs([e], [g], rtol=1.0, atol=1.0)


def test_shape_and_dtype_and_count_mismatch():
    e = np.ones(4, dtype=np.float32)
    assert "shape" in compare_outputs([e], [np.ones(5, dtype=np.float32)], rtol=0, atol=0)
    assert "dtype" in compare_outputs([e], [np.ones(4, dtype=np.float64)], rtol=0, atol=0)
    assert "2 outputs, expected 1" in compare_outputs([e], [e, e], rtol=0, atol=0)


def test_check_outputs_raises_a_ciq_error():
    with pytest.raises(CorrectnessError, match="^wrong result: output 0"):
        check_outputs([np.zeros(3)], [np.ones(3)], rtol=1e-5, atol=1e-8)


@pytest.mark.gpu
def test_cupy_outputs_are_compared_on_the_gpu_with_the_same_verdicts(cupy_gpu) -> None:
    """The same cases on the GPU (marker ``gpu``): cupy arrays give numpy's verdicts and messages."""
    rng = np.random.default_rng(0)
    e = rng.standard_normal((64, 32)).astype(np.float16)
    g = e.copy()
    g[3, 5] += np.float16(1.0)
    cp = cupy_gpu
    for expected, got in ([e, e.copy()], [e, g], [np.arange(10), np.arange(10)[::-1].copy()]):
        host = compare_outputs([expected], [got], rtol=1e-2, atol=1e-2, label="seed 1")
        assert compare_outputs([cp.asarray(expected)], [cp.asarray(got)], rtol=1e-2, atol=1e-2, label="seed 1") == host
    assert "index (3, 5)" in compare_outputs([cp.asarray(e)], [cp.asarray(g)], rtol=1e-2, atol=1e-2)
    assert "shape" in compare_outputs([cp.asarray(e)], [cp.asarray(e[:3])], rtol=0, atol=0)
