"""GeneticSampler's children drawn with a numpy ``Generator`` (PCG64) and only the random numbers
they use: the tournament, crossover and mutation of the legacy path (``GeneticSampler._breed``
with :func:`ciq_optuna.samplers._mutation.mutate`) by the same distributions, at a fraction of its
cost.

The legacy path draws seven uniform and two normal (children x genes) blocks per batch from a
``RandomState`` and reads a few hundred entries of them; a legacy normal costs about four times a
uniform.  Here the crossover mask comes from random bits, the mutation mask from one float32
block, and the mutation of the (few) mutated genes from one normal and two uniform numbers per
mutated gene: the normal gives an ordered gene's step (its magnitude) and direction (its sign,
independent of the magnitude for a symmetric law) and a continuous gene's Gaussian step; one
uniform ``v`` gives both the one-in-ten far re-draw of an ordered gene (``v < 0.1``) and its value
(``10 v`` is uniform in [0, 1) given ``v < 0.1``), or a categorical gene's new choice; the other
the value of an absent gene.  The proposals differ from the legacy path's (another stream), not
their law.
"""

from __future__ import annotations

import numpy as np

_CONT = 2  # the code of a continuous gene in the kind table


def breed(
    gen: np.random.Generator,
    x: np.ndarray,
    m: int,
    strength: float,
    crossover: str,
    crossover_prob: float,
    mutable: np.ndarray,
    rate: float | None,
    tables: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> np.ndarray:
    """``m`` children of the elite rows ``x`` (sorted best first): each parent the better of two
    drawn rows, crossover with ``crossover_prob``, then mutation of each mutable gene with
    probability ``rate * strength`` (``rate`` None: one over the mutable genes), at least one gene
    per child.  ``mutable``: per gene, bool; ``tables``: per gene kind, values, sigma."""
    k, d = x.shape
    t = gen.integers(0, k, (4, m))
    pa = x.take(np.minimum(t[0], t[1]), axis=0)  # ``take``: the rows, faster than indexing
    child = pa
    if crossover != "none" and k > 1:
        pb = x.take(np.minimum(t[2], t[3]), axis=0)
        if crossover == "uniform":
            bits = np.frombuffer(gen.bytes((m * d + 7) // 8), dtype=np.uint8)
            mask = np.unpackbits(bits, count=m * d).reshape(m, d).view(bool)
        else:
            cuts = np.sort(gen.integers(0, d + 1, (m, 2)), axis=1)
            if crossover == "onepoint":
                cuts[:, 1] = d
            cols = np.arange(d)
            mask = (cols >= cuts[:, :1]) & (cols < cuts[:, 1:])
        mask &= (gen.random(m) < crossover_prob)[:, None] & ~np.isnan(pb)
        child = np.where(mask, pb, pa)
    cols = np.flatnonzero(mutable)
    if len(cols) == 0:
        return child
    p = min(1.0, (rate if rate is not None else 1.0 / len(cols)) * strength)
    mut = np.zeros((m, d), dtype=bool)
    mut[:, cols] = gen.random((m, len(cols)), dtype=np.float32) < p
    none = np.flatnonzero(~mut.any(axis=1))
    mut[none, cols[gen.integers(0, len(cols), len(none))]] = True
    return mutate_drawn(gen, child, strength, mut, *tables)


def mutate_drawn(
    gen: np.random.Generator,
    x: np.ndarray,
    strength: float,
    mask: np.ndarray,
    kind: np.ndarray,
    nval: np.ndarray,
    sigma: np.ndarray,
) -> np.ndarray:
    """``x`` (children x genes) with the genes in ``mask`` mutated, by the law of
    :func:`ciq_optuna.samplers._mutation.mutate` (absent genes start from a random value; ordered:
    a signed step of at least one, one in ten a uniform re-draw; categorical: another choice;
    continuous: a Gaussian step reflected into [0, 1]), drawing three numbers per mutated gene."""
    d = x.shape[1]
    at = np.flatnonzero(mask)
    col = at % d
    k, n, sg = kind[col], nval[col], sigma[col]
    xm = x.take(at)
    u = gen.random((2, len(at)))
    z = gen.standard_normal(len(at))
    base = np.where(np.isnan(xm), np.where(k == _CONT, u[0], np.floor(u[0] * n)), xm)
    step = np.maximum(1.0, np.ceil(np.abs(z * sg * strength)))
    step = np.where(z < 0, -step, step)
    ordv = base + step
    ordv = np.where((ordv < 0) | (ordv > n - 1), base - step, ordv)
    v = u[1]
    far = v < 0.1
    ordv = np.clip(np.where(far, np.floor(v * 10.0 * n), ordv), 0, n - 1)
    catv = (base + 1 + np.floor(v * np.maximum(1, n - 1))) % n
    out = x.copy()
    if _CONT in kind.tolist():
        contv = np.abs(base + 0.1 * strength * z)
        contv = np.clip(np.where(contv > 1.0, 2.0 - contv, contv), 0.0, 1.0)
        out.ravel()[at] = np.select([k == 0, k == 1], [ordv, catv], contv)
    else:  # no continuous gene: the same values, without working them out
        out.ravel()[at] = np.where(k == 0, ordv, catv)
    return out
