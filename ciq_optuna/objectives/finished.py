"""What the study's finished trials hold, indexed as they finish: measurements by binary code hash
and compiled trials by their parameters (:class:`FinishedTrials`).

Shared through the study's storage (all workers see them): entries of this process are known at
once, those of other workers come from the trial list as read at the start of the current trial
(no extra storage read), looking only at trials not seen finished before.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from ciq_optuna.study._optuna import trials_of_this_trial

_FINISHED = frozenset(s for s in TrialState if s.is_finished())


class FinishedTrials:
    """Two indexes over the study's finished trials, brought up to date together, in one pass over
    the trials not seen finished before, on a miss of either (:meth:`_refresh`):

    - measurements by binary code hash (:meth:`measurement`): a measurement finished since the last
      read is only made again;
    - the first complete trial that compiled each configuration (:meth:`compiled`; all its
      parameters: compiler controls and application values, which Triton compiles and a
      measurement may read); trials that skipped their compile are left out.  The compiler is
      deterministic, so the same configuration gives that trial's binary and values again.
    """

    def __init__(self, study: optuna.Study) -> None:
        self.study = study
        self._lock = threading.Lock()
        self._seen = 0
        self._unfinished: set[int] = set()
        self._measured: dict[str, tuple[int, dict[str, float]]] = {}
        self._compiled: dict[frozenset, list[FrozenTrial]] = {}

    def catch_up(self) -> None:
        """Index every trial finished so far; a run calls it in its first trial, so the one pass
        over a large study is not paid inside a later trial (a trial's lookups then read only
        the trials finished since)."""
        with self._lock:
            self._refresh()

    def measurement(self, code_hash: str) -> tuple[int, dict[str, float]] | None:
        """The first trial that measured the binary ``code_hash`` and its measurement, or None."""
        with self._lock:
            if code_hash not in self._measured:
                self._refresh()
            return self._measured.get(code_hash)

    def remember(self, code_hash: str, trial_number: int, measured: Mapping[str, float]) -> None:
        """Record this process's measurement of a binary at once (before its trial is stored finished)."""
        with self._lock:
            self._measured.setdefault(code_hash, (trial_number, dict(measured)))

    def compiled(self, params: Mapping[str, Any]) -> FrozenTrial | None:
        """The first complete trial that compiled exactly ``params``, or None."""
        key = frozenset(params.items())
        with self._lock:
            found = self._first(key, params)
            if found is None:
                self._refresh()
                found = self._first(key, params)
            return found

    def _first(self, key: frozenset, params: Mapping[str, Any]) -> FrozenTrial | None:
        """The first trial indexed under ``key`` whose parameters are ``params`` by :func:`params_key`
        (the key, the parameters as a set, takes ``1``, ``1.0`` and ``True`` as one value)."""
        same = self._compiled.get(key)
        if not same:
            return None
        exact = params_key(params)
        return next((t for t in same if params_key(t.params) == exact), None)

    def _refresh(self) -> None:
        trials = trials_of_this_trial(self.study)
        if len(trials) < self._seen:
            self._seen, self._unfinished = 0, set()
        unfinished = set()
        for i in [*self._unfinished, *range(self._seen, len(trials))]:
            t = trials[i]
            if t.state not in _FINISHED:
                unfinished.add(i)
            elif t.state == TrialState.COMPLETE:
                self._take(t)
        self._seen, self._unfinished = len(trials), unfinished

    def _take(self, t: FrozenTrial) -> None:
        """Index one complete trial."""
        attrs = t.user_attrs
        code_hash = attrs.get("binary_hash")
        if not code_hash:
            return
        measured = attrs.get("measured")
        if measured is not None and "reused_from" not in attrs:
            self._measured.setdefault(code_hash, (t.number, measured))
        if not attrs.get("skipped_compile") and t.values:
            self._compiled.setdefault(frozenset(t.params.items()), []).append(t)


def params_key(params: Mapping[str, Any]) -> tuple:
    """A configuration's identity: its parameters, sorted, values by ``repr``."""
    return tuple(sorted((k, repr(v)) for k, v in params.items()))
