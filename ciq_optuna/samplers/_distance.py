"""Gene distances of candidate genomes to evaluated rows for GeneticSampler, fast and bit for bit.

The distance (:func:`direct`) is the sum over genes of ``min(|a - b| * scale, 1)``, an absent
gene (NaN) coded :data:`ABSENT` (so it differs by 1 from a present one), summed by numpy over the
last axis of an ``(m, k, d)`` array.  The sampler breaks ties between equal distances (the
nearest neighbours, the niche), so a faster computation must give the same floating-point values
to keep its proposals.  :class:`RowDistances` does: the term of a discrete gene (few integer
codes) for every recent row is looked up in a table of its possible values against those rows,
made once per row, instead of being worked out for each candidate; other genes use the formula;
the genes are summed in numpy's own pairwise order (:func:`pairwise_sum`).
tests/test_genetic_distance.py checks both against each other.  With ``pairwise=False`` both sum
gene by gene instead (one numpy reduction over the genes, cheaper than the pairwise order worked
out in Python; the values may differ from the pairwise sums in the last bit, so ties may break
otherwise), and in float32 (terms rounded from the float64 formula, half the memory to gather), again
the same bits by either path.
"""

from __future__ import annotations

import numpy as np

ABSENT = -1e12  # code of an absent gene in distances: differs by >= 1 from any present code
_TABLE_VALUES = 64  # genes with at most this many values get a table
_TABLE_CELLS = 1024  # table rows (values + 1 for absent) over all genes, at most
_PW_BLOCK = 128  # numpy's PW_BLOCKSIZE
_MIN_RUN = 16  # consecutive rows at the end of those asked for, read from the table as they are
_DIRECT_TERMS = 4096  # up to this many (candidate, row, gene) terms, the formula is faster
_FEW_ROWS = 4  # up to this many new rows, their table columns are made in Python (cheaper)


def direct(a: np.ndarray, b: np.ndarray, scale: np.ndarray, pairwise: bool = True) -> np.ndarray:
    """Distance of each row of ``a`` to each row of ``b``: the reference formula (``pairwise``:
    the genes summed in numpy's pairwise order, else one after the other in float32)."""
    if np.isnan(a).any() or np.isnan(b).any():
        a, b = np.nan_to_num(a, nan=ABSENT), np.nan_to_num(b, nan=ABSENT)
    if not pairwise:  # (genes, a, b) in C order: numpy adds the leading axis's slices in order
        diff = np.abs(np.ascontiguousarray(a.T)[:, :, None] - np.ascontiguousarray(b.T)[:, None, :])
        diff *= scale[:, None, None]
        np.minimum(diff, 1.0, out=diff)
        return diff.astype(np.float32).sum(axis=0)
    diff = np.abs(a[:, None, :] - b[None, :, :])
    diff *= scale  # 1 / (n - 1) for ordered genes; a categorical differs by >= 1
    np.minimum(diff, 1.0, out=diff)
    return diff.sum(axis=2)


def pairwise_sum(terms: np.ndarray) -> np.ndarray:
    """Sum over axis 0 of ``terms`` (d, ...) in the order numpy's pairwise summation adds ``d``
    contiguous numbers (``np.add.reduce`` over a contiguous last axis), so the result equals
    ``np.moveaxis(terms, 0, -1).copy().sum(axis=-1)`` bit for bit.  ``terms`` is overwritten."""
    return _pairwise(terms, 0, len(terms))


def _pairwise(t: np.ndarray, lo: int, n: int) -> np.ndarray:
    if n < 8:
        res = t[lo]
        for i in range(lo + 1, lo + n):
            res += t[i]
        return res
    if n <= _PW_BLOCK:
        r = t[lo : lo + 8]  # eight accumulators, then ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7))
        i = 8
        while i < n - n % 8:
            r += t[lo + i : lo + i + 8]
            i += 8
        r[0] += r[1]
        r[2] += r[3]
        r[4] += r[5]
        r[6] += r[7]
        r[0] += r[2]
        r[4] += r[6]
        r[0] += r[4]
        for j in range(lo + i, lo + n):
            r[0] += t[j]
        return r[0]
    n2 = n // 2
    n2 -= n2 % 8
    res = _pairwise(t, lo, n2)
    res += _pairwise(t, lo + n2, n - n2)
    return res


class RowDistances:
    """:func:`direct` against rows of the sampler's genome matrix, with per-gene tables over the
    latest ``window`` rows (kept in a buffer of twice that, shifted when full: O(values) per row).

    Rows must not change once added; a change of the genes (``d``, kinds or value counts) makes
    the tables again from the rows (pass new arrays for ``scale``, ``nval`` and ``tabled`` then:
    the same array objects are taken as unchanged).
    """

    def __init__(self, window: int = 1024, direct_terms: int = _DIRECT_TERMS) -> None:
        self.window = window
        self.direct_terms = direct_terms  # calls with at most this many terms use the formula
        self._key: tuple = ()
        self._arrays: tuple = ()
        self._keep: tuple = ()
        self._offset = np.zeros(0, dtype=np.intp)  # per gene: its first table row (tabled genes)
        self._row_gene = np.zeros(0, dtype=np.intp)
        self._has_table = np.zeros(0, dtype=bool)
        self._all_tabled = True  # every gene has a table
        self._table_genes: list[tuple[int, list[float], float]] = []
        self._terms: dict[tuple[int, float], list[float]] = {}  # (gene, code): its table rows' terms
        self._table = np.empty((0, 0))  # rows: (gene, value or absent); columns: evaluated rows
        self._base = 0  # row of column 0
        self._upto = 0  # rows [base, upto) are in the table

    def __call__(
        self, x: np.ndarray, n: int, cands: np.ndarray, idx: np.ndarray, scale: np.ndarray,
        nval: np.ndarray, tabled: np.ndarray, run_from: int | None = None, pairwise: bool = True,
        checked: bool = False,
    ) -> np.ndarray:
        """Distances of ``cands`` (m x d) to rows ``idx`` of ``x`` (its first ``n`` rows are
        final); ``nval``: values per gene; ``tabled``: genes coded by integers below ``nval``
        (the others use the formula, gene by gene); ``run_from``: ``idx[run_from:]`` are known
        to be consecutive rows (else found out); ``pairwise``: see :func:`direct`; ``checked``:
        the caller knows that every code of ``cands`` is NaN or an integer in [0, ``nval``) (not
        checked again)."""
        d = cands.shape[1]
        m, k = len(cands), len(idx)
        if m * k * d <= self.direct_terms:  # the formula itself is faster for a few rows (same bits)
            return direct(cands, x[idx, :d], scale, pairwise) if k and m and d else np.zeros((m, k))
        self._update(x, n, d, scale, nval, tabled, np.float64 if pairwise else np.float32)
        # the table's columns for the rows asked for: a view of a run of consecutive rows in the
        # table; columns made afresh (the same formula) for the other rows, e.g. old elite rows
        if run_from is None or run_from >= k:
            breaks = np.flatnonzero(np.diff(idx) != 1)
            a = int(breaks[-1]) + 1 if len(breaks) else 0  # idx[a:] are consecutive rows
        else:
            a = run_from
        run = (a == 0 or k - a >= _MIN_RUN) and int(idx[a]) >= self._base and int(idx[-1]) < self._upto
        if run:
            table = self._table[:, int(idx[a]) - self._base : int(idx[-1]) + 1 - self._base]
            if a:
                old = idx[:a]
                if int(old.min()) >= self._base:  # still in the table: its columns
                    old = self._table.take(old - self._base, axis=1)
                else:
                    old = self._columns(x[old])
                table = np.concatenate([old, table], axis=1)
        elif int(idx.min()) >= self._base and int(idx.max()) < self._upto:  # rows in any order (the elite's pairs)
            table = self._table.take(idx - self._base, axis=1)
        else:
            table = self._columns(x[idx])
        table = table.astype(self._table.dtype, copy=False)  # columns made afresh: float64
        valid = None if checked else table_codes(cands, nval)
        if self._all_tabled and (checked or valid.all()):  # the usual case: every term looked up
            # absent (NaN): the gene's last table row; ``np.fmin`` gives it and keeps the codes (below it)
            rows = (np.fmin(cands, nval).astype(np.intp) + self._offset).T.ravel()
            terms = table.take(rows, axis=0).reshape(d, m, k)  # (d, m, k); ``take`` gathers faster
            return pairwise_sum(terms) if pairwise else terms.sum(axis=0)
        nan = np.isnan(cands)
        if valid is None:
            valid = table_codes(cands, nval)
        looked = valid.all(axis=0) & self._has_table
        codes = np.where(nan, nval, np.where(valid, cands, 0)).astype(np.intp)
        if looked.all():
            terms = table[(codes + self._offset).T]  # (d, m, k): every gene's term
        else:
            terms = table[np.where(looked, codes + self._offset, 0).T]
            for j in np.flatnonzero(~looked).tolist():
                terms[j] = _gene_formula(cands[:, j], x[idx, j], scale[j])
        return pairwise_sum(terms) if pairwise else terms.sum(axis=0)

    def _columns(self, b: np.ndarray) -> np.ndarray:
        """Table columns for the genome rows ``b``: the term of each (gene, value) against each."""
        if not len(self._row_gene):
            return np.zeros((1, len(b)))
        b = b.T[self._row_gene]  # (table rows, rows of b): the gene of each table row
        diff = np.abs(self._row_code[:, None] - np.where(np.isnan(b), ABSENT, b))
        diff *= self._row_scale[:, None]
        np.minimum(diff, 1.0, out=diff)
        return diff

    def _update(
        self, x: np.ndarray, n: int, d: int, scale: np.ndarray, nval: np.ndarray, tabled: np.ndarray, dtype: type
    ) -> None:
        cap = 2 * self.window
        same = self._arrays == (d, id(scale), id(nval), id(tabled), dtype)  # the same arrays: no change
        if not same and (key := (d, scale.tobytes(), nval.tobytes(), tabled.tobytes(), dtype)) != self._key:
            self._key = key
            order = sorted(np.flatnonzero(tabled & (nval <= _TABLE_VALUES)).tolist(), key=lambda j: (nval[j], j))
            genes, cells = [], 0
            for j in order:
                if cells + int(nval[j]) + 1 > _TABLE_CELLS:
                    break
                genes.append(j)
                cells += int(nval[j]) + 1
            self._has_table = np.zeros(d, dtype=bool)
            self._has_table[genes] = True
            self._all_tabled = bool(self._has_table.all())
            sizes = np.where(self._has_table, nval + 1, 0).astype(np.intp)
            self._offset = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
            # per table row: its gene, value code (ABSENT: the gene absent from the candidate), scale
            self._row_gene = np.repeat(np.arange(d), sizes)
            self._row_code = np.concatenate([[*range(z - 1), ABSENT] for z in sizes.tolist() if z] or [[]]) * 1.0
            self._row_scale = scale[self._row_gene]
            # per tabled gene, for :meth:`_column`: (gene, its table rows' codes, its scale)
            codes = self._row_code.tolist()
            self._table_genes = [
                (j, codes[o : o + z], float(scale[j]))
                for j, o, z in zip(range(d), self._offset.tolist(), sizes.tolist())
                if z
            ]
            self._terms = {}
            self._table = np.zeros((max(1, len(self._row_gene)), cap), dtype=dtype)
            self._base = self._upto = max(0, n - self.window)
        self._arrays = (d, id(scale), id(nval), id(tabled), dtype)
        self._keep = (scale, nval, tabled)  # so that their ids are not reused while compared
        if n <= self._upto:
            return
        if n - self._base > cap:  # keep the latest ``window`` rows, at the front
            new_base = n - self.window
            keep = max(0, self._upto - new_base)
            self._table[:, :keep] = self._table[:, new_base - self._base : self._upto - self._base]
            self._base, self._upto = new_base, new_base + keep
        if n - self._upto <= _FEW_ROWS and self._table_genes:  # a row per trial: its column from term lists
            for i, row in enumerate(x[self._upto : n, :d].tolist(), self._upto - self._base):
                self._table[:, i] = self._column(row)
        else:
            self._table[:, self._upto - self._base : n - self._base] = self._columns(x[self._upto : n, :d])
        self._upto = n

    def _column(self, row: list[float]) -> list[float]:
        """The table column of one genome row (a list), as :meth:`_columns` makes it (the same
        float64 operations, one number at a time): each tabled gene's terms against its value are
        made once and kept."""
        column: list[float] = []
        terms = self._terms
        for j, codes, scale in self._table_genes:
            b = row[j]
            if b != b:  # NaN: the gene is absent
                b = ABSENT
            got = terms.get((j, b))
            if got is None:
                if len(terms) >= _TABLE_CELLS:
                    terms.clear()
                got = terms[(j, b)] = [min(abs(c - b) * scale, 1.0) for c in codes]
            column += got
        return column


def table_codes(codes: np.ndarray, nval: np.ndarray) -> np.ndarray:
    """Per code: whether it is absent (NaN) or an integer in [0, ``nval``), i.e. a row of its
    gene's table."""
    whole = np.floor(codes)
    return np.isnan(codes) | ((whole == codes) & (whole >= 0) & (whole < nval))


def _gene_formula(a: np.ndarray, b: np.ndarray, scale: float) -> np.ndarray:
    """One gene's term of :func:`direct` for codes ``a`` (rows of the result) against ``b``."""
    a = np.where(np.isnan(a), ABSENT, a)
    b = np.where(np.isnan(b), ABSENT, b)
    diff = np.abs(a[:, None] - b[None, :])
    diff *= scale
    np.minimum(diff, 1.0, out=diff)
    return diff
