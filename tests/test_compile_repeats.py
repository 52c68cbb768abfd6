"""A configuration compiled before is not compiled again, whatever proposed it (real ptxas)."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from ciq_optuna.compilers.locate import find_compiler
from ciq_optuna.objectives.compile import CompileObjective, TrialFailed
from ciq_optuna.objectives.finished import FinishedTrials
from ciq_optuna.objectives.work_saved import work_saved
from ciq_optuna.space.search import SearchSpace
from ciq_optuna.tune import TuneConfig, prepare

STENCIL = Path(__file__).resolve().parents[1] / "examples" / "stencil" / "stencil.sm_90a.ptx"
optuna.logging.set_verbosity(optuna.logging.WARNING)

try:
    find_compiler("ptxas")
except Exception:  # noqa: BLE001
    pytest.skip("no ptxas installed", allow_module_level=True)


def _objective(tmp_path: Path) -> CompileObjective:
    _, objective = prepare(
        TuneConfig(
            kernel=STENCIL,
            arch="sm_90a",
            minimize=["registers"],
            trials=8,
            storage=f"sqlite:///{tmp_path / 's.db'}",
            acf=tmp_path / "best.acf",
            workdir=tmp_path / "w",
            progress=False,
        )
    )
    return objective


def test_the_configuration_of_an_earlier_trial_reuses_its_values_as_a_recorded_skip(tmp_path: Path) -> None:
    objective = _objective(tmp_path)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(objective, n_trials=3, catch=(TrialFailed,))
    first = study.trials[0]
    assert first.state == optuna.trial.TrialState.COMPLETE
    study.enqueue_trial(first.params)
    study.enqueue_trial(first.params)
    study.optimize(objective, n_trials=2, catch=(TrialFailed,))
    for t in study.trials[3:]:
        assert t.params == first.params and t.value == first.value
        assert t.user_attrs["skipped_compile"] and "binary_hash" not in t.user_attrs
        assert t.user_attrs["repeat_of"] == t.user_attrs["predicted_from"] == 0
        assert t.user_attrs["predicted_binary"] == first.user_attrs["binary_hash"]
        assert t.user_attrs["metrics"] == first.user_attrs["metrics"]
    work = work_saved(study)
    assert (work["compiles_run"], work["compiles_skipped"]) == (3, 2)


def test_the_same_compiler_controls_with_other_application_values_are_compiled(tmp_path: Path) -> None:
    """Application values (Triton meta-parameters, what a measurement reads) are part of the
    configuration: only the same controls with the same values are a repeat."""
    objective = _objective(tmp_path)
    objective.space = SearchSpace(app={"block": [64, 128]}, compilers=objective.space.compilers)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(objective, n_trials=1, catch=(TrialFailed,))
    first = study.trials[0]
    other = 128 if first.params["block"] == 64 else 64
    study.enqueue_trial({**first.params, "block": other})
    study.enqueue_trial(first.params)
    study.optimize(objective, n_trials=2, catch=(TrialFailed,))
    moved, again = study.trials[1:]
    assert "binary_hash" in moved.user_attrs and "repeat_of" not in moved.user_attrs
    assert again.user_attrs["repeat_of"] == 0 and again.user_attrs["skipped_compile"]


def test_values_equal_under_eq_but_of_other_types_are_other_configurations() -> None:
    """``1`` and ``True`` are one dictionary key in Python but two choices of a categorical: the
    index of compiled configurations tells them apart."""
    study = optuna.create_study()
    dist = {"a": optuna.distributions.CategoricalDistribution([True, 1, 1.0])}
    for number, value in enumerate([True, 1.0]):
        study.add_trial(
            optuna.trial.create_trial(
                params={"a": value}, distributions=dist, value=float(number), user_attrs={"binary_hash": f"h{number}"}
            )
        )
    index = FinishedTrials(study)
    assert index.compiled({"a": True}).number == 0
    assert index.compiled({"a": 1.0}).number == 1
    assert index.compiled({"a": 1}) is None


def test_a_run_indexes_the_study_in_its_first_trial_even_when_that_trial_is_a_predicted_skip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one pass over the finished trials of a resumed study is paid in the run's first trial
    (as the sampler's first read is): later trials index only trials finished since."""
    objective = _objective(tmp_path)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(objective, n_trials=4, catch=(TrialFailed,))
    source = study.trials[0]
    study.enqueue_trial(
        source.params,
        user_attrs={"skip_compile": True, "predicted_from": 0, "predicted_binary": source.user_attrs["binary_hash"]},
    )
    taken: list[tuple[int, int]] = []
    running = [-1]
    take = FinishedTrials._take
    monkeypatch.setattr(FinishedTrials, "_take", lambda self, t: (taken.append((running[0], t.number)), take(self, t)))

    fresh = _objective(tmp_path)  # a new run: its objective has not read the study

    def run(trial: optuna.Trial) -> float:
        running[0] = trial.number
        return fresh(trial)

    study.optimize(run, n_trials=3, catch=(TrialFailed,))
    assert study.trials[4].user_attrs["skipped_compile"]
    assert {t for r, t in taken if r == 4} >= {0, 1, 2, 3}
    assert all(t >= 4 for r, t in taken if r > 4)
