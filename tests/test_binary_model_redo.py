"""BinaryModel keeps the canonical settings of every compiled trial equal to its rules' columns
when a rule changes only for a few switch settings (only those trials are recomputed)."""

from __future__ import annotations

import numpy as np
import pytest

from ciq_optuna.samplers import _binaries
from ciq_optuna.samplers._binaries import BinaryModel


def _binary(row: np.ndarray) -> str:
    """A kernel's binary: gene 0 matters only where gene 2 is 1, gene 1 only in halves (0-3 / 4-7)
    and only where gene 3 is at most 2, gene 4 never."""
    a, b, c, d, _ = row.astype(int).tolist()
    return f"{a if c == 1 else 0}-{b // 4 if d <= 2 else 0}-{c}-{d}"


def _toy_model(seed: int) -> tuple[np.random.Generator, BinaryModel, np.ndarray]:
    """A random generator, an empty model of five genes (the second ordered) and the genes' sizes."""
    m = BinaryModel()
    m.set_ordered([False, True, False, False, False])
    return np.random.default_rng(seed), m, np.array([4, 8, 3, 5, 6])


@pytest.mark.parametrize("seed", [0, 1])
def test_canonical_settings_after_partial_redo_equal_a_full_recompute(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    redone: list[int | None] = []
    real = _binaries._rows_to_redo

    def counted(old, new, rows, index=None):  # type: ignore[no-untyped-def]
        at = real(old, new, rows, index)
        redone.append(None if at is None else len(at))
        return at

    monkeypatch.setattr(_binaries, "_rows_to_redo", counted)
    rng, m, sizes = _toy_model(seed)
    for number in range(600):
        row = (rng.random(5) * sizes).astype(int).astype(float)
        m.add(row, _binary(row), number)
        if number % 3 == 2:  # as with several workers: trials arrive a few at a time
            m.predict(row[None, :])
            n = m.n
            assert np.array_equal(m._canon_rows[:n], m._canonical(m._rows[:n])), number
    partial = [k for k in redone if k is not None]
    assert partial and max(partial) < 600  # the partial path ran, on a part of the trials


@pytest.mark.parametrize("seed", [0, 1])
def test_groups_and_contexts_kept_as_trials_move_equal_those_made_afresh(seed: int) -> None:
    """The index of canonical settings (each group's trials, binaries and earliest trial) and the
    contexts of the genes' inert pairs, kept up to date as rules change and trials move, equal
    the same made from scratch from the trials' canonical settings."""
    rng, m, sizes = _toy_model(seed)
    for number in range(500):
        row = (rng.random(5) * sizes).astype(int).astype(float)
        m.add(row, _binary(row), number)
        if number % 4 != 3:
            continue
        m.predict((rng.random((8, 5)) * sizes).astype(int).astype(float))
        fresh: dict[tuple, tuple[set[int], dict[int, int]]] = {}
        for i, key in enumerate(map(tuple, m._canon_rows.tolist())):
            rows, hashes = fresh.setdefault(key, (set(), {}))
            rows.add(i)
            hashes[m._hash[i]] = hashes.get(m._hash[i], 0) + 1
        assert m._keys == list(map(tuple, m._canon_rows.tolist()))
        assert {k: (g.rows, g.hashes, g.first) for k, g in m._groups.items()} == {
            k: (rows, hashes, min(rows)) for k, (rows, hashes) in fresh.items()
        }, number
        for j in list(m._contexts):
            ctx = m._context(j)  # brought up to date with the gene's inert pairs, as when asked
            made = _binaries._Context(len(ctx.values))
            made.extend(m._canon_rows, m._genes[j].s_order)
            assert (ctx.values, ctx.lo, ctx.hi) == (made.values, made.lo, made.hi), (number, j)

