"""Per-gene value statistics of good against other trials: a cheap surrogate for GeneticSampler.

Each gene value is scored, TPE-like, by how much likelier it is among the best evaluated trials
than among the others (failures count among the others), with a uniform prior of one trial per
gene; a candidate's score is the sum of ``log(other density / good density)`` over its present
genes (lower is more promising).  Counts are kept per table cell (gene, value) and updated with
the trials added since the last call, so many candidate children can be compared for the cost of
a table look-up each.  Continuous genes are counted in ``bins`` equal bins of their [0, 1] code.
With ``pair_weight``, the gene-pair interactions of ``_pairs.py`` are added to the score.
"""

from __future__ import annotations

import numpy as np

from ciq_optuna.samplers._pairs import PairCounts


class ValueCounts:
    """Value counts of evaluated genomes, per gene, for the good rows and for all rows.

    ``rows`` is the genome matrix the counts were made from (kept to notice that the caller
    replaced it); ``n`` is the number of its rows counted so far; ``pair_weight`` > 0: the score
    adds that weight times the gene-pair interactions (:class:`PairCounts`)."""

    __slots__ = ("sizes", "offsets", "bins", "cont", "any_cont", "top", "prior", "rows", "d", "n", "cells_seen",
                 "good", "total", "good_n", "total_n", "pairs", "pair_weight")

    def __init__(
        self, kind: np.ndarray, nval: np.ndarray, rows: np.ndarray, bins: int = 8, pair_weight: float = 0.0
    ) -> None:
        self.cont = kind == 2
        self.bins = bins
        self.sizes = np.where(self.cont, bins, np.maximum(nval, 1)).astype(np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)
        self.any_cont = bool(self.cont.any())
        self.top = self.sizes - 1  # the last value (bin) of each gene
        self.prior = 1.0 / self.sizes  # one trial of prior weight, spread over the gene's values
        self.rows = rows
        self.d = len(self.sizes)
        self.n = 0
        self.cells_seen = np.empty((0, self.d), dtype=np.int64)
        size = int(self.sizes.sum())
        self.good = np.zeros(size)
        self.total = np.zeros(size)
        self.good_n = np.zeros(self.d)
        self.total_n = np.zeros(self.d)
        self.pair_weight = pair_weight
        self.pairs = PairCounts(self.sizes) if pair_weight > 0 else None

    def cells(self, codes: np.ndarray) -> np.ndarray:
        """Flat table index of every gene value (-1 where the gene is absent)."""
        c = np.where(np.isnan(codes), -1.0, codes)  # codes are finite: as nan_to_num(nan=-1), cheaper
        if self.any_cont:
            c = np.where(self.cont, np.minimum(c * self.bins, self.bins - 1), c)
        c = np.minimum(c.astype(np.int64), self.top)
        return np.where(c >= 0, c + self.offsets, -1)

    def update(self, new_rows: np.ndarray, good: np.ndarray) -> None:
        """Count ``new_rows`` (the genomes evaluated since the last update) into the totals and
        count the current good rows (indices into all rows counted) again."""
        size = len(self.total)
        if len(new_rows):
            cells = self.cells(new_rows)
            present = cells >= 0
            self.total += np.bincount(cells[present], minlength=size)
            self.total_n += present.sum(axis=0)
            self.cells_seen = np.concatenate([self.cells_seen, cells])
            self.n += len(new_rows)
        g = self.cells_seen[good]
        self.good = np.bincount(g[g >= 0], minlength=size).astype(float)
        self.good_n = (g >= 0).sum(axis=0).astype(float)
        if self.pairs is not None:
            self.pairs.update(self._local(cells) if len(new_rows) else np.empty((0, self.d), np.int64), good)

    def _local(self, cells: np.ndarray) -> np.ndarray:
        """Per-gene value index of flat cells (-1 where absent)."""
        return np.where(cells >= 0, cells - self.offsets, -1)

    def score(self, cands: np.ndarray) -> np.ndarray:
        """Sum over present genes of log(density among the others / density among the good)."""
        cells = self.cells(cands)
        present = cells >= 0
        idx = np.where(present, cells, 0)
        prior = self.prior
        good = (self.good[idx] + prior) / (self.good_n + 1.0)
        other = (self.total[idx] - self.good[idx] + prior) / (self.total_n - self.good_n + 1.0)
        score = np.where(present, np.log(other / good), 0.0).sum(axis=1)
        if self.pairs is not None:
            score = score + self.pair_weight * self.pairs.interaction(self._local(cells), good, other)
        return score

    def pair_risk(self, cands: np.ndarray, rate: float) -> np.ndarray:
        """With the failed rows counted as the good ones (and ``pair_weight`` > 0): the highest
        smoothed failure rate among the candidates' value pairs (a constraint between two genes
        fails on values that each work with other partners); a pair's prior is the higher of its
        two values' smoothed rates, whose prior is the study's failure rate ``rate``."""
        pairs = self.pairs
        if pairs is None or not len(pairs.first):
            return np.zeros(len(cands))
        cells = self.cells(cands)
        single = (self.good[np.maximum(cells, 0)] + 2.0 * rate) / (self.total[np.maximum(cells, 0)] + 2.0)
        pc = pairs.cells(self._local(cells))
        idx = np.maximum(pc, 0)
        prior = np.maximum(single[:, pairs.first], single[:, pairs.second])
        risk = (pairs.good[idx] + 2.0 * prior) / (pairs.total[idx] + 2.0)
        return np.where(pc >= 0, risk, 0.0).max(axis=1)

    def rarity(self, cands: np.ndarray) -> np.ndarray:
        """Mean share of evaluated trials that hold each of the candidate's values (lower: a
        less explored combination of values)."""
        cells = self.cells(cands)
        present = cells >= 0
        idx = np.where(present, cells, 0)
        share = self.total[idx] / np.maximum(1.0, self.total_n)
        return np.where(present, share, 0.0).sum(axis=1) / np.maximum(1, present.sum(axis=1))
