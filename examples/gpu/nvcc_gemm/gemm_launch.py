"""How to launch and check sgemm.cu: the KernelLaunch of the NVCC example (and of the GPU tests).

Inputs are drawn on the host from the seed (so the host reference sees the same numbers), then
copied to the device. Outputs: C (argument 2).
"""

from __future__ import annotations

import functools

import numpy as np

from ciq_optuna.gpu import KernelLaunch

TILE = 64
THREADS = 256
KERNEL = "sgemm"


def host_inputs(seed: int, m: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """A (m x k) and B (k x n), uniform in [-1, 1), float32."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, size=(m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, size=(k, n)).astype(np.float32)
    return a, b


def make_args(seed: int, *, m: int, n: int, k: int) -> list:
    """Kernel arguments (A, B, C, M, N, K) on the device; C starts as zeros."""
    import cupy

    a, b = host_inputs(seed, m, n, k)
    c = cupy.zeros((m, n), dtype=cupy.float32)
    return [cupy.asarray(a), cupy.asarray(b), c, np.int32(m), np.int32(n), np.int32(k)]


def reference(seed: int, *, m: int, n: int, k: int) -> list[np.ndarray]:
    """C computed on the host in float64, rounded to float32."""
    a, b = host_inputs(seed, m, n, k)
    return [(a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)]


def gemm_launch(m: int = 2048, n: int = 2048, k: int = 2048, *, host_reference: bool = True) -> KernelLaunch:
    """The launch of sgemm for an m x n x k problem (multiples of 64; k a multiple of 16)."""
    if m % TILE or n % TILE or k % 16:
        raise ValueError("m and n must be multiples of 64, k of 16")
    sizes = {"m": m, "n": n, "k": k}
    return KernelLaunch(
        kernel=KERNEL,
        grid=(n // TILE, m // TILE),
        block=(THREADS,),
        make_args=functools.partial(make_args, **sizes),
        outputs=(2,),
        seeds=(0, 1, 2),
        reference=functools.partial(reference, **sizes) if host_reference else None,
        rtol=1e-4,
        atol=1e-3,
    )
