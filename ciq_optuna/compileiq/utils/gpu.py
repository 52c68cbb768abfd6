"""CompileIQ's GPU helpers: lock clocks while benchmarking, and check the CUDA toolkit.

``gpu_benchmark_mode`` locks clocks through NVML (:func:`ciq_optuna.gpu.nvml.locked_clocks`)
rather than ``nvidia-smi``; ``with_sudo`` is accepted and unused (NVML needs root or
unrestricted application clocks either way), and ``power_watts`` is not supported.
"""

from __future__ import annotations

import contextlib
import shutil
import warnings
from collections.abc import Iterator
from typing import Any

__all__ = ["ctk_supports_compileiq", "gpu_benchmark_mode", "has_nvidia_smi"]

_NOTHING_TO_SET = "At least one of clock_mhz, mem_clock_mhz, or power_watts must be set."


def has_nvidia_smi() -> bool:
    """True when ``nvidia-smi`` is on the PATH (as CompileIQ checks for its clock locking)."""
    return shutil.which("nvidia-smi") is not None


@contextlib.contextmanager
def gpu_benchmark_mode(
    clock_mhz: int | None = None,
    mem_clock_mhz: int | None = None,
    power_watts: int | None = None,
    gpu_id: int = 0,
    with_sudo: bool = True,
    raise_on_failure: bool = True,
) -> Iterator[dict[str, Any]]:
    """Lock GPU ``gpu_id``'s SM (and memory) clock for the block; reset on exit.

    With ``raise_on_failure=False`` a failure to lock only warns and the block runs unlocked.
    Without any of ``clock_mhz``, ``mem_clock_mhz``, ``power_watts``: CompileIQ's ValueError
    (or, with ``raise_on_failure=False``, a warning and an unlocked block), before NVML is loaded.
    """
    if clock_mhz is None and mem_clock_mhz is None and power_watts is None:
        if raise_on_failure:
            raise ValueError(_NOTHING_TO_SET)
        warnings.warn(
            "No GPU parameters specified for benchmark mode. `gpu_benchmark_mode` will have no effect.",
            UserWarning,
            stacklevel=3,
        )
        yield {}
        return
    from ciq_optuna.errors import CiqError
    from ciq_optuna.gpu.nvml import locked_clocks

    if power_watts is not None:
        warnings.warn(
            "gpu_benchmark_mode: power_watts is not supported by ciq-optuna and is ignored", stacklevel=3
        )
        if clock_mhz is None and mem_clock_mhz is None:
            yield {}
            return
    try:
        ctx = locked_clocks(gpu_id, sm_mhz=clock_mhz, mem_mhz=mem_clock_mhz)
        clocks = ctx.__enter__()
    except (CiqError, ImportError, OSError) as exc:
        if raise_on_failure:
            raise RuntimeError(f"cannot lock the clocks of GPU {gpu_id}: {exc}") from None
        warnings.warn(f"cannot lock the clocks of GPU {gpu_id}, running unlocked: {exc}", stacklevel=3)
        yield {}
        return
    try:
        yield clocks
    finally:
        ctx.__exit__(None, None, None)


def ctk_supports_compileiq(ptxas: str | None = None) -> bool:
    """True when the installed ptxas (or the one at ``ptxas``) has an open search space."""
    from ciq_optuna.compilers.locate import find_compiler
    from ciq_optuna.errors import CiqError
    from ciq_optuna.space.files import find_space

    try:
        find_space("ptxas", find_compiler("ptxas", ptxas).release)
    except CiqError:
        return False
    return True
