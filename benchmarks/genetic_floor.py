"""What the GeneticSampler's proposals pin of its time per trial (issue 10), three measurements:

1. CPU ms per trial in each block of 100 trials of a 1,000-trial study, GeneticSampler and
   NSGA-II round robin (gemm_RTX_3090, in-memory storage, as ``replay.py timing``);
2. how often the nearest-neighbour pick meets a tie at its third nearest trial (the rows of
   numpy's ``argpartition`` whose choice among equal distances decides the pick), and how many
   512-child batches are bred, per dataset;
3. the random draws of one 512-child batch: the legacy ``RandomState`` calls the sampler makes,
   the same uniform stream drawn as raw 32-bit words, and ``numpy.random.Generator``.

Usage: nice -n 5 python benchmarks/genetic_floor.py --seeds 3
"""

from __future__ import annotations

import argparse
import sys
import time
import timeit
import warnings
from pathlib import Path

import numpy as np
import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent))
import replay  # noqa: E402

DATASETS = ("gemm_RTX_3090", "convolution_A100", "dedispersion_MI250X")


def blocks(seeds: int, trials: int = 1000) -> None:
    space = replay.load_space("gemm_RTX_3090")
    res: dict[str, list[np.ndarray]] = {"genetic": [], "nsga2": []}
    for seed in range(seeds):
        for name in res:
            cpu: list[float] = []
            replay.replay(space, replay.build_sampler(name, seed), trials, per_trial_cpu=cpu)
            res[name].append(1000 * np.array(cpu[: trials - trials % 100]).reshape(-1, 100).mean(axis=1))
    print(f"| sampler (CPU ms per trial, median of {seeds} seeds) | "
          + " | ".join(f"trials {100 * i}-{100 * i + 99}" for i in range(trials // 100)) + " |")
    print("|---|" + "---:|" * (trials // 100))
    for name, rows in res.items():
        print(f"| {name} | " + " | ".join(f"{x:.2f}" for x in np.median(rows, axis=0)) + " |")


def ties(trials: int = 1000) -> None:
    from ciq_optuna.samplers import _genetic

    real, breed = np.argpartition, _genetic.GeneticSampler._breed
    count = {"rows": 0, "tie": 0, "batches": 0}

    def counted_breed(self: _genetic.GeneticSampler, *a: object) -> np.ndarray:
        count["batches"] += 1
        return breed(self, *a)

    def counting(a: np.ndarray, kth: int, axis: int = -1, **kw: object) -> np.ndarray:
        if a.ndim == 2 and a.shape[1] > 3 and kth == 2:
            part = np.sort(a, axis=1)
            count["rows"] += len(a)
            count["tie"] += int((part[:, 2] == part[:, 3]).sum())
        return real(a, kth, axis=axis, **kw)

    print("\n| dataset (seed 0, 1,000 trials) | candidate rows scored | with a tie at the third nearest | child batches bred |")
    print("|---|---:|---:|---:|")
    _genetic.np.argpartition = counting
    _genetic.GeneticSampler._breed = counted_breed
    try:
        for dataset in DATASETS:
            count.update(rows=0, tie=0, batches=0)
            replay.replay(replay.load_space(dataset), replay.build_sampler("genetic", 0), trials)
            share = 100 * count["tie"] / max(1, count["rows"])
            print(f"| {dataset} | {count['rows']} | {count['tie']} ({share:.0f} %) | {count['batches']} |")
    finally:
        _genetic.np.argpartition = real
        _genetic.GeneticSampler._breed = breed


def draws(m: int = 512, d: int = 15) -> None:
    rs, gen = np.random.RandomState(0), np.random.default_rng(0)
    bits = rs._bit_generator

    def legacy() -> None:  # what GeneticSampler._breed and _mutate draw per batch
        for _ in range(4):
            rs.randint(0, 5, m)
        for _ in range(7):
            rs.rand(m, d)
        rs.rand(m)
        rs.normal(0.0, 1.0, (m, d))
        rs.normal(0.0, 0.1, (m, d))

    def raw_uniform() -> None:  # the same uniform stream from raw words (rand's conversion)
        for _ in range(7):
            r = bits.random_raw(2 * m * d)
            ((r[0::2] >> 5) * 67108864.0 + (r[1::2] >> 6)) / 9007199254740992.0

    def legacy_uniform() -> None:
        for _ in range(7):
            rs.rand(m, d)

    def generator() -> None:
        for _ in range(4):
            gen.integers(0, 5, m)
        for _ in range(7):
            gen.random((m, d))
        gen.random(m)
        gen.normal(0.0, 1.0, (m, d))
        gen.normal(0.0, 0.1, (m, d))

    print(f"\n| random draws of one batch ({m} children x {d} genes) | CPU microseconds (best of 5 x 50) |")
    print("|---|---:|")
    for label, f in (("legacy RandomState, as the sampler draws them", legacy),
                     ("the 7 uniform draws alone (rand)", legacy_uniform),
                     ("the same 7 uniform draws from random_raw + conversion", raw_uniform),
                     ("numpy.random.Generator, the same calls (another stream)", generator)):
        t = min(timeit.Timer(f, timer=time.thread_time).repeat(number=50, repeat=5)) / 50
        print(f"| {label} | {1e6 * t:.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")
    blocks(args.seeds)
    ties()
    draws()


if __name__ == "__main__":
    main()
