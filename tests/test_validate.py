"""Validation of winners: Welch + correction + effect size, records next to the ACFs (CPU, synthetic samples)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ciq_optuna.acf import Acf, write_acf
from ciq_optuna.errors import CiqError
from ciq_optuna.gpu.errors import CorrectnessError
from ciq_optuna.gpu.winners import (
    Comparison,
    ValidationSettings,
    adjust_pvalues,
    cohen_d,
    record_path,
    validate_acfs,
)


def _acf(tmp_path, name, flags):
    acf = Acf(
        compiler="ptxas",
        compiler_version="13.0.88",
        arch="sm_90a",
        flags=flags,
        controls={},
        space={"name": "ptxas", "version": 1},
        objectives=[{"metric": "time_ms", "direction": "minimize"}],
    )
    return write_acf(tmp_path / f"{name}.acf", acf)


class SyntheticMeasure:
    """Stands in for the GPU: per-ACF true speed-up, Gaussian noise, fresh RNG stream per call."""

    def __init__(self, speedups, noise=0.01, n=100, seed=0, fail=(), bimodal=()):
        self.speedups = speedups
        self.noise, self.n = noise, n
        self.rng = np.random.default_rng(seed)
        self.fail, self.bimodal = set(fail), set(bimodal)
        self.calls = []

    def __call__(self, path):
        name = path.stem
        self.calls.append(name)
        if name in self.fail:
            raise CorrectnessError("wrong result: output 0 (seed 1): 3 of 10 elements differ")
        base = 1.0 + self.noise * self.rng.standard_normal(self.n)
        cand = (1.0 - self.speedups[name]) + self.noise * self.rng.standard_normal(self.n)
        if name in self.bimodal:
            cand = cand + np.where(self.rng.random(self.n) < 0.3, 0.06, 0.0)
        return Comparison(list(base), list(cand), {"gpu": "synthetic"})


def test_holm_and_bonferroni_adjustments():
    assert adjust_pvalues([0.01, 0.04, 0.03], "holm") == pytest.approx([0.03, 0.06, 0.06])
    assert adjust_pvalues([0.01, 0.04, 0.03], "bonferroni") == pytest.approx([0.03, 0.12, 0.09])
    assert adjust_pvalues([0.5, 0.9], "none") == [0.5, 0.9]


def test_cohen_d_uses_the_mean_of_variances():
    assert cohen_d([1.0, 3.0], [0.0, 2.0]) == pytest.approx(1 / np.sqrt(2))


def test_keeps_a_real_gain_and_rejects_noise_tiny_and_worse(tmp_path):
    names = {"fast": 0.03, "same": 0.0, "tiny": 0.004, "worse": -0.02}
    paths = [_acf(tmp_path, n, ["-O3"]) for n in names]
    measure = SyntheticMeasure(names, noise=0.005, n=200, seed=1)
    report = validate_acfs(paths, measure=measure)
    by = {r.acf.split("/")[-1][:-4]: r for r in report.candidates}
    assert [r.acf for r in report.kept] == [str(paths[0])]
    assert by["fast"].improvement == pytest.approx(0.03, abs=0.003)
    assert "not significant" in by["same"].reason
    assert "improvement 0." in by["tiny"].reason and "< 1%" in by["tiny"].reason
    assert "not significant" in by["worse"].reason and by["worse"].cohen_d < 0
    rec = json.loads(record_path(paths[0]).read_text())
    assert rec["decision"] == "KEPT" and rec["candidates_compared"] == 4
    assert rec["acf"]["compiler_version"] == "13.0.88" and rec["acf"]["flags"] == ["-O3"]
    assert len(rec["samples"]["baseline"]) == 3 * 200  # three sessions pooled
    assert rec["statistics"]["p_adjusted"] < 0.05
    assert rec["environment"]["sessions"] == [{"gpu": "synthetic"}] * 3
    assert rec["environment"]["host"]["scipy"]


def test_correction_controls_false_positives_among_many_null_candidates(tmp_path):
    names = {f"null{i}": 0.0 for i in range(20)}
    paths = [_acf(tmp_path, n, []) for n in names]
    loose = ValidationSettings(sessions=1, min_improvement=-1.0, min_effect=-1e9, max_spread_increase=1e9)
    kept = {"none": 0, "holm": 0}
    for family in range(10):
        for method in kept:
            s = ValidationSettings(**{**loose.__dict__, "correction": method})
            report = validate_acfs(
                paths, measure=SyntheticMeasure(names, n=50, seed=family), settings=s, write_records=False
            )
            kept[method] += len(report.kept)
    assert kept["none"] >= 5  # ~5 % of 200 null comparisons look "significant"
    assert kept["holm"] <= 2


def test_failed_measurement_rejects_with_reason_and_is_not_counted(tmp_path):
    names = {"good": 0.05, "broken": 0.10}
    paths = [_acf(tmp_path, n, []) for n in names]
    measure = SyntheticMeasure(names, fail={"broken"})
    report = validate_acfs(paths, measure=measure, settings=ValidationSettings(sessions=2))
    good, broken = report.candidates
    assert good.kept
    assert not broken.kept and broken.reason.startswith("measurement failed: wrong result: output 0")
    assert measure.calls.count("broken") == 1  # not measured again after failing
    assert json.loads(record_path(paths[1]).read_text())["candidates_compared"] == 1


def test_sessions_rotate_the_order_of_candidates(tmp_path):
    names = {"a": 0.0, "b": 0.0, "c": 0.0}
    paths = [_acf(tmp_path, n, []) for n in names]
    measure = SyntheticMeasure(names, n=5)
    validate_acfs(paths, measure=measure, settings=ValidationSettings(sessions=3), write_records=False)
    assert measure.calls == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]


def test_a_gain_with_a_wider_spread_is_rejected(tmp_path):
    names = {"jittery": 0.05}
    paths = [_acf(tmp_path, "jittery", [])]
    report = validate_acfs(paths, measure=SyntheticMeasure(names, noise=0.005, bimodal={"jittery"}))
    assert not report.candidates[0].kept
    assert "spread" in report.candidates[0].reason


def test_maximize_direction_keeps_higher_values(tmp_path):
    names = {"higher": -0.05}  # candidate values 5 % above the baseline
    paths = [_acf(tmp_path, "higher", [])]
    s = ValidationSettings(direction="maximize", metric="gflops")
    report = validate_acfs(paths, measure=SyntheticMeasure(names), settings=s)
    assert report.candidates[0].kept
    assert report.candidates[0].improvement == pytest.approx(0.05, abs=0.005)


def test_mapping_results_and_user_errors(tmp_path):
    path = _acf(tmp_path, "m", [])
    report = validate_acfs(
        [path], measure=lambda p: {"baseline": [1.0, 1.01, 0.99] * 10, "candidate": [0.9, 0.91, 0.89] * 10}
    )
    assert report.candidates[0].kept
    assert "KEPT" in report.format_table()
    with pytest.raises(CiqError, match="ACF not found: .*nope.acf"):
        validate_acfs([tmp_path / "nope.acf"], measure=lambda p: {})
    with pytest.raises(CiqError, match="unknown correction"):
        ValidationSettings(correction="fdr")


def test_gpu_measure_builds_in_a_temporary_folder_removed_with_it(tmp_path, monkeypatch):
    """The compared binaries (real ptxas, no GPU needed to build them) live in a folder of the
    measure's own, gone with it, unless the caller names one."""
    import gc
    from pathlib import Path

    from ciq_optuna.gpu.validate import GpuAcfMeasure

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    ptx = Path(__file__).resolve().parents[1] / "examples" / "stencil" / "stencil.sm_90a.ptx"
    measure = GpuAcfMeasure(None, ptx, arch="sm_90a")
    cubin = measure._build([], "sm_90a", "baseline")
    folder = measure.workdir
    assert cubin.parent == folder and folder.parent == tmp_path and cubin.stat().st_size > 0
    del measure
    gc.collect()
    assert not folder.exists()
    kept = GpuAcfMeasure(None, ptx, arch="sm_90a", workdir=tmp_path / "mine")
    (tmp_path / "mine").mkdir()
    kept._build([], "sm_90a", "baseline")
    del kept
    gc.collect()
    assert (tmp_path / "mine" / "baseline.cubin").exists()
