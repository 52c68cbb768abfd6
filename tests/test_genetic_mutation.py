"""GeneticSampler's faster paths against their plain formulas: the mutation worked out on the
mutated genes only (the same children bit for bit, the same random numbers drawn), the value
statistics' cells without ``nan_to_num``, the keys, and the local search's kept neighbourhood
keys and failed keys (the same trials)."""

from __future__ import annotations

import math

import numpy as np
import optuna

from ciq_optuna.samplers import GeneticSampler
from ciq_optuna.samplers._genes import neighbours
from ciq_optuna.samplers._genetic import _keys, _Neighbourhood
from ciq_optuna.samplers._mutation import mutate
from ciq_optuna.samplers._surrogate import ValueCounts

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _mutate_by_formula(
    rng: np.random.RandomState, x: np.ndarray, strength: float, mask: np.ndarray,
    kind: np.ndarray, nval: np.ndarray, sigma: np.ndarray,
) -> np.ndarray:
    """The mutation as boolean masks over every block (the formula before the fast path)."""
    m, d = x.shape

    def masked(a: np.ndarray) -> np.ndarray:
        return np.broadcast_to(a, (m, d))[mask]

    xm = x[mask]
    u = rng.rand(m, d)
    base = np.where(np.isnan(xm), np.where(kind == 2, u, np.floor(u * nval))[mask], xm)
    n = masked(nval)
    step = np.maximum(1.0, np.ceil(np.abs(rng.normal(0.0, 1.0, (m, d))[mask] * masked(sigma) * strength)))
    step *= np.where(rng.rand(m, d)[mask] < 0.5, -1.0, 1.0)
    ordv = base + step
    ordv = np.where((ordv < 0) | (ordv > n - 1), base - step, ordv)
    ordv = np.clip(ordv, 0, n - 1)
    far = rng.rand(m, d)[mask] < 0.1
    ordv = np.where(far, np.floor(rng.rand(m, d)[mask] * n), ordv)
    catv = (base + 1 + np.floor(rng.rand(m, d)[mask] * np.maximum(1, n - 1))) % n
    contv = np.abs(base + rng.normal(0.0, 0.1 * strength, (m, d))[mask])
    contv = np.clip(np.where(contv > 1.0, 2.0 - contv, contv), 0.0, 1.0)
    k = masked(kind)
    out = x.copy()
    out[mask] = np.select([k == 0, k == 1], [ordv, catv], contv)
    return out


def _genes(r: np.random.RandomState, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    kind = r.randint(0, 3, d)  # ordered, categorical, continuous
    nval = np.array([1.0 if k == 2 else float(r.choice([1, 2, 3, 5, 16, 40])) for k in kind])
    sigma = r.choice([0.3, 1.0, 2.5], d)
    return kind, nval, sigma


def _rows(r: np.random.RandomState, m: int, kind: np.ndarray, nval: np.ndarray) -> np.ndarray:
    x = np.where(kind == 2, r.rand(m, len(kind)), np.floor(r.rand(m, len(kind)) * nval))
    x[r.rand(*x.shape) < 0.15] = math.nan  # absent genes
    return x


def test_mutation_on_the_mutated_genes_equals_the_formula() -> None:
    r = np.random.RandomState(11)
    for _ in range(150):
        m, d = r.randint(1, 70), r.randint(1, 9)
        kind, nval, sigma = _genes(r, d)
        x = _rows(r, m, kind, nval)
        mask = r.rand(m, d) < r.choice([0.0, 0.1, 0.5, 1.0])
        strength = float(r.choice([1.0, 2.0, 4.0]))
        seed = r.randint(10_000)
        fast, plain = np.random.RandomState(seed), np.random.RandomState(seed)
        got = mutate(fast, x, strength, mask, kind, nval, sigma)
        want = _mutate_by_formula(plain, x, strength, mask, kind, nval, sigma)
        assert got.tobytes() == want.tobytes()  # bit for bit, NaNs included
        assert fast.rand() == plain.rand()  # the same random numbers drawn


def test_mutation_leaves_its_input_alone() -> None:
    r = np.random.RandomState(2)
    kind, nval, sigma = _genes(r, 6)
    x = _rows(r, 40, kind, nval)
    before = x.copy()
    mutate(np.random.RandomState(1), x, 1.0, np.ones_like(x, dtype=bool), kind, nval, sigma)
    assert before.tobytes() == x.tobytes()


def _cells_by_formula(counts: ValueCounts, codes: np.ndarray) -> np.ndarray:
    c = np.nan_to_num(codes, nan=-1.0)
    c = np.where(counts.cont, np.minimum(c * counts.bins, counts.bins - 1), c).astype(np.int64)
    c = np.minimum(c, counts.sizes - 1)
    return np.where(c >= 0, c + counts.offsets, -1)


def test_value_cells_equal_the_formula() -> None:
    r = np.random.RandomState(4)
    for _ in range(100):
        d = r.randint(1, 8)
        kind, nval, _ = _genes(r, d)
        if r.rand() < 0.4:
            kind[kind == 2] = 1  # no continuous gene: the shorter path
        x = _rows(r, r.randint(1, 30), kind, nval)
        x[:, kind == 2] = np.where(r.rand(len(x), int((kind == 2).sum())) < 0.2, 1.0, x[:, kind == 2])  # the top bin's edge
        counts = ValueCounts(kind, nval, x)
        assert np.array_equal(counts.cells(x), _cells_by_formula(counts, x))


def test_keys_are_the_bytes_of_the_codes() -> None:
    r = np.random.RandomState(8)
    for d in (1, 3, 15):
        x = np.floor(r.rand(20, d) * 5)
        x[r.rand(20, d) < 0.2] = math.nan
        want = [np.where(np.isnan(row), -1.0, row).tobytes() for row in x]
        assert _keys(x, integral=True) == want
        assert _keys(x) == [np.round(np.where(np.isnan(row), -1.0, row), 9).tobytes() for row in x]


def _failing(trial: optuna.Trial) -> float:
    x = trial.suggest_int("x", 0, 12)
    mode = trial.suggest_categorical("mode", ["a", "b", "c"])
    u = trial.suggest_categorical("u", [1, 2, 4, 8])
    w = trial.suggest_int("w", 0, 6)
    if (x > 8 and u > 2) or (w == 5 and mode == "c"):
        raise ValueError("a failing region")
    return abs(x - 4) // 2 + (mode == "b") + abs(u - 2) + abs(w - 3)


def _trials(sampler: GeneticSampler, n: int) -> list[tuple]:
    study = optuna.create_study(sampler=sampler)
    study.optimize(_failing, n_trials=n, catch=(ValueError,))
    return [(t.state, t.params) for t in study.trials]


def test_local_search_caches_give_the_trials_of_the_plain_paths() -> None:
    """The kept neighbourhood keys, the kept keys of its one-gene moves, its rows not finished
    at the last call and the failed keys brought up to date row by row propose what the
    neighbourhood, its move keys, its unseen rows and the failed keys made afresh on every call
    propose."""
    cached = GeneticSampler(pool_size=12, seed=7)
    calls = {"failed": 0, "kept keys": 0}
    keep = cached._neighbours

    def counted(row: np.ndarray, depth: int) -> _Neighbourhood:
        kept = keep(row, depth)
        calls["kept keys"] += kept.keys is not None
        return kept

    cached._neighbours = counted  # type: ignore[method-assign]
    plain = GeneticSampler(pool_size=12, seed=7)

    def fresh(row: np.ndarray, depth: int) -> _Neighbourhood:
        return _Neighbourhood(neighbours(row, plain._kind, plain._nval, plain._rng, depth), None)

    def failed_keys() -> set[bytes]:
        calls["failed"] += 1
        d = len(plain._names)
        return set(_keys(plain._x[np.where(np.isnan(plain._v[: plain._n, 0]))[0], :d]))

    plain._neighbours = fresh  # type: ignore[method-assign]
    plain._failed_keys = failed_keys  # type: ignore[method-assign]
    assert _trials(cached, 260) == _trials(plain, 260)
    assert calls["failed"] >= 3 and calls["kept keys"] >= 10, calls  # both caches were used
