"""Sampler choice for ciq-optuna studies and Pareto-front helpers."""

from __future__ import annotations

from typing import Any

import optuna
import pandas as pd

from ciq_optuna.samplers._genetic import GeneticSampler

_MO_POPULATION = 16


def make_sampler(n_objectives: int, *, seed: int | None = None, **kwargs: Any) -> optuna.samplers.BaseSampler:
    """The sampler for a study with ``n_objectives`` objectives.

    One objective: :class:`GeneticSampler` (``kwargs`` are its knobs).  Several: Optuna's
    :class:`~optuna.samplers.NSGAIISampler` with a population of 16 unless given, the best
    multi-objective choice measured in BENCHMARKS.md.  The GA knob names work for both:
    ``pool_size`` is NSGA-II's ``population_size`` and ``mutate_rate`` its ``mutation_prob``
    (and ``population_size`` is accepted for one objective); knobs set to None take the default.
    """
    if n_objectives < 1:
        raise ValueError(f"n_objectives must be at least 1, not {n_objectives}")
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    if n_objectives == 1:
        if "population_size" in kwargs:
            kwargs.setdefault("pool_size", kwargs.pop("population_size"))
        return GeneticSampler(seed=seed, **kwargs)
    if "pool_size" in kwargs:
        kwargs.setdefault("population_size", kwargs.pop("pool_size"))
    if "mutate_rate" in kwargs:
        kwargs.setdefault("mutation_prob", kwargs.pop("mutate_rate"))
    kwargs.pop("survivors", None)
    kwargs.setdefault("population_size", _MO_POPULATION)
    return optuna.samplers.NSGAIISampler(seed=seed, **kwargs)


def pareto_front_trials(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """Trials on the Pareto front (``study.best_trials``), in trial-number order."""
    return sorted(study.best_trials, key=lambda t: t.number)


def pareto_front_dataframe(study: optuna.Study) -> pd.DataFrame:
    """The Pareto front as a DataFrame: ``number``, one column per objective (``values_<i>`` or
    the study's metric names), then ``params_<name>`` columns; sorted by the first objective."""
    trials = pareto_front_trials(study)
    names = study.metric_names or [f"values_{i}" for i in range(len(study.directions))]
    rows = []
    for t in trials:
        row: dict[str, Any] = {"number": t.number}
        row.update(dict(zip(names, t.values, strict=True)))
        row.update({f"params_{k}": v for k, v in t.params.items()})
        rows.append(row)
    df = pd.DataFrame(rows, columns=["number", *names] if not rows else None)
    if rows:
        df = df.sort_values(names[0], ascending=study.directions[0] == optuna.study.StudyDirection.MINIMIZE)
    return df.reset_index(drop=True)
