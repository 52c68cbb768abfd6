"""CompileIQ's ``Search``, on an Optuna study.

``from ciq_optuna.compileiq.ciq import Search`` replaces ``from compileiq.ciq import Search``. Each
candidate is an Optuna trial (``study.ask()``/``study.tell()``) proposed by ciq-optuna's genetic
sampler (NSGA-II for several objectives); generation ``g`` is the ``g``-th block of
``pool_size`` trials. What the objective received, its raw score and its normalised score are
kept in the trial's user attributes, so the results of a study in a storage can be rebuilt: pass
``storage=`` and ``study_name=`` to resume a search or to run it from several processes.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState
from pydantic import BaseModel, ConfigDict
from tqdm.auto import tqdm

from ciq_optuna.compileiq._compat.scores import ParamArg, Score
from ciq_optuna.compileiq._compat.space import SpacePlan
from ciq_optuna.compileiq._compat.trackers import TrialCallback, tracker_callbacks
from ciq_optuna.compileiq._compat.workers import ManualWorker, Worker
from ciq_optuna.compileiq.results import SearchResult
from ciq_optuna.compileiq.types import EngineConfig, ProblemType, SearchConfiguration, WorkerTypes

__all__ = ["BackendCandidate", "Search"]

_ATTR = "ciq."  # prefix of the user attributes written here
_RESULT = "ciq.result"  # trial attribute: generation, params, score, norm_score, metadata
_FIRST_GEN_FAILED = "All objective functions failed in the first generation"
_OPTIONS_FILE_HINT = (
    "a compiler candidate here is an options file, not an NVIDIA ACF: apply the file written by "
    "save_compiler_config with `ptxas --options-file FILE` (nvcc: `-Xptxas --options-file=FILE`, "
    "or `--options-file FILE` for an nvcc space) instead of `--apply-controls FILE`, which reads "
    "only NVIDIA's encrypted ACFs (ptxas 13.0 refuses the file: 'not in expected format'); "
    "see docs/compileiq.md"
)


@dataclass(frozen=True)
class BackendCandidate:
    """A candidate handed out by :meth:`Search.ask`: its id (the trial number) and params."""

    param_id: int
    params: ParamArg


def _config(search_config: Any) -> SearchConfiguration:
    if isinstance(search_config, SearchConfiguration):
        return search_config
    if isinstance(search_config, dict):
        return SearchConfiguration(**search_config)
    if isinstance(search_config, (str, Path)):
        return SearchConfiguration.from_legacy(str(search_config))
    raise ValueError(
        f"search_config must be a SearchConfiguration, a dict or a legacy .config path, not {type(search_config).__name__}"
    )


class _WorkerChoice(BaseModel):
    """Validates ``Search(worker_type=...)`` as CompileIQ's pydantic model does."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    worker_type: WorkerTypes | type[Worker]


def _worker_class(worker_type: Any) -> type[Worker]:
    """The worker class; an unknown name or type raises pydantic's ValidationError (as CompileIQ)."""
    if isinstance(worker_type, str) and not isinstance(worker_type, WorkerTypes):
        worker_type = worker_type.strip().lower()
    chosen = _WorkerChoice(worker_type=worker_type).worker_type
    return chosen.worker_type() if isinstance(chosen, WorkerTypes) else chosen


def _sampler_options(engine: Any, config: SearchConfiguration, seed: int | None) -> dict[str, Any]:
    """The genetic sampler's knobs from the config and CompileIQ 1.1's engine options."""
    options: dict[str, Any] = {}
    if isinstance(engine, EngineConfig):
        name, options = engine.name, dict(engine.options)
    else:
        name = "amber" if engine is None else str(engine)
    if name.strip().lower() not in ("amber", "default", "genetic"):
        raise ValueError(f"unknown engine {name!r}: ciq-optuna has one engine, its genetic sampler ('amber')")
    unknown = set(options) - {"seed", "survivor_count", "mutation_probability"}
    if unknown:
        raise ValueError(
            f"engine options {sorted(unknown)} are not supported (supported: seed, survivor_count, mutation_probability)"
        )
    return {
        "seed": options.get("seed", seed),
        "survivors": options.get("survivor_count", config.survivors),
        "mutate_rate": options.get("mutation_probability", config.mutate_rate),
    }


def _make_sampler(config: SearchConfiguration, knobs: dict[str, Any]) -> optuna.samplers.BaseSampler:
    """GeneticSampler for one objective, NSGA-II (population = pool_size) for several. The first
    generation is random, as CompileIQ draws it (``design_start=0``: no QMC design)."""
    from ciq_optuna.samplers import GeneticSampler, make_sampler

    if config.num_objectives == 1:
        return GeneticSampler(
            pool_size=config.pool_size,
            survivors=knobs["survivors"],
            mutate_rate=knobs["mutate_rate"],
            seed=knobs["seed"],
            design_start=0.0,
        )
    return make_sampler(config.num_objectives, seed=knobs["seed"], population_size=config.pool_size, design_start=0.0)


# what SQLite and PostgreSQL say when two processes create the schema of a new database at once
_SCHEMA_RACE = ("already exists", "duplicate key", "unique constraint")


def _open_storage(storage: Any) -> Any:
    if storage is None or isinstance(storage, optuna.storages.BaseStorage):
        return storage
    from ciq_optuna.study.storage import StorageError, resolve_storage

    for attempt in range(5):
        try:
            return resolve_storage(
                str(storage), default_path=Path.cwd() / "ciq-optuna.db", heartbeat_interval=None
            )
        except StorageError as exc:
            # processes that start together race to create the schema of a new database
            if not any(m in str(exc).lower() for m in _SCHEMA_RACE) or attempt == 4:
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


class Search:
    """A CompileIQ search (same arguments and methods), run on an Optuna study.

    Extra arguments: ``storage`` (an Optuna storage or URL such as ``sqlite:///tune.db``; None:
    in memory), ``study_name`` (reuse it to resume or to share the search between processes),
    ``seed`` (sampler seed, for reproducible runs), ``callbacks`` (``fn(study, frozen_trial)``
    after each candidate is told, as in Optuna's ``optimize``; an ``MLflowTrackerConfig`` adds
    optuna-integration's ``MLflowCallback``).
    """

    def __init__(
        self,
        objective_function: Callable[[Any], Any],
        search_space: Any,
        search_config: SearchConfiguration | dict | str | Path,
        worker_type: WorkerTypes | str | type[Worker] = WorkerTypes.DEFAULT,
        tracker_config: Any = None,
        debug: bool = False,
        cache_folder: str | Path | None = None,
        dump_results: str | Path | None = None,
        disable_progress_bar: bool = False,
        exit_on_failure: bool = True,
        engine: str | EngineConfig | None = None,
        *,
        storage: str | optuna.storages.BaseStorage | None = None,
        study_name: str | None = None,
        seed: int | None = None,
        callbacks: Sequence[TrialCallback] | None = None,
    ) -> None:
        if not callable(objective_function):
            raise ValueError("objective_function must be callable")
        self.objective_function = objective_function
        self.search_config = _config(search_config)
        self._callbacks = [
            *(callbacks or []),
            *tracker_callbacks(tracker_config, self.search_config.num_objectives),
        ]
        self._plan = SpacePlan(search_space)
        self.search_space = search_space
        self.search_space_resolution_metadata = self._plan.metadata or None
        self.worker_type = _worker_class(worker_type)
        self.debug = debug
        self.dump_results = Path(dump_results) if dump_results is not None else None
        self.disable_progress_bar = disable_progress_bar
        self.exit_on_failure = exit_on_failure
        self.run_id = None
        self.current_generation = 0
        self._seed = seed
        self._knobs = _sampler_options(engine, self.search_config, seed)
        self._rng = random.Random(seed)
        base = Path(cache_folder) if cache_folder is not None else Path(tempfile.gettempdir()) / "ciq-optuna"
        base.mkdir(parents=True, exist_ok=True)
        self.cache_folder = Path(tempfile.mkdtemp(prefix=time.strftime("%Y-%m-%d-%H_%M_%S-"), dir=base))
        self._worker: Worker | None = None
        self._pending: dict[int, tuple[optuna.Trial, ParamArg]] = {}
        self._held: tuple[optuna.Trial, ParamArg] | None = None
        self._started = False
        self._warned_no_op = False
        self.study = self._open_study(storage, study_name)
        self.result = self._results_from_study()

    # -- study ------------------------------------------------------------------------------
    def _open_study(self, storage: Any, study_name: str | None) -> optuna.Study:
        cfg = self.search_config
        direction = "minimize" if cfg.problem_type == ProblemType.MIN else "maximize"
        verbosity = optuna.logging.get_verbosity()
        optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "A new study created" line
        try:
            study = optuna.create_study(
                storage=_open_storage(storage),
                study_name=study_name,
                sampler=_make_sampler(cfg, self._knobs),
                directions=[direction] * cfg.num_objectives,
                load_if_exists=True,
            )
        finally:
            optuna.logging.set_verbosity(verbosity)
        mine = {
            "num_objectives": cfg.num_objectives,
            "problem_type": str(cfg.problem_type),
            "pool_size": cfg.pool_size,
            "normalize": cfg.normalize,
        }
        stored = study.user_attrs.get(_ATTR + "search")
        if stored is None:
            study.set_user_attr(_ATTR + "search", mine)
            study.set_user_attr(_ATTR + "config", cfg.to_json_dict())
            study.set_user_attr(_ATTR + "space", self._plan.describe())
        elif stored != mine:
            diff = ", ".join(
                f"{k}: stored {stored.get(k)!r}, given {v!r}" for k, v in mine.items() if stored.get(k) != v
            )
            raise ValueError(f"study {study.study_name!r} was created with other settings ({diff})")
        return study

    @property
    def study_name(self) -> str:
        """The Optuna study's name (pass it with the same storage to resume)."""
        return self.study.study_name

    def _results_from_study(self) -> SearchResult:
        """Rows of every finished candidate and baseline in the study, in trial order."""
        cfg = self.search_config
        result = SearchResult(
            num_scores=cfg.num_objectives, problem_type=cfg.problem_type, normalize=cfg.normalize
        )
        baselines = sorted(
            (v for k, v in self.study.user_attrs.items() if k.startswith(_ATTR + "baseline.")),
            key=lambda b: (b["generation"], b["time"]),
        )
        trials = [t for t in self.study.get_trials(deepcopy=False) if _RESULT in t.user_attrs]
        for t in sorted(trials, key=lambda t: t.number):
            gen = t.user_attrs[_RESULT]["generation"]
            while baselines and baselines[0]["generation"] <= gen:
                b = baselines.pop(0)
                result.add_result(self._baseline_score(b), b["generation"])
            result.add_result(self._stored_score(t), gen)
        for b in baselines:
            result.add_result(self._baseline_score(b), b["generation"])
        return result

    def _stored_score(self, t: optuna.trial.FrozenTrial) -> Score:
        a = t.user_attrs[_RESULT]
        n = self.search_config.num_objectives
        unpack = (lambda v: v[0]) if n == 1 else tuple
        norm = a.get("norm_score")
        return Score(
            score=unpack(a["score"]),
            norm_score=None if norm is None else unpack(norm),
            params=a.get("params"),
            metadata=a.get("metadata", ""),
            param_id=t.number,
            num_objectives=n,
        )

    def _baseline_score(self, b: dict[str, Any]) -> Score:
        n = self.search_config.num_objectives
        unpack = (lambda v: v[0]) if n == 1 else tuple
        return Score(
            score=unpack(b["score"]),
            norm_score=1.0 if n == 1 else (1.0,) * n,
            params={},
            metadata=b.get("metadata", ""),
            param_id="baseline",
            num_objectives=n,
            is_baseline=True,
        )

    # -- asking -----------------------------------------------------------------------------
    def _ask_one(self) -> tuple[optuna.Trial, ParamArg] | None:
        """One new trial and its candidate; None when the sampler has no unseen candidate left."""
        pool = int(self.search_config.pool_size)
        if len(self.study.get_trials(deepcopy=False)) < pool:
            fixed = self._plan.initial(self._rng, self.search_config.init_with_true_random_threshold)
            if fixed:
                self.study.enqueue_trial(fixed, skip_if_exists=False)
        trial = self.study.ask()
        try:
            return trial, self._plan.suggest(trial)
        except optuna.TrialPruned:
            self.study.tell(trial, state=TrialState.PRUNED)
            return None

    def _ask_generation(self, total: int) -> tuple[list[tuple[optuna.Trial, ParamArg]], bool]:
        """The candidates of the next generation (block of pool_size trial numbers) and whether
        the space ran out."""
        pool = int(self.search_config.pool_size)
        batch: list[tuple[optuna.Trial, ParamArg]] = []
        gen: int | None = None
        if self._held is not None:
            batch.append(self._held)
            gen = self._held[0].number // pool
            self._held = None
        while True:
            n = len(self.study.get_trials(deepcopy=False))
            if n >= total or (gen is not None and n // pool != gen):
                return batch, False
            got = self._ask_one()
            if got is None:
                return batch, True
            trial = got[0]
            if trial.number >= total:  # another process took the last numbers
                self.study.tell(trial, state=TrialState.FAIL)
                return batch, False
            if gen is None:
                gen = trial.number // pool
            elif trial.number // pool != gen:
                self._held = got
                return batch, False
            batch.append(got)

    # -- evaluating -------------------------------------------------------------------------
    def _get_worker(self) -> Worker:
        if self._worker is None:
            self._worker = self.worker_type.create(self.cache_folder, self.search_config.normalize, None)
        return self._worker

    def _evaluate(
        self,
        params: list[ParamArg],
        ids: list[int],
        num_workers: int | None,
        task_timeout: float | None,
        kwargs: dict,
    ) -> tuple[list[Score], Score | None]:
        if num_workers is not None and num_workers < 1:
            raise ValueError(f"num_workers must be at least 1, not {num_workers}")
        worker = self._get_worker()
        if isinstance(worker, ManualWorker):
            raise RuntimeError("the manual worker evaluates nothing: use ask() and tell()")
        if num_workers not in (None, 1) and not worker.respects_num_workers:
            warnings.warn(f"num_workers is not supported by {type(worker).__name__}", stacklevel=3)
        if task_timeout is not None and not worker.supports_timeout:
            warnings.warn(f"task_timeout is not supported by {type(worker).__name__}", stacklevel=3)
        scores = worker.run(
            function=self.objective_function,
            params_pool=params,
            params_ids=ids,
            num_function_returns=self.search_config.num_objectives,
            num_workers=num_workers or 1,
            task_timeout=task_timeout,
            **kwargs,
        )
        baseline = next((s for s in scores if s.is_baseline), None)
        by_id = {s.param_id: s for s in scores if not s.is_baseline}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise RuntimeError(f"{type(worker).__name__} returned no score for candidates {missing}")
        return [by_id[i] for i in ids], baseline

    def _record_baseline(self, baseline: Score, gen: int) -> None:
        values = [baseline.score] if self.search_config.num_objectives == 1 else list(baseline.score)
        key = f"{_ATTR}baseline.{uuid.uuid4().hex[:12]}"
        self.study.set_user_attr(
            key, {"score": values, "metadata": baseline.metadata, "generation": gen, "time": time.time()}
        )
        self.result.add_result(baseline, gen, self.search_config.normalize)

    def _tell(self, trial: optuna.Trial, score: Score) -> None:
        """Store the candidate's scores in its trial and report it to the sampler."""
        cfg = self.search_config
        gen = trial.number // int(cfg.pool_size)
        as_list = (lambda v: [v]) if cfg.num_objectives == 1 else list
        record = {
            "generation": gen,
            "params": _jsonable(score.params),
            "score": as_list(score.score),
            "norm_score": None if score.norm_score is None else as_list(score.norm_score),
            "metadata": score.metadata,
        }
        trial.set_user_attr(_RESULT, record)
        flags = self._plan.flags(score.params) if isinstance(score.params, str) else None
        if flags is not None:
            trial.set_user_attr("flags", flags)
        if score.failed:
            trial.set_user_attr("error", score.error or "the objective returned an invalid score ('*')")
            frozen = self.study.tell(trial, state=TrialState.FAIL)
        else:
            frozen = self.study.tell(trial, [float(v) for v in score.values(cfg.normalize)])
        self.result.add_result(score, gen, cfg.normalize)
        for callback in self._callbacks:
            callback(self.study, frozen)

    def _check_first_generation(self, scores: Sequence[Score]) -> None:
        if self.exit_on_failure and scores and all(s.failed for s in scores):
            first = next((s.error for s in scores if s.error), None)
            why = f" (first error: {first})" if first else ""
            hint = f"; {_OPTIONS_FILE_HINT}" if self._plan.has_compiler else ""
            raise RuntimeError(f"{_FIRST_GEN_FAILED}: every candidate scored '*'{why}{hint}")

    def _warn_if_nothing_changed(self) -> None:
        """Warn once when distinct compiler candidates all scored the same (or all failed):
        the candidates most likely never reached the compiler (the silent no-op)."""
        if self._warned_no_op or not self._plan.has_compiler:
            return
        df = self.result.get_results()
        rows = df[df["params"].map(lambda p: p != {})]
        distinct = rows["params"].map(lambda p: json.dumps(p, sort_keys=True, default=str)).nunique()
        scores = {tuple(str(v) for v in r) for r in rows[self.result.score_columns].itertuples(index=False)}
        if distinct < 2 or len(scores) != 1:
            return
        self._warned_no_op = True
        (same,) = scores
        what = "failed ('*')" if "*" in same else f"scored the same ({', '.join(same)})"
        warnings.warn(
            f"all {len(rows)} candidates ({distinct} different compiler configurations) {what}: "
            f"the configurations probably never reached the compiler, so nothing was tuned; "
            f"{_OPTIONS_FILE_HINT}",
            RuntimeWarning,
            stacklevel=3,
        )

    # -- public API -------------------------------------------------------------------------
    def start(
        self, num_workers: int | None = None, task_timeout: float | None = None, **worker_kwargs: Any
    ) -> SearchResult:
        """Run the search; returns :attr:`result` (every candidate of the study so far).

        The first call runs until the study holds ``generations`` generations of ``pool_size``
        candidates: a study that already holds some (``storage``/``study_name`` of an earlier
        or concurrent run) is continued, not restarted. Each later call on the same Search runs
        ``generations`` more generations.
        """
        cfg = self.search_config
        pool, gens = int(cfg.pool_size), int(cfg.generations)
        existing = len(self.study.get_trials(deepcopy=False))
        first = -(-existing // pool) if self._started else 0
        self._started = True
        bar = tqdm(
            total=gens,
            ascii="░▒█",
            colour="green",
            desc="🧬 Generation",
            bar_format="{desc} {n}/{total}|{bar}| [{elapsed} · {remaining}]{postfix}",
            disable=self.disable_progress_bar,
        )
        bar.update(min(max(0, existing // pool - first), gens))
        try:
            while True:
                batch, exhausted = self._ask_generation((first + gens) * pool)
                if batch:
                    self._run_batch(batch, num_workers, task_timeout, worker_kwargs)
                    gen = batch[0][0].number // pool
                    self.current_generation = gen
                    bar.update(max(0, min(gen + 1 - first, gens) - bar.n))
                    self._show_best(bar)
                if exhausted:
                    warnings.warn(
                        "the search space is exhausted: every distinct candidate was evaluated", stacklevel=2
                    )
                    break
                if not batch:
                    break
        finally:
            bar.close()
        self._warn_if_nothing_changed()
        return self.result

    def _run_batch(
        self, batch: list, num_workers: int | None, task_timeout: float | None, kwargs: dict
    ) -> None:
        pool = int(self.search_config.pool_size)
        ids = [t.number for t, _ in batch]
        for t, _ in batch:
            self._pending[t.number] = (t, _)
        try:
            scores, baseline = self._evaluate([p for _, p in batch], ids, num_workers, task_timeout, kwargs)
        except BaseException as exc:
            for t, _ in batch:
                self._pending.pop(t.number, None)
                t.set_user_attr("error", f"not evaluated: the batch was interrupted ({type(exc).__name__})")
                self.study.tell(t, state=TrialState.FAIL)
            raise
        gen = ids[0] // pool
        if baseline is not None:
            self._record_baseline(baseline, gen)
        for (trial, _), score in zip(batch, scores, strict=True):
            self._pending.pop(trial.number, None)
            self._tell(trial, score)
        if self.dump_results is not None:
            self.result.save(self.dump_results)
        if gen == 0:
            self._check_first_generation(scores)

    def _show_best(self, bar: tqdm) -> None:
        if self.search_config.num_objectives != 1:
            return
        try:
            best = self.result.get_best_result()
        except ValueError:
            return
        col = "norm_score_1" if self.search_config.normalize else "score_1"
        bar.set_postfix_str(f"🏆 best_score={float(best[col]):.4f} at_gen={best['generation']}")

    def sample(self, num_samples: int = 1) -> list[ParamArg]:
        """``num_samples`` candidates of a fresh first generation, not evaluated."""
        if num_samples < 1:
            raise ValueError(f"num_samples must be at least 1, not {num_samples}")
        cfg = self.search_config
        study = optuna.create_study(
            sampler=_make_sampler(cfg, self._knobs), directions=["minimize"] * cfg.num_objectives
        )
        rng = random.Random(self._seed)
        out: list[ParamArg] = []
        while len(out) < num_samples:
            fixed = self._plan.initial(rng, cfg.init_with_true_random_threshold)
            if fixed:
                study.enqueue_trial(fixed, skip_if_exists=False)
            trial = study.ask()
            try:
                out.append(self._plan.suggest(trial))
            except optuna.TrialPruned:
                break
            study.tell(trial, state=TrialState.FAIL)
        return out

    # -- CompileIQ 1.1: ask / evaluate / tell -----------------------------------------------
    def ask(self, num_samples: int | None = None) -> list[BackendCandidate]:
        """Issue ``num_samples`` (default ``pool_size``) new candidates; report them with :meth:`tell`."""
        n = int(self.search_config.pool_size) if num_samples is None else num_samples
        if n < 1:
            raise ValueError(f"num_samples must be at least 1, not {n}")
        out: list[BackendCandidate] = []
        for _ in range(n):
            got = self._ask_one()
            if got is None:
                if not out:
                    raise RuntimeError("the search space is exhausted: every distinct candidate was issued")
                warnings.warn("the search space is exhausted: fewer candidates than asked", stacklevel=2)
                break
            trial, params = got
            self._pending[trial.number] = (trial, params)
            out.append(BackendCandidate(trial.number, params))
        return out

    @property
    def pending_candidates(self) -> list[BackendCandidate]:
        """Candidates issued by :meth:`ask` and not yet told."""
        return [BackendCandidate(i, p) for i, (_, p) in sorted(self._pending.items())]

    def _check_pending(self, ids: Sequence[Any], params: Sequence[Any] | None) -> None:
        if not ids:
            raise ValueError("no candidates given")
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate candidate ids")
        for i, pid in enumerate(ids):
            if pid not in self._pending:
                raise ValueError(f"candidate {pid!r} is not pending (unknown or already told)")
            if (
                params is not None
                and params[i] is not None
                and _jsonable(params[i]) != _jsonable(self._pending[pid][1])
            ):
                raise ValueError(f"candidate {pid!r}: params differ from the ones issued")

    def evaluate(
        self,
        candidates: Sequence[BackendCandidate],
        num_workers: int | None = None,
        task_timeout: float | None = None,
        **worker_kwargs: Any,
    ) -> list[Score]:
        """Run the worker on pending candidates; the scores are returned, not told."""
        ids = [c.param_id for c in candidates]
        self._check_pending(ids, [c.params for c in candidates])
        scores, baseline = self._evaluate(
            [c.params for c in candidates], ids, num_workers, task_timeout, worker_kwargs
        )
        if baseline is not None:
            self._record_baseline(baseline, min(ids) // int(self.search_config.pool_size))
        return scores

    def tell(self, scores: Sequence[Score]) -> None:
        """Report scores of pending candidates (any order, any subset)."""
        cfg = self.search_config
        scores = [s for s in scores if not s.is_baseline]
        self._check_pending([s.param_id for s in scores], [s.params for s in scores])
        for s in scores:
            if s.num_objectives != cfg.num_objectives:
                raise ValueError(
                    f"candidate {s.param_id}: {s.num_objectives} objectives, expected {cfg.num_objectives}"
                )
            if cfg.normalize and s.norm_score is None:
                raise ValueError(f"candidate {s.param_id}: normalize=True needs a norm_score")
        told_first = []
        for s in scores:
            trial, params = self._pending.pop(s.param_id)
            if s.params is None:
                s = s.model_copy(update={"params": params})
            self._tell(trial, s)
            if trial.number < int(cfg.pool_size):
                told_first.append(s)
        if self.dump_results is not None:
            self.result.save(self.dump_results)
        if told_first and not any(i < int(cfg.pool_size) for i in self._pending):
            first = [
                self._stored_score(t)
                for t in self.study.get_trials(deepcopy=False)
                if t.number < int(cfg.pool_size) and _RESULT in t.user_attrs
            ]
            self._check_first_generation(first)

    @property
    def best_result(self) -> dict[str, Any] | list[dict[str, Any]]:
        """``result.get_best_result()``."""
        return self.result.get_best_result()

    # -- resources --------------------------------------------------------------------------
    def close(self) -> None:
        """Delete the run's cache directory (kept when CIQ_KEEP_CACHE is 1/yes/true)."""
        folder = getattr(self, "cache_folder", None)
        if folder is not None and os.environ.get("CIQ_KEEP_CACHE", "").lower() not in ("1", "yes", "true"):
            shutil.rmtree(folder, ignore_errors=True)

    def __enter__(self) -> Search:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
