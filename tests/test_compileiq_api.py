"""CompileIQ-compatible API, pure logic: the DSL, SearchConfiguration, scores, results
(behaviours 1-15 of section 8 of docs/compileiq-api.md)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

import ciq_optuna.compileiq.search_spaces.base as ss
from ciq_optuna.compileiq.results import SearchResult, calculate_pareto_front
from ciq_optuna.compileiq.types import (
    INVALID_SCORE,
    MultiScoreComparison,
    ProblemType,
    Score,
    SearchConfiguration,
    Worker,
    validate_scores,
)
from ciq_optuna.compileiq.utils.helpers import (
    flatten_nested_dict,
    load_compiler_config,
    restore_nested_search_space,
    save_compiler_config,
)


# -- 1-8: the DSL ---------------------------------------------------------------------------
def test_range_fields_and_inclusive_end():
    r = ss.range(start=0, end=10, step=2)
    assert (r.type, r.low, r.high, r.step) == ("range", 0, 10, 2)
    assert ss.range(0.0, 1.0, 0.01).step == 0.01
    values = ss.range(1.0, 20.0, 0.5).values()
    assert len(values) == 39 and values[0] == 1.0 and values[-1] == 20.0 and 1.5 in values
    assert ss.range(0, 8, 2).values() == [0, 2, 4, 6, 8]
    assert ss.range(0, 9, 2).values() == [0, 2, 4, 6, 8]
    assert ss.range(0.1, 0.7, 0.2).values() == [0.1, 0.3, 0.5, 0.7]


@pytest.mark.parametrize(("args", "match"), [((10, 5), "proper range"), ((5, 5), "proper range")])
def test_range_rejects_empty(args, match):
    with pytest.raises(ValueError, match=match):
        ss.range(*args)


@pytest.mark.parametrize("step", [-1, 0])
def test_range_rejects_non_positive_step(step):
    with pytest.raises(ValueError, match="positive step"):
        ss.range(0, 10, step=step)


def test_range_seed_window():
    r = ss.range(0, 100, seed_low=20, seed_high=80)
    assert (r.seed_low, r.seed_high) == (20, 80)
    with pytest.raises(ValueError, match="seed_low"):
        ss.range(10, 100, seed_low=5)
    with pytest.raises(ValueError, match="seed_high"):
        ss.range(0, 100, seed_high=120)
    with pytest.raises(ValueError, match="greater than or equal"):
        ss.range(0, 100, seed_low=50, seed_high=40)


def test_choice():
    assert ss.choice([True, False, 1]).vals == [1, 0, 1]
    assert ss.choice([42]).vals == [42]
    assert ss.choice(np.array([1.5, 2.5])).vals == [1.5, 2.5]
    assert all(type(v) is float for v in ss.choice(np.array([1.5, 2.5])).vals)
    with pytest.raises(ValueError):
        ss.choice([])


def test_literal():
    with pytest.raises(ValueError, match="must be a str, int, or float"):
        ss.literal(lambda: 1)
    assert ss.literal(True).value == 1
    assert ss.literal('{"key": 10}').value == '{"key": 10}'


def test_log_sampling():
    c = ss.log_sampling(0.001, 1.0, total=5)
    assert c.type == "enum" and len(c.vals) == 5
    assert all(0.001 <= v <= 1.0 for v in c.vals) and c.vals[0] == 0.001 and c.vals[-1] == 1.0


def test_knockout():
    assert ss.range(0, 4).knockout_threshold is None
    assert ss.literal(1, knockout_prob=0.3).knockout_threshold == pytest.approx(0.7)
    assert ss.choice([1], knockout_prob=0.3).knockout_prob == pytest.approx(0.3)
    with pytest.raises(TypeError):
        ss.literal(1, knockout_prob=True)
    with pytest.raises(ValueError):
        ss.literal(1, knockout_prob=1.5)


@pytest.mark.parametrize(
    "nested",
    [
        {},
        {"a": 1, "b": "x"},
        {"l1": {"l2": {"l3": {"l4": {"l5": 3.5}}}}},
        {"learning_rate": {"max_depth": 1, "min_child_weight": 2}},
        {"a": [1, 2], "b": {"c": None, "d": True}, "e": {}},
    ],
)
def test_nested_round_trip(nested):
    assert restore_nested_search_space(flatten_nested_dict(nested)) == nested


def test_compiler_config_files(tmp_path):
    text = "-O1 --maxrregcount=64"
    path = save_compiler_config(tmp_path / "c.acf", text.encode().hex())
    assert path.read_text() == text
    assert load_compiler_config(path) == text.encode().hex()
    with pytest.raises(ValueError, match="hex string"):
        save_compiler_config(tmp_path / "d.acf", "not hex")


# -- 9-11: SearchConfiguration --------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs",
    [
        {"generations": 0},
        {"generations": 1, "pool_size": 4},
        {"generations": 1, "cull_size": 3},
        {"generations": 1, "x": 1},
    ],
)
def test_config_rejects(kwargs):
    with pytest.raises(ValidationError):
        SearchConfiguration(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"pool_size": 32, "cull_size": 32}, "must be less than pool_size"),
        ({"pool_size": 20, "cull_size": 14, "num_objectives": 3}, "too small"),
        ({"pool_size": 6, "cull_size": 2, "num_objectives": 2}, "too small"),
        ({"pool_size": 6, "num_objectives": 2}, "too small"),
    ],
)
def test_config_messages(kwargs, match):
    with pytest.raises(ValidationError, match=match):
        SearchConfiguration(generations=1, **kwargs)


def test_config_derivations():
    c = SearchConfiguration(generations=5)
    assert (c.pool_size, c.cull_size, c.mutate_rate, c.problem_type) == (32, 24, 0.25, ProblemType.MIN)
    assert (SearchConfiguration(generations=1, pool_size=50, cull_size=20).cull_size) == 50 - 30
    c = SearchConfiguration(generations=1, pool_size=40)
    assert c.cull_size % 2 == 0 and c.pool_size - c.cull_size >= 3
    assert SearchConfiguration(generations=1, pool_size=6, cull_size=2).survivors == 4
    assert [SearchConfiguration(generations=1, num_objectives=n).pool_size for n in (1, 3, 4, 5, 10)] == [
        32,
        32,
        36,
        44,
        84,
    ]


def test_objective_weights():
    with pytest.raises(ValidationError, match="must be equal to num_objectives"):
        SearchConfiguration(generations=1, num_objectives=2, objective_weights=[1.0])
    with pytest.raises(ValidationError, match="must add up to 1.0"):
        SearchConfiguration(generations=1, num_objectives=2, objective_weights=[0.5, 0.6])
    SearchConfiguration(generations=1, num_objectives=3, objective_weights=[0.1, 0.2, 0.7])


@pytest.mark.parametrize("problem", [ProblemType.MIN, ProblemType.MAX])
def test_legacy_round_trip(tmp_path, problem):
    c = SearchConfiguration(problem_type=problem, generations=3, pool_size=40, cull_size=20, mutate_rate=0.4)
    path = tmp_path / "search.config"
    path.write_text(c.to_legacy())
    back = SearchConfiguration.from_legacy(path)
    assert (back.problem_type, back.pool_size, back.cull_size, back.mutate_rate) == (problem, 40, 20, 0.4)


def test_legacy_details(tmp_path):
    assert "(qualitative . #f)" in SearchConfiguration(generations=1, normalize=True).to_legacy()
    with pytest.raises(ValueError, match="extension .config"):
        SearchConfiguration.from_legacy(tmp_path / "x.json")
    bad = tmp_path / "bad.config"
    bad.write_text("((generations . 1+))")
    with pytest.raises(ValueError, match="Invalid value") as info:
        SearchConfiguration.from_legacy(bad)
    assert isinstance(info.value.__cause__, SyntaxError)
    odd = tmp_path / "odd.config"
    odd.write_text("((generations . 2) (whatever . 3))")
    with pytest.warns(UserWarning, match="whatever is going to be ignored"):
        assert SearchConfiguration.from_legacy(odd).generations == 2


# -- 12-13: scores ---------------------------------------------------------------------------
@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_non_finite_is_invalid(value):
    assert validate_scores(value, 1) == INVALID_SCORE
    assert Score(score=value).failed


@pytest.mark.parametrize(
    ("ret", "n"), [("not_a_score", 1), (True, 1), ("1.0", 1), (None, 1), ((1.0,), 1), ((1, 2, 3), 2)]
)
def test_wrong_types(ret, n):
    with pytest.raises(ValueError, match="does not match expected types"):
        validate_scores(ret, n)


def test_score_shapes():
    assert validate_scores("*", 3) == ("*", "*", "*")
    s = Score(score=(1.0, "*"), num_objectives=2)
    assert s.failed and s.score == (1.0, "*")
    assert Score(score=1.0, norm_score="*").failed
    assert validate_scores(np.float32(1.5), 1) == 1.5 and type(validate_scores(np.int64(2), 1)) is float
    assert validate_scores(np.array([1.0, 2.0]), 2) == (1.0, 2.0)


def test_normalize_scores():
    assert Worker.normalize_scores(10, 5) == 2.0
    assert Worker.normalize_scores([10, 20], [5, 4]) == [2, 5]
    assert Worker.normalize_scores([10, 20], [0, 4]) == ["*", 5]
    with pytest.raises(RuntimeError, match="baseline"):
        Worker.normalize_scores(10, None)


# -- 14-15: results --------------------------------------------------------------------------
def _result(scores, problem=ProblemType.MIN, norm=None):
    n = len(scores[0])
    data = {"metadata": [""] * len(scores), "generation": [0] * len(scores)}
    for i in range(n):
        data[f"score_{i + 1}"] = [s[i] for s in scores]
    data["params"] = [{"i": k} for k in range(len(scores))]
    if norm is not None:
        for i in range(n):
            data[f"norm_score_{i + 1}"] = [s[i] for s in norm]
    return SearchResult(problem_type=problem, df_results=pd.DataFrame(data))


def test_best_single():
    r = _result([(3.0,), (1.0,), ("*",), (5.0,), (1.0,)])
    assert r.get_best_result()["params"] == {"i": 1}
    assert r.get_best_result() == r.get_results().iloc[1].to_dict()
    assert _result([(3.0,), (1.0,), ("*",), (5.0,)], ProblemType.MAX).get_best_result()["score_1"] == 5.0
    assert _result([(3.0,), (1.0,)], norm=[(1.0,), (9.0,)]).get_best_result()["params"] == {"i": 0}


def test_best_avg_and_invalid():
    r = _result([(1.0, 10.0), (4.0, 4.0), (0.0, "*")])
    assert r.get_best_result(MultiScoreComparison.AVERAGE)["params"] == {"i": 1}
    assert r.get_best_result("stddev")["params"] == {"i": 1}
    with pytest.raises(ValueError, match="All resulting scores are marked as invalid"):
        _result([("*",), ("*",)]).get_best_result()
    for row in r.pareto_front():
        assert "*" not in row.values()


def test_score_columns_exact():
    df = _result([(1.0,)]).get_results().assign(baseline_score_1=[2.0])
    r = SearchResult(df_results=df)
    assert r.score_columns == ["score_1"] and r.num_scores == 1 and not r.is_normalized


def test_save_from_csv_round_trip(tmp_path):
    r = _result([(3.0, 1), (1.5, 2), ("*", 3)])
    r.get_results()["metadata"] = ['{"pid": 1}', "", '{"pid": 2}']
    path = r.save(tmp_path / "r.csv")
    back = SearchResult.from_csv(path, ProblemType.MIN, clear_duplicates=False)
    pd.testing.assert_frame_equal(back.get_results(), r.get_results())
    with pytest.raises(ValueError, match="score_"):
        SearchResult.from_dataframe(pd.DataFrame({"baseline_score_1": [1.0], "params": ["{}"]}))


def test_clear_duplicates():
    r = _result([(1.0,), (1.0,), ("*",)])
    r.get_results()["params"] = [{"a": 1}, {"a": 1}, {"a": 2}]
    df = r.clear_duplicates().get_results()
    assert len(df) == 2 and np.isnan(df["score_1"].iloc[1])


@pytest.mark.parametrize(
    ("points", "problem", "mask"),
    [
        ([(1, 1), (5, 5), (1, 5)], ProblemType.MIN, [True, False, True]),
        ([(1, 10), (5, 5), (10, 1)], ProblemType.MIN, [True, True, True]),
        ([(2, 2), (2, 2), (2, 2)], ProblemType.MIN, [True, True, True]),
        ([(1, 2), (2, 1), (2, 2)], ProblemType.MIN, [True, True, True]),
        ([(5, 5), (1, 1), (5, 1)], ProblemType.MAX, [True, False, True]),
    ],
)
def test_pareto_mask(points, problem, mask):
    assert calculate_pareto_front(np.array(points), problem).tolist() == mask


def test_pareto_front():
    r = _result([(1, 1), (5, 5), (1, 5), ("*", 0)])
    assert [row["params"] for row in r.pareto_front()] == [{"i": 0}, {"i": 2}]
    assert r.get_best_result() == r.pareto_front()
    with pytest.raises(ValueError):
        _result([(1,)]).pareto_front()
