"""Predictions of plans whose open genes are drawn before the claim (``_PREDICT_COMPLETED``) and of
configurations still open, predicted only when every value the objective may draw falls in one
class (``BinaryModel.domains``, ``_OPEN_ONE_CLASS``)."""

from __future__ import annotations

import math

import numpy as np
import optuna
import pytest

from ciq_optuna.samplers import GeneticSampler, _genetic
from ciq_optuna.samplers._binaries import BinaryModel

optuna.logging.set_verbosity(optuna.logging.WARNING)
NAN = math.nan


def _model(domains: list[int] | None) -> BinaryModel:
    """Gene 0 switches gene 1 on; value 2 of gene 1 gives the binary of the switch off, value 3
    another one; gene 2 is inert as a whole (two inert changes, none that mattered)."""
    model = BinaryModel()
    model.domains = None if domains is None else np.array(domains, dtype=float)
    model.set_ordered([False, True, False])
    for n, (row, binary) in enumerate(
        [([0, NAN, 0], "A"), ([1, 2, 0], "A"), ([1, 3, 0], "B"), ([1, 2, 1], "A"), ([1, 2, 2], "A")]
    ):
        model.add(np.array(row, dtype=float), binary, n)
    return model


def test_the_open_gene_is_found_where_its_condition_says_present() -> None:
    model = _model(None)
    rows = model.present(np.array([[1, NAN, 0], [0, NAN, 0], [1, 3, 0]]))
    assert model.open_genes(rows)[:, :3].tolist() == [[False, True, False], [False, False, False], [False, False, False]]


def test_an_open_gene_with_values_in_two_classes_is_not_predicted() -> None:
    """Drawn later, gene 1 may be 2 (binary A) or 3 (B): the old model predicts A."""
    assert _model(None).predict(np.array([[1, NAN, 0]]))[0][0] == "A"
    assert _model([2, 5, 3]).predict(np.array([[1, NAN, 0]])) == [None]
    assert _model([2, 5, 3]).predict(np.array([[1, 3, 1]]))[0][0] == "B"  # complete rows as before


def test_an_open_gene_whose_every_value_is_one_class_is_predicted() -> None:
    """Gene 1 (three values) is inert as a whole: whatever is drawn, the binary is the same."""
    model = BinaryModel()
    model.domains = np.array([2.0, 3.0])
    model.set_ordered([False, False])
    for n, (a, c) in enumerate([(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]):
        model.add(np.array([a, c], dtype=float), "AB"[a], n)
    got = model.predict(np.array([[1, NAN], [0, NAN]]))
    assert [p[0] for p in got] == ["B", "A"]
    model.domains = np.array([2.0, 0.0])  # not a finite choice: not predicted
    assert model.predict(np.array([[1, NAN]])) == [None]


def _binary(params: dict) -> str:
    """Binary of the toy kernel: ``level`` matters only from 2 on (0 and 1 are the default)."""
    level = params.get("level", 0) if params["passed"] else 0
    return f"{params['a']}-{max(level, 1)}-{params['fmad']}"


def _objective(trial: optuna.Trial) -> float:
    a = trial.suggest_int("a", 0, 5)
    passed = trial.suggest_categorical("passed", [False, True])
    if passed:
        trial.suggest_int("level", 0, 4)
    trial.suggest_categorical("fmad", [False, True])
    trial.suggest_categorical("noise", ["x", "y", "z"])  # never changes the binary
    if trial.user_attrs.get("skip_compile"):
        source = trial.study.trials[trial.user_attrs["predicted_from"]]
        trial.set_user_attr("skipped_compile", True)
        return source.value
    trial.set_user_attr("binary_hash", _binary(trial.params))
    return (a - 3) ** 2 + (trial.params.get("level", 0) if passed else 0)


def _wrong_skips(seed: int) -> tuple[int, int]:
    study = optuna.create_study(sampler=GeneticSampler(seed=seed, pool_size=8, binary_attr="binary_hash"))
    study.optimize(_objective, n_trials=100)
    skipped = [t for t in study.trials if t.user_attrs.get("skipped_compile")]
    assert all("predicted_from" in t.user_attrs for t in skipped)
    return len(skipped), sum(_binary(t.params) != t.user_attrs["predicted_binary"] for t in skipped)


def test_completed_plans_predicted_as_completed_skip_only_right(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy study above (seeds 0-2): with both knobs off, some trials are skipped wrongly (a
    level drawn into the plan after its prediction); by default (both on), none."""
    with monkeypatch.context() as m:
        m.setattr(_genetic, "_PREDICT_COMPLETED", False)
        m.setattr(_genetic, "_OPEN_ONE_CLASS", False)
        assert sum(_wrong_skips(seed)[1] for seed in range(3)) > 0
    got = [_wrong_skips(seed) for seed in range(3)]
    assert sum(n for n, _ in got) > 0
    assert sum(w for _, w in got) == 0


@pytest.mark.parametrize("whole_seen", [False, True])
def test_inertness_as_a_whole_covers_only_values_seen_inert_with_whole_seen(whole_seen: bool) -> None:
    """Gene 1 is inert in every change seen (values 0-2); value 3 was never tried: the default
    rule stretches the inertness to it, ``whole_seen`` does not predict it."""
    model = BinaryModel()
    model.whole_seen = whole_seen
    model.set_ordered([False, False])
    for n, (a, c) in enumerate([(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]):
        model.add(np.array([a, c], dtype=float), "AB"[a], n)
    got = model.predict(np.array([[0, 3], [1, 2]]))
    assert got[1][0] == "B"  # a value seen inert: predicted either way
    assert (got[0] is None) == whole_seen
