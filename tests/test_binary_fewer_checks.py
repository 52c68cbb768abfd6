"""Check rates of predicted repeats per doubt (``_genetic._FEWER_CHECKS``): the doubts listed are
checked at the rates given, larger doubts at the default rates."""

from __future__ import annotations

import optuna
import pytest

from ciq_optuna.samplers import GeneticSampler, _genetic

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _checked(doubt: int, n: int = 200) -> int:
    """How many of ``n`` predictions with this doubt the sampler announces as checks."""
    sampler = GeneticSampler(seed=0, binary_attr="binary_hash")
    study = optuna.create_study(sampler=sampler)
    checks = 0
    for _ in range(n):
        trial = study._storage.get_trial(study.ask()._trial_id)
        sampler._announce(study, trial, ("binary", 0, doubt))
        checks += not trial.user_attrs["skip_compile"]
    return checks


def test_listed_doubts_follow_the_rates_given_and_larger_doubts_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _checked(0) > 0  # the default: one plain prediction in ten is compiled as a check
    assert _checked(1) > 0
    monkeypatch.setattr(_genetic, "_FEWER_CHECKS", (0.0, 0.0))
    assert _checked(0) == 0 and _checked(1) == 0  # predicted with doubt 0 or 1: always skipped
    assert _checked(3) > 0  # doubt 3 is not listed: still checked at 1 - 0.75**3
    monkeypatch.setattr(_genetic, "_FEWER_CHECKS", (1.0,))
    assert _checked(0) == 200  # a rate of 1: every plain prediction compiled


def _binary(params: dict) -> str:
    """Binary of a toy kernel: ``fmad`` and ``noise`` never change it."""
    return f"{params['a']}-{params['b']}"


def _objective(trial: optuna.Trial) -> float:
    a = trial.suggest_int("a", 0, 5)
    b = trial.suggest_categorical("b", [0, 1])
    trial.suggest_categorical("fmad", [False, True])
    trial.suggest_categorical("noise", ["x", "y", "z"])
    if trial.user_attrs.get("skip_compile"):
        trial.set_user_attr("skipped_compile", True)
        return trial.study.trials[trial.user_attrs["predicted_from"]].value
    trial.set_user_attr("binary_hash", _binary(trial.params))
    return (a - 3) ** 2 + b


def _tune(seed: int) -> tuple[int, int, int]:
    """(checks, skips, wrong skips) of a 60-trial toy study."""
    study = optuna.create_study(sampler=GeneticSampler(seed=seed, pool_size=8, binary_attr="binary_hash"))
    study.optimize(_objective, n_trials=60)
    predicted = [t for t in study.trials if "predicted_binary" in t.user_attrs]
    skipped = [t for t in predicted if t.user_attrs.get("skipped_compile")]
    wrong = sum(_binary(t.params) != t.user_attrs["predicted_binary"] for t in skipped)
    return len(predicted) - len(skipped), len(skipped), wrong


def test_a_toy_study_compiles_fewer_checks_and_skips_only_right(monkeypatch: pytest.MonkeyPatch) -> None:
    before = [_tune(seed) for seed in range(3)]
    monkeypatch.setattr(_genetic, "_FEWER_CHECKS", (0.0, 0.0))
    after = [_tune(seed) for seed in range(3)]
    assert sum(c for c, _, _ in before) > 0
    assert sum(c for c, _, _ in after) < sum(c for c, _, _ in before)
    assert sum(s for _, s, _ in after) > 0
    assert sum(w for _, _, w in after) == 0
