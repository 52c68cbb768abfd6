"""GeneticSampler's local search, sooner: the stall window in trials and two-gene moves taken
before the one-gene neighbourhood is done (knobs ``_ls_window`` and ``_ls_two``)."""

from __future__ import annotations

import optuna
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState, create_trial

from ciq_optuna.samplers import GeneticSampler
from ciq_optuna.samplers._genetic import _Taken

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _study(sampler: GeneticSampler, trials: list[tuple[int, str, float | None]]) -> optuna.Study:
    dists = {"a": IntDistribution(0, 4), "b": CategoricalDistribution(["x", "y", "z"])}
    study = optuna.create_study(sampler=sampler)
    for a, b, value in trials:
        state = TrialState.FAIL if value is None else TrialState.COMPLETE
        study.add_trial(create_trial(params={"a": a, "b": b}, distributions=dists, value=value, state=state))
    sampler._sync(study)
    sampler._resolve_defaults(study)
    sampler._learn_activation()
    sampler._tables()
    return study


def _local(sampler: GeneticSampler, number: int) -> set[tuple]:
    taken = _Taken(sampler._taken_finished(), set())
    local = sampler._local(sampler._order(), taken, number)
    return {(sampler._decode(r)["a"], sampler._decode(r)["b"]) for r in local} if local is not None else set()


def test_stall_window_counts_trials_since_the_last_improvement() -> None:
    # improvements at trials 0, 1, 2; trials 3-5 are worse (pool 4: generation 1 starts at trial 4)
    trials = [(4, "z", 9.0), (3, "z", 8.0), (2, "x", 1.0), (0, "y", 5.0), (1, "z", 6.0), (4, "y", 7.0)]
    sampler = GeneticSampler(pool_size=4, seed=0)
    sampler._ls_window = 0.0
    _study(sampler, trials)
    assert sampler._last_improvement() == 2
    assert sampler._ls_stalled(6, 4, 0) == 0  # off: whole generations only
    sampler._ls_window = 0.75  # stalled once more than 3 trials came after trial 2
    assert sampler._ls_stalled(5, 4, 0) == 0
    assert sampler._ls_stalled(6, 4, 0) == sampler._ls_gens
    assert sampler._ls_stalled(6, 4, 3) == 3  # never fewer than the whole generations


def test_two_gene_moves_come_in_half_the_turns_once_the_neighbourhood_is_half_done() -> None:
    # best (2, "x"); 3 of its 6 one-gene neighbours evaluated
    trials = [(2, "x", 0.0), (0, "x", 3.0), (1, "x", 3.0), (3, "x", 3.0), (0, "z", 4.0)]
    sampler = GeneticSampler(pool_size=4, survivors=3, seed=0)
    _study(sampler, trials)
    sampler._ls_two = 0.0
    one = _local(sampler, 2)
    assert one and all(a == 2 or b == "x" for a, b in one)  # off: one-gene moves first
    sampler._ls_two = 0.5
    turns = {n: _local(sampler, n) for n in range(1, 41)}
    two = [n for n, found in turns.items() if all(a != 2 and b != "x" for a, b in found)]
    assert all(turns.values())
    assert 14 <= len(two) <= 26  # about half of the trial numbers take the two-gene moves
    assert all(turns[n] == one for n in turns if n not in two)
    sampler._ls_two = 0.75  # a share of 0.5 done is not enough
    assert all(_local(sampler, n) == one for n in two)
