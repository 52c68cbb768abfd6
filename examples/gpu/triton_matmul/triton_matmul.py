"""Triton matmul and its isolated evaluation: baseline config vs candidate (config + ptxas flags).

Everything here runs inside a fresh process (``ciq_optuna.isolation.run_isolated``): the ptxas
wrapper's environment is set before Triton is imported, the baseline and the candidate are
compiled by two separate ``triton.jit`` objects (no in-memory cache hit) with a fresh
``TRITON_CACHE_DIR`` each and ``TRITON_ALWAYS_COMPILE=1``, and the wrapper's log proves that ptxas
ran with the candidate's flags. Needs torch and triton (imported lazily, only in that process).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ciq_optuna.compilers.cubin import code_hash
from ciq_optuna.gpu.correctness import check_outputs
from ciq_optuna.gpu.stats import StoppingRule, measure_interleaved
from ciq_optuna.gpu.triton_inject import PtxasInjection

#: The configuration the candidates are compared with (a common good default on Hopper/Ampere).
BASELINE_APP = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4, "num_stages": 3}

RTOL = 1e-2
ATOL = 1e-2
SEEDS = (0, 1, 2)


def _inputs(torch: Any, seed: int, size: int) -> tuple[Any, Any]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn((size, size), device="cuda", dtype=torch.float16, generator=g)
    b = torch.randn((size, size), device="cuda", dtype=torch.float16, generator=g)
    return a, b


def _launch(kernel: Any, app: dict[str, Any], a: Any, b: Any, c: Any) -> Any:
    import triton

    m, k = a.shape
    n = b.shape[1]

    def grid(meta: dict[str, Any]) -> tuple[int]:
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    return kernel[grid](
        a, b, c, m, n, k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=app["BLOCK_M"], BLOCK_N=app["BLOCK_N"], BLOCK_K=app["BLOCK_K"], GROUP_M=app["GROUP_M"],
        num_warps=app["num_warps"], num_stages=app["num_stages"],
    )  # fmt: skip


def _compile(
    inj: PtxasInjection, flags: list[str], app: dict[str, Any], a: Any, b: Any, c: Any
) -> tuple[Any, str]:
    """A new JIT object compiled now with ``flags``; returns it and its cubin's code hash."""
    import triton
    from matmul_kernel import matmul_kernel

    since = len(inj.calls())
    inj.use(flags)
    kernel = triton.jit(matmul_kernel)
    compiled = _launch(kernel, app, a, b, c)
    inj.check_reached(flags, since=since)
    return kernel, code_hash(compiled.asm["cubin"])


def evaluate(
    app: dict[str, Any],
    flags: list[str],
    *,
    real_ptxas: str,
    size: int = 4096,
    baseline_app: dict[str, Any] | None = None,
    rule: StoppingRule | None = None,
    flush_l2: bool = True,
) -> dict[str, Any]:
    """In a fresh process: compile baseline and candidate, check the candidate on ``SEEDS``
    against torch.matmul, time both interleaved; returns samples (ms) and code hashes."""
    inj = PtxasInjection(real_ptxas)
    inj.use([])  # the environment is in place before Triton reads it
    import torch

    baseline_app = baseline_app or BASELINE_APP
    a, b = _inputs(torch, 0, size)
    c_base = torch.empty((size, size), device="cuda", dtype=torch.float16)
    c_cand = torch.empty_like(c_base)
    base_kernel, base_hash = _compile(inj, [], baseline_app, a, b, c_base)
    cand_kernel, cand_hash = _compile(inj, list(flags), app, a, b, c_cand)
    for seed in SEEDS:
        x, y = _inputs(torch, seed, size)
        expected = torch.matmul(x, y).float().cpu().numpy()
        _launch(cand_kernel, app, x, y, c_cand)
        torch.cuda.synchronize()
        got = c_cand.float().cpu().numpy()
        check_outputs([expected], [got], rtol=RTOL, atol=ATOL, label=f"seed {seed}")
    flush_buf = None
    if flush_l2:
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        flush_buf = torch.empty(max(2 * l2, 8 << 20), dtype=torch.uint8, device="cuda")

    def arm(kernel: Any, cfg: dict[str, Any], out: Any):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)

        def run() -> float:
            if flush_buf is not None:
                flush_buf.zero_()
            start.record()
            _launch(kernel, cfg, a, b, out)
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end))

        return run

    m = measure_interleaved(
        {"baseline": arm(base_kernel, baseline_app, c_base), "candidate": arm(cand_kernel, app, c_cand)},
        rule or StoppingRule(max_seconds=10),
    )
    base, cand = np.median(m.samples["baseline"]), np.median(m.samples["candidate"])
    return {
        "time_ms": float(cand),
        "baseline_time_ms": float(base),
        "time_ratio": float(cand / base),
        "samples": m.samples,
        "stop_reason": m.stop_reason,
        "baseline_code_hash": base_hash,
        "candidate_code_hash": cand_hash,
        "ptxas_calls": inj.calls(),
        "gpu": torch.cuda.get_device_name(0),
        "triton": __import__("triton").__version__,
        "torch": torch.__version__,
    }
