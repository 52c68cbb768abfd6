"""Gene-pair value statistics: what the per-gene statistics of ``_surrogate.py`` miss.

Two genes may only be good together (a tile size and its stride, a block size and the vector
width it must hold).  Each pair of genes counts its value pairs among the good trials and among
the others; a candidate's pair term is the sum over its pairs of how much likelier its value pair
is among the good trials than the two values' own densities predict (an interaction: 0 when the
genes are independent).  Each pair's densities are smoothed towards the product of the per-gene
densities with one trial of prior weight, so pairs seen seldom add little.
"""

from __future__ import annotations

import numpy as np


class PairCounts:
    """Value-pair counts over every pair of genes with more than one value.

    Rows are given as local cells: per gene, the value's index in ``[0, sizes)``, -1 if absent."""

    __slots__ = ("first", "second", "stride", "offsets", "seen", "total", "good", "total_n", "good_n")

    def __init__(self, sizes: np.ndarray) -> None:
        genes = np.where(sizes > 1)[0]
        a, b = np.triu_indices(len(genes), 1)
        self.first, self.second = genes[a], genes[b]
        self.stride = sizes[self.second].astype(np.int64)
        cells = sizes[self.first] * self.stride
        self.offsets = np.concatenate([[0], np.cumsum(cells)[:-1]]).astype(np.int64)
        self.seen = np.empty((0, len(self.first)), dtype=np.int64)
        size = int(cells.sum())
        self.total = np.zeros(size)
        self.good = np.zeros(size)
        self.total_n = np.zeros(len(self.first))
        self.good_n = np.zeros(len(self.first))

    def cells(self, local: np.ndarray) -> np.ndarray:
        """Flat table index of every value pair of ``local`` rows (-1 where a gene is absent)."""
        x, y = local[:, self.first], local[:, self.second]
        return np.where((x >= 0) & (y >= 0), x * self.stride + y + self.offsets, -1)

    def update(self, new_local: np.ndarray, good: np.ndarray) -> None:
        """Count the rows added since the last update, and the good rows (indices into all rows
        counted) again."""
        size = len(self.total)
        if len(new_local) and len(self.first):
            cells = self.cells(new_local)
            present = cells >= 0
            self.total += np.bincount(cells[present], minlength=size)
            self.total_n += present.sum(axis=0)
            self.seen = np.concatenate([self.seen, cells])
        g = self.seen[good] if len(self.seen) else self.seen
        self.good = np.bincount(g[g >= 0], minlength=size).astype(float)
        self.good_n = (g >= 0).sum(axis=0).astype(float)

    def interaction(self, local: np.ndarray, good: np.ndarray, other: np.ndarray) -> np.ndarray:
        """Sum over pairs of log(other pair density / product of the two other densities) minus
        the same for the good trials (lower: the pair is likelier among the good trials than its
        values alone say); ``good`` and ``other`` are the smoothed per-gene densities of the
        candidates' values (columns per gene)."""
        if not len(self.first):
            return np.zeros(len(local))
        cells = self.cells(local)
        present = cells >= 0
        idx = np.where(present, cells, 0)
        g0 = good[:, self.first] * good[:, self.second]
        o0 = other[:, self.first] * other[:, self.second]
        g = (self.good[idx] + g0) / (self.good_n + 1.0)
        o = (self.total[idx] - self.good[idx] + o0) / (self.total_n - self.good_n + 1.0)
        return np.where(present, np.log(o / o0) - np.log(g / g0), 0.0).sum(axis=1)
