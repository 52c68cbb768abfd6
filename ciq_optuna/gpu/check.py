"""The runtime part of ``ciq-optuna check``: is a stored tuning still no slower than the defaults on the GPU?

For a store entry with a measured objective (``time_ms``, ``time_ratio``, a ``--measure-cmd``
metric...), the tuning and the compiler defaults are timed in one fresh process, interleaved,
with the measure ``validate`` uses: :class:`~ciq_optuna.gpu.triton_runtime.TritonAcfMeasure`
for a Triton entry (its kernel file's ``launch`` function), else
:class:`~ciq_optuna.gpu.validate.GpuAcfMeasure` with the ``KernelLaunch`` the entry records
(``kernel.launch``, set by ``ciq-optuna store add --launch FILE.py:NAME``). The tuning is worse
when its median time exceeds the defaults' by more than :data:`RUNTIME_SLACK`.

Without a GPU (no cupy, no device) nothing is measured and the objective is reported
``not checked: no GPU``.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from ciq_optuna.acf import Acf
from ciq_optuna.check import NO_GPU, RuntimeCheck, RuntimeVerdict
from ciq_optuna.errors import CiqError
from ciq_optuna.gpu.errors import GpuUnavailableError
from ciq_optuna.gpu.harness import import_cupy

#: Relative slack of the median time before a tuning counts as slower than the defaults.
RUNTIME_SLACK = 0.02


def measure_for(acf: Acf, kernel: Path, store_root: Path, **options: Any) -> Any:
    """``measure(acf_path) -> Comparison`` for a store entry, or None when it records no way to
    launch its kernel. ``options``: ``repeats``, ``warmup``, ``compiler_path``, ``device``."""
    repeats, warmup = options.get("repeats", 100), options.get("warmup", 20)
    compiler_path, device = options.get("compiler_path"), options.get("device", 0)
    if acf.triton:
        from ciq_optuna.compilers.triton import load_kernel
        from ciq_optuna.gpu.triton_runtime import TritonAcfMeasure

        tk = load_kernel(f"{kernel}:{acf.kernel.get('name')}")
        if tk.launch is None:
            return None
        return TritonAcfMeasure(tk, repeats=repeats, warmup=warmup, ptxas=compiler_path, device=device)
    launch = acf.kernel.get("launch")
    if not launch:
        return None
    from ciq_optuna.gpu.cli import load_launch
    from ciq_optuna.gpu.validate import GpuAcfMeasure

    file, _, name = str(launch).rpartition(":")
    spec = load_launch(f"{(store_root / file).resolve()}:{name}")
    return GpuAcfMeasure(
        spec,
        kernel,
        arch=acf.arch,
        compiler_path=compiler_path,
        repeats=repeats,
        warmup=warmup,
        device=device,
    )


def runtime_check(store_root: str | Path, **options: Any) -> RuntimeCheck:
    """The runtime check ``check_store`` calls for entries with a measured objective."""
    root = Path(store_root)

    def check(acf_path: Path, acf: Acf, kernel: Path) -> RuntimeVerdict:
        try:
            import_cupy()
        except GpuUnavailableError:
            return RuntimeVerdict(checked=False, note=NO_GPU)
        measure = measure_for(acf, kernel, root, **options)
        if measure is None:
            return RuntimeVerdict(
                checked=False,
                note="not checked: the entry records no launch (ciq-optuna store add --launch FILE.py:NAME)",
            )
        try:
            comparison = measure(acf_path)
        except CiqError as exc:  # wrong results, a crash: the tuning is not usable
            return RuntimeVerdict(checked=True, worse=True, note=f"runtime check failed: {exc}")
        base = statistics.median(comparison.baseline)
        tuned = statistics.median(comparison.candidate)
        return RuntimeVerdict(
            checked=True, baseline_ms=base, tuned_ms=tuned, worse=tuned > base * (1 + RUNTIME_SLACK)
        )

    return check
