"""Where GeneticSampler's CPU per trial goes, by study-size window: the replay of
``benchmarks/replay.py timing`` (in-memory storage) with a timer around every method of the
sampler and a few module functions, each method's EXCLUSIVE CPU time (its own, less the timed
methods it calls; the numpy and Optuna calls it makes count as its own), per trial of each window.
The timers add about a microsecond per call, so the rows are a little above the untimed cost.

``--profile A-B``: instead, cProfile of trials A to B-1 (the trials before run untimed), the
sampler's functions by cumulative time and everything by own time.

Usage: nice -n 19 python benchmarks/genetic_windows.py --dataset gemm_RTX_3090 --trials 1000 --seed 3
       nice -n 19 python benchmarks/genetic_windows.py --dataset gemm_RTX_3090 --profile 0-300
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import inspect
import pstats
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent))
import replay  # noqa: E402

_FUNCTIONS = ("_keys", "_unseen", "_key", "mutate", "breed", "repairs")  # of the sampler's module, if there


def _timed(sampler: object) -> tuple[dict, dict]:
    """Wrap the sampler's methods (on the instance) and the module functions above with
    exclusive CPU timers; returns the accumulators (seconds, calls) by name."""
    acc: dict[str, float] = collections.defaultdict(float)
    cnt: dict[str, int] = collections.defaultdict(int)
    stack = [0.0]
    clock = time.thread_time

    def wrap(name: str, f: Callable) -> Callable:
        def timed(*a, **k):  # type: ignore[no-untyped-def]
            stack.append(0.0)
            t0 = clock()
            try:
                return f(*a, **k)
            finally:
                dt = clock() - t0
                inner = stack.pop()
                acc[name] += dt - inner
                cnt[name] += 1
                stack[-1] += dt

        return timed

    for name, _ in inspect.getmembers(type(sampler), inspect.isfunction):
        if not name.startswith("__"):
            setattr(sampler, name, wrap(name, getattr(sampler, name)))
    mod = sys.modules[type(sampler).__module__]
    for name in _FUNCTIONS:
        if hasattr(mod, name):
            setattr(mod, name, wrap(name, getattr(mod, name)))
    return acc, cnt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="gemm_RTX_3090")
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sampler", default="genetic", help="a name of replay.py (genetic, genetic@REV)")
    ap.add_argument("--windows", default="0,100,300,600", help="first trials of the windows")
    ap.add_argument("--top", type=int, default=18, help="rows per window")
    ap.add_argument("--profile", help="A-B: cProfile of trials A to B-1 instead")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")
    space = replay.load_space(args.dataset)
    sampler = replay.build_sampler(args.sampler, args.seed)
    run = replay._Run(space, sampler)
    if args.profile:
        a, b = (int(v) for v in args.profile.split("-"))
        run.steps(a)
        prof = cProfile.Profile()
        prof.enable()
        run.steps(b - a)
        prof.disable()
        stats = pstats.Stats(prof)
        stats.sort_stats("cumulative").print_stats("samplers/_", 40)
        stats.sort_stats("tottime").print_stats(40)
        return
    acc, cnt = _timed(sampler)
    edges = [int(v) for v in args.windows.split(",")] + [args.trials]
    print(f"{args.sampler} on {args.dataset}, seed {args.seed}: exclusive CPU microseconds per trial "
          "(calls per trial) of the top methods, by window of the study")
    for a, b in zip(edges[:-1], edges[1:]):
        acc.clear()
        cnt.clear()
        c0 = time.thread_time()
        run.steps(b - a)
        whole = time.thread_time() - c0
        top = sorted(acc.items(), key=lambda kv: -kv[1])[: args.top]
        print(f"\n### trials {a}-{b - 1}: whole trial {1e3 * whole / (b - a):.3f} ms, "
              f"in the timed methods {1e3 * sum(acc.values()) / (b - a):.3f} ms\n")
        print("| method | us per trial | calls per trial |\n|---|---:|---:|")
        for name, sec in top:
            print(f"| `{name}` | {1e6 * sec / (b - a):.0f} | {cnt[name] / (b - a):.2f} |")


if __name__ == "__main__":
    main()
