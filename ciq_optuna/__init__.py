"""ciq-optuna: an open compiler autotuner for GPU kernels, built on Optuna.

The Python API (see README.md, "Python API"): ``compile_objective`` (an objective for
``study.optimize``), ``TrialFailed``, ``GeneticSampler`` / ``make_sampler``, ``write_trial_acf``,
``pareto_front_trials`` / ``pareto_front_dataframe``. They are imported on first use, so that
``import ciq_optuna`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: Public name -> module that defines it (imported on first access).
_LAZY = {
    "compile_objective": "ciq_optuna.api",
    "write_trial_acf": "ciq_optuna.api",
    "TrialFailed": "ciq_optuna.objectives.compile",
    "CiqError": "ciq_optuna.errors",
    "GeneticSampler": "ciq_optuna.samplers",
    "make_sampler": "ciq_optuna.samplers",
    "pareto_front_trials": "ciq_optuna.samplers",
    "pareto_front_dataframe": "ciq_optuna.samplers",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ciq_optuna' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
