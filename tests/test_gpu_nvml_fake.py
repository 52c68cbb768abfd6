"""NVML bookkeeping with a fake NVML module (a mock of the GPU: none is on this machine).

The real NVML path is exercised by tests/test_gpu_device.py on a GPU machine.
"""

from __future__ import annotations

import pytest

from ciq_optuna.errors import CiqError
from ciq_optuna.gpu.nvml import EnergyCounter, locked_clocks, measure_energy


class FakeNVMLError(Exception):
    pass


class FakeNVML:
    """Records calls; ``deny`` makes clock locking fail like a non-root user."""

    NVMLError = FakeNVMLError
    NVML_CLOCK_SM = 1

    def __init__(self, deny=False, energy=None):
        self.calls = []
        self.deny = deny
        self.energy = energy

    def nvmlDeviceGetHandleByIndex(self, i):
        return f"h{i}"

    def nvmlDeviceGetDefaultApplicationsClock(self, h, kind):
        return 1500

    def nvmlDeviceSetGpuLockedClocks(self, h, lo, hi):
        if self.deny:
            raise FakeNVMLError("Insufficient Permissions")
        self.calls.append(("lock", h, lo, hi))

    def nvmlDeviceSetMemoryLockedClocks(self, h, lo, hi):
        self.calls.append(("lock_mem", h, lo, hi))

    def nvmlDeviceResetGpuLockedClocks(self, h):
        self.calls.append(("reset", h))

    def nvmlDeviceResetMemoryLockedClocks(self, h):
        self.calls.append(("reset_mem", h))

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        return self.energy()


def test_locked_clocks_restore_on_exception_fake_nvml():
    nvml = FakeNVML()
    with pytest.raises(RuntimeError, match="trial failed"):
        with locked_clocks(1, mem_mhz=2600, nvml=nvml) as clocks:
            assert clocks == {"sm_mhz": 1500, "mem_mhz": 2600}
            assert nvml.calls == [("lock", "h1", 1500, 1500), ("lock_mem", "h1", 2600, 2600)]
            raise RuntimeError("trial failed")
    assert nvml.calls[-2:] == [("reset_mem", "h1"), ("reset", "h1")]


def test_locked_clocks_restore_on_normal_exit_fake_nvml():
    nvml = FakeNVML()
    with locked_clocks(0, sm_mhz=1200, nvml=nvml):
        pass
    assert nvml.calls == [("lock", "h0", 1200, 1200), ("reset", "h0")]


def test_locked_clocks_without_permission_is_one_line_fake_nvml():
    nvml = FakeNVML(deny=True)
    with pytest.raises(CiqError, match="cannot lock GPU 0 clocks .*Insufficient Permissions.*root"):
        with locked_clocks(0, nvml=nvml):
            pytest.fail("body must not run")
    assert nvml.calls == []  # nothing locked, nothing reset


def test_energy_per_launch_from_counter_blocks_fake_nvml():
    # Fake device: arm "a" draws 300 W for 1 ms per launch, arm "b" 200 W for 1 ms.
    state = {"t": 0.0, "mj": 0.0}

    def launcher(watts):
        def launch():
            state["t"] += 1e-3
            state["mj"] += watts * 1e-3 * 1000

        return launch

    counter = EnergyCounter(0, nvml=FakeNVML(energy=lambda: state["mj"]))
    res = measure_energy(
        {"a": launcher(300.0), "b": launcher(200.0)},
        counter.read_mj,
        window_s=0.05,
        rounds=2,
        clock=lambda: state["t"],
    )
    assert res["a"].energy_mj == pytest.approx(300.0)
    assert res["b"].energy_mj == pytest.approx(200.0)
    assert res["a"].power_w == pytest.approx(300.0)
    assert res["a"].launches == 2 * 50 and res["b"].launches == 2 * 50
