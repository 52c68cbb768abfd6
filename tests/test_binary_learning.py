"""The binary model's cheaper ways of learning a trial give what the plain ways give: the
evidence of a few new trials (one comparison per trial over a transposed copy) equals the
vectorised pass over all of them, and a rule without switches canonicalises by sorted classes
as it would class by class."""

from __future__ import annotations

import numpy as np

from ciq_optuna.samplers import _binaries
from ciq_optuna.samplers._binaries import BinaryModel, _GeneRule, _merge
from ciq_optuna.samplers._neighbours import _REBUILD, Neighbours


def test_evidence_trial_by_trial_equals_the_vectorised_pass() -> None:
    rng = np.random.default_rng(3)
    n, d = 2 * _REBUILD + 120, 7
    rows = rng.integers(-1, 3, (n, d)).astype(float)
    rows[rows == 0] = -0.0  # alike to 0.0, as for ==
    rows[rng.random(n) < 0.5, 5:] = -1.0  # genes absent in half the trials
    hid = rng.integers(0, 6, n)
    near = Neighbours()
    for k in range(60):
        near.add(int(hid[k]), k)
    done, found = 60, 0
    while done < n:  # a few trials at a time, past the first look-ups (the sorted hashes then)
        upto = min(n, done + int(rng.integers(1, 6)))
        for k in range(done, upto):
            near.add(int(hid[k]), k)
        cols = np.ascontiguousarray(rows[:upto].T)
        same, diff = _binaries._evidence_one_by_one(rows[:upto], cols, hid[:upto], done, near)
        want_same, want_diff = _binaries._evidence_at_once(rows[:upto], hid[:upto], done)
        assert same.tolist() == want_same.tolist() and diff.tolist() == want_diff.tolist(), done
        found += len(same) + len(diff)
        done = upto
    assert found > 100


def test_rule_without_switches_canonicalises_as_class_by_class() -> None:
    rng = np.random.default_rng(4)
    checked = many = 0
    for ordered in (False, True):
        for _ in range(200):
            values = rng.integers(-1, 12, (int(rng.integers(1, 14)), 2)).astype(float)
            pairs = [(min(a, b), max(a, b)) for a, b in values.tolist() if a != b]
            blocked = {p for p in pairs if rng.random() < 0.15}
            classes = _merge(pairs, blocked, ordered)
            if not classes:
                continue
            rows = rng.integers(-1, 14, (int(rng.integers(1, 80)), 3)).astype(float)
            rows[:, 1] += rng.choice([0.0, 0.5], len(rows))  # values between the codes too
            want = rows[:, 1].copy()
            for lo, hi, c in classes:
                want[(rows[:, 1] >= lo) & (rows[:, 1] <= hi)] = c
            got = _GeneRule([], {(): classes}, None).column(rows, 1)
            many += len(classes) > _binaries._FEW_CLASSES
            assert got.tolist() == want.tolist(), (classes, rows[:, 1].tolist())
            checked += 1
    assert checked > 300 and many > 50  # the sorted look-up ran


def test_groups_kept_as_trials_move_equal_groups_made_afresh() -> None:
    """Gene 0 matters only where gene 2 is 1, gene 1 in halves and only where gene 3 is at most 2:
    as evidence comes a few trials at a time, rules change and trials move between groups."""
    rng = np.random.default_rng(5)
    m = BinaryModel()
    m.set_ordered([False, True, False, False, False])
    sizes = np.array([4, 8, 3, 5, 6])
    moved = 0
    for number in range(500):
        row = (rng.random(5) * sizes).astype(int).astype(float)
        a, b, c, d, _ = row.astype(int).tolist()
        m.add(row, f"{a if c == 1 else 0}-{b // 4 if d <= 2 else 0}-{c}-{d}", number)
        if number % 3 == 2:
            before = list(m._keys)
            m.predict(row[None, :])
            moved += sum(k != key for k, key in zip(before, m._keys))
            fresh: dict[tuple, tuple[set[int], dict[int, int]]] = {}
            for i, key in enumerate(m._keys):
                rows, hashes = fresh.setdefault(key, (set(), {}))
                rows.add(i)
                hashes[m._hash[i]] = hashes.get(m._hash[i], 0) + 1
            assert set(m._groups) == set(fresh)
            for key, (rows, hashes) in fresh.items():
                group = m._groups[key]
                assert group.rows == rows and group.hashes == hashes and group.first == min(rows)
    assert moved > 50
