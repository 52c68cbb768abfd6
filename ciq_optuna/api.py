"""The Python API for Optuna users: a compile objective for ``study.optimize`` and what goes with it.

``import ciq_optuna`` exposes these names lazily (``ciq_optuna.compile_objective`` imports this
module on first use), so that importing the package stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import optuna

from ciq_optuna.acf import write_acf
from ciq_optuna.errors import CiqError
from ciq_optuna.objectives.compile import CompileObjective, Measure
from ciq_optuna.summary import acf_for_trial
from ciq_optuna.tune import TuneConfig, prepare

__all__ = ["compile_objective", "kernel_kind", "write_trial_acf"]


def kernel_kind(kernel: str | Path) -> str:
    """What a kernel argument names: ``"ptx"`` or ``"cu"`` (a file), ``"triton"`` (``path.py:name``)."""
    text = str(kernel)
    path, sep, name = text.rpartition(":")
    if sep and path.endswith(".py") and name.isidentifier():
        return "triton"
    suffix = Path(text).suffix.lstrip(".")
    if suffix in ("ptx", "cu"):
        return suffix
    raise CiqError(f"kernel {text}: expected a .ptx or .cu file, or path.py:kernel_name for Triton")


def _compiler_file_objective(
    kernel: str | Path,
    arch: str,
    metrics: Sequence[str],
    measure: Measure | None,
    options: dict[str, Any],
) -> CompileObjective:
    """PTX (ptxas), CUDA C++ (nvcc) and Triton (``path.py:kernel``, meta-parameters plus the ptxas
    space of the ptxas Triton uses): the same objective as ``ciq-optuna tune`` builds."""
    config = TuneConfig(kernel=Path(kernel), arch=arch, minimize=list(metrics), **options)
    meta, objective = prepare(config, measure)
    objective.meta = meta
    return objective


#: Kernel kind -> the function that builds its objective; a new front end adds its entry here.
FRONT_ENDS: dict[str, Callable[..., CompileObjective]] = {
    "ptx": _compiler_file_objective,
    "cu": _compiler_file_objective,
    "triton": _compiler_file_objective,
}


def compile_objective(
    kernel: str | Path,
    *,
    arch: str,
    metrics: Sequence[str] = ("registers",),
    measure: Measure | None = None,
    measure_name: str = "measured",
    compiler_path: str | None = None,
    spaces: Sequence[str | Path] = (),
    timeout: float = 120.0,
    workdir: str | Path | None = None,
) -> CompileObjective:
    """An Optuna objective that compiles ``kernel`` under the trial's compiler controls.

    It returns the values of ``metrics`` in order (compile metrics such as ``registers``,
    ``spill-bytes``; or what ``measure(cubin_path, candidate)`` returns, a number named
    ``measure_name`` or a dict), one value per objective of the study you create for it, so
    give the study as many ``directions``. The kernel, architecture and compiler are checked now
    (``CiqError``, one line); a candidate that does not compile fails its trial
    (``TrialFailed``: pass ``catch=(ciq_optuna.TrialFailed,)`` to ``study.optimize``).
    """
    kind = kernel_kind(kernel)
    if kind not in FRONT_ENDS:
        raise CiqError(f"kernel {kernel}: the {kind} front end is not available in this installation")
    options = {
        "compiler_path": compiler_path,
        "spaces": [Path(s) for s in spaces],
        "timeout": timeout,
        "workdir": Path(workdir) if workdir else None,
        "measure_name": measure_name,
    }
    return FRONT_ENDS[kind](kernel, arch, list(metrics), measure, options)


def write_trial_acf(
    path: str | Path, study: optuna.Study, trial: optuna.trial.FrozenTrial, objective: CompileObjective
) -> Path:
    """Write the ACF of ``trial`` (e.g. ``study.best_trial`` or a Pareto point) to ``path``."""
    meta = dict(getattr(objective, "meta", None) or {})
    if not meta:
        raise CiqError("write_trial_acf needs an objective made by ciq_optuna.compile_objective")
    meta["directions"] = [d.name.lower() for d in study.directions]
    if len(meta["directions"]) != len(meta["metrics"]):
        raise CiqError(
            f"the study has {len(meta['directions'])} objective(s), the objective returns "
            f"{len(meta['metrics'])} metric(s)"
        )
    return write_acf(Path(path), acf_for_trial(study, trial, meta, objective, "python API"))
