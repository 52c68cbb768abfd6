"""How many of each batch of bred children GeneticSampler uses, and what a batch costs by its size:
the most that smaller or adaptive batches could save (replay of ``benchmarks/replay.py``,
in-memory storage).

Each batch (``_child_batch`` children bred at once per elite and strength) is handed out to the
following trials until the elite changes or it runs out; the children drawn from it before then
are counted.  The cost of breeding ``m`` children (``_breed``, their keys and code check) is timed
at the end of the study for several ``m``, and the saving of an oracle that breeds exactly the
children each batch hands out is worked out from it (an upper bound: a real rule guesses).

Usage: nice -n 19 python benchmarks/genetic_batches.py --dataset gemm_RTX_3090 --seeds 4 --seed0 3000
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent))
import replay  # noqa: E402

WINDOWS = ((0, 100), (100, 300), (300, 600), (600, 1000))
SIZES = (64, 128, 256, 512)


def _batch_cost(sampler, m: int, repeat: int = 200) -> float:  # type: ignore[no-untyped-def]
    """CPU seconds of breeding ``m`` children of the sampler's current elite, with their keys
    and code check (what ``_bred`` does for a new batch); the best of five runs."""
    from ciq_optuna.samplers._genetic import _keys

    d = len(sampler._names)
    x = sampler._x[sampler._elite(sampler._order()), :d]
    best = float("inf")
    for _ in range(5):
        t = time.thread_time()
        for _ in range(repeat):
            rows = sampler._breed(x, m, 1.0)
            _keys(rows, sampler._integral(d))
            sampler._table_codes(rows)
        best = min(best, (time.thread_time() - t) / repeat)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="gemm_RTX_3090")
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--seed0", type=int, default=0)
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")
    from ciq_optuna.samplers import GeneticSampler

    batches: list[tuple[int, float, list]] = []  # (rows when bred, strength, the batch)
    plain = GeneticSampler._bred

    def bred(self, order, m, strength):  # type: ignore[no-untyped-def]
        known = {id(b) for b in self._child_batches.values()}
        out = plain(self, order, m, strength)
        batches.extend((self._n, strength, b) for b in self._child_batches.values() if id(b) not in known)
        return out

    GeneticSampler._bred = bred  # type: ignore[method-assign]
    space = replay.load_space(args.dataset)
    costs = []
    for seed in range(args.seed0, args.seed0 + args.seeds):
        run = replay._Run(space, GeneticSampler(seed=seed))
        run.steps(args.trials)
        costs.append([_batch_cost(run.study.sampler, m) for m in SIZES])
    cost = np.median(costs, axis=0)  # seconds per batch of SIZES children
    fixed, per_child = np.polyfit(SIZES, cost, 1)[::-1]
    size = GeneticSampler(seed=0)._child_batch
    print(f"{args.dataset}, {args.trials} trials, seeds {args.seed0}-{args.seed0 + args.seeds - 1}; a batch of m "
          f"children costs {1e6 * fixed:.0f} + {1e6 * per_child:.2f} m us (" +
          ", ".join(f"{m}: {1e6 * c:.0f} us" for m, c in zip(SIZES, cost)) + ")")
    print()
    print("| trials | batches per trial | strength > 1 | children used per batch: mean | 25 % | median | 75 % | "
          "90 % | oracle saving, ms per trial |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    total = 0.0
    for a, b in WINDOWS:
        rows = [(s, bt[1]) for n, s, bt in batches if a <= n < b]
        if not rows:
            continue
        used = np.array([u for _, u in rows], dtype=float)
        strong = np.mean([s > 1.0 for s, _ in rows])
        # the oracle breeds exactly the children used (at least one); the default breeds ``size``
        saving = per_child * np.maximum(0.0, size - np.maximum(used, 1.0)).sum() / args.seeds / (b - a)
        total += saving * (b - a)
        q = np.percentile(used, [25, 50, 75, 90])
        print(f"| {a}-{b - 1} | {len(rows) / args.seeds / (b - a):.3f} | {strong:.2f} | {used.mean():.0f} | "
              + " | ".join(f"{v:.0f}" for v in q) + f" | {1000 * saving:.4f} |")
    print()
    print(f"oracle saving over the study: {1000 * total / args.trials:.4f} ms per trial")


if __name__ == "__main__":
    main()
