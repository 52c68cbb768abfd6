"""Simplify the winner: drop every control that does not earn its place.

A search on compile metrics picks up controls that do not matter for the objective (a cache
operator, ``--optimize-float-atomics``...) but can change the code's behaviour elsewhere. After
the search, each passed control of the best configuration is set back to its default, one at a
time (last control first); the candidate is evaluated as a real trial of the study, and the
change is kept when the objective is no worse. Among equally good trials the one with the
fewest flags becomes the ACF, so the ACF carries only controls that earn their place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from ciq_optuna.objectives.compile import CompileObjective, TrialFailed
from ciq_optuna.space.compiler_space import CompilerSpace
from ciq_optuna.study.metadata import run_queued

SIMPLIFY_ATTR = "simplified_from"


def without(space: CompilerSpace, config: Mapping[str, Any], name: str) -> dict[str, Any]:
    """``config`` with control ``name`` at its default; controls whose conditions no longer hold drop out."""
    wanted = dict(config)
    wanted[name] = space.control(name).baseline_value()
    out: dict[str, Any] = {}
    for control in space.controls:
        if space.is_active(control, out):
            out[control.name] = wanted.get(control.name, control.baseline_value())
    return out


def _no_worse(new: float, old: float, direction: optuna.study.StudyDirection) -> bool:
    if direction == optuna.study.StudyDirection.MINIMIZE:
        return new <= old
    return new >= old


def simplify(study: optuna.Study, objective: CompileObjective, best: FrozenTrial) -> FrozenTrial:
    """Greedy removal of the best trial's controls; returns the simplest trial as good as ``best``.

    Single-objective studies only. Each attempt is one extra trial (user attribute
    ``simplified_from``); configurations already in the study are not evaluated again.
    """
    if len(study.directions) != 1 or best.value is None:
        return best
    direction = study.direction
    current = best
    known = {_key(t.params): t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))}
    app = {
        k: v
        for k, v in best.params.items()
        if not any(k.startswith(s.name + ".") for s in objective.space.compilers)
    }
    for space in objective.space.compilers:
        config = space.config_from_params(current.params)
        for control in reversed(space.controls):
            value = config.get(control.name)
            if value is None or value == control.baseline_value() or not control.is_passed(value):
                continue
            trial_config = without(space, config, control.name)
            params = dict(app)
            for other in objective.space.compilers:
                other_config = trial_config if other is space else other.config_from_params(current.params)
                params.update(other.params_from_config(other_config))
            candidate = known.get(_key(params))
            if candidate is None:
                study.enqueue_trial(params, user_attrs={SIMPLIFY_ATTR: current.number}, skip_if_exists=False)
                ran = run_queued(study, objective, 1, catch=(TrialFailed,))
                if not ran:
                    break
                candidate = known[_key(params)] = ran[0]
            if candidate.state == TrialState.COMPLETE and _no_worse(
                candidate.value, current.value, direction
            ):
                current, config = candidate, trial_config
    return current


def _key(params: Mapping[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))
