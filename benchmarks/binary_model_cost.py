"""Cost per trial of the GeneticSampler's binary model (``samplers/_binaries.py``) in a large study.

    nice -n 10 python benchmarks/binary_model_cost.py --fill FILL.db [--sizes 100 1000 5000] [--steps 20] \
        [--batch 1 4] [--profile OUT] [--base ROOT --pairs 3] [--counts]
    nice -n 10 python benchmarks/binary_model_cost.py --fill FILL.db --make-tuned TUNED.db [--size 1000] \
        [--workers 4] [--chunk 60]
    nice -n 10 python benchmarks/binary_model_cost.py --fill TUNED.db --study-name workers --sizes 1008 ...

``FILL.db`` is the fill cache of ``benchmarks/overhead.py`` (``--fill-cache``): 5,000 real finished
trials of the stencil example (random configurations, real ptxas 13.0, each with its
``binary_hash``).  For each size N an in-memory study gets the first N of them
(``study.add_trials``) and a binary-aware GeneticSampler reads them with one unmeasured ``ask``
(the model is built from scratch there once).  Then, ``--steps`` times: one more fill trial is
added and one trial is asked (the sampler learns the new trial and plans, predicting binaries
for its candidates) and told failed.  ``--batch W`` adds W fill trials before each ask instead
of one: the evidence one of W workers sharing the study learns per trial of its own (its trial
and the W - 1 the others finished meanwhile), so the cost per ask at W workers' evidence.  Printed per size: median milliseconds per step in the
binary model (``add``, ``wrong_prediction``, ``predict`` and ``project``, timed around the
calls) and in the whole ``ask``, and the one-off first read, all in CPU time of this process (a
shared machine moves wall-clock times with its load, CPU time much less).  The code measured is
whatever ``ciq_optuna`` the interpreter imports (PYTHONPATH), so the same script measures two
versions side by side.  ``--profile OUT``: the measured steps also run under cProfile, its stats
written to ``OUT-<size>-b<batch>.prof`` (the timings then include cProfile's overhead).
``--counts``: per ask, what the model did (updates, rebuilds from scratch, rule derivations,
trials moved between groups of canonical settings, doubt checks; timings then include the
counting).  ``--base ROOT --pairs N``: N alternated pairs of runs, the code of a base tree (``git archive BASE
| tar -x -C ROOT``) against this tree's (the pairs alternate which runs first), each run a
subprocess; then per size and batch the medians and the per-pair new/base ratios, and whether
every run asked the same trials (a digest of the asked trials' parameters and user attributes).

The fill trials are random configurations: few pairs of them are a few genes apart, so they
give the model little evidence.  The trials of a real tune are children of the study's best,
mostly a few genes from an earlier trial, and each gives much more.  ``--make-tuned TUNED.db``
makes such a pool: a SQLite study (``workers``) with the first ``--size`` fill trials, then the
trials of ``--workers`` real ``tune`` processes run on it together (``benchmarks/tune_workers.py``,
``--chunk`` trials each, interleaved as the processes finished them).  Measuring from
``--sizes`` at or above its size plus ``2 * --workers`` (the workers' first trials alone) then
feeds the model tune trials only.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
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


def make_tuned(fill: list[optuna.trial.FrozenTrial], out: Path, size: int, workers: int, chunk: int) -> None:
    """A SQLite study ``workers`` in ``out``: ``size`` fill trials, then ``workers`` real tune
    processes' trials (this tree's code), ``chunk`` each."""
    import os
    import tempfile

    import tune_workers

    from ciq_optuna.study.storage import resolve_storage
    from ciq_optuna.tune import tune

    if out.exists():
        raise SystemExit(f"error: {out} exists")
    url = f"sqlite:///{out.resolve()}"
    with tempfile.TemporaryDirectory(prefix="ciq-tuned-") as tmp:
        work = Path(tmp)
        storage = resolve_storage(url, default_path=out)
        study = tune(tune_workers._config(4, work, 0), storage=storage).study
        have, _ = tune_workers._trial_count(storage, study._study_id)
        tune_workers.copy_trials(storage, study._study_id, [t for t in fill if t.state.is_finished()][: size - have])
        start, _ = tune_workers._trial_count(storage, study._study_id)
        med, _, _, ks, _ = tune_workers.run_workers(url, workers, chunk, work, start, dict(os.environ))
    print(f"# {out}: {start} trials, then {sum(ks)} by {workers} tune processes ({med:.1f} CPU ms/trial)")


def paired(args: argparse.Namespace) -> None:
    """Alternated runs of the base tree's code and this tree's (subprocesses), then the summary."""
    import os
    import subprocess
    import sys

    new_root = str(Path(__file__).resolve().parents[1])
    trees = [("base", str(Path(args.base).resolve())), ("new", new_root)]
    cmd = [sys.executable, __file__, "--fill", args.fill, "--study-name", args.study_name, "--steps", str(args.steps),
           "--sizes", *map(str, args.sizes), "--batch", *map(str, args.batch)]
    print(f"# {' '.join(sys.argv)}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {os.getloadavg()[0]:.2f}")
    runs: dict[tuple[int, int], dict[str, list[tuple[float, float]]]] = {}
    digests: dict[tuple[int, int], set[str]] = {}
    for pair in range(args.pairs):
        for label, root in trees if pair % 2 == 0 else trees[::-1]:
            out = subprocess.run(cmd, env=dict(os.environ, PYTHONPATH=root), capture_output=True, text=True, check=True)
            for line in out.stdout.splitlines():
                cells = [c.strip() for c in line.strip("|").split("|")]
                if line.startswith("| ") and cells[0].isdigit():
                    size, batch, model, ask = int(cells[0]), int(cells[1]), float(cells[2]), float(cells[3])
                    runs.setdefault((size, batch), {}).setdefault(label, []).append((model, ask))
                    digests.setdefault((size, batch), set()).add(cells[6])
                    print(f"| {label} | {pair} | {size} | {batch} | {model:.2f} | {ask:.2f} | {cells[6]} |", flush=True)
    print(f"# load average at the end {os.getloadavg()[0]:.2f}")
    same = all(len(d) == 1 for d in digests.values())
    print(f"# proposals: {'identical in every run' if same else 'DIFFER between runs'}")
    print("| trials in study | batch | model ms/ask base | new | new/base per pair | median | ask ms base | new "
          "| new/base per pair | median |")
    print("|---:|---:|---:|---:|---|---:|---:|---:|---|---:|")
    for (size, batch), by in runs.items():
        cells = []
        for c in (0, 1):
            base, new = [r[c] for r in by["base"]], [r[c] for r in by["new"]]
            ratios = [n / b for b, n in zip(base, new, strict=True)]
            cells += [f"{statistics.median(base):.2f}", f"{statistics.median(new):.2f}",
                      " ".join(f"{r:.2f}" for r in ratios), f"{statistics.median(ratios):.2f}"]
        print(f"| {size} | {batch} | " + " | ".join(cells) + " |")


def _counted_model() -> dict[str, int]:
    """Count, per call of the model's update (``_refresh``): rebuilds from scratch, rule
    derivations (``_rule``), and trials whose canonical settings changed (moved between groups);
    and the doubt checks of predictions (``_untested``).  Works on any version of the model that
    has these methods; slows it down (a copy of every trial's key per update)."""
    counts = {"updates": 0, "rebuilds": 0, "rules derived": 0, "trials moved": 0, "doubt checks": 0}
    refresh, rule, untested = _binaries.BinaryModel._refresh, _binaries.BinaryModel._rule, _binaries.BinaryModel._untested

    def counted_refresh(self):  # noqa: ANN001, ANN202
        stale, before = self._stale, list(self._keys)
        refresh(self)
        counts["updates"] += 1
        counts["rebuilds"] += stale
        if not stale:
            counts["trials moved"] += sum(a != b for a, b in zip(before, self._keys))

    def counted_rule(self, *a):  # noqa: ANN001, ANN002, ANN202
        counts["rules derived"] += 1
        return rule(self, *a)

    def counted_untested(self, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        counts["doubt checks"] += 1
        return untested(self, *a, **kw)

    _binaries.BinaryModel._refresh = counted_refresh
    _binaries.BinaryModel._rule = counted_rule
    _binaries.BinaryModel._untested = counted_untested
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fill", required=True, help="overhead.py's fill cache (SQLite, study 'fill')")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--study-name", default="fill", help="the study of --fill the pool is read from")
    parser.add_argument("--make-tuned", help="write a pool of real tune trials to this SQLite file, then stop")
    parser.add_argument("--size", type=int, default=1000, help="--make-tuned: fill trials before the tune")
    parser.add_argument("--workers", type=int, default=4, help="--make-tuned: tune processes at once")
    parser.add_argument("--chunk", type=int, default=60, help="--make-tuned: trials per tune process")
    parser.add_argument("--base", help="root of a base tree: alternate runs of it and of this tree, --pairs times")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--batch", type=int, nargs="+", default=[1], help="fill trials added per ask")
    parser.add_argument("--counts", action="store_true", help="print what the model did per ask instead of timings")
    parser.add_argument("--profile", help="write cProfile stats of the measured steps to PROFILE-<size>-b<batch>.prof")
    args = parser.parse_args()
    if args.base:
        paired(args)
        return
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    fill = optuna.load_study(study_name=args.study_name, storage=f"sqlite:///{Path(args.fill).resolve()}")
    pool = fill.get_trials(deepcopy=False)
    if args.make_tuned:
        make_tuned(pool, Path(args.make_tuned), args.size, args.workers, args.chunk)
        return
    spent = _timed_model()
    counts = _counted_model() if args.counts else None
    print(f"# {_binaries.__file__}")
    print("| trials in study | batch | binary model ms/ask (median) | ask ms (median) | first read s | steps "
          "| proposals (digest) |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    for size in args.sizes:
        for batch in args.batch:
            if size + args.steps * batch > len(pool):
                raise SystemExit(f"error: the fill has {len(pool)} trials; {size + args.steps * batch} needed")
            study = optuna.create_study(sampler=GeneticSampler(seed=0))
            study.add_trials(pool[:size])
            start = time.process_time()
            study.tell(study.ask(), state=optuna.trial.TrialState.FAIL)
            first = time.process_time() - start
            profiler = cProfile.Profile() if args.profile else None
            model, asks = [], []
            if counts is not None:
                counts.update(dict.fromkeys(counts, 0))
            digest = hashlib.sha256()
            for i in range(args.steps):
                study.add_trials(pool[size + i * batch : size + (i + 1) * batch])
                spent.clear()
                if profiler is not None:
                    profiler.enable()
                start = time.process_time()
                trial = study.ask()
                asks.append(time.process_time() - start)
                if profiler is not None:
                    profiler.disable()
                model.append(sum(spent))
                digest.update(json.dumps([trial.params, trial.user_attrs], sort_keys=True, default=str).encode())
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            if counts is not None:
                print(f"# {size} trials, batch {batch}, per ask over {args.steps} asks: "
                      + ", ".join(f"{k} {v / args.steps:.2f}" for k, v in counts.items()), flush=True)
            if profiler is not None:
                profiler.dump_stats(f"{args.profile}-{size}-b{batch}.prof")
            print(
                f"| {size} | {batch} | {1000 * statistics.median(model):.2f} | {1000 * statistics.median(asks):.2f} "
                f"| {first:.1f} | {args.steps} | {digest.hexdigest()[:16]} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
