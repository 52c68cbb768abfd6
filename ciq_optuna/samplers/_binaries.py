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
  that do nothing for this kernel stop multiplying the configurations).  With ``_FIRST_PAIR``,
  one inert change is enough, for ordered genes too, as long as no change of the gene mattered
  and no failed check blamed it: a value never tried is predicted inert (with doubt, so a share
  of those predictions is compiled as checks, and the first wrong one ends the generalisation).  When changes of it
  mattered too, among values also seen inert, the gene is inert as a whole only where one other
  gene (its *context*) takes the settings of the inert pairs and none of those that mattered;
  if no single gene separates them, only the value classes remain.  With
  :attr:`BinaryModel.beyond_doubt`, an ordered gene whose changes were all inert (none mattered,
  no failed check), one of them between two values (not from its absence), is inert at every
  value it takes, beyond the interval seen inert too.

A failed prediction (a compiled check that gave another binary than predicted) counts as
"mattered" for every value change between the two configurations, which ends or narrows the
generalisation that made it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from ciq_optuna.samplers._neighbours import Neighbours, mixed

# Same-binary pairs differing in at most this many genes count as evidence that each of those
# value changes is inert.
_SAME_MAX_GENES = 4
# Distinct inert value changes of an unordered gene before it counts as inert as a whole.
_WHOLE_MIN_PAIRS = 2
# Any gene with one inert change, none that mattered and no failed check is inert as a whole.
# Off: measured on held-out tunes, not adopted (BENCHMARKS.md).
_FIRST_PAIR = False
# Doubt of a prediction that changes two genes never seen changed together in an inert pair
# (each inert alone, the two may interact).
_APART = 2
_ANY = -7.0  # canonical code of a gene inert as a whole
_PRESENT = -2  # context of a gene inert as a whole wherever it is present (BinaryModel.beyond_doubt)
# More new trials than this at once: their evidence is derived in one vectorised pass.
_BULK = 16
# Fewer rows than this are canonicalised row by row (a vectorised look-up costs more).
_FEW_ROWS = 48
# A rule change of at most this many switch settings recomputes only the trials at those settings.
_FEW_SETTINGS = 32
# At most this many combinations of open genes' values are tried for one configuration (one_class).
_ONE_CLASS_MAX = 256


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
        self._src: list[int] = []  # per trial: the row it was predicted from, or -1
        self._absorbed = 0  # trials whose evidence is derived (see _absorb)
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
        self._canon = np.empty((0, 0))  # canonical settings of the indexed trials, then room
        self._at_settings: dict[int, _AtSettings] = {}  # per gene with switches: trials per setting
        self._keys: list[tuple] = []
        self._groups: dict[tuple, _Group] = {}
        self._contexts: dict[int, _Context] = {}
        self._presence = _Presence()
        # compiled and skipped trials' configurations: what the presence conditions learn from
        self._shapes = np.full((64, 8), -1.0)
        self._n_shapes = 0
        self._shape_width = 0
        self._near = Neighbours()
        # per gene: how many values the objective may draw (0: not a finite choice); when set, a
        # configuration that leaves genes open is predicted only when every value they may take
        # there falls in one class (the prediction then holds whatever is drawn)
        self.domains: np.ndarray | None = None
        # inertness as a whole covers only the values seen in inert changes (not untried values
        # nor the gene's absence)
        self.whole_seen = False
        # > 0: an ordered gene whose changes were all inert (none mattered, no failed check) is
        # inert at every value it takes, beyond the interval seen inert too (not its absence); a
        # prediction through a value never seen inert carries at least this doubt
        self.beyond_doubt = 0

    @property
    def active(self) -> bool:
        """Whether any trial carried a binary hash (plain studies never turn this on)."""
        return bool(self._hash)

    @property
    def n(self) -> int:
        return len(self._hash)

    @property
    def _canon_rows(self) -> np.ndarray:
        """The canonical settings of the indexed trials (a view)."""
        return self._canon[: len(self._keys)]

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
        """Record a compiled trial; ``predicted_from``: the trial it was predicted (and checked)
        to repeat.  The evidence it gives against every earlier trial is derived at the next
        question to the model, for all trials added since in one pass (:meth:`_absorb`)."""
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
        self._shape(row, width)
        self._rows[k] = row
        self._hid[k] = h
        self._hash.append(h)
        self._near.add(h, k)
        self._number.append(number)
        self._src.append(-1 if src is None else src)
        self._by_number.setdefault(number, k)

    def add_shape(self, codes: np.ndarray) -> None:
        """Record the configuration of a trial that skipped its compile: no binary, but the
        parameters the objective asked for, so the conditions that decide which genes are
        suggested (:meth:`project`) are learnt from it too (else a plan that differs from it
        only in a gene the objective would not ask for looks new, and runs it again)."""
        row = self._fill(codes)
        self._shape(row, int(np.max(np.nonzero(row >= 0)[0], initial=-1)) + 1)

    def _shape(self, row: np.ndarray, width: int) -> None:
        """Append ``row`` (filled) to the configurations the presence conditions are learnt from."""
        k = self._n_shapes
        if k == len(self._shapes) or self._shapes.shape[1] < len(row):
            grown = np.full((max(2 * k, 64), max(len(row), self._shapes.shape[1])), -1.0)
            grown[:k, : self._shapes.shape[1]] = self._shapes[:k]
            self._shapes = grown
        if width > self._shape_width:
            self._shape_width = width
            self._presence = _Presence()
        self._shapes[k, : len(row)] = row
        self._n_shapes = k + 1

    def _absorb(self) -> None:
        """Derive the evidence of the trials added since the last call, against every earlier
        trial, in the order ``add`` by ``add`` would have: per trial, the inert pairs (same binary,
        at most ``_SAME_MAX_GENES`` genes apart), then a confirmed prediction farther apart, then
        the pairs one gene apart that gave different binaries.  Many trials at once (a study
        read for the first time) take one vectorised pass instead of one per trial."""
        n, done = len(self._hash), self._absorbed
        if done == n:
            return
        self._absorbed = n
        rows, hid = self._rows[:n], self._hid[:n]
        if n - done > _BULK:
            same, diff = _evidence_at_once(rows, hid, done)
        else:
            same, diff = _evidence_one_by_one(rows, hid, done, self._near)
        confirmed = [
            (k, src)
            for k, src in enumerate(self._src[done:n], start=done)
            if src >= 0 and hid[src] == hid[k] and int((rows[src] != rows[k]).sum()) > _SAME_MAX_GENES
        ]
        if confirmed:  # a confirmed prediction: every change was inert
            ks, srcs = np.array(confirmed).T
            gap = rows[srcs] != rows[ks]
            p, j = np.nonzero(gap)
            tail = np.column_stack([ks[p], np.ones_like(p), srcs[p], j])
            same = np.concatenate([same, tail])
            same = same[np.lexsort((same[:, 3], same[:, 2], same[:, 1], same[:, 0]))]
        for k, i, j in zip(*(same[:, c].tolist() for c in (0, 2, 3)), strict=True):
            self._same.setdefault(j, []).append((*_pair(rows[i, j], rows[k, j]), i, k))
            self._dirty.add(j)
        inert = same[same[:, 1] == 0]
        if len(inert):
            bounds = np.flatnonzero((np.diff(inert[:, 0]) != 0) | (np.diff(inert[:, 2]) != 0)) + 1
            for genes in np.split(inert[:, 3], bounds):
                g = genes.tolist()
                self._together.update((a, b) for a in g for b in g if a < b)
        for k, i, j in diff.tolist():
            self._diff.setdefault(j, []).append((*_pair(rows[i, j], rows[k, j]), i, k))
            self._dirty.add(j)

    def wrong_prediction(self, codes: np.ndarray, source_number: int) -> None:
        """A checked candidate gave another binary than predicted: every value change between
        it and the trial it was predicted from stops counting as inert (in that trial's context)."""
        i = self._by_number.get(source_number)
        if i is None:
            return
        self._absorb()
        row, src = self._fill(codes), self._rows[i]
        changed = [int(j) for j in np.where(row != src)[0]]
        self._refresh()
        ordered = self._ordered_list()
        suspects = [j for j in changed if self._untested(row, src, j, None, ordered)] or changed
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
        self._absorb()
        n = len(self._hash)
        if self._stale:
            self._genes = {}
            self._rules = {j: r for j in self._same if (r := self._rule(j)) is not None}
            self._dirty.clear()
            self._canon = self._canonical(self._rows[:n])
            self._keys, self._groups = [], {}
            for i, key in enumerate(map(tuple, self._canon.tolist())):
                self._keys.append(key)
                self._groups.setdefault(key, _Group()).put(i, self._hash[i])
            self._stale = False
            self._contexts.clear()
            self._at_settings.clear()
            return
        moved: set[int] = set()
        moves: list[tuple[int, list[int], list[float], list[float]]] = []
        m = len(self._keys)
        for j in sorted(self._dirty):
            rule = self._rule(j)
            if rule == self._rules.get(j):
                continue
            at = _rows_to_redo(self._rules.get(j), rule, self._rows[:m], self._settings_index(j, rule))
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
                before = self._canon[changed, j]
                self._canon[changed, j] = col_changed
                moved.update(changed.tolist())
                moves.append((j, changed.tolist(), before.tolist(), col_changed.tolist()))
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
            if n > len(self._canon) or canon.shape[1] != self._canon.shape[1]:  # room doubles
                grown = np.empty((max(n, 2 * len(self._canon)), canon.shape[1]))
                if m:
                    grown[:m] = self._canon[:m]
                self._canon = grown
            self._canon[m:n] = canon
            for i, key in enumerate(map(tuple, canon.tolist()), start=m):
                self._keys.append(key)
                self._groups.setdefault(key, _Group()).put(i, self._hash[i])
        for ctx in self._contexts.values():  # the trials that moved, in the contexts holding them
            for move in moves:
                ctx.move(*move)

    def _settings_index(self, j: int, rule: _GeneRule | None) -> _AtSettings | None:
        """The index of the trials per setting of gene ``j``'s switches (those of ``rule``)."""
        if rule is None or not rule.switches:
            return None
        index = self._at_settings.get(j)
        if index is None or index.switches != rule.switches:
            index = self._at_settings[j] = _AtSettings(rule.switches)
        return index

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
        unknown = np.zeros(len(rows), dtype=bool)
        if self.domains is not None:
            gaps = self.open_genes(rows)
            if gaps.any():
                unknown = self._one_class(rows, gaps)
        canon = self._canonical(rows)
        ordered = self._ordered_list()
        out: list[tuple[str, int, bool] | None] = []
        for row, mine, key, blind in zip(rows, canon, map(tuple, canon.tolist()), unknown.tolist(), strict=True):
            group = self._groups.get(key)
            if blind or group is None or len(group.hashes) > 1:
                out.append(None)
                continue
            number = self._number[group.first]
            src = self._rows[self._by_number[number]]
            changed = np.where(row != src)[0].tolist()
            doubt = int(any(self._untested(row, src, j, mine, ordered) for j in changed))
            if self.beyond_doubt and any(self._beyond(j, row) for j in changed):
                doubt = max(doubt, self.beyond_doubt)
            doubt += sum(self._failed.get(j, 0) for j in changed)
            if any((a, b) not in self._together for a in changed for b in changed if a < b):
                doubt += _APART
            out.append((self._hash_names[self._hash[group.first]], number, doubt))
        return out

    def _beyond(self, j: int, row: np.ndarray) -> bool:
        """Whether gene ``j`` is inert in ``row`` only by the stretch of an ordered gene's
        inertness to a value never seen inert (:attr:`beyond_doubt`)."""
        rule = self._rules.get(j)
        return rule is not None and rule.whole is not None and rule.whole[0] == _PRESENT and float(row[j]) not in self._genes[j].seen

    def open_genes(self, rows: np.ndarray) -> np.ndarray:
        """Per row (filled, as :meth:`_present` leaves it) and column: whether the row leaves
        open (absent) a gene that the objective will ask for there: one present in every compiled
        trial, or one whose presence condition says present at the row's settings of its deciding
        genes.  The objective then draws that gene at random (a plan whose move switched a gene
        on without its value), so its binary is not the one of a configuration without it."""
        self._presence.conditions(self._shapes, self._n_shapes, self._shape_width)
        seen = self._presence.seen
        out = np.zeros(rows.shape, dtype=bool)
        if seen is None:
            return out
        width = min(seen.shape[1], rows.shape[1])
        always = np.flatnonzero(seen[0, :width] & ~seen[1, :width])
        out[:, always] = rows[:, always] < 0
        for j, q, on in self._presence.present_where():
            out[:, j] |= (rows[:, j] < 0) & _settings_in(rows, q, on)
        return out

    def _one_class(self, rows: np.ndarray, gaps: np.ndarray) -> np.ndarray:
        """``rows`` whose open genes (``gaps``, :meth:`open_genes`) fall in one class there for
        every combination of the values the objective may draw for them (:attr:`domains`) get the
        first combination; returns whether each row is still open (not to be predicted)."""
        still = gaps.any(axis=1)
        sizes = self.domains
        for i in np.flatnonzero(still).tolist():
            cols = np.flatnonzero(gaps[i])
            n = [int(sizes[j]) if j < len(sizes) else 0 for j in cols.tolist()]
            if min(n) < 1 or int(np.prod(n)) > _ONE_CLASS_MAX:
                continue
            variants = np.repeat(rows[i][None, :], int(np.prod(n)), axis=0)
            variants[:, cols] = np.stack(np.meshgrid(*[np.arange(k, dtype=float) for k in n], indexing="ij"), -1).reshape(-1, len(n))
            variants = self._present(variants)
            if self.open_genes(variants).any():
                continue  # a value drawn opens another gene
            canon = self._canonical(variants)
            if (canon == canon[0]).all():
                rows[i], still[i] = variants[0], False
        return still

    def project(self, codes: np.ndarray) -> np.ndarray:
        """``codes`` (absent = NaN) with the genes set absent that the compiled trials show would
        not be suggested there (see :meth:`_present`): the configurations the objective will see."""
        if not self._hash:
            return codes
        rows = self._present(self._fill(codes))[..., : codes.shape[-1]]
        return np.where((rows < 0) & ~np.isnan(codes) & (codes >= 0), np.nan, codes)

    def _ordered_list(self) -> list[bool]:
        """Per column of the rows: whether the gene is ordered (as :meth:`_is_ordered`)."""
        ordered = self._ordered.tolist()[: self._rows.shape[1]]
        return ordered + [False] * (self._rows.shape[1] - len(ordered))

    def _untested(
        self,
        row: np.ndarray,
        src: np.ndarray,
        j: int,
        mine: np.ndarray | None = None,
        ordered: list[bool] | None = None,
    ) -> bool:
        """Whether ``row``'s context is new to gene ``j`` (whose change from ``src`` is predicted
        inert): another gene takes a (canonical) setting never seen in ``j``'s inert pairs (for an
        ordered gene: outside their range), or gene ``j`` takes a value never seen in its inert
        pairs where it is inert as a whole from a single inert change (``_FIRST_PAIR``).  ``mine``: ``row``'s canonical settings if known;
        ``ordered``: which genes are ordered, if known (the model is then up to date)."""
        if ordered is None:
            self._refresh()
            ordered = self._ordered_list()
        context = self._context(j)
        if context is None:
            return True
        rule, gene = self._rules.get(j), self._genes.get(j)
        if rule is not None and rule.whole is not None and float(row[j]) not in gene.seen:
            if ordered[j] or len(gene.same_pairs) < _WHOLE_MIN_PAIRS:  # generalised from one change
                return True
        if mine is None:
            mine = self._canonical(row[None, :])[0]
        width = len(context.values)
        lo, hi, values = context.lo, context.hi, context.values
        for q, v in enumerate(mine[:width].tolist()):
            if q == j:
                continue
            if ordered[q] and v >= 0 and lo[q] <= hi[q]:
                if not lo[q] <= v <= hi[q]:
                    return True
            elif v not in values[q]:
                return True
        return bool((mine[width:] != -1.0).any())

    def _context(self, j: int) -> _Context | None:
        """The canonical settings of the trials in gene ``j``'s inert pairs, per column below
        the width (kept up to date as pairs come); None without such pairs."""
        if not self._same.get(j):
            return None
        gene = self._genes[j]  # digested by _refresh
        ctx = self._contexts.get(j)
        if ctx is None:
            ctx = self._contexts[j] = _Context(self._width)
        ctx.extend(self._canon_rows, gene.s_order)
        return ctx

    def present(self, codes: np.ndarray) -> np.ndarray:
        """``codes`` (absent = NaN) filled (absent = -1) and as :meth:`_present` leaves them."""
        return self._present(self._fill(codes))

    def _present(self, rows: np.ndarray) -> np.ndarray:
        """``rows`` with the genes set absent that the compiled trials show would not be
        suggested there (a parameter whose condition depends on one or two others, e.g. a
        register-usage level not offered at ``-O0``), so a planned configuration is compared as
        the objective will see it."""
        self._presence.conditions(self._shapes, self._n_shapes, self._shape_width)
        conditions = self._presence.absent_where()
        if not conditions:
            return rows
        touched = np.zeros(len(rows), dtype=bool)
        cleared: set[int] = set()
        for j, q, off in conditions:
            hit = _settings_in(rows, q, off) & (rows[:, j] >= 0)
            if hit.any():
                rows[hit, j] = -1.0
                touched |= hit
                cleared.add(j)
        # a condition on a gene that is itself conditional: a second pass, of the conditions on a
        # gene the first cleared, over the rows it cleared (the others are as the first saw them)
        again = [(j, q, off) for j, q, off in conditions if not cleared.isdisjoint(q)]
        if again:
            at = np.flatnonzero(touched)
            part = rows[at]
            for j, q, off in again:
                hit = _settings_in(part, q, off)
                part[hit & (part[:, j] >= 0), j] = -1.0
            rows[at] = part
        return rows


class _Presence:
    """Presence conditions learnt from the compiled trials, row by row: per gene absent from some
    trials and present in others, the one or two other genes whose settings decided its presence
    in every compiled trial (one gene if any does; among those, the fewest settings)."""

    def __init__(self) -> None:
        self._upto = 0
        self._present: np.ndarray | None = None  # per column: present in some trial, absent in some
        self._candidates: dict[int, list[tuple[tuple[int, ...], dict[tuple, bool]]]] = {}
        self._paired: set[int] = set()  # genes whose candidates are pairs (no single gene decides)
        self._out: list[tuple[int, list[int], dict[tuple, bool]]] = []
        self._absent: list[tuple[int, list[int], np.ndarray]] | None = None
        self._on: list[tuple[int, list[int], np.ndarray]] | None = None

    def conditions(self, rows: np.ndarray, n: int, width: int) -> list[tuple[int, list[int], dict[tuple, bool]]]:
        if n == self._upto:
            return self._out
        new = rows[self._upto : n, :width] >= 0
        if self._present is None:
            self._present = np.zeros((2, width), dtype=bool)
        self._present[0] |= new.any(axis=0)
        self._present[1] |= (~new).any(axis=0)
        codes = None  # the settings of every trial so far as small integers, made once if needed
        for j in np.nonzero(self._present[0] & self._present[1])[0]:
            j = int(j)
            if j in self._candidates:
                self._learn(j, self._candidates[j], rows[self._upto : n])
            else:  # a gene newly seen both present and absent: every trial so far
                codes = _codes(rows[:n, :width]) if codes is None else codes
                self._candidates[j] = _deciders(rows[:n, :width], codes, j, 1)
            if not self._candidates[j] and j not in self._paired:
                # no single gene decides (any more): the pairs that decide every trial so far
                codes = _codes(rows[:n, :width]) if codes is None else codes
                self._candidates[j] = _deciders(rows[:n, :width], codes, j, 2)
                self._paired.add(j)
        self._upto = n
        self._out, self._absent, self._on = [], None, None
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

    @property
    def seen(self) -> np.ndarray | None:
        """Per column: [present in some trial, absent in some trial] (None before any trial)."""
        return self._present

    def present_where(self) -> list[tuple[int, list[int], np.ndarray]]:
        """As :meth:`absent_where`, the settings where the gene was present."""
        if self._on is None:
            self._on = []
            for j, q, table in self._out:
                on = [setting for setting, present in table.items() if present]
                if on:
                    self._on.append((j, q, np.array(on, dtype=float).reshape(1, len(on), len(q))))
        return self._on

    def absent_where(self) -> list[tuple[int, list[int], np.ndarray]]:
        """Per condition of :meth:`conditions`: (gene, deciding genes, the settings of the
        deciding genes where the gene was absent, one row each)."""
        if self._absent is None:
            self._absent = []
            for j, q, table in self._out:
                off = [setting for setting, present in table.items() if not present]
                if off:
                    self._absent.append((j, q, np.array(off, dtype=float).reshape(1, len(off), len(q))))
        return self._absent

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
        regrouped = sw != self.keyed_by
        if regrouped:  # settings of new switches: group every pair again
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
        if not self.classes and whole is None:
            return None
        seen = None
        if model.whole_seen and whole is not None and whole[0] != _PRESENT:  # not an ordered gene's stretch
            seen = np.array(sorted(v for v in self.seen if v >= 0))
        return _GeneRule(sw, dict(self.classes), whole, None if regrouped else dirty, seen)

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
        """Where gene ``j`` is inert as a whole: (-1, ...) everywhere, (``_PRESENT``, ...) wherever
        it is present (an ordered gene, :attr:`BinaryModel.beyond_doubt`), (q, settings, interval)
        where gene q takes one of ``settings`` (or lies within their range when ``interval``);
        None: nowhere."""
        if _FIRST_PAIR and self.same_pairs and not self.diff_pairs and not model._failed.get(j):
            return -1, np.empty(0), False
        if model._is_ordered(j):
            present = any(a >= 0 for a, _ in self.same_pairs)  # an inert change between two values, not from absence
            if model.beyond_doubt and present and not self.diff_pairs and not model._failed.get(j):
                return _PRESENT, np.empty(0), False
            return None
        if len(self.same_pairs) < _WHOLE_MIN_PAIRS:
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
    """Per column: how many of some trials take each canonical setting (the settings seen: those
    counted) and the lowest and highest setting >= 0 (lowest > highest when none), kept as
    trials join and as their canonical settings change (:meth:`move`)."""

    __slots__ = ("done", "rows", "values", "lo", "hi")

    def __init__(self, width: int) -> None:
        self.done = 0
        self.rows: set[int] = set()
        self.values: list[dict[float, int]] = [{} for _ in range(width)]
        self.lo, self.hi = [np.inf] * width, [-np.inf] * width

    def extend(self, canon_rows: np.ndarray, order: list[int]) -> None:
        if self.done == len(order):
            return
        new = order[self.done :]
        self.done = len(order)
        self.rows.update(new)
        block = canon_rows[new, : len(self.values)]
        if len(new) > _FEW_ROWS:  # each column's distinct settings and their counts, sorted
            block = np.sort(block, axis=0)
            first = np.ones(block.shape, dtype=bool)
            first[1:] = block[1:] != block[:-1]
            for q, (col, starts) in enumerate(zip(block.T, first.T, strict=True)):
                at = np.flatnonzero(starts)
                self._count(q, col[at].tolist(), np.diff(np.append(at, len(col))).tolist())
        else:
            for q, col in enumerate(block.T.tolist()):
                self._count(q, col, [1] * len(col))

    def _count(self, q: int, settings: list[float], many: list[int]) -> None:
        counts = self.values[q]
        for v, c in zip(settings, many, strict=True):
            counts[v] = counts.get(v, 0) + c
            if v >= 0:
                self.lo[q], self.hi[q] = min(self.lo[q], v), max(self.hi[q], v)

    def move(self, q: int, trials: list[int], before: list[float], after: list[float]) -> None:
        """Trials ``trials`` changed their canonical setting of column ``q``."""
        if q >= len(self.values) or self.rows.isdisjoint(trials):
            return
        counts = self.values[q]
        gone = False
        for i, a, b in zip(trials, before, after, strict=True):
            if i in self.rows:
                counts[a] -= 1
                if not counts[a]:
                    del counts[a]
                    gone = True
                self._count(q, [b], [1])
        if gone:
            self.lo[q] = min((v for v in counts if v >= 0), default=np.inf)
            self.hi[q] = max((v for v in counts if v >= 0), default=-np.inf)


def _settings_in(rows: np.ndarray, q: list[int], settings: np.ndarray) -> np.ndarray:
    """Per row: whether its settings of genes ``q`` are one of ``settings`` (shape (1, k, len(q)))."""
    if len(q) == 1:
        return (rows[:, q[0], None] == settings.reshape(-1)).any(axis=1)
    return (rows[:, None, q] == settings).all(axis=2).any(axis=1)


def _codes(rows: np.ndarray) -> np.ndarray:
    """Each column's settings as small integers (0, 1, ... in the order of the settings)."""
    return np.stack([np.unique(col, return_inverse=True)[1].reshape(-1) for col in rows.T], axis=1)


def _deciders(
    rows: np.ndarray, codes: np.ndarray, j: int, size: int
) -> list[tuple[tuple[int, ...], dict[tuple, bool]]]:
    """The single genes (``size`` 1) or the pairs of genes (2) whose settings decide gene ``j``'s
    presence in every one of ``rows``, each with its table (setting -> present).  Pairs are only
    looked for once no single gene decides: until then the conditions never use them, and the
    pairs that decide every trial so far are the ones a pair-by-pair check would have kept.
    ``codes``: :func:`_codes` of ``rows``."""
    sizes = codes.max(axis=0) + 1
    present = (rows[:, j] >= 0).astype(float)
    others = [q for q in range(rows.shape[1]) if q != j]
    out = []
    for qs in [(q,) for q in others] if size == 1 else [(a, b) for a in others for b in others if a < b]:
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

    __slots__ = ("switches", "maps", "whole", "changed", "seen", "_table")

    def __init__(
        self,
        switches: list[int],
        maps: dict[tuple, list[tuple[float, float, float]]],
        whole: tuple[int, np.ndarray, bool] | None,
        changed: set[tuple] | None = None,
        seen: np.ndarray | None = None,
    ) -> None:
        """``changed``: the settings of the switches whose classes may differ from the gene's
        previous rule (None: any); ``seen``: if given, inertness as a whole covers only these
        values (those seen in inert changes), not values never tried nor the gene's absence."""
        self.switches, self.maps, self.whole, self.changed = switches, maps, whole, changed
        self.seen = seen
        self._table: _ClassTable | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _GeneRule):
            return NotImplemented
        if self.switches != other.switches or self.maps != other.maps:
            return False
        if (self.seen is None) != (other.seen is None) or (
            self.seen is not None and not np.array_equal(self.seen, other.seen)
        ):
            return False
        a, b = self.whole, other.whole
        if a is None or b is None:
            return a is b
        return a[0] == b[0] and a[2] == b[2] and np.array_equal(a[1], b[1])

    __hash__ = None  # type: ignore[assignment]

    def column(self, rows: np.ndarray, j: int) -> np.ndarray:
        """Gene ``j``'s canonical codes in ``rows`` (raw codes, absent = -1); with switches, one
        look-up of (setting of the switches, value) in the classes of every setting at once."""
        col = rows[:, j]
        out = col.copy()
        if self.switches and len(rows) > _FEW_ROWS:
            if self._table is None:
                self._table = _ClassTable(self.maps)
            out = self._table.lookup(self._table.key_of(rows[:, self.switches]), col)
        elif self.switches:  # a few candidates: row by row
            values = col.tolist()
            for i, key in enumerate(map(tuple, rows[:, self.switches].tolist())):
                for lo, hi, c in self.maps.get(key, ()):
                    if lo <= values[i] <= hi:
                        out[i] = c
                        break
        else:
            for classes in self.maps.values():  # one setting: a few classes, disjoint
                for lo, hi, c in classes:
                    out[(col >= lo) & (col <= hi)] = c
        if self.whole is not None:
            q, settings, interval = self.whole
            if q == _PRESENT:
                inside = col >= 0
            elif q < 0:
                inside = np.ones(len(col), dtype=bool)
            else:
                ctx = rows[:, q]
                inside = (ctx >= settings.min()) & (ctx <= settings.max()) if interval else np.isin(ctx, settings)
            if self.seen is not None:
                inside &= np.isin(col, self.seen)
            out[inside] = _ANY
        return out


class _ClassTable:
    """A rule's value classes as sorted arrays, to canonicalise many rows in a few vectorised
    steps: the classes of one setting of the switches are disjoint ranges ``(low, high,
    smallest member)``, and a value in none of them stays as it is."""

    __slots__ = ("settings", "hashes", "by_hash", "key", "lo", "hi", "code", "lows", "span", "starts")

    def __init__(self, maps: dict[tuple, list[tuple[float, float, float]]]) -> None:
        self.settings = np.array(list(maps), dtype=float).reshape(len(maps), -1)
        hashes = _row_hashes(self.settings)
        self.by_hash = np.argsort(hashes)
        self.hashes = hashes[self.by_hash]
        if len(self.hashes) > 1 and (self.hashes[1:] == self.hashes[:-1]).any():
            self.hashes = None  # two settings hash alike (never seen): compare them one by one
        flat = [(k, lo, hi, c) for k, classes in enumerate(maps.values()) for lo, hi, c in classes]
        key, lo, hi, code = (np.array(v) for v in zip(*flat, strict=True)) if flat else (np.empty(0),) * 4
        order = np.lexsort((lo, key))
        self.key, self.lo, self.hi, self.code = key[order].astype(np.int64), lo[order], hi[order], code[order]
        self.lows = np.unique(self.lo)
        self.span = len(self.lows) + 1
        self.starts = self.key * self.span + np.searchsorted(self.lows, self.lo, side="right")

    def key_of(self, settings: np.ndarray) -> np.ndarray:
        """Per row: the index of its setting of the switches among the rule's, -1 if not one
        (found by hash, then checked)."""
        if self.hashes is None:
            index = {tuple(s): k for k, s in enumerate(self.settings.tolist())}
            return np.array([index.get(s, -1) for s in map(tuple, settings.tolist())], dtype=np.int64)
        hashes = _row_hashes(settings)
        at = np.minimum(np.searchsorted(self.hashes, hashes), len(self.hashes) - 1)
        key = self.by_hash[at]
        found = (self.hashes[at] == hashes) & (self.settings[key] == settings).all(axis=1)
        return np.where(found, key, -1)

    def lookup(self, key: np.ndarray, values: np.ndarray) -> np.ndarray:
        """``values`` with each one inside a class of its row's setting (``key``) replaced by the
        class's smallest member."""
        if not len(self.key):
            return values.copy()
        # the last class at or before (key, value) in (setting, low) order, exactly: a value is
        # ranked by the number of distinct lows at or below it
        ranks = np.searchsorted(self.lows, values, side="right")
        at = np.maximum(np.searchsorted(self.starts, key * self.span + ranks, side="right") - 1, 0)
        inside = (key >= 0) & (self.key[at] == key) & (self.lo[at] <= values) & (values <= self.hi[at])
        return np.where(inside, self.code[at], values)


def _row_hashes(rows: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row of floats (equal rows hash alike; -0.0 as 0.0)."""
    return (mixed(rows) * _weights(rows.shape[-1])).sum(axis=-1, dtype=np.uint64)


@functools.cache
def _weights(d: int) -> np.ndarray:
    """``d`` fixed random odd 64-bit weights (for hashes that are sums over columns)."""
    return np.random.default_rng(d).integers(0, 2**63, d, dtype=np.uint64) * np.uint64(2) + np.uint64(1)


def _rows_to_redo(
    old: _GeneRule | None, new: _GeneRule | None, rows: np.ndarray, index: _AtSettings | None = None
) -> np.ndarray | None:
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
    if old.seen is not None or new.seen is not None:  # the values inert as a whole changed
        return None
    looked = old.maps.keys() | new.maps.keys() if new.changed is None else new.changed
    keys = [key for key in looked if old.maps.get(key) != new.maps.get(key)]
    if len(keys) > _FEW_SETTINGS:
        return None
    if index is not None and index.switches == old.switches:
        return index.find(rows, keys)
    settings = rows[:, old.switches]
    hit = np.zeros(len(rows), dtype=bool)
    for key in keys:
        hit |= (settings == np.array(key)).all(axis=1)
    return np.nonzero(hit)[0]


class _AtSettings:
    """Hashes of every trial's settings of some genes (a gene's switches), extended as trials
    come, to find the trials at a few settings in one vectorised pass."""

    __slots__ = ("switches", "hashes")

    def __init__(self, switches: list[int]) -> None:
        self.switches = switches
        self.hashes = np.empty(0, dtype=np.uint64)

    def find(self, rows: np.ndarray, keys: list[tuple]) -> np.ndarray:
        """The trials (ascending) among ``rows`` whose settings of the switches are one of ``keys``."""
        upto = len(self.hashes)
        if len(rows) > upto:
            self.hashes = np.concatenate([self.hashes, _row_hashes(rows[upto:, self.switches])])
        wanted = np.array(keys, dtype=float).reshape(len(keys), len(self.switches))
        at = np.flatnonzero(np.isin(self.hashes[: len(rows)], _row_hashes(wanted)))
        if not len(at):
            return at
        exact = set(map(tuple, wanted.tolist()))
        return at[[key in exact for key in map(tuple, rows[at][:, self.switches].tolist())]]


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


def _evidence_one_by_one(
    rows: np.ndarray, hid: np.ndarray, done: int, near: Neighbours
) -> tuple[np.ndarray, np.ndarray]:
    """The evidence of trials ``done`` onwards against every earlier one, trial by trial (a few
    new trials), comparing each only with the partners ``near`` finds: see
    :func:`_evidence_at_once`."""
    same: list[tuple[int, int, int, int]] = []
    diff: list[tuple[int, int, int]] = []
    for k in range(done, len(rows)):
        at = near.same_binary(int(hid[k]), k)
        gap = rows[at] != rows[k]
        nd = gap.sum(axis=1)
        for p in np.flatnonzero((nd >= 1) & (nd <= _SAME_MAX_GENES)).tolist():
            same.extend((k, 0, int(at[p]), j) for j in np.flatnonzero(gap[p]).tolist())
        at = near.one_apart(rows, k)
        gap = rows[:k] != rows[k] if at is None else rows[at] != rows[k]
        other = (hid[:k] if at is None else hid[at]) != hid[k]
        for p in np.flatnonzero(other & (gap.sum(axis=1) == 1)).tolist():
            diff.append((k, p if at is None else int(at[p]), int(np.flatnonzero(gap[p])[0])))
    return np.array(same, dtype=np.int64).reshape(-1, 4), np.array(diff, dtype=np.int64).reshape(-1, 3)


def _evidence_at_once(rows: np.ndarray, hid: np.ndarray, done: int) -> tuple[np.ndarray, np.ndarray]:
    """The evidence of trials ``done`` onwards against every earlier one (index ``i < k``):
    ``same`` rows ``(k, 0, i, j)``, one per gene ``j`` changed between two trials that gave the
    same binary at most ``_SAME_MAX_GENES`` genes apart; ``diff`` rows ``(k, i, j)``, pairs that
    differ in gene ``j`` alone and gave different binaries; each sorted by ``(k, i, j)``.

    Only pairs that can qualify are compared: those within one binary (same), and those equal
    in every gene but ``j`` (diff: found per gene by grouping a hash of the other genes'
    settings, then checked exactly)."""
    n, d = rows.shape
    i, k = _earlier_in_groups(hid, done)
    gap = rows[i] != rows[k]
    nd = gap.sum(axis=1)
    keep = (nd >= 1) & (nd <= _SAME_MAX_GENES)
    i, k, gap = i[keep], k[keep], gap[keep]
    order = np.lexsort((i, k))
    p, j = np.nonzero(gap[order])
    same = np.column_stack([k[order][p], np.zeros_like(p), i[order][p], j])
    ids = _codes(rows).astype(np.uint64) if d else np.empty((n, 0), dtype=np.uint64)
    weights = _weights(d)
    whole = (ids * weights).sum(axis=1, dtype=np.uint64)  # wraps around: a hash of the row
    found = []
    for c in range(d):
        i, k = _earlier_in_groups(whole - ids[:, c] * weights[c], done)
        gap = rows[i] != rows[k]
        ok = (gap.sum(axis=1) == 1) & gap[:, c] & (hid[i] != hid[k])
        found.append(np.column_stack([k[ok], i[ok], np.full(int(ok.sum()), c)]))
    diff = np.concatenate(found) if found else np.empty((0, 3), dtype=np.int64)
    diff = diff[np.lexsort((diff[:, 1], diff[:, 0]))]
    return same.astype(np.int64), diff.astype(np.int64)


def _earlier_in_groups(keys: np.ndarray, done: int) -> tuple[np.ndarray, np.ndarray]:
    """Every pair ``(i, k)`` of indices with ``keys[i] == keys[k]``, ``i < k`` and ``k >= done``."""
    n = len(keys)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    first = np.repeat(starts, np.diff(np.r_[starts, n]))  # per position: where its group starts
    before = np.arange(n) - first
    before[order < done] = 0
    total = int(before.sum())
    k = np.repeat(order, before)
    offset = np.arange(total) - np.repeat(np.cumsum(before) - before, before)
    i = order[np.repeat(first, before) + offset]
    return i, k


def _pair(a: float, b: float) -> tuple[float, float]:
    return (float(a), float(b)) if a <= b else (float(b), float(a))
