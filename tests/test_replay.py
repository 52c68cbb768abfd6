"""The replay benchmark's scoring: exact random-search expectation, curves, hypervolume."""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "replay.py"
_spec = importlib.util.spec_from_file_location("replay", _PATH)
replay = importlib.util.module_from_spec(_spec)
sys.modules["replay"] = replay
_spec.loader.exec_module(replay)


def test_random_expectation_matches_enumeration() -> None:
    # 7 configurations: 4 valid times, 3 invalid; enumerate every subset of size B.
    times = np.array([1.0, 2.0, 5.0, 9.0])
    n = 7
    for b in (1, 2, 3, 4, 6):
        bests = []
        for subset in itertools.combinations(range(n), b):
            valid = [times[i] for i in subset if i < len(times)]
            bests.append(min(valid) if valid else times[-1])
        assert replay.random_expectation(times, n, b) == pytest.approx(np.mean(bests))


def test_random_expectation_large_space_is_finite_and_decreasing() -> None:
    times = np.sort(np.random.RandomState(0).uniform(1, 10, 5000))
    e = [replay.random_expectation(times, 80000, b) for b in (25, 50, 100, 400)]
    assert all(math.isfinite(x) for x in e)
    assert e == sorted(e, reverse=True)
    assert times[0] < e[-1] < times[-1]


def test_best_curve_counts_failures_against_the_budget() -> None:
    curve = replay.best_curve([None, 5.0, None, 3.0, 4.0], worst=9.0)
    assert curve.tolist() == [9.0, 5.0, 5.0, 3.0, 3.0]
    assert replay.at_budget(curve, 2) == 5.0
    assert replay.at_budget(curve, 400) == 3.0  # a run that stopped early keeps its best


def test_hypervolume_2d() -> None:
    pts = np.array([[0.0, 1.0], [1.0, 0.0], [0.5, 0.5], [2.0, 2.0]])
    assert replay.hv2d(pts, np.array([1.5, 1.5])) == pytest.approx(1.5 * 0.5 + 1.0 * 0.5 + 0.5 * 0.5)
    assert replay.hv2d(np.array([[2.0, 2.0]]), np.array([1.0, 1.0])) == 0.0


@pytest.mark.skipif(not (replay.DATA_DIR / "convolution_A100.json.gz").exists(), reason="dataset missing")
def test_replay_scores_on_a_real_space() -> None:
    space = replay.load_space("convolution_A100")
    assert space.cartesian == 10240 and len(space.table) == 4201
    rows = []
    for name in ("random", "genetic"):
        results, _ = replay.replay(space, replay.build_sampler(name, 0), 60)
        assert len(results) == 60
        rows.append(
            {
                "dataset": space.name,
                "sampler": name,
                "seed": 0,
                "n_objectives": 1,
                "results": results,
                "seconds": 1.0,
            }
        )
    table = replay.so_table(rows, budgets=(25, 50))
    for name in ("random", "genetic"):
        cell = table["convolution_A100"][name][50]
        assert cell["score"][0] <= 1.0
        assert 0 < cell["frac"][0] <= 1.0
        assert 0 <= cell["fail"][0] <= 1.0


def test_timing_interleaved_runs_take_turns_k_trials_at_a_time(tmp_path, monkeypatch) -> None:
    values = {"a": [1, 2, 3, 4], "b": [1, 2, 3]}
    table = {(a, b): (float(a * b), 0.0) for a in values["a"] for b in values["b"] if a * b != 6}
    space = replay.Space(name="toy", keys=["a", "b"], values=values, table=table, cartesian=12)
    monkeypatch.setattr(replay, "load_space", lambda name: space)
    turns: list[int] = []
    step = replay._Run.step

    def counted(run):  # type: ignore[no-untyped-def]
        turns.append(id(run))
        return step(run)

    monkeypatch.setattr(replay._Run, "step", counted)
    out = tmp_path / "t.jsonl"
    replay.main(["timing", "--trials", "8", "--repeat", "1", "--samplers", "random,nsga2", "--interleave", "3",
                 "--out", str(out)])
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["sampler"], r["trials"], r["interleaved"]) for r in recs] == [("random", 8, 3), ("nsga2", 8, 3)]
    assert all(r["cpu_ms_per_trial"] > 0 for r in recs)
    a, b = turns[0], turns[3]
    assert a != b and turns == [a] * 3 + [b] * 3 + [a] * 3 + [b] * 3 + [a] * 2 + [b] * 2  # blocks of 3, then 2


def test_timing_windows_are_the_means_of_their_trials(tmp_path, capsys) -> None:
    cpu = [0.001] * 3 + [0.002] * 4 + [0.004] * 2
    assert replay._windows(cpu, [0, 3, 7]) == pytest.approx({"0-2": 1.0, "3-6": 2.0, "7-8": 4.0})
    assert list(replay._windows(cpu[:5], [0, 3, 7])) == ["0-2", "3-4"]  # a window past the end is left out
    out = tmp_path / "t.jsonl"
    recs = []
    for rep, (gen, base) in enumerate([(2.0, 4.0), (3.0, 3.0)]):
        for name, ms in (("genetic", gen), ("genetic@base", base), ("nsga2", 1.0)):
            recs.append({"sampler": name, "dataset": "toy", "trials": 9, "repeat": rep, "ms_per_trial": ms,
                         "ms_per_trial_last100": ms, "cpu_ms_per_trial": ms, "cpu_ms_per_trial_last100": ms,
                         "cpu_ms_windows": {"0-2": ms, "3-8": 2 * ms}})
    out.write_text("".join(json.dumps(r) + "\n" for r in recs))
    replay.main(["report", "--results", "/dev/null", "--timing", str(out), "--base", "genetic@base"])
    text = capsys.readouterr().out
    assert "| genetic | toy | 9 | 2.500 **2.50** (2.00, 3.00) |" in text  # against nsga2, round by round
    assert "| genetic | toy | 9 | 2.500 **0.75** (0.50, 1.00) |" in text  # against the base
