"""The worker loop: join a study from any process or machine and evaluate trials until its budget is spent.

A study carries everything a worker needs (see docs/architecture.md, "Study metadata"): the
worker loads it, rebuilds the objective from the metadata, and runs ``study.optimize`` with
``n_jobs`` threads. Many workers can run on one study at once; together they stop at exactly
``budget`` counted trials (the study user attribute ``budget``).

Counting the budget: see :mod:`ciq_optuna.study.budget`.

Leases (:mod:`ciq_optuna.study.leases`). Whatever a worker holds across processes (the
planning lock, a RUNNING trial with its budget slot and its claimed configuration) has a lease
the live worker renews; a worker that dies costs at most one lease period (the trial's
``grace_period``), after which any other worker fails its trial and queues the configuration
again. A worker that is alive but hung keeps renewing, so its trial stays RUNNING: the
evaluation timeout (``run_isolated``) is what ends it. A lost database (server restart or
outage) is retried by every storage call for ``reconnect_timeout`` seconds
(:class:`ciq_optuna.study.storage.ResilientRDBStorage`); the trials in flight are told when the
database is back.

Duplicates. A sampler that never proposes a configuration already in the study (GeneticSampler)
reads the trials, then records its plan; two workers doing that at once could pick the same
configuration. The worker makes that step exclusive across all workers of the study (the
planning lock: a leased PostgreSQL advisory lock, or ``flock`` next to a SQLite file).

Objectives. ``register_objective_factory(kind, factory)`` maps the ``kind`` of the study's
``objective`` user attribute to ``factory(study) -> objective``; kinds not registered are built
by ``ciq_optuna.objectives.factory.objective_from_study(study)``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy
from optuna.trial import FrozenTrial

from ciq_optuna.cli.types import NORMAL, QUIET, positive_float, positive_int, trial_log_level
from ciq_optuna.errors import EXIT_USER_ERROR, CiqError
from ciq_optuna.study.budget import (
    BUDGET_ATTR,
    CANCELLED_ATTR,
    Objective,
    budget_status,
    cancel_left_waiting,
    gated_objective,
    held_reaches,
    one_line,
)
from ciq_optuna.study.leases import (
    MAX_TAKEN_AWAY,
    POLL_INTERVAL_S,
    fail_stale,
    locked_sampler,
    trial_taken_away,
)
from ciq_optuna.study.storage import (
    DEFAULT_RECONNECT_TIMEOUT_S,
    DEFAULT_STORAGE_FILE,
    error_chain,
    is_connection_error,
    redact,
    resolve_storage,
    scrub,
    sqlite_path,
)

ObjectiveFactory = Callable[[optuna.Study], Objective]
SamplerFactory = Callable[[optuna.Study], optuna.samplers.BaseSampler]


_logger = logging.getLogger("ciq_optuna.workers")
_objective_factories: dict[str, ObjectiveFactory] = {}
_sampler_factories: dict[str, SamplerFactory] = {}

_STORAGE_ERRORS: tuple[type[BaseException], ...] = (
    optuna.exceptions.StorageInternalError,
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.InterfaceError,
    sqlalchemy.exc.DisconnectionError,
)


def register_objective_factory(
    kind: str, factory: ObjectiveFactory, *, sampler: SamplerFactory | None = None
) -> None:
    """Build the objective of studies whose ``objective["kind"]`` is ``kind`` with ``factory(study)``.

    ``sampler(study)``, when given, builds the sampler a worker uses on such studies (default:
    ``ciq_optuna.study.metadata.sampler_from_study`` if it exists, else Optuna's default sampler).
    Registering a kind again replaces the factory.
    """
    _objective_factories[kind] = factory
    if sampler is not None:
        _sampler_factories[kind] = sampler
    else:
        _sampler_factories.pop(kind, None)


def objective_kind(study: optuna.Study) -> str | None:
    """The ``kind`` of the study's ``objective`` user attribute, or None."""
    meta = study.user_attrs.get("objective")
    if isinstance(meta, dict):
        kind = meta.get("kind")
        return str(kind) if kind is not None else None
    return None


def build_objective(study: optuna.Study, **options: Any) -> Objective:
    """The objective of ``study``: a registered factory, else ``ciq_optuna.objectives.factory.objective_from_study``.

    ``options`` (``kernel``, ``compiler_path``: where they are on this machine) go to
    ``objective_from_study``. Raises :class:`CiqError` (one line) when the study cannot be
    evaluated here.
    """
    kind = objective_kind(study)
    if kind is not None and kind in _objective_factories:
        return _objective_factories[kind](study)
    try:
        from ciq_optuna.objectives.factory import objective_from_study
    except ImportError:
        raise CiqError(
            f"study {study.study_name!r}: no objective builder for kind {kind!r} in this installation"
        ) from None
    objective = objective_from_study(study, **{k: v for k, v in options.items() if v is not None})
    if ((study.user_attrs.get("ciq_optuna") or {}).get("measure") or {}).get("kind") == "triton-runtime":
        from ciq_optuna.gpu.triton_runtime import runtime_measure

        objective.measure = runtime_measure(objective)
    return objective


def _build_sampler(study: optuna.Study) -> optuna.samplers.BaseSampler | None:
    kind = objective_kind(study)
    if kind is not None and kind in _sampler_factories:
        return _sampler_factories[kind](study)
    try:
        from ciq_optuna.study.metadata import sampler_from_study
    except ImportError:
        return None
    return sampler_from_study(study)


class _StopAtBudget:
    """Stop this worker's optimize loop once earlier and running trials hold the whole budget."""

    def __init__(self, budget: int | None, max_trials: int | None) -> None:
        self.budget = budget
        self.max_trials = max_trials
        self.ran = 0

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        if CANCELLED_ATTR not in trial.user_attrs:
            self.ran += 1
        if self.max_trials is not None and self.ran >= self.max_trials:
            study.stop()
            return
        if self.budget is not None and held_reaches(study, self.budget):
            study.stop()


def _load(storage: optuna.storages.BaseStorage, study_name: str, shown_url: str) -> optuna.Study:
    try:
        study = optuna.load_study(study_name=study_name, storage=storage)
    except KeyError:
        raise CiqError(f"no study named {study_name!r} in {shown_url}") from None
    sampler = _build_sampler(study) or study.sampler
    return optuna.load_study(
        study_name=study_name, storage=storage, sampler=locked_sampler(sampler, storage, study_name)
    )


def run_worker(
    storage_url: str | None,
    study_name: str,
    *,
    n_jobs: int = 1,
    n_trials: int | None = None,
    timeout: float | None = None,
    heartbeat_interval: int | None = None,
    grace_period: int | None = None,
    reconnect_timeout: float = DEFAULT_RECONNECT_TIMEOUT_S,
    default_path: Path = DEFAULT_STORAGE_FILE,
    kernel: Path | None = None,
    compiler_path: str | None = None,
) -> int:
    """Evaluate trials of ``study_name`` until its budget is reached; return how many this worker ran.

    ``n_jobs`` threads evaluate at once; ``n_trials`` caps this worker's own trials and
    ``timeout`` (seconds) its running time. ``heartbeat_interval``/``grace_period`` default to
    :mod:`ciq_optuna.study.storage`'s. ``kernel``/``compiler_path`` say where the study's kernel and
    compiler are on this machine (their hash and version must match the study's). Raises :class:`CiqError` (one line, password redacted) when
    the study cannot be joined.
    """
    if n_jobs < 1:
        raise CiqError(f"--n-jobs must be at least 1, not {n_jobs}")
    hb: dict[str, Any] = {}
    if heartbeat_interval is not None:
        hb["heartbeat_interval"] = heartbeat_interval
    if grace_period is not None:
        hb["grace_period"] = grace_period
    from ciq_optuna.study.storage import storage_url as _chosen_url

    db_file = sqlite_path(_chosen_url(storage_url, default_path=default_path))
    if db_file is not None and not db_file.is_file():
        raise CiqError(f"no study database at {db_file} (a worker joins an existing study)")
    storage = resolve_storage(
        storage_url, default_path=default_path, reconnect_timeout=reconnect_timeout, **hb
    )
    shown = redact(getattr(storage, "url", "") or str(storage_url))
    start = time.monotonic()
    deadline = None if timeout is None else start + timeout
    ran = 0
    lost_since: float | None = None
    taken_away = 0
    study: optuna.Study | None = None
    objective: Objective | None = None
    budget: int | None = None
    while True:
        try:
            if study is None:
                study = _load(storage, study_name, shown)
                budget = _budget_of(study, n_trials, timeout)
                if objective is None:
                    objective = build_objective(study, kernel=kernel, compiler_path=compiler_path)
                    _logger.info("worker joined study %r on %s (budget %s)", study_name, shown, budget)
            assert objective is not None
            if deadline is not None and time.monotonic() >= deadline:
                break
            if n_trials is not None and ran >= n_trials:
                break
            fail_stale(study)
            status = budget_status(study)
            lost_since = None
            if budget is not None and status["done"] >= budget:
                if status["waiting"]:
                    cancel_left_waiting(study)
                break
            free = (budget - status["done"] - status["running"]) if budget is not None else n_jobs
            if n_trials is not None:
                free = min(free, n_trials - ran)
            if free <= 0:
                time.sleep(POLL_INTERVAL_S)
                continue
            stop = _StopAtBudget(budget, None if n_trials is None else n_trials - ran)
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.001)
            try:
                study.optimize(
                    gated_objective(study, objective, budget),
                    n_trials=free if budget is not None else None,
                    timeout=remaining,
                    n_jobs=min(n_jobs, free),
                    catch=(Exception,),
                    callbacks=[stop],
                )
            finally:
                ran += stop.ran
        except Exception as exc:
            if trial_taken_away(exc) and taken_away < MAX_TAKEN_AWAY:
                taken_away += 1
                _logger.warning("a trial was finished by another worker while this one ran it; continuing")
                continue
            if not is_storage_error(exc):
                raise
            now = time.monotonic()
            lost_since = lost_since or now
            reason = scrub(storage_reason(exc), storage_url)
            # a lost connection was already retried for reconnect_timeout by the storage itself
            retried = getattr(storage, "reconnect_timeout", 0) > 0 and is_connection_error(exc)
            if retried or now - lost_since > reconnect_timeout:
                raise CiqError(f"lost the database {shown} for {reconnect_timeout:.0f} s: {reason}") from None
            _logger.warning("database %s unavailable (%s); retrying", shown, reason)
            study = None
            time.sleep(POLL_INTERVAL_S)
    return ran


def _storage_cause(exc: BaseException) -> BaseException:
    """The first database error in ``exc``'s chain (``exc`` itself if none)."""
    return next((e for e in error_chain(exc) if isinstance(e, _STORAGE_ERRORS)), exc)


def storage_reason(exc: BaseException) -> str:
    """One line from the database driver explaining ``exc`` (e.g. "connection refused")."""
    root = exc
    for current in error_chain(exc):
        if isinstance(current, sqlalchemy.exc.SQLAlchemyError):
            root = current
            break
        if isinstance(current, _STORAGE_ERRORS):
            root = current
    orig = getattr(root, "orig", None) or root
    return one_line(orig)


def is_storage_error(exc: BaseException) -> bool:
    """Whether ``exc`` comes from a lost database connection (also when Optuna re-raised it as
    another error, e.g. the ``UnboundLocalError`` of a failed ``tell`` in Optuna 5.1)."""
    return isinstance(_storage_cause(exc), _STORAGE_ERRORS)


def _quiet_storage_errors_in_threads() -> None:
    """One warning line, not a traceback, when a heartbeat thread loses the database."""
    previous = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_value is not None and is_storage_error(args.exc_value):
            _logger.warning("heartbeat lost the database (%s)", storage_reason(args.exc_value))
            return
        previous(args)

    threading.excepthook = hook


def _budget_of(study: optuna.Study, n_trials: int | None, timeout: float | None) -> int | None:
    raw = study.user_attrs.get(BUDGET_ATTR)
    if raw is None:
        if n_trials is None and timeout is None:
            raise CiqError(f"study {study.study_name!r} has no budget; give --n-trials or --timeout")
        return None
    try:
        budget = int(raw)
    except (TypeError, ValueError):
        raise CiqError(f"study {study.study_name!r}: budget {raw!r} is not an integer") from None
    if budget < 0:
        raise CiqError(f"study {study.study_name!r}: budget {budget} is negative")
    return budget


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``ciq-optuna worker`` to ``parser``."""
    parser.add_argument(
        "--storage",
        default=None,
        help="storage URL (default: $CIQ_OPTUNA_STORAGE, else ./ciq-optuna.db); prefer the "
        "environment variable for URLs with a password",
    )
    parser.add_argument("--study", required=True, help="name of the study to join")
    parser.add_argument("--n-jobs", type=positive_int, default=1, help="trials evaluated at once (threads)")
    parser.add_argument(
        "--n-trials", type=positive_int, default=None, help="stop after this many trials of this worker"
    )
    parser.add_argument("--timeout", type=positive_float, default=None, help="stop after this many seconds")
    parser.add_argument(
        "--kernel",
        default=None,
        metavar="PATH",
        help="the study's kernel on this machine, if not at the path recorded in the study (same content)",
    )
    parser.add_argument(
        "--compiler-path",
        default=None,
        metavar="PATH",
        help="the ptxas or nvcc executable on this machine (same version as the study's)",
    )
    parser.add_argument(
        "--heartbeat",
        type=positive_int,
        default=None,
        metavar="SECONDS",
        help="heartbeat interval; a trial without heartbeat for 3 intervals is failed and retried (default 10)",
    )


def run_worker_command(args: argparse.Namespace) -> int:
    """Run ``ciq-optuna worker``; returns the exit status (0, or 2 after a one-line error). Ctrl-C
    and SIGTERM reach the CLI's handler (exit 130 or 143) after the in-flight trials are failed."""
    _quiet_storage_errors_in_threads()
    verbosity = getattr(args, "verbosity", NORMAL)
    # progress notes ("waiting for ...") by default; errors only with -q; debug with -v
    level = {QUIET: logging.ERROR, NORMAL: logging.INFO}.get(verbosity, logging.DEBUG)
    logging.basicConfig(level=level, format="ciq-optuna worker: %(message)s")
    logging.getLogger().setLevel(level)
    optuna.logging.set_verbosity(trial_log_level(verbosity))
    try:
        ran = run_worker(
            args.storage,
            args.study,
            n_jobs=args.n_jobs,
            n_trials=args.n_trials,
            timeout=args.timeout,
            heartbeat_interval=getattr(args, "heartbeat", None),
            kernel=Path(args.kernel) if getattr(args, "kernel", None) else None,
            compiler_path=getattr(args, "compiler_path", None),
        )
    except CiqError as exc:
        print(f"ciq-optuna worker: error: {scrub(str(exc), args.storage)}", file=sys.stderr, flush=True)
        return EXIT_USER_ERROR
    print(f"ciq-optuna worker: {ran} trials evaluated by this worker", flush=True)
    return 0
