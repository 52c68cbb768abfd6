"""What the study's finished trials hold, indexed as they finish: measurements by binary code hash
(:class:`BinaryCache`) and compiled trials by their parameters (:class:`CompiledParams`).

Both are shared through the study's storage (all workers see them): entries of this process are
known at once, those of other workers come from the trial list as read at the start of the
current trial (no extra storage read), looking only at trials not seen finished before.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from ciq_optuna.study._optuna import trials_of_this_trial


class FinishedTrials:
    """An index over the study's finished trials, brought up to date on a miss (:meth:`_refresh`)."""

    def __init__(self, study: optuna.Study) -> None:
        self.study = study
        self._lock = threading.Lock()
        self._seen = 0
        self._unfinished: set[int] = set()

    def _take(self, t: FrozenTrial) -> None:
        """Index one finished trial."""
        raise NotImplementedError

    def _refresh(self) -> None:
        trials = trials_of_this_trial(self.study)
        if len(trials) < self._seen:
            self._seen, self._unfinished = 0, set()
        unfinished = set()
        for i in [*self._unfinished, *range(self._seen, len(trials))]:
            t = trials[i]
            if not t.state.is_finished():
                unfinished.add(i)
                continue
            self._take(t)
        self._seen, self._unfinished = len(trials), unfinished


class BinaryCache(FinishedTrials):
    """Measurements by binary code hash; a measurement finished since the last read is only made again."""

    def __init__(self, study: optuna.Study) -> None:
        super().__init__(study)
        self._known: dict[str, tuple[int, dict[str, float]]] = {}

    def lookup(self, code_hash: str) -> tuple[int, dict[str, float]] | None:
        with self._lock:
            if code_hash not in self._known:
                self._refresh()
            return self._known.get(code_hash)

    def remember(self, code_hash: str, trial_number: int, measured: Mapping[str, float]) -> None:
        with self._lock:
            self._known.setdefault(code_hash, (trial_number, dict(measured)))

    def _take(self, t: FrozenTrial) -> None:
        h, measured = t.user_attrs.get("binary_hash"), t.user_attrs.get("measured")
        if t.state == TrialState.COMPLETE and h and measured is not None and "reused_from" not in t.user_attrs:
            self._known.setdefault(h, (t.number, measured))


class CompiledParams(FinishedTrials):
    """The first complete trial that compiled each configuration (all its parameters: compiler
    controls and application values, which Triton compiles and a measurement may read); trials
    that skipped their compile are left out.  The compiler is deterministic, so the same
    configuration gives that trial's binary and values again."""

    def __init__(self, study: optuna.Study) -> None:
        super().__init__(study)
        self._known: dict[tuple, FrozenTrial] = {}

    def lookup(self, params: Mapping[str, Any]) -> FrozenTrial | None:
        key = params_key(params)
        with self._lock:
            if key not in self._known:
                self._refresh()
            return self._known.get(key)

    def _take(self, t: FrozenTrial) -> None:
        attrs = t.user_attrs
        if t.state == TrialState.COMPLETE and attrs.get("binary_hash") and not attrs.get("skipped_compile") and t.values:
            self._known.setdefault(params_key(t.params), t)


def params_key(params: Mapping[str, Any]) -> tuple:
    """A configuration's identity: its parameters, sorted, values by ``repr``."""
    return tuple(sorted((k, repr(v)) for k, v in params.items()))
