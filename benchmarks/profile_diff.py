"""Where a tune worker's CPU per trial goes: per function, (run of k trials - run of one) / (k - 1).

    python benchmarks/profile_diff.py PREFIX [--top 40] [--minus PREFIX2]

Reads the profiles ``benchmarks/tune_workers.py --profile PREFIX`` writes for each worker (its
measured run ``*-go-N.prof`` and its run of one trial alone, the later ``*-one-N.prof``) and prints
the cumulative and own CPU ms per trial of each function, median over the workers, so that the
one-off costs of a run (start-up, the first read of the study) cancel as in the benchmark's own
figures. ``k``: the trials the worker created in its measured run (Optuna's ``_run_trial`` calls).
``--minus PREFIX2``: also the difference per function, PREFIX's figure minus PREFIX2's (each its
median over its workers), largest first; e.g. 4 workers sharing a study minus 4 on studies of
their own (``tune_workers.py --independent``: ``...-w4.`` against ``...-w4i``).
"""

from __future__ import annotations

import argparse
import glob
import pstats
import re
import statistics
from collections import defaultdict


def _table(path: str) -> dict[tuple[str, int, str], tuple[int, float, float]]:
    return {k: (v[1], v[2], v[3]) for k, v in pstats.Stats(path).stats.items()}  # type: ignore[attr-defined]


def _trials(table: dict[tuple[str, int, str], tuple[int, float, float]]) -> int:
    return sum(n for (f, _, name), (n, _, _) in table.items() if name == "_run_trial" and f.endswith("_optimize.py"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prefix")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--size", type=int, help="only the runs nearest this study size (default: each size)")
    parser.add_argument("--match", default="", help="only functions whose file:line(name) matches this regex")
    parser.add_argument("--minus", help="a second prefix: print PREFIX's figures minus its, per function")
    args = parser.parse_args()
    gos = sorted(glob.glob(f"{args.prefix}*-go-*.prof"), key=_number)
    sizes = sorted({_number(g) for g in gos})
    if args.size is not None:
        sizes = [min(sizes, key=lambda n: abs(n - args.size))]
    if args.minus:
        others = sorted(glob.glob(f"{args.minus}*-go-*.prof"), key=_number)
        top = max(_number(g) for g in others)
        a = _per_trial([g for g in gos if _number(g) == max(sizes)], max(sizes))
        b = _per_trial([g for g in others if _number(g) == top], top)
        for title, col in (("cumulative", 0), ("own", 1)):
            print(f"## {args.prefix} minus {args.minus}, {title} CPU ms per trial (median over the workers)")
            diff = {key: _median(a, key, col) - _median(b, key, col) for key in a[col].keys() | b[col].keys()}
            for key in sorted(diff, key=lambda key: -diff[key])[: args.top]:
                print(f"{_label(key)}  {_median(b, key, col):.2f} -> {_median(a, key, col):.2f}  ({diff[key]:+.2f})")
        return
    for size in sizes:
        _report(args, [g for g in gos if _number(g) == size], size)


def _median(tables: tuple[dict, dict], key: tuple, col: int) -> float:
    values = tables[col].get(key)
    return statistics.median(values) if values else 0.0


def _label(key: tuple) -> str:
    f, line, name = key
    return f"{f.split('site-packages/')[-1].split('ciq_optuna/')[-1]}:{line}({name})"


def _number(path: str) -> int:
    return int(path.rsplit("-", 1)[1].split(".")[0])


def _per_trial(gos: list[str], size: int) -> tuple[dict[tuple, list[float]], dict[tuple, list[float]]]:
    """Per function, each worker's cumulative and own CPU ms per trial (measured run minus its run
    of one trial, over its trials but one), for the measured runs ``gos`` at ``size`` trials."""
    cum: dict[tuple, list[float]] = defaultdict(list)
    own: dict[tuple, list[float]] = defaultdict(list)
    for go in gos:
        worker = re.sub(r"-go-\d+\.prof$", "", go)
        ones = [p for p in glob.glob(f"{worker}-one-*.prof") if _number(p) < size]
        if not ones:
            continue
        a, b = _table(go), _table(max(ones, key=_number))
        k = _trials(a)
        if k < 2:
            continue
        for key in a.keys() | b.keys():
            _, ta, ca = a.get(key, (0, 0.0, 0.0))
            _, tb, cb = b.get(key, (0, 0.0, 0.0))
            cum[key].append(1000 * (ca - cb) / (k - 1))
            own[key].append(1000 * (ta - tb) / (k - 1))
    return cum, own


def _report(args: argparse.Namespace, gos: list[str], size: int) -> None:
    cum, own = _per_trial(gos, size)
    workers = gos
    print(f"# study at {size} trials, {len(workers)} workers; CPU ms per trial, median over the workers (profiled: inflated by cProfile)")
    print("| function | cumulative | own |")
    print("|---|---:|---:|")
    rows = sorted(cum, key=lambda key: -statistics.median(cum[key]))
    shown = 0
    for key in rows:
        label = _label(key)
        if args.match and not re.search(args.match, label):
            continue
        print(f"| {label} | {statistics.median(cum[key]):.2f} | {statistics.median(own[key]):.2f} |")
        shown += 1
        if shown >= args.top:
            break


if __name__ == "__main__":
    main()
