"""Runs flat from 200 to 400 evaluations above the optimum, diagnosed from a replay results file.

For every such run: the best at 200 (score, how many configurations are better), whether it is a
local optimum of the one-gene and of the two-gene neighbourhood (every parameter changed to each
of its other values, then every pair), how much of those neighbourhoods the run evaluated by 200
and by 400 (valid configurations, matched by their measured time), and how many GeneticSampler
restarts began between 200 and 400 (derived as the sampler derives them: from the last
improvement, the pool size and the default restart constants).  Usage::

    python benchmarks/replay_flat.py benchmarks/results/replay_decide_s23q.jsonl.gz --sampler genetic:g0q=0.65
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import replay  # noqa: E402

from ciq_optuna.samplers import _genetic  # noqa: E402


def pool_size(space: replay.Space) -> int:
    """The GeneticSampler's default pool size for a space of categoricals."""
    return _genetic.default_pool_size(len(space.values[k]) for k in space.keys)


def moves(space: replay.Space, cfg: tuple, depth: int) -> list[tuple]:
    """The configurations that differ from ``cfg`` in exactly ``depth`` parameters."""
    keys = space.keys
    out = []
    for genes in itertools.combinations(range(len(keys)), depth):
        choices = [[v for v in space.values[keys[j]] if v != cfg[j]] for j in genes]
        for vals in itertools.product(*choices):
            c = list(cfg)
            for j, v in zip(genes, vals, strict=True):
                c[j] = v
            out.append(tuple(c))
    return out


def restarts_between(results: list, pool: int, lo: int, hi: int) -> int:
    """Restart generations that begin at trials ``lo`` to ``hi - 1`` (``_stagnation_at``)."""
    best, last = math.inf, -1
    for i, x in enumerate(results):
        if x is not None and x < best:
            best, last = x, i
    first = last // pool + 1 + _genetic._STALL_GENS
    return sum(lo <= g * pool < hi for g in range(first, hi // pool + 1, _genetic._EPOCH_GENS))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--sampler", default="genetic")
    ap.add_argument("--seeds", default="", help="first:last+1 (default: all)")
    args = ap.parse_args()
    lo_hi = [int(x) for x in args.seeds.split(":")] if args.seeds else None
    rows = [
        r
        for r in replay._load_rows([args.results])
        if r["sampler"] == args.sampler and r["n_objectives"] == 1 and (lo_hi is None or lo_hi[0] <= r["seed"] < lo_hi[1])
    ]
    by_ds: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_ds[r["dataset"]].append(r)
    exp: dict = {}
    for ds in sorted(by_ds):
        sp = replay.load_space(ds)
        st = sp.sorted_times
        by_time = {t: c for c, (t, _) in sp.table.items()}
        pool = pool_size(sp)
        flat = []
        for r in by_ds[ds]:
            curve = replay.best_curve(r["results"], float(st[-1]))
            if curve[199] == curve[399] and curve[399] > st[0]:
                flat.append((r, float(curve[199])))
        print(f"\n{ds}: {len(flat)} of {len(by_ds[ds])} runs flat from 200 to 400 above the optimum (pool {pool})")
        groups: dict[float, list] = defaultdict(list)
        for r, best in flat:
            groups[best].append(r)
        for best, runs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            cfg = by_time[best]
            score = replay.methodology_score(ds, st, sp.cartesian, best, 200, exp)
            line = [f"  best {best:.4g} ({len(runs)} runs): score at 200 {score:.3f}, "
                    f"{int(np.searchsorted(st, best))} better configurations"]
            for depth in (1, 2):
                valid = [sp.table[c][0] for c in moves(sp, cfg, depth) if c in sp.table]
                better = sum(t < best for t in valid)
                seen200 = np.mean([len(set(valid) & set(r["results"][:200])) for r in runs])
                seen400 = np.mean([len(set(valid) & set(r["results"])) for r in runs])
                line.append(f"{depth}-gene neighbours: {len(valid)} valid, {better} better, "
                            f"evaluated {seen200:.1f} by 200 and {seen400:.1f} by 400")
            restarts = np.mean([restarts_between(r["results"], pool, 200, 400) for r in runs])
            line.append(f"restarts begun at 200-399: {restarts:.1f} per run")
            print("; ".join(line))


if __name__ == "__main__":
    main()
