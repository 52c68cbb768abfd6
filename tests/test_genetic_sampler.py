"""GeneticSampler: interface, gene operators, de-duplication, exhaustion, generations, failures."""

from __future__ import annotations

import logging
import math
import random
import time
from collections import Counter

import numpy as np
import optuna
import pandas as pd
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from ciq_optuna.samplers import GeneticSampler, make_sampler, pareto_front_dataframe, pareto_front_trials
from ciq_optuna.samplers._genes import Gene

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _config(t: optuna.trial.FrozenTrial) -> tuple:
    return tuple(sorted(t.params.items()))


def test_mixed_space_with_study_optimize() -> None:
    def objective(trial: optuna.Trial) -> float:
        a = trial.suggest_int("a", 0, 40, step=4)
        b = trial.suggest_float("b", 1e-3, 1.0, log=True)
        c = trial.suggest_categorical("c", ["x", "y", "z"])
        d = trial.suggest_categorical("d", [False, True])
        e = trial.suggest_int("e", 1, 1024, log=True)
        f = trial.suggest_categorical("f", [16, 32, 64, 128])
        return a + math.log(b) + len(c) + d + math.log2(e) + f / 16

    for g0q in (0.65, 0.0):  # generation 0 from the QMC design (the default) or all random
        sampler = GeneticSampler(pool_size=10, seed=1)
        sampler._g0_qmc = g0q
        study = optuna.create_study(sampler=sampler)
        study.optimize(objective, n_trials=60)
        assert len(study.trials) == 60
        for t in study.trials:
            assert t.state == TrialState.COMPLETE
            assert t.params["a"] % 4 == 0 and 0 <= t.params["a"] <= 40
            assert 1e-3 <= t.params["b"] <= 1.0
            assert 1 <= t.params["e"] <= 1024
            assert t.user_attrs["generation"] == t.number // 10
        assert len({_config(t) for t in study.trials}) == 60
        first = min(t.value for t in study.trials[:10])
        if g0q:  # the design's first point is every parameter's lowest value: this objective's minimum
            assert study.trials[1].params == pytest.approx({"a": 0, "b": 1e-3, "c": "x", "d": False, "e": 1, "f": 16})
            assert study.best_value == first
        else:  # the search improves on its random first generation
            assert study.best_value < first


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"pool_size": 1}, "pool_size"),
        ({"survivors": 0}, "survivors"),
        ({"mutate_rate": 0.0}, "mutate_rate"),
        ({"crossover": "pmx"}, "crossover"),
    ],
)
def test_bad_knobs_give_one_clear_error(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GeneticSampler(**kwargs)


def test_ordered_mutation_prefers_neighbours() -> None:
    g = Gene("x", IntDistribution(0, 99))
    rng = np.random.RandomState(0)
    start = np.full(20000, 50.0)
    new = g.mutate(start, rng, 1.0)
    step = np.abs(new - start)
    assert (step == 0).sum() < 0.02 * len(step)  # a mutation changes the value (re-draws aside)
    near = ((step >= 1) & (step <= 3)).mean()
    far = (step >= 30).mean()
    assert near > 5 * far > 0  # far values stay reachable, neighbours are much likelier
    assert new.min() >= 0 and new.max() <= 99


def test_numeric_categorical_is_ordered_and_strings_redraw() -> None:
    g = Gene("tile", CategoricalDistribution([64, 8, 32, 16]))
    assert g.kind == "ord"
    assert [g.decode(g.encode(v)) for v in (8, 16, 32, 64)] == [8, 16, 32, 64]
    assert g.encode(8) == 0 and g.encode(64) == 3
    s = Gene("mode", CategoricalDistribution(["a", "b", "c"]))
    assert s.kind == "cat"
    rng = np.random.RandomState(1)
    codes = np.zeros(1000)
    assert not (s.mutate(codes, rng, 1.0) == 0).any()
    toggle = Gene("on", CategoricalDistribution([False, True]))
    assert (toggle.mutate(np.zeros(50), rng, 1.0) == 1).all()
    assert (toggle.mutate(np.ones(50), rng, 1.0) == 0).all()


def test_float_genes_mutate_in_transformed_space() -> None:
    g = Gene("lr", FloatDistribution(1e-5, 1e-1, log=True))
    assert g.kind == "cont"
    assert g.decode(g.encode(1e-3)) == pytest.approx(1e-3)
    assert g.encode(1e-3) == pytest.approx(0.5)  # middle of the log range
    rng = np.random.RandomState(2)
    new = g.mutate(np.full(2000, 0.5), rng, 1.0)
    assert 0 <= new.min() and new.max() <= 1
    assert np.abs(new - 0.5).mean() < 0.15
    stepped = Gene("x", FloatDistribution(1.0, 20.0, step=0.5))
    assert stepped.kind == "ord" and stepped.n == 39
    assert stepped.decode(stepped.encode(7.5)) == 7.5


def _small(trial: optuna.Trial) -> float:
    x = trial.suggest_int("x", 0, 2)
    y = trial.suggest_categorical("y", ["a", "b", "c", "d"])
    z = trial.suggest_categorical("z", [False, True])
    return x + "abcd".index(y) + z


def test_no_duplicates_and_clean_stop_when_exhausted(caplog: pytest.LogCaptureFixture) -> None:
    study = optuna.create_study(sampler=GeneticSampler(pool_size=4, seed=0))
    with caplog.at_level(logging.WARNING, logger="ciq_optuna.samplers"):
        study.optimize(_small, n_trials=100)
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 24  # 3 * 4 * 2 configurations, each once
    assert len({_config(t) for t in complete}) == 24
    assert [t.state for t in study.trials[24:]] == [TrialState.PRUNED]
    assert "all 24 distinct configurations" in caplog.text
    assert study.best_value == 0


def test_exhaustion_in_ask_tell_raises_trial_pruned() -> None:
    study = optuna.create_study(sampler=GeneticSampler(pool_size=4, seed=3))
    for _ in range(24):
        t = study.ask()
        study.tell(t, _small(t))
    t = study.ask()
    with pytest.raises(optuna.TrialPruned, match="distinct configurations"):
        _small(t)


def test_running_trials_are_not_proposed_again() -> None:
    study = optuna.create_study(sampler=GeneticSampler(pool_size=4, seed=5))
    running = []
    for _ in range(24):  # all 24 configurations asked, none told
        t = study.ask()
        _small(t)
        running.append(t)
    configs = {tuple(sorted(t.params.items())) for t in running}
    first = running[:4]
    assert len(configs) >= 23  # trial 0 is drawn before the space is known
    for t in first:
        study.tell(t, 1.0)


def test_enqueued_trials_join_generation_zero() -> None:
    study = optuna.create_study(sampler=GeneticSampler(pool_size=8, seed=0))
    base = {"x": 1, "y": "b", "z": False}
    good = {"x": 0, "y": "c", "z": True}
    study.enqueue_trial(base)
    study.enqueue_trial(good)
    study.optimize(_small, n_trials=20)
    assert study.trials[0].params == base and study.trials[1].params == good
    assert study.trials[0].user_attrs["generation"] == 0
    assert study.trials[1].user_attrs["generation"] == 0
    assert sum(t.user_attrs["generation"] == 0 for t in study.trials) == 8
    assert len({_config(t) for t in study.trials}) == 20


def _conditional(trial: optuna.Trial) -> float:
    opt = trial.suggest_categorical("ptxas.opt_level", [0, 1, 2, 3])
    passed = trial.suggest_categorical("ptxas.maxrregcount.passed", [False, True])
    regs = trial.suggest_int("ptxas.maxrregcount", 16, 64, step=16) if passed else 255
    return abs(regs - 32) + opt


def test_conditional_parameters_deduplicated_on_what_is_used(caplog: pytest.LogCaptureFixture) -> None:
    study = optuna.create_study(sampler=GeneticSampler(pool_size=4, seed=2))
    with caplog.at_level(logging.WARNING, logger="ciq_optuna.samplers"):
        study.optimize(_conditional, n_trials=60)
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    # 4 opt levels * (not passed + 4 register counts) = 20 distinct configurations.
    assert len(complete) == 20
    assert len({_config(t) for t in complete}) == 20
    for t in complete:
        assert ("ptxas.maxrregcount" in t.params) == t.params["ptxas.maxrregcount.passed"]
    assert study.best_value == 0
    assert "all 20 distinct configurations" in caplog.text


@pytest.mark.parametrize("seed", [2, 12])
def test_open_plan_never_repeats_a_finished_configuration(seed: int) -> None:
    # With the earliest-trials tie order, these seeds pick children that switch
    # ``maxrregcount.passed`` on while the parent lacked ``maxrregcount``; the value that gene gets
    # must not make the configuration one already run while an unseen one exists.
    sampler = GeneticSampler(pool_size=4, seed=seed)
    sampler._first_ties = 1
    study = optuna.create_study(sampler=sampler)
    study.optimize(_conditional, n_trials=60)
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len({_config(t) for t in complete}) == len(complete) == 20


def test_open_plans_of_parallel_workers_never_repeat_a_configuration(tmp_path) -> None:
    # One worker until the condition is learnt (the very first trials of parallel workers are
    # drawn at random), then four threads on one SQLite study: the gene a child switches on is
    # part of the claim the other workers check theirs against, so no configuration runs twice.
    storage = f"sqlite:///{tmp_path / 'ga.db'}"
    sampler = GeneticSampler(pool_size=4, seed=12)
    sampler._first_ties = 1
    study = optuna.create_study(storage=storage, sampler=sampler)
    study.optimize(_conditional, n_trials=8)
    study.optimize(_conditional, n_trials=32, n_jobs=4)
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len({_config(t) for t in complete}) == len(complete) >= 16


def test_generation_size_is_exact_with_16_threads_on_sqlite(tmp_path) -> None:
    storage = f"sqlite:///{tmp_path / 'ga.db'}"
    study = optuna.create_study(storage=storage, sampler=GeneticSampler(pool_size=8, seed=0))

    def objective(trial: optuna.Trial) -> float:
        x = trial.suggest_int("x", 0, 30)
        y = trial.suggest_categorical("y", [1, 2, 4, 8, 16])
        time.sleep(random.uniform(0.0, 0.02))
        return (x - 7) ** 2 + y

    study.optimize(objective, n_trials=64, n_jobs=16)
    loaded = optuna.load_study(study_name=study.study_name, storage=storage)
    trials = loaded.trials
    assert len(trials) == 64 and all(t.state == TrialState.COMPLETE for t in trials)
    per_gen = Counter(t.user_attrs["generation"] for t in trials)
    assert per_gen == {g: 8 for g in range(8)}
    assert len({_config(t) for t in trials}) == 64


def test_failures_rank_worst_and_are_learnt() -> None:
    def objective(trial: optuna.Trial) -> float:
        a = trial.suggest_int("a", 0, 19)
        b = trial.suggest_int("b", 0, 19)
        c = trial.suggest_categorical("c", ["p", "q", "r"])
        if a + b > 16:  # a constraint region: about half of the space fails to "compile"
            raise RuntimeError("does not compile")
        if c == "r":
            return float("nan")
        return (a - 6) ** 2 + (b - 6) ** 2

    study = optuna.create_study(sampler=GeneticSampler(pool_size=20, seed=4))
    study.optimize(objective, n_trials=200, catch=(RuntimeError,))
    fail = [t.state == TrialState.FAIL for t in study.trials]
    first, last = np.mean(fail[:20]), np.mean(fail[-60:])
    assert first > 0.4
    assert last < first / 2
    assert study.best_trial.state == TrialState.COMPLETE
    assert study.best_value == 0


def test_toy_problem_optimum_within_five_generations() -> None:
    def objective(trial: optuna.Trial) -> float:
        x = trial.suggest_float("x", 1.0, 20.0, step=0.5)
        y = trial.suggest_categorical("y", [1, 2, 3])
        trial.suggest_categorical("z", [False, True])
        return x**2 + y

    for seed in range(5):
        study = optuna.create_study(sampler=GeneticSampler(pool_size=32, seed=seed))
        study.optimize(objective, n_trials=160)
        assert study.best_value == 2.0


def test_maximize_direction() -> None:
    def objective(trial: optuna.Trial) -> float:
        return -((trial.suggest_int("x", -50, 50) - 13) ** 2)

    study = optuna.create_study(direction="maximize", sampler=GeneticSampler(pool_size=8, seed=0))
    study.optimize(objective, n_trials=60)
    assert study.best_params["x"] == 13


def test_default_pool_size_follows_space_size() -> None:
    small = optuna.create_study(sampler=GeneticSampler(seed=0))
    small.optimize(_small, n_trials=3)
    big = optuna.create_study(sampler=GeneticSampler(seed=0))
    big.optimize(lambda t: sum(t.suggest_int(f"p{i}", 0, 63) for i in range(8)), n_trials=3)
    assert small.sampler.pool_size == 8  # 24 configurations: the minimum
    assert big.sampler.pool_size == 40  # 2**48 configurations: the maximum
    assert small.trials[-1].user_attrs["generation"] == 0


def test_make_sampler_choice_and_pareto_front() -> None:
    assert isinstance(make_sampler(1, seed=0), GeneticSampler)
    assert make_sampler(1, seed=0, pool_size=12).pool_size == 12
    assert make_sampler(1, seed=0, population_size=10, survivors=None).pool_size == 10
    assert make_sampler(3, seed=0, population_size=None).pool_size is None  # from the space
    mo = make_sampler(2, seed=0, pool_size=8)
    assert isinstance(mo, GeneticSampler) and mo.pool_size == 8
    with pytest.raises(ValueError, match="n_objectives"):
        make_sampler(0)

    study = optuna.create_study(directions=["minimize", "minimize"], sampler=mo)

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        x = trial.suggest_int("x", 0, 10)
        return float(x), float((10 - x) ** 2)

    study.optimize(objective, n_trials=30)
    front = pareto_front_trials(study)
    df = pareto_front_dataframe(study)
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == ["number", "values_0", "values_1", "params_x"]
    assert len(df) == len(front) > 1
    assert df["values_0"].is_monotonic_increasing
    assert set(df["number"]) == {t.number for t in front}


def test_genetic_sampler_handles_multi_objective() -> None:
    study = optuna.create_study(
        directions=["minimize", "maximize"], sampler=GeneticSampler(pool_size=8, seed=0)
    )

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        x = trial.suggest_int("x", 0, 40)
        y = trial.suggest_categorical("y", [1, 2, 3])
        return float(x + y), float(x - y)

    study.optimize(objective, n_trials=40)
    assert len({_config(t) for t in study.trials}) == 40
    assert len(study.best_trials) >= 2


_WORKER = """
import random, sys, time
import optuna
from ciq_optuna.samplers import GeneticSampler
optuna.logging.set_verbosity(optuna.logging.ERROR)

def objective(trial):
    x = trial.suggest_int("x", 0, 9)
    y = trial.suggest_categorical("y", ["a", "b", "c", "d"])
    time.sleep(random.uniform(0.0, 0.05))
    return x + "abcd".index(y)

study = optuna.load_study(study_name="procs", storage=sys.argv[1], sampler=GeneticSampler(pool_size=8))
study.optimize(objective, n_trials=8)
"""


def test_worker_processes_on_sqlite_never_repeat_a_configuration(tmp_path) -> None:
    import subprocess
    import sys

    storage = f"sqlite:///{tmp_path / 'procs.db'}"
    study = optuna.create_study(study_name="procs", storage=storage)
    study.enqueue_trial({"x": 9, "y": "d"})  # a baseline first, alone, as `ciq-optuna tune` runs it
    study.optimize(
        lambda t: t.suggest_int("x", 0, 9) + "abcd".index(t.suggest_categorical("y", list("abcd"))), 1
    )
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, storage]) for _ in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    trials = optuna.load_study(study_name="procs", storage=storage).trials
    assert len(trials) == 33 and all(t.state == TrialState.COMPLETE for t in trials)
    assert len({_config(t) for t in trials}) == 33  # 40 configurations exist


def test_stagnation_restarts_are_derived_from_storage() -> None:
    """A plateau: no trial improves on trial 0, so after 3 whole generations a restart begins,
    every 4 generations another; a second sampler reading the same study agrees."""

    def plateau(trial: optuna.Trial) -> float:
        return 1.0 + 0.0 * sum(trial.suggest_int(n, 0, 9) for n in "abc")

    storage = optuna.storages.InMemoryStorage()
    sampler = GeneticSampler(pool_size=8, seed=0)
    study = optuna.create_study(storage=storage, sampler=sampler)
    study.optimize(plateau, n_trials=80)
    assert sampler.stagnation(study, 3) == (2, None)
    assert sampler.stagnation(study, 4) == (3, 4)
    assert sampler.stagnation(study, 9) == (8, 8)
    other = GeneticSampler(pool_size=8, seed=5)
    again = optuna.load_study(study_name=study.study_name, storage=storage, sampler=other)
    assert other.stagnation(again) == sampler.stagnation(study) == (9, 8)
    assert len({_config(t) for t in study.trials}) == 80
    assert Counter(t.user_attrs["generation"] for t in study.trials) == {g: 8 for g in range(10)}


def _activation_rules_by_scan(x: np.ndarray) -> list[tuple[int, int, np.ndarray]]:
    """The activation rules from a scan of every row (the definition _Activation keeps up to date)."""
    present = ~np.isnan(x)
    rules = []
    for j in np.where(~present.all(axis=0) & present.any(axis=0))[0]:
        pj = present[:, j]
        for q in range(j - 1, -1, -1):
            if not present[pj, q].all():
                continue
            on = np.unique(x[pj, q])
            off = np.unique(x[~pj & present[:, q], q])
            if len(off) and not np.isin(on, off).any():
                rules.append((int(j), q, off))
                break
    return rules


@pytest.mark.parametrize("seed", range(4))
def test_incremental_activation_rules_equal_a_scan_of_every_row(seed: int) -> None:
    """Row by row (with genes gated by others, gates that leak, and new values arriving late),
    the incremental rules equal a full scan after every row."""
    from ciq_optuna.samplers._genetic import _Activation

    rng = np.random.default_rng(seed)
    d, n = 9, 150
    rows = rng.integers(0, 4, size=(n, d)).astype(float)
    rows[:, 1] = np.where(rows[:, 0] == 0, math.nan, rows[:, 1])  # 1 is used unless 0 is off
    rows[:, 4] = np.where(rows[:, 3] >= 2, math.nan, rows[:, 4])  # 4 is used when 3 is low ...
    rows[rng.random(n) < 0.05, 4] = math.nan  # ... mostly (a leak breaks the rule)
    rows[:, 6] = np.where(np.isnan(rows[:, 4]), math.nan, rows[:, 6])  # 6 follows 4
    rows[: n // 2, 8] = np.where(rows[: n // 2, 7] == 3, math.nan, rows[: n // 2, 8])
    rows[:, 5] = np.where(rows[:, 2] == 0, math.nan, rows[:, 5])  # 5 is used unless 2 is off ...
    rows[n - 20 :: 7, 2] = math.nan  # ... until late rows use 5 without 2: that rule goes
    act = _Activation(d)
    for i in range(n):
        act.add(rows[i])
        got, want = act.rules(), _activation_rules_by_scan(rows[: i + 1])
        assert [(j, q) for j, q, _ in got] == [(j, q) for j, q, _ in want], i
        for (_, _, a), (_, _, b) in zip(got, want):
            assert a.dtype == b.dtype and np.array_equal(a, b)
    assert [(j, q) for j, q, _ in act.rules()]  # the case has rules to find
