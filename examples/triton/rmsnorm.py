"""Fused residual add + RMSNorm: h = x + residual; y = h / sqrt(mean(h^2) + eps) * weight.

Memory-bound: one program per row reads x and residual once, writes h (the new residual) and y.
The row is processed in chunks of BLOCK_N (two passes: sum of squares while writing h, then scale
from h), so any hidden size works; BLOCK_N and num_warps set how many values each thread holds.
"""

import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(
    x_ptr,
    res_ptr,
    w_ptr,
    y_ptr,
    h_ptr,
    n_cols,
    eps,
    stride_row,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0)
    base = row * stride_row
    sum_sq = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        ok = cols < n_cols
        h = tl.load(x_ptr + base + cols, mask=ok, other=0.0).to(tl.float32)
        h += tl.load(res_ptr + base + cols, mask=ok, other=0.0).to(tl.float32)
        tl.store(h_ptr + base + cols, h.to(tl.float16), mask=ok)
        sum_sq += h * h
    inv_rms = 1.0 / tl.sqrt(tl.sum(sum_sq, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        ok = cols < n_cols
        h = tl.load(h_ptr + base + cols, mask=ok, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
        tl.store(y_ptr + base + cols, (h * inv_rms * w).to(tl.float16), mask=ok)


ROWS, COLS = 4096, 8192


def rmsnorm_launch(meta: dict, seed: int) -> dict:
    """Inputs for timing on a GPU (cupy; imported here so that compiling needs no GPU)."""
    import cupy as cp

    rng = cp.random.default_rng(seed)
    x, res = (rng.standard_normal((ROWS, COLS), dtype=cp.float32).astype(cp.float16) for _ in range(2))
    w = rng.standard_normal(COLS, dtype=cp.float32).astype(cp.float16)
    args = {"x_ptr": x, "res_ptr": res, "w_ptr": w, "y_ptr": cp.empty_like(x), "h_ptr": cp.empty_like(x)}
    args.update(n_cols=COLS, eps=1e-6, stride_row=COLS)
    return {"args": args, "grid": (ROWS,), "outputs": ["y_ptr", "h_ptr"], "rtol": 1e-2, "atol": 1e-2}


CIQ_OPTUNA = {
    "rmsnorm_kernel": {
        # rows of 8192 fp16 values (a Llama-70B hidden size), contiguous
        "signature": {
            "x_ptr": "*fp16:16",
            "res_ptr": "*fp16:16",
            "w_ptr": "*fp16:16",
            "y_ptr": "*fp16:16",
            "h_ptr": "*fp16:16",
            "n_cols": "i32:16",
            "eps": "fp32",
            "stride_row": "i32:16",
        },
        "space": {
            "BLOCK_N": [1024, 512, 2048, 4096, 8192],
            "num_warps": [4, 1, 2, 8, 16],
        },
        "launch": rmsnorm_launch,
    }
}
