"""Two-gene moves that repair a failing one-gene move (GeneticSampler's local search).

A configuration's better neighbour is often two genes away because one of the two changes fails
on its own: a vector width that the block dimension must divide, a tile size that needs its
stride.  Once the one-gene neighbourhood of a trial has been evaluated, the two-gene moves that
contain a one-gene move that failed are the ones that can reach what the failure hid; the value
statistics rank such pairs low (the failing value is rare among good trials), so they are taken
first.
"""

from __future__ import annotations

import numpy as np


def repairs(
    row: np.ndarray,
    cands: np.ndarray,
    failed: set[bytes],
    keys,
    ok: set[bytes] | None = None,
    hit: tuple[list[bytes], np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Mask of the two-gene neighbours ``cands`` of ``row`` that hold a one-gene move of ``row``
    whose configuration failed (``failed``: keys of failed configurations, ``keys``: the
    function that makes a row matrix's keys); with ``ok`` (keys of complete configurations),
    only those whose other one-gene move is complete: the change that works alone, with the one
    that needs it.  ``hit``: :func:`pair_move_keys` of ``cands`` when already made."""
    if not failed or not len(cands):
        return np.zeros(len(cands), dtype=bool)
    unique, first, second = pair_move_keys(row, cands, keys) if hit is None else hit
    bad = np.fromiter((key in failed for key in unique), dtype=bool, count=len(unique))
    if ok is None:
        return bad[first] | bad[second]
    good = np.fromiter((key in ok for key in unique), dtype=bool, count=len(unique))
    return (bad[first] & good[second]) | (bad[second] & good[first])


def pair_move_keys(row: np.ndarray, cands: np.ndarray, keys) -> tuple[list[bytes], np.ndarray, np.ndarray]:
    """The distinct one-gene moves of ``row`` that the two-gene neighbours ``cands`` are made of:
    their keys (``keys``: the function that makes a row matrix's keys), and per neighbour the
    index of its first and of its second move among them.  A move depends only on its gene and
    value, so each distinct move is keyed once."""
    n = len(cands)
    if not n:
        return [], np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
    same = (cands == row) | (np.isnan(cands) & np.isnan(row))
    order = np.argsort(same, axis=1, kind="stable")[:, :2]  # changed genes sort first
    at = np.arange(n)
    genes = np.concatenate([order[:, 0], order[:, 1]])
    values = np.concatenate([cands[at, order[:, 0]], cands[at, order[:, 1]]])
    nan = np.isnan(values)
    sort = np.lexsort((np.where(nan, 0.0, values), nan, genes))
    g, v, m = genes[sort], values[sort], nan[sort]
    first = np.ones(len(g), dtype=bool)
    first[1:] = (g[1:] != g[:-1]) | (m[1:] != m[:-1]) | ((v[1:] != v[:-1]) & ~m[1:])
    group = np.empty(len(g), dtype=np.intp)
    group[sort] = np.cumsum(first) - 1
    u = sort[first]
    moves = np.repeat(row[None, :], len(u), axis=0)
    moves[np.arange(len(u)), genes[u]] = values[u]
    return keys(moves), group[:n], group[n:]
