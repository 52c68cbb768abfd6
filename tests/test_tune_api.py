"""The Python API: the user's own measurement as a callable, failures that fail one trial only."""

from __future__ import annotations

import gc
from pathlib import Path

import optuna
import pytest

from ciq_optuna.compilers.cubin import code_hash
from ciq_optuna.compilers.locate import find_compiler
from ciq_optuna.errors import CiqError
from ciq_optuna.objectives.compile import TrialFailed
from ciq_optuna.tune import TuneConfig, prepare, tune

ROOT = Path(__file__).resolve().parents[1]
STENCIL = ROOT / "examples" / "stencil" / "stencil.sm_90a.ptx"

try:
    find_compiler("ptxas")
except Exception:  # noqa: BLE001
    pytest.skip("no ptxas installed", allow_module_level=True)


def _config(tmp_path: Path, **kw) -> TuneConfig:
    base = dict(
        kernel=STENCIL,
        arch="sm_90a",
        minimize=["size"],
        trials=10,
        seed=0,
        measure_name="size",
        storage=f"sqlite:///{tmp_path / 's.db'}",
        acf=tmp_path / "best.acf",
        workdir=tmp_path / "w",
        progress=False,
    )
    base.update(kw)
    return TuneConfig(**base)


def test_callable_measurement_runs_once_per_distinct_binary(tmp_path: Path) -> None:
    calls: list[Path] = []

    def measure(cubin: Path, candidate) -> float:
        calls.append(cubin)
        return float(cubin.stat().st_size)

    result = tune(_config(tmp_path, simplify=False), measure=measure)
    complete = result.study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert len(complete) == 10
    skipped = result.stats["work_saved"]["compiles_skipped"]
    assert len(calls) == result.stats["distinct_binaries"] == 10 - result.stats["reused_measurements"] - skipped
    for t in complete:
        assert t.value == t.user_attrs["metrics"]["cubin-size"]


def test_a_failing_measurement_fails_only_that_trial(tmp_path: Path) -> None:
    def measure(cubin: Path, candidate) -> dict[str, float]:
        if "-O0" in candidate.all_flags():
            raise ValueError("simulated benchmark crash")
        if "--fmad=false" in candidate.all_flags():
            return {"size": "fast"}  # not a number
        return {"size": 1.0}

    result = tune(_config(tmp_path, trials=24, seed=4, simplify=False), measure=measure)
    failed = result.study.get_trials(states=(optuna.trial.TrialState.FAIL,))
    assert failed, "the seed should propose -O0 or --fmad=false at least once"
    messages = {t.user_attrs["error"] for t in failed}
    assert messages <= {
        "measurement raised ValueError: simulated benchmark crash",
        "measurement 'size' is 'fast', not a number",
    }
    assert len(result.study.trials) == 24


def test_unknown_metric_for_the_callable_is_refused_before_the_study(tmp_path: Path) -> None:
    with pytest.raises(CiqError, match="unknown metric 'time'"):
        tune(_config(tmp_path, minimize=["time"]), measure=lambda c, k: 1.0)
    assert not (tmp_path / "s.db").exists()


def test_the_winner_is_simplified_to_the_controls_that_matter(tmp_path: Path) -> None:
    kernel = ROOT / "examples" / "attention" / "attention.sm_80.ptx"
    result = tune(
        _config(
            tmp_path, kernel=kernel, arch="sm_80", minimize=["spill-bytes"], trials=24, seed=0, screen=False
        )
    )
    study, best = result.study, result.best[0]
    complete = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    simplified = [t for t in complete if "simplified_from" in t.user_attrs]
    assert len(study.trials) > 24 and simplified, "the seed's winner passes several controls"
    assert best.value == min(t.value for t in complete) < result.baseline.value
    assert len(best.user_attrs["flags"]) == min(
        len(t.user_attrs["flags"]) for t in complete if t.value == best.value
    )
    # every flag left is needed: removing any one of them was tried and made things worse, or not tried
    # because the removal's configuration was already known to be worse
    first = study.trials[simplified[0].user_attrs["simplified_from"]]
    assert set(best.user_attrs["flags"]) < set(first.user_attrs["flags"])
    assert result.acf_paths and "-O" in " ".join(best.user_attrs["flags"])


def test_one_control_changes_of_the_baseline_are_tried_first(tmp_path: Path) -> None:
    kernel = ROOT / "examples" / "attention" / "attention.sm_80.ptx"
    result = tune(
        _config(tmp_path, kernel=kernel, arch="sm_80", minimize=["spill-bytes"], trials=16, simplify=False)
    )
    trials = result.study.trials
    assert len(trials) == 16
    assert trials[0].user_attrs["baseline"] and trials[0].user_attrs["flags"] == []
    screened = [t for t in trials if t.user_attrs.get("screening")]
    assert [t.number for t in screened] == [1, 2]  # 16 // 8, right after the baseline
    assert [t.user_attrs["flags"] for t in screened] == [["-O0"], ["-O1"]]
    assert all(t.user_attrs["generation"] == 0 for t in screened)


def test_trials_compile_in_one_scratch_folder_per_thread_removed_with_the_objective(tmp_path: Path) -> None:
    """No folder made and removed per trial: each thread reuses one, gone with the objective."""
    _, objective = prepare(_config(tmp_path, minimize=["cubin-size"]))
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(objective, n_trials=8, n_jobs=2, catch=(TrialFailed,))
    folders = list(objective._scratches.values())
    assert 1 <= len(folders) <= 2 and all(f.is_dir() for f in folders)
    complete = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert len(complete) == 8
    for t in complete:  # each binary kept under its code hash, out of the scratch folders (the
        # first compile of that code: configurations that differ only in the command line ptxas
        # records in the cubin give the same code in cubins of other sizes)
        kept = objective.binary_path(t.user_attrs["binary_hash"])
        assert kept.is_file() and code_hash(kept.read_bytes()) == t.user_attrs["binary_hash"]
    assert not list(objective.binary_path("").parent.glob("*.tmp"))
    del objective
    gc.collect()
    assert not any(f.exists() for f in folders)


def test_objects_alive_after_the_first_trial_are_frozen_until_the_run_ends(tmp_path: Path) -> None:
    """The study read and the sampler's model stay out of full collections (ciq_optuna.study.heap)."""
    gc.unfreeze()
    frozen: list[int] = []

    def measure(cubin: Path, candidate) -> float:
        frozen.append(gc.get_freeze_count())
        return float(cubin.stat().st_size)

    tune(_config(tmp_path, trials=6, simplify=False), measure=measure)
    assert frozen[0] == 0 and all(n > 0 for n in frozen[1:]), frozen
    assert gc.get_freeze_count() == 0
