"""The earlier trials a new compiled trial can give binary evidence with, without a scan of all.

:class:`~ciq_optuna.samplers._binaries.BinaryModel` pairs each new trial with the earlier ones
that gave the same binary (an inert change, when a few genes apart) and with those one gene apart
that gave another binary (a change that mattered).  Comparing the new trial with every earlier
one grew with the study; here the first come from a list per binary, the second from a sorted
array of hashes of every trial's settings with one gene masked (made once ``_REBUILD`` trials
were looked up, then again every ``_REBUILD`` trials; the trials since compared directly).
"""

from __future__ import annotations

import bisect
import functools

import numpy as np

# Trials added since the sorted hashes were made before they are made again.
_REBUILD = 256


class Neighbours:
    """Candidate partners of a trial among the earlier ones (rows of settings, absent = -1)."""

    def __init__(self) -> None:
        self._by_binary: dict[int, list[int]] = {}
        self._upto = 0  # trials in the sorted hashes
        self._width = -1  # columns of the rows they were made from
        self._keys = np.empty(0, dtype=np.uint64)  # masked hashes, sorted
        self._at = np.empty(0, dtype=np.int64)  # per sorted hash: its trial
        self._asked = 0

    def add(self, binary: int, k: int) -> None:
        """Trial ``k`` (added in order) gave binary ``binary``."""
        self._by_binary.setdefault(binary, []).append(k)

    def same_binary(self, binary: int, k: int) -> np.ndarray:
        """The trials before ``k`` that gave ``binary``, ascending."""
        trials = self._by_binary.get(binary, [])
        return np.array(trials[: bisect.bisect_left(trials, k)], dtype=np.int64)

    def one_apart(self, rows: np.ndarray, k: int) -> np.ndarray | None:
        """A superset of the trials before ``k`` whose settings differ from trial ``k``'s in one
        gene at most (the caller checks them), ascending, without repeats; None: every trial
        before ``k``.  ``rows``: every trial's settings up to ``k`` at least."""
        self._asked += 1
        if self._asked <= _REBUILD:  # a short-lived model: the sorted hashes would not pay
            return None
        if rows.shape[1] != self._width or k - self._upto > _REBUILD:
            self._build(rows, k)
        row = rows[k : k + 1]
        near = [np.arange(self._upto, k, dtype=np.int64)] if k > self._upto else []
        if self._upto:
            keys = _masked(row)[0]
            lo = np.searchsorted(self._keys, keys, side="left")
            hi = np.searchsorted(self._keys, keys, side="right")
            for c in np.flatnonzero(hi > lo).tolist():
                near.append(self._at[lo[c] : hi[c]])
        if not near:
            return np.empty(0, dtype=np.int64)
        found = np.unique(np.concatenate(near))
        return found[found < k]

    def _build(self, rows: np.ndarray, k: int) -> None:
        self._width, self._upto = rows.shape[1], k
        keys = _masked(rows[:k]).reshape(-1)
        order = np.argsort(keys, kind="stable")
        self._keys = keys[order]
        self._at = (order // max(self._width, 1)).astype(np.int64)


def _masked(rows: np.ndarray) -> np.ndarray:
    """Per row and gene ``c``: a 64-bit hash of the row's settings with gene ``c`` left out
    (equal rows but for gene ``c`` hash alike in column ``c``; columns salted apart)."""
    weights, salts = _constants(rows.shape[1])
    parts = mixed(rows) * weights
    return parts.sum(axis=1, dtype=np.uint64)[:, None] - parts + salts


def mixed(rows: np.ndarray) -> np.ndarray:
    """Each float of ``rows`` mixed into 64 bits (equal floats alike; -0.0 as 0.0)."""
    x = np.ascontiguousarray(rows + 0.0).view(np.uint64)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


@functools.cache
def _constants(d: int) -> tuple[np.ndarray, np.ndarray]:
    """Fixed random odd 64-bit weights and salts for ``d`` columns."""
    rng = np.random.default_rng(d + 1)
    weights = rng.integers(0, 2**63, d, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    return weights, rng.integers(0, 2**63, d, dtype=np.uint64)
