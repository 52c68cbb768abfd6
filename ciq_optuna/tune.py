"""The main job: tune a kernel's compiler controls and write the best ACF.

``tune()`` checks every input before it touches the storage (so a mistake leaves an existing
study intact), compiles the kernel once with the compiler defaults (the baseline), creates or
resumes the study, runs the search with a progress bar, and writes the ACF of the best trial
(or of each Pareto-optimal trial when there are several objectives).
"""

from __future__ import annotations

import logging
import math
import os
import re
import shlex
import tempfile
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
import pandas as pd

from ciq_optuna.acf import write_acf
from ciq_optuna.compilers.base import Compiler, compiler_for_source
from ciq_optuna.compilers.triton import is_triton_ref
from ciq_optuna.errors import CiqError, Interrupted
from ciq_optuna.extremes import extreme_seeds, push_extremes
from ciq_optuna.objectives.command import CommandMeasure
from ciq_optuna.objectives.compile import COMPILE_REQUIRED, CompileObjective, Measure, TrialFailed
from ciq_optuna.objectives.metrics import COMPILE_METRICS, check_metric_names, compile_metrics
from ciq_optuna.objectives.triton import RUNTIME_METRICS
from ciq_optuna.objectives.work_saved import record_work_saved
from ciq_optuna.samplers import make_sampler
from ciq_optuna.simplify import simplify, simplify_identical
from ciq_optuna.space.compiler_space import CompilerSpace
from ciq_optuna.space.controls import parse_arch
from ciq_optuna.space.files import find_space
from ciq_optuna.space.search import Candidate, SearchSpace
from ciq_optuna.store import add_to_store, check_store, picked_acf
from ciq_optuna.study._optuna import storage_of, trial_id_of
from ciq_optuna.study.budget import budget_status, cancel_left_waiting, done_reaches, gated_objective
from ciq_optuna.study.heap import LongLived
from ciq_optuna.study.leases import (
    MAX_TAKEN_AWAY,
    POLL_INTERVAL_S,
    fail_stale,
    locked_sampler,
    trial_taken_away,
)
from ciq_optuna.study.metadata import (
    create_or_load,
    default_study_name,
    file_sha256,
    finished_count,
    kernel_stem,
    run_queued,
)
from ciq_optuna.summary import (
    INTERRUPTED,
    acf_for_trial,
    baseline_trial,
    best_trials,
    dedup_stats,
    same_binary_warning,
    secondary_warnings,
    summary_table,
)
from ciq_optuna.warm_start import WARM_ATTR, find_warm_sources, run_warm_start, warm_count

_log = logging.getLogger("ciq_optuna")

#: Seconds between two reads of the study's best by the progress bar (this process's own values
#: update it in between: a read of the best trial costs a storage query).
PROGRESS_READ_S = 2.0


@dataclass
class TuneConfig:
    """Everything ``ciq-optuna tune`` takes (see ``ciq-optuna tune --help``)."""

    kernel: Path
    arch: str
    minimize: list[str] = field(default_factory=list)
    maximize: list[str] = field(default_factory=list)
    trials: int = 64
    storage: str | None = None
    study_name: str | None = None
    compiler_path: str | None = None
    spaces: list[Path] = field(default_factory=list)
    measure_command: str | None = None
    measure_regex: str | None = None
    measure_name: str = "measured"
    timeout: float = 120.0
    jobs: int = 1
    seed: int | None = None
    pool_size: int | None = None
    acf: Path | None = None
    workdir: Path | None = None
    progress: bool = True
    simplify: bool = True
    screen: bool = True
    store: Path | None = None
    force: bool = False
    warm_start: bool = True
    warm_from: list[Path] = field(default_factory=list)
    #: Optuna's log line per trial on stderr (``tune -v``); off by default.
    log_trials: bool = False
    pareto_pick: str | None = None


@dataclass
class TuneResult:
    study: optuna.Study
    baseline: optuna.trial.FrozenTrial | None
    best: list[optuna.trial.FrozenTrial]
    summary: pd.DataFrame
    acf_paths: list[Path]
    stats: dict[str, int]
    store_path: Path | None = None
    warnings: list[str] = field(default_factory=list)


def _spaces_for(compiler: Compiler, explicit: Sequence[Path], arch: str) -> list[CompilerSpace]:
    if explicit:
        spaces = [CompilerSpace.load(p) for p in explicit]
    else:
        # one space per compiler command: the nvcc files hold the ptxas controls as -Xptxas pass-throughs
        spaces = [CompilerSpace.load(find_space(compiler.name, compiler.info.release))]
    for s in spaces:
        if s.cuda != compiler.info.release:
            raise CiqError(f"space {s.path or s.name} is for CUDA {s.cuda}, the compiler is {compiler.info}")
        if s.compiler not in (compiler.name, "ptxas"):
            raise CiqError(f"space {s.path or s.name} is for {s.compiler}, not {compiler.name}")
    return [s.for_arch(arch) for s in spaces]


def _metrics_and_directions(
    config: TuneConfig, has_callable: bool, extra_metrics: Sequence[str] = ()
) -> tuple[list[str], list[str]]:
    metrics = list(config.minimize) + list(config.maximize)
    directions = ["minimize"] * len(config.minimize) + ["maximize"] * len(config.maximize)
    if not metrics:
        raise CiqError("nothing to optimise: give --minimize METRIC (or --maximize)")
    if len(set(metrics)) != len(metrics):
        raise CiqError(f"a metric is given twice: {metrics}")
    extra = [config.measure_name] if config.measure_command or has_callable else []
    check_metric_names(metrics, extra + list(extra_metrics))
    return metrics, directions


def prepare(config: TuneConfig, measure: Measure | None = None) -> tuple[dict[str, Any], CompileObjective]:
    """Check every input and build the study metadata and objective; touches no storage."""
    kernel = Path(config.kernel)
    triton_kernel = None
    if is_triton_ref(kernel):
        from ciq_optuna.compilers.triton import load_kernel

        triton_kernel = load_kernel(kernel)
        kernel = triton_kernel.path
    elif kernel.is_dir():
        raise CiqError(f"kernel {kernel} is a directory; give the .ptx or .cu file to tune")
    if not kernel.is_file():
        raise CiqError(f"kernel not found: {kernel}")
    parse_arch(config.arch)
    if config.trials < 1:
        raise CiqError("--trials must be at least 1")
    if config.jobs < 1:
        raise CiqError("--jobs must be at least 1")
    if config.measure_command and not config.measure_regex:
        raise CiqError("--measure-cmd needs --measure-regex to read the metric from its output")
    if not (config.timeout > 0 and math.isfinite(config.timeout)):
        raise CiqError(f"--timeout must be a positive number of seconds, not {config.timeout}")
    if config.pool_size is not None and config.pool_size < 2:
        raise CiqError(f"--pool-size must be at least 2, not {config.pool_size}")
    if (measure is not None or config.measure_command) and config.measure_name in COMPILE_METRICS:
        raise CiqError(f"--measure-name {config.measure_name!r} is a compile metric; choose another name")
    _check_output_file(config.acf, "--acf")
    if config.workdir is not None and Path(config.workdir).exists() and not Path(config.workdir).is_dir():
        raise CiqError(f"--workdir {config.workdir} is a file, not a directory")
    if config.workdir is not None:
        _check_writable_dir(Path(config.workdir), "--workdir", create=True)
    runtime = (
        triton_kernel is not None
        and measure is None
        and not config.measure_command
        and any(m in RUNTIME_METRICS for m in [*config.minimize, *config.maximize])
    )
    metrics, directions = _metrics_and_directions(
        config, measure is not None, RUNTIME_METRICS if triton_kernel is not None else ()
    )
    if triton_kernel is not None:
        from ciq_optuna.objectives.triton import triton_compiler

        compiler = triton_compiler(triton_kernel, config.arch, config.compiler_path)
    else:
        compiler = compiler_for_source(kernel, config.compiler_path)
    compiler.check_arch(config.arch)
    spaces = _spaces_for(compiler, config.spaces, config.arch)
    measure_meta = None
    if runtime:
        from ciq_optuna.gpu.triton_runtime import TritonRuntimeMeasure

        measure = TritonRuntimeMeasure(
            triton_kernel, config.arch, ptxas=config.compiler_path, timeout=config.timeout
        )
        measure_meta = {"kind": "triton-runtime"}
    if config.measure_command:
        measure = CommandMeasure(
            config.measure_command,
            config.measure_name,
            config.measure_regex,
            kernel=kernel.resolve(),
            arch=config.arch,
            timeout=config.timeout,
            cwd=Path.cwd(),
        )
        measure_meta = {
            "command": config.measure_command,
            "regex": config.measure_regex,
            "name": config.measure_name,
            "cwd": os.getcwd(),
        }
    meta = {
        "kind": "compile",
        "kernel": {"path": str(kernel.resolve()), "sha256": file_sha256(kernel), "name": kernel.name},
        "arch": config.arch,
        "compiler": {
            "name": compiler.name,
            "version": compiler.info.version,
            "path": str(compiler.info.path),
        },
        "spaces": [dict(s.identity, path=str(s.path) if s.path else None) for s in spaces],
        "metrics": metrics,
        "directions": directions,
        "measure": measure_meta,
        "timeout": config.timeout,
        "budget": config.trials,
        "sampler": {"pool_size": config.pool_size} if config.pool_size else {},
    }
    objective_cls, space = CompileObjective, SearchSpace(compilers=spaces)
    if triton_kernel is not None:
        from ciq_optuna.objectives.triton import KIND, TritonObjective, TritonSearchSpace, triton_meta

        meta.update(kind=KIND, **triton_meta(triton_kernel, compiler))
        objective_cls, space = TritonObjective, TritonSearchSpace(triton_kernel, spaces)
    objective = objective_cls(
        compiler,
        kernel.resolve(),
        config.arch,
        space,
        metrics,
        measure=measure,
        timeout=config.timeout,
        workdir=config.workdir,
        measure_name=config.measure_name,
    )
    return meta, objective


def _check_output_file(path: Path | None, option: str) -> None:
    """CiqError now, before any work, if ``path`` cannot be written later."""
    if path is None:
        return
    path = Path(path)
    if path.is_dir():
        raise CiqError(f"{option} {path} is a directory; give a file name")
    if not path.parent.is_dir():
        raise CiqError(f"{option} {path}: directory {path.parent} does not exist")
    _check_writable_dir(path.parent, f"{option} {path}: directory")


def _check_writable_dir(folder: Path, what: str, *, create: bool = False) -> None:
    """CiqError now if a file cannot be created in ``folder`` (made first when ``create``)."""
    try:
        if create:
            folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".ciq-write-check-"):
            pass
    except OSError as exc:
        raise CiqError(f"{what} {folder} is not usable: {exc.strerror or exc}") from None


def check_outputs(config: TuneConfig, meta: Mapping[str, Any], workdir: Path) -> None:
    """Check every place the run writes to (ACF or Pareto folder, binaries) before the first trial."""
    target = Path(config.acf) if config.acf else default_acf_path(meta)
    _check_output_file(target, "--acf" if config.acf else "ACF")
    if len(meta["metrics"]) > 1:
        folder = pareto_folder(target)
        if folder.exists() and not folder.is_dir():
            raise CiqError(f"the Pareto ACFs go to {folder}, which is a file")
    _check_writable_dir(workdir, "--workdir" if config.workdir else "work directory", create=True)


def check_baseline(objective: CompileObjective) -> dict[str, float]:
    """Compile with the compiler's defaults; CiqError with the compiler's message if the kernel is broken."""
    with tempfile.TemporaryDirectory(prefix="ciq-baseline-") as tmp:
        result = objective.compile(Candidate(), Path(tmp) / "baseline.cubin")
    if not result.ok:
        raise CiqError(
            f"{objective.kernel.name} does not compile with {objective.compiler.name}'s defaults: "
            f"{result.error}"
        )
    if not result.entries:
        raise CiqError(f"{objective.kernel.name} has no kernel (entry function) to tune")
    return compile_metrics(result)


def tune(config: TuneConfig, *, measure: Measure | None = None, storage: Any = None) -> TuneResult:
    """Run (or resume) a tuning study; see the module docstring."""
    from ciq_optuna.study.storage import (
        DEFAULT_STORAGE_FILE,
        is_connection_error,
        redact,
        resolve_storage,
        storage_url,
    )

    optuna.logging.set_verbosity(optuna.logging.INFO if config.log_trials else optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    meta, objective = prepare(config, measure)
    store_key = check_store(config, meta)
    warm = find_warm_sources(config, meta)
    check_baseline(objective)
    compiler = objective.compiler
    name = config.study_name or default_study_name(
        meta["kernel"]["name"], config.arch, compiler.name, compiler.info.release, meta["metrics"]
    )
    if config.workdir is None:
        objective.workdir = Path(".ciq-optuna") / _safe_dirname(name)
    check_outputs(config, meta, objective.workdir)
    if storage is None:
        storage = resolve_storage(config.storage, default_path=DEFAULT_STORAGE_FILE)
    storage_shown = redact(storage_url(config.storage, default_path=DEFAULT_STORAGE_FILE))
    sampler = locked_sampler(
        make_sampler(len(meta["metrics"]), seed=config.seed, **meta["sampler"]), storage, name
    )
    study, _ = create_or_load(storage, name, meta, sampler=sampler)
    study.set_user_attr("budget", max(config.trials, study.user_attrs.get("budget", 0)))
    done = finished_count(study)
    remaining = config.trials - done
    _say(config, f"study {name!r} in {storage_shown}: {done} trial(s) done, {max(remaining, 0)} to run")
    in_flight: set[int] = set()
    heap = LongLived()  # frozen after the first trial, when the sampler has read the study
    progress = _Progress(config, min(done, config.trials), heap)
    multi = len(study.directions) > 1
    try:
        with progress, heap:
            if remaining > 0 and _run_baseline(study, objective, config.trials, in_flight, progress):
                remaining -= 1
            if remaining > 0 and warm:
                tracked = _tracked(gated_objective(study, objective, config.trials), in_flight, progress)
                ran = run_warm_start(
                    study,
                    objective.space.compilers,
                    warm,
                    tracked,
                    warm_count(config, remaining),
                    app=objective.space.app.distributions(),
                )
                remaining -= ran
                if ran:
                    _say(config, f"warm start: {ran} trial(s) from {', '.join(str(p) for p, _ in warm)}")
            if remaining > 0 and config.screen:
                remaining -= _run_screening(
                    study, objective, config.trials, in_flight, min(remaining, config.trials // 8), progress
                )
            if remaining > 0 and multi and config.screen:
                remaining -= _run_seeds(
                    study, objective, config.trials, in_flight, min(remaining, config.trials // 8), progress
                )
            corners = min(remaining, config.trials // 8) if multi and config.screen else 0
            if remaining - corners > 0:
                _optimize(study, objective, config, remaining - corners, in_flight, progress)
            if corners > 0 and finished_count(study) < config.trials:
                _push_extremes(study, objective, config, corners, in_flight, progress)
        if config.simplify:
            _simplify(study, objective, config)
    except KeyboardInterrupt:
        _fail_interrupted(study, in_flight)
        raise Interrupted("the finished trials are saved; run the same command again to continue") from None
    except Exception as exc:
        if not is_connection_error(exc):
            raise
        raise CiqError(
            f"lost the database {storage_shown} for {getattr(storage, 'reconnect_timeout', 0):.0f} s; "
            "the finished trials are saved: run the same command again to continue"
        ) from None
    result = finish(study, meta, objective, config, storage_shown)
    if store_key is not None:
        result.store_path = add_to_store(config, picked_acf(config, result.best, result.acf_paths))
    return result


def _simplify(study: optuna.Study, objective: CompileObjective, config: TuneConfig) -> None:
    """Simplify the winner (one objective) or every Pareto point (by binary identity)."""
    best = best_trials(study)
    if not best:
        return
    before = len(study.trials)
    if len(study.directions) == 1:
        simplify(study, objective, best[0])
        what = "the winner"
    else:
        for point in best:
            simplify_identical(study, objective, point)
        what = f"the {len(best)} Pareto point(s) (same binary, fewer flags)"
    if len(study.trials) > before:
        _say(config, f"simplified {what} with {len(study.trials) - before} extra trial(s)")


class _Progress:
    """One progress bar over the study's budget: baseline, screening, search and corner trials.
    Each finished trial also settles ``heap`` (the study is read by then)."""

    def __init__(self, config: TuneConfig, done: int, heap: LongLived | None = None) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(
            total=config.trials,
            initial=done,
            desc="tuning",
            unit="trial",
            disable=not config.progress,
            dynamic_ncols=True,
        )
        self.failed = 0
        self._lock = threading.Lock()
        self._best: Any = None
        self._read_at = -math.inf
        self._heap = heap

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.close()

    def step(self, study: optuna.Study, failed: bool, value: Any = None) -> None:
        """One more finished trial (``value``: what its objective returned, None if it failed)."""
        if self._heap is not None:
            self._heap.settle()
        with self._lock:
            self.failed += failed
            self.bar.update(1)
            if self.bar.disable:
                return  # nothing shown: no best to compute
            postfix: dict[str, Any] = {"failed": self.failed}
            now = time.monotonic()
            if now - self._read_at >= PROGRESS_READ_S:  # the study's best, other processes' included
                self._read_at = now
                self._best = _study_best(study)
            elif len(study.directions) == 1 and isinstance(value, (int, float)):  # in between: ours
                minimize = study.direction == optuna.study.StudyDirection.MINIMIZE
                if self._best is None or (value < self._best if minimize else value > self._best):
                    self._best = float(value)
            if len(study.directions) == 1:
                if self._best is not None:
                    postfix["best"] = f"{self._best:g}"
            elif self._best is not None:
                postfix["pareto"] = self._best
            self.bar.set_postfix(postfix, refresh=False)


def _study_best(study: optuna.Study) -> Any:
    """The best value (one objective) or the size of the Pareto front (several), None if none."""
    if len(study.directions) > 1:
        return len(study.best_trials)
    try:
        return study.best_value
    except ValueError:
        return None


def _safe_dirname(name: str) -> str:
    """A study name as one directory name (no path separators or parent references)."""
    return re.sub(r"[^A-Za-z0-9_.+=-]", "_", name).lstrip(".") or "study"


def _tracked(objective: Any, in_flight: set[int], progress: _Progress | None = None) -> Any:
    """Wrap an objective so the trials this process is running are known (to fail them on Ctrl-C)
    and each finished one moves the progress bar."""

    def run(trial: optuna.Trial) -> Any:
        in_flight.add(trial_id_of(trial))
        failed: bool | None = None  # stays None when cancelled (beyond the budget) or interrupted
        try:
            value = objective(trial)
            failed = False
            return value
        except optuna.TrialPruned:
            raise
        except KeyboardInterrupt:
            trial.set_user_attr(INTERRUPTED, True)  # Optuna fails the trial; say why
            raise
        except Exception:
            failed = True
            raise
        finally:
            in_flight.discard(trial_id_of(trial))
            if progress is not None and failed is not None:
                progress.step(trial.study, failed, None if failed else value)

    return run


def _fail_interrupted(study: optuna.Study, in_flight: set[int]) -> None:
    for trial_id in list(in_flight):
        try:
            storage_of(study).set_trial_user_attr(trial_id, INTERRUPTED, True)
            storage_of(study).set_trial_state_values(trial_id, optuna.trial.TrialState.FAIL)
        except Exception:  # already finished by Optuna, or the storage is gone: nothing to repair
            pass


def _run_baseline(
    study: optuna.Study,
    objective: CompileObjective,
    budget: int,
    in_flight: set[int],
    progress: _Progress | None = None,
) -> bool:
    """Evaluate the compiler-default configuration first, alone, unless the study already has it.

    Run before any parallel work: Optuna's queued trials race when several threads pick them up.
    A baseline that fails stops the tune with its error (every candidate would fail the same
    way). Returns whether a trial was run.
    """
    trials = study.get_trials(deepcopy=False)
    states = {t.state for t in trials if t.user_attrs.get("baseline")}
    if optuna.trial.TrialState.COMPLETE in states:
        return False
    if not states & {optuna.trial.TrialState.WAITING, optuna.trial.TrialState.RUNNING}:
        study.enqueue_trial(objective.space.baseline_params(), user_attrs={"baseline": True})
    ran = run_queued(
        study, _tracked(gated_objective(study, objective, budget), in_flight, progress), 1, catch=(TrialFailed,)
    )
    if ran and ran[0].user_attrs.get("baseline") and ran[0].state == optuna.trial.TrialState.FAIL:
        raise CiqError(
            f"the baseline (the compiler's defaults) failed: {ran[0].user_attrs.get('error', 'unknown error')}; "
            "every candidate would fail the same way"
        )
    return bool(ran)


def _run_screening(
    study: optuna.Study,
    objective: CompileObjective,
    budget: int,
    in_flight: set[int],
    count: int,
    progress: _Progress | None = None,
) -> int:
    """Evaluate up to ``count`` one-control changes of the baseline first (``-O1`` alone, ...).

    A search's first generation is random and rarely passes a single control; these candidates
    join generation 0 so that the most common single-flag wins are always seen.  They compile
    whatever a binary-aware sampler predicts (``compile_required``): one control changed from the
    defaults is the cleanest evidence of which controls change this kernel's binary, and a
    screening trial skipped on a prediction would give none. They run one at a
    time, like the baseline (queued trials race when several threads pick them up). Only on a
    study that has not started its search (the baseline and warm-start seeds are not the search:
    after a warm start the screening still runs, without the configurations already tried).
    Returns how many trials ran.
    """
    seen = _tried_before_search(study, ("baseline", WARM_ATTR)) if count > 0 else None
    if seen is None:
        return 0
    candidates = []
    for space in objective.space.compilers:
        for config in space.one_change_configs():
            params = objective.space.baseline_params()
            for other in objective.space.compilers:
                params.update(other.params_from_config(config if other is space else other.baseline()))
            if tuple(sorted(params.items())) not in seen:
                candidates.append(params)
    return _run_enqueued(study, objective, budget, in_flight, progress, candidates[:count], "screening", (COMPILE_REQUIRED,))


def _run_seeds(
    study: optuna.Study,
    objective: CompileObjective,
    budget: int,
    in_flight: set[int],
    count: int,
    progress: _Progress | None = None,
) -> int:
    """Evaluate up to ``count`` corner seeds (integer controls at their ends, see ``extremes``)."""
    seen = _tried_before_search(study, ("baseline", "screening", WARM_ATTR)) if count > 0 else None
    if seen is None:
        return 0  # only before the search starts, as screening
    chosen = [p for p in extreme_seeds(objective.space) if tuple(sorted(p.items())) not in seen][:count]
    return _run_enqueued(study, objective, budget, in_flight, progress, chosen, "corner")


def _tried_before_search(study: optuna.Study, marks: tuple[str, ...]) -> set[tuple[Any, ...]] | None:
    """The parameter sets tried so far, or None once the search has started: a trial carries none of
    ``marks`` (the attributes of the trials that run before the search: baseline, warm start, ...)."""
    trials = study.get_trials(deepcopy=False)
    if any(not any(t.user_attrs.get(m) for m in marks) for t in trials):
        return None
    return {tuple(sorted(t.params.items())) for t in trials}


def _run_enqueued(
    study: optuna.Study,
    objective: CompileObjective,
    budget: int,
    in_flight: set[int],
    progress: _Progress | None,
    chosen: list[dict[str, Any]],
    mark: str,
    also: tuple[str, ...] = (),
) -> int:
    """Enqueue ``chosen`` (each trial marked with the user attribute ``mark`` and those in
    ``also``) and run them one at a time."""
    for params in chosen:
        study.enqueue_trial(params, user_attrs={m: True for m in (mark, *also)})
    if not chosen:
        return 0
    tracked = _tracked(gated_objective(study, objective, budget), in_flight, progress)
    return len(run_queued(study, tracked, len(chosen), catch=(TrialFailed,)))


def _push_extremes(
    study: optuna.Study,
    objective: CompileObjective,
    config: TuneConfig,
    count: int,
    in_flight: set[int],
    progress: _Progress,
) -> int:
    """Spend ``count`` trials on one-control moves from each objective's best trial (Pareto corners)."""
    tracked = _tracked(gated_objective(study, objective, config.trials), in_flight, progress)

    def run_one(params: dict[str, Any]) -> bool:
        if finished_count(study) >= config.trials:
            return False
        study.enqueue_trial(params, user_attrs={"corner": True}, skip_if_exists=False)
        return bool(run_queued(study, tracked, 1, catch=(TrialFailed,)))

    return push_extremes(study, objective.space, run_one, count, seed=config.seed)


def _optimize(
    study: optuna.Study,
    objective: CompileObjective,
    config: TuneConfig,
    remaining: int,
    in_flight: set[int],
    progress: _Progress,
) -> None:
    budget = config.trials
    target = min(budget, finished_count(study) + remaining)  # the rest is kept for the corner moves

    def callback(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        if done_reaches(study, target):
            study.stop()

    _until_budget(
        study,
        _tracked(gated_objective(study, objective, budget), in_flight, progress),
        target,
        config.jobs,
        callback,
    )


def _until_budget(study: optuna.Study, objective: Any, budget: int, jobs: int, callback: Any) -> None:
    """Run trials until the study holds ``budget`` counted trials, whoever runs them.

    Like a worker, tune waits while the remaining slots are held by trials of other processes
    (one of them may die and its trial must be retried), and carries on when one of its own
    trials was failed by another process after its lease expired.
    """
    taken_away = 0
    while True:
        status = budget_status(study)
        if status["done"] >= budget:
            if status["waiting"]:
                cancel_left_waiting(study)
            return
        free = budget - status["done"] - status["running"]
        if free <= 0:
            fail_stale(study)
            time.sleep(POLL_INTERVAL_S)
            continue
        try:
            study.optimize(
                objective,
                n_trials=free,
                n_jobs=min(jobs, free),
                catch=(TrialFailed,),
                callbacks=[callback],
                gc_after_trial=False,
            )
        except Exception as exc:
            if not trial_taken_away(exc) or taken_away >= MAX_TAKEN_AWAY:
                raise
            taken_away += 1
            _log.warning("a trial was finished by another process while this one ran it; continuing")


def default_acf_path(meta: Mapping[str, Any]) -> Path:
    return Path(f"{kernel_stem(meta['kernel']['name'], meta['arch'])}.{meta['arch']}.acf")


def pareto_folder(target: Path) -> Path:
    """Where the ACFs of a Pareto front go: ``KERNEL.ARCH.pareto/`` beside the ACF path."""
    folder = Path(target).with_suffix("")
    return folder.with_name(folder.name + ".pareto")


def finish(
    study: optuna.Study,
    meta: Mapping[str, Any],
    objective: CompileObjective,
    config: TuneConfig,
    storage_shown: str,
) -> TuneResult:
    """Summaries and ACFs after a run (also for a study that was already complete)."""
    best = best_trials(study)
    signs = [1.0 if d == optuna.study.StudyDirection.MINIMIZE else -1.0 for d in study.directions]
    best.sort(key=lambda t: [s * v for s, v in zip(signs, t.values)])  # a front from its first corner
    baseline = baseline_trial(study)
    stats = dedup_stats(study)
    stats["work_saved"] = record_work_saved(study)
    if not best:
        raise CiqError(
            f"no trial of study {study.study_name!r} completed ({stats['failed']} failed): "
            "see the trials' 'error' attribute, e.g. in ciq-optuna dashboard"
        )
    paths: list[Path] = []
    target = Path(config.acf) if config.acf else default_acf_path(meta)
    if len(meta["metrics"]) == 1:
        planned = [(target, best[0])]
    else:
        planned = [(pareto_folder(target) / f"trial-{t.number}.acf", t) for t in best]
    for path, t in planned:
        try:
            paths.append(write_acf(path, acf_for_trial(study, t, meta, objective, storage_shown)))
        except OSError as exc:
            raise CiqError(
                f"cannot write {path}: {exc.strerror or exc}; the study is saved, get the ACF with "
                f"ciq-optuna acf from-study --storage {shlex.quote(storage_shown)} "
                f"--study {shlex.quote(study.study_name)} --trial {t.number} -o FILE.acf"
            ) from None
    _upload_artifacts(study, best, paths)
    if warning := same_binary_warning(study):
        _log.warning("ciq-optuna: warning: %s", warning)
    summary = summary_table(baseline, best[0], meta["metrics"], study)
    warnings_ = secondary_warnings(baseline, best[0], meta["metrics"], study) if len(best) == 1 else []
    return TuneResult(study, baseline, best, summary, paths, stats, warnings=warnings_)


def _upload_artifacts(
    study: optuna.Study, trials: Sequence[optuna.trial.FrozenTrial], paths: Sequence[Path]
) -> None:
    try:
        from ciq_optuna.dashboard import upload_acf, write_study_note
    except ImportError:  # pragma: no cover - the dashboard module ships with the package
        return
    for trial, path in zip(trials, paths):
        try:
            upload_acf(study, trial, path)
        except Exception as exc:  # an artifact is a convenience; never lose the ACF file over it
            _log.warning("could not attach %s to trial %d as an artifact: %s", path, trial.number, exc)
    try:
        write_study_note(study, {t.number: Path(p).name for t, p in zip(trials, paths)})
    except Exception as exc:  # a convenience too
        _log.warning("could not write the dashboard's study note: %s", exc)


def _say(config: TuneConfig, text: str) -> None:
    if config.progress or config.log_trials:  # not with -q
        print(text, flush=True)
