"""Search the corners of a Pareto front: one-control moves from each objective's best trial.

A multi-objective search spreads its trials over the whole front, so with a few dozen trials
it rarely reaches the corners a single-objective run reaches (the fewest registers, the fewest
spill bytes). After the search, ``push_extremes`` takes, in turn for each objective, the trial
that is best on it (ties broken by the other objectives) and evaluates configurations one
control away from it that the study has not seen: integer controls move to their neighbouring
values first (``--maxrregcount`` one step further is the usual way to a corner), then the other
states of each control. Every candidate is a real trial of the study and counts against the
budget.

Before the search, ``extreme_seeds`` gives the baseline with each integer control at the ends
of its range (``--maxrregcount=24`` is the fewest-registers corner of most kernels), so the
search starts with both ends of the front in view.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from ciq_optuna.space.compiler_space import CompilerSpace
from ciq_optuna.space.controls import NOT_PASSED, Control
from ciq_optuna.space.search import SearchSpace

#: Candidates evaluated from one objective's best trial before moving to the next objective.
BATCH = 2


def extreme_trial(study: optuna.Study, index: int) -> FrozenTrial | None:
    """The complete trial best on objective ``index``; ties go to the best on the others, in order."""
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        return None
    signs = [1.0 if d == optuna.study.StudyDirection.MINIMIZE else -1.0 for d in study.directions]
    order = [index] + [i for i in range(len(signs)) if i != index]
    return min(complete, key=lambda t: (*(signs[i] * t.values[i] for i in order), t.number))


def _with_value(space: CompilerSpace, config: Mapping[str, Any], name: str, value: Any) -> dict[str, Any]:
    """``config`` with control ``name`` set to ``value``; controls whose conditions fail drop out."""
    wanted = {**config, name: value}
    out: dict[str, Any] = {}
    for control in space.controls:
        if space.is_active(control, out):
            out[control.name] = wanted.get(control.name, control.baseline_value())
    return out


def _moves(control: Control, value: Any) -> tuple[list[Any], list[Any]]:
    """(near, far) values for one control: an int's neighbouring grid values are near."""
    values = [v for v in control.values() if v != value or isinstance(v, bool) != isinstance(value, bool)]
    if control.kind != "int":
        return [], values
    grid = control.grid()  # type: ignore[attr-defined]
    if value in grid:
        i = grid.index(value)
        near = [grid[j] for j in (i - 1, i + 1) if 0 <= j < len(grid)]
    else:  # not passed: the compiler decides; every passed value is a far move
        near = []
    return near, [v for v in values if v not in near and (v == NOT_PASSED or not near)]


def neighbours(space: SearchSpace, params: Mapping[str, Any], rng: random.Random) -> list[dict[str, Any]]:
    """Params one control away from ``params``: near integer moves first, the rest shuffled."""
    near: list[dict[str, Any]] = []
    far: list[dict[str, Any]] = []
    app = {k: v for k, v in params.items() if not any(k.startswith(s.name + ".") for s in space.compilers)}
    for comp in space.compilers:
        config = comp.config_from_params(params)
        for control in comp.controls:
            if control.name not in config:
                continue
            close, away = _moves(control, config[control.name])
            for bucket, values in ((near, close), (far, away)):
                for value in values:
                    changed = _with_value(comp, config, control.name, value)
                    if comp.conflicts_in(changed):
                        continue
                    out = dict(app)
                    for other in space.compilers:
                        out.update(
                            other.params_from_config(changed if other is comp else other.config_from_params(params))
                        )
                    bucket.append(out)
    rng.shuffle(near)
    rng.shuffle(far)
    return near + far


def extreme_seeds(space: SearchSpace) -> list[dict[str, Any]]:
    """Params of the baseline with one integer control at its lowest, then at its highest value."""
    base = {c.name: c.baseline() for c in space.compilers}
    out: list[dict[str, Any]] = []
    for comp in space.compilers:
        for control in comp.controls:
            if control.kind != "int" or control.name not in base[comp.name]:
                continue
            grid = control.grid()  # type: ignore[attr-defined]
            for value in (grid[0], grid[-1]):
                changed = _with_value(comp, base[comp.name], control.name, value)
                if comp.conflicts_in(changed):
                    continue
                params = {}
                for other in space.compilers:
                    params.update(other.params_from_config(changed if other is comp else base[other.name]))
                out.append(params)
    return out


def push_extremes(
    study: optuna.Study, space: SearchSpace, run_one: Any, count: int, seed: int | None = None
) -> int:
    """Evaluate up to ``count`` one-control moves from each objective's best trial, objectives in turn.

    ``run_one(params)`` enqueues and evaluates one configuration and returns whether a trial
    ran (False once the budget is spent). Returns how many trials ran.
    """
    rng = random.Random(seed)
    ran = 0
    exhausted: set[int] = set()
    while ran < count and len(exhausted) < len(study.directions):
        for index in range(len(study.directions)):
            if ran >= count or index in exhausted:
                continue
            best = extreme_trial(study, index)
            if best is None:
                return ran
            seen = {_key(t.params) for t in study.get_trials(deepcopy=False)}
            fresh = [p for p in neighbours(space, best.params, rng) if _key(p) not in seen]
            if not fresh:
                exhausted.add(index)
                continue
            for params in fresh[: min(BATCH, count - ran)]:
                if not run_one(params):
                    return ran
                ran += 1
    return ran


def _key(params: Mapping[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))
