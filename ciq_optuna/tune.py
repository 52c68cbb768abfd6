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
import tempfile
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
from ciq_optuna.errors import CiqError
from ciq_optuna.objectives.command import CommandMeasure
from ciq_optuna.objectives.compile import CompileObjective, Measure, TrialFailed
from ciq_optuna.objectives.metrics import COMPILE_METRICS, check_metric_names, compile_metrics
from ciq_optuna.objectives.triton import RUNTIME_METRICS
from ciq_optuna.objectives.work_saved import record_work_saved
from ciq_optuna.samplers import make_sampler
from ciq_optuna.simplify import simplify
from ciq_optuna.space.compiler_space import CompilerSpace
from ciq_optuna.space.controls import parse_arch
from ciq_optuna.space.files import find_space
from ciq_optuna.space.search import Candidate, SearchSpace
from ciq_optuna.store import add_to_store, check_store
from ciq_optuna.study.budget import budget_status, gated_objective
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
    acf_for_trial,
    baseline_trial,
    best_trials,
    dedup_stats,
    same_binary_warning,
    summary_table,
)
from ciq_optuna.warm_start import find_warm_sources, run_warm_start, warm_count

_log = logging.getLogger("ciq_optuna")


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


@dataclass
class TuneResult:
    study: optuna.Study
    baseline: optuna.trial.FrozenTrial | None
    best: list[optuna.trial.FrozenTrial]
    summary: pd.DataFrame
    acf_paths: list[Path]
    stats: dict[str, int]
    store_path: Path | None = None


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

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    meta, objective = prepare(config, measure)
    store_key = check_store(config, meta)
    warm = find_warm_sources(config, meta)
    check_baseline(objective)
    compiler = objective.compiler
    name = config.study_name or default_study_name(
        meta["kernel"]["name"], config.arch, compiler.name, compiler.info.release, meta["metrics"]
    )
    if storage is None:
        storage = resolve_storage(config.storage, default_path=DEFAULT_STORAGE_FILE)
    storage_shown = redact(storage_url(config.storage, default_path=DEFAULT_STORAGE_FILE))
    sampler = locked_sampler(
        make_sampler(len(meta["metrics"]), seed=config.seed, **meta["sampler"]), storage, name
    )
    study, _ = create_or_load(storage, name, meta, sampler=sampler)
    study.set_user_attr("budget", max(config.trials, study.user_attrs.get("budget", 0)))
    if config.workdir is None:
        objective.workdir = Path(".ciq-optuna") / _safe_dirname(name)
    done = finished_count(study)
    remaining = config.trials - done
    _say(config, f"study {name!r} in {storage_shown}: {done} trial(s) done, {max(remaining, 0)} to run")
    in_flight: set[int] = set()
    try:
        if remaining > 0 and _run_baseline(study, objective, config.trials, in_flight):
            remaining -= 1
        if remaining > 0 and warm:
            tracked = _tracked(gated_objective(study, objective, config.trials), in_flight)
            ran = run_warm_start(
                study, objective.space.compilers, warm, tracked, warm_count(config, remaining)
            )
            remaining -= ran
            if ran:
                _say(config, f"warm start: {ran} trial(s) from {', '.join(str(p) for p, _ in warm)}")
        if remaining > 0 and config.screen:
            remaining -= _run_screening(
                study, objective, config.trials, in_flight, min(remaining, config.trials // 8)
            )
        if remaining > 0:
            _optimize(study, objective, config, remaining, in_flight)
        if config.simplify and len(study.directions) == 1 and best_trials(study):
            before = len(study.trials)
            simplify(study, objective, best_trials(study)[0])
            if len(study.trials) > before:
                _say(config, f"simplified the winner with {len(study.trials) - before} extra trial(s)")
    except KeyboardInterrupt:
        _fail_interrupted(study, in_flight)
        raise CiqError(
            "interrupted: the finished trials are saved; run the same command again to continue"
        ) from None
    except Exception as exc:
        if not is_connection_error(exc):
            raise
        raise CiqError(
            f"lost the database {storage_shown} for {getattr(storage, 'reconnect_timeout', 0):.0f} s; "
            "the finished trials are saved: run the same command again to continue"
        ) from None
    result = finish(study, meta, objective, config, storage_shown)
    if store_key is not None:
        result.store_path = add_to_store(config, result.acf_paths[0])
    return result


def _safe_dirname(name: str) -> str:
    """A study name as one directory name (no path separators or parent references)."""
    return re.sub(r"[^A-Za-z0-9_.+=-]", "_", name).lstrip(".") or "study"


def _tracked(objective: Any, in_flight: set[int]) -> Any:
    """Wrap an objective so the trials this process is running are known (to fail them on Ctrl-C)."""

    def run(trial: optuna.Trial) -> Any:
        in_flight.add(trial._trial_id)
        try:
            return objective(trial)
        finally:
            in_flight.discard(trial._trial_id)

    return run


def _fail_interrupted(study: optuna.Study, in_flight: set[int]) -> None:
    for trial_id in list(in_flight):
        try:
            study._storage.set_trial_user_attr(trial_id, "error", "interrupted")
            study._storage.set_trial_state_values(trial_id, optuna.trial.TrialState.FAIL)
        except Exception:  # already finished by Optuna, or the storage is gone: nothing to repair
            pass


def _run_baseline(study: optuna.Study, objective: CompileObjective, budget: int, in_flight: set[int]) -> bool:
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
        study, _tracked(gated_objective(study, objective, budget), in_flight), 1, catch=(TrialFailed,)
    )
    if ran and ran[0].user_attrs.get("baseline") and ran[0].state == optuna.trial.TrialState.FAIL:
        raise CiqError(
            f"the baseline (the compiler's defaults) failed: {ran[0].user_attrs.get('error', 'unknown error')}; "
            "every candidate would fail the same way"
        )
    return bool(ran)


def _run_screening(
    study: optuna.Study, objective: CompileObjective, budget: int, in_flight: set[int], count: int
) -> int:
    """Evaluate up to ``count`` one-control changes of the baseline first (``-O1`` alone, ...).

    A search's first generation is random and rarely passes a single control; these candidates
    join generation 0 so that the most common single-flag wins are always seen. They run one at a
    time, like the baseline (queued trials race when several threads pick them up). Only on a
    study that has not started its search. Returns how many trials ran.
    """
    if count <= 0 or any(not t.user_attrs.get("baseline") for t in study.get_trials(deepcopy=False)):
        return 0
    candidates = []
    for space in objective.space.compilers:
        for config in space.one_change_configs():
            params = objective.space.baseline_params()
            for other in objective.space.compilers:
                params.update(other.params_from_config(config if other is space else other.baseline()))
            candidates.append(params)
    chosen = candidates[:count]
    for params in chosen:
        study.enqueue_trial(params, user_attrs={"screening": True})
    if not chosen:
        return 0
    tracked = _tracked(gated_objective(study, objective, budget), in_flight)
    return len(run_queued(study, tracked, len(chosen), catch=(TrialFailed,)))


def _optimize(
    study: optuna.Study, objective: CompileObjective, config: TuneConfig, remaining: int, in_flight: set[int]
) -> None:
    from tqdm.auto import tqdm

    bar = tqdm(total=remaining, desc="tuning", unit="trial", disable=not config.progress, dynamic_ncols=True)
    counts: dict[str, Any] = {"failed": 0, "best": None}
    budget = config.trials
    sign = 1.0 if study.directions[0] == optuna.study.StudyDirection.MINIMIZE else -1.0

    def callback(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        # No storage reads here: the budget gate stops the loop when other workers fill the
        # budget, and the progress bar shows the best of this run's trials.
        if trial.state == optuna.trial.TrialState.FAIL:
            counts["failed"] += 1
        bar.update(1)
        postfix = {"failed": counts["failed"]}
        if len(study.directions) == 1:
            if trial.state == optuna.trial.TrialState.COMPLETE and (
                counts["best"] is None or sign * trial.value < sign * counts["best"]
            ):
                counts["best"] = trial.value
            if counts["best"] is not None:
                postfix["best"] = f"{counts['best']:g}"
        bar.set_postfix(postfix, refresh=False)

    try:
        _until_budget(
            study,
            _tracked(gated_objective(study, objective, budget), in_flight),
            budget,
            config.jobs,
            callback,
        )
    finally:
        bar.close()


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


def finish(
    study: optuna.Study,
    meta: Mapping[str, Any],
    objective: CompileObjective,
    config: TuneConfig,
    storage_shown: str,
) -> TuneResult:
    """Summaries and ACFs after a run (also for a study that was already complete)."""
    best = best_trials(study)
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
        paths.append(write_acf(target, acf_for_trial(study, best[0], meta, objective, storage_shown)))
    else:
        folder = target.with_suffix("")
        folder = folder.with_name(folder.name + ".pareto")
        for t in best:
            paths.append(
                write_acf(
                    folder / f"trial-{t.number}.acf", acf_for_trial(study, t, meta, objective, storage_shown)
                )
            )
    _upload_artifacts(study, best, paths)
    if warning := same_binary_warning(study):
        _log.warning("ciq-optuna: warning: %s", warning)
    summary = summary_table(baseline, best[0], meta["metrics"])
    return TuneResult(study, baseline, best, summary, paths, stats)


def _upload_artifacts(
    study: optuna.Study, trials: Sequence[optuna.trial.FrozenTrial], paths: Sequence[Path]
) -> None:
    try:
        from ciq_optuna.dashboard import upload_acf
    except ImportError:  # pragma: no cover - the dashboard module ships with the package
        return
    for trial, path in zip(trials, paths):
        try:
            upload_acf(study, trial, path)
        except Exception as exc:  # an artifact is a convenience; never lose the ACF file over it
            _log.warning("could not attach %s to trial %d as an artifact: %s", path, trial.number, exc)


def _say(config: TuneConfig, text: str) -> None:
    if config.progress:
        print(text, flush=True)
