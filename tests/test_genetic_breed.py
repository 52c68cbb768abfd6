"""GeneticSampler's children from a numpy Generator (``_breed.py``): the law of the legacy
mutation and breeding (the same distribution per gene kind, checked on many draws against the
legacy formula), the mutable genes only, at least one mutated gene per child, values in range,
and reproducible from the sampler's seed."""

from __future__ import annotations

import math

import numpy as np
import optuna

from ciq_optuna.samplers import GeneticSampler
from ciq_optuna.samplers._breed import breed, mutate_drawn
from ciq_optuna.samplers._mutation import mutate

optuna.logging.set_verbosity(optuna.logging.WARNING)

# one gene of each kind: ordered (40 values), categorical (5), continuous; sigma per gene
_KIND = np.array([0, 1, 2, 0])
_NVAL = np.array([40.0, 5.0, 1.0, 3.0])
_SIGMA = np.array([2.5, 1.0, 1.0, 1.0])


def _parents(m: int) -> np.ndarray:
    x = np.tile(np.array([[20.0, 2.0, 0.95, 0.0]]), (m, 1))
    x[: m // 5, 0] = math.nan  # some absent genes: start from a random value
    return x


def _histogram(x: np.ndarray, col: int, bins: np.ndarray) -> np.ndarray:
    v = x[:, col]
    v = v[~np.isnan(v)]
    return np.histogram(v, bins=bins)[0] / len(v)


def test_mutation_has_the_law_of_the_legacy_mutation() -> None:
    m = 60_000
    x = _parents(m)
    mask = np.ones_like(x, dtype=bool)
    for strength in (1.0, 3.0):
        new = mutate_drawn(np.random.default_rng(1), x, strength, mask, _KIND, _NVAL, _SIGMA)
        old = mutate(np.random.RandomState(1), x, strength, mask, _KIND, _NVAL, _SIGMA)
        for col, bins in (
            (0, np.arange(41) - 0.5),
            (1, np.arange(6) - 0.5),
            (2, np.linspace(0, 1, 11)),
            (3, np.arange(4) - 0.5),
        ):
            a, b = _histogram(new, col, bins), _histogram(old, col, bins)
            assert np.abs(a - b).max() < 0.012, (strength, col, a, b)
        assert (new[:, 1] != x[:, 1]).all()  # a categorical gene always takes another choice
        assert new[:, 2].min() >= 0.0 and new[:, 2].max() <= 1.0


def test_mutation_changes_the_masked_genes_only_and_leaves_its_input_alone() -> None:
    r = np.random.RandomState(3)
    x = _parents(500)
    before = x.copy()
    mask = r.rand(*x.shape) < 0.3
    out = mutate_drawn(np.random.default_rng(5), x, 1.0, mask, _KIND, _NVAL, _SIGMA)
    assert before.tobytes() == x.tobytes()
    assert np.array_equal(out[~mask], x[~mask], equal_nan=True)
    assert not np.isnan(out[mask]).any()
    for col in (0, 3):
        v = out[mask[:, col], col]
        assert (v == np.floor(v)).all() and (v >= 0).all() and (v <= _NVAL[col] - 1).all()


def _legacy_breed(
    rng: np.random.RandomState, x: np.ndarray, m: int, strength: float, mutable: np.ndarray
) -> np.ndarray:
    """The legacy breeding (``GeneticSampler._breed`` with ``_draws == "legacy"``), uniform crossover."""
    k, d = x.shape
    pa = x[np.minimum(rng.randint(0, k, m), rng.randint(0, k, m))]
    pb = x[np.minimum(rng.randint(0, k, m), rng.randint(0, k, m))]
    mask = (rng.rand(m, d) < 0.5) & (rng.rand(m) < 0.5)[:, None] & ~np.isnan(pb)
    child = np.where(mask, pb, pa)
    cols = np.where(mutable)[0]
    mut = (rng.rand(m, d) < min(1.0, strength / len(cols))) & mutable
    none = ~mut.any(axis=1)
    mut[np.where(none)[0], rng.choice(cols, int(none.sum()))] = True
    return mutate(rng, child, strength, mut, _KIND, _NVAL, _SIGMA)


def test_breeding_has_the_law_of_the_legacy_breeding() -> None:
    r = np.random.RandomState(0)
    x = np.column_stack([np.arange(6) * 6.0, r.randint(0, 5, 6), r.rand(6), np.zeros(6)])
    x[2, 3] = math.nan
    mutable = np.array([True, True, True, False])
    m = 60_000
    for strength in (1.0, 2.0):
        new = breed(
            np.random.default_rng(2), x, m, strength, "uniform", 0.5, mutable, None, (_KIND, _NVAL, _SIGMA)
        )
        old = _legacy_breed(np.random.RandomState(2), x, m, strength, mutable)
        for col, bins in ((0, np.arange(41) - 0.5), (1, np.arange(6) - 0.5), (2, np.linspace(0, 1, 11))):
            a, b = _histogram(new, col, bins), _histogram(old, col, bins)
            assert np.abs(a - b).max() < 0.012, (strength, col, a, b)
        assert abs(np.isnan(new[:, 3]).mean() - np.isnan(old[:, 3]).mean()) < 0.01  # crossover rate
        changed = (new != x[np.zeros(m, dtype=int)]).sum(axis=1)  # genes that differ from the best row
        assert abs(changed.mean() - ((old != x[np.zeros(m, dtype=int)]).sum(axis=1)).mean()) < 0.03


def test_every_child_mutates_a_mutable_gene_and_no_other() -> None:
    x = np.array([[3.0, 1.0, 0.5, 0.0]])
    mutable = np.array([False, True, False, False])  # categorical: a mutation always changes it
    kids = breed(
        np.random.default_rng(4), x, 5000, 1.0, "uniform", 0.5, mutable, 0.01, (_KIND, _NVAL, _SIGMA)
    )
    assert (kids[:, 1] != x[0, 1]).all()  # one parent: every change is a mutation, forced at rate 0.01
    assert (kids[:, [0, 2, 3]] == x[0, [0, 2, 3]]).all()


def _objective(trial: optuna.Trial) -> float:
    a = trial.suggest_int("a", 0, 30)
    b = trial.suggest_categorical("b", ["p", "q", "r"])
    c = trial.suggest_float("c", 0.0, 1.0)
    return abs(a - 17) + (b == "q") + abs(c - 0.3)


def _params(draws: str, seed: int | None) -> list[dict]:
    sampler = GeneticSampler(pool_size=8, seed=seed)
    sampler._draws = draws
    study = optuna.create_study(sampler=sampler)
    study.optimize(_objective, n_trials=60)
    return [t.params for t in study.trials]


def test_proposals_are_reproducible_from_the_seed_and_differ_from_the_legacy_draws() -> None:
    assert _params("pcg", 3) == _params("pcg", 3)
    assert _params("pcg", 3) != _params("pcg", 4)
    assert _params("pcg", 3) != _params("legacy", 3)
    assert _params("legacy", 3) == _params("legacy", 3)
