"""Runtime, energy and correctness of compiled kernels on the GPU, and validation of winners.

The statistics (:mod:`~ciq_optuna.gpu.stats`) and the process isolation are plain Python; the
harness needs cupy and the energy/clock parts NVML (``pip install 'ciq-optuna[gpu]'``), imported
only when used.
"""

from ciq_optuna.gpu.correctness import check_outputs, compare_outputs
from ciq_optuna.gpu.errors import (
    CorrectnessError,
    EvaluationCrashed,
    GpuUnavailableError,
    LaunchError,
    MeasurementError,
)
from ciq_optuna.gpu.harness import KernelLaunch, TimingOptions, evaluate, metrics_from
from ciq_optuna.gpu.objective import RuntimeObjective
from ciq_optuna.gpu.stats import Measurement, StoppingRule, Summary, measure_interleaved, summarize

__all__ = [
    "CorrectnessError",
    "EvaluationCrashed",
    "GpuUnavailableError",
    "KernelLaunch",
    "LaunchError",
    "Measurement",
    "MeasurementError",
    "RuntimeObjective",
    "StoppingRule",
    "Summary",
    "TimingOptions",
    "check_outputs",
    "compare_outputs",
    "evaluate",
    "measure_interleaved",
    "metrics_from",
    "summarize",
]
