"""Why the harness interleaves, uses medians and corrects for many candidates: a CPU-only demo.

Runs the real statistics code (ciq_optuna.gpu.stats, ciq_optuna.gpu.winners) on synthetic timers,
no GPU: ``python examples/gpu/synthetic_demo.py``. Deterministic (fixed seeds).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from ciq_optuna.gpu.stats import StoppingRule, measure_interleaved, summarize
from ciq_optuna.gpu.winners import Comparison, ValidationSettings, validate_acfs


class Device:
    """Each launch is one time step; duration = base * (1 + drift * step) * noise, with spikes."""

    def __init__(self, drift=0.0, noise=0.0, spike_p=0.0, seed=0):
        self.step, self.drift, self.noise, self.spike_p = 0, drift, noise, spike_p
        self.rng = np.random.default_rng(seed)

    def arm(self, base):
        def run():
            self.step += 1
            t = base * (1 + self.drift * self.step) * (1 + self.noise * self.rng.standard_normal())
            return t * 20 if self.rng.random() < self.spike_p else t

        return run


def main() -> None:
    rule = StoppingRule(warmup=0, min_repeats=200, max_repeats=200, rel_precision=0.0)
    seq = Device(drift=1e-4, noise=0.002, seed=1)
    a = measure_interleaved({"a": seq.arm(1.0)}, rule).samples["a"]
    b = measure_interleaved({"b": seq.arm(1.0)}, rule).samples["b"]
    inter = Device(drift=1e-4, noise=0.002, seed=1)
    m = measure_interleaved({"a": inter.arm(1.0), "b": inter.arm(1.0)}, rule)
    print("1. identical kernels, device slowing by 0.01 % per launch, 200 launches each:")
    print(f"   sequential  (all A, then all B): median ratio B/A = {np.median(b) / np.median(a):.4f}")
    print(
        f"   interleaved (ABBA...)          : median ratio B/A = "
        f"{np.median(m.samples['b']) / np.median(m.samples['a']):.4f}"
    )

    dev = Device(noise=0.002, spike_p=0.03, seed=2)
    m = measure_interleaved({"base": dev.arm(1.0), "cand": dev.arm(0.97)}, rule)
    raw = np.mean(m.samples["cand"]) / np.mean(m.samples["base"])
    s = {k: summarize(v) for k, v in m.samples.items()}
    print("2. candidate 3 % faster, 3 % of launches hit by a 20x spike:")
    print(f"   ratio of raw means = {raw:.4f}; ratio of medians = {s['cand'].median / s['base'].median:.4f}")
    print(
        f"   ratio of means without outliers = {s['cand'].mean / s['base'].mean:.4f} "
        f"({s['base'].n_outliers} + {s['cand'].n_outliers} outliers set aside)"
    )

    print("3. 20 candidates with no real effect, 10 families, significance rule only:")
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / f"c{i}.acf" for i in range(20)]
        for p in paths:
            p.write_text("synthetic\n")
        for method in ("none", "bonferroni", "holm"):
            kept = 0
            for family in range(10):
                rng = np.random.default_rng(family)

                def measure(_path, rng=rng):
                    return Comparison(
                        list(1 + 0.01 * rng.standard_normal(50)), list(1 + 0.01 * rng.standard_normal(50))
                    )

                settings = ValidationSettings(
                    sessions=1,
                    correction=method,
                    min_improvement=-1,
                    min_effect=-1e9,
                    max_spread_increase=1e9,
                )
                kept += len(
                    validate_acfs(paths, measure=measure, settings=settings, write_records=False).kept
                )
            print(f"   correction={method:10s}: {kept} of 200 null candidates kept")


if __name__ == "__main__":
    main()
