"""Where GeneticSampler's CPU time per trial goes, at a commit and in this tree, round robin in
one process: the replay of ``benchmarks/replay.py timing`` (gemm_RTX_3090 unless ``--dataset``, in-memory storage)
with ``time.thread_time`` around the sampler's main methods (inclusive: the rows overlap; the
timers add a little to every row).

Usage: nice -n 10 python benchmarks/genetic_parts.py --against 173bc19 --trials 1000 --rounds 3

``--hooks nsga2,random``: also a table of the time spent in each sampler's Optuna hooks (the
sampler's own share of a trial) against the rest (Optuna's own), those samplers in the same
round robin.

``--interleave 50 --from 300``: the two studies of a round take turns 50 trials at a time (which
goes first alternates), the parts and the whole trial (without the table look-up, as
``replay.py timing`` counts it) counted from trial 300 on; the two must propose the same trials.
``--seed0``: the seed of the first round (round ``r`` uses seed ``seed0 + r``).
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
    "_knn_score": "`_knn_score` (nearest-neighbour score, its distances included)",
    "_distances": "`_distances` (all calls)",
    "_children": "`_children` (elite, batches of 512 children)",
    "_bred": "`_bred` (the same, with the batch's keys and code check)",
    "_elite": "`_elite` (the niche elite)",
    "_niche_elite": "`_niche_elite` (the niche pass when the top rows changed)",
    "_pair_distances": "`_pair_distances` (the top rows' distances to each other)",
    "_local": "`_local` (local search: unseen neighbours of the best trials)",
    "_local_moves": "`_local_moves` (one trial's neighbourhood, unseen and filtered)",
    "_value_counts": "`_value_counts` (value statistics, the first generations' pick and the explorers)",
    "_breed": "`_breed` (a batch of 512 children)",
    "_explore_pick": "`_explore_pick` (restart exploration)",
    "_fail_risk": "`_fail_risk`",
    "_order": "`_order`",
    "_learn_activation": "`_learn_activation` (conditional parameters)",
    "_add_row": "`_add_row` (a finished trial's row, failure counts, key)",
    "_decode": "`_decode` (the plan's parameters)",
    "after_trial": "`after_trial` (the generation attributes)",
    "sample_independent": "`sample_independent` (each suggest)",
}


_COUNTING = [True]  # whether the part timers count now (``--from``)


def _timed(cls: type, acc: collections.Counter) -> None:
    for name in PARTS:
        f = cls.__dict__.get(name)
        if f is None:
            continue

        def wrapper(*a, _f=f, _name=name, **k):  # type: ignore[no-untyped-def]
            if not _COUNTING[0]:
                return _f(*a, **k)
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
    ap.add_argument("--interleave", type=int, default=0, metavar="K", help="the two studies take turns K trials at a time")
    ap.add_argument("--from", dest="start", type=int, default=0, metavar="T", help="with --interleave: count from trial T")
    ap.add_argument("--dataset", default="gemm_RTX_3090", help="the replayed space")
    ap.add_argument("--seed0", type=int, default=0, help="seed of the first round")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")
    from ciq_optuna.samplers import GeneticSampler

    samplers = {args.against: replay.genetic_at(args.against), "this tree": GeneticSampler}
    acc = {label: collections.Counter() for label in samplers}
    for label, cls in samplers.items():
        _timed(cls, acc[label])
    space = replay.load_space(args.dataset)
    res: dict[str, dict[str, list[float]]] = {label: collections.defaultdict(list) for label in samplers}
    if args.interleave:
        _interleaved(args, samplers, acc, space)
        return
    others = [name for name in args.hooks.split(",") if name]
    hooks: dict[str, dict[str, list[float]]] = {label: collections.defaultdict(list) for label in [*samplers, *others]}
    for r in range(args.rounds):
        for label in [*samplers, *others]:
            seed = args.seed0 + r
            sampler = samplers[label](seed=seed) if label in samplers else replay.build_sampler(label, seed)
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


def _interleaved(args: argparse.Namespace, samplers: dict, acc: dict, space: replay.Space) -> None:
    """``--interleave``: the studies of a round take turns; CPU ms per trial from trial ``--from``."""
    res: dict[str, dict[str, list[float]]] = {label: collections.defaultdict(list) for label in samplers}
    for r in range(args.rounds):
        runs = {label: replay._Run(space, cls(seed=args.seed0 + r)) for label, cls in samplers.items()}
        _COUNTING[0] = False
        for run in runs.values():
            run.steps(args.start)
        for label in samplers:
            acc[label].clear()
        _COUNTING[0] = True
        for block, start in enumerate(range(args.start, args.trials, args.interleave)):
            turn = list(runs.items()) if block % 2 else list(runs.items())[::-1]
            for _, run in turn:
                run.steps(min(args.interleave, args.trials - start))
        outs = [run.out for run in runs.values()]
        assert all(out == outs[0] for out in outs), "the two trees proposed different trials"
        for label, run in runs.items():
            n = len(run.cpu) - args.start
            res[label]["whole trial (ask + suggest + tell)"].append(1000 * sum(run.cpu[args.start :]) / n)
            for name, text in PARTS.items():
                res[label][text].append(1000 * acc[label][name] / n)
    labels = list(samplers)
    print(f"| part (CPU ms per trial, trials {args.start}-{args.trials - 1} of {args.trials}, taking turns "
          f"{args.interleave} at a time, median of {args.rounds}) | {labels[0]} | {labels[1]} | difference |")
    print("|---|---:|---:|---:|")
    for row in ["whole trial (ask + suggest + tell)", *PARTS.values()]:
        a, b = (float(np.median(res[label][row])) for label in labels)
        diff = float(np.median(np.subtract(res[labels[1]][row], res[labels[0]][row])))
        print(f"| {row} | {a:.3f} | {b:.3f} | {diff:+.3f} |")


if __name__ == "__main__":
    main()
