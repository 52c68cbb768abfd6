"""Trials per generation when 16 worker threads share one SQLite study with a population of 8:
GeneticSampler (generation = trial number // pool_size) against Optuna's NSGAIISampler.

Usage: nice -n 10 python benchmarks/genetic_generations.py --out benchmarks/results/generations.json
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

import optuna


def objective(trial: optuna.Trial) -> float:
    x = trial.suggest_int("x", 0, 30)
    y = trial.suggest_categorical("y", [1, 2, 4, 8, 16])
    time.sleep(random.uniform(0.0, 0.02))
    return (x - 7) ** 2 + y


def per_generation(name: str, seed: int, trials: int) -> list[int]:
    from ciq_optuna.samplers import GeneticSampler

    sampler = (
        GeneticSampler(pool_size=8, seed=seed)
        if name == "genetic"
        else optuna.samplers.NSGAIISampler(population_size=8, seed=seed)
    )
    key = "GeneticSampler:generation" if name == "genetic" else "NSGAIISampler:generation"
    with tempfile.TemporaryDirectory() as tmp:
        study = optuna.create_study(storage=f"sqlite:///{tmp}/g.db", sampler=sampler)
        study.optimize(objective, n_trials=trials, n_jobs=16)
        counts = Counter(t.system_attrs.get(key) for t in study.trials)
    return [counts[g] for g in sorted(g for g in counts if g is not None)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=96)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")
    out = {
        name: [per_generation(name, s, args.trials) for s in range(args.seeds)]
        for name in ("genetic", "nsga2")
    }
    for name, runs in out.items():
        print(name, "trials per generation:", runs)
    Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
