"""cupy harness: load cubins, launch them, check outputs, time them with CUDA events.

What the user describes (:class:`KernelLaunch`): the kernel's name in the cubin, grid, block,
dynamic shared memory, a function ``make_args(seed)`` that builds fresh arguments (cupy arrays
for device buffers, numpy scalars such as ``numpy.int32(n)`` for values) and which arguments are
outputs. :func:`evaluate` runs one comparison of a candidate cubin against the baseline cubin in
the current process; :class:`~ciq_optuna.gpu.objective.RuntimeObjective` runs it isolated.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ciq_optuna.gpu.correctness import check_outputs
from ciq_optuna.gpu.errors import GpuUnavailableError, LaunchError, MeasurementError
from ciq_optuna.gpu.stats import StoppingRule, measure_interleaved

#: The L2 flush buffer is this many times the device's L2 size.
L2_FLUSH_FACTOR = 2


@dataclass(frozen=True)
class KernelLaunch:
    """How to launch one kernel and judge its results.

    ``make_args(seed)`` returns the kernel arguments in order; the arrays at ``outputs`` are
    compared after a launch on each of ``seeds`` (several inputs, so a kernel right by chance on
    one input is caught). ``reference(seed)``, when given, returns the expected outputs computed on
    the host; without it the baseline cubin's outputs are the reference. ``grid`` may be a callable
    of the arguments. Functions must be importable (module level) to cross the process boundary.
    """

    kernel: str
    grid: tuple[int, ...] | Callable[[Sequence[Any]], tuple[int, ...]]
    block: tuple[int, ...]
    make_args: Callable[[int], Sequence[Any]]
    outputs: tuple[int, ...] = (0,)
    shared_mem: int = 0
    seeds: tuple[int, ...] = (0, 1, 2)
    timing_seed: int = 0
    reference: Callable[[int], Sequence[np.ndarray]] | None = None
    rtol: float = 1e-5
    atol: float = 1e-8


@dataclass(frozen=True)
class TimingOptions:
    """How a comparison is timed: stopping rule, reported percentile, L2 flush, energy, device."""

    rule: StoppingRule = field(default_factory=StoppingRule)
    percentile: float = 90.0
    outlier_k: float = 5.0
    flush_l2: bool = True
    energy: bool = False
    energy_window_s: float = 0.5
    device: int = 0


def import_cupy() -> Any:
    """The cupy module, or a one-line :class:`GpuUnavailableError`."""
    try:
        import cupy
    except ImportError as exc:
        raise GpuUnavailableError("runtime measurement needs cupy: pip install 'ciq-optuna[gpu]'") from exc
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        raise GpuUnavailableError(f"no CUDA device usable by cupy: {exc}") from exc
    if n == 0:
        raise GpuUnavailableError("no CUDA device found")
    return cupy


def load_kernel(cubin: str | os.PathLike, name: str) -> Any:
    """``cupy.RawModule(path=cubin).get_function(name)``, with a one-line :class:`LaunchError`."""
    cupy = import_cupy()
    path = Path(cubin)
    if not path.is_file():
        raise LaunchError(f"cubin not found: {path}")
    try:
        return cupy.RawModule(path=str(path)).get_function(name)
    except Exception as exc:
        raise LaunchError(f"cannot load kernel {name!r} from {path.name}: {_one_line(exc)}") from exc


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def launch(fn: Any, spec: KernelLaunch, args: Sequence[Any]) -> None:
    """Launch ``fn`` once with ``spec``'s geometry on the current stream."""
    grid = spec.grid(args) if callable(spec.grid) else spec.grid
    fn(tuple(grid), tuple(spec.block), tuple(args), shared_mem=spec.shared_mem)


def run_outputs(fn: Any, spec: KernelLaunch, seed: int, what: str) -> list[np.ndarray]:
    """Launch on fresh arguments of ``seed`` and copy the outputs to the host."""
    cupy = import_cupy()
    args = list(spec.make_args(seed))
    try:
        launch(fn, spec, args)
        cupy.cuda.get_current_stream().synchronize()
        return [cupy.asnumpy(args[i]) for i in spec.outputs]
    except Exception as exc:
        raise LaunchError(f"{what} failed on input seed {seed}: {_one_line(exc)}") from exc


class L2Flusher:
    """Overwrites a buffer of ``L2_FLUSH_FACTOR`` x the L2 size so the next launch starts cold."""

    def __init__(self, nbytes: int | None = None) -> None:
        cupy = import_cupy()
        if nbytes is None:
            l2 = cupy.cuda.Device().attributes.get("L2CacheSize", 0)
            nbytes = max(L2_FLUSH_FACTOR * int(l2), 8 << 20)
        self.nbytes = nbytes
        self._buf = cupy.empty(nbytes, dtype=cupy.uint8)
        self._cupy = cupy
        self._value = 0

    def __call__(self) -> None:
        self._value = (self._value + 1) & 0xFF
        stream = self._cupy.cuda.get_current_stream()
        self._cupy.cuda.runtime.memsetAsync(self._buf.data.ptr, self._value, self.nbytes, stream.ptr)


def event_timed_arm(
    fn: Any, spec: KernelLaunch, args: Sequence[Any], flush: Callable[[], None] | None
) -> Callable[[], float]:
    """An arm for :func:`measure_interleaved`: (flush), then one launch between CUDA events (ms)."""
    cupy = import_cupy()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()

    def arm() -> float:
        if flush is not None:
            flush()
        stream = cupy.cuda.get_current_stream()
        start.record(stream)
        launch(fn, spec, args)
        end.record(stream)
        end.synchronize()
        return float(cupy.cuda.get_elapsed_time(start, end))

    return arm


def environment(device: int = 0) -> dict[str, Any]:
    """GPU, driver, CUDA runtime and package versions, for trial attributes and validation records."""
    cupy = import_cupy()
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "host": platform.node(),
        "cupy": cupy.__version__,
        "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
        "cuda_driver": cupy.cuda.runtime.driverGetVersion(),
    }
    props = cupy.cuda.runtime.getDeviceProperties(device)
    name = props.get("name", b"")
    env["gpu"] = name.decode() if isinstance(name, bytes) else str(name)
    env["compute_capability"] = f"{props.get('major')}.{props.get('minor')}"
    try:
        from ciq_optuna.gpu.nvml import device_info

        env["nvml"] = device_info(device)
    except Exception as exc:
        env["nvml"] = {"error": _one_line(exc)}
    return env


def _prepared(fn: Any, spec: KernelLaunch) -> Any:
    """Allow more than 48 KiB of dynamic shared memory when the launch asks for it."""
    if spec.shared_mem > 48 * 1024:
        try:
            fn.max_dynamic_shared_size_bytes = spec.shared_mem
        except Exception as exc:
            raise LaunchError(
                f"cannot grant {spec.shared_mem} bytes of shared memory: {_one_line(exc)}"
            ) from exc
    return fn


def evaluate(
    spec: KernelLaunch,
    baseline_cubin: str | os.PathLike,
    candidate_cubin: str | os.PathLike | None,
    options: TimingOptions | None = None,
) -> dict[str, Any]:
    """Correctness gate, then interleaved timing (and energy) of baseline and candidate, here.

    Returns a plain dict (it crosses a process boundary): ``summaries`` per arm (raw samples
    included), ``stop_reason``, ``rounds``, ``energy`` per arm or None, ``environment``.
    ``candidate_cubin=None`` measures the baseline alone (arm ``baseline``).
    """
    options = options or TimingOptions()
    cupy = import_cupy()
    cupy.cuda.Device(options.device).use()
    base_fn = _prepared(load_kernel(baseline_cubin, spec.kernel), spec)
    cand_fn = (
        _prepared(load_kernel(candidate_cubin, spec.kernel), spec) if candidate_cubin is not None else None
    )
    for seed in spec.seeds:
        base_out = run_outputs(base_fn, spec, seed, "baseline")
        if spec.reference is not None:
            expected = [np.asarray(a) for a in spec.reference(seed)]
            check_outputs(expected, base_out, rtol=spec.rtol, atol=spec.atol, label=f"baseline, seed {seed}")
        else:
            expected = base_out
        if cand_fn is not None:
            got = run_outputs(cand_fn, spec, seed, "candidate")
            check_outputs(expected, got, rtol=spec.rtol, atol=spec.atol, label=f"seed {seed}")
    flush = L2Flusher() if options.flush_l2 else None
    fns = {"baseline": base_fn} if cand_fn is None else {"baseline": base_fn, "candidate": cand_fn}
    args = {name: list(spec.make_args(spec.timing_seed)) for name in fns}
    arms = {name: event_timed_arm(fn, spec, args[name], flush) for name, fn in fns.items()}
    try:
        m = measure_interleaved(arms, options.rule)
    except MeasurementError:
        raise
    except Exception as exc:
        raise LaunchError(f"timing failed: {_one_line(exc)}") from exc
    energy = None
    if options.energy:
        from ciq_optuna.gpu.nvml import EnergyCounter, measure_energy

        counter = EnergyCounter(options.device)
        stream = cupy.cuda.get_current_stream()
        launches = {name: (lambda fn=fn, a=args[name]: launch(fn, spec, a)) for name, fn in fns.items()}
        energy = {
            name: vars(s)
            for name, s in measure_energy(
                launches, counter.read_mj, sync=stream.synchronize, window_s=options.energy_window_s
            ).items()
        }
    summaries = m.summaries(percentile=options.percentile, outlier_k=options.outlier_k)
    return {
        "summaries": {name: s.to_dict() for name, s in summaries.items()},
        "stop_reason": m.stop_reason,
        "rounds": m.rounds,
        "energy": energy,
        "environment": environment(options.device),
    }


def metrics_from(result: dict[str, Any]) -> dict[str, float]:
    """Objective values of an :func:`evaluate` result (see docs/gpu.md for the names)."""
    s = result["summaries"]
    base = s["baseline"]
    arm = s.get("candidate", base)
    pct = int(arm["percentile"]) if float(arm["percentile"]).is_integer() else arm["percentile"]
    out = {
        "time_ms": arm["median"],
        f"time_p{pct}_ms": arm["percentile_value"],
        "baseline_time_ms": base["median"],
        "time_ratio": arm["median"] / base["median"] if base["median"] > 0 else float("inf"),
        "time_rel_ci": arm["rel_ci_halfwidth"],
    }
    energy = result.get("energy")
    if energy:
        e_arm = energy.get("candidate", energy["baseline"])
        out["energy_mj"] = e_arm["energy_mj"]
        out["power_w"] = e_arm["power_w"]
        if energy["baseline"]["energy_mj"] > 0:
            out["energy_ratio"] = e_arm["energy_mj"] / energy["baseline"]["energy_mj"]
    return out
