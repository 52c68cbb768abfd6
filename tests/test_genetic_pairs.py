"""Gene-pair value statistics (``_pairs.py``) in GeneticSampler's value-statistics surrogate."""

from __future__ import annotations

import math

import numpy as np
import optuna

from ciq_optuna.samplers import GeneticSampler
from ciq_optuna.samplers._pairs import PairCounts
from ciq_optuna.samplers._surrogate import ValueCounts

optuna.logging.set_verbosity(optuna.logging.WARNING)

_KIND = np.array([0, 0, 0])
_NVAL = np.array([2.0, 2.0, 3.0])


def _xor_rows() -> tuple[np.ndarray, np.ndarray]:
    """Genes 0 and 1 are good only as equal values (0, 0) or (1, 1): every value is as common
    among the good rows as among the others, so the per-gene statistics see nothing."""
    rows = np.array([[a, b, c] for a in (0, 1) for b in (0, 1) for c in (0, 1, 2)] * 3, dtype=float)
    good = np.where(rows[:, 0] == rows[:, 1])[0]
    return rows, good


def test_pairs_see_what_single_genes_miss() -> None:
    rows, good = _xor_rows()
    cands = np.array([[0.0, 0.0, 1.0], [1.0, 1.0, 1.0], [0.0, 1.0, 1.0], [1.0, 0.0, 1.0]])
    plain = ValueCounts(_KIND, _NVAL, rows)
    plain.update(rows, good)
    assert np.allclose(plain.score(cands), plain.score(cands)[0])  # blind to the pair
    paired = ValueCounts(_KIND, _NVAL, rows, pair_weight=1.0)
    paired.update(rows, good)
    score = paired.score(cands)
    assert max(score[:2]) < min(score[2:])


def test_no_evidence_adds_nothing() -> None:
    pairs = PairCounts(np.array([2, 2, 3]))
    local = np.array([[0, 1, 2], [1, 1, -1]])
    dens = np.full((2, 3), 0.4)
    assert np.array_equal(pairs.interaction(local, dens, dens), np.zeros(2))


def test_absent_genes_and_one_value_genes_have_no_pairs() -> None:
    pairs = PairCounts(np.array([2, 1, 3]))  # gene 1 has one value: only the pair (0, 2)
    assert list(zip(pairs.first, pairs.second)) == [(0, 2)]
    assert pairs.cells(np.array([[1, 0, -1], [1, 0, 2]])).tolist() == [[-1], [5]]


def test_pair_counts_updated_in_steps_equal_counts_made_at_once() -> None:
    rows, good = _xor_rows()
    rows[:4, 2] = math.nan  # an absent (conditional) gene
    once = ValueCounts(_KIND, _NVAL, rows, pair_weight=1.0)
    once.update(rows, good)
    steps = ValueCounts(_KIND, _NVAL, rows, pair_weight=1.0)
    for lo, hi in ((0, 5), (5, 6), (6, len(rows))):
        steps.update(rows[lo:hi], good[good < hi])
    steps.update(rows[len(rows):], good)
    assert np.array_equal(steps.pairs.total, once.pairs.total)
    assert np.array_equal(steps.pairs.good, once.pairs.good)
    assert np.allclose(steps.score(rows[:8]), once.score(rows[:8]))


def test_sampler_with_pair_statistics() -> None:
    """Wired into the sampler: the value statistics hold pair counts, and a study runs without
    duplicates."""

    def objective(trial: optuna.Trial) -> float:
        a = trial.suggest_categorical("a", [0, 1, 2, 3])
        b = trial.suggest_categorical("b", [0, 1, 2, 3])
        c = trial.suggest_int("c", 0, 7)
        return float(a != b) + 0.1 * c

    sampler = GeneticSampler(pool_size=10, seed=0)
    sampler._pair_weight = 1.0
    study = optuna.create_study(sampler=sampler)
    study.optimize(objective, n_trials=60)
    assert sampler._counts is not None and sampler._counts.pairs is not None
    keys = [tuple(t.params.values()) for t in study.trials]
    assert len(set(keys)) == len(keys)


def test_pair_risk_sees_a_failing_pair() -> None:
    """Genes 0 and 1 fail together when equal: every single value fails half of the time, the
    equal pairs always."""
    rows, failed = _xor_rows()
    counts = ValueCounts(_KIND, _NVAL, rows, pair_weight=1.0)
    counts.update(rows, failed)
    risk = counts.pair_risk(np.array([[0.0, 0.0, 2.0], [1.0, 1.0, 0.0], [0.0, 1.0, 2.0], [1.0, 0.0, 0.0]]), 0.5)
    assert min(risk[:2]) > 0.9 and max(risk[2:]) < 0.6
    assert np.array_equal(ValueCounts(_KIND, _NVAL, rows).pair_risk(rows[:3], 0.5), np.zeros(3))


def test_sampler_failure_risk_of_pairs() -> None:
    """With ``_pair_fail`` the sampler's failure risk rises for a failing pair of values that
    each work with other partners; without it the two candidates look alike."""

    def objective(trial: optuna.Trial) -> float:
        a = trial.suggest_int("a", 0, 1)
        b = trial.suggest_int("b", 0, 1)
        c = trial.suggest_int("c", 0, 5)
        if a == b:
            raise ValueError("the pair a == b fails")
        return float(c)

    risks = []
    for on in (False, True):
        sampler = GeneticSampler(pool_size=8, seed=1)
        sampler._pair_fail = on
        study = optuna.create_study(sampler=sampler)
        study.optimize(objective, n_trials=24, catch=(ValueError,))
        risks.append(sampler._fail_risk(np.array([[0.0, 0.0, 3.0], [0.0, 1.0, 3.0]])))
    assert abs(risks[0][0] - risks[0][1]) < 0.2
    assert risks[1][0] > risks[1][1] + 0.3
