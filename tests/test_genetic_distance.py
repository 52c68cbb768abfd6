"""GeneticSampler's fast paths give exactly what the plain formulas give: gene distances from
tables summed in numpy's pairwise order, and the fitness order and last improvement kept up to
date row by row (the sampler breaks ties on these values, so equal proposals need equal bits)."""

from __future__ import annotations

import math

import numpy as np
import optuna
import pytest

from ciq_optuna.samplers import GeneticSampler
from ciq_optuna.samplers._distance import RowDistances, direct, pairwise_sum
from ciq_optuna.samplers._genetic import _smallest

optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.mark.parametrize("d", [1, 5, 7, 8, 9, 15, 16, 23, 40, 129, 300])
def test_pairwise_sum_adds_in_numpys_order(d: int) -> None:
    rng = np.random.default_rng(d)
    for m, k in [(1, 1), (1, 2), (2, 1), (16, 262), (64, 64), (3, 1024)]:
        # terms of very different sizes, so another order of the additions rounds differently
        a = rng.random((m, k, d)) * rng.choice([1e-3, 1.0, 1e3], (1, 1, d))
        assert np.array_equal(pairwise_sum(np.moveaxis(a, 2, 0).copy()), a.sum(axis=2))


def _space(rng: np.random.Generator, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    kind = rng.integers(0, 3, d)  # ordered, categorical, continuous (GeneticSampler's codes)
    nval = np.where(kind == 2, 1.0, rng.integers(1, 90, d).astype(float))
    scale = np.where(kind == 0, 1.0 / np.maximum(1.0, nval - 1), 1.0)
    return kind, nval, scale


def _genomes(rng: np.random.Generator, kind: np.ndarray, nval: np.ndarray, m: int) -> np.ndarray:
    x = np.where(kind == 2, rng.random((m, len(kind))), np.floor(rng.random((m, len(kind))) * nval))
    x[rng.random(x.shape) < 0.15] = math.nan  # absent genes
    x[rng.random(x.shape) < 0.02] = 1000.0  # codes outside the value range
    return x


@pytest.mark.parametrize("pairwise", [True, False])
@pytest.mark.parametrize("direct_terms", [0, 4096])  # 0: the tables always
def test_row_distances_equal_the_formula_bit_for_bit(direct_terms: int, pairwise: bool) -> None:
    rng = np.random.default_rng(7)
    for _ in range(25):
        d = int(rng.integers(1, 40))
        kind, nval, scale = _space(rng, d)
        x = _genomes(rng, kind, nval, int(rng.integers(5, 300)))
        table = RowDistances(window=int(rng.integers(1, 50)), direct_terms=direct_terms)  # small: shifts often
        n = 0
        while n < len(x):
            n = min(len(x), n + int(rng.integers(1, 30)))
            if rng.random() < 0.5:  # the latest rows after a few scattered ones (the sampler's window)
                tail = np.arange(max(0, n - int(rng.integers(1, 60))), n)
                idx = np.concatenate([np.sort(rng.choice(tail[0] + 1, min(3, tail[0] + 1), replace=False)), tail])
                idx = np.unique(idx)
            else:
                idx = rng.choice(n, int(rng.integers(1, n + 1)), replace=False)
            cands = _genomes(rng, kind, nval, int(rng.integers(1, 20)))
            got = table(x, n, cands, idx, scale, nval, kind != 2, pairwise=pairwise)
            assert np.array_equal(got, direct(cands, x[idx], scale, pairwise))
    # a new gene (d grows): the tables are made again
    kind, nval, scale = _space(rng, 6)
    x = _genomes(rng, kind, nval, 80)
    table = RowDistances(window=16, direct_terms=direct_terms)
    idx = np.arange(40, 80)
    for width in (5, 6):
        cands = _genomes(rng, kind, nval, 4)[:, :width]
        got = table(x[:, :width], 80, cands, idx, scale[:width], nval[:width], kind[:width] != 2, pairwise=pairwise)
        assert np.array_equal(got, direct(cands, x[idx, :width], scale[:width], pairwise))


@pytest.mark.parametrize("pairwise", [True, False])
@pytest.mark.parametrize("bad", [-1.0, -0.5, 2.5, 3.0, 1000.0, math.inf, -math.inf])
def test_row_distances_of_codes_off_the_tables(bad: float, pairwise: bool) -> None:
    """A candidate code that is no table row (negative, fractional, the value count itself,
    infinite) is worked out by the formula for its gene, the other genes still looked up."""
    rng = np.random.default_rng(11)
    nval = np.array([3.0, 4.0, 2.0, 5.0])
    scale = 1.0 / (nval - 1)
    x = np.floor(rng.random((60, 4)) * nval)
    x[rng.random(x.shape) < 0.1] = math.nan
    cands = np.floor(rng.random((6, 4)) * nval)
    cands[2, 1] = math.nan
    cands[4, 0] = bad
    table = RowDistances(window=16, direct_terms=0)
    idx = np.arange(20, 60)
    got = table(x, 60, cands, idx, scale, nval, np.ones(4, dtype=bool), pairwise=pairwise)
    assert np.array_equal(got, direct(cands, x[idx], scale, pairwise))


def test_distances_gene_by_gene_add_the_genes_in_order() -> None:
    rng = np.random.default_rng(5)
    kind, nval, scale = _space(rng, 23)
    a, b = _genomes(rng, kind, nval, 7), _genomes(rng, kind, nval, 30)
    terms = np.minimum(np.abs(np.nan_to_num(a, nan=-1e12)[:, None] - np.nan_to_num(b, nan=-1e12)[None]) * scale, 1.0)
    assert np.array_equal(direct(a, b, scale), terms.sum(axis=2))
    terms = terms.astype(np.float32)  # gene by gene: in float32
    want = terms[:, :, 0].copy()
    for j in range(1, 23):
        want += terms[:, :, j]
    got = direct(a, b, scale, pairwise=False)
    assert got.dtype == np.float32 and np.array_equal(got, want)


class _Reference(GeneticSampler):
    """GeneticSampler with the plain formulas: distances by ``direct`` (the elite's too, all of
    them on each call), the fitness order and the last improvement worked out from every row on
    each call."""

    def _distances(
        self, cands: np.ndarray, idx: np.ndarray, run_from: int | None = None, checked: bool = False
    ) -> np.ndarray:
        return direct(cands, self._x[idx, : len(self._names)], self._scale, self._pairwise_sums)

    def _pair_distances(self, rows: np.ndarray) -> np.ndarray:
        x = self._x[rows, : len(self._names)]
        return direct(x, x, self._scale, self._pairwise_sums)

    def _sorted_rows(self) -> np.ndarray:
        v = self._v[: self._n, 0]
        ok = np.where(~np.isnan(v))[0]
        return ok[np.argsort(v[ok], kind="stable")]

    def _last_improvement(self) -> int:
        self._improve_state = None  # no state kept between calls: a scan of every row
        return super()._last_improvement()


def _objective(trial: optuna.Trial) -> float | tuple[float, float]:
    x = trial.suggest_int("x", 0, 30)
    mode = trial.suggest_categorical("mode", ["a", "b", "c"])
    y = trial.suggest_float("y", 0.0, 1.0) if mode == "a" else 0.5  # conditional
    u = trial.suggest_categorical("u", [1, 2, 4, 8, 16])
    if x > 25 and u > 4:
        raise ValueError("a failing region")
    value = abs(x // 3 - 4) + abs(u - 4) // 2 + (mode == "b") + round(y, 1)  # plateaus: many ties
    if len(trial.study.directions) == 2:
        return value, (x % 5) + u
    return value


@pytest.mark.parametrize("objectives", [1, 2])
def test_fast_paths_propose_what_the_plain_formulas_propose(objectives: int) -> None:
    proposals = []
    for cls in (GeneticSampler, _Reference):
        study = optuna.create_study(directions=["minimize"] * objectives, sampler=cls(seed=3))
        study.enqueue_trial({"x": 11, "mode": "c", "u": 4})
        study.optimize(_objective, n_trials=300, catch=(ValueError,))
        proposals.append([(t.params, t.state) for t in study.trials])
    assert proposals[0] == proposals[1]
    assert any(state == optuna.trial.TrialState.FAIL for _, state in proposals[0])


def test_nearest_neighbours_at_equal_distances_are_the_earliest_trials(monkeypatch) -> None:
    """The nearest-neighbour pick breaks ties between equal distances by the earliest trial
    (argmin passes), not by ``np.argpartition``, whose order depends on the CPU's vector
    instructions: the proposals are the same on every machine."""
    def no_argpartition(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("argpartition used")

    sampler = GeneticSampler(seed=1, pool_size=6)
    study = optuna.create_study(sampler=sampler)
    monkeypatch.setattr(np, "argpartition", no_argpartition)
    study.optimize(lambda t: (t.suggest_int("a", 0, 9) - 4) ** 2 + t.suggest_int("b", 0, 9), n_trials=80)
    assert len(study.trials) == 80
    dist = np.array([[2.0, 1.0, 1.0, 0.5, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0]])
    assert _smallest(dist, 3).tolist() == [[3, 1, 2], [0, 1, 2]]


@pytest.mark.parametrize("pairwise", [True, False])
def test_row_distances_of_discrete_genes_equal_the_formula(pairwise: bool) -> None:
    """Every gene discrete with a table (the usual tuning space): the rows added one to a few at a
    time (their columns made in Python), the candidates' terms gathered at once, told or not that
    their codes are table rows, the rows asked for in a run or in any order (the elite's pairs)."""
    rng = np.random.default_rng(13)
    for _ in range(20):
        d = int(rng.integers(1, 16))
        nval = rng.integers(1, 12, d).astype(float)
        kind = rng.integers(0, 2, d)  # ordered or categorical
        scale = np.where(kind == 0, 1.0 / np.maximum(1.0, nval - 1), 1.0)
        x = np.floor(rng.random((200, d)) * nval)
        x[rng.random(x.shape) < 0.1] = math.nan
        x[rng.random(x.shape) < 0.01] = 2.5  # a row's code off the tables: the formula for it
        table = RowDistances(window=int(rng.integers(8, 40)), direct_terms=0)
        n = 0
        while n < len(x):
            n = min(len(x), n + int(rng.integers(1, 6)))
            cands = np.floor(rng.random((int(rng.integers(1, 20)), d)) * nval)
            cands[rng.random(cands.shape) < 0.1] = math.nan
            if rng.random() < 0.5:
                idx = np.arange(max(0, n - 30), n)
            else:
                idx = rng.choice(np.arange(max(0, n - 20), n), min(n, 12), replace=False)
            want = direct(cands, x[idx], scale, pairwise)
            for checked in (True, False):
                got = table(x, n, cands, idx, scale, nval, kind != 2, pairwise=pairwise, checked=checked)
                assert np.array_equal(got, want)
