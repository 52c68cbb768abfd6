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


def repairs(row: np.ndarray, cands: np.ndarray, failed: set[bytes], keys, ok: set[bytes] | None = None) -> np.ndarray:
    """Mask of the two-gene neighbours ``cands`` of ``row`` that hold a one-gene move of ``row``
    whose configuration failed (``failed``: keys of failed configurations, ``keys``: the
    function that makes a row matrix's keys); with ``ok`` (keys of complete configurations),
    only those whose other one-gene move is complete: the change that works alone, with the one
    that needs it."""
    if not failed or not len(cands):
        return np.zeros(len(cands), dtype=bool)
    same = (cands == row) | (np.isnan(cands) & np.isnan(row))
    hit = []
    for k in range(2):  # the first, then the second changed gene of each pair
        j = np.argsort(same, axis=1, kind="stable")[:, k]  # changed genes sort first
        single = np.repeat(row[None, :], len(cands), axis=0)
        single[np.arange(len(cands)), j] = cands[np.arange(len(cands)), j]
        hit.append(keys(single))
    bad = [np.fromiter((key in failed for key in h), dtype=bool, count=len(cands)) for h in hit]
    if ok is None:
        return bad[0] | bad[1]
    good = [np.fromiter((key in ok for key in h), dtype=bool, count=len(cands)) for h in hit]
    return (bad[0] & good[1]) | (bad[1] & good[0])
