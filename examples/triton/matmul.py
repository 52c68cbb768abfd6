"""C = A @ B for fp16 A (M x K) and B (K x N), fp32 accumulation, fp16 C, tiles visited in groups.

Tunable: the tile (BLOCK_M x BLOCK_N, stepping BLOCK_K along K), GROUP_M (how many tile rows a
group of programs sweeps before moving right, for L2 reuse of B), num_warps and num_stages
(software-pipelining depth of the K loop). ``CIQ_OPTUNA`` below tells ciq-optuna how to compile it.
"""

import triton
import triton.language as tl


@triton.jit
def matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    group_first_m = (pid // per_group) * GROUP_M
    rows_in_group = tl.minimum(tiles_m - group_first_m, GROUP_M)
    tile_m = group_first_m + (pid % per_group) % rows_in_group
    tile_n = (pid % per_group) // rows_in_group

    offs_m = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_tile = a_ptr + (offs_m % M)[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_tile = b_ptr + offs_k[:, None] * stride_bk + (offs_n % N)[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = offs_k < K - k0
        a = tl.load(a_tile, mask=k_ok[None, :], other=0.0)
        b = tl.load(b_tile, mask=k_ok[:, None], other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BLOCK_K * stride_ak
        b_tile += BLOCK_K * stride_bk

    c_tile = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_tile, acc.to(tl.float16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


SIZE = 4096


def matmul_launch(meta: dict, seed: int) -> dict:
    """Inputs for timing on a GPU (cupy; imported here so that compiling needs no GPU)."""
    import cupy as cp

    rng = cp.random.default_rng(seed)
    a, b = (rng.standard_normal((SIZE, SIZE), dtype=cp.float32).astype(cp.float16) for _ in range(2))
    c = cp.empty_like(a)
    args = {"a_ptr": a, "b_ptr": b, "c_ptr": c, "M": SIZE, "N": SIZE, "K": SIZE}
    args.update(stride_am=SIZE, stride_ak=1, stride_bk=SIZE, stride_bn=1, stride_cm=SIZE, stride_cn=1)
    tiles = -(-SIZE // meta["BLOCK_M"]) * -(-SIZE // meta["BLOCK_N"])
    return {"args": args, "grid": (tiles,), "outputs": ["c_ptr"], "rtol": 2e-2, "atol": 5e-2}


CIQ_OPTUNA = {
    "matmul_kernel": {
        # ":16": 16-byte aligned pointers and sizes/strides that are multiples of 16, as Triton
        # specialises them at run time for contiguous 4096 x 4096 fp16 matrices (unit strides
        # are specialised to 1 there: give them as 'i32' only when they are not 1).
        "signature": {
            "a_ptr": "*fp16:16",
            "b_ptr": "*fp16:16",
            "c_ptr": "*fp16:16",
            "M": "i32:16",
            "N": "i32:16",
            "K": "i32:16",
            "stride_am": "i32:16",
            "stride_ak": "i32",
            "stride_bk": "i32:16",
            "stride_bn": "i32",
            "stride_cm": "i32:16",
            "stride_cn": "i32",
        },
        "space": {
            "BLOCK_M": [128, 64, 256],
            "BLOCK_N": [128, 64, 256],
            "BLOCK_K": [64, 32],
            "GROUP_M": [8, 1, 4],
            "num_warps": [4, 8],
            "num_stages": [3, 2, 4],
        },
        "launch": matmul_launch,
    }
}
