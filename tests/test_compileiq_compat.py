"""CompileIQ scripts that broke on ciq-optuna (issue 16): results, module layout, GPU helpers,
worker and tracker arguments. Each test follows CompileIQ's documented behaviour
(docs/compileiq-api.md of the shared notes: sections 1.3-1.5, 3, 4, 5 and 8)."""

from __future__ import annotations

import functools
import re
import subprocess
import tempfile
import warnings
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest
from pydantic import ValidationError

import ciq_optuna.compileiq.search_spaces.base as ss
from ciq_optuna.compileiq.ciq import Search
from ciq_optuna.compileiq.results import SearchResult, calculate_pareto_front
from ciq_optuna.compileiq.search_spaces.compilers import PtxasSearchSpace
from ciq_optuna.compileiq.types import (
    BASELINE_CONFIG,
    INVALID_SCORE,
    BaseTracker,
    DefaultTrackerConfig,
    DisabledTrackerConfig,
    LoguruTrackerConfig,
    MLflowTrackerConfig,
    MultiProcessWorker,
    ProblemType,
    SearchConfiguration,
    TrackerConfig,
    TrackerTypes,
    Worker,
)
from ciq_optuna.compileiq.utils.helpers import save_compiler_config

SPACE = {"x": ss.range(1.0, 20.0, 0.5), "y": ss.choice([1, 2, 3])}


def square(params):
    return params["x"] ** 2 + params["y"]


def search(**kw) -> Search:
    args = {
        "objective_function": square,
        "search_space": SPACE,
        "search_config": SearchConfiguration(generations=1, pool_size=6),
        "disable_progress_bar": True,
        **kw,
    }
    return Search(**args)


def frame(scores: list, metadata: list | None = None) -> pd.DataFrame:
    n = len(scores[0]) if isinstance(scores[0], tuple) else 1
    rows = []
    for i, s in enumerate(scores):
        row = {"metadata": "" if metadata is None else metadata[i], "generation": 0}
        for j, v in enumerate(s if isinstance(s, tuple) else (s,)):
            row[f"score_{j + 1}"] = v
        row["params"] = {"i": i}
        rows.append(row)
    assert all(f"score_{n}" in r for r in rows)
    return pd.DataFrame(rows)


# -- 1. SearchResult(df, problem_type, num_scores) -------------------------------------------------
def test_search_result_takes_compileiqs_constructor_order():
    df = frame([5.0, 2.0, 9.0])
    for result in (
        SearchResult(df, ProblemType.MIN, 1),
        SearchResult(df=df, problem_type="min", num_scores=1),
    ):
        assert result.get_results() is df
        assert (result.num_scores, result.problem_type) == (1, ProblemType.MIN)
        assert result.get_best_result()["score_1"] == 2.0
    assert SearchResult(df, "max", 1).get_best_result()["score_1"] == 9.0
    with pytest.raises(ValueError, match="num_scores=2"):
        SearchResult(df, "min", 2)


def test_search_result_keeps_its_keyword_forms():
    empty = SearchResult(num_scores=2, problem_type="max", normalize=True)
    assert list(empty.get_results().columns) == [
        "metadata",
        "generation",
        "score_1",
        "score_2",
        "params",
        "norm_score_1",
        "norm_score_2",
    ]
    df = frame([1.0, 3.0])
    assert SearchResult(problem_type="max", df_results=df).get_best_result()["score_1"] == 3.0
    with pytest.raises(TypeError):
        SearchResult(df, df_results=df)


# -- 2. result.calculate_pareto_front(scores) -----------------------------------------------------
@pytest.mark.parametrize(
    "problem, points, mask",
    [
        ("min", [(1, 1), (5, 5), (1, 5)], [True, False, True]),
        ("min", [(1, 10), (5, 5), (10, 1)], [True, True, True]),
        ("min", [(2, 2), (2, 2)], [True, True]),
        ("max", [(5, 5), (1, 1), (5, 1)], [True, False, True]),
    ],
)
def test_calculate_pareto_front_is_a_method(problem, points, mask):
    result = SearchResult(frame(points), problem, 2)
    got = result.calculate_pareto_front(np.array(points))
    assert got.dtype == bool and got.tolist() == mask
    assert got.tolist() == calculate_pareto_front(np.array(points), problem).tolist()
    front = [(r["score_1"], r["score_2"]) for r in result.pareto_front()]
    assert front == [p for p, keep in zip(points, mask) if keep]


# -- 3. metadata keeps its type -------------------------------------------------------------------
def test_metadata_keeps_its_type_through_dataframe_csv_and_save(tmp_path):
    df = frame([4.0, 3.0], metadata=[3, 7])
    loaded = SearchResult.from_dataframe(df, "min")
    assert loaded.get_results()["metadata"].dtype == np.int64
    assert loaded.get_best_result()["metadata"] == 7

    path = tmp_path / "r.csv"
    loaded.save(path)
    back = SearchResult.from_csv(path, "min")
    assert back.get_results()["metadata"].dtype == np.int64
    best = back.get_best_result()
    assert best["metadata"] == 7 and not isinstance(best["metadata"], str)
    assert best["params"] == {"i": 1}
    pd.testing.assert_frame_equal(back.get_results(), loaded.get_results())
    pd.testing.assert_frame_equal(back.get_results(), df)  # save then from_csv: the same DataFrame

    text = frame([1.0, 2.0], metadata=['{"pid": 12}', ""])
    SearchResult(text, "min", 1).save(path)
    again = SearchResult.from_csv(path, "min").get_results()
    assert again["metadata"].tolist() == ['{"pid": 12}', ""]


def test_add_result_takes_generation_num_and_gen():
    from ciq_optuna.compileiq.utils.validation import Score

    result = SearchResult(num_scores=1, problem_type="min")
    result.add_result(Score(score=2.0, params={"x": 1}, param_id=0, num_objectives=1), generation_num=3)
    result.add_result(Score(score=1.0, params={"x": 2}, param_id=1, num_objectives=1), gen=4)
    result.add_result(Score(score=5.0, params={"x": 3}, param_id=2, num_objectives=1), 5)
    assert result.get_results()["generation"].tolist() == [3, 4, 5]
    with pytest.raises(TypeError):
        result.add_result(Score(score=1.0, params={}, param_id=3, num_objectives=1))


# -- 4. utils.validation --------------------------------------------------------------------------
def test_utils_validation_holds_what_compileiq_lists():
    from ciq_optuna.compileiq.utils import validation

    assert validation.INVALID_SCORE == "*" and validation.BASELINE_DNA == {} == validation.BASELINE_CONFIG
    assert validation.validate_inf_nan(float("nan")) == "*" and validation.validate_inf_nan(2.5) == 2.5
    assert validation.validate_scores("*", 3) == ("*", "*", "*")
    with pytest.raises(ValueError, match="does not match expected types"):
        validation.validate_scores("not_a_score", 1)
    s = validation.Score(score=(1.0, "*"), params={}, param_id="a", num_objectives=2)
    assert s.failed and s.score == (1.0, "*")


class SequentialWorker(Worker):
    """CompileIQ's examples/custom_worker.py worker, with its imports changed only."""

    @classmethod
    def create(cls, cache_folder, normalize, tracker):
        return cls(cache_folder=cache_folder, normalize=normalize, tracker=tracker)

    def run(self, *, function, params_pool, params_ids, num_function_returns=1, **kwargs):
        from ciq_optuna.compileiq.utils.validation import Score

        scores = []
        if self.normalize and self.baseline_score is None:
            base = function(BASELINE_CONFIG)
            self.baseline_score = Score(
                score=base,
                param_id="baseline",
                params=BASELINE_CONFIG,
                norm_score=self.normalize_scores(base, base),
                num_objectives=num_function_returns,
                is_baseline=True,
            )
            scores.append(self.baseline_score)
        for i, param in enumerate(params_pool):
            s = Score(score=function(param), param_id=params_ids[i], params=param, num_objectives=1)
            if self.normalize:
                s.norm_score = self.normalize_scores(s.score, self.baseline_score.score)
            scores.append(s)
        return scores


def test_compileiqs_custom_worker_example_runs():
    def objective(params):
        return 2 if params == {} else params["x"] - params["y"] ** 2

    df = (
        search(
            objective_function=objective,
            search_config=SearchConfiguration(normalize=True, pool_size=12, generations=2),
            worker_type=SequentialWorker,
        )
        .start(dummy_arg="passed through")
        .get_results()
    )
    assert len(df) == 25 and (df["params"] == {}).sum() == 1
    rows = df[df["params"] != {}]
    assert (rows["norm_score_1"] == rows["score_1"] / 2).all()


# -- 5. utils.gpu ---------------------------------------------------------------------------------
def test_has_nvidia_smi_follows_the_path(tmp_path, monkeypatch):
    from ciq_optuna.compileiq.utils.gpu import has_nvidia_smi

    monkeypatch.setenv("PATH", str(tmp_path))
    assert has_nvidia_smi() is False
    tool = tmp_path / "nvidia-smi"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert has_nvidia_smi() is True


def test_gpu_benchmark_mode_without_settings_raises_before_nvml(monkeypatch):
    import ciq_optuna.gpu.nvml as nvml
    from ciq_optuna.compileiq.utils.gpu import gpu_benchmark_mode

    def no_nvml(*a, **k):
        raise AssertionError("NVML was touched")

    monkeypatch.setattr(nvml, "load_nvml", no_nvml)
    with pytest.raises(
        ValueError, match=r"^At least one of clock_mhz, mem_clock_mhz, or power_watts must be set\.$"
    ):
        with gpu_benchmark_mode():
            pass
    with pytest.warns(UserWarning, match="will have no effect"):
        with gpu_benchmark_mode(raise_on_failure=False) as clocks:
            assert clocks == {}


# -- 6. worker_type validation --------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["default", "not_valid", 42, dict])
def test_invalid_worker_type_is_a_pydantic_validation_error(bad):
    with pytest.raises(ValidationError):
        search(worker_type=bad)


def test_valid_worker_types_still_map_to_classes():
    assert search(worker_type="native").worker_type is MultiProcessWorker
    assert search(worker_type=SequentialWorker).worker_type is SequentialWorker


# -- 7. Worker.run with more ids than candidates ---------------------------------------------------
def test_worker_run_ignores_ids_past_the_pool():
    worker = MultiProcessWorker.create(None, False, None)
    scores = worker.run(
        function=square,
        params_pool=[{"x": 1.0, "y": 1}, {"x": 2.0, "y": 3}],
        params_ids=[10, 11, 12, 13],
    )
    assert [(s.param_id, s.score) for s in scores] == [(10, 2.0), (11, 7.0)]
    with pytest.raises(ValueError, match="one id per candidate"):
        worker.run(function=square, params_pool=[{"x": 1.0, "y": 1}], params_ids=[])


# -- 8. trackers ----------------------------------------------------------------------------------
def test_tracker_names_import_and_match_compileiq():
    assert [t.value for t in TrackerTypes] == ["loguru", "mlflow", "disabled"]
    assert TrackerTypes.DEFAULT is TrackerTypes.DISABLED
    assert DefaultTrackerConfig().type is TrackerTypes.DISABLED
    assert (
        LoguruTrackerConfig(sink=["tracker.log"], level="DEBUG", colorize=False).type is TrackerTypes.LOGURU
    )
    assert isinstance(MLflowTrackerConfig(run_name="r"), TrackerConfig)
    assert issubclass(BaseTracker, object) and BaseTracker(DisabledTrackerConfig()).tracker_type == "disabled"


def test_disabled_and_loguru_trackers_point_to_the_study():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        search(tracker_config=DisabledTrackerConfig())
    with pytest.warns(UserWarning, match="Optuna study.*optuna-dashboard"):
        s = search(tracker_config=LoguruTrackerConfig(sink=["tracker.log"], level="DEBUG"))
    assert len(s.start().get_results()) == 6 and len(s.study.trials) == 6


def test_mlflow_tracker_maps_to_optunas_mlflow_callback():
    from ciq_optuna.compileiq._compat.trackers import mlflow_callback_kwargs

    one = mlflow_callback_kwargs(MLflowTrackerConfig(tracking_uri="file:/tmp/m", description="d"), 1)
    assert one == {
        "tracking_uri": "file:/tmp/m",
        "metric_name": "score_1",
        "create_experiment": True,
        "mlflow_kwargs": {"description": "d"},
        "tag_trial_user_attrs": True,
    }
    two = mlflow_callback_kwargs(MLflowTrackerConfig(score_names=["spills", "regs"], log_config=False), 2)
    assert two["metric_name"] == ["spills", "regs"] and two["tag_trial_user_attrs"] is False
    assert mlflow_callback_kwargs(MLflowTrackerConfig(score_names=["a"]), 2)["metric_name"] == [
        "score_1",
        "score_2",
    ]
    try:
        import mlflow  # noqa: F401
        import optuna_integration  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"pip install 'ciq-optuna\[mlflow\]'"):
            search(tracker_config=MLflowTrackerConfig())
    else:  # pragma: no cover - only where the optional extra is installed
        from optuna_integration.mlflow import MLflowCallback

        assert any(
            isinstance(c, MLflowCallback) for c in search(tracker_config=MLflowTrackerConfig())._callbacks
        )


def test_callbacks_see_every_told_candidate():
    seen: list[tuple[int, str]] = []

    def callback(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        seen.append((trial.number, trial.state.name))

    def half_fail(params):
        return INVALID_SCORE if params["y"] == 3 else square(params)

    s = search(objective_function=half_fail, callbacks=[callback], exit_on_failure=False)
    s.start()
    assert seen == [(t.number, t.state.name) for t in s.study.trials]
    assert len(seen) == 6


# -- 10. legacy .config files ---------------------------------------------------------------------
DNA = r"""; a legacy DNA search space
(classes
  (class-unroll (type . range) (low . 0) (high . 100) (step . 10) (repr . "  \"$key\": {\"value\": \"$value\"},"))
  (class-ratio (type . range) (low . 0.0) (high . 1.0) (step . 0.25) (repr . "  \"$key\": $value,"))
  (class-mode (type . enum) (vals . ("fast" "safe")) (repr . "  \"$key\": \"$value\","))
  (class-flag (type . literal) (value . 1) (repr . "  \"$key\": $value,"))
  (class-KO50 (type . knockout) (threshold . 0.5))
)
(dna
 "{"
  (Unroll (class . "class-unroll") (high . 50))
  (Ratio (class . "class-ratio"))
  (Mode (class . "class-mode")) (ModeKO (class . "class-KO50") (linked_genes . [Mode]))
  (Flag (class . "class-flag"))
 "}"
)
"""


def test_plain_text_legacy_dna_config_is_a_search_space(tmp_path):
    path = tmp_path / "dna.config"
    path.write_text(DNA)
    seen: list = []

    def objective(params):
        seen.append(params)
        return int(params["Unroll"]["value"]) + params["Ratio"]

    s = search(objective_function=objective, search_space=path, seed=3)
    df = s.start().get_results()
    assert len(df) == 6 and len(seen) == 6
    for params in df["params"]:
        assert set(params) - {"Mode"} == {"Unroll", "Ratio", "Flag"}
        assert params["Unroll"]["value"] in {str(v) for v in range(0, 60, 10)}  # high overridden to 50
        assert params["Ratio"] in (0.0, 0.25, 0.5, 0.75, 1.0) and params["Flag"] == 1
        assert params.get("Mode", "fast") in ("fast", "safe")
    for t in s.study.trials:  # a knocked-out Mode is absent
        assert ("Mode" in t.user_attrs["ciq.result"]["params"]) == t.params["ModeKO"]
    assert s.search_space_resolution_metadata is None


def test_legacy_search_configuration_with_comments_and_dna_key(tmp_path):
    path = tmp_path / "main.config"
    path.write_text(
        '(dna_config . "configs/dna.config")\n; baseline (normalisation)\n(qualitative . #t)\n'
        "(pool_size . 12)\n(cull_size . 6)\n(generations . 3)\n(mutate_rate . 0.3)\n"
        "; one score (per objective)\n(num_objectives . 1)\n(seek_minimum . #f)\n"
    )
    with pytest.warns(UserWarning, match="Configuration dna_config is going to be ignored"):
        config = SearchConfiguration.from_legacy(path)
    assert (config.pool_size, config.cull_size, config.generations, config.mutate_rate) == (12, 6, 3, 0.3)
    assert config.problem_type is ProblemType.MAX and config.normalize is False


def test_encrypted_or_broken_dna_config_is_refused_clearly(tmp_path):
    encrypted = tmp_path / "ptxas.config"
    encrypted.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ValueError, match="encrypted or binary.*NVIDIA's engine"):
        search(search_space=encrypted)
    undefined = tmp_path / "undefined.config"
    undefined.write_text('(classes)\n(dna "{" (x (class . "float-int")) "}")\n')
    with pytest.raises(
        ValueError, match="class 'float-int', which the \\(classes ...\\) list does not define"
    ):
        search(search_space=undefined)
    unbalanced = tmp_path / "unbalanced.config"
    unbalanced.write_text(DNA.rstrip()[:-1])
    with pytest.raises(ValueError, match="not closed"):
        search(search_space=unbalanced)


# -- 9. the silent no-op: candidates that never reach ptxas 13.0 ----------------------------------
PTXAS_13_0 = Path("/usr/local/cuda/bin/ptxas")
ATTENTION = Path(__file__).resolve().parents[1] / "examples" / "attention" / "attention.sm_90a.ptx"
needs_ptxas_13_0 = pytest.mark.skipif(not PTXAS_13_0.exists(), reason="needs CUDA 13.0's ptxas")


def spill_stores(acf_hex: str, flag: str | None) -> float | str:
    """CompileIQ's ptx_spill.py objective; ``flag`` is how the candidate file reaches ptxas
    (None: it never does)."""
    with tempfile.TemporaryDirectory() as tmp:
        acf = Path(tmp) / "controls.acf"
        save_compiler_config(acf, acf_hex)
        apply = [flag, str(acf)] if flag else []
        cmd = [
            str(PTXAS_13_0),
            "-v",
            "-arch=sm_90a",
            *apply,
            str(ATTENTION),
            "-o",
            str(Path(tmp) / "k.cubin"),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            return INVALID_SCORE
        found = re.findall(r"(\d+) bytes spill stores", proc.stdout + proc.stderr)
        return float(sum(int(n) for n in found)) if found else INVALID_SCORE


def ptxas_search(flag: str | None, **kw) -> Search:
    return search(
        objective_function=functools.partial(spill_stores, flag=flag),
        search_space=PtxasSearchSpace(version="13.0", arch="sm_90a"),
        seed=0,
        **kw,
    )


@needs_ptxas_13_0
def test_apply_controls_on_ptxas_13_0_points_to_options_file():
    with pytest.raises(RuntimeError, match=r"All objective functions failed.*ptxas --options-file FILE"):
        ptxas_search("--apply-controls").start()
    with pytest.warns(RuntimeWarning, match=r"all 6 candidates .* failed \('\*'\).*--options-file"):
        ptxas_search("--apply-controls", exit_on_failure=False).start()


@needs_ptxas_13_0
def test_candidates_that_never_reach_ptxas_are_reported():
    with pytest.warns(RuntimeWarning, match=r"scored the same \(348.0\).*never reached the compiler"):
        df = ptxas_search(None).start().get_results()
    assert set(df["score_1"]) == {348.0} and df["params"].nunique() > 1
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*never reached the compiler")
        applied = ptxas_search("--options-file").start().get_results()
    assert applied["score_1"].nunique() > 1
