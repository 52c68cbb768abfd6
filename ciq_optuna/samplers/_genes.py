"""Gene codes and operators: one gene per Optuna distribution.

Every parameter value is coded as a float so a population is a numpy matrix:
- ``ord``: an ordered discrete gene (integers, stepped floats, categoricals whose choices are all
  numbers), coded by the index of the value in sorted order; mutation moves to neighbours more
  often than to far values;
- ``cat``: an unordered categorical (strings, booleans, mixed), coded by the choice index;
  mutation re-draws another choice, which toggles a two-state (on/off, passed/not passed) gene;
- ``cont``: a continuous float or a log-scaled integer, coded by its position in [0, 1] of the
  transformed (log when ``log=True``) range; mutation is Gaussian in that space.
A parameter absent from a trial (a conditional parameter) is coded NaN.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

# Discrete ranges larger than this are handled as continuous positions.
_MAX_ORD = 1_000_000
_DECODE_TABLE = 4096  # discrete genes with at most this many values keep their values by code


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


class Gene:
    """Coding and operators of one parameter."""

    __slots__ = ("name", "dist", "kind", "n", "choices", "order", "rank", "sigma", "_decoded", "_codes")

    def __init__(self, name: str, dist: BaseDistribution) -> None:
        self.name = name
        self.dist = dist
        self.choices: list[Any] = []
        self.order: list[int] = []
        self.rank: dict[int, int] = {}
        self._decoded: list[Any] | None = None
        self._codes: dict[Any, float] = {}  # categorical: choice -> code (its first occurrence)
        if isinstance(dist, CategoricalDistribution):
            self.choices = list(dist.choices)
            self.n = len(self.choices)
            if self.n > 2 and all(_is_number(c) for c in self.choices):
                self.kind = "ord"
                self.order = sorted(range(self.n), key=lambda i: self.choices[i])
                self.rank = {ci: r for r, ci in enumerate(self.order)}
            else:
                self.kind = "cat"
            for i, c in enumerate(self.choices):
                self._codes.setdefault(c, float(self.rank[i]) if self.kind == "ord" else float(i))
        elif isinstance(dist, IntDistribution) and not dist.log:
            self.n = (dist.high - dist.low) // dist.step + 1
            self.kind = "ord" if self.n <= _MAX_ORD else "cont"
        elif isinstance(dist, FloatDistribution) and dist.step is not None:
            self.n = int(round((dist.high - dist.low) / dist.step)) + 1
            self.kind = "ord" if self.n <= _MAX_ORD else "cont"
        else:
            self.kind = "cont"
            self.n = 0 if isinstance(dist, FloatDistribution) else dist.high - dist.low + 1
        # Typical mutation step: ~10% of the range, at least one neighbour.
        self.sigma = max(1.0, 0.1 * self.n) if self.kind == "ord" else 0.1

    @property
    def size(self) -> float:
        """Number of distinct values (inf for a continuous float)."""
        if self.kind == "cont":
            return math.inf if isinstance(self.dist, FloatDistribution) else float(self.n)
        return float(self.n)

    def encode(self, value: Any) -> float:
        if self._codes:  # a choice: the code of the first equal one, as ``choices.index`` finds it
            try:
                return self._codes[value]
            except (KeyError, TypeError):
                pass
        d = self.dist
        if isinstance(d, CategoricalDistribution):
            try:
                idx = d.to_internal_repr(value)
            except ValueError:
                return math.nan
            return float(self.rank[int(idx)]) if self.kind == "ord" else float(idx)
        if self.kind == "ord":
            step = d.step if d.step is not None else 1
            return float(round((value - d.low) / step))
        lo, hi, v = float(d.low), float(d.high), float(value)
        if d.log:
            lo, hi, v = math.log(lo), math.log(hi), math.log(max(v, float(d.low)))
        return 0.0 if hi <= lo else min(1.0, max(0.0, (v - lo) / (hi - lo)))

    def decode(self, code: float) -> Any:
        table = self._decoded
        if table is not None:  # a discrete gene: its values by code, made once
            i = int(code)
            if 0 <= i < len(table):
                return table[i]
        elif self.kind != "cont" and 0 < self.n <= _DECODE_TABLE:
            self._decoded = [self._decode(float(i)) for i in range(self.n)]
        return self._decode(code)

    def _decode(self, code: float) -> Any:
        d = self.dist
        if isinstance(d, CategoricalDistribution):
            i = int(code)
            return self.choices[self.order[i] if self.kind == "ord" else i]
        if self.kind == "ord":
            i = int(code)
            if isinstance(d, IntDistribution):
                return d.low + i * d.step
            return min(float(d.high), d.low + i * d.step)
        lo, hi = float(d.low), float(d.high)
        if d.log:
            v = math.exp(math.log(lo) + code * (math.log(hi) - math.log(lo)))
        else:
            v = lo + code * (hi - lo)
        if isinstance(d, IntDistribution):
            return int(min(d.high, max(d.low, round(v))))
        return min(hi, max(lo, v))

    def snap(self, codes: np.ndarray) -> np.ndarray:
        """Codes moved onto the value they decode to, so equal values have equal codes (only
        log-scaled or huge integer ranges need it; other codes are exact already)."""
        d = self.dist
        if self.kind != "cont" or not isinstance(d, IntDistribution):
            return codes
        lo, hi = (math.log(d.low), math.log(d.high)) if d.log else (float(d.low), float(d.high))
        if hi <= lo:
            return np.zeros_like(codes)
        v = lo + codes * (hi - lo)
        v = np.round(np.exp(v)) if d.log else np.round(v)
        v = np.clip(v, d.low, d.high)
        return ((np.log(v) if d.log else v) - lo) / (hi - lo)

    def random_codes(self, rng: np.random.RandomState, m: int) -> np.ndarray:
        if self.kind == "cont":
            return rng.uniform(0.0, 1.0, m)
        return rng.randint(0, max(1, self.n), m).astype(float)

    def mutate(self, codes: np.ndarray, rng: np.random.RandomState, strength: float) -> np.ndarray:
        """Mutated copies of ``codes`` (never NaN); ``strength`` scales the step (1 = normal)."""
        m = len(codes)
        missing = np.isnan(codes)
        base = np.where(missing, self.random_codes(rng, m), codes)
        if self.kind == "cont":
            new = base + rng.normal(0.0, self.sigma * strength, m)
            new = np.abs(new)
            new = np.where(new > 1.0, 2.0 - new, new)
            return np.clip(new, 0.0, 1.0)
        if self.n <= 1:
            return np.zeros(m)
        if self.kind == "cat":
            return (base + rng.randint(1, self.n, m)) % self.n
        step = np.ceil(np.abs(rng.normal(0.0, self.sigma * strength, m)))
        step = np.maximum(step, 1.0) * np.where(rng.rand(m) < 0.5, -1.0, 1.0)
        new = base + step
        new = np.where(new < 0, base - step, new)
        new = np.where(new > self.n - 1, base - step, new)
        new = np.clip(new, 0, self.n - 1)
        # One in ten ordered mutations is a uniform re-draw, so far values stay reachable.
        far = rng.rand(m) < 0.1
        return np.where(far, rng.randint(0, self.n, m).astype(float), new)

    def distance(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Per-gene distance in [0, 1] between code arrays (broadcasting); NaN vs value = 1."""
        if self.kind == "cat":
            d = (a != b).astype(float)
        elif self.kind == "cont":
            d = np.abs(a - b)
        else:
            d = np.abs(a - b) / max(1, self.n - 1)
        na, nb = np.isnan(a), np.isnan(b)
        d = np.where(na | nb, 1.0, d)
        return np.where(na & nb, 0.0, d)


_CONT_STEPS = (-0.3, -0.1, -0.03, 0.03, 0.1, 0.3)  # moves of a continuous gene's [0, 1] code
_WIDE = 16  # an ordered gene with more values gets geometric steps (1, 2, 4, ...) and re-draws


def neighbours(
    row: np.ndarray, kind: np.ndarray, nval: np.ndarray, rng: np.random.RandomState, depth: int = 1
) -> np.ndarray:
    """Every genome that differs from ``row`` in one present gene (the one-gene neighbourhood
    that local search walks): every other value of a discrete gene (for an ordered gene with
    more than ``_WIDE`` values: steps of 1, 2, 4, ... either way plus a few uniform re-draws),
    a few steps of a continuous code.  ``kind``: 0 ordered, 1 categorical, 2 continuous.
    ``depth=2``: the genomes that differ in exactly two genes instead (pairs of genes that only
    work when changed together, such as a tile size and its stride), sorted (``np.unique``).

    Random numbers are drawn for the wide ordered genes only (see :func:`draws_random`): four per
    such gene and genome whose neighbourhood is listed, the one-gene neighbours of ``row`` being
    listed first for ``depth=2``."""
    present = np.flatnonzero(~np.isnan(row)).tolist()
    values = row.tolist()
    kinds = kind.tolist()
    sizes = [int(n) for n in nval.tolist()]
    moves = [(j, _values(values[j], kinds[j], sizes[j], rng)) for j in present]
    first = _apply(row, moves)
    if depth != 2 or not len(first):
        return first
    wide = [j for j in present if _is_wide(kinds[j], sizes[j])]
    # The draws of every first neighbour's wide genes, in the order of a loop over first
    # neighbours and their wide genes (the same numbers as drawn one by one).
    highs = np.tile(np.repeat([sizes[k] for k in wide], 4), len(first))
    pre = rng.randint(0, highs).reshape(len(first), len(wide), 4) if len(highs) else None
    # A two-gene neighbour is a first neighbour (gene j set to v) with another present gene k
    # set to one of k's values: those that need no draw (every other value, or a wide gene's
    # steps) plus, for a wide k, its re-draws for that first neighbour.  The result is sorted and
    # unique, so the order in which the rows are made does not matter.
    at_gene = np.array([j for j, vals in moves for _ in vals])
    plain = [(k, w) for k in present for w in _values(values[k], kinds[k], sizes[k], rng, [])]
    gk = np.array([k for k, _ in plain], dtype=np.intp)
    gw = np.array([w for _, w in plain], dtype=float)
    i, m = np.nonzero(at_gene[:, None] != gk[None, :])
    parts = [_set_one(first[i], gk[m], gw[m])]
    for q, k in enumerate(wide):
        drawn = pre[:, q, :].astype(float)
        # Each value once per first neighbour, as a set of k's values (rows with an absent gene
        # are not made unique below: np.unique keeps NaN rows apart).
        keep = (at_gene[:, None] != k) & (drawn != values[k]) & ~np.isin(drawn, gw[gk == k])
        for c in range(1, 4):
            keep[:, c] &= (drawn[:, :c] != drawn[:, c : c + 1]).all(axis=1)
        i, c = np.nonzero(keep)
        parts.append(_set_one(first[i], np.full(len(i), k), drawn[i, c]))
    return _unique_rows(np.concatenate(parts))


def _set_one(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """``rows`` (a fresh copy) with, in each, the gene ``cols[i]`` set to ``vals[i]``."""
    rows[np.arange(len(rows)), cols] = vals
    return rows


def _unique_rows(rows: np.ndarray) -> np.ndarray:
    """``np.unique(rows, axis=0)``, faster: a lexical sort of the columns, then the rows that
    differ from the one before (NaN-free rows; others go to ``np.unique``)."""
    if len(rows) < 2 or np.isnan(rows).any():
        return np.unique(rows, axis=0)
    rows = rows[np.lexsort(rows.T[::-1])]
    keep = np.ones(len(rows), dtype=bool)
    keep[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    return rows[keep]


def draws_random(row: np.ndarray, kind: np.ndarray, nval: np.ndarray) -> bool:
    """Whether :func:`neighbours` of ``row`` draws random numbers (a wide ordered gene is
    present); if not, its result depends on ``row``, ``kind`` and ``nval`` alone."""
    wide = (kind == 0) & (nval > _WIDE)
    return bool((wide & ~np.isnan(row)).any())


def _is_wide(kind: int, n: int) -> bool:
    return kind == 0 and n > _WIDE


def _values(v: float, kind: int, n: int, rng: np.random.RandomState, drawn: list[int] | None = None) -> list[float]:
    """The other values of one present gene with code ``v`` (sorted); ``drawn``: the re-draws of
    a wide ordered gene, drawn beforehand from ``rng``."""
    if kind == 2:
        return sorted({min(1.0, max(0.0, v + step)) for step in _CONT_STEPS} - {v})
    if n <= _WIDE or kind == 1:
        return [float(i) for i in range(n) if i != v]
    steps = [2.0**i for i in range(int(math.log2(n)) + 1)]
    vals = [v + s for s in steps] + [v - s for s in steps] + [float(x) for x in (rng.randint(0, n, 4) if drawn is None else drawn)]
    return sorted({x for x in vals if 0 <= x <= n - 1 and x != v})  # in Python: a few values


def _apply(row: np.ndarray, moves: list[tuple[int, list[float]]]) -> np.ndarray:
    """Copies of ``row``, one per (gene, value) of ``moves``, with that gene set to that value."""
    cols = [j for j, vals in moves for _ in vals]
    out = np.repeat(row[None, :], len(cols), axis=0)
    out[np.arange(len(cols)), cols] = [v for _, vals in moves for v in vals]
    return out


def compatible(old: BaseDistribution, new: BaseDistribution) -> bool:
    """Whether codes made for ``old`` mean the same values under ``new``."""
    return old == new
