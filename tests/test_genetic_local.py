"""GeneticSampler's local search: the one-gene neighbourhood of the best trials."""

from __future__ import annotations

import math

import numpy as np
import optuna
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState, create_trial

from ciq_optuna.samplers import GeneticSampler
from ciq_optuna.samplers._genes import neighbours
from ciq_optuna.samplers._genetic import _keys, _Taken
from ciq_optuna.samplers._repair import repairs

optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_neighbours_change_exactly_one_present_gene() -> None:
    # ordered (5 values), categorical (3), continuous, absent, wide ordered (100 values)
    kind = np.array([0, 1, 2, 0, 0])
    nval = np.array([5.0, 3.0, 1.0, 4.0, 100.0])
    row = np.array([2.0, 0.0, 0.5, math.nan, 50.0])
    out = neighbours(row, kind, nval, np.random.RandomState(0))
    changed = (out != row) & ~(np.isnan(out) & np.isnan(row))
    assert (changed.sum(axis=1) == 1).all()
    assert np.isnan(out[:, 3]).all()  # an absent gene stays absent
    per_gene = changed.sum(axis=0)
    assert per_gene[0] == 4 and per_gene[1] == 2  # every other value of a small discrete gene
    assert per_gene[2] > 0 and per_gene[4] > 0
    assert len({tuple(np.nan_to_num(r, nan=-1).tolist()) for r in out}) == len(out)
    wide = out[changed[:, 4], 4]
    assert {49.0, 51.0, 48.0, 52.0} <= set(wide.tolist())  # steps of 1, 2, 4, ... either way


def _study(sampler: GeneticSampler, trials: list[tuple[int, str, float | None]]) -> optuna.Study:
    dists = {"a": IntDistribution(0, 4), "b": CategoricalDistribution(["x", "y", "z"])}
    study = optuna.create_study(sampler=sampler)
    for a, b, value in trials:
        state = TrialState.FAIL if value is None else TrialState.COMPLETE
        study.add_trial(create_trial(params={"a": a, "b": b}, distributions=dists, value=value, state=state))
    return study


def _local(sampler: GeneticSampler, study: optuna.Study) -> set[tuple]:
    sampler._sync(study)
    sampler._resolve_defaults(study)
    sampler._learn_activation()
    sampler._tables()
    taken = _Taken(sampler._taken_finished(), set())  # as the plan makes it: no trial running
    local = sampler._local(sampler._order(), taken)
    if local is None:
        return set()
    return {(sampler._decode(r)["a"], sampler._decode(r)["b"]) for r in local}


def test_local_search_takes_unseen_neighbours_of_the_best_and_skips_failing_values() -> None:
    trials = [(2, "x", 0.0), (1, "x", 1.0), (3, "x", 1.0), (0, "y", 5.0), (1, "z", 6.0)]
    trials += [(4, "y", None), (4, "z", None)]  # a = 4 fails
    sampler = GeneticSampler(pool_size=4, seed=0)
    sampler._ls_risk = 0.5  # a = 4 failed in 2 of 2 trials: smoothed risk 0.64
    found = _local(sampler, _study(sampler, trials))
    assert (0, "x") in found and (2, "y") in found and (2, "z") in found
    assert all(a == 2 or b == "x" for a, b in found)  # one gene away from the best (2, "x")
    assert (4, "x") not in found  # likelier to fail than the best trial and than 0.5
    assert not found & {(a, b) for a, b, _ in trials}


def test_local_search_moves_to_the_next_survivor_when_the_best_is_surrounded() -> None:
    best = [(2, "x", 0.0), (0, "x", 3.0), (1, "x", 3.0), (3, "x", 3.0), (4, "x", 3.0), (2, "y", 3.0), (2, "z", 3.0)]
    sampler = GeneticSampler(pool_size=4, survivors=3, seed=0)
    found = _local(sampler, _study(sampler, [*best, (0, "z", 1.0)]))
    assert found  # the best's one-gene neighbourhood is done: its two-gene neighbours come
    assert all(a != 2 and b != "x" for a, b in found)
    sampler = GeneticSampler(pool_size=4, survivors=3, seed=0)
    sampler._ls_depth = 1
    found = _local(sampler, _study(sampler, [*best, (0, "z", 1.0)]))
    assert found  # one gene only: the neighbours of the next survivor come
    assert all(a == 0 or b == "z" for a, b in found)


def test_stalled_search_walks_the_neighbourhood_of_the_best() -> None:
    """With local search in every trial after one generation without improvement, every
    configuration one gene away from the best (all valid here) is evaluated soon after the search
    stops improving (without local search some are still missing after 200 trials)."""

    def objective(trial: optuna.Trial) -> float:
        x = [trial.suggest_int(k, 0, 7) for k in "abcd"]
        return float(sum(v * v for v in x))

    sampler = GeneticSampler(pool_size=8, seed=1)
    sampler._ls_stall = 1.0
    sampler._ls_restart = 1  # also while restarts run (the default stops at the first restart)
    study = optuna.create_study(sampler=sampler)
    study.optimize(objective, n_trials=200)
    assert study.best_value == 0
    seen = {tuple(t.params[k] for k in "abcd") for t in study.trials}
    around = [tuple(v if i != j else w for i, v in enumerate((0, 0, 0, 0))) for j in range(4) for w in range(1, 8)]
    assert all(n in seen for n in around)


def _pair_study(sampler: GeneticSampler) -> optuna.Study:
    """Trial (1, 1, 1, 1) is the best and its one-gene neighbourhood is done: a = 3 and b = 0
    are its best one-gene moves, the others are worse."""
    dists = {k: IntDistribution(0, 4) for k in "abcd"}
    study = optuna.create_study(sampler=sampler)
    rows: list[tuple[tuple[int, ...], float | None]] = [((1, 1, 1, 1), 0.0)]
    good = {(0, 3): 1.1, (1, 0): 1.2}
    for j in range(4):
        for w in range(5):
            if w != 1:
                x = [1, 1, 1, 1]
                x[j] = w
                rows.append((tuple(x), good.get((j, w), 2.0 + j + 0.1 * w)))
    for x, value in rows:
        state = TrialState.FAIL if value is None else TrialState.COMPLETE
        params = dict(zip("abcd", x, strict=True))
        study.add_trial(create_trial(params=params, distributions=dists, value=value, state=state))
    return study


def test_two_gene_moves_pair_the_best_one_gene_moves_first() -> None:
    """``_ls_pairs``: the pair of the two best one-gene moves comes first (not what the value
    statistics like); a worker that sees it running takes the next pair, which still holds one
    of the two best moves."""
    sampler = GeneticSampler(pool_size=4, survivors=1, seed=0)
    sampler._ls_pairs = 1
    study = _pair_study(sampler)
    sampler._sync(study)
    sampler._resolve_defaults(study)
    sampler._learn_activation()
    sampler._tables()
    taken = _Taken(sampler._taken_finished(), set())
    first = sampler._local(sampler._order(), taken)
    assert first is not None and len(first) == 1
    assert sampler._decode(first[0]) == {"a": 3, "b": 0, "c": 1, "d": 1}
    taken.running.update(_keys(first))
    second = sampler._local(sampler._order(), taken)
    assert second is not None and len(second) == 1
    plan = sampler._decode(second[0])
    assert plan["a"] == 3 or plan["b"] == 0


def _restart_local_calls(
    objective: object, seed: int, share: float = 0.5, defaults: bool = False
) -> tuple[list[bool], optuna.Study]:
    """Per local-search call of a 300-trial study with local search in restarts (from the study's
    elite, below a failure share of 0.3; ``defaults``: the sampler as made): whether a restart
    was running (see GeneticSampler.stagnation), as the sampler saw it then."""
    sampler = GeneticSampler(pool_size=16, seed=seed)
    if not defaults:
        sampler._ls_restart = 2
        sampler._ls_restart_fail = 0.3
        sampler._ls_restart_share = share
    in_restart: list[bool] = []
    local = sampler._local

    def spy(order: np.ndarray, taken: _Taken, number: int = 0) -> np.ndarray | None:
        in_restart.append(sampler._stagnation_at(number // 16, 16)[1] is not None)
        return local(order, taken, number)

    sampler._local = spy  # type: ignore[method-assign]
    study = optuna.create_study(sampler=sampler)
    study.optimize(objective, n_trials=300, catch=(RuntimeError,))  # type: ignore[arg-type]
    return in_restart, study


def test_local_search_goes_on_in_restarts_unless_most_trials_fail() -> None:
    """With ``_ls_restart = 2`` a restart does not end local search around the study's elite;
    with ``_ls_restart_fail`` it does while that share of the trials since the last improvement
    failed: there the restart alone runs."""

    def bowl(trial: optuna.Trial) -> float:
        return float(sum(abs(trial.suggest_int(k, 0, 9) - 3) for k in "abcd"))

    in_restart, study = _restart_local_calls(bowl, 0)
    assert study.best_value == 0
    assert sum(in_restart) >= 20

    def failing(trial: optuna.Trial) -> float:  # half of the space fails, not by one gene's value
        x = [trial.suggest_int(k, 0, 9) for k in "abcd"]
        if sum(x) % 2:
            raise RuntimeError("does not compile")
        return float(sum(abs(v - 3) for v in x))

    in_restart, study = _restart_local_calls(failing, 0)
    assert study.sampler.stagnation(study)[1] is not None  # type: ignore[attr-defined]
    assert len(in_restart) > 0 and sum(in_restart) == 0


def test_fewer_local_search_trials_in_restarts_with_a_smaller_restart_share() -> None:
    """``_ls_restart_share`` is the share of the trials that take local search while a restart
    runs: a quarter of the default's share gives at most half as many of those trials."""

    def bowl(trial: optuna.Trial) -> float:
        return float(sum(abs(trial.suggest_int(k, 0, 9) - 3) for k in "abcd"))

    full, _ = _restart_local_calls(bowl, 0)
    fewer, _ = _restart_local_calls(bowl, 0, share=0.125)
    assert sum(full) >= 20
    assert 0 < sum(fewer) <= sum(full) / 2


def _wide_study(keep_drawn: int) -> tuple[GeneticSampler, optuna.Study]:
    """A 40-trial study over a wide ordered gene (64 values, whose neighbourhood draws random
    re-draws) and three narrow ones, synced into its sampler."""
    sampler = GeneticSampler(pool_size=8, seed=1)
    sampler._ls_keep_drawn = keep_drawn
    study = optuna.create_study(sampler=sampler)

    def objective(trial: optuna.Trial) -> float:
        return float(abs(trial.suggest_int("w", 0, 63) - 20) + sum(trial.suggest_int(k, 0, 3) for k in "abc"))

    study.optimize(objective, n_trials=40)
    sampler._sync(study)
    return sampler, study


def test_a_drawn_neighbourhood_is_kept_for_ls_keep_drawn_finished_trials() -> None:
    """``_ls_keep_drawn``: the two-gene neighbourhood of a row with a wide ordered gene is drawn
    once and kept while fewer than that many trials finished since, then drawn again; with 0 it
    is drawn at every call (the random re-draws differ)."""
    sampler, study = _wide_study(0)
    row = sampler._x[0, : len(sampler._names)].copy()
    first, second = sampler._neighbours(row, 2), sampler._neighbours(row, 2)
    assert first is not second
    assert not np.array_equal(first.rows, second.rows)

    sampler, study = _wide_study(8)
    row = sampler._x[0, : len(sampler._names)].copy()
    first = sampler._neighbours(row, 2)
    assert sampler._neighbours(row, 2) is first and first.drawn_at == sampler._n
    study.optimize(lambda t: float(t.suggest_int("w", 0, 63) + sum(t.suggest_int(k, 0, 3) for k in "abc")), n_trials=7)
    sampler._sync(study)
    assert sampler._n - first.drawn_at == 7 and sampler._neighbours(row, 2) is first
    study.optimize(lambda t: float(t.suggest_int("w", 0, 63) + sum(t.suggest_int(k, 0, 3) for k in "abc")), n_trials=1)
    sampler._sync(study)
    assert sampler._neighbours(row, 2) is not first


def test_two_gene_moves_are_the_same_with_their_move_keys_kept() -> None:
    """The keys of a kept two-gene neighbourhood's one-gene moves are made once and reused: the
    pairs that local search passes on are those a reference made from scratch gives (the unseen,
    safe neighbours, the repairs among them, by pair score), also after other pairs were taken
    in between (a study with failures, no risk above the best trial's allowed, so some pairs
    are left out)."""
    sampler = GeneticSampler(pool_size=4, survivors=1, seed=0)
    sampler._ls_pairs = 20  # the pairs come out in the order of their scores
    sampler._ls_risk = 0.0
    study = _pair_study(sampler)
    dists = {k: IntDistribution(0, 4) for k in "abcd"}
    for x in ((0, 1, 1, 1), (1, 1, 4, 1)):
        study.add_trial(create_trial(params=dict(zip("abcd", x, strict=True)), distributions=dists, state=TrialState.FAIL))
    sampler._sync(study)
    sampler._resolve_defaults(study)
    sampler._learn_activation()
    sampler._tables()
    order = sampler._order()
    row = sampler._x[order[0], : len(sampler._names)].copy()
    taken = _Taken(sampler._taken_finished(), set())
    left_out = 0
    for _ in range(4):
        kept, _ = sampler._local_moves(row, 2, order, taken)
        assert sampler._neighbours(row, 2).moves is not None
        cands = neighbours(row, sampler._kind, sampler._nval, np.random.RandomState(0), 2)
        cands = cands[[k not in taken for k in _keys(cands)]]
        safe = sampler._fail_risk(cands) <= float(sampler._fail_risk(row[None, :])[0])
        left_out += int((~safe).sum())
        cands = cands[safe]
        fix = repairs(row, cands, sampler._failed_keys(), _keys)
        cands = cands[fix] if fix.any() else cands
        score = sampler._pair_scores(row, cands, order)
        assert np.array_equal(kept, cands[np.argsort(score, kind="stable")[:20]])
        taken.running.update(_keys(kept[:1]))
    assert left_out > 0


def test_the_default_sampler_goes_on_with_local_search_in_restarts() -> None:
    """The defaults (decided on the replay benchmark, BENCHMARKS.md "Local search in restarts
    adopted"): local search goes on while a restart runs, and the study reaches its optimum."""

    def bowl(trial: optuna.Trial) -> float:
        return float(sum(abs(trial.suggest_int(k, 0, 9) - 3) for k in "abcd"))

    in_restart, study = _restart_local_calls(bowl, 0, defaults=True)
    assert study.best_value == 0
    assert sum(in_restart) >= 20
