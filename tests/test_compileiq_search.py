"""CompileIQ-compatible Search end to end on real Optuna studies: candidates, generations,
normalisation, failures, workers, ask/evaluate/tell, storage and resumption (section 8, 16-17)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ciq_optuna.compileiq.search_spaces.base as ss
from ciq_optuna.compileiq.ciq import Search
from ciq_optuna.compileiq.search_spaces.compilers import PtxasSearchSpace
from ciq_optuna.compileiq.types import (
    BASELINE_CONFIG,
    INVALID_SCORE,
    AsyncWorker,
    IsoMultiProcessWorker,
    MultiProcessWorker,
    ProblemType,
    SearchConfiguration,
    WorkerTypes,
)
from ciq_optuna.compileiq.utils.helpers import options_from_hex, save_compiler_config

SPACE = {"x": ss.range(1.0, 20.0, 0.5), "y": ss.choice([1, 2, 3]), "z": ss.literal("c", knockout_prob=0.5)}
ROOT = Path(__file__).resolve().parents[1]
PTXAS = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"


def square(params):
    return params["x"] ** 2 + params["y"]


def sleepy(params):
    time.sleep(2)
    return 1.0


def letters(params):
    return "abc"


def crash_on_big_x(params):
    if params["x"] > 10:
        os._exit(3)
    if params["x"] > 5:
        raise KeyError("no such thing")
    return params["x"]


def config(**kw):
    return SearchConfiguration(**{"generations": 2, "pool_size": 6, **kw})


def quiet(**kw):
    return Search(disable_progress_bar=True, seed=1, **kw)


def check_scores(df, fn, normalize=False, baseline=None):
    """Every row's score is the objective of its params (CompileIQ's tests/utils.validate_scores)."""
    for _, row in df.iterrows():
        if row["params"] == {}:
            continue
        expected = fn(row["params"])
        assert row["score_1"] == expected
        if normalize:
            assert row["norm_score_1"] == pytest.approx(expected / baseline)


def test_sample_shapes():
    space = {
        "a": {"b": {"c": ss.range(0, 4)}},
        "s": ss.choice(["one", "two"]),
        "j": ss.literal('{"key": 10}'),
        "k": ss.literal(1, knockout_prob=0.5),
    }
    s = quiet(objective_function=square, search_space=space, search_config=config())
    got = s.sample(12)
    assert len(got) == 12
    for p in got:
        assert set(p) - {"k"} == {"a", "s", "j"} and p["j"] == '{"key": 10}' and p["s"] in ("one", "two")
        assert p["a"]["b"]["c"] in range(5)
    assert any("k" in p for p in got) and any("k" not in p for p in got)
    with pytest.raises(ValueError):
        s.sample(0)


def test_start_single_objective_and_two_starts():
    s = quiet(objective_function=square, search_space=SPACE, search_config={"generations": 3, "pool_size": 8})
    df = s.start().get_results()
    assert list(df.columns) == ["metadata", "generation", "score_1", "params"]
    assert len(df) == 24 and set(df["generation"]) == {0, 1, 2}
    assert all(p["x"] in ss.range(1.0, 20.0, 0.5).values() for p in df["params"])
    assert json.loads(df["metadata"][0]) == {"pid": os.getpid()}
    check_scores(df, square)
    best = s.result.get_best_result()
    assert best["score_1"] == df["score_1"].min() < 403
    # a second start() runs `generations` more generations on the same study
    df = s.start().get_results()
    assert len(df) == 48 and set(df["generation"]) == set(range(6))


def test_normalize_adds_columns_and_baseline_row():
    def fn(p):
        return 4.0 if p == BASELINE_CONFIG else square(p)

    s = quiet(objective_function=fn, search_space=SPACE, search_config=config(normalize=True))
    df = s.start().get_results()
    assert list(df.columns) == ["metadata", "generation", "score_1", "params", "norm_score_1"]
    base = df[df["params"] == {}]
    assert len(base) == 1 and base["score_1"].iloc[0] == 4.0 and base["norm_score_1"].iloc[0] == 1.0
    check_scores(df, fn, normalize=True, baseline=4.0)


def test_failed_baseline_and_zero_baseline():
    s = quiet(
        objective_function=lambda p: "*" if p == {} else 1.0,
        search_space=SPACE,
        search_config=config(normalize=True),
    )
    with pytest.raises(RuntimeError, match="Baseline measurement"):
        s.start()
    s = quiet(
        objective_function=lambda p: 0 if p == {} else 1.0,
        search_space=SPACE,
        search_config=config(normalize=True),
        exit_on_failure=False,
    )
    df = s.start().get_results()
    assert (df[df["params"] != {}]["norm_score_1"] == INVALID_SCORE).all()


def test_exit_on_failure():
    s = quiet(objective_function=lambda p: INVALID_SCORE, search_space=SPACE, search_config=config())
    with pytest.raises(RuntimeError, match="All objective functions failed in the first gen"):
        s.start()
    s = quiet(
        objective_function=lambda p: INVALID_SCORE,
        search_space=SPACE,
        search_config=config(),
        exit_on_failure=False,
    )
    assert (s.start().get_results()["score_1"] == INVALID_SCORE).all()


def test_wrong_return_type_fails_candidates_with_a_message():
    s = quiet(objective_function=letters, search_space=SPACE, search_config=config())
    with pytest.warns(RuntimeWarning, match="does not match expected types"):
        with pytest.raises(RuntimeError, match="does not match expected types"):
            s.start()
    s = quiet(objective_function=letters, search_space=SPACE, search_config=config(), exit_on_failure=False)
    with pytest.warns(RuntimeWarning):
        s.start()
    errors = [t.user_attrs["error"] for t in s.study.trials]
    assert len(errors) == 12 and all("does not match expected types" in e for e in errors)


@pytest.mark.parametrize("worker", [MultiProcessWorker, IsoMultiProcessWorker])
def test_crash_and_exception_fail_only_their_candidate(worker):
    s = quiet(
        objective_function=crash_on_big_x,
        search_space=SPACE,
        search_config=config(),
        worker_type=worker,
        exit_on_failure=False,
    )
    with pytest.warns(RuntimeWarning):
        df = s.start(num_workers=2).get_results()
    assert len(df) == 12
    for t in s.study.trials:
        x = t.user_attrs["ciq.result"]["params"]["x"]
        if x > 10:
            assert "exit code 3" in t.user_attrs["error"]
        elif x > 5:
            assert "KeyError" in t.user_attrs["error"]
        else:
            assert t.values == [x]


@pytest.mark.parametrize(("worker", "workers"), [("native", 1), ("native", 3), ("isolated", 3)])
def test_timeout_scores_invalid(worker, workers):
    s = quiet(
        objective_function=sleepy,
        search_space=SPACE,
        search_config=config(generations=1),
        worker_type=worker,
        exit_on_failure=False,
    )
    with pytest.warns(RuntimeWarning, match="timed out"):
        df = s.start(num_workers=workers, task_timeout=0.1).get_results()
    assert len(df) == 6 and (df["score_1"] == INVALID_SCORE).all()


def test_async_worker():
    async def fn(p):
        return p["x"]

    s = quiet(
        objective_function=fn, search_space=SPACE, search_config=config(), worker_type=WorkerTypes.ASYNC
    )
    df = s.start().get_results()
    assert len(df) == 12 and all(r["score_1"] == r["params"]["x"] for _, r in df.iterrows())
    s = quiet(objective_function=square, search_space=SPACE, search_config=config(), worker_type=AsyncWorker)
    with pytest.raises(TypeError, match="async def"):
        s.start()


def test_random_invalid_returns_keep_one_score_per_candidate():
    def fn(p):
        return [INVALID_SCORE, float("nan"), float("inf"), 1.0][int(p["x"] * 2) % 4]

    s = quiet(objective_function=fn, search_space=SPACE, search_config=config(), exit_on_failure=False)
    df = s.start(num_workers=2).get_results()
    assert len(df) == 12 and len({str(t.number) for t in s.study.trials}) == 12


def test_worker_types():
    for name, cls in [
        ("native", MultiProcessWorker),
        ("isolated", IsoMultiProcessWorker),
        ("async", AsyncWorker),
    ]:
        assert (
            quiet(
                objective_function=square, search_space=SPACE, search_config=config(), worker_type=name
            ).worker_type
            is cls
        )
    for bad in ["default", "not_valid", "ray"]:
        with pytest.raises(ValueError):
            quiet(objective_function=square, search_space=SPACE, search_config=config(), worker_type=bad)
    with pytest.raises(ValueError, match="num_workers"):
        quiet(objective_function=square, search_space=SPACE, search_config=config()).start(num_workers=0)


def test_bad_spaces():
    with pytest.raises(ValueError, match="literal"):
        quiet(objective_function=square, search_space={"x": 5}, search_config=config())
    with pytest.raises(FileNotFoundError):
        quiet(objective_function=square, search_space=Path("/nonexistent/space.bin"), search_config=config())
    with pytest.raises(ValueError, match="collide"):
        quiet(
            objective_function=square,
            search_space={"a.b": ss.range(0, 2), "a": {"b": ss.range(0, 2)}},
            search_config=config(),
        )


def test_two_objectives_pareto():
    s = quiet(
        objective_function=lambda p: (p["x"] ** 2 + p["y"], p["y"] ** 2 + p["x"]),
        search_space=SPACE,
        search_config=config(num_objectives=2, pool_size=10),
    )
    r = s.start()
    assert list(r.get_results().columns)[2:4] == ["score_1", "score_2"]
    assert r.get_best_result() == r.pareto_front() and len(r.pareto_front()) >= 1


def test_ask_evaluate_tell():
    s = quiet(objective_function=square, search_space=SPACE, search_config=config())
    cands = s.ask()
    assert len(cands) == 6 and [c.param_id for c in cands] == list(range(6))
    scores = s.evaluate(cands[:3])
    with pytest.raises(ValueError, match="not pending"):
        s.evaluate([type(cands[0])(99, {})])
    s.tell(list(reversed(scores)))
    with pytest.raises(ValueError, match="not pending"):
        s.tell(scores[:1])
    s.tell(s.evaluate(cands[3:]))
    assert not s.pending_candidates and len(s.result.get_results()) == 6
    assert s.best_result["score_1"] == min(square(c.params) for c in cands)


def test_storage_resume_and_settings_check(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    first = quiet(
        objective_function=square, search_space=SPACE, search_config=config(), storage=url, study_name="s"
    )
    df1 = first.start().get_results()
    again = quiet(
        objective_function=square,
        search_space=SPACE,
        search_config=config(generations=3),
        storage=url,
        study_name="s",
    )
    assert again.result.get_results().equals(df1)
    df2 = again.start().get_results()
    assert len(df2) == 18 and df2.iloc[:12].equals(df1) and set(df2["generation"]) == {0, 1, 2}
    with pytest.raises(ValueError, match="pool_size"):
        quiet(
            objective_function=square,
            search_space=SPACE,
            search_config=config(pool_size=8),
            storage=url,
            study_name="s",
        )


SHARED = """
import sys, ciq_optuna.compileiq.search_spaces.base as ss
from ciq_optuna.compileiq.ciq import Search
s = Search(lambda p: p["x"] ** 2, {"x": ss.range(0, 200)}, {"generations": 3, "pool_size": 6},
           disable_progress_bar=True, storage=sys.argv[1], study_name="shared", seed=int(sys.argv[2]))
s.start()
"""


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_two_processes_share_one_search(tmp_path, backend, request):
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'shared.db'}"
    else:
        url = request.getfixturevalue("postgres_db_url")
    procs = [subprocess.Popen([sys.executable, "-c", SHARED, url, str(i)]) for i in (1, 2)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    s = quiet(
        objective_function=lambda p: p["x"] ** 2,
        search_space={"x": ss.range(0, 200)},
        search_config={"generations": 3, "pool_size": 6},
        storage=url,
        study_name="shared",
    )
    df = s.result.get_results()
    assert len(df) == 18 and sorted(df["generation"].value_counts().tolist()) == [6, 6, 6]


@pytest.mark.skipif(not Path(PTXAS).exists(), reason="needs ptxas")
def test_ptxas_space_candidates_are_options_files(tmp_path):
    space = [{"config_idx": ss.range(0, 3)}, PtxasSearchSpace(version="13.0", arch="sm_90a")]
    s = quiet(objective_function=square, search_space=space, search_config=config())
    assert s.search_space_resolution_metadata[0]["compiler"] == "ptxas"
    ptx = ROOT / "examples" / "stencil" / "stencil.sm_90a.ptx"
    for user, acf in s.sample(3):
        assert user["config_idx"] in range(4)
        path = save_compiler_config(tmp_path / "c.acf", acf)
        assert path.read_text().split() == options_from_hex(acf)
        proc = subprocess.run(
            [PTXAS, "-arch=sm_90a", "--options-file", str(path), str(ptx), "-o", str(tmp_path / "k.cubin")],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr


def test_progress_bar_shows_best(capsys):
    s = Search(objective_function=square, search_space=SPACE, search_config=config(), seed=3)
    s.start()
    err = capsys.readouterr().err
    assert "Generation 2/2" in err and "best_score=" in err


def test_problem_type_max():
    s = quiet(
        objective_function=square, search_space=SPACE, search_config=config(problem_type=ProblemType.MAX)
    )
    df = s.start().get_results()
    assert s.result.get_best_result()["score_1"] == df["score_1"].max()
    assert s.study.direction.name == "MAXIMIZE"


def test_custom_worker_receives_start_kwargs(tmp_path):
    from ciq_optuna.compileiq.types import Score, Worker

    class SequentialWorker(Worker):
        seen: list = []

        def __init__(self, cache_folder, normalize, tracker=None):
            super().__init__(
                cache_folder, normalize, tracker, respects_num_workers=False, supports_timeout=False
            )

        @classmethod
        def create(cls, cache_folder, normalize, tracker=None):
            return cls(cache_folder, normalize, tracker)

        def run(self, *, function, params_pool, params_ids, num_function_returns=1, **kwargs):
            SequentialWorker.seen.append(kwargs["dummy_arg"])
            out = []
            if self.normalize and self.baseline_score is None:
                self.baseline_score = function({})
                out.append(
                    Score(
                        score=self.baseline_score, norm_score=1.0, params={}, param_id="b", is_baseline=True
                    )
                )
            for pid, p in zip(params_ids, params_pool, strict=True):
                try:
                    raw = function(p)
                except Exception:
                    raw = Worker.invalidate_score(num_function_returns)
                norm = Worker.normalize_scores(raw, self.baseline_score)
                out.append(Score(score=raw, norm_score=norm, params=p, param_id=pid))
            return out

    dump = tmp_path / "dump.csv"
    s = quiet(
        objective_function=lambda p: 2.0 if p == {} else square(p),
        search_space=SPACE,
        search_config=config(normalize=True),
        worker_type=SequentialWorker,
        dump_results=dump,
    )
    df = s.start(dummy_arg=7).get_results()
    assert SequentialWorker.seen == [7, 7] and len(df) == 13 and (df["metadata"] == "").all()
    check_scores(df, square, normalize=True, baseline=2.0)
    assert len(__import__("pandas").read_csv(dump)) == 13


def test_first_generation_priors():
    space = {"x": ss.range(0, 1000, seed_low=100, seed_high=130), "k": ss.literal(1, knockout_prob=0.9)}
    s = quiet(
        objective_function=lambda p: p["x"],
        search_space=space,
        search_config={"generations": 1, "pool_size": 40, "init_with_true_random_threshold": 1.0},
    )
    params = s.start().get_results()["params"]
    assert all(100 <= p["x"] <= 130 for p in params)
    assert sum("k" in p for p in params) < 20


@pytest.mark.skipif(not Path(PTXAS).with_name("nvcc").exists(), reason="needs nvcc")
def test_nvcc_space_candidates_are_options_files(tmp_path):
    from ciq_optuna.compileiq.search_spaces.compilers import NvccSearchSpace

    s = quiet(objective_function=square, search_space=NvccSearchSpace(version="13.0"), search_config=config())
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float* a) { a[threadIdx.x] *= 2.f; }\n")
    (acf,) = s.sample(1)
    path = save_compiler_config(tmp_path / "n.acf", acf)
    nvcc = str(Path(PTXAS).with_name("nvcc"))
    cmd = [nvcc, "-arch=sm_90a", "-c", str(src), "-o", str(tmp_path / "k.o"), "--options-file", str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{options_from_hex(acf)}: {proc.stderr}"


def test_async_timeout_scores_invalid():
    import asyncio

    async def slow(p):
        await asyncio.sleep(2)
        return 1.0

    s = quiet(
        objective_function=slow,
        search_space=SPACE,
        search_config=config(generations=1),
        worker_type="async",
        exit_on_failure=False,
    )
    with pytest.warns(RuntimeWarning, match="timed out"):
        df = s.start(task_timeout=0.1).get_results()
    assert len(df) == 6 and (df["score_1"] == INVALID_SCORE).all()


def test_interrupted_batch_marks_its_trials(tmp_path):
    def stop(p):
        raise KeyboardInterrupt

    s = quiet(objective_function=stop, search_space=SPACE, search_config=config())
    with pytest.raises(KeyboardInterrupt):
        s.start()
    assert {t.state.name for t in s.study.trials} == {"FAIL"}
    assert all("interrupted" in t.user_attrs["error"] for t in s.study.trials)


def test_strings_reach_the_objective_verbatim():
    seen = []

    def fn(p):
        seen.append(p)
        return len(p["s"]) + len(p["j"])

    space = {"s": ss.choice(["a", "bb", "ccc"]), "j": ss.literal('{"key": 10}'), "n": {"x": ss.range(0, 3)}}
    s = quiet(objective_function=fn, search_space=space, search_config=config())
    df = s.start().get_results()
    assert all(p["j"] == '{"key": 10}' and p["s"] in ("a", "bb", "ccc") for p in seen)
    assert df["params"].tolist() == seen


@pytest.mark.parametrize("n", [1, 2])
def test_seed_makes_runs_repeatable(n):
    def fn(p):
        return square(p) if n == 1 else (p["x"], p["y"])

    runs = [
        quiet(objective_function=fn, search_space=SPACE, search_config=config(num_objectives=n, pool_size=8))
        .start()
        .get_results()
        .drop(columns="metadata")
        for _ in range(2)
    ]
    assert runs[0].equals(runs[1])
