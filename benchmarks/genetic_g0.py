"""What generation 0 leaves to the later search: replays GeneticSampler variants on kernel_tuner
spaces (as ``replay.py``) and reports, per dataset and variant, the population size, the spread
of generation 0 (mean number of distinct values per gene among its complete trials, and their
mean pairwise Hamming distance as a share of the genes), the restarts started before 200 and
from 200 to 400 trials, the trial of the last improvement, and the runs flat from 200 to 400
above the optimum.

Usage::

    nice -n 19 python benchmarks/genetic_g0.py --datasets gemm_RTX_3090 --seed0 380 --seeds 40 \\
        --samplers 'genetic,genetic:g0b=0.25+pf=1' --jobs 2 --out benchmarks/results/g0_diag.jsonl
"""

from __future__ import annotations

import argparse
import json
import warnings
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import optuna
from replay import _Run, build_sampler, load_space


def _job(args: tuple) -> dict:
    dataset, name, seed, budget = args
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")
    space = load_space(dataset)
    sampler = build_sampler(name, seed)
    run = _Run(space, sampler, 1)
    starts: set[int] = set()
    for _ in range(budget):
        if not run.step():
            break
        _, start = sampler.stagnation(run.study)
        if start is not None:
            starts.add(start)
    pool = int(sampler.population_size or 1)
    trials = run.study.trials
    g0 = [t for t in trials[:pool] if t.state == optuna.trial.TrialState.COMPLETE]
    rows = np.array([[t.params[k] for k in space.keys] for t in g0], dtype=object)
    distinct = float(np.mean([len(set(rows[:, j])) for j in range(len(space.keys))])) if len(g0) else 0.0
    ham = []
    for i in range(len(g0)):
        for j in range(i + 1, len(g0)):
            ham.append(float(np.mean(rows[i] != rows[j])))
    vals = [np.inf if v is None else v for v in run.out]
    best = np.minimum.accumulate(vals)
    last = int(np.nonzero(np.diff(np.concatenate([[np.inf], best])) < 0)[0][-1]) if np.isfinite(best[-1]) else -1
    opt = float(space.sorted_times[0])
    return {
        "dataset": dataset,
        "sampler": name,
        "seed": seed,
        "pool": pool,
        "g0_complete": len(g0),
        "g0_distinct": distinct,
        "g0_hamming": float(np.mean(ham)) if ham else 0.0,
        "restarts_before_200": sum(1 for s in starts if s * pool < 200),
        "restarts_200_400": sum(1 for s in starts if 200 <= s * pool < budget),
        "last_improvement": last,
        "flat_above": bool(len(best) >= budget and best[199] == best[budget - 1] and best[budget - 1] > opt),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", required=True)
    ap.add_argument("--samplers", required=True)
    ap.add_argument("--seed0", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--budget", type=int, default=400)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    jobs = [
        (d, s, seed, args.budget)
        for seed in range(args.seed0, args.seed0 + args.seeds)
        for s in args.samplers.split(",")
        for d in args.datasets.split(",")
    ]
    with get_context("fork").Pool(args.jobs) as pool:
        rows = list(pool.imap_unordered(_job, jobs))
    Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows))
    print("| dataset | sampler | pool | gen-0 complete | distinct values per gene | Hamming | restarts <200 | restarts 200-400 | last improvement (median) | flat above optimum |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for d in args.datasets.split(","):
        for s in args.samplers.split(","):
            g = [r for r in rows if r["dataset"] == d and r["sampler"] == s]
            print(
                f"| {d} | `{s}` | {g[0]['pool']} | {np.mean([r['g0_complete'] for r in g]):.1f} "
                f"| {np.mean([r['g0_distinct'] for r in g]):.2f} | {np.mean([r['g0_hamming'] for r in g]):.2f} "
                f"| {np.mean([r['restarts_before_200'] for r in g]):.2f} | {np.mean([r['restarts_200_400'] for r in g]):.2f} "
                f"| {np.median([r['last_improvement'] for r in g]):.0f} | {sum(r['flat_above'] for r in g)} |"
            )


if __name__ == "__main__":
    main()
