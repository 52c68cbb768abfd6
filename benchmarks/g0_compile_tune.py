"""Best registers of short compile tunes of the stencil example (sm_90a, real ptxas) with the
GeneticSampler's generation 0 from the QMC design at several shares (``design_start``, which a
compiler study otherwise leaves at 0), seed by seed.

Usage::

    PYTHONPATH=. python benchmarks/g0_compile_tune.py --g0q 0.65,0 --seeds 600-619 --trials 40
"""

from __future__ import annotations

import argparse
import functools
import tempfile
from pathlib import Path

import optuna

from ciq_optuna import tune as tune_module
from ciq_optuna.samplers import make_sampler
from ciq_optuna.tune import TuneConfig, tune

STENCIL = Path(__file__).resolve().parents[1] / "examples" / "stencil" / "stencil.sm_90a.ptx"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--g0q", default="0.65,0", help="comma-separated shares of generation 0 from the design")
    ap.add_argument("--seeds", default="600-619", help="FIRST-LAST")
    ap.add_argument("--trials", type=int, default=40)
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    first, last = map(int, args.seeds.split("-"))
    for share in map(float, args.g0q.split(",")):
        tune_module.make_sampler = functools.partial(make_sampler, design_start=share)
        for seed in range(first, last + 1):
            tmp = Path(tempfile.mkdtemp(prefix="g0-compile-"))
            config = TuneConfig(
                kernel=STENCIL, arch="sm_90a", minimize=["registers"], storage=f"sqlite:///{tmp / 's.db'}",
                acf=tmp / "best.acf", workdir=tmp / "w", progress=False, trials=args.trials, seed=seed,
            )
            result = tune(config)
            best = result.best[0]
            print(f"g0q={share} seed={seed} trials={len(result.study.trials)} best={best.value} best_trial={best.number}", flush=True)


if __name__ == "__main__":
    main()
