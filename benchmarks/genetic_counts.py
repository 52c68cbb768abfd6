"""Work GeneticSampler does per study, counted (not timed, so the machine's load plays no part),
at a commit and in this tree: full niche passes of the elite (``_pair_distances`` calls) and rows
added to the conditional-parameter evidence (``_Activation.add_list``), replaying
``gemm_RTX_3090`` (in-memory storage, seed 0).

Usage: python benchmarks/genetic_counts.py --against d2bca71 --trials 1000
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections import Counter
from pathlib import Path

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent))
import replay  # noqa: E402


def _counted(cls: type, name: str, counts: Counter) -> None:
    plain = getattr(cls, name)

    def wrapper(*a, **k):  # type: ignore[no-untyped-def]
        counts[name] += 1
        return plain(*a, **k)

    setattr(cls, name, wrapper)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", required=True)
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--dataset", default="gemm_RTX_3090")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")
    print(f"| sampler ({args.dataset}, {args.trials} trials, seed 0) | full niche passes | rows added to the conditional evidence |")
    print("|---|---:|---:|")
    for name in (f"genetic@{args.against}", "genetic"):
        sampler = replay.build_sampler(name, 0)
        counts: Counter = Counter()
        _counted(type(sampler), "_pair_distances", counts)
        _counted(sys.modules[type(sampler).__module__]._Activation, "add_list", counts)
        replay.replay(replay.load_space(args.dataset), sampler, args.trials)
        print(f"| {name} | {counts['_pair_distances']} | {counts['add_list']} |")


if __name__ == "__main__":
    main()
