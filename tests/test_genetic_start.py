"""GeneticSampler's start (generation 0 as a Sobol design, breeding inside generation 0) and
the local search's two-gene repair moves."""

from __future__ import annotations

import warnings
from collections import Counter

import numpy as np
import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState, create_trial

from ciq_optuna.samplers import GeneticSampler
from ciq_optuna.samplers._genes import Gene
from ciq_optuna.samplers._genetic import _keys, _Taken
from ciq_optuna.samplers._repair import repairs
from ciq_optuna.samplers._start import QMCStart, SobolStart, breeds_early

optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_sobol_rows_spread_every_gene_evenly() -> None:
    kind, nval = np.array([0, 1, 2]), np.array([4.0, 8.0, 1.0])
    start = SobolStart(seed=3)
    rows = np.array([start.row(i, kind, nval) for i in range(16)])
    assert Counter(rows[:, 0].tolist()) == {v: 4 for v in (0.0, 1.0, 2.0, 3.0)}
    assert Counter(rows[:, 1].tolist()) == {float(v): 2 for v in range(8)}
    assert ((rows[:, 2] >= 0) & (rows[:, 2] < 1)).all() and len(set(rows[:, 2])) == 16
    assert np.array_equal(SobolStart(seed=3).row(40, kind, nval), start.row(40, kind, nval))
    assert not np.array_equal(SobolStart(seed=4).row(5, kind, nval), start.row(5, kind, nval))
    # a gene seen later starts the sequence again with one more dimension
    assert start.row(2, np.array([0, 1, 2, 0]), np.array([4.0, 8.0, 1.0, 2.0])).shape == (4,)


def test_generation_zero_follows_the_design() -> None:
    def objective(trial: optuna.Trial) -> float:
        return float(sum(trial.suggest_int(k, 0, 7) for k in "abc"))

    sampler = GeneticSampler(pool_size=16, seed=5)
    sampler._g0_sobol, sampler._g0_breed, sampler._g0_qmc = True, 0.0, 0.0  # all of generation 0 from this design
    study = optuna.create_study(sampler=sampler)
    study.optimize(objective, n_trials=16)
    design = SobolStart(seed=5)
    kind, nval = np.zeros(3, dtype=int), np.full(3, 8.0)
    planned = [tuple(design.row(t.number, kind, nval).astype(int)) for t in study.trials[1:]]
    got = [tuple(t.params[k] for k in "abc") for t in study.trials[1:]]
    assert sum(p == g for p, g in zip(planned, got, strict=True)) >= 13  # the rest: a clash with trial 0


_QMC_SPACE = {
    "block": CategoricalDistribution([64, 16, 256, 32, 128]),  # numbers out of order: coded by rank
    "layout": CategoricalDistribution(["row", "col", "tile"]),
    "unroll": IntDistribution(1, 7, step=2),
    "ratio": FloatDistribution(0.0, 1.0, step=0.25),
    "alpha": FloatDistribution(0.5, 2.0),
}


def _qmc_trials(n: int) -> list[dict]:
    """The parameters of Optuna's default QMCSampler (unscrambled Sobol) on ``_QMC_SPACE``."""

    def objective(trial: optuna.Trial) -> float:
        return float(len(repr([trial._suggest(k, d) for k, d in _QMC_SPACE.items()])))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study = optuna.create_study(sampler=optuna.samplers.QMCSampler(seed=11, warn_independent_sampling=False))
    study.optimize(objective, n_trials=n)
    return [t.params for t in study.trials]


def test_qmc_rows_are_the_points_of_optunas_default_qmc_sampler() -> None:
    genes = [Gene(k, d) for k, d in _QMC_SPACE.items()]
    rows = QMCStart().rows(0, 40, genes)
    mine = [{g.name: g.decode(c) for g, c in zip(genes, row.tolist(), strict=True)} for row in rows]
    # Optuna's trial 0 is random; its trial i + 1 takes Sobol point i
    for got, want in zip(mine, _qmc_trials(41)[1:], strict=True):
        assert {k: v for k, v in got.items() if k != "alpha"} == {k: v for k, v in want.items() if k != "alpha"}
        assert abs(got["alpha"] - want["alpha"]) < 1e-9
    assert QMCStart().rows(5, 3, genes[:2]).tolist() == rows[5:8, :2].tolist()  # a gene more: a column more


def test_generation_zero_takes_the_qmc_points_in_order_skipping_taken_ones() -> None:
    def objective(trial: optuna.Trial) -> float:
        return float(trial.suggest_int("a", 0, 2) + trial.suggest_categorical("b", [2, 0, 1]))

    genes = [Gene("a", IntDistribution(0, 2)), Gene("b", CategoricalDistribution([2, 0, 1]))]
    points: list[dict] = []  # the design's distinct points in order (9 configurations in all)
    for row in QMCStart().rows(0, 64, genes).tolist():
        p = {g.name: g.decode(c) for g, c in zip(genes, row, strict=True)}
        if p not in points:
            points.append(p)
    for seed in range(3):
        sampler = GeneticSampler(pool_size=8, seed=seed)
        sampler._g0_qmc = 1.0
        study = optuna.create_study(sampler=sampler)
        for p in (points[1], points[4]):  # enqueued trials join generation 0; the design skips them
            study.enqueue_trial(p)
        study.optimize(objective, n_trials=8)
        got = [t.params for t in study.trials]
        assert got[:2] == [points[1], points[4]]
        assert got[2:] == [points[i] for i in (0, 2, 3, 5, 6, 7)]
        assert len({tuple(p.items()) for p in got}) == 8  # no duplicates


def test_qmc_generation_zero_with_a_conditional_parameter() -> None:
    def objective(trial: optuna.Trial) -> float:
        a = trial.suggest_int("a", 0, 3)
        b = trial.suggest_categorical("b", ["x", "y"])
        c = trial.suggest_int("c", 0, 3) if b == "y" else 0  # seen from the first trial with b = y
        return float(a + c)

    sampler = GeneticSampler(pool_size=12, seed=1)
    sampler._g0_qmc = 1.0
    study = optuna.create_study(sampler=sampler)
    study.optimize(objective, n_trials=12)
    got = [tuple(sorted(t.params.items())) for t in study.trials]
    assert len(set(got)) == 12 and any(len(p) == 3 for p in got) and any(len(p) == 2 for p in got)
    design = QMCStart().rows(0, 64, [Gene("a", IntDistribution(0, 3)), Gene("b", CategoricalDistribution(["x", "y"]))])
    ab = [(int(a), ["x", "y"][int(b)]) for a, b in design.tolist()]
    # generation 0 walks the design in order: each (a, b) of trials 1-11 is a later point than the one before
    j = -1
    for t in study.trials[1:]:
        j = ab.index((t.params["a"], t.params["b"]), j + 1)
    assert j < 16


def test_breeding_starts_inside_generation_zero() -> None:
    assert not breeds_early(3, 20, 0.5, 5) and breeds_early(10, 20, 0.5, 2)
    assert not breeds_early(10, 20, 0.5, 1) and not breeds_early(25, 20, 0.5, 5)
    assert not breeds_early(10, 20, 0.0, 5) and not breeds_early(10, 20, 1.0, 5)
    # every second slot from the first bred one (5 of 20): 5, 7, 9, ...; the others stay random
    assert [n for n in range(20) if breeds_early(n, 20, 0.25, 5, every=2)] == list(range(5, 20, 2))

    def second_half_good(share: float) -> int:
        def objective(trial: optuna.Trial) -> float:
            x = [trial.suggest_int(k, 0, 9) for k in "abcde"]
            if x[0] > 2:
                raise ValueError("only a <= 2 runs")
            return float(sum(x))

        sampler = GeneticSampler(pool_size=20, seed=2)
        sampler._g0_breed = share
        study = optuna.create_study(sampler=sampler)
        study.optimize(objective, n_trials=20, catch=(ValueError,))
        return sum(t.state == TrialState.COMPLETE for t in study.trials[10:])

    # children of the complete trials keep a <= 2 (random ones: 3 in 10 expected)
    assert second_half_good(0.5) >= second_half_good(0.0) + 3


def test_repairs_are_pairs_holding_a_failed_single_move() -> None:
    row = np.array([1.0, 1.0, 0.0])
    cands = np.array([[4.0, 4.0, 0.0], [4.0, 1.0, 2.0], [2.0, 2.0, 0.0], [1.0, 3.0, 1.0], [2.0, 1.0, 4.0]])
    failed = set(_keys(np.array([[4.0, 1.0, 0.0], [1.0, 1.0, 4.0]])))
    assert repairs(row, cands, failed, _keys).tolist() == [True, True, False, False, True]
    assert not repairs(row, cands, set(), _keys).any()
    # only pairs whose other move works alone: (1, 4, 0) and (1, 1, 2) are complete
    ok = set(_keys(np.array([[1.0, 1.0, 2.0], [1.0, 4.0, 0.0]])))
    assert repairs(row, cands, failed, _keys, ok).tolist() == [True, True, False, False, False]


def test_local_search_takes_repair_moves_first() -> None:
    """The best trial's one-gene neighbourhood is done and a = 4 failed there: the two-gene moves
    that hold a = 4 come first (the value statistics alone rank them last)."""
    dists = {k: IntDistribution(0, 4) for k in "abc"}
    rows = [((1, 1, 1), 0.0)]
    for j in range(3):
        for w in range(5):
            x = [1, 1, 1]
            x[j] = w
            if w != 1:
                rows.append((tuple(x), None if (j == 0 and w == 4) else 1.0 + w))
    found = {}
    for repair in (True, False):
        sampler = GeneticSampler(pool_size=4, survivors=1, seed=0)
        sampler._ls_repair = repair
        study = optuna.create_study(sampler=sampler)
        for x, value in rows:
            state = TrialState.FAIL if value is None else TrialState.COMPLETE
            params = dict(zip("abc", x, strict=True))
            study.add_trial(create_trial(params=params, distributions=dists, value=value, state=state))
        sampler._sync(study)
        sampler._resolve_defaults(study)
        sampler._learn_activation()
        sampler._tables()
        local = sampler._local(sampler._order(), _Taken(sampler._taken_finished(), set()))
        found[repair] = [sampler._decode(r)["a"] for r in local]
    assert found[True] and all(a == 4 for a in found[True])
    assert any(a != 4 for a in found[False])


def test_safe_generation_zero_avoids_failing_values() -> None:
    """``_g0_safe``: once a trial failed, generation 0 takes the least failure-prone of a few
    random candidates, so a value that always fails is drawn less often than at random."""

    def objective(trial: optuna.Trial) -> float:
        a = trial.suggest_int("a", 0, 3)
        b = trial.suggest_int("b", 0, 15)
        if a == 3:
            raise ValueError("a = 3 fails")
        return float(a + b)

    def failures(safe: int) -> int:
        total = 0
        for seed in range(4):
            sampler = GeneticSampler(pool_size=40, seed=seed)
            sampler._g0_safe = safe
            study = optuna.create_study(sampler=sampler)
            study.optimize(objective, n_trials=40, catch=(ValueError,))
            total += sum(t.state == TrialState.FAIL for t in study.trials)
        return total

    assert failures(8) < 0.6 * failures(0)


def test_pair_failure_risk_only_in_the_early_generations() -> None:
    def objective(trial: optuna.Trial) -> float:
        a, b = trial.suggest_int("a", 0, 3), trial.suggest_int("b", 0, 3)
        if a == b:
            raise ValueError("a pair that fails")
        return float(a + b)

    sampler = GeneticSampler(pool_size=8, seed=4)
    sampler._pair_fail, sampler._pair_fail_gens = True, 2
    study = optuna.create_study(sampler=sampler)
    study.optimize(objective, n_trials=12, catch=(ValueError,))
    risky = sampler._encode({"a": 1, "b": 1})[None, :]
    assert sampler._n < 16 and sampler._fail_risk(risky)[0] > sampler._value_fail_risk(risky)[0]
    study.optimize(objective, n_trials=8, catch=(ValueError,))
    assert sampler._n >= 16 and sampler._fail_risk(risky)[0] == sampler._value_fail_risk(risky)[0]


def test_spread_pick_keeps_bred_generation_zero_apart() -> None:
    def spread(seed: int, g0x: bool) -> float:
        def objective(trial: optuna.Trial) -> float:
            x = [trial.suggest_int(k, 0, 9) for k in "abcde"]
            if x[0] > 2:
                raise ValueError("only a <= 2 runs")
            return float(sum(x))

        sampler = GeneticSampler(pool_size=20, seed=seed)
        sampler._g0_breed, sampler._g0_spread = 0.25, g0x
        study = optuna.create_study(sampler=sampler)
        study.optimize(objective, n_trials=20, catch=(ValueError,))
        rows = np.array([list(t.params.values()) for t in study.trials[5:] if t.state == TrialState.COMPLETE])
        return float(np.mean([np.mean(a != b) for i, a in enumerate(rows) for b in rows[i + 1 :]]))

    # the bred slots of generation 0 run the child farthest from the trials, not the likeliest best
    assert np.mean([spread(s, True) for s in range(3)]) >= np.mean([spread(s, False) for s in range(3)]) + 0.05


def _compiled(trial: optuna.Trial) -> float:
    """An objective that, like the compile objective, records a binary hash on each trial."""
    a, b = trial.suggest_int("a", 0, 7), trial.suggest_int("b", 0, 7)
    trial.set_user_attr("binary_hash", f"{a % 3}-{b % 2}")
    return float(a + b)


def _design_points(n: int) -> list[dict]:
    genes = [Gene("a", IntDistribution(0, 7)), Gene("b", IntDistribution(0, 7))]
    return [{g.name: g.decode(c) for g, c in zip(genes, row, strict=True)} for row in QMCStart().rows(0, n, genes).tolist()]


def test_a_compiler_study_keeps_a_random_generation_zero_unless_asked() -> None:
    design = _design_points(12)
    default = optuna.create_study(sampler=GeneticSampler(pool_size=12, seed=4))
    default.optimize(_compiled, n_trials=12)
    assert sum(t.params in design for t in default.trials[1:]) < 6  # random: a few of the 64 configurations by chance
    asked = optuna.create_study(sampler=GeneticSampler(pool_size=12, seed=4, design_start=0.65))
    asked.optimize(_compiled, n_trials=12)
    assert [t.params for t in asked.trials[1:8]] == [p for p in design if p != asked.trials[0].params][:7]
    plain = optuna.create_study(sampler=GeneticSampler(pool_size=12, seed=4))
    plain.optimize(lambda t: float(t.suggest_int("a", 0, 7) + t.suggest_int("b", 0, 7)), n_trials=12)
    assert [t.params for t in plain.trials[1:8]] == [p for p in design if p != plain.trials[0].params][:7]


def test_design_start_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="design_start"):
        GeneticSampler(design_start=1.5)
