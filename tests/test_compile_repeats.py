"""A configuration compiled before is not compiled again, whatever proposed it (real ptxas)."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from ciq_optuna.compilers.locate import find_compiler
from ciq_optuna.objectives.compile import TrialFailed
from ciq_optuna.objectives.work_saved import work_saved
from ciq_optuna.tune import TuneConfig, prepare

STENCIL = Path(__file__).resolve().parents[1] / "examples" / "stencil" / "stencil.sm_90a.ptx"
optuna.logging.set_verbosity(optuna.logging.WARNING)

try:
    find_compiler("ptxas")
except Exception:  # noqa: BLE001
    pytest.skip("no ptxas installed", allow_module_level=True)


def test_the_compiler_arguments_of_an_earlier_trial_reuse_its_values_as_a_recorded_skip(tmp_path: Path) -> None:
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
