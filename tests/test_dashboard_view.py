"""What ``ciq-optuna dashboard`` reads (ciq_optuna.dashboard_view): objectives named, one attribute
per metric, each control once, one Best Trial per Pareto point. The browser test in
tests/test_dashboard.py checks the same on the page of a real tune."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState, create_trial

from ciq_optuna.dashboard_view import (
    OBJECTIVES_ATTR,
    DashboardView,
    merged_distributions,
    pareto_points,
    study_note,
)
from ciq_optuna.space.controls import NOT_PASSED
from ciq_optuna.summary import best_trials

GENE = CategoricalDistribution([False, True])
VALUE = IntDistribution(24, 248, step=8)
OPT = CategoricalDistribution([NOT_PASSED, 0, 1, 2, 3])


def _trial(values: list[float], passed: bool, regs: int | None, opt: object, flags: list[str], **attrs: object):
    params = {"ptxas.maxrregcount.passed": passed, "ptxas.opt_level": opt}
    dists = {"ptxas.maxrregcount.passed": GENE, "ptxas.opt_level": OPT}
    if passed:
        params["ptxas.maxrregcount"], dists["ptxas.maxrregcount"] = regs, VALUE
    metrics = {"registers": values[0], "spill-bytes": values[-1], "compile-time": 31.234567}
    return create_trial(
        values=values,
        params=params,
        distributions=dists,
        user_attrs={"flags": flags, "metrics": metrics, **attrs},
    )


def _study(tmp_path: Path, directions: list[str]) -> optuna.Study:
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 's.db'}")
    study = optuna.create_study(storage=storage, study_name="k", directions=directions)
    metrics = ["registers", "spill-bytes"][: len(directions)]
    study.set_user_attr("ciq_optuna", {"metrics": metrics, "arch": "sm_80"})
    v = (lambda r, s: [r, s]) if len(directions) == 2 else (lambda r, s: [r])
    study.add_trial(_trial(v(128, 0), False, None, NOT_PASSED, [], baseline=True))
    study.add_trial(_trial(v(96, 8), True, 96, NOT_PASSED, ["--maxrregcount=96"]))
    # the same point as trial 1 reached with more flags, then a compile skipped on a prediction
    study.add_trial(_trial(v(96, 8), True, 96, 3, ["-O3", "--maxrregcount=96"]))
    study.add_trial(_trial(v(96, 8), True, 96, NOT_PASSED, ["--maxrregcount=96"], skipped_compile=True))
    study.add_trial(_trial(v(116, 0), False, None, 0, ["-O0"]))
    study.add_trial(_trial(v(116, 0), False, None, 0, ["-O0"], skipped_compile=True))
    study.add_trial(create_trial(state=TrialState.FAIL, params={}, distributions={}, user_attrs={"error": "x"}))
    return study


def test_trials_show_named_objectives_one_attribute_per_metric_and_each_control_once(tmp_path: Path) -> None:
    study = _study(tmp_path, ["minimize", "minimize"])
    view = DashboardView(optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 's.db'}"))
    shown = view.get_all_trials(study._study_id, deepcopy=False)
    first = shown[1]
    assert list(first.user_attrs)[0] == OBJECTIVES_ATTR
    assert first.user_attrs[OBJECTIVES_ATTR] == "registers 96 regs, spill-bytes 8 B"
    assert first.user_attrs["registers (regs)"] == 96 and first.user_attrs["compile-time (ms)"] == 31.23
    assert "metrics" not in first.user_attrs and first.user_attrs["flags"] == "--maxrregcount=96"
    assert shown[0].user_attrs["flags"] == "(compiler defaults)"
    # one parameter per control: the .passed gene folded into the control's values
    assert first.params == {"ptxas.maxrregcount": 96, "ptxas.opt_level": NOT_PASSED}
    assert shown[0].params["ptxas.maxrregcount"] == NOT_PASSED
    dist = first.distributions["ptxas.maxrregcount"]
    assert dist == shown[0].distributions["ptxas.maxrregcount"]
    assert dist.choices[0] == NOT_PASSED and dist.choices[1:] == tuple(range(24, 249, 8))
    assert not any(n.endswith(".passed") for t in shown for n in t.params)
    assert shown[-1].state == TrialState.FAIL and shown[-1].user_attrs[OBJECTIVES_ATTR] == "not evaluated"
    # the stored study is unchanged
    assert "ptxas.maxrregcount.passed" in study.trials[1].params and "metrics" in study.trials[1].user_attrs
    # the dashboard's importance runs on the view: it ranks controls, never a half of one
    view_study = optuna.load_study(study_name="k", storage=view)
    importance = optuna.importance.get_param_importances(
        view_study, target=lambda t: t.values[0], evaluator=optuna.importance.PedAnovaImportanceEvaluator()
    )
    assert set(importance) <= {"ptxas.maxrregcount", "ptxas.opt_level"}


def test_study_list_names_the_objectives(tmp_path: Path) -> None:
    study = _study(tmp_path, ["minimize", "maximize"])
    view = DashboardView(optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 's.db'}"))
    (shown,) = view.get_all_studies()
    assert shown.study_name == "k · min registers (regs), max spill-bytes (B)"
    assert shown.user_attrs["ciq_optuna.arch"] == "sm_80"
    assert view.get_study_id_from_name("k") == study._study_id


def test_one_best_trial_per_pareto_point_the_one_tune_writes(tmp_path: Path) -> None:
    study = _study(tmp_path, ["minimize", "minimize"])
    assert len(study.best_trials) == 5  # Optuna: every trial with a front point's values
    points = pareto_points(study.trials, study.directions)
    assert [t.number for t in points] == [1, 4] == [t.number for t in best_trials(study)]


def test_single_objective_best_trial_is_the_winner_tune_chose(tmp_path: Path) -> None:
    study = _study(tmp_path, ["minimize"])
    view = DashboardView(optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 's.db'}"))
    best = view.get_best_trial(study._study_id)
    assert best.number == best_trials(study)[0].number == 1
    assert best.user_attrs[OBJECTIVES_ATTR] == "registers 96 regs"


def test_study_without_ciq_metadata_is_shown_as_stored(tmp_path: Path) -> None:
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'p.db'}")
    study = optuna.create_study(storage=storage, study_name="plain")
    study.optimize(lambda t: t.suggest_int("x.passed", 0, 1), n_trials=2)
    view = DashboardView(storage)
    assert view.get_all_studies()[0].study_name == "plain"
    assert view.get_all_trials(study._study_id)[0].params == study.trials[0].params


@pytest.mark.parametrize("directions", [["minimize"], ["minimize", "minimize"]])
def test_study_note_names_objectives_and_points(tmp_path: Path, directions: list[str]) -> None:
    study = _study(tmp_path, directions)
    note = study_note(study, {1: "trial-1.acf"})
    assert "**registers (regs)** (minimize)" in note
    assert "| 1 | 96" in note and "`--maxrregcount=96`" in note and "trial-1.acf" in note
    assert ("Pareto front" in note) == (len(directions) == 2)
    assert "NAME.passed" in note


def test_merged_distributions_leave_wide_ranges_alone() -> None:
    wide = IntDistribution(0, 10_000)
    trial = create_trial(value=1.0, params={"a.passed": True, "a": 5}, distributions={"a.passed": GENE, "a": wide})
    assert merged_distributions([trial]) == {}


def test_the_study_space_fixes_the_merged_form_from_the_first_trial() -> None:
    """Before any trial passes a control, the space file the study names gives its values."""
    from ciq_optuna.dashboard_view import space_distributions
    from ciq_optuna.space.compiler_space import CompilerSpace

    space = CompilerSpace.load(Path(__file__).resolve().parents[1] / "spaces" / "ptxas-13.0.toml")
    meta = {"ciq_optuna": {"spaces": [space.identity], "arch": "sm_80", "metrics": ["registers"]}}
    genes = space_distributions(meta)
    assert "ptxas.maxrregcount.passed" in genes
    baseline = create_trial(
        value=128.0, params={"ptxas.maxrregcount.passed": False}, distributions={"ptxas.maxrregcount.passed": GENE}
    )
    assert merged_distributions([baseline]) == {}  # from the trials alone: the values are unknown yet
    merged = merged_distributions([baseline], genes)
    assert merged["ptxas.maxrregcount"].choices == (NOT_PASSED, *range(24, 249, 8))
    changed = {"ciq_optuna": {**meta["ciq_optuna"], "spaces": [{**space.identity, "sha256": "0" * 64}]}}
    assert space_distributions(changed) == {} and space_distributions({}) == {}
