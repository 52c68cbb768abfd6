"""An adoption rule against Optuna's samplers on replayed spaces: a candidate GeneticSampler
variant beside the base (same seeds, one run) and the best Optuna sampler per cell (another file).

Prints, for the deciding datasets: the candidate's and the base's scores at 50/100/200/400 with
the best Optuna sampler and ``qmc_default`` per cell, each one's shortfall to the best Optuna
sampler, the paired difference of the mean over the cells (per seed, with its standard error),
the largest drop at 100 and 400, and the share of runs flat from 200 to 400 above the optimum.

Usage::

    python benchmarks/replay_goal_rule.py RESULTS --new 'genetic:g0q=1' \\
        --optuna 'benchmarks/results/replay_so.jsonl.gz#random,tpe,tpe_indep,nsga2,qmc,qmc_default' \\
        --datasets convolution_A100,dedispersion_MI250X,gemm_RTX_3090
"""

from __future__ import annotations

import argparse

import numpy as np
from replay import _load_rows, at_budget, methodology_score, so_curves

CELLS = (50, 100, 200, 400)


def scores(rows: list[dict]) -> dict[tuple[str, str], dict[int, list[float]]]:
    """(dataset, sampler) -> seed -> [score at each of CELLS, flat above the optimum (0/1)]."""
    out: dict = {}
    cache: dict = {}
    for r, sp, st, curve in so_curves(rows):
        cells = [methodology_score(r["dataset"], st, sp.cartesian, at_budget(curve, b), b, cache) for b in CELLS]
        flat = at_budget(curve, 200) == at_budget(curve, 400) and at_budget(curve, 400) > st[0]
        out.setdefault((r["dataset"], r["sampler"]), {})[r["seed"]] = cells + [float(flat)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("--new", required=True)
    ap.add_argument("--base", default="genetic")
    ap.add_argument("--optuna", required=True, help="results file of Optuna's samplers (FILE#a,b)")
    ap.add_argument("--datasets", required=True, help="comma-separated deciding datasets")
    args = ap.parse_args()
    mine, theirs = scores(_load_rows(args.results)), scores(_load_rows([args.optuna]))
    datasets = args.datasets.split(",")
    optuna_names = sorted({s for (_, s) in theirs})

    def mean(table: dict, d: str, s: str) -> np.ndarray:
        return np.mean(np.array(list(table[(d, s)].values())), axis=0)

    print("| dataset | budget | base | new | qmc_default | best Optuna | base short | new short |")
    print("|---|---|---|---|---|---|---|---|")
    ok_qmc, ok_short, drops = [], [], []
    for d in datasets:
        base, new = mean(mine, d, args.base), mean(mine, d, args.new)
        opt = {s: mean(theirs, d, s) for s in optuna_names if (d, s) in theirs}
        for i, b in enumerate(CELLS):
            name, best = max(((s, m[i]) for s, m in opt.items()), key=lambda t: t[1])
            sb, sn = max(0.0, best - base[i]), max(0.0, best - new[i])
            ok_short.append(sn <= sb)
            q = opt["qmc_default"][i] if "qmc_default" in opt else float("nan")
            if b == 50:
                ok_qmc.append(new[i] > q)
            if b in (100, 400):
                drops.append(new[i] - base[i])
            print(f"| {d} | {b} | {base[i]:.3f} | {new[i]:.3f} | {q:.3f} | {best:.3f} ({name}) | {sb:.3f} | {sn:.3f} |")
    seeds = sorted(set.intersection(*(set(mine[(d, s)]) for d in datasets for s in (args.base, args.new))))
    diff = [
        np.mean([mine[(d, args.new)][k][i] - mine[(d, args.base)][k][i] for d in datasets for i in range(len(CELLS))])
        for k in seeds
    ]
    se = float(np.std(diff, ddof=1) / np.sqrt(len(diff)))
    flat = {s: float(np.mean([mine[(d, s)][k][-1] for d in datasets for k in seeds])) for s in (args.base, args.new)}
    n_runs = len(seeds) * len(datasets)
    print(f"\nseeds {seeds[0]}-{seeds[-1]} ({len(seeds)}), datasets {', '.join(datasets)}")
    print(f"1. ahead of qmc_default at 50: {sum(ok_qmc)}/{len(ok_qmc)}")
    print(f"2. shortfall to the best Optuna sampler not larger than the base's: {sum(ok_short)}/{len(ok_short)} cells")
    print(f"3. mean over the {len(datasets) * len(CELLS)} cells, new - base (paired): {np.mean(diff):+.4f} +- {se:.4f}")
    print(f"4. largest drop at 100/400: {min(drops):+.3f}")
    print(
        f"5. flat 200->400 above the optimum: base {flat[args.base]:.3f} ({round(flat[args.base] * n_runs)}/{n_runs}), "
        f"new {flat[args.new]:.3f} ({round(flat[args.new] * n_runs)}/{n_runs})"
    )


if __name__ == "__main__":
    main()
