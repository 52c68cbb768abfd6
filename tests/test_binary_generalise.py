"""Binary-aware search: one inert change generalises a gene to values never tried, with doubt;
queued trials are predicted too, and a trial marked ``compile_required`` compiles anyway."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest

from ciq_optuna.samplers import GeneticSampler, _binaries, _genetic
from ciq_optuna.samplers._binaries import BinaryModel

optuna.logging.set_verbosity(optuna.logging.WARNING)
PTXAS_13_0 = Path("/usr/local/cuda/bin/ptxas")
STENCIL = Path(__file__).resolve().parents[1] / "examples" / "stencil" / "stencil.sm_90a.ptx"


@pytest.fixture
def first_pair(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_binaries, "_FIRST_PAIR", True)


def test_one_inert_change_predicts_new_values_of_the_gene_with_doubt(first_pair: None) -> None:
    m = BinaryModel()
    m.set_ordered([False, True])  # gene 0: a choice, gene 1: an integer range
    m.add(np.array([0.0, 0.0]), "A", 0)
    m.add(np.array([0.0, 3.0]), "A", 1)  # gene 1: 0 -> 3 inert, nothing mattered
    m.add(np.array([1.0, 0.0]), "A", 2)  # gene 0: 0 -> 1 inert, nothing mattered
    got = m.predict(np.array([[0.0, 7.0], [2.0, 0.0], [0.0, 2.0]]))
    # 7 and 2 were never in an inert pair: predicted, with doubt (checked more often); 2 lies
    # between two inert values of the ordered gene (its interval): no new value
    assert [p[:2] for p in got] == [("A", 0)] * 3
    assert got[0][2] >= 1 and got[1][2] >= 1


def test_a_failed_check_ends_the_generalisation_of_the_genes_it_blames(first_pair: None) -> None:
    m = BinaryModel()
    m.add(np.array([0.0, 0.0]), "A", 0)
    m.add(np.array([0.0, 1.0]), "A", 1)
    assert m.predict(np.array([[0.0, 2.0]]))[0][:2] == ("A", 0)
    m.wrong_prediction(np.array([0.0, 2.0]), 0)  # the check compiled to another binary
    m.add(np.array([0.0, 2.0]), "B", 2, predicted_from=0)
    assert m.predict(np.array([[0.0, 3.0]])) == [None]  # value 3: no longer predicted
    assert m.predict(np.array([[0.0, 1.0]]))[0][:2] == ("A", 0)  # the pair seen inert still is


def test_without_the_generalisation_one_inert_change_only_links_its_two_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_binaries, "_FIRST_PAIR", False)
    m = BinaryModel()
    m.add(np.array([0.0, 0.0]), "A", 0)
    m.add(np.array([0.0, 1.0]), "A", 1)
    assert m.predict(np.array([[0.0, 2.0]])) == [None]


def _toy(trial: optuna.Trial) -> float:
    """Gene ``c`` never changes the binary (``a`` alone decides it); skips honoured."""
    a = trial.suggest_int("a", 0, 7)
    c = trial.suggest_categorical("c", [0, 1, 2, 3])
    attrs = trial.user_attrs
    if attrs.get("skip_compile") and not attrs.get("compile_required"):
        trial.set_user_attr("skipped_compile", True)
        return trial.study.trials[attrs["predicted_from"]].value
    trial.set_user_attr("binary_hash", f"bin-{a}")
    return float((a - 5) ** 2) + 0 * c


def test_queued_trials_are_predicted_and_compile_required_ones_are_not(
    monkeypatch: pytest.MonkeyPatch, first_pair: None
) -> None:
    monkeypatch.setattr(_genetic, "_PREDICT_FIXED", True)
    monkeypatch.setattr(_genetic, "_WHOLE_SEEN", False)  # c = 2, never seen inert, is predicted from one change
    study = optuna.create_study(sampler=GeneticSampler(seed=0, pool_size=8))
    study.enqueue_trial({"a": 1, "c": 0})
    study.enqueue_trial({"a": 1, "c": 1})  # c: 0 -> 1 inert
    study.optimize(_toy, n_trials=2)
    study.enqueue_trial({"a": 1, "c": 2})
    study.enqueue_trial({"a": 1, "c": 3}, user_attrs={"compile_required": True})
    study.optimize(_toy, n_trials=2)
    t2, t3 = study.trials[2], study.trials[3]
    assert t2.user_attrs["predicted_from"] == 0 and t2.user_attrs["predicted_binary"] == "bin-1"
    # a prediction is compiled as a check at random: both outcomes are recorded on the trial
    assert t2.user_attrs.get("skipped_compile") == t2.user_attrs["skip_compile"]
    # compile_required: the sampler announces no prediction, the trial compiles
    assert "predicted_binary" not in t3.user_attrs and "skip_compile" not in t3.user_attrs
    assert t3.user_attrs["binary_hash"] == "bin-1" and not t3.user_attrs.get("skipped_compile")


@pytest.mark.skipif(not PTXAS_13_0.exists(), reason="needs CUDA 13.0's ptxas")
def test_compile_objective_compiles_a_required_trial_whatever_the_prediction(tmp_path: Path) -> None:
    from ciq_optuna.tune import prepare, tune

    config = _stencil_config(tmp_path, trials=3, seed=0, simplify=False, screen=False)
    study = tune(config).study
    first = study.trials[0]
    for required in (False, True):
        attrs = {
            "skip_compile": True,
            "predicted_from": first.number,
            "predicted_binary": first.user_attrs["binary_hash"],
            **({"compile_required": True} if required else {}),
        }
        study.enqueue_trial(dict(first.params), user_attrs=attrs, skip_if_exists=False)
    _, objective = prepare(config)
    study.optimize(objective, n_trials=2)
    skipped, compiled = study.trials[-2:]
    assert skipped.user_attrs["skipped_compile"] and "binary_hash" not in skipped.user_attrs
    assert not compiled.user_attrs.get("skipped_compile")
    assert compiled.user_attrs["binary_hash"] == first.user_attrs["binary_hash"]
    assert compiled.user_attrs["prediction_ok"] is True


def test_skipped_trials_teach_which_genes_the_objective_asks_for() -> None:
    m = BinaryModel()  # the objective asks for gene 2 only where gene 0 is 0
    m.add(np.array([0.0, 0.0, 0.0]), "A", 0)
    m.add(np.array([0.0, 1.0, 1.0]), "B", 1)
    plan = np.array([[1.0, 0.0, 2.0]])
    np.testing.assert_array_equal(m.project(plan), plan)  # every compiled trial had gene 2
    m.add_shape(np.array([1.0, 0.0, np.nan]))  # trials that skipped their compile: gene 0 = 1,
    m.add_shape(np.array([1.0, 1.0, np.nan]))  # and gene 2 not asked for
    np.testing.assert_array_equal(m.project(plan), [[1.0, 0.0, np.nan]])


@pytest.mark.skipif(not PTXAS_13_0.exists(), reason="needs CUDA 13.0's ptxas")
def test_simplification_attempts_are_predicted_and_the_acf_comes_from_a_compiled_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_pair: None
) -> None:
    from ciq_optuna.tune import tune

    monkeypatch.setattr(_genetic, "_PREDICT_FIXED", True)
    monkeypatch.setattr(_genetic, "_LEARN_SHAPES", True)

    result = tune(_stencil_config(tmp_path, trials=40, seed=2))
    trials = result.study.get_trials(deepcopy=False)
    simplified = [t for t in trials if "simplified_from" in t.user_attrs]
    skipped = [t for t in simplified if t.user_attrs.get("skipped_compile")]
    assert skipped, "no simplification attempt was predicted"
    assert all("predicted_from" in t.user_attrs and "binary_hash" not in t.user_attrs for t in skipped)
    for t in trials:
        if t.user_attrs.get("screening") or "confirms" in t.user_attrs:
            assert "binary_hash" in t.user_attrs and not t.user_attrs.get("skipped_compile")
    best = result.best[0]
    assert "binary_hash" in best.user_attrs and not best.user_attrs.get("skipped_compile")
    # the simplest trial as good as the winner is compiled: itself, or its confirmation
    simplest = min((t for t in trials if t.value == best.value), key=lambda t: len(t.user_attrs["flags"]))
    assert len(best.user_attrs["flags"]) == len(simplest.user_attrs["flags"])


def _stencil_config(tmp_path: Path, **options: Any) -> Any:
    """A tune of the stencil example for registers on sm_90a, stored under ``tmp_path``."""
    from ciq_optuna.tune import TuneConfig

    return TuneConfig(
        kernel=STENCIL,
        arch="sm_90a",
        minimize=["registers"],
        storage=f"sqlite:///{tmp_path / 's.db'}",
        acf=tmp_path / "best.acf",
        workdir=tmp_path / "w",
        progress=False,
        **options,
    )
