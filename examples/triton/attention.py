"""Fused attention forward, O = softmax(Q K^T * scale) V, one pass over K/V with an online softmax.

Each program owns BLOCK_M query rows of one (batch, head) and streams the keys and values in blocks
of BLOCK_N, keeping the running row maximum, the running sum of exponentials and the unnormalised
output in registers (rescaled whenever the maximum grows), so the N x N score matrix never reaches
memory. fp16 inputs and output, fp32 softmax state. Tunable: BLOCK_M, BLOCK_N, num_warps,
num_stages; HEAD_DIM and IS_CAUSAL are fixed per model.
"""

import triton
import triton.language as tl


@triton.jit
def attention_fwd_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    seq_len,
    scale,
    stride_bh,
    stride_n,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
):
    block_m = tl.program_id(0)
    bh = tl.program_id(1)
    rows = block_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    base = bh * stride_bh
    q = tl.load(
        q_ptr + base + rows[:, None] * stride_n + dims[None, :], mask=rows[:, None] < seq_len, other=0.0
    )
    qk_scale = scale * 1.4426950408889634  # exp(x) = exp2(x * log2(e))

    row_max = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    row_sum = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    end = tl.minimum((block_m + 1) * BLOCK_M, seq_len) if IS_CAUSAL else seq_len
    for start in range(0, end, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        kv_ok = cols[:, None] < seq_len
        k = tl.load(k_ptr + base + cols[:, None] * stride_n + dims[None, :], mask=kv_ok, other=0.0)
        scores = tl.dot(q, tl.trans(k)) * qk_scale
        keep = cols[None, :] < seq_len
        if IS_CAUSAL:
            keep = keep & (cols[None, :] <= rows[:, None])
        scores = tl.where(keep, scores, float("-inf"))
        new_max = tl.maximum(row_max, tl.max(scores, axis=1))
        rescale = tl.exp2(row_max - new_max)
        p = tl.exp2(scores - new_max[:, None])
        row_sum = row_sum * rescale + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + cols[:, None] * stride_n + dims[None, :], mask=kv_ok, other=0.0)
        acc = acc * rescale[:, None] + tl.dot(p.to(tl.float16), v)
        row_max = new_max

    out = acc / row_sum[:, None]
    tl.store(
        o_ptr + base + rows[:, None] * stride_n + dims[None, :],
        out.to(tl.float16),
        mask=rows[:, None] < seq_len,
    )


CIQ_OPTUNA = {
    "attention_fwd_kernel": {
        # q, k, v, o: (batch * heads, seq_len, HEAD_DIM) contiguous fp16; the inner stride is 1.
        "signature": {
            "q_ptr": "*fp16:16",
            "k_ptr": "*fp16:16",
            "v_ptr": "*fp16:16",
            "o_ptr": "*fp16:16",
            "seq_len": "i32:16",
            "scale": "fp32",
            "stride_bh": "i32:16",
            "stride_n": "i32:16",
        },
        "constants": {"HEAD_DIM": 128, "IS_CAUSAL": False},
        "space": {
            "BLOCK_M": [128, 64],
            "BLOCK_N": [64, 32, 128],
            "num_warps": [4, 8],
            "num_stages": [2, 1, 3],
        },
    }
}
