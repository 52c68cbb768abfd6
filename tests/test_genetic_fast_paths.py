"""GeneticSampler's fast paths against their plain definitions (the speed work keeps proposals):
the two-gene neighbourhood, the niche elite and the failure risk."""

from __future__ import annotations

import math

import numpy as np
import optuna
from optuna.distributions import CategoricalDistribution

from ciq_optuna.samplers import GeneticSampler
from ciq_optuna.samplers._genes import Gene, draws_random, neighbours

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _two_genes_by_definition(row: np.ndarray, kind: np.ndarray, nval: np.ndarray, rng: np.random.RandomState) -> np.ndarray:
    """The one-gene neighbours of every one-gene neighbour, those two genes away kept, sorted."""
    first = neighbours(row, kind, nval, rng)
    if not len(first):
        return first
    both = np.concatenate([neighbours(r, kind, nval, rng) for r in first])
    both = both[((both != row) & ~np.isnan(row)).sum(axis=1) == 2]
    return np.unique(both, axis=0)


def test_two_gene_neighbourhood_is_the_neighbours_of_the_neighbours() -> None:
    r = np.random.RandomState(5)
    for _ in range(200):
        d = r.randint(1, 7)
        kind = r.randint(0, 3, d)  # ordered, categorical, continuous
        nval = np.array([1.0 if k == 2 else float(r.choice([1, 2, 3, 5, 16, 17, 40])) for k in kind])
        row = np.array([r.rand() if k == 2 else float(r.randint(0, int(n))) for k, n in zip(kind, nval)])
        row[r.rand(d) < 0.2] = math.nan  # absent genes
        seed = r.randint(1000)
        fast, plain = np.random.RandomState(seed), np.random.RandomState(seed)
        got = neighbours(row, kind, nval, fast, depth=2)
        want = _two_genes_by_definition(row, kind, nval, plain)
        assert got.shape == want.shape
        assert np.array_equal(np.nan_to_num(got, nan=-7.0), np.nan_to_num(want, nan=-7.0))
        after = fast.rand()
        assert after == plain.rand()  # the same random numbers drawn (wide genes)
        if not draws_random(row, kind, nval):
            assert after == np.random.RandomState(seed).rand()  # none drawn at all


def _objective(trial: optuna.Trial) -> float:
    x = trial.suggest_int("x", 0, 12)
    mode = trial.suggest_categorical("mode", ["a", "b", "c"])
    u = trial.suggest_categorical("u", [1, 2, 4, 8])
    if x > 9 and u > 2:
        raise ValueError("a failing region")
    return abs(x - 4) // 2 + (mode == "b") + abs(u - 2)


def test_niche_elite_and_failure_risk_equal_their_formulas() -> None:
    sampler = GeneticSampler(pool_size=24, seed=3)  # 8 survivors
    study = optuna.create_study(sampler=sampler)
    study.optimize(_objective, n_trials=150, catch=(ValueError,))
    assert sampler._n_failed > 0
    order = sampler._order()
    # the elite: greedily the best rows outside the niche of every better chosen row
    cand = order[: 8 * sampler._survivors()]
    dist = sampler._pair_distances(cand)
    chosen = [0]
    for i in range(1, len(cand)):
        if len(chosen) < sampler._survivors() and all(dist[i, c] >= sampler._niche for c in chosen):
            chosen.append(i)
    assert chosen != list(range(len(chosen)))  # the niche left some of the best rows out
    sampler._elite_cache = ((), np.empty(0, dtype=int))
    assert sampler._elite(order).tolist() == cand[chosen].tolist()
    # the failure risk: the highest smoothed failure rate of a candidate's values
    d = len(sampler._names)
    cands = np.array(sampler._children(order, 30, 1.0))
    cands[0, 1] = math.nan  # an absent gene counts 0
    prior = sampler._n_failed / sampler._n
    x = sampler._x[: sampler._n, :d]
    failed = np.isnan(sampler._v[: sampler._n, 0])
    want = []
    for c in cands:
        rates = [0.0]
        for j in range(d):
            if not math.isnan(c[j]):
                same = x[:, j] == c[j]
                rates.append((np.sum(same & failed) + 2.0 * prior) / (np.sum(same) + 2.0))
        want.append(max(rates))
    assert np.allclose(sampler._fail_risk(cands), want, rtol=0, atol=1e-12)


def test_window_knob_sizes_the_distance_table_and_the_exploration() -> None:
    """``_window`` governs the compared rows, the distance table (4x) and the rows a restart's
    explorers are measured against (4x)."""
    sampler = GeneticSampler(pool_size=8, seed=1)
    sampler._window = 10
    study = optuna.create_study(sampler=sampler)
    study.optimize(_objective, n_trials=80, catch=(ValueError,))
    assert sampler._row_distances.window == 40
    seen = []
    real = sampler._distances
    sampler._distances = lambda cands, idx, run_from=None: seen.append(idx.copy()) or real(cands, idx, run_from)
    sampler._explore_pick(sampler._random_genomes(5), sampler._order())
    assert seen[-1].tolist() == list(range(sampler._n - 40, sampler._n))


def test_categorical_code_look_up_equals_the_choice_index() -> None:
    nan = float("nan")
    for choices in [(1, True, "a", None, 2.5, nan), (8, 16, 32, 64), (False, True), ("x", 1.0, 1)]:
        gene = Gene("p", CategoricalDistribution(choices))
        for value in [*choices, 1, 1.0, True, 0, False, "b", float("nan"), 2.5000000000000004, [1]]:
            dist = gene.dist
            try:
                idx = dist.to_internal_repr(value)
                want = float(gene.rank[int(idx)]) if gene.kind == "ord" else float(idx)
            except (ValueError, TypeError):
                want = math.nan
            got = gene.encode(value)
            assert got == want or (math.isnan(got) and math.isnan(want)), (choices, value)


def test_elite_kept_from_the_last_one_equals_the_niche_pass() -> None:
    sampler = GeneticSampler(pool_size=24, seed=4)
    kept = []
    plain = sampler._elite_kept

    def counted(key: tuple, s: int) -> np.ndarray | None:
        out = plain(key, s)
        kept.append(out is not None)
        return out

    sampler._elite_kept = counted  # type: ignore[method-assign]

    def check(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        order = sampler._order()
        got = sampler._elite(order).tolist()
        cache = sampler._elite_cache
        sampler._elite_cache = ((), np.empty(0, dtype=int))
        assert sampler._elite(order).tolist() == got
        sampler._elite_cache = cache

    def objective(trial: optuna.Trial) -> float:
        x, y = trial.suggest_int("x", 0, 60), trial.suggest_int("y", 0, 40)
        mode = trial.suggest_categorical("mode", ["a", "b", "c"])
        return abs(x - 17) + abs(y - 30) // 3 + (mode == "b") + 0.01 * x * y

    study = optuna.create_study(sampler=sampler)
    study.optimize(objective, n_trials=400, callbacks=[check])
    assert sum(kept) > 20 and not all(kept)


def test_activation_is_made_once_a_row_lacks_a_gene_with_the_rules_of_every_row() -> None:
    from ciq_optuna.samplers._genetic import _Activation

    sampler = GeneticSampler(pool_size=8, seed=2)
    made = []

    def objective(trial: optuna.Trial) -> float:
        x = trial.suggest_int("x", 0, 500)
        y = 0
        if trial.number >= 30 and trial.suggest_categorical("m", ["p", "q"]) == "p":  # from trial 30
            y = trial.suggest_int("y", 0, 5)
        made.append(sampler._activation is not None)
        return abs(x - 7) + y

    study = optuna.create_study(sampler=sampler)
    study.optimize(objective, n_trials=80)
    assert not any(made[:31]) and made[-1]  # no row lacked a gene before trial 30
    sampler._rules_n = -1
    sampler._learn_activation()
    d = len(sampler._names)
    plain = _Activation(d)
    for row in sampler._x[: sampler._n, :d]:
        plain.add(row)
    want = plain.rules()
    assert want and [(j, q, off.tolist()) for j, q, off in sampler._rules] == [(j, q, off.tolist()) for j, q, off in want]


def test_children_codes_checked_once_per_batch() -> None:
    """A batch of children is checked once to hold table codes: the pick then trusts them, with
    the scores it gives otherwise; a batch with a code off the tables is not trusted."""
    def objective(trial: optuna.Trial) -> float:
        a, b = trial.suggest_int("a", 0, 9), trial.suggest_int("b", 0, 5)
        if a > 6 and b > 2:
            raise ValueError("a failing region")  # failure rates for the pick
        return (a - 4) ** 2 + b

    sampler = GeneticSampler(pool_size=8, seed=2)
    study = optuna.create_study(sampler=sampler)
    study.optimize(objective, n_trials=120, catch=(ValueError,))
    sampler._sync(study)
    assert sampler._n_failed
    order = sampler._order()
    cands, keys, checked = sampler._bred(order, 16, 1.0)
    assert checked and len(keys) == len(cands) == 16
    cands[0, 0] = math.nan  # an absent gene: a table code too
    state = sampler._rng.get_state()
    plain = sampler._knn_score(cands, order)
    sampler._rng.set_state(state)
    assert np.array_equal(sampler._knn_score(cands, order, checked=True), plain)
    # a code below the tables (a fixed value out of range): its rates worked out from the counts
    off = cands[:3].copy()
    off[:, 1] = -1.0
    _, cols, stack = sampler._fail_stack
    prior = sampler._n_failed / sampler._n
    ci = np.where(np.isnan(off), 0, off).astype(int)
    rate = (stack[0, np.arange(len(cols)), ci] + 2.0 * prior) / (stack[1, np.arange(len(cols)), ci] + 2.0)
    rate[np.isnan(off)] = 0.0
    assert np.array_equal(sampler._fail_risk(off), rate.max(axis=1))
    sampler._x[sampler._elite(order)[0], 0] = 2.5  # an elite row off the tables (not a trial's code)
    assert not sampler._bred(order, 16, 1.0)[2]
