"""The figures an adoption rule reads from replay results: per sampler and dataset the methodology
score at 50/100/200/400 and its 4-cell mean, the mean over every dataset's cells, the runs flat
from 200 to 400 evaluations above the optimum, and the differences to a base sampler.

Usage::

    python benchmarks/replay_rule.py --base genetic benchmarks/results/replay_dev_s18q.jsonl.gz
"""

from __future__ import annotations

import argparse

import numpy as np
from replay import _load_rows, so_table

CELLS = (50, 100, 200, 400)
GOAL_CELLS = (50, 100, 200, 400)


def goals(table: dict, optuna_table: dict) -> None:
    """Per dataset, each sampler's score at 50/100/200/400 beside the best Optuna sampler per cell
    (issue 10's goals: 0.5 at 100, 0.85 at 400, ahead of every Optuna sampler from 50)."""
    print("| dataset | sampler | " + " | ".join(str(b) for b in GOAL_CELLS) + " | flat above optimum |")
    print("|---|---|" + "---|" * (len(GOAL_CELLS) + 1))
    for d in sorted(table):
        for s, cell in table[d].items():
            scores = " | ".join(f"{np.mean(cell[b]['score']):.3f}" for b in GOAL_CELLS)
            print(f"| {d} | `{s}` | {scores} | {int(sum(cell['flat_below']))}/{len(cell['flat_below'])} |")
        if d in optuna_table:
            best = []
            for b in GOAL_CELLS:
                name, score = max(
                    ((o, float(np.mean(c[b]["score"]))) for o, c in optuna_table[d].items() if not o.startswith("genetic")),
                    key=lambda t: t[1],
                )
                best.append(f"{score:.3f} ({name})")
            print(f"| {d} | best Optuna sampler | " + " | ".join(best) + " | |")


def paired(rows: list[dict], base: str) -> None:
    """Per sampler: the mean over seeds of its all-cell mean minus the base's on the same seed,
    with its standard error (how far the seed sets alone move a difference)."""
    from replay import at_budget, best_curve, load_space, methodology_score

    per: dict[tuple[str, int], list[float]] = {}
    expectations: dict = {}
    for r in rows:
        sp = load_space(r["dataset"])
        st = sp.sorted_times
        curve = best_curve(r["results"], float(st[-1]))
        for b in CELLS:
            score = methodology_score(r["dataset"], st, sp.cartesian, at_budget(curve, b), b, expectations)
            per.setdefault((r["sampler"], r["seed"]), []).append(score)
    for s in sorted({k[0] for k in per} - {base}):
        d = [np.mean(per[(s, seed)]) - np.mean(per[(base, seed)]) for (x, seed) in per if x == s and (base, seed) in per]
        print(f"`{s}` - `{base}`: {np.mean(d):+.3f} +- {np.std(d, ddof=1) / np.sqrt(len(d)):.3f} (standard error, {len(d)} seeds)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="result files (FILE#a,b: only samplers a, b)")
    ap.add_argument("--base", default="genetic", help="the sampler the others are compared with")
    ap.add_argument("--optuna", help="with this results file of Optuna's samplers: the goals table instead")
    ap.add_argument("--paired", action="store_true", help="per-seed differences to the base instead")
    args = ap.parse_args()
    if args.paired:
        paired(_load_rows(args.results), args.base)
        return
    table = so_table(_load_rows(args.results), CELLS)
    if args.optuna:
        goals(table, so_table(_load_rows([args.optuna]), GOAL_CELLS))
        return
    datasets = sorted(table)
    samplers = sorted({s for d in datasets for s in table[d]}, key=lambda s: (s != args.base, s))
    short = {d: d.replace("convolution", "conv").replace("dedispersion", "dedisp") for d in datasets}
    print("| sampler | " + " | ".join(short[d] for d in datasets) + " | mean | vs base | flat above optimum | seeds |")
    print("|---|" + "---|" * (len(datasets) + 4))
    base_mean = None
    for s in samplers:
        if not all(s in table[d] for d in datasets):
            continue
        parts, means, flats, seeds = [], [], [], []
        for d in datasets:
            cell = table[d][s]
            scores = [float(np.mean(cell[b]["score"])) for b in CELLS]
            means.append(float(np.mean(scores)))
            flats.append(int(sum(cell["flat_below"])))
            seeds.append(len(cell["flat_below"]))
            parts.append("/".join(f"{x:.2f}" for x in scores) + f" ({means[-1]:.3f})")
        mean = float(np.mean(means))
        if s == args.base:
            base_mean, base_means = mean, means
        vs = "" if base_mean is None or s == args.base else (
            f"{mean - base_mean:+.3f}; worst space {min(m - b for m, b in zip(means, base_means, strict=True)):+.3f}"
        )
        print(
            f"| `{s}` | " + " | ".join(parts) + f" | {mean:.3f} | {vs} | "
            + "/".join(map(str, flats)) + f" = {sum(flats)} | {min(seeds)}-{max(seeds)} |"
        )


if __name__ == "__main__":
    main()
