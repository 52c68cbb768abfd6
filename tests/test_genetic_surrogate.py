"""GeneticSampler's value-statistics surrogate and the children bred in batches."""

from __future__ import annotations

import math

import numpy as np
import optuna

from ciq_optuna.samplers import GeneticSampler
from ciq_optuna.samplers._surrogate import ValueCounts

optuna.logging.set_verbosity(optuna.logging.WARNING)

# Two ordered genes of 4 values and one continuous gene (kind 2), as GeneticSampler codes them.
_KIND = np.array([0, 0, 2])
_NVAL = np.array([4.0, 4.0, 1.0])


def _rows() -> np.ndarray:
    rng = np.random.RandomState(0)
    rows = np.column_stack([rng.randint(0, 4, 40), rng.randint(0, 4, 40), rng.rand(40)]).astype(float)
    rows[:5, 1] = math.nan  # an absent (conditional) gene
    return rows


def test_values_of_the_good_trials_score_best() -> None:
    rows = _rows()
    good = np.where(rows[:, 0] == 2)[0]  # the good trials all have value 2 of gene 0
    counts = ValueCounts(_KIND, _NVAL, rows)
    counts.update(rows, good)
    cands = np.array([[2.0, 1.0, 0.5], [0.0, 1.0, 0.5], [3.0, 1.0, 0.5]])
    score = counts.score(cands)
    assert score[0] < score[1] and score[0] < score[2]
    # an absent gene adds nothing: the same score as a candidate whose gene-1 value is neutral
    neutral = counts.score(np.array([[2.0, math.nan, 0.5]]))
    assert np.isfinite(neutral).all()


def test_counts_updated_in_steps_equal_counts_made_at_once() -> None:
    rows = _rows()
    good = np.array([3, 7, 11, 30])
    once = ValueCounts(_KIND, _NVAL, rows)
    once.update(rows, good)
    steps = ValueCounts(_KIND, _NVAL, rows)
    for lo, hi in ((0, 9), (9, 10), (10, 40)):
        steps.update(rows[lo:hi], good[good < hi])
    steps.update(rows[40:], good)
    assert steps.n == once.n == 40
    assert np.array_equal(steps.total, once.total) and np.array_equal(steps.good, once.good)
    assert np.array_equal(steps.total_n, once.total_n) and np.array_equal(steps.good_n, once.good_n)
    cands = rows[:6]
    assert np.allclose(steps.score(cands), once.score(cands))


def test_rarity_prefers_values_seldom_evaluated() -> None:
    rows = np.array([[0.0, 0.0, 0.1]] * 9 + [[3.0, 3.0, 0.9]])
    counts = ValueCounts(_KIND, _NVAL, rows)
    counts.update(rows, np.array([0]))
    rarity = counts.rarity(np.array([[0.0, 0.0, 0.1], [3.0, 3.0, 0.9], [1.0, 2.0, 0.5]]))
    assert rarity[2] < rarity[1] < rarity[0]


def test_surrogate_steers_children_to_the_good_value() -> None:
    """One categorical gene decides the quality; the others add noise.  After generation 0 the
    children should hold the good value far more often than a random draw (1 in 6) would."""

    def objective(trial: optuna.Trial) -> float:
        c = trial.suggest_categorical("c", ["a", "b", "c", "d", "e", "f"])
        x = trial.suggest_int("x", 0, 15)
        y = trial.suggest_int("y", 0, 15)
        return (0.0 if c == "d" else 10.0) + 0.1 * abs(x - y)

    shares = []
    for seed in range(3):
        study = optuna.create_study(sampler=GeneticSampler(pool_size=12, seed=seed))
        study.optimize(objective, n_trials=60)
        later = [t.params["c"] == "d" for t in study.trials[24:]]
        shares.append(np.mean(later))
    assert np.mean(shares) > 0.5


def test_children_come_from_batches_and_stay_unseen() -> None:
    """Children are bred many at a time; every trial is still a configuration not seen before."""

    def objective(trial: optuna.Trial) -> float:
        return sum((trial.suggest_int(k, 0, 5) - 2) ** 2 for k in "abc")

    sampler = GeneticSampler(pool_size=8, seed=3)
    study = optuna.create_study(sampler=sampler)
    study.optimize(objective, n_trials=150)
    configs = [tuple(sorted(t.params.items())) for t in study.trials]
    assert len(set(configs)) == len(configs)
    assert sampler._child_batches  # the children were drawn from a bred batch
    assert study.best_value == 0
