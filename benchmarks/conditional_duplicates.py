"""How often GeneticSampler runs a configuration twice on a small conditional space: the space
of tests/test_genetic_sampler.py::test_conditional_parameters_deduplicated_on_what_is_used (20
distinct configurations; pool 4, 60 trials), over many seeds, for variants of
``benchmarks/replay.py`` (``genetic``, ``genetic:ties=1``, ``genetic:draws=legacy+ties=1``, ...).
A child whose conditional gene is switched on but absent is a plan left open (the objective
draws that value), so it can repeat a finished configuration; which such plans are picked
depends on the nearest-neighbour tie order.

Usage: python benchmarks/conditional_duplicates.py --seeds 30 --samplers genetic,genetic:ties=1
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent))
import replay  # noqa: E402


def _conditional(trial: optuna.Trial) -> float:
    opt = trial.suggest_categorical("ptxas.opt_level", [0, 1, 2, 3])
    passed = trial.suggest_categorical("ptxas.maxrregcount.passed", [False, True])
    regs = trial.suggest_int("ptxas.maxrregcount", 16, 64, step=16) if passed else 255
    return abs(regs - 32) + opt


def repeats(name: str, seed: int) -> int:
    """Finished trials beyond the distinct configurations they ran."""
    sampler = replay.build_sampler(name, seed)
    sampler.population_size = 4  # as pool_size=4
    study = optuna.create_study(sampler=sampler)
    study.optimize(_conditional, n_trials=60)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    return len(done) - len({tuple(sorted(t.params.items())) for t in done})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--samplers", default="genetic,genetic:ties=1")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    logging.getLogger("ciq_optuna.samplers").setLevel(logging.ERROR)
    print("| sampler | seeds with a repeated configuration | which (seed: repeats) |")
    print("|---|---:|---|")
    for name in args.samplers.split(","):
        bad = {s: r for s in range(args.seeds) if (r := repeats(name, s))}
        which = ", ".join(f"{s}: {r}" for s, r in bad.items())
        print(f"| `{name}` | {len(bad)} of {args.seeds} | {which} |")


if __name__ == "__main__":
    main()
