"""How often GeneticSampler runs a configuration twice on a small conditional space: the space
of tests/test_genetic_sampler.py::test_conditional_parameters_deduplicated_on_what_is_used (20
distinct configurations; pool 4, 60 trials), over many seeds, for variants of
``benchmarks/replay.py`` (``genetic``, ``genetic:ties=1``, ``genetic:draws=legacy+ties=1``, ...).
A child whose conditional gene is switched on but absent is a plan left open (the objective
draws that value), so it can repeat a finished configuration; which such plans are picked
depends on the nearest-neighbour tie order.

``--workers N``: on a SQLite study, 8 trials by one worker (the very first trials of parallel
workers are drawn at random), then the rest by N threads (claims read back from the storage).

Usage: python benchmarks/conditional_duplicates.py --seeds 30 [--first 0] [--workers 4] --samplers genetic,genetic:ties=1
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent))
import replay  # noqa: E402


def _conditional(trial: optuna.Trial) -> float:
    opt = trial.suggest_categorical("ptxas.opt_level", [0, 1, 2, 3])
    passed = trial.suggest_categorical("ptxas.maxrregcount.passed", [False, True])
    regs = trial.suggest_int("ptxas.maxrregcount", 16, 64, step=16) if passed else 255
    return abs(regs - 32) + opt


def repeats(name: str, seed: int, workers: int = 1) -> int:
    """Finished trials beyond the distinct configurations they ran."""
    sampler = replay.build_sampler(name, seed)
    sampler.population_size = 4  # as pool_size=4
    if workers == 1:
        study = optuna.create_study(sampler=sampler)
        study.optimize(_conditional, n_trials=60)
        trials = study.trials
    else:
        with tempfile.TemporaryDirectory() as tmp:
            study = optuna.create_study(storage=f"sqlite:///{tmp}/s.db", sampler=sampler)
            study.optimize(_conditional, n_trials=8)
            study.optimize(_conditional, n_trials=52, n_jobs=workers)
            trials = study.trials
    done = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    return len(done) - len({tuple(sorted(t.params.items())) for t in done})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=30, help="how many seeds")
    ap.add_argument("--first", type=int, default=0, help="the first seed")
    ap.add_argument("--samplers", default="genetic,genetic:ties=1")
    ap.add_argument("--workers", type=int, default=1, help="threads on a SQLite study (1: one, in memory)")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    logging.getLogger("ciq_optuna.samplers").setLevel(logging.ERROR)
    print("| sampler | seeds with a repeated configuration | which (seed: repeats) |")
    print("|---|---:|---|")
    for name in args.samplers.split(","):
        bad = {s: r for s in range(args.first, args.first + args.seeds) if (r := repeats(name, s, args.workers))}
        which = ", ".join(f"{s}: {r}" for s, r in bad.items())
        print(f"| `{name}` | {len(bad)} of {args.seeds} | {which} |")


if __name__ == "__main__":
    main()
