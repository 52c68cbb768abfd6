"""CPU cost of the compile objective's indexes of finished trials (``objectives/finished.py``:
measurements by binary code hash, compiled configurations by parameters), built from scratch over
a large study: what a ``tune`` run resuming that study pays once.

    nice -n 10 python benchmarks/finished_index_cost.py --fill FILL.db [--sizes 1000 5000] [--repeat 9] \
        [--base ROOT --pairs 7]

``FILL.db`` is the fill cache of ``benchmarks/overhead.py`` (``--fill-cache``): real finished
trials of the stencil example.  For each size N an in-memory study gets the first N of them;
then, ``--repeat`` times, both indexes are made anew and brought up to date with the whole study
(``_refresh``, as their first lookup does), and one lookup of a configuration not in the study is
made on each (the common case of a trial).  Printed: the median CPU milliseconds of this process
for the two builds and for the lookups.  The code measured is whatever ``ciq_optuna`` the
interpreter imports (PYTHONPATH); ``--base ROOT --pairs N`` runs N alternated pairs of child
processes, a base tree's code (``git archive BASE | tar -x -C ROOT``) against this tree's (the
pairs alternate which runs first), and prints per size the medians and the per-pair new/base ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import optuna

REPO = Path(__file__).resolve().parents[1]


def measure(fill: Path, sizes: list[int], repeat: int) -> dict[int, dict[str, float]]:
    """Median CPU ms to build both indexes over the first N fill trials, and for one missed lookup each."""
    from ciq_optuna.objectives import finished

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pool = optuna.load_study(study_name="fill", storage=f"sqlite:///{fill}").get_trials(deepcopy=False)
    out: dict[int, dict[str, float]] = {}
    for size in sizes:
        if size > len(pool):
            raise SystemExit(f"the fill has {len(pool)} trials; {size} asked")
        study = optuna.create_study()
        study.add_trials(pool[:size])
        absent = {name: "absent" for name in pool[0].params}
        builds, lookups = [], []
        for _ in range(repeat):
            start = time.process_time()
            if hasattr(finished, "FinishedTrials") and hasattr(finished.FinishedTrials, "compiled"):
                index = finished.FinishedTrials(study)
                index.catch_up()
                middle = time.process_time()
                index.measurement("0" * 64)
                index.compiled(absent)
            else:  # a tree from before the one index: two, each with its own pass
                binaries, configurations = finished.BinaryCache(study), finished.CompiledParams(study)
                for old in (binaries, configurations):
                    with old._lock:
                        old._refresh()
                middle = time.process_time()
                binaries.lookup("0" * 64)
                configurations.lookup(absent)
            end = time.process_time()
            builds.append((middle - start) * 1e3)
            lookups.append((end - middle) * 1e3)
        out[size] = {"build_ms": statistics.median(builds), "lookup_ms": statistics.median(lookups)}
    return out


def _child(root: Path, args: argparse.Namespace) -> dict[int, dict[str, float]]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    argv = [sys.executable, __file__, "--fill", args.fill, "--sizes", *map(str, args.sizes), "--repeat", str(args.repeat), "--json"]
    done = subprocess.run(argv, env=env, check=True, capture_output=True, text=True)
    return {int(k): v for k, v in json.loads(done.stdout).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fill", required=True, help="SQLite fill cache of benchmarks/overhead.py")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--base", help="root of a base tree to compare with, run alternately")
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not Path(args.fill).is_file():
        raise SystemExit(f"no fill cache at {args.fill}")
    if args.json:
        print(json.dumps(measure(Path(args.fill), args.sizes, args.repeat)))
        return
    if not args.base:
        for size, row in measure(Path(args.fill), args.sizes, args.repeat).items():
            print(f"{size} trials: build {row['build_ms']:.1f} ms, lookups {row['lookup_ms']:.3f} ms")
        return
    runs: dict[str, list[dict[int, dict[str, float]]]] = {"base": [], "new": []}
    for pair in range(args.pairs):
        order = [("base", Path(args.base)), ("new", REPO)] if pair % 2 == 0 else [("new", REPO), ("base", Path(args.base))]
        for name, root in order:
            runs[name].append(_child(root, args))
        print(f"# pair {pair + 1}: base {runs['base'][-1]}, new {runs['new'][-1]}", flush=True)
    print("| trials | base build ms | new build ms | new/base per pair | median | base lookups ms | new lookups ms |")
    print("|---:|---:|---:|---|---:|---:|---:|")
    for size in args.sizes:
        base = [r[size]["build_ms"] for r in runs["base"]]
        new = [r[size]["build_ms"] for r in runs["new"]]
        ratios = [n / b for n, b in zip(new, base)]
        look = [statistics.median(r[size]["lookup_ms"] for r in runs[k]) for k in ("base", "new")]
        print(
            f"| {size} | {statistics.median(base):.1f} | {statistics.median(new):.1f} | "
            f"{' '.join(f'{r:.2f}' for r in ratios)} | **{statistics.median(ratios):.2f}** | {look[0]:.3f} | {look[1]:.3f} |"
        )


if __name__ == "__main__":
    main()
