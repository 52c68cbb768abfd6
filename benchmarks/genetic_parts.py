"""Where GeneticSampler's CPU time per trial goes, at a commit and in this tree, round robin in
one process: the replay of ``benchmarks/replay.py timing`` (gemm_RTX_3090, in-memory storage)
with ``time.thread_time`` around the sampler's main methods (inclusive: the rows overlap; the
timers add a little to every row).

Usage: nice -n 10 python benchmarks/genetic_parts.py --against 173bc19 --trials 1000 --rounds 3

``--hooks nsga2,random``: also a table of the time spent in each sampler's Optuna hooks (the
sampler's own share of a trial) against the rest (Optuna's own), those samplers in the same
round robin.
"""

from __future__ import annotations

import argparse
import collections
import functools
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent))
import replay  # noqa: E402

PARTS = {
    "before_trial": "`before_trial` (the sampler's planning)",
    "_sync": "`_sync` (new trials into the genome matrix)",
    "_pick": "`_pick` (score of the children)",
    "_distances": "`_distances` (all calls)",
    "_children": "`_children` (elite, batches of 512 children)",
    "_explore_pick": "`_explore_pick` (restart exploration)",
    "_fail_risk": "`_fail_risk`",
    "_order": "`_order`",
}


def _timed(cls: type, acc: collections.Counter) -> None:
    for name in PARTS:
        f = cls.__dict__.get(name)
        if f is None:
            continue

        def wrapper(*a, _f=f, _name=name, **k):  # type: ignore[no-untyped-def]
            t = time.thread_time()
            try:
                return _f(*a, **k)
            finally:
                acc[_name] += time.thread_time() - t

        setattr(cls, name, functools.wraps(f)(wrapper))


HOOKS = ("infer_relative_search_space", "sample_relative", "sample_independent", "before_trial", "after_trial")


def _hooked(sampler: optuna.samplers.BaseSampler, acc: collections.Counter) -> optuna.samplers.BaseSampler:
    """``sampler`` with ``time.thread_time`` around its Optuna hooks (on the instance)."""
    for name in HOOKS:
        f = getattr(sampler, name)

        def wrapper(*a, _f=f, **k):  # type: ignore[no-untyped-def]
            t = time.thread_time()
            try:
                return _f(*a, **k)
            finally:
                acc["hooks"] += time.thread_time() - t

        setattr(sampler, name, wrapper)
    return sampler


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", required=True, help="commit of the sampler to compare with")
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hooks", default="", help="other samplers of replay.py to time by hooks, e.g. nsga2,random")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")
    from ciq_optuna.samplers import GeneticSampler

    samplers = {args.against: replay.genetic_at(args.against), "this tree": GeneticSampler}
    acc = {label: collections.Counter() for label in samplers}
    for label, cls in samplers.items():
        _timed(cls, acc[label])
    space = replay.load_space("gemm_RTX_3090")
    res: dict[str, dict[str, list[float]]] = {label: collections.defaultdict(list) for label in samplers}
    others = [name for name in args.hooks.split(",") if name]
    hooks: dict[str, dict[str, list[float]]] = {label: collections.defaultdict(list) for label in [*samplers, *others]}
    for r in range(args.rounds):
        for label in [*samplers, *others]:
            sampler = samplers[label](seed=r) if label in samplers else replay.build_sampler(label, r)
            if label in samplers:
                acc[label].clear()
            own = collections.Counter()
            c0 = time.thread_time()
            out, _ = replay.replay(space, _hooked(sampler, own) if others else sampler, args.trials)
            whole = 1000 * (time.thread_time() - c0) / len(out)
            hooks[label]["whole"].append(whole)
            hooks[label]["hooks"].append(1000 * own["hooks"] / len(out))
            if label not in samplers:
                continue
            res[label]["whole trial (ask + suggest + tell)"].append(whole)
            for name, text in PARTS.items():
                res[label][text].append(1000 * acc[label][name] / len(out))
    print(f"| part (CPU ms per trial, {args.trials} trials, median of {args.rounds}) | {args.against} | this tree |")
    print("|---|---:|---:|")
    for row in ["whole trial (ask + suggest + tell)", *PARTS.values()]:
        a, b = (np.median(res[label][row]) for label in samplers)
        print(f"| {row} | {a:.2f} | {b:.2f} |")
    if others:
        print()
        print(f"| sampler (CPU ms per trial, {args.trials} trials, median of {args.rounds}) | whole trial | "
              "in the sampler's hooks | the rest (Optuna's own) |")
        print("|---|---:|---:|---:|")
        for label, row in hooks.items():
            whole, own = np.median(row["whole"]), np.median(row["hooks"])
            rest = np.median(np.subtract(row["whole"], row["hooks"]))
            print(f"| {label} | {whole:.2f} | {own:.2f} | {rest:.2f} |")


if __name__ == "__main__":
    main()
