"""Errors of a runtime measurement: each fails one trial with a one-line reason, never the worker."""

from __future__ import annotations

from ciq_optuna.errors import CiqError


class MeasurementError(CiqError):
    """A candidate could not be measured (the trial fails; the search goes on)."""


class CorrectnessError(MeasurementError):
    """The candidate's outputs differ from the reference beyond the stated tolerances."""


class LaunchError(MeasurementError):
    """Loading or launching the kernel failed (bad cubin, illegal memory access, ...)."""


class EvaluationCrashed(MeasurementError):
    """The isolated evaluation process died (signal, abort) or hung past its timeout."""


class GpuUnavailableError(CiqError):
    """cupy, NVML or a CUDA device is missing on this machine."""
