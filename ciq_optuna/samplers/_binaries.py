"""Which gene changes leave the compiled binary unchanged: learnt from a trial attribute.

A compile objective records the code hash of each trial's binary (user attribute
``binary_hash``).  Two compiled trials that differ only in a few genes and gave the same binary
show that those value changes were inert for this kernel; two trials that differ in one gene and
gave different binaries show that this value change matters.  Per gene, values linked by inert
changes form classes, and two configurations whose values fall in the same class for every gene
are predicted to compile to the same binary.

Context: a value change that was inert in one trial pair and mattered in another (e.g. a
register-usage level, ignored at ``-O0`` only) makes the genes where the two pairs' settings
differed *switches* of that gene; its classes are then learnt separately for each setting of
its switches, from the evidence taken in that setting (a change that mattered there splits its
two values off their class).  A failed prediction (a checked candidate that gave another binary
than predicted) counts as "mattered" for every value change between the two configurations.
"""

from __future__ import annotations

import numpy as np

# Same-binary pairs differing in at most this many genes count as evidence that each of those
# value changes is inert.
_SAME_MAX_GENES = 2


class BinaryModel:
    """Evidence and predictions over coded configurations (rows of gene codes, absent = NaN)."""

    def __init__(self) -> None:
        self._rows = np.full((64, 8), -1.0)
        self._hash: list[int] = []
        self._number: list[int] = []
        self._by_number: dict[int, int] = {}
        self._hash_ids: dict[str, int] = {}
        self._hash_names: list[str] = []
        # per gene: (value, value, row index of the context) of inert / mattering changes
        self._same: dict[int, list[tuple[float, float, int]]] = {}
        self._diff: dict[int, list[tuple[float, float, int]]] = {}
        self._canon: dict[int, tuple[list[int], dict[tuple, dict[float, float]]]] | None = {}
        self._index: dict[tuple, tuple[int, int]] | None = None

    @property
    def active(self) -> bool:
        """Whether any trial carried a binary hash (plain studies never turn this on)."""
        return bool(self._hash)

    @property
    def n(self) -> int:
        return len(self._hash)

    def _fill(self, codes: np.ndarray) -> np.ndarray:
        d = self._rows.shape[1]
        if codes.shape[-1] > d:
            grown = np.full((self._rows.shape[0], max(codes.shape[-1], 2 * d)), -1.0)
            grown[:, :d] = self._rows
            self._rows = grown
            d = self._rows.shape[1]
        out = np.full((*codes.shape[:-1], d), -1.0)
        out[..., : codes.shape[-1]] = np.where(np.isnan(codes), -1.0, np.round(codes, 9))
        return out

    def add(self, codes: np.ndarray, binary: str, number: int) -> None:
        """Record a compiled trial and the evidence it gives against every earlier one."""
        row = self._fill(codes)
        k = len(self._hash)
        if k == self._rows.shape[0]:
            grown = np.full((2 * k, self._rows.shape[1]), -1.0)
            grown[:k] = self._rows
            self._rows = grown
        h = self._hash_ids.setdefault(binary, len(self._hash_ids))
        if h == len(self._hash_names):
            self._hash_names.append(binary)
        if k:
            old = self._rows[:k]
            diff = old != row
            nd = diff.sum(axis=1)
            hid = np.array(self._hash)
            for i in np.where((hid == h) & (nd >= 1) & (nd <= _SAME_MAX_GENES))[0]:
                for j in np.where(diff[i])[0]:
                    self._same.setdefault(int(j), []).append((*_pair(old[i, j], row[j]), int(i)))
            for i in np.where((hid != h) & (nd == 1))[0]:
                j = int(np.where(diff[i])[0][0])
                self._diff.setdefault(j, []).append((*_pair(old[i, j], row[j]), int(i)))
        self._rows[k] = row
        self._hash.append(h)
        self._number.append(number)
        self._by_number.setdefault(number, k)
        self._canon = None
        self._index = None

    def wrong_prediction(self, codes: np.ndarray, source_number: int) -> None:
        """A checked candidate gave another binary than predicted: every value change between
        it and the trial it was predicted from stops counting as inert."""
        i = self._by_number.get(source_number)
        if i is None:
            return
        row, src = self._fill(codes), self._rows[i]
        for j in np.where(row != src)[0]:
            self._diff.setdefault(int(j), []).append((*_pair(src[j], row[j]), int(i)))
        self._canon = None
        self._index = None

    def _switches(self, j: int) -> list[int]:
        """Genes whose setting differed between a pair where a change of gene ``j`` was inert
        and a pair where the same change mattered."""
        diff = {}
        for a, b, i in self._diff.get(j, []):
            diff.setdefault((a, b), []).append(i)
        out: set[int] = set()
        for a, b, i in self._same.get(j, []):
            for k in diff.get((a, b), []):
                out.update(int(q) for q in np.where(self._rows[i] != self._rows[k])[0] if q != j)
        return sorted(out)

    def _classes(self) -> dict[int, tuple[list[int], dict[tuple, dict[float, float]]]]:
        """Per gene: its switches, and per setting of them, value code -> the smallest code of its
        inert class (merged values only)."""
        if self._canon is not None:
            return self._canon
        canon: dict[int, tuple[list[int], dict[tuple, dict[float, float]]]] = {}
        for j, same in self._same.items():
            sw = self._switches(j)
            groups: dict[tuple, tuple[list, set]] = {}
            for a, b, i in same:
                groups.setdefault(tuple(self._rows[i, sw]), ([], set()))[0].append((a, b))
            for a, b, i in self._diff.get(j, []):
                key = tuple(self._rows[i, sw])
                if key in groups:
                    groups[key][1].add((a, b))
            maps = {key: m for key, (pairs, blocked) in groups.items() if (m := _merge(pairs, blocked))}
            if maps:
                canon[j] = (sw, maps)
        self._canon = canon
        return canon

    def _canonical(self, rows: np.ndarray) -> np.ndarray:
        out = rows.copy()
        for j, (sw, maps) in self._classes().items():
            col = rows[:, j]
            for key, mapping in maps.items():
                where = np.all(rows[:, sw] == np.array(key), axis=1) if sw else np.ones(len(rows), bool)
                for v, c in mapping.items():
                    out[where & (col == v), j] = c
        return out

    def predict(self, codes: np.ndarray) -> list[tuple[str, int] | None]:
        """For each configuration: (binary hash, number of a trial that compiled it) when its
        binary is predicted to be one already seen, else None (unknown, or conflicting evidence)."""
        if not self._hash:
            return [None] * len(codes)
        if self._index is None:
            index: dict[tuple, tuple[int, int]] = {}
            canon = self._canonical(self._rows[: len(self._hash)])
            for i, key in enumerate(map(tuple, canon.tolist())):
                seen = index.get(key)
                if seen is None:
                    index[key] = (self._hash[i], self._number[i])
                elif seen[0] != self._hash[i]:
                    index[key] = (-1, -1)  # the evidence contradicts itself here: no prediction
            self._index = index
        out: list[tuple[str, int] | None] = []
        for key in map(tuple, self._canonical(self._fill(codes)).tolist()):
            hit = self._index.get(key)
            out.append(None if hit is None or hit[0] < 0 else (self._hash_names[hit[0]], hit[1]))
        return out


def _merge(pairs: list[tuple[float, float]], blocked: set[tuple[float, float]]) -> dict[float, float]:
    """Value -> smallest value of its class: classes linked by the inert changes ``pairs``; a
    change in ``blocked`` (seen to matter) takes both its values out of their class."""
    parent: dict[float, float] = {}

    def find(a: float) -> float:
        while parent.setdefault(a, a) != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for a, b in set(pairs) - blocked:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    alone = {v for a, b in blocked if find(a) == find(b) for v in (a, b)}
    members: dict[float, list[float]] = {}
    for v in list(parent):
        if v not in alone:
            members.setdefault(find(v), []).append(v)
    return {v: min(vs) for vs in members.values() if len(vs) > 1 for v in vs}


def _pair(a: float, b: float) -> tuple[float, float]:
    return (float(a), float(b)) if a <= b else (float(b), float(a))
