"""Where a sampler's CPU per trial goes by study-size window: its own Optuna hooks (the sampler's
share) against the rest of ask + suggest + tell (Optuna's own), for several samplers whose
studies take turns 100 trials at a time in one process (the replay of ``benchmarks/replay.py
timing``, in-memory storage).

Usage: nice -n 19 python benchmarks/genetic_hooks.py --dataset gemm_RTX_3090 --rounds 7 --seed0 930
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent))
import replay  # noqa: E402

HOOKS = ("infer_relative_search_space", "sample_relative", "sample_independent", "before_trial", "after_trial")


def _hooked(sampler: optuna.samplers.BaseSampler, run: list) -> list[float]:
    """``sampler`` with ``time.thread_time`` around its Optuna hooks (on the instance); returns
    the per-trial hook seconds (``run[0]``: the replay, whose trials so far index the list)."""
    per_trial: list[float] = []

    def wrap(f):  # type: ignore[no-untyped-def]
        def wrapper(*a, **k):  # type: ignore[no-untyped-def]
            t = time.thread_time()
            try:
                return f(*a, **k)
            finally:
                i = len(run[0].cpu)
                per_trial.extend([0.0] * (i + 1 - len(per_trial)))
                per_trial[i] += time.thread_time() - t

        return wrapper

    for name in HOOKS:
        setattr(sampler, name, wrap(getattr(sampler, name)))
    return per_trial


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="gemm_RTX_3090")
    ap.add_argument("--samplers", default="genetic,nsga2")
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seed0", type=int, default=0, help="seed of the first round")
    ap.add_argument("--windows", default="0,100,300,600", help="first trials of the windows")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")
    space = replay.load_space(args.dataset)
    names = args.samplers.split(",")
    starts = [int(x) for x in args.windows.split(",")]
    spans = [*zip(starts, [*starts[1:], args.trials]), (0, args.trials)]
    res: dict[str, dict[tuple, list[float]]] = {n: collections.defaultdict(list) for n in names}
    for r in range(args.rounds):
        runs, hooks = {}, {}
        for n in names:
            holder: list = [None]
            sampler = replay.build_sampler(n, args.seed0 + r)
            hooks[n] = _hooked(sampler, holder)
            runs[n] = holder[0] = replay._Run(space, sampler)
        for block, start in enumerate(range(0, args.trials, 100)):
            for n in names if block % 2 == 0 else names[::-1]:
                runs[n].steps(min(100, args.trials - start))
        for n in names:
            cpu = np.array(runs[n].cpu)
            own = np.zeros(len(cpu))
            own[: min(len(cpu), len(hooks[n]))] = hooks[n][: len(cpu)]
            for a, b in spans:
                res[n][(a, b, "whole")].append(1000 * cpu[a:b].mean())
                res[n][(a, b, "hooks")].append(1000 * own[a:b].mean())
                res[n][(a, b, "rest")].append(1000 * (cpu[a:b] - own[a:b]).mean())
    heads = [f"{a}-{b - 1}" for a, b in spans[:-1]] + ["study"]
    print(f"CPU ms per trial, {args.dataset}, {args.trials} trials, median of {args.rounds} rounds (seeds "
          f"{args.seed0}-{args.seed0 + args.rounds - 1}); in brackets: the median of the per-round ratios to {names[-1]}")
    print()
    print("| sampler | part | " + " | ".join(heads) + " |")
    print("|---|---|" + "---:|" * len(heads))
    ref = names[-1]
    for n in names:
        for part in ("whole", "hooks", "rest"):
            cells = []
            for a, b in spans:
                v = float(np.median(res[n][(a, b, part)]))
                ratio = np.median(np.divide(res[n][(a, b, part)], res[ref][(a, b, part)]))
                cells.append(f"{v:.3f}" + (f" ({ratio:.2f})" if n != ref else ""))
            print(f"| {n} | {part} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
