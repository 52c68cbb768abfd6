"""The compile objective: suggest a candidate, compile it, read its metrics, measure it once per binary.

One trial: suggest -> render flags -> compile (its own process, killed on timeout) -> parse
metrics -> (optional) measure the binary with the user's command, callable or GPU harness ->
record everything on the trial. Many candidates compile to the same code; a binary whose
measurement already exists in the study reuses it (``reused_from``) instead of measuring again.

Binary-aware sampling (the hook): a sampler that predicts a candidate can only give a binary the
study already compiled sets the trial's user attributes ``predicted_binary``, ``predicted_from``
(a trial number) and ``skip_compile``; the objective then neither compiles nor measures, records
``skipped_compile`` and returns the values of trial ``predicted_from``.  Without ``skip_compile``
(a rare check of a prediction), or on a trial queued with the user attribute
``compile_required`` (one whose binary hash is needed), it compiles and records whether the
prediction held (``prediction_ok``).  The GeneticSampler learns its predictions from ``binary_hash``.  A trial
whose configuration (every parameter) an earlier complete trial compiled already, whatever
proposed it (a move that switched a control on, a queued trial, another sampler), is not
compiled again either: it records ``repeat_of`` with ``predicted_from`` and ``skipped_compile``
and returns that trial's values.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import optuna

from ciq_optuna.compilers.base import xptxas_arg
from ciq_optuna.errors import CiqError
from ciq_optuna.objectives.finished import FinishedTrials
from ciq_optuna.objectives.metrics import COMPILE_METRICS, compile_metrics, missing_metric_reason
from ciq_optuna.space.search import Candidate, SearchSpace
from ciq_optuna.study._optuna import trials_of_this_trial

#: User attribute of a queued trial that must compile whatever the sampler predicts (its binary
#: hash is needed: a simplification judged by binary identity, or the confirmation of a winner
#: whose compile was skipped).
COMPILE_REQUIRED = "compile_required"

#: Guards the first use of an objective's temporary work folder (trials run in threads).
_WORKDIR_LOCK = threading.Lock()
#: Guards the first use of an objective's indexes of a study's finished trials.
_INDEX_LOCK = threading.Lock()

Measure = Callable[[Path, Candidate], "Mapping[str, float] | float"]
"""A measurement of a compiled binary: ``measure(cubin_path, candidate) -> {metric: value}`` (or one number)."""


class TrialFailed(CiqError):
    """A candidate that cannot be evaluated (does not compile, times out, measurement failed)."""


class CompileObjective:
    """An Optuna objective that compiles a kernel under suggested controls and returns metric values.

    Args:
        compiler: a ``ciq_optuna.compilers`` adapter (ptxas or nvcc).
        kernel: the input file (.ptx for ptxas, .cu for nvcc).
        arch: target architecture, e.g. ``sm_90a``.
        space: application parameters and compiler spaces.
        metrics: objective metric names, in the study's order (compile metrics or measured ones).
        measure: optional measurement of each new binary (runtime, a command's output...).
        timeout: seconds allowed to one compile (and to one measurement).
        workdir: where distinct binaries are kept, named by code hash.
    """

    def __init__(
        self,
        compiler: Any,
        kernel: Path,
        arch: str,
        space: SearchSpace,
        metrics: list[str],
        *,
        measure: Measure | None = None,
        timeout: float = 120.0,
        workdir: Path | None = None,
        measure_name: str = "measured",
    ) -> None:
        self.compiler = compiler
        self.kernel = Path(kernel)
        self.arch = arch
        self.space = space
        self.metrics = list(metrics)
        self.measure = measure
        self.measure_name = measure_name
        self.timeout = timeout
        self._workdir = Path(workdir) if workdir else None
        self._indexes: dict[int, FinishedTrials] = {}
        self._scratches: dict[tuple[int, int], Path] = {}
        #: The study metadata this objective was built from (set by ciq_optuna.compile_objective).
        self.meta: dict[str, Any] | None = None

    @property
    def workdir(self) -> Path:
        """Where distinct binaries are kept. Without one given, a temporary folder made when the
        first binary is kept, so an objective that never keeps one (or whose folder is set after
        construction, as ``ciq-optuna tune`` does) leaves nothing behind."""
        with _WORKDIR_LOCK:
            if self._workdir is None:
                self._workdir = Path(tempfile.mkdtemp(prefix="ciq-optuna-"))
            return self._workdir

    @workdir.setter
    def workdir(self, path: Path) -> None:
        self._workdir = Path(path)

    def binary_path(self, code_hash: str) -> Path:
        """Where the binary with this code hash is kept."""
        return self.workdir / "binaries" / f"{code_hash[:24]}.cubin"

    def compile(self, candidate: Candidate, output: Path) -> Any:
        """Compile ``candidate`` to ``output`` and return the adapter's result."""
        return self.compiler.compile(
            self.kernel, self.arch, self.command_flags(candidate), output=output, timeout=self.timeout
        )

    def command_flags(self, candidate: Candidate) -> list[str]:
        """The compiler's arguments for a candidate: its own flags, then ptxas flags via -Xptxas for nvcc."""
        return command_flags(self.compiler.name, candidate.flags)

    def __call__(self, trial: optuna.Trial) -> float | tuple[float, ...]:
        self._finished(trial.study)
        candidate = self.space.suggest(trial)
        trial.set_user_attr("flags", self.command_flags(candidate))
        trial.set_user_attr("compiler_version", self.compiler.info.version)
        reused = self._predicted_values(trial)
        if reused is None and "predicted_binary" not in trial.user_attrs and not trial.user_attrs.get(COMPILE_REQUIRED):
            reused = self._repeated_values(trial)
        if reused is not None:
            return reused
        result = self.compile(candidate, self._scratch() / "out.cubin")
        if not result.ok:
            trial.set_user_attr("error", result.error)
            raise TrialFailed(result.error)
        kept = self.binary_path(result.code_hash)
        if not kept.exists():  # first of its code; a copy of this thread's own, then renamed whole
            kept.parent.mkdir(parents=True, exist_ok=True)
            part = kept.with_name(f"{kept.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            shutil.copyfile(result.cubin_path, part)
            part.replace(kept)
        metrics = compile_metrics(result)
        for name in self.metrics:
            if name in COMPILE_METRICS and metrics[name] is None:
                msg = missing_metric_reason(result, name)
                trial.set_user_attr("metrics", metrics)
                trial.set_user_attr("error", msg)
                raise TrialFailed(msg)
        trial.set_user_attr("binary_hash", result.code_hash)
        if "predicted_binary" in trial.user_attrs:
            trial.set_user_attr("prediction_ok", trial.user_attrs["predicted_binary"] == result.code_hash)
        trial.set_user_attr("cubin_sha256", result.raw_sha256)
        trial.set_user_attr("metrics", metrics)
        trial.set_user_attr("reused", False)
        values = dict(metrics)
        if self.measure is not None:
            values.update(self._measured(trial, candidate, result.code_hash, kept))
        else:
            finished = self._finished(trial.study)
            seen = finished.measurement(result.code_hash)
            if seen is not None and seen[0] != trial.number:
                trial.set_user_attr("reused_from", seen[0])
                trial.set_user_attr("reused", True)
            else:
                trial.set_user_attr("measured", {})
                finished.remember(result.code_hash, trial.number, {})
        out = []
        for name in self.metrics:
            value = values.get(name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                msg = f"metric {name!r} was not measured (got {value!r})"
                trial.set_user_attr("error", msg)
                raise TrialFailed(msg)
            out.append(float(value))
        return out[0] if len(out) == 1 else tuple(out)

    def _scratch(self) -> Path:
        """This thread's folder for the binary being compiled: made once (a folder per trial cost
        a share of the framework's time), emptied by the compiler before each compile, removed
        with the objective by the process that made it."""
        key = (os.getpid(), threading.get_ident())
        path = self._scratches.get(key)
        if path is None:
            path = self._scratches[key] = Path(tempfile.mkdtemp(prefix="ciq-trial-"))
            weakref.finalize(self, _remove_scratch, path, os.getpid())
        return path

    def _predicted_values(self, trial: optuna.Trial) -> float | tuple[float, ...] | None:
        """The values of the trial whose binary the sampler predicted for this one, when it asked
        to skip the compile and that trial did compile to the predicted binary; else None."""
        attrs = trial.user_attrs
        if not attrs.get("skip_compile") or attrs.get(COMPILE_REQUIRED):
            return None
        number = attrs.get("predicted_from")
        trials = trials_of_this_trial(trial.study)  # by number: no scan of the study
        source = trials[number] if isinstance(number, int) and 0 <= number < len(trials) else None
        if source is None or source.number != number:
            source = next((t for t in trials if t.number == number), None)  # numbers not all read yet
        if (
            source is None
            or source.state != optuna.trial.TrialState.COMPLETE
            or source.user_attrs.get("binary_hash") != attrs.get("predicted_binary")
            or source.values is None
            or len(source.values) != len(self.metrics)
        ):
            return None
        return _reuse(trial, source)

    def _repeated_values(self, trial: optuna.Trial) -> float | tuple[float, ...] | None:
        """When an earlier trial compiled exactly this trial's configuration (the same parameters):
        its values, recorded as a skip predicted from it (``predicted_from``, ``predicted_binary``
        and ``repeat_of``), whatever proposed the repeat; else None."""
        source = self._finished(trial.study).compiled(trial.params)
        if source is None or source.number == trial.number or len(source.values) != len(self.metrics):
            return None
        trial.set_user_attr("predicted_binary", source.user_attrs["binary_hash"])
        trial.set_user_attr("predicted_from", source.number)
        trial.set_user_attr("repeat_of", source.number)
        return _reuse(trial, source)

    def _measured(
        self, trial: optuna.Trial, candidate: Candidate, code_hash: str, cubin: Path
    ) -> dict[str, float]:
        finished = self._finished(trial.study)
        seen = finished.measurement(code_hash)
        if seen is not None and seen[0] != trial.number:
            trial.set_user_attr("reused_from", seen[0])
            trial.set_user_attr("reused", True)
            return dict(seen[1])
        try:
            measured = normalize_measurement(self.measure(cubin, candidate), self.measure_name)
        except CiqError as exc:
            trial.set_user_attr("error", str(exc))
            raise TrialFailed(str(exc)) from None
        except Exception as exc:  # the user's measurement failed: this candidate fails, the search goes on
            msg = f"measurement raised {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            trial.set_user_attr("error", msg)
            raise TrialFailed(msg) from None
        trial.set_user_attr("measured", measured)
        extra = getattr(self.measure, "user_attrs", None)
        if callable(extra):  # e.g. the GPU harness: raw samples, stop reason, GPU
            for key, value in extra().items():
                trial.set_user_attr(key, value)
        finished.remember(code_hash, trial.number, measured)
        return measured

    def _finished(self, study: optuna.Study) -> FinishedTrials:
        """The index of the study's finished trials; made, and brought up to date with the whole
        study, at this objective's first trial of the study (a one-off of the run, as the
        sampler's first read is), so no later trial pays a pass over a large study."""
        key = id(study)
        index = self._indexes.get(key)
        if index is None:
            with _INDEX_LOCK:
                index = self._indexes.get(key)
                if index is None:
                    index = FinishedTrials(study)
                    index.catch_up()
                    self._indexes[key] = index
        return index


def _remove_scratch(path: Path, pid: int) -> None:
    if os.getpid() == pid:  # not a forked child's copy of the objective
        shutil.rmtree(path, ignore_errors=True)


def command_flags(compiler: str, flags: Mapping[str, list[str]]) -> list[str]:
    """Flags of every space for one compiler command; nvcc gets ptxas flags through ``-Xptxas``."""
    out: list[str] = []
    for space, space_flags in flags.items():
        if compiler == "nvcc" and space == "ptxas":
            if space_flags:
                out += ["-Xptxas", xptxas_arg(space_flags)]
        else:
            out += space_flags
    return out


def normalize_measurement(value: Any, name: str) -> dict[str, float]:
    """A measurement as ``{metric: float}``: one number is named ``name``; anything else is an error.

    None, a non-number, NaN or an infinity is a :class:`CiqError` (the trial fails), never a default.
    """
    if isinstance(value, Mapping):
        items = value.items()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        items = [(name, value)]
    else:
        raise CiqError(f"measurement returned {type(value).__name__}; expected a number or a dict of numbers")
    out = {}
    for k, v in items:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise CiqError(f"measurement {k!r} is {v!r}, not a number")
        if not math.isfinite(v):
            raise CiqError(f"measurement {k!r} is {v!r}, not a finite number")
        out[str(k)] = float(v)
    return out


def _reuse(trial: optuna.Trial, source: optuna.trial.FrozenTrial) -> float | tuple[float, ...]:
    """``source``'s values and compile results for ``trial``, which skips its compile."""
    trial.set_user_attr("skipped_compile", True)
    for key in ("metrics", "measured"):
        if key in source.user_attrs:
            trial.set_user_attr(key, source.user_attrs[key])
    values = tuple(float(v) for v in source.values)
    return values[0] if len(values) == 1 else values
