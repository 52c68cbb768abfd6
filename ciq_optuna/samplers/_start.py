"""The start of a GeneticSampler search: generation 0 as a low-discrepancy design, and when
breeding may begin inside it.

Two designs: :class:`SobolStart` below, and :class:`QMCStart`, the points of Optuna's default
``QMCSampler`` in the same order and mapping.

A random generation 0 may draw the same value of a gene many times and leave others untried; a
scrambled Sobol sequence (``scipy.stats.qmc.Sobol``, scrambled per sampler seed, the machinery
behind Optuna's ``QMCSampler``) spreads the first trials evenly over every gene's values and over
pairs of genes.  Point ``i`` of the sequence is the design row of trial number ``i``, so workers
that share a seed propose the same design and the duplicate filter keeps them apart.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
from optuna.distributions import CategoricalDistribution, IntDistribution

from ciq_optuna.samplers._genes import Gene


class SobolStart:
    """Design rows of generation 0 in gene codes: ``floor(u * n)`` for a discrete gene of ``n``
    values, ``u`` for a continuous code in [0, 1]."""

    __slots__ = ("seed", "_d", "_points")

    def __init__(self, seed: int | None) -> None:
        self.seed = seed
        self._d = -1
        self._points = np.empty((0, 0))

    def row(self, number: int, kind: np.ndarray, nval: np.ndarray) -> np.ndarray:
        """The design row of trial ``number`` for genes of kinds ``kind`` (2: continuous) and
        ``nval`` values; the sequence starts again when genes were added (a conditional
        parameter seen for the first time)."""
        d = len(kind)
        if d != self._d or number >= len(self._points):
            from scipy.stats import qmc

            engine = qmc.Sobol(d, scramble=True, seed=self.seed)
            with warnings.catch_warnings():  # balance properties need powers of two: we take one
                warnings.simplefilter("ignore")
                self._points = engine.random_base2(max(5, math.ceil(math.log2(number + 1))))
            self._d = d
        u = self._points[number]
        return np.where(kind == 2, u, np.minimum(np.floor(u * nval), np.maximum(nval - 1, 0)))


def breeds_early(number: int, pool_size: int, share: float, n_complete: int, every: int = 1) -> bool:
    """Whether trial ``number`` of generation 0 already breeds from the complete trials: from slot
    ``share * pool_size`` on (``share`` 0 or at least 1: never), once two trials are complete;
    of those slots only every ``every``-th (counted from the first), so the rest stay random."""
    first = math.ceil(share * pool_size)
    return (
        0.0 < share < 1.0
        and first <= number < pool_size
        and (number - first) % max(1, every) == 0
        and n_complete >= 2
    )


class QMCStart:
    """Design rows of generation 0 as Optuna's default ``QMCSampler`` (unscrambled Sobol, the
    same points for every seed) samples them, in gene codes: point ``i`` for trial ``i + 1``.

    The mapping of a point ``u`` to a value follows that sampler's: a categorical takes choice
    ``floor(u * n)``, so does an integer of ``n`` values; a stepped float takes index
    ``u * n - 1/2`` rounded half to even; a continuous gene keeps ``u`` (a log-scaled integer
    is rounded on Optuna's side from a range widened by half a step, so it may differ there).  The first ``d`` coordinates of an
    unscrambled Sobol point do not depend on the dimension, so a gene seen later (a conditional
    parameter) adds a column and leaves the others as they were.
    """

    __slots__ = ("_points",)

    def __init__(self) -> None:
        self._points = np.empty((0, 0))

    def points(self, first: int, m: int, d: int) -> np.ndarray:
        """Sobol points ``first`` to ``first + m - 1`` in ``d`` dimensions, in [0, 1)."""
        if d > self._points.shape[1] or first + m > len(self._points):
            from scipy.stats import qmc

            n = max(64, 1 << math.ceil(math.log2(first + m)), len(self._points))
            self._points = qmc.Sobol(max(d, self._points.shape[1]), scramble=False).random_base2(int(math.log2(n)))
        return self._points[first : first + m, :d]

    def rows(self, first: int, m: int, genes: Sequence[Gene]) -> np.ndarray:
        """Design rows ``first`` to ``first + m - 1`` (point ``i`` is row ``i``) as gene codes."""
        u = self.points(first, m, len(genes))
        out = np.empty_like(u)
        for j, g in enumerate(genes):
            out[:, j] = _codes(g, u[:, j])
        return out


def _codes(gene: Gene, u: np.ndarray) -> np.ndarray:
    """Gene codes of the unit coordinates ``u`` by ``QMCSampler``'s mapping (see QMCStart)."""
    if gene.kind == "cont":
        return u
    if isinstance(gene.dist, CategoricalDistribution):
        index = np.minimum(np.floor(u * gene.n), gene.n - 1).astype(int)
        return np.array([gene.encode(gene.choices[i]) for i in index], dtype=float)
    if isinstance(gene.dist, IntDistribution):
        return np.minimum(np.floor(u * gene.n), gene.n - 1)
    return np.clip(np.round(u * gene.n - 0.5), 0, gene.n - 1)
