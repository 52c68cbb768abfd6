"""Simplify the winner: drop every control that does not earn its place.

A search on compile metrics picks up controls that do not matter for the objective (a cache
operator, ``--optimize-float-atomics``...) but can change the code's behaviour elsewhere. After
the search, each passed control of the best configuration is set back to its default, one at a
time (last control first); the candidate is evaluated as a real trial of the study, and the
change is kept when the objective is no worse and no secondary metric (spill bytes, stack,
registers: ``objectives.metrics.SECONDARY_ORDER``) gets worse unless the objective improves.
A binary-aware sampler may predict an attempt's binary, and its compile is then skipped; when the
simplest trial is such a skip, its configuration is compiled once more (``confirms``), so the ACF
comes from a compiled trial. Among equally
good trials the first by the secondary order becomes the ACF, so the ACF carries only controls
that earn their place.

With several objectives there is no single "no worse"; each Pareto point is simplified by exact
binary identity instead (:func:`simplify_identical`): a control is dropped when the code hash
stays the same, which needs no noise judgement and keeps the point where it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from ciq_optuna.objectives.compile import COMPILE_REQUIRED, CompileObjective, TrialFailed
from ciq_optuna.objectives.metrics import SECONDARY_ORDER
from ciq_optuna.space.compiler_space import CompilerSpace
from ciq_optuna.study.metadata import run_queued

SIMPLIFY_ATTR = "simplified_from"
CONFIRM_ATTR = "confirms"


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


def _acceptable(new: FrozenTrial, old: FrozenTrial, direction: optuna.study.StudyDirection) -> bool:
    """Keep ``new`` (one control fewer) if its objective is better, or as good with no secondary worse."""
    if not _no_worse(new.value, old.value, direction):
        return False
    if new.value != old.value:
        return True
    a, b = new.user_attrs.get("metrics", {}), old.user_attrs.get("metrics", {})
    return all(a[m] <= b[m] for m in SECONDARY_ORDER if a.get(m) is not None and b.get(m) is not None)


def simplify(study: optuna.Study, objective: CompileObjective, best: FrozenTrial) -> FrozenTrial:
    """Greedy removal of the best trial's controls; returns the simplest trial as good as ``best``.

    Single-objective studies only. Each attempt is one extra trial (user attribute
    ``simplified_from``); configurations already in the study are not evaluated again.
    """
    if len(study.directions) != 1 or best.value is None:
        return best
    direction = study.direction
    simplest = _greedy(study, objective, best, lambda t, cur: _acceptable(t, cur, direction))
    if simplest.user_attrs.get("skipped_compile"):
        simplest = _confirm(study, objective, simplest, lambda t, cur: _acceptable(t, cur, direction))
    return simplest


def _confirm(study: optuna.Study, objective: CompileObjective, skipped: FrozenTrial, keep: Any) -> FrozenTrial:
    """Compile the configuration of ``skipped`` (a simplification whose compile was skipped on a
    predicted binary) as one more trial (user attributes ``confirms`` and ``compile_required``),
    so the ACF is written from a compiled, measured trial; returns it when ``keep`` accepts it
    against ``skipped`` (the prediction held), else ``skipped``, which the ACF then passes over
    for a compiled trial of the same value (``summary.best_trials``)."""
    attrs = {SIMPLIFY_ATTR: skipped.user_attrs.get(SIMPLIFY_ATTR), CONFIRM_ATTR: skipped.number, COMPILE_REQUIRED: True}
    study.enqueue_trial(dict(skipped.params), user_attrs=attrs, skip_if_exists=False)
    ran = run_queued(study, objective, 1, catch=(TrialFailed,))
    if ran and ran[0].state == TrialState.COMPLETE and keep(ran[0], skipped):
        return ran[0]
    return skipped


def simplify_identical(study: optuna.Study, objective: CompileObjective, point: FrozenTrial) -> FrozenTrial:
    """Drop each control of ``point`` whose removal leaves the binary's code hash unchanged.

    For Pareto points (any number of objectives): the same code means the same compile metrics,
    so the point stays on the front with fewer flags. Each attempt is one extra trial (user
    attribute ``simplified_from``); configurations already in the study are not evaluated again.
    """
    want = point.user_attrs.get("binary_hash")
    if not want:
        return point
    while True:  # until a whole pass drops nothing: then every flag left changes the code
        simpler = _greedy(study, objective, point, lambda t, cur: t.user_attrs.get("binary_hash") == want, True)
        if simpler.number == point.number:
            return point
        point = simpler


def _greedy(
    study: optuna.Study, objective: CompileObjective, start: FrozenTrial, keep: Any, required: bool = False
) -> FrozenTrial:
    """Try each passed control of ``start`` at its default (last first); keep the change when ``keep``.
    ``required``: every attempt compiles (``compile_required``), else a sampler's prediction may
    skip its compile."""
    current = start
    known = {_key(t.params): t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))}
    app = {
        k: v
        for k, v in start.params.items()
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
                attrs = {SIMPLIFY_ATTR: current.number, **({COMPILE_REQUIRED: True} if required else {})}
                study.enqueue_trial(params, user_attrs=attrs, skip_if_exists=False)
                ran = run_queued(study, objective, 1, catch=(TrialFailed,))
                if not ran:
                    break
                candidate = known[_key(params)] = ran[0]
            if candidate.state == TrialState.COMPLETE and keep(candidate, current):
                current, config = candidate, trial_config
    return current


def _key(params: Mapping[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))
