"""The trial budget of a study, shared by every process that runs it: counting and the gate.

Counting the budget. A trial *counts* when it is COMPLETE, PRUNED, or FAIL with a user attribute
``error`` (the evaluation itself failed: a compiler crash, a timeout). A FAIL trial without
``error`` was left behind by a dead worker; heartbeats fail it and its configuration is queued
again as a WAITING trial, so it must not count. Before evaluating, each trial checks the trials
numbered before it (numbers are assigned under a row lock, so they order the trials): if those
already hold the whole budget (counted, RUNNING or WAITING), the trial is *cancelled*
instead of evaluated: PRUNED with user attribute ``cancelled``, never counted, no parameters
(it happens when two workers start a trial for the last slot at the same moment). Between trials a
worker that finds every remaining slot held by RUNNING trials of other workers waits: if one of
them goes stale, its retry needs someone to run it. ``optuna.study.MaxTrialsCallback`` alone is
not enough: it ignores the trials other workers are running (overshoot by up to one trial per
thread) and counts the stale failures.

Both the main job (:mod:`ciq_optuna.tune`) and the worker loop (:mod:`ciq_optuna.workers`) run
their objectives through :func:`gated_objective`, so they count alike.
"""

from __future__ import annotations

import bisect
import contextlib
import threading
import weakref
from collections.abc import Callable, Sequence

import optuna
from optuna.trial import FrozenTrial, TrialState

from ciq_optuna.study._optuna import BatchedStorage, storage_of, study_id_of, trials_of_this_trial

Objective = Callable[[optuna.trial.Trial], "float | Sequence[float]"]

#: User attribute of a trial whose evaluation failed (one line); such a FAIL counts.
ERROR_ATTR = "error"
#: User attribute of a trial started after the budget was already held by earlier trials.
CANCELLED_ATTR = "cancelled"
#: Study user attribute: total number of counted trials wanted, over all workers.
BUDGET_ATTR = "budget"


def claims_slot(trial: FrozenTrial) -> bool:
    """Whether ``trial`` holds one unit of the budget (finished and counted, or still to come)."""
    if CANCELLED_ATTR in trial.user_attrs:
        return False
    if trial.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING):
        return True
    return trial.state == TrialState.FAIL and ERROR_ATTR in trial.user_attrs


def counts(trial: FrozenTrial) -> bool:
    """Whether a finished ``trial`` counts toward the budget."""
    if CANCELLED_ATTR in trial.user_attrs:
        return False
    if trial.state in (TrialState.COMPLETE, TrialState.PRUNED):
        return True
    return trial.state == TrialState.FAIL and ERROR_ATTR in trial.user_attrs


_STATUS_KEYS = ("done", "running", "waiting", "stale", "cancelled")


def _status_of(trial: FrozenTrial) -> str | None:
    if CANCELLED_ATTR in trial.user_attrs:
        return "cancelled"
    if counts(trial):
        return "done"
    if trial.state == TrialState.RUNNING:
        return "running"
    if trial.state == TrialState.WAITING:
        return "waiting"
    if trial.state == TrialState.FAIL:
        return "stale"
    return None


class _StatusCounter:
    """:func:`budget_status` of one study object, amortised O(1) per trial: a finished trial
    never changes (Optuna refuses to update it), so it is looked at once; only unfinished ones
    are looked at again."""

    def __init__(self) -> None:
        self._finished = dict.fromkeys(_STATUS_KEYS, 0)
        self._unfinished: list[int] = []
        self._seen = 0
        self._lock = threading.Lock()

    def status(self, trials: list[FrozenTrial]) -> dict[str, int]:
        with self._lock:
            if len(trials) < self._seen or (trials and trials[-1].number != len(trials) - 1):
                # not the list this counter has seen (another study), or numbers not all read yet
                self._finished, self._unfinished, self._seen = dict.fromkeys(_STATUS_KEYS, 0), [], 0
                if trials and trials[-1].number != len(trials) - 1:
                    return _scan(trials)
            unfinished = []
            for i in [*self._unfinished, *range(self._seen, len(trials))]:
                t = trials[i]
                if not t.state.is_finished():
                    unfinished.append(i)
                elif (key := _status_of(t)) is not None:
                    self._finished[key] += 1
            self._unfinished, self._seen = unfinished, len(trials)
            status = dict(self._finished)
            for i in unfinished:
                if (key := _status_of(trials[i])) is not None:
                    status[key] += 1
            return status


def _scan(trials: list[FrozenTrial]) -> dict[str, int]:
    status = dict.fromkeys(_STATUS_KEYS, 0)
    for t in trials:
        key = _status_of(t)
        if key is not None:
            status[key] += 1
    return status


_COUNTERS: weakref.WeakKeyDictionary[optuna.Study, _StatusCounter] = weakref.WeakKeyDictionary()
_COUNTERS_LOCK = threading.Lock()


def budget_status(study: optuna.Study) -> dict[str, int]:
    """Counts over the whole study: ``done`` (counted), ``running``, ``waiting``, ``stale``
    (FAIL left by a dead worker) and ``cancelled``."""
    return _counter_of(study).status(study.get_trials(deepcopy=False))


def _counter_of(study: optuna.Study) -> _StatusCounter:
    with _COUNTERS_LOCK:
        counter = _COUNTERS.get(study)
        if counter is None:
            counter = _COUNTERS[study] = _StatusCounter()
    return counter


def done_reaches(study: optuna.Study, target: int) -> bool:
    """``budget_status(study)["done"] >= target``, reading the study only when the trials that
    changed since its last read could bring the count of the trials as read up to ``target``."""
    return _reaches(study, target, ("done",))


def held_reaches(study: optuna.Study, target: int) -> bool:
    """Whether at least ``target`` trials hold a slot (:func:`claims_slot`: counted, RUNNING or
    WAITING), reading the study only when the trials changed since its last read could reach it."""
    return _reaches(study, target, ("done", "running", "waiting"))


def _reaches(study: optuna.Study, target: int, keys: tuple[str, ...]) -> bool:
    storage = storage_of(study)
    if isinstance(storage, BatchedStorage):
        study_id = study_id_of(study)
        bound = storage.unread_bound(study_id)
        if bound is not None:
            known = _counter_of(study).status(storage.trials_as_read(study_id))
            if sum(known[k] for k in keys) + bound < target:
                return False
    status = budget_status(study)
    return sum(status[k] for k in keys) >= target


def cancel_left_waiting(study: optuna.Study) -> int:
    """Cancel the WAITING trials still queued once the study holds its whole budget; returns how many.

    Optuna fails a dead worker's trial and then queues its retry: between the two steps another
    worker may take the freed slot, and the retry is left over when the budget is met. Run later,
    the gate would cancel it (the trials numbered before it hold the budget); cancelling it now
    leaves no queued trial behind. Each is taken with ``study.ask`` (which takes a WAITING trial
    first, atomically) and told PRUNED with :data:`CANCELLED_ATTR`, as the gate does.
    """
    cancelled = 0
    for _ in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        trial = study.ask()
        trial.set_user_attr(CANCELLED_ATTR, "queued after the budget was already met")
        study.tell(trial, state=TrialState.PRUNED)
        cancelled += 1
    return cancelled


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message``: how a failure is recorded and reported."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


class SlotCounter:
    """How many trials numbered before a given one hold a slot, amortised O(1) per trial.

    A finished trial never changes whether it holds a slot, so finished trials are looked at
    once (their numbers kept sorted); only the unfinished ones are looked at again each time.
    """

    def __init__(self, study: optuna.Study) -> None:
        self.study = study
        self._claimed: list[int] = []  # sorted numbers of finished trials that hold a slot
        self._unfinished: set[int] = set()
        self._seen = 0
        self._lock = threading.Lock()

    def before(self, number: int, *, fresh: bool = False) -> int:
        """Trials numbered below ``number`` that hold a slot.

        By default as read at the start of the current trial (after it was numbered, so every
        trial before it is there); ``fresh`` reads the storage again. A trial only ever stops
        holding a slot, so the count read first is an upper bound of the fresh one.
        """
        trials = self.study.get_trials(deepcopy=False) if fresh else trials_of_this_trial(self.study)
        if not fresh and len(trials) < number:
            trials = self.study.get_trials(deepcopy=False)
        if trials and trials[-1].number != len(trials) - 1:  # numbers not all read yet: count all
            return sum(1 for t in trials if t.number < number and claims_slot(t))
        with self._lock:
            if len(trials) < self._seen:  # not the same study any more: start again
                self._claimed, self._unfinished, self._seen = [], set(), 0
            unfinished = []
            for i in [*self._unfinished, *range(self._seen, len(trials))]:
                t = trials[i]
                if not t.state.is_finished():
                    unfinished.append(i)
                elif claims_slot(t):
                    bisect.insort(self._claimed, t.number)
            self._unfinished, self._seen = set(unfinished), len(trials)
            held = bisect.bisect_left(self._claimed, number)
            return held + sum(1 for i in unfinished if trials[i].number < number and claims_slot(trials[i]))


def gated_objective(study: optuna.Study, objective: Objective, budget: int | None) -> Objective:
    """Wrap ``objective``: cancel trials beyond the budget, record failures as ``error``."""
    slots = SlotCounter(study)

    def run(trial: optuna.trial.Trial) -> float | Sequence[float]:
        if budget is not None:
            # the count of the trial's first read is an upper bound: read again only when it is full
            if slots.before(trial.number) >= budget and slots.before(trial.number, fresh=True) >= budget:
                trial.set_user_attr(CANCELLED_ATTR, "budget already held by earlier trials")
                with contextlib.suppress(RuntimeError):  # outside study.optimize there is no loop to stop
                    study.stop()
                raise optuna.TrialPruned(f"cancelled: the budget of {budget} trials is reached")
        try:
            return objective(trial)
        except optuna.TrialPruned:
            raise
        except Exception as exc:
            if ERROR_ATTR not in trial.user_attrs:
                trial.set_user_attr(ERROR_ATTR, one_line(exc))
            raise

    return run
