"""Which genes leave the compiled binary unchanged: learnt from a trial attribute.

A compile objective records the code hash of each trial's binary (user attribute
``binary_hash``).  Two compiled trials that differ only in a few genes and gave the same binary
show that those value changes were inert for this kernel; two trials that differ in one gene and
gave different binaries show that this value change matters.  Two levels of inertness are learnt
from that evidence, and two configurations that fall in the same classes for every gene are
predicted to compile to the same binary:

- *Values*: per gene, values linked by inert changes form classes (for an ordered gene, every
  value between two members of a class joins it).  A value change that was inert in one pair and
  mattered in another (e.g. a register-usage level, ignored at ``-O0`` only) makes the genes where
  the two pairs' settings differed *switches* of that gene; its classes are then learnt per
  setting of its switches (a change that mattered there splits its two values off their class).
- *Whole genes*: an unordered gene with at least ``_WHOLE_MIN_PAIRS`` distinct inert changes and
  none that mattered is inert as a whole: every value, seen or not, is one class (the controls
  that do nothing for this kernel stop multiplying the configurations).  When changes of it
  mattered too, among values also seen inert, the gene is inert as a whole only where one other
  gene (its *context*) takes the settings of the inert pairs and none of those that mattered;
  if no single gene separates them, only the value classes remain.

A failed prediction (a compiled check that gave another binary than predicted) counts as
"mattered" for every value change between the two configurations, which ends or narrows the
generalisation that made it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# Same-binary pairs differing in at most this many genes count as evidence that each of those
# value changes is inert.
_SAME_MAX_GENES = 4
# Distinct inert value changes of an unordered gene before it counts as inert as a whole.
_WHOLE_MIN_PAIRS = 2
_ANY = -7.0  # canonical code of a gene inert as a whole


class BinaryModel:
    """Evidence and predictions over coded configurations (rows of gene codes, absent = NaN)."""

    def __init__(self) -> None:
        self._rows = np.full((64, 8), -1.0)
        self._hash: list[int] = []
        self._number: list[int] = []
        self._by_number: dict[int, int] = {}
        self._hash_ids: dict[str, int] = {}
        self._hash_names: list[str] = []
        self._ordered = np.zeros(0, dtype=bool)
        # per gene: (value, value, context row, other row or -1) of inert / mattering changes
        self._same: dict[int, list[tuple[float, float, int, int]]] = {}
        self._diff: dict[int, list[tuple[float, float, int, int]]] = {}
        self._canon: dict[int, _GeneRule] | None = None
        self._index: dict[tuple, tuple[int, int]] | None = None
        self._canon_rows = np.empty((0, 0))
        self._presence: list[tuple[int, list[int], dict[tuple, bool]]] | None = None

    @property
    def active(self) -> bool:
        """Whether any trial carried a binary hash (plain studies never turn this on)."""
        return bool(self._hash)

    @property
    def n(self) -> int:
        return len(self._hash)

    def set_ordered(self, ordered: Sequence[bool]) -> None:
        """Which genes are ordered (integer ranges): their value classes are intervals."""
        ordered = np.asarray(ordered, dtype=bool)
        if ordered.shape != self._ordered.shape or (ordered != self._ordered).any():
            self._ordered = ordered
            self._canon = None
            self._index = None

    def _is_ordered(self, j: int) -> bool:
        return j < len(self._ordered) and bool(self._ordered[j])

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

    def add(self, codes: np.ndarray, binary: str, number: int, predicted_from: int | None = None) -> None:
        """Record a compiled trial and the evidence it gives against every earlier one;
        ``predicted_from``: the trial it was predicted (and checked) to repeat."""
        row = self._fill(codes)
        src = self._by_number.get(predicted_from) if predicted_from is not None else None
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
                    self._same.setdefault(int(j), []).append((*_pair(old[i, j], row[j]), int(i), k))
            if src is not None and self._hash[src] == h and nd[src] > _SAME_MAX_GENES:
                for j in np.where(diff[src])[0]:  # a confirmed prediction: every change was inert
                    self._same.setdefault(int(j), []).append((*_pair(old[src, j], row[j]), src, k))
            for i in np.where((hid != h) & (nd == 1))[0]:
                j = int(np.where(diff[i])[0][0])
                self._diff.setdefault(j, []).append((*_pair(old[i, j], row[j]), int(i), k))
        self._rows[k] = row
        self._hash.append(h)
        self._number.append(number)
        self._by_number.setdefault(number, k)
        self._canon = None
        self._index = None
        self._presence = None

    def wrong_prediction(self, codes: np.ndarray, source_number: int) -> None:
        """A checked candidate gave another binary than predicted: every value change between
        it and the trial it was predicted from stops counting as inert (in that trial's context)."""
        i = self._by_number.get(source_number)
        if i is None:
            return
        row, src = self._fill(codes), self._rows[i]
        changed = [int(j) for j in np.where(row != src)[0]]
        suspects = [j for j in changed if self._untested(row, src, j)] or changed
        for j in suspects:
            self._diff.setdefault(int(j), []).append((*_pair(src[j], row[j]), int(i), -1))
        self._canon = None
        self._index = None

    def _switches(self, j: int) -> list[int]:
        """Genes whose setting differed between a pair where a change of gene ``j`` was inert
        and a pair where the same change mattered."""
        diff: dict[tuple[float, float], list[int]] = {}
        for a, b, i, _ in self._diff.get(j, []):
            diff.setdefault((a, b), []).append(i)
        out: set[int] = set()
        for a, b, i, _ in self._same.get(j, []):
            for k in diff.get((a, b), []):
                out.update(int(q) for q in np.where(self._rows[i] != self._rows[k])[0] if q != j)
        return sorted(out)

    def _whole(self, j: int) -> tuple[int, np.ndarray, bool] | None:
        """Where gene ``j`` is inert as a whole: (-1, ...) everywhere, (q, settings, interval) where
        gene q takes one of ``settings`` (or lies within their range when ``interval``); None:
        nowhere."""
        same, diff = self._same.get(j, []), self._diff.get(j, [])
        if self._is_ordered(j) or len({(a, b) for a, b, _, _ in same}) < _WHOLE_MIN_PAIRS:
            return None
        if not diff:
            return -1, np.empty(0), False
        seen = {v for a, b, _, _ in same for v in (a, b)}
        if any(a not in seen or b not in seen for a, b, _, _ in diff):
            return None  # changes to values never seen inert mattered: a matter of values
        s_rows = sorted({i for _, _, i, _ in same} | {k for _, _, _, k in same})
        d_rows = sorted({i for _, _, i, _ in diff})
        s_ctx, d_ctx = self._rows[s_rows], self._rows[d_rows]
        best: tuple[int, int, np.ndarray, bool] | None = None
        for q in range(s_ctx.shape[1]):
            if q == j:
                continue
            sv, dv = np.unique(s_ctx[:, q]), np.unique(d_ctx[:, q])
            if np.isin(sv, dv).any():
                continue
            interval = self._is_ordered(q) and not ((dv > sv.min()) & (dv < sv.max())).any()
            rank = len(sv) + len(dv)
            if best is None or rank < best[0]:
                best = (rank, q, sv, interval)
        return None if best is None else best[1:]

    def _classes(self) -> dict[int, _GeneRule]:
        """Per gene with evidence: where it is inert as a whole, and its value classes (per
        setting of its switches)."""
        if self._canon is not None:
            return self._canon
        canon: dict[int, _GeneRule] = {}
        for j, same in self._same.items():
            sw = self._switches(j)
            groups: dict[tuple, tuple[list, set]] = {}
            for a, b, i, _ in same:
                groups.setdefault(tuple(self._rows[i, sw]), ([], set()))[0].append((a, b))
            for a, b, i, _ in self._diff.get(j, []):
                key = tuple(self._rows[i, sw])
                if key in groups:
                    groups[key][1].add((a, b))
            ordered = self._is_ordered(j)
            maps = {
                key: m for key, (pairs, blocked) in groups.items() if (m := _merge(pairs, blocked, ordered))
            }
            whole = self._whole(j)
            if maps or whole is not None:
                canon[j] = _GeneRule(sw, maps, whole)
        self._canon = canon
        return canon

    def _canonical(self, rows: np.ndarray) -> np.ndarray:
        out = rows.copy()
        for j, rule in self._classes().items():
            col = rows[:, j]
            for key, classes in rule.maps.items():
                where = np.all(rows[:, rule.switches] == np.array(key), axis=1) if rule.switches else True
                for lo, hi, c in classes:
                    out[where & (col >= lo) & (col <= hi), j] = c
            if rule.whole is not None:
                q, settings, interval = rule.whole
                if q < 0:
                    out[:, j] = _ANY
                else:
                    ctx = rows[:, q]
                    inside = (ctx >= settings.min()) & (ctx <= settings.max()) if interval else np.isin(ctx, settings)
                    out[inside, j] = _ANY
        return out

    def predict(self, codes: np.ndarray) -> list[tuple[str, int, bool] | None]:
        """For each configuration: (binary hash, number of a trial that compiled it, untested)
        when its binary is predicted to be one already seen, else None (unknown, or conflicting
        evidence).  ``untested``: the prediction stretches a generalisation (a whole gene, or an
        interval of values) to a context where no inert change of that gene was seen yet; such
        predictions should be compiled as checks."""
        if not self._hash:
            return [None] * len(codes)
        self._ensure_index()
        rows = self._present(self._fill(codes))
        out: list[tuple[str, int, bool] | None] = []
        for row, key in zip(rows, map(tuple, self._canonical(rows).tolist()), strict=True):
            hit = self._index.get(key)
            if hit is None or hit[0] < 0:
                out.append(None)
                continue
            src = self._rows[self._by_number[hit[1]]]
            untested = any(self._untested(row, src, int(j)) for j in np.where(row != src)[0])
            out.append((self._hash_names[hit[0]], hit[1], untested))
        return out

    def _untested(self, row: np.ndarray, src: np.ndarray, j: int) -> bool:
        """Whether ``row``'s context is new to gene ``j`` (whose change from ``src`` is predicted
        inert): another gene takes a (canonical) setting never seen in ``j``'s inert pairs (for an
        ordered gene: outside their range)."""
        same = self._same.get(j, [])
        self._ensure_index()
        ctx_rows = sorted({i for _, _, i, _ in same} | {k for _, _, _, k in same})
        if not ctx_rows:
            return True
        ctx = self._canon_rows[ctx_rows]
        mine = self._canonical(row[None, :])[0]
        for q in range(len(mine)):
            if q == j:
                continue
            col = ctx[:, q]
            if self._is_ordered(q) and mine[q] >= 0 and (col >= 0).any():
                if not col[col >= 0].min() <= mine[q] <= col[col >= 0].max():
                    return True
            elif mine[q] not in col:
                return True
        return False

    def _present(self, rows: np.ndarray) -> np.ndarray:
        """``rows`` with the genes set absent that the compiled trials show would not be
        suggested there (a parameter whose condition depends on one or two others, e.g. a
        register-usage level not offered at ``-O0``), so a planned configuration is compared as
        the objective will see it."""
        if self._presence is None:
            self._presence = self._learn_presence()
        for _ in range(2):  # a condition on a gene that is itself conditional
            for j, q, table in self._presence:
                for i, setting in enumerate(map(tuple, rows[:, q].tolist())):
                    if rows[i, j] >= 0 and table.get(setting) is False:
                        rows[i, j] = -1.0
        return rows

    def _learn_presence(self) -> list[tuple[int, list[int], dict[tuple, bool]]]:
        """Per gene absent from some compiled trials: the one or two other genes whose settings
        decided its presence in every compiled trial, with those settings."""
        rows = self._rows[: len(self._hash)]
        present = rows >= 0
        out = []
        for j in np.where(~present.all(axis=0) & present.any(axis=0))[0]:
            best = None
            others = [q for q in range(rows.shape[1]) if q != j]
            for qs in [[q] for q in others] + [[a, b] for a in others for b in others if a < b]:
                if best is not None and len(qs) > len(best[0]):
                    break
                settings, inverse = np.unique(rows[:, qs], axis=0, return_inverse=True)
                inverse = inverse.reshape(-1)
                on = np.bincount(inverse, weights=present[:, j], minlength=len(settings))
                count = np.bincount(inverse, minlength=len(settings))
                if ((on > 0) & (on < count)).any():
                    continue  # these genes do not decide the presence
                if best is None or len(settings) < len(best[1]):
                    best = (qs, dict(zip(map(tuple, settings.tolist()), (on > 0).tolist(), strict=True)))
            if best is not None:
                out.append((int(j), *best))
        return out

    def _ensure_index(self) -> None:
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
            self._canon_rows = canon


class _GeneRule:
    """How one gene's values are canonicalised: value classes per setting of its switches, and
    where the gene is inert as a whole."""

    __slots__ = ("switches", "maps", "whole")

    def __init__(
        self,
        switches: list[int],
        maps: dict[tuple, list[tuple[float, float, float]]],
        whole: tuple[int, np.ndarray, bool] | None,
    ) -> None:
        self.switches, self.maps, self.whole = switches, maps, whole


def _merge(
    pairs: list[tuple[float, float]], blocked: set[tuple[float, float]], ordered: bool
) -> list[tuple[float, float, float]]:
    """Value classes as (low, high, smallest member) ranges: classes linked by the inert changes
    ``pairs``; a change in ``blocked`` (seen to matter) takes both its values out of their class.
    For an ordered gene a class covers the range between its members (absent, -1, stays apart)
    unless another class or a split value lies inside."""
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
    classes = [sorted(vs) for vs in members.values() if len(vs) > 1]
    out: list[tuple[float, float, float]] = []
    taken = sorted({v for vs in classes for v in vs} | alone | {v for a, b in blocked for v in (a, b)})
    for vs in classes:
        c = vs[0]
        present = [v for v in vs if v >= 0]
        if ordered and len(present) > 1:
            lo, hi = present[0], present[-1]
            if all(v in vs for v in taken if lo < v < hi):
                out.append((lo, hi, c))
                out.extend((v, v, c) for v in vs if v < 0)
                continue
        out.extend((v, v, c) for v in vs)
    return out


def _pair(a: float, b: float) -> tuple[float, float]:
    return (float(a), float(b)) if a <= b else (float(b), float(a))
