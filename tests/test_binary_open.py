"""Plans that leave open a gene the objective will ask for (``BinaryModel.open_genes``): the
value drawn when the objective asks is not the one a prediction from the absent gene assumes."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import optuna
import pytest

from ciq_optuna.samplers import GeneticSampler, _genetic
from ciq_optuna.samplers._binaries import BinaryModel

optuna.logging.set_verbosity(optuna.logging.WARNING)
NAN = math.nan


def _model(skip_open: bool) -> BinaryModel:
    """Gene 0 switches gene 1 on (a flag and its value, like ``register_usage_level.passed``);
    value 2 of gene 1 is the default (same binary as the switch off), value 3 is not; gene 2 is
    inert (two inert changes, none that mattered: inert as a whole)."""
    model = BinaryModel()
    model.skip_open = skip_open
    model.set_ordered([False, True, False])
    model.add(np.array([0, NAN, 0]), "A", 0)
    model.add(np.array([1, 2, 0]), "A", 1)
    model.add(np.array([1, 3, 0]), "B", 2)
    model.add(np.array([1, 2, 1]), "A", 3)
    model.add(np.array([1, 2, 2]), "A", 4)
    return model


def test_the_open_gene_is_found_where_its_condition_says_present() -> None:
    model = _model(skip_open=True)
    rows = model.present(np.array([[1, NAN, 0], [0, NAN, 0], [1, 3, 0]]))
    assert model.open_genes(rows)[:, :3].tolist() == [[False, True, False], [False, False, False], [False, False, False]]


def test_a_plan_with_the_value_left_open_is_not_predicted() -> None:
    """The inert pair (switch off, value 2) makes the open value one class with "absent": the
    old model predicts binary A although the objective draws gene 1 and may get value 3 (B)."""
    assert _model(skip_open=False).predict(np.array([[1, NAN, 0]]))[0][0] == "A"
    model = _model(skip_open=True)
    assert model.predict(np.array([[1, NAN, 0]])) == [None]
    assert model.predict(np.array([[1, 2, 0]]))[0][0] == "A"  # complete plans still are
    assert model.predict(np.array([[1, 3, 1]]))[0][0] == "B"


def test_an_open_gene_inert_as_a_whole_does_not_block_the_prediction() -> None:
    """Gene 2 is inert everywhere: leaving it open cannot change the binary."""
    model = BinaryModel()
    model.skip_open = True
    model.set_ordered([False, False])
    for n, (a, c) in enumerate([(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]):
        model.add(np.array([a, c]), "AB"[a], n)
    got = model.predict(np.array([[1, NAN], [0, NAN]]))
    assert [p[0] for p in got] == ["B", "A"]


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


@pytest.mark.parametrize("knob", ["_CLOSE_OPEN_PLANS", "_GUARD_OPEN"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_skips_of_completed_plans_are_right(monkeypatch: pytest.MonkeyPatch, seed: int, knob: str) -> None:
    """With either knob on, every skipped trial's real binary is the predicted one; skips still
    happen, each records its source, and a queued compile_required trial is compiled."""
    monkeypatch.setattr(_genetic, knob, True)
    study = optuna.create_study(sampler=GeneticSampler(seed=seed, pool_size=8, binary_attr="binary_hash"))
    study.optimize(_objective, n_trials=60)
    study.enqueue_trial({"a": 3, "passed": False, "fmad": True, "noise": "x"}, user_attrs={"compile_required": True})
    study.optimize(_objective, n_trials=40)
    skipped = [t for t in study.trials if t.user_attrs.get("skipped_compile")]
    assert skipped
    assert all("predicted_from" in t.user_attrs for t in skipped)
    assert [t.number for t in skipped if _binary(t.params) != t.user_attrs["predicted_binary"]] == []
    required = [t for t in study.trials if t.user_attrs.get("compile_required")]
    assert required and all("binary_hash" in t.user_attrs for t in required)


def test_without_the_knob_some_skips_are_wrong() -> None:
    """The defect the knob removes, on the same toy kernel (seeds 0-2 together)."""
    wrong = 0
    for seed in range(3):
        study = optuna.create_study(sampler=GeneticSampler(seed=seed, pool_size=8, binary_attr="binary_hash"))
        study.optimize(_objective, n_trials=100)
        skipped = [t for t in study.trials if t.user_attrs.get("skipped_compile")]
        wrong += sum(_binary(t.params) != t.user_attrs["predicted_binary"] for t in skipped)
    assert wrong > 0


@pytest.mark.parametrize("skip_open", [False, True])
def test_inertness_as_a_whole_covers_only_values_seen_inert_with_the_knob(skip_open: bool) -> None:
    """Gene 1 is inert in every change seen (values 0-2); value 3 was never tried: the old rule
    stretches the inertness to it, the new one does not predict it."""
    model = BinaryModel()
    model.skip_open = skip_open
    model.set_ordered([False, False])
    for n, (a, c) in enumerate([(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]):
        model.add(np.array([a, c]), "AB"[a], n)
    got = model.predict(np.array([[0, 3], [1, 2]]))
    assert got[1][0] == "B"  # a value seen inert: predicted either way
    assert (got[0] is None) == skip_open
    if not skip_open:
        assert got[0][0] == "A"


try:
    from ciq_optuna.compilers.locate import find_compiler

    find_compiler("ptxas")
    HAVE_PTXAS = True
except Exception:  # noqa: BLE001
    HAVE_PTXAS = False


@pytest.mark.skipif(not HAVE_PTXAS, reason="no ptxas installed")
def test_real_ptxas_tune_with_the_knob_skips_only_right_predictions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flag-only tune of the example sgemm (sm_90a, 128 trials, seed 1, SQLite storage;
    without the knob 23 of its 37 skips were wrong, most a register-usage level left open):
    every skipped trial compiled now with its recorded flags gives the predicted binary; skips
    are recorded on their trials and the queued compile_required trials are compiled."""
    from ciq_optuna.compilers import get_compiler
    from ciq_optuna.tune import TuneConfig, tune

    monkeypatch.setattr(_genetic, "_CLOSE_OPEN_PLANS", True)
    kernel = Path(__file__).resolve().parents[1] / "examples" / "sgemm" / "sgemm.sm_90a.ptx"
    result = tune(
        TuneConfig(
            kernel=kernel,
            arch="sm_90a",
            minimize=["registers"],
            trials=128,
            seed=1,
            storage=f"sqlite:///{tmp_path}/s.db",
            acf=tmp_path / "best.acf",
            workdir=tmp_path / "work",
            progress=False,
        )
    )
    trials = result.study.get_trials(deepcopy=False)
    skipped = [t for t in trials if t.user_attrs.get("skipped_compile")]
    assert skipped and all("predicted_from" in t.user_attrs for t in skipped)
    ptxas = get_compiler("ptxas")
    wrong = []
    for t in skipped:
        res = ptxas.compile(kernel, "sm_90a", t.user_attrs["flags"], output=tmp_path / "out.cubin", timeout=120.0)
        if not res.ok or res.code_hash != t.user_attrs["predicted_binary"]:
            wrong.append(t.number)
    assert wrong == []
    required = [t for t in trials if t.user_attrs.get("compile_required")]
    assert not any(t.user_attrs.get("skipped_compile") for t in required)
