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
# Doubt of a prediction that changes two genes never seen changed together in an inert pair
# (each inert alone, the two may interact).
_APART = 2
_ANY = -7.0  # canonical code of a gene inert as a whole
# Above this many rows (or changed settings) a pass is vectorised or done in full: contexts are
# rebuilt over all compiled trials whenever canonical settings change (per trial, more often with
# several workers), so that pass must not walk the trials in Python.
_FEW_ROWS = 32


class BinaryModel:
    """Evidence and predictions over coded configurations (rows of gene codes, absent = NaN).

    Kept up to date trial by trial: a new trial re-derives the rules of the genes it gave
    evidence on, recomputes the canonical column of a gene only when its rule changed, and moves
    only the trials whose canonical settings changed in the index, so ``add`` and ``predict`` do
    not grow with the number of compiled trials beyond a few vectorised passes."""

    def __init__(self) -> None:
        self._rows = np.full((64, 8), -1.0)
        self._hid = np.zeros(64, dtype=np.int64)
        self._hash: list[int] = []
        self._number: list[int] = []
        self._by_number: dict[int, int] = {}
        self._hash_ids: dict[str, int] = {}
        self._hash_names: list[str] = []
        self._ordered = np.zeros(0, dtype=bool)
        self._width = 0  # columns any compiled trial used (the others are absent everywhere)
        # per gene: (value, value, context row, other row or -1) of inert / mattering changes
        self._same: dict[int, list[tuple[float, float, int, int]]] = {}
        self._diff: dict[int, list[tuple[float, float, int, int]]] = {}
        self._rules: dict[int, _GeneRule] = {}
        self._genes: dict[int, _Gene] = {}  # per gene: its evidence digested for its rule
        self._dirty: set[int] = set()  # genes with new evidence since their rule was made
        self._failed: dict[int, int] = {}  # per gene: failed checks that blamed it
        self._together: set[tuple[int, int]] = set()  # genes seen changed together in an inert pair
        self._stale = True  # rules and index to be made from scratch
        self._canon_rows = np.empty((0, 0))  # canonical settings of the indexed trials
        self._keys: list[tuple] = []
        self._groups: dict[tuple, _Group] = {}
        self._version = 0  # changes whenever canonical settings of indexed trials change
        self._contexts: dict[int, _Context] = {}
        self._presence = _Presence()

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
            self._stale = True

    def _is_ordered(self, j: int) -> bool:
        return j < len(self._ordered) and bool(self._ordered[j])

    def _fill(self, codes: np.ndarray) -> np.ndarray:
        d = self._rows.shape[1]
        if codes.shape[-1] > d:
            grown = np.full((self._rows.shape[0], max(codes.shape[-1], 2 * d)), -1.0)
            grown[:, :d] = self._rows
            self._rows = grown
            d = self._rows.shape[1]
            self._stale = True
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
            self._hid = np.concatenate([self._hid, np.zeros(k, dtype=np.int64)])
        h = self._hash_ids.setdefault(binary, len(self._hash_ids))
        if h == len(self._hash_names):
            self._hash_names.append(binary)
        width = int(np.max(np.nonzero(row >= 0)[0], initial=-1)) + 1
        if width > self._width:
            self._width = width
            self._stale = True  # a gene no trial had before: its column joins every context
            self._presence = _Presence()
        if k:
            old = self._rows[:k]
            diff = old != row
            nd = diff.sum(axis=1)
            hid = self._hid[:k]
            for i in np.where((hid == h) & (nd >= 1) & (nd <= _SAME_MAX_GENES))[0]:
                genes = np.where(diff[i])[0].tolist()
                self._together.update((a, b) for a in genes for b in genes if a < b)
                for j in np.where(diff[i])[0]:
                    self._same.setdefault(int(j), []).append((*_pair(old[i, j], row[j]), int(i), k))
                    self._dirty.add(int(j))
            if src is not None and self._hash[src] == h and nd[src] > _SAME_MAX_GENES:
                for j in np.where(diff[src])[0]:  # a confirmed prediction: every change was inert
                    self._same.setdefault(int(j), []).append((*_pair(old[src, j], row[j]), src, k))
                    self._dirty.add(int(j))
            for i in np.where((hid != h) & (nd == 1))[0]:
                j = int(np.where(diff[i])[0][0])
                self._diff.setdefault(j, []).append((*_pair(old[i, j], row[j]), int(i), k))
                self._dirty.add(j)
        self._rows[k] = row
        self._hid[k] = h
        self._hash.append(h)
        self._number.append(number)
        self._by_number.setdefault(number, k)

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
            self._dirty.add(int(j))
            self._failed[j] = self._failed.get(j, 0) + 1

    def _rule(self, j: int) -> _GeneRule | None:
        """Gene ``j``'s rule from its evidence: where it is inert as a whole, and its value
        classes (per setting of its switches); None when it has neither."""
        if not self._same.get(j):
            return None
        gene = self._genes.get(j)
        if gene is None:
            gene = self._genes[j] = _Gene()
        return gene.rule(self, j)

    def _canonical(self, rows: np.ndarray) -> np.ndarray:
        out = rows.copy()
        for j, rule in self._rules.items():
            out[:, j] = rule.column(rows, j)
        return out

    def _refresh(self) -> None:
        """Bring the rules and the index of canonical settings up to date with the evidence:
        from scratch when stale, else only the genes with new evidence and the new trials."""
        n = len(self._hash)
        if self._stale:
            self._genes = {}
            self._rules = {j: r for j in self._same if (r := self._rule(j)) is not None}
            self._dirty.clear()
            self._canon_rows = self._canonical(self._rows[:n])
            self._keys, self._groups = [], {}
            for i, key in enumerate(map(tuple, self._canon_rows.tolist())):
                self._keys.append(key)
                self._groups.setdefault(key, _Group()).put(i, self._hash[i])
            self._stale = False
            self._version += 1
            return
        moved: set[int] = set()
        m = len(self._keys)
        for j in sorted(self._dirty):
            rule = self._rule(j)
            if rule == self._rules.get(j):
                continue
            at = _rows_to_redo(self._rules.get(j), rule, self._rows[:m])
            if rule is None:
                del self._rules[j]
                col = self._rows[:m, j]
            else:
                self._rules[j] = rule
                col = rule.column(self._rows[:m] if at is None else self._rows[at], j)
            if at is None:
                changed = np.nonzero(col != self._canon_rows[:m, j])[0]
                col_changed = col[changed]
            else:
                differs = col != self._canon_rows[at, j]
                changed, col_changed = at[differs], col[differs]
            if len(changed):
                self._canon_rows[changed, j] = col_changed
                moved.update(changed.tolist())
        self._dirty.clear()
        for i in moved:
            key = tuple(self._canon_rows[i].tolist())
            self._groups[self._keys[i]].take(i, self._hash[i])
            if not self._groups[self._keys[i]].rows:
                del self._groups[self._keys[i]]
            self._keys[i] = key
            self._groups.setdefault(key, _Group()).put(i, self._hash[i])
        if n > m:
            canon = self._canonical(self._rows[m:n])
            self._canon_rows = np.concatenate([self._canon_rows, canon]) if m else canon
            for i, key in enumerate(map(tuple, canon.tolist()), start=m):
                self._keys.append(key)
                self._groups.setdefault(key, _Group()).put(i, self._hash[i])
        if moved:
            self._version += 1

    def predict(self, codes: np.ndarray) -> list[tuple[str, int, int] | None]:
        """For each configuration: (binary hash, number of a trial that compiled it, doubt)
        when its binary is predicted to be one already seen, else None (unknown, or conflicting
        evidence).  ``doubt`` (0 = none): 1 when the prediction stretches a generalisation (a
        whole gene, or an interval of values) to a context where no inert change of that gene
        was seen yet, plus the failed checks that blamed the genes it changes, plus ``_APART``
        when it changes two genes never seen changed together in an inert pair; doubtful
        predictions should be compiled as checks more often."""
        if not self._hash:
            return [None] * len(codes)
        self._refresh()
        rows = self._present(self._fill(codes))
        if self._stale:  # the candidates had a gene no trial had
            self._refresh()
        canon = self._canonical(rows)
        out: list[tuple[str, int, bool] | None] = []
        for row, mine, key in zip(rows, canon, map(tuple, canon.tolist()), strict=True):
            group = self._groups.get(key)
            if group is None or len(group.hashes) > 1:
                out.append(None)
                continue
            number = self._number[group.first]
            src = self._rows[self._by_number[number]]
            changed = np.where(row != src)[0].tolist()
            doubt = int(any(self._untested(row, src, j, mine) for j in changed))
            doubt += sum(self._failed.get(j, 0) for j in changed)
            if any((a, b) not in self._together for a in changed for b in changed if a < b):
                doubt += _APART
            out.append((self._hash_names[self._hash[group.first]], number, doubt))
        return out

    def project(self, codes: np.ndarray) -> np.ndarray:
        """``codes`` (absent = NaN) with the genes set absent that the compiled trials show would
        not be suggested there (see :meth:`_present`): the configurations the objective will see."""
        if not self._hash:
            return codes
        rows = self._present(self._fill(codes))[..., : codes.shape[-1]]
        return np.where((rows < 0) & ~np.isnan(codes) & (codes >= 0), np.nan, codes)

    def _untested(self, row: np.ndarray, src: np.ndarray, j: int, mine: np.ndarray | None = None) -> bool:
        """Whether ``row``'s context is new to gene ``j`` (whose change from ``src`` is predicted
        inert): another gene takes a (canonical) setting never seen in ``j``'s inert pairs (for an
        ordered gene: outside their range).  ``mine``: ``row``'s canonical settings if known."""
        self._refresh()
        context = self._context(j)
        if context is None:
            return True
        if mine is None:
            mine = self._canonical(row[None, :])[0]
        width = len(context.values)
        for q, v in enumerate(mine[:width].tolist()):
            if q == j:
                continue
            if self._is_ordered(q) and v >= 0 and context.lo[q] <= context.hi[q]:
                if not context.lo[q] <= v <= context.hi[q]:
                    return True
            elif v not in context.values[q]:
                return True
        return bool((mine[width:] != -1.0).any())

    def _context(self, j: int) -> _Context | None:
        """The canonical settings of the trials in gene ``j``'s inert pairs, per column below
        the width (kept up to date as pairs come); None without such pairs."""
        if not self._same.get(j):
            return None
        gene = self._genes[j]  # digested by _refresh
        ctx = self._contexts.get(j)
        if ctx is None or ctx.version != self._version:
            ctx = self._contexts[j] = _Context(self._version, self._width)
        ctx.extend(self._canon_rows, gene.s_order)
        return ctx

    def _present(self, rows: np.ndarray) -> np.ndarray:
        """``rows`` with the genes set absent that the compiled trials show would not be
        suggested there (a parameter whose condition depends on one or two others, e.g. a
        register-usage level not offered at ``-O0``), so a planned configuration is compared as
        the objective will see it."""
        conditions = self._presence.conditions(self._rows, len(self._hash), self._width)
        for _ in range(2):  # a condition on a gene that is itself conditional
            for j, q, table in conditions:
                for i, setting in enumerate(map(tuple, rows[:, q].tolist())):
                    if rows[i, j] >= 0 and table.get(setting) is False:
                        rows[i, j] = -1.0
        return rows


class _Presence:
    """Presence conditions learnt from the compiled trials, row by row: per gene absent from some
    trials and present in others, the one or two other genes whose settings decided its presence
    in every compiled trial (one gene if any does; among those, the fewest settings)."""

    def __init__(self) -> None:
        self._upto = 0
        self._present: np.ndarray | None = None  # per column: present in some trial, absent in some
        self._candidates: dict[int, list[tuple[tuple[int, ...], dict[tuple, bool]]]] = {}
        self._out: list[tuple[int, list[int], dict[tuple, bool]]] = []

    def conditions(self, rows: np.ndarray, n: int, width: int) -> list[tuple[int, list[int], dict[tuple, bool]]]:
        if n == self._upto:
            return self._out
        new = rows[self._upto : n, :width] >= 0
        if self._present is None:
            self._present = np.zeros((2, width), dtype=bool)
        self._present[0] |= new.any(axis=0)
        self._present[1] |= (~new).any(axis=0)
        for j in np.nonzero(self._present[0] & self._present[1])[0]:
            j = int(j)
            if j in self._candidates:
                self._learn(j, self._candidates[j], rows[self._upto : n])
            else:  # a gene newly seen both present and absent: every trial so far
                self._candidates[j] = _deciders(rows[:n, :width], j)
        self._upto = n
        self._out = []
        for j in sorted(self._candidates):
            best = None
            for qs, table in self._candidates[j]:
                if best is not None and len(qs) > len(best[0]):
                    break
                if best is None or len(table) < len(best[1]):
                    best = (qs, table)
            if best is not None:
                self._out.append((j, list(best[0]), best[1]))
        return self._out

    def _learn(
        self, j: int, cands: list[tuple[tuple[int, ...], dict[tuple, bool]]], rows: np.ndarray
    ) -> list[tuple[tuple[int, ...], dict[tuple, bool]]]:
        """Keep the candidates whose settings still decide gene ``j``'s presence in ``rows``
        (in place; returns them)."""
        present = (rows[:, j] >= 0).tolist()
        kept = []
        for qs, table in cands:
            ok = True
            for setting, p in zip(map(tuple, rows[:, qs].tolist()), present, strict=True):
                seen = table.setdefault(setting, p)
                if seen != p:
                    ok = False
                    break
            if ok:
                kept.append((qs, table))
        cands[:] = kept
        return cands


class _Gene:
    """One gene's evidence (``BinaryModel._same`` / ``_diff`` entries) digested for its rule,
    entry by entry: its switches, its inert and mattering value pairs per setting of the
    switches with their merged classes, and the settings of the other genes in the trials of
    its inert and mattering pairs (for inertness as a whole)."""

    def __init__(self) -> None:
        self.n_same = self.n_diff = 0
        self.same_at: dict[tuple[float, float], set[int]] = {}
        self.diff_at: dict[tuple[float, float], set[int]] = {}
        self.switches: set[int] = set()
        self.keyed_by: list[int] | None = None
        self.pairs: dict[tuple, set[tuple[float, float]]] = {}
        self.blocked: dict[tuple, set[tuple[float, float]]] = {}
        self.classes: dict[tuple, list[tuple[float, float, float]]] = {}
        self.same_pairs: set[tuple[float, float]] = set()
        self.diff_pairs: set[tuple[float, float]] = set()
        self.seen: set[float] = set()
        self.s_rows: set[int] = set()
        self.s_order: list[int] = []  # s_rows in the order they came
        self.d_rows: set[int] = set()
        self.s_vals: list[set[float]] = []
        self.d_vals: list[set[float]] = []

    def rule(self, model: BinaryModel, j: int) -> _GeneRule | None:
        rows, width = model._rows, model._width
        same, diff = model._same.get(j, []), model._diff.get(j, [])
        new_same, new_diff = same[self.n_same :], diff[self.n_diff :]
        for a, b, i, _ in new_same:
            others = self.diff_at.get((a, b))
            if others:
                self._switch(rows, i, others, j)
            self.same_at.setdefault((a, b), set()).add(i)
        for a, b, i, _ in new_diff:
            others = self.same_at.get((a, b))
            if others:
                self._switch(rows, i, others, j)
            self.diff_at.setdefault((a, b), set()).add(i)
        sw = sorted(self.switches)
        if sw != self.keyed_by:  # settings of new switches: group every pair again
            self.keyed_by, self.pairs, self.blocked, self.classes = sw, {}, {}, {}
            new_same, new_diff = same, diff
        dirty: set[tuple] = set()
        if new_same:
            keys = map(tuple, rows[[e[2] for e in new_same]][:, sw].tolist())
            for (a, b, _, _), key in zip(new_same, keys, strict=True):
                self.pairs.setdefault(key, set()).add((a, b))
                dirty.add(key)
        if new_diff:
            keys = map(tuple, rows[[e[2] for e in new_diff]][:, sw].tolist())
            for (a, b, _, _), key in zip(new_diff, keys, strict=True):
                self.blocked.setdefault(key, set()).add((a, b))
                dirty.add(key)
        ordered = model._is_ordered(j)
        for key in dirty:
            if key in self.pairs:
                merged = _merge(self.pairs[key], self.blocked.get(key, set()), ordered)
                if merged:
                    self.classes[key] = merged
                else:
                    self.classes.pop(key, None)
        if len(self.s_vals) != width:
            self.s_vals, self.d_vals = [set() for _ in range(width)], [set() for _ in range(width)]
            self.s_rows, self.d_rows, self.s_order = set(), set(), []
        fresh = {r for e in same[self.n_same :] for r in e[2:]} - self.s_rows
        self.s_order.extend(sorted(fresh))
        self._settings(rows, width, fresh, self.s_rows, self.s_vals)
        self._settings(rows, width, {e[2] for e in diff[self.n_diff :]} - self.d_rows, self.d_rows, self.d_vals)
        for a, b, _, _ in same[self.n_same :]:
            self.same_pairs.add((a, b))
            self.seen.update((a, b))
        self.diff_pairs.update((a, b) for a, b, _, _ in diff[self.n_diff :])
        self.n_same, self.n_diff = len(same), len(diff)
        whole = self._whole(model, j, width)
        return _GeneRule(sw, dict(self.classes), whole) if self.classes or whole is not None else None

    def _switch(self, rows: np.ndarray, i: int, others: set[int], j: int) -> None:
        changed = (rows[list(others)] != rows[i]).any(axis=0)
        self.switches.update(int(q) for q in np.nonzero(changed)[0] if q != j)

    @staticmethod
    def _settings(rows: np.ndarray, width: int, new: set[int], into: set[int], vals: list[set[float]]) -> None:
        if new:
            into.update(new)
            block = rows[sorted(new), :width]
            for q in range(width):
                vals[q].update(block[:, q].tolist())

    def _whole(self, model: BinaryModel, j: int, width: int) -> tuple[int, np.ndarray, bool] | None:
        """Where gene ``j`` is inert as a whole: (-1, ...) everywhere, (q, settings, interval)
        where gene q takes one of ``settings`` (or lies within their range when ``interval``);
        None: nowhere."""
        if model._is_ordered(j) or len(self.same_pairs) < _WHOLE_MIN_PAIRS:
            return None
        if not self.diff_pairs:
            return -1, np.empty(0), False
        if any(a not in self.seen or b not in self.seen for a, b in self.diff_pairs):
            return None  # changes to values never seen inert mattered: a matter of values
        best: tuple[int, int, np.ndarray, bool] | None = None
        for q in range(width):  # the other columns are absent (-1) in every trial
            if q == j or not self.s_vals[q].isdisjoint(self.d_vals[q]):
                continue
            sv, dv = np.array(sorted(self.s_vals[q])), np.array(sorted(self.d_vals[q]))
            interval = model._is_ordered(q) and not ((dv > sv[0]) & (dv < sv[-1])).any()
            rank = len(sv) + len(dv)
            if best is None or rank < best[0]:
                best = (rank, q, sv, interval)
        return None if best is None else best[1:]


class _Context:
    """Per column: the canonical settings seen in some trials (set, lowest and highest >= 0;
    lowest > highest when none), as of one version of the canonical settings."""

    __slots__ = ("version", "done", "values", "lo", "hi")

    def __init__(self, version: int, width: int) -> None:
        self.version, self.done = version, 0
        self.values: list[set[float]] = [set() for _ in range(width)]
        self.lo, self.hi = [np.inf] * width, [-np.inf] * width

    def extend(self, canon_rows: np.ndarray, order: list[int]) -> None:
        if self.done == len(order):
            return
        block = canon_rows[order[self.done :], : len(self.values)]
        self.done = len(order)
        lo = np.where(block >= 0, block, np.inf).min(axis=0).tolist()
        hi = np.where(block >= 0, block, -np.inf).max(axis=0).tolist()
        many = len(block) > _FEW_ROWS  # a new version: every inert pair's trials again
        for q, col in enumerate(block.T if many else block.T.tolist()):
            self.values[q].update(np.unique(col).tolist() if many else col)
            self.lo[q], self.hi[q] = min(self.lo[q], lo[q]), max(self.hi[q], hi[q])


def _deciders(rows: np.ndarray, j: int) -> list[tuple[tuple[int, ...], dict[tuple, bool]]]:
    """The single genes, then the pairs of genes, whose settings decide gene ``j``'s presence in
    every one of ``rows``, each with its table (setting -> present)."""
    codes = np.stack([np.unique(col, return_inverse=True)[1].reshape(-1) for col in rows.T], axis=1)
    sizes = codes.max(axis=0) + 1
    present = (rows[:, j] >= 0).astype(float)
    others = [q for q in range(rows.shape[1]) if q != j]
    out = []
    for qs in [(q,) for q in others] + [(a, b) for a in others for b in others if a < b]:
        key = codes[:, qs[0]] if len(qs) == 1 else codes[:, qs[0]] * sizes[qs[1]] + codes[:, qs[1]]
        on = np.bincount(key, weights=present)
        count = np.bincount(key)
        if not ((on > 0) & (on < count)).any():
            _, first = np.unique(key, return_index=True)
            settings = map(tuple, rows[first][:, list(qs)].tolist())
            out.append((qs, dict(zip(settings, (present[first] > 0).tolist(), strict=True))))
    return out


class _Group:
    """The indexed trials with one canonical setting: their rows and binaries."""

    __slots__ = ("rows", "hashes", "first")

    def __init__(self) -> None:
        self.rows: set[int] = set()
        self.hashes: dict[int, int] = {}
        self.first = -1

    def put(self, i: int, h: int) -> None:
        self.rows.add(i)
        self.hashes[h] = self.hashes.get(h, 0) + 1
        if self.first < 0 or i < self.first:
            self.first = i

    def take(self, i: int, h: int) -> None:
        self.rows.discard(i)
        self.hashes[h] -= 1
        if not self.hashes[h]:
            del self.hashes[h]
        if i == self.first:
            self.first = min(self.rows) if self.rows else -1


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

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _GeneRule):
            return NotImplemented
        if self.switches != other.switches or self.maps != other.maps:
            return False
        a, b = self.whole, other.whole
        if a is None or b is None:
            return a is b
        return a[0] == b[0] and a[2] == b[2] and np.array_equal(a[1], b[1])

    __hash__ = None  # type: ignore[assignment]

    def column(self, rows: np.ndarray, j: int) -> np.ndarray:
        """Gene ``j``'s canonical codes in ``rows`` (raw codes, absent = -1)."""
        col = rows[:, j]
        out = col.copy()
        if self.switches:
            where: dict[tuple, list[int]] = {}
            for i, key in enumerate(map(tuple, rows[:, self.switches].tolist())):
                if key in self.maps:
                    where.setdefault(key, []).append(i)
            parts = [(np.array(idx), self.maps[key]) for key, idx in where.items()]
        else:
            parts = [(slice(None), classes) for classes in self.maps.values()]
        for idx, classes in parts:
            sub, res = col[idx], out[idx]
            for lo, hi, c in classes:
                res[(sub >= lo) & (sub <= hi)] = c
            out[idx] = res
        if self.whole is not None:
            q, settings, interval = self.whole
            if q < 0:
                out[:] = _ANY
            else:
                ctx = rows[:, q]
                inside = (ctx >= settings.min()) & (ctx <= settings.max()) if interval else np.isin(ctx, settings)
                out[inside] = _ANY
        return out


def _rows_to_redo(old: _GeneRule | None, new: _GeneRule | None, rows: np.ndarray) -> np.ndarray | None:
    """The rows (ascending) whose canonical code of the gene can differ between rule ``old`` and
    ``new``: those whose switch settings have other value classes in ``new``, when only value
    classes of a few settings changed (the common case: one new inert pair merges two classes);
    None: every row (new switches, a change of inertness as a whole, or many settings changed).
    A rule with 14 switches has hundreds of settings, and recomputing its column over every
    compiled trial on each such change was the cost that grew with the study."""
    if old is None or new is None or old.switches != new.switches or not old.switches:
        return None
    a, b = old.whole, new.whole
    if (a is None) != (b is None) or (a is not None and (a[0] != b[0] or a[2] != b[2] or not np.array_equal(a[1], b[1]))):
        return None
    keys = [key for key in old.maps.keys() | new.maps.keys() if old.maps.get(key) != new.maps.get(key)]
    if len(keys) > _FEW_ROWS:
        return None
    settings = rows[:, old.switches]
    hit = np.zeros(len(rows), dtype=bool)
    for key in keys:
        hit |= (settings == np.array(key)).all(axis=1)
    return np.nonzero(hit)[0]


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
