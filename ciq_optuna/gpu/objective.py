"""Runtime objective: time (and energy) of a compiled cubin against the baseline, isolated.

The compile objective calls ``measure(cubin_path, candidate) -> dict[str, float]`` after a
successful compile (``candidate`` is optional here and unused); a failure raises a :class:`~ciq_optuna.errors.CiqError` subclass whose message is the
trial's one-line reason. The raw samples of the last call are in :attr:`RuntimeObjective.last_result`
and, in trial-attribute form, :meth:`RuntimeObjective.user_attrs`.
"""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path
from typing import Any

from ciq_optuna.errors import CiqError
from ciq_optuna.gpu.errors import (
    CorrectnessError,
    EvaluationCrashed,
    GpuUnavailableError,
    LaunchError,
    MeasurementError,
)
from ciq_optuna.gpu.harness import KernelLaunch, TimingOptions, evaluate, metrics_from
from ciq_optuna.gpu.stats import StoppingRule
from ciq_optuna.isolation import IsolatedFailure, run_isolated

_KNOWN = {c.__name__: c for c in (CorrectnessError, LaunchError, MeasurementError, GpuUnavailableError)}


def translate_failure(exc: IsolatedFailure) -> Exception:
    """The error an isolated evaluation raised, with its type restored when it is one of ours.

    ``ciq_optuna.isolation`` reports ``raised CorrectnessError: wrong result: ...``; the trial's
    reason is then the original message, and a crash or a timeout becomes
    :class:`EvaluationCrashed` (``evaluation crashed with signal 11 (SIGSEGV)``).
    """
    text = str(exc)
    if exc.kind == "exception" and text.startswith("raised "):
        name, _, message = text[len("raised ") :].partition(": ")
        if name in _KNOWN and message:
            return _KNOWN[name](message)
    return EvaluationCrashed(f"evaluation {text}")


def _evaluate_blob(
    sys_path: list[str], blob: bytes, baseline: str, candidate: str | None, options: TimingOptions
):
    """Child side: the parent's import path first, then the launch description, then evaluate.

    The launch is pickled by the parent so that a fork server started before the user's module
    became importable still finds it (its ``make_args`` is resolved after ``sys.path`` is set).
    """
    for entry in reversed(sys_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    launch = pickle.loads(blob)
    return evaluate(launch, baseline, candidate, options)


class RuntimeObjective:
    """Measure a candidate cubin against ``baseline_cubin`` in a fresh process.

    Each call: the correctness gate on ``launch.seeds``, then baseline and candidate timed
    interleaved (ABBA) until the precision target of ``rule`` or its caps, with the L2 flushed
    before every launch unless ``flush_l2=False``; with ``energy=True`` also NVML energy.
    Metrics returned: ``time_ms`` (median), ``time_p<percentile>_ms``, ``baseline_time_ms``,
    ``time_ratio`` (candidate median / baseline median, same process window), ``time_rel_ci``
    and, with energy, ``energy_mj`` (per launch), ``power_w``, ``energy_ratio``.

    Example::

        measure = RuntimeObjective(KernelLaunch("reduce", (256,), (256,), make_args, outputs=(1,)),
                                   "baseline.cubin")
        measure("candidate.cubin")  # {"time_ms": ..., "time_ratio": ..., ...}
    """

    def __init__(
        self,
        launch: KernelLaunch,
        baseline_cubin: str | os.PathLike,
        *,
        rule: StoppingRule | None = None,
        percentile: float = 90.0,
        flush_l2: bool = True,
        energy: bool = False,
        device: int = 0,
        timeout: float = 300.0,
        isolate: bool = True,
    ) -> None:
        self.launch = launch
        self.baseline_cubin = Path(baseline_cubin)
        self.options = TimingOptions(
            rule=rule or StoppingRule(),
            percentile=percentile,
            flush_l2=flush_l2,
            energy=energy,
            device=device,
        )
        self.timeout = timeout
        self.isolate = isolate
        self.last_result: dict[str, Any] | None = None
        try:
            self._blob = pickle.dumps(launch)
        except Exception as exc:
            raise CiqError(
                f"the kernel launch cannot be sent to the evaluation process ({exc}); "
                "define make_args/reference as module-level functions"
            ) from None

    def evaluate(self, cubin_path: str | os.PathLike | None) -> dict[str, Any]:
        """The full :func:`~ciq_optuna.gpu.harness.evaluate` result (samples, environment)."""
        self.last_result = None
        cand = None if cubin_path is None else str(cubin_path)
        if self.isolate:
            try:
                result = run_isolated(
                    _evaluate_blob,
                    list(sys.path),
                    self._blob,
                    str(self.baseline_cubin),
                    cand,
                    self.options,
                    timeout=self.timeout,
                )
            except IsolatedFailure as exc:
                raise translate_failure(exc) from None
        else:
            result = evaluate(self.launch, str(self.baseline_cubin), cand, self.options)
        self.last_result = result
        return result

    def __call__(self, cubin_path: str | os.PathLike, candidate: Any = None) -> dict[str, float]:
        """Metric name -> value for ``cubin_path``; raises a ``CiqError`` subclass on failure."""
        return metrics_from(self.evaluate(cubin_path))

    def user_attrs(self) -> dict[str, Any]:
        """Trial user attributes of the last call: raw samples (ms), stop reason, GPU environment."""
        r = self.last_result
        if r is None:
            return {}
        s = r["summaries"]
        attrs: dict[str, Any] = {
            "runtime_samples_ms": s.get("candidate", s["baseline"])["samples"],
            "baseline_samples_ms": s["baseline"]["samples"],
            "runtime_stop_reason": r["stop_reason"],
            "runtime_rounds": r["rounds"],
            "gpu": r["environment"].get("gpu"),
        }
        if r.get("energy"):
            attrs["energy"] = r["energy"]
        return attrs
