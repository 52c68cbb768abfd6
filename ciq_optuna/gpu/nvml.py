"""NVML: energy over a timed window, device description, clock locking with a guaranteed restore.

``nvml`` arguments default to the ``pynvml`` module of ``nvidia-ml-py`` (extra ``gpu``); they
are injectable so the bookkeeping (restore on exceptions, energy per launch) is testable without
a GPU.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ciq_optuna.errors import CiqError
from ciq_optuna.gpu.errors import GpuUnavailableError
from ciq_optuna.gpu.stats import round_order


def load_nvml() -> Any:
    """The initialised ``pynvml`` module; :class:`GpuUnavailableError` when it cannot be used."""
    try:
        import pynvml
    except ImportError as exc:
        raise GpuUnavailableError("NVML needs nvidia-ml-py: pip install 'ciq-optuna[gpu]'") from exc
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise GpuUnavailableError(f"NVML cannot start: {exc}") from exc
    return pynvml


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def device_info(index: int = 0, nvml: Any = None) -> dict[str, Any]:
    """Name, UUID, driver, CUDA driver version, clocks and power limit of one GPU (for records)."""
    nvml = nvml or load_nvml()
    h = nvml.nvmlDeviceGetHandleByIndex(index)
    info: dict[str, Any] = {
        "index": index,
        "name": _text(nvml.nvmlDeviceGetName(h)),
        "uuid": _text(nvml.nvmlDeviceGetUUID(h)),
        "driver": _text(nvml.nvmlSystemGetDriverVersion()),
    }
    optional = {
        "cuda_driver_version": lambda: nvml.nvmlSystemGetCudaDriverVersion(),
        "sm_clock_mhz": lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM),
        "mem_clock_mhz": lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_MEM),
        "max_sm_clock_mhz": lambda: nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM),
        "power_limit_w": lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
        "temperature_c": lambda: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU),
    }
    for key, get in optional.items():
        try:
            info[key] = get()
        except Exception:
            info[key] = None
    return info


@contextlib.contextmanager
def locked_clocks(
    index: int = 0,
    *,
    sm_mhz: int | None = None,
    mem_mhz: int | None = None,
    nvml: Any = None,
) -> Iterator[dict[str, int | None]]:
    """Lock the SM (and optionally memory) clock of GPU ``index``; always reset on exit.

    ``sm_mhz`` defaults to the GPU's default applications clock (its base clock on data-centre
    parts), which it can hold without thermal throttling. The reset runs in ``finally``, so an
    exception, a failed trial or Ctrl-C inside the block still restores the clocks. Locking needs
    root (or ``nvidia-smi -acp UNRESTRICTED``): without it a one-line :class:`CiqError`.
    """
    nvml = nvml or load_nvml()
    h = nvml.nvmlDeviceGetHandleByIndex(index)
    if sm_mhz is None:
        sm_mhz = nvml.nvmlDeviceGetDefaultApplicationsClock(h, nvml.NVML_CLOCK_SM)
    locked_sm = locked_mem = False
    try:
        try:
            nvml.nvmlDeviceSetGpuLockedClocks(h, sm_mhz, sm_mhz)
            locked_sm = True
            if mem_mhz is not None:
                nvml.nvmlDeviceSetMemoryLockedClocks(h, mem_mhz, mem_mhz)
                locked_mem = True
        except nvml.NVMLError as exc:
            raise CiqError(
                f"cannot lock GPU {index} clocks ({exc}); run as root or drop --lock-clocks"
            ) from exc
        yield {"sm_mhz": sm_mhz, "mem_mhz": mem_mhz}
    finally:
        if locked_mem:
            nvml.nvmlDeviceResetMemoryLockedClocks(h)
        if locked_sm:
            nvml.nvmlDeviceResetGpuLockedClocks(h)


class EnergyCounter:
    """Total energy of one GPU since the driver loaded, in millijoules (Volta and newer)."""

    def __init__(self, index: int = 0, nvml: Any = None) -> None:
        self._nvml = nvml or load_nvml()
        self._h = self._nvml.nvmlDeviceGetHandleByIndex(index)
        try:
            self.read_mj()
        except self._nvml.NVMLError as exc:
            raise GpuUnavailableError(f"GPU {index} has no energy counter: {exc}") from exc

    def read_mj(self) -> float:
        """Current value of the counter (mJ)."""
        return float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._h))


@dataclass(frozen=True)
class EnergySample:
    """Energy of one launch (mJ) and mean power (W) of an arm over its measured windows."""

    energy_mj: float
    power_w: float
    launches: int
    seconds: float


def measure_energy(
    launches: Mapping[str, Callable[[], None]],
    read_mj: Callable[[], float],
    *,
    sync: Callable[[], None] = lambda: None,
    window_s: float = 0.5,
    rounds: int = 4,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, EnergySample]:
    """Energy per launch of every arm, from the counter's increase over back-to-back blocks.

    NVML's counter is updated every few ms to ~100 ms, far coarser than one kernel, so each arm
    runs blocks of launches lasting ``window_s`` seconds; the blocks of the arms are interleaved
    in mirrored rounds (as :func:`~ciq_optuna.gpu.stats.measure_interleaved`) so that drift in
    temperature or power state does not favour one arm. Launches are calibrated once per arm.
    """
    if not launches:
        raise ValueError("no arms to measure")
    per_block: dict[str, int] = {}
    for name, launch in launches.items():
        sync()
        t0 = clock()
        n = 0
        while True:
            launch()
            n += 1
            if n & (n - 1) == 0:
                sync()
                if clock() - t0 >= window_s / 10:
                    break
        elapsed = max(clock() - t0, 1e-9)
        per_block[name] = max(1, round(n * window_s / elapsed))
    energy = dict.fromkeys(launches, 0.0)
    seconds = dict.fromkeys(launches, 0.0)
    count = dict.fromkeys(launches, 0)
    for r in range(rounds):
        for name in round_order(list(launches), r):
            sync()
            e0, t0 = read_mj(), clock()
            for _ in range(per_block[name]):
                launches[name]()
            sync()
            e1, t1 = read_mj(), clock()
            energy[name] += e1 - e0
            seconds[name] += t1 - t0
            count[name] += per_block[name]
    return {
        name: EnergySample(
            energy_mj=energy[name] / count[name],
            power_w=(energy[name] / 1000.0) / seconds[name] if seconds[name] > 0 else 0.0,
            launches=count[name],
            seconds=seconds[name],
        )
        for name in launches
    }
