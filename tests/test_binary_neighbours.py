"""The binary model's look-ups that replace scans of every compiled trial find what a scan finds:
partners one gene apart and with the same binary (samplers/_neighbours.py), the trials at a few
switch settings, and the contexts kept by counts as canonical settings change."""

from __future__ import annotations

import numpy as np
import pytest

from ciq_optuna.samplers import _binaries
from ciq_optuna.samplers._binaries import BinaryModel
from ciq_optuna.samplers._neighbours import _REBUILD, Neighbours


def _rows(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    rows = rng.integers(-1, 3, (n, d)).astype(float)
    rows[rows == 0] = -0.0  # alike to 0.0 for the look-ups, as for ==
    return rows


def test_one_apart_and_same_binary_hold_every_partner_a_scan_finds() -> None:
    rng = np.random.default_rng(0)
    rows, hid = _rows(rng, 3 * _REBUILD + 50, 5), rng.integers(0, 30, 3 * _REBUILD + 50)
    near = Neighbours()
    for k in range(len(rows)):
        near.add(int(hid[k]), k)
    sorted_path = 0
    for k in range(1, len(rows)):
        nd = (rows[:k] != rows[k]).sum(axis=1)
        found = near.one_apart(rows, k)
        if found is not None:
            sorted_path += 1
            assert np.all(found < k) and np.all(np.diff(found) > 0)
            assert set(np.flatnonzero(nd <= 1).tolist()) <= set(found.tolist())
        assert near.same_binary(int(hid[k]), k).tolist() == np.flatnonzero(hid[:k] == hid[k]).tolist()
    assert sorted_path > _REBUILD  # past the first lookups, the sorted hashes answered


def test_trials_at_settings_are_those_a_comparison_finds() -> None:
    rng = np.random.default_rng(1)
    rows = _rows(rng, 700, 6)
    index = _binaries._AtSettings([1, 3, 4])
    for n in (10, 300, 700):  # extended as trials come
        keys = [tuple(r) for r in rows[rng.integers(0, n, 4)][:, [1, 3, 4]].tolist()] + [(5.0, 5.0, 5.0)]
        want = [i for i in range(n) if tuple(rows[i, [1, 3, 4]].tolist()) in set(keys)]
        assert index.find(rows[:n], keys).tolist() == want


def test_contexts_kept_by_counts_equal_contexts_made_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Gene 0 matters only where gene 2 is 1; gene 1 in halves; as evidence comes, canonical
    settings change and the contexts follow them."""
    rng = np.random.default_rng(2)
    m = BinaryModel()
    m.set_ordered([False, True, False, False])
    sizes = np.array([4, 8, 3, 4])
    moved: list[int] = []
    real = _binaries._Context.move

    def counted(self, q, trials, before, after):  # type: ignore[no-untyped-def]
        moved.append(len(self.rows.intersection(trials)))
        real(self, q, trials, before, after)

    monkeypatch.setattr(_binaries._Context, "move", counted)
    for number in range(400):
        row = (rng.random(4) * sizes).astype(int).astype(float)
        a, b, c, d = row.astype(int).tolist()
        m.add(row, f"{a if c == 1 else 0}-{b // 4}-{c}-{d}", number)
        if number % 5 == 4:
            m.predict(row[None, :])
            for j, ctx in m._contexts.items():
                fresh = _binaries._Context(len(ctx.values))
                fresh.extend(m._canon_rows, m._genes[j].s_order[: ctx.done])
                assert ctx.values == fresh.values and ctx.lo == fresh.lo and ctx.hi == fresh.hi
            for j in list(m._genes):
                m._context(j)
    assert m._contexts and sum(moved) > 0  # trials in contexts changed canonical settings
