"""Cost per trial of the GeneticSampler's binary model (``samplers/_binaries.py``) in a large study.

    nice -n 10 python benchmarks/binary_model_cost.py --fill FILL.db [--sizes 100 1000 5000] [--steps 20]

``FILL.db`` is the fill cache of ``benchmarks/overhead.py`` (``--fill-cache``): 5,000 real finished
trials of the stencil example (random configurations, real ptxas 13.0, each with its
``binary_hash``).  For each size N an in-memory study gets the first N of them
(``study.add_trials``) and a binary-aware GeneticSampler reads them with one unmeasured ``ask``
(the model is built from scratch there once).  Then, ``--steps`` times: one more fill trial is
added and one trial is asked (the sampler learns the new trial and plans, predicting binaries
for its candidates) and told failed.  Printed per size: median milliseconds per step in the
binary model (``add``, ``wrong_prediction``, ``predict`` and ``project``, timed around the
calls) and in the whole ``ask``, and the one-off first read, all in CPU time of this process (a
shared machine moves wall-clock times with its load, CPU time much less).  The code measured is
whatever ``ciq_optuna`` the interpreter imports (PYTHONPATH), so the same script measures two
versions side by side.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import optuna

from ciq_optuna.samplers import GeneticSampler, _binaries


def _timed_model() -> list[float]:
    """Wrap the model's public calls; returns the list the seconds spent are appended to."""
    spent: list[float] = []
    for name in ("add", "wrong_prediction", "predict", "project"):
        real = getattr(_binaries.BinaryModel, name)

        def timed(self, *a, _real=real, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
            start = time.process_time()
            try:
                return _real(self, *a, **kw)
            finally:
                spent.append(time.process_time() - start)

        setattr(_binaries.BinaryModel, name, timed)
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fill", required=True, help="overhead.py's fill cache (SQLite, study 'fill')")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    fill = optuna.load_study(study_name="fill", storage=f"sqlite:///{Path(args.fill).resolve()}")
    pool = fill.get_trials(deepcopy=False)
    spent = _timed_model()
    print(f"# {_binaries.__file__}")
    print("| trials in study | binary model ms/trial (median) | ask ms/trial (median) | first read s | steps |")
    print("|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        if size + args.steps > len(pool):
            raise SystemExit(f"error: the fill has {len(pool)} trials; {size + args.steps} needed")
        study = optuna.create_study(sampler=GeneticSampler(seed=0))
        study.add_trials(pool[:size])
        start = time.process_time()
        study.tell(study.ask(), state=optuna.trial.TrialState.FAIL)
        first = time.process_time() - start
        model, asks = [], []
        for i in range(args.steps):
            study.add_trial(pool[size + i])
            spent.clear()
            start = time.process_time()
            trial = study.ask()
            asks.append(time.process_time() - start)
            model.append(sum(spent))
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        print(
            f"| {size} | {1000 * statistics.median(model):.1f} | {1000 * statistics.median(asks):.1f} "
            f"| {first:.1f} | {args.steps} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
