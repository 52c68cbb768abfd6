"""The mutation of GeneticSampler's children, worked out on the mutated genes only.

Every random number is still drawn for the whole (children x genes) block, in the same order, so
the random stream (and every later proposal) is the one of the plain formula; but the draws are
read at the mutated positions by one flat ``take`` each (a few hundred entries out of thousands),
and the per-gene tables are gathered once by column, instead of a boolean mask over every block
and over broadcast copies of the tables.  Each value is the same floating-point operation on the
same operands as in the plain formula, so the children are bit-identical.
"""

from __future__ import annotations

import numpy as np

_CONT = 2  # the code of a continuous gene in the kind table


def mutate(
    rng: np.random.RandomState,
    x: np.ndarray,
    strength: float,
    mask: np.ndarray,
    kind: np.ndarray,
    nval: np.ndarray,
    sigma: np.ndarray,
) -> np.ndarray:
    """``x`` (children x genes) with the genes in ``mask`` mutated: an absent gene starts from a
    random value; an ordered gene takes a signed step of at least one (mostly small; one in ten
    is a uniform re-draw), a categorical one another choice, a continuous one a Gaussian step in
    [0, 1], reflected at the ends.  ``kind``, ``nval``, ``sigma``: per gene (kind 0 ordered, 1
    categorical, 2 continuous)."""
    m, d = x.shape
    at = np.flatnonzero(mask)  # mutated positions, in row-major order (as boolean indexing)
    col = at % d
    k, n, sg = kind[col], nval[col], sigma[col]
    xm = x.take(at)
    u = rng.rand(m, d).take(at)  # a random genome's codes, for absent genes
    base = np.where(np.isnan(xm), np.where(k == _CONT, u, np.floor(u * n)), xm)
    step = np.maximum(1.0, np.ceil(np.abs(rng.normal(0.0, 1.0, (m, d)).take(at) * sg * strength)))
    step *= np.where(rng.rand(m, d).take(at) < 0.5, -1.0, 1.0)
    ordv = base + step
    ordv = np.where((ordv < 0) | (ordv > n - 1), base - step, ordv)
    ordv = np.clip(ordv, 0, n - 1)
    far = rng.rand(m, d).take(at) < 0.1
    ordv = np.where(far, np.floor(rng.rand(m, d).take(at) * n), ordv)
    catv = (base + 1 + np.floor(rng.rand(m, d).take(at) * np.maximum(1, n - 1))) % n
    contv = np.abs(base + rng.normal(0.0, 0.1 * strength, (m, d)).take(at))
    contv = np.clip(np.where(contv > 1.0, 2.0 - contv, contv), 0.0, 1.0)
    out = x.copy()
    out.ravel()[at] = np.select([k == 0, k == 1], [ordv, catv], contv)
    return out
