"""Statistics of the GPU harness, checked on the CPU with synthetic timers (no GPU involved)."""

from __future__ import annotations

import numpy as np
import pytest

from ciq_optuna.gpu.stats import (
    StoppingRule,
    measure_interleaved,
    median_ci,
    outlier_mask,
    relative_halfwidth,
    round_order,
    summarize,
)


class SyntheticDevice:
    """A fake device clock: every launch takes one time step; durations drift linearly with it.

    ``duration = base * (1 + drift * step) + noise``, with optional outlier spikes and a bimodal
    component, so drift, outliers and multi-modal noise can be reproduced exactly.
    """

    def __init__(self, drift=0.0, noise=0.0, spike_p=0.0, spike=10.0, bimodal_p=0.0, bimodal=0.0, seed=0):
        self.step = 0
        self.drift, self.noise = drift, noise
        self.spike_p, self.spike = spike_p, spike
        self.bimodal_p, self.bimodal = bimodal_p, bimodal
        self.rng = np.random.default_rng(seed)

    def arm(self, base: float):
        def run() -> float:
            self.step += 1
            t = base * (1 + self.drift * self.step)
            if self.noise:
                t += self.rng.normal(0, self.noise * base)
            if self.bimodal_p and self.rng.random() < self.bimodal_p:
                t += self.bimodal * base
            if self.spike_p and self.rng.random() < self.spike_p:
                t *= self.spike
            return t

        return run


FIXED = StoppingRule(warmup=0, min_repeats=200, max_repeats=200, rel_precision=0.0)


def test_median_ci_covers_true_median_at_stated_confidence():
    rng = np.random.default_rng(1)
    trials = 2000
    hits = 0
    for _ in range(trials):
        x = rng.exponential(1.0, size=61)  # skewed: true median ln 2
        lo, hi = median_ci(x, 0.95)
        hits += lo <= np.log(2) <= hi
    assert 0.93 <= hits / trials <= 0.99


def test_relative_halfwidth_shrinks_with_more_samples():
    rng = np.random.default_rng(2)
    x = 1.0 + 0.05 * rng.standard_normal(4000)
    assert relative_halfwidth(x[:4000]) < relative_halfwidth(x[:400]) / 2


def test_outlier_mask_flags_spikes_only():
    rng = np.random.default_rng(3)
    x = 1.0 + 0.01 * rng.standard_normal(500)
    x[[10, 200, 333]] = [5.0, 3.0, 0.2]
    mask = outlier_mask(x, k=5.0)
    assert set(np.flatnonzero(mask)) == {10, 200, 333}


def test_outlier_mask_flags_nothing_when_spread_unknown():
    x = [1.0] * 10 + [2.0, 3.0]
    assert not outlier_mask(x).any()


def test_summary_keeps_raw_samples_but_excludes_outliers():
    clean = list(np.linspace(0.98, 1.02, 39))
    s = summarize([*clean, 50.0], percentile=90)
    assert s.n == 40 and s.n_outliers == 1
    assert s.samples[-1] == 50.0
    assert s.maximum == pytest.approx(1.02)
    assert s.mean == pytest.approx(1.0)
    assert s.percentile_value == pytest.approx(np.percentile(clean, 90))


def test_a_second_mode_is_not_treated_as_outliers():
    rng = np.random.default_rng(9)
    x = np.where(rng.random(300) < 0.3, 1.2, 1.0) + 0.001 * rng.standard_normal(300)
    assert not outlier_mask(x).any()


def test_round_order_mirrors_on_odd_rounds():
    assert round_order(["a", "b", "c"], 0) == ["a", "b", "c"]
    assert round_order(["a", "b", "c"], 1) == ["c", "b", "a"]


def test_interleaving_cancels_linear_drift_that_sequential_measurement_does_not():
    # Identical kernels; the device slows down by 0.01 % per launch (thermal drift).
    seq = SyntheticDevice(drift=1e-4)
    a = measure_interleaved({"a": seq.arm(1.0)}, FIXED).samples["a"]
    b = measure_interleaved({"b": seq.arm(1.0)}, FIXED).samples["b"]
    sequential_ratio = np.median(b) / np.median(a)
    dev = SyntheticDevice(drift=1e-4)
    m = measure_interleaved({"a": dev.arm(1.0), "b": dev.arm(1.0)}, FIXED)
    interleaved_ratio = np.median(m.samples["b"]) / np.median(m.samples["a"])
    assert sequential_ratio > 1.015  # 200 launches later: ~2 % slower, a phantom regression
    assert abs(interleaved_ratio - 1) < 1e-3
    assert abs(np.mean(m.samples["b"]) / np.mean(m.samples["a"]) - 1) < 1e-12  # ABBA: exact for means


def test_interleaving_finds_a_real_two_percent_gain_under_drift():
    dev = SyntheticDevice(drift=2e-4, noise=0.005, seed=4)
    m = measure_interleaved({"base": dev.arm(1.0), "cand": dev.arm(0.98)}, FIXED)
    ratio = np.median(m.samples["cand"]) / np.median(m.samples["base"])
    assert ratio == pytest.approx(0.98, abs=0.003)


def test_stops_at_precision_when_noise_is_low():
    dev = SyntheticDevice(noise=0.001, seed=5)
    rule = StoppingRule(warmup=3, min_repeats=20, max_repeats=1000, rel_precision=0.005)
    m = measure_interleaved({"a": dev.arm(1.0), "b": dev.arm(1.1)}, rule)
    assert m.stop_reason == "precision"
    assert m.rounds == 20
    assert len(m.samples["a"]) == len(m.samples["b"]) == 20
    assert dev.step == 2 * (20 + 3)


def test_runs_to_cap_when_noise_is_high():
    dev = SyntheticDevice(noise=0.2, seed=6)
    rule = StoppingRule(warmup=0, min_repeats=20, max_repeats=150, rel_precision=0.005)
    m = measure_interleaved({"a": dev.arm(1.0)}, rule)
    assert m.stop_reason == "max_repeats" and m.rounds == 150


def test_time_cap_uses_the_given_clock():
    ticks = iter(range(10_000))
    rule = StoppingRule(warmup=0, min_repeats=1, max_repeats=1000, rel_precision=0.0, max_seconds=50)
    m = measure_interleaved({"a": lambda: 1.0}, rule, clock=lambda: float(next(ticks)))
    assert m.stop_reason == "max_seconds" and m.rounds == 51


def test_bimodal_noise_does_not_fake_precision():
    # Half the launches land in a slow mode 20 % above the fast one: the median is not pinned
    # down, and the distribution-free interval says so instead of stopping early.
    dev = SyntheticDevice(noise=0.001, bimodal_p=0.5, bimodal=0.2, seed=7)
    rule = StoppingRule(warmup=0, min_repeats=20, max_repeats=300, rel_precision=0.005)
    m = measure_interleaved({"a": dev.arm(1.0)}, rule)
    assert m.stop_reason == "max_repeats"
    assert summarize(m.samples["a"]).rel_ci_halfwidth > 0.005


def test_median_resists_outliers_that_wreck_the_mean():
    dev = SyntheticDevice(noise=0.002, spike_p=0.03, spike=20.0, seed=8)
    m = measure_interleaved({"base": dev.arm(1.0), "cand": dev.arm(0.97)}, FIXED)
    raw_mean_ratio = np.mean(m.samples["cand"]) / np.mean(m.samples["base"])
    s = m.summaries()
    assert s["cand"].median / s["base"].median == pytest.approx(0.97, abs=0.003)
    assert s["cand"].mean / s["base"].mean == pytest.approx(0.97, abs=0.003)  # outliers dropped
    assert abs(raw_mean_ratio - 0.97) > 0.01  # the naive mean is fooled
    assert s["cand"].n_outliers > 0 and len(s["cand"].samples) == 200


def test_rule_rejects_inconsistent_bounds():
    with pytest.raises(ValueError):
        StoppingRule(min_repeats=10, max_repeats=5)
