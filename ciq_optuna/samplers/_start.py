"""The start of a GeneticSampler search: generation 0 as a low-discrepancy design, and when
breeding may begin inside it.

A random generation 0 may draw the same value of a gene many times and leave others untried; a
scrambled Sobol sequence (``scipy.stats.qmc.Sobol``, scrambled per sampler seed, the machinery
behind Optuna's ``QMCSampler``) spreads the first trials evenly over every gene's values and over
pairs of genes.  Point ``i`` of the sequence is the design row of trial number ``i``, so workers
that share a seed propose the same design and the duplicate filter keeps them apart.
"""

from __future__ import annotations

import math
import warnings

import numpy as np


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
