"""Warm vs cold re-tuning on the example kernels with the real ptxas: trials to reach the cold search's best.

Two transitions, each from a source tuning (ptxas 13.0, sm_80, ``--trials`` trials, seed 0):

- compiler upgrade: the same kernel on sm_80 re-tuned with ptxas 13.5 (pip wheels);
- neighbouring arch: the kernel's sm_90a PTX tuned with ptxas 13.0.

For each seed the target is tuned three times with the same budget and seed: cold (the default
search: baseline, screening, genetic search), warm (``--warm-from`` the source ACF: baseline,
the source winner and its neighbours, screening, genetic search) and warm without screening
(``--no-screen``: the seeds then the genetic search, as before screening followed the seeds).
The cold run's best value is the target; for every run we count the trials (baseline included,
in trial order) until a value at least as good first appears. Simplification is off so only
search trials count. Prints a Markdown table of medians over the seeds.

    nice -n 10 python benchmarks/warm_start.py [--trials 24] [--seeds 5] > /tmp/warm_start.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import optuna

from ciq_optuna.compilers.locate import find_compiler
from ciq_optuna.tune import TuneConfig, tune

ROOT = Path(__file__).resolve().parents[1]
KERNELS = {"attention": "spill-bytes", "sgemm": "registers", "stencil": "registers"}


def trials_to_reach(study: optuna.Study, target: float) -> int | None:
    """1-based count of trials until one reaches ``target`` (minimisation), None if none does."""
    for i, t in enumerate(sorted(study.trials, key=lambda t: t.number), 1):
        if t.state == optuna.trial.TrialState.COMPLETE and t.value <= target:
            return i
    return None


def run(
    kernel: Path,
    arch: str,
    metric: str,
    ptxas,
    trials: int,
    seed: int,
    work: Path,
    name: str,
    warm_from: list[Path] | None = None,
    screen: bool = True,
) -> optuna.Study:
    config = TuneConfig(
        kernel=kernel,
        arch=arch,
        minimize=[metric],
        trials=trials,
        seed=seed,
        compiler_path=str(ptxas.path),
        storage=f"sqlite:///{work / (name + '.db')}",
        acf=work / f"{name}.acf",
        workdir=work / name,
        progress=False,
        simplify=False,
        warm_from=warm_from or [],
        screen=screen,
    )
    return tune(config).study


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    p130 = find_compiler("ptxas", release="13.0")
    p135 = find_compiler("ptxas", release="13.5")
    print(
        f"ptxas {p130.version} -> {p135.version}; {args.trials} trials per run; {args.seeds} seeds; medians\n"
    )
    print(
        "| kernel | objective | transition | cold: trials to its best | warm: trials to the cold best | "
        "warm reached it (runs) | cold best (median) | warm best (median) | warm, no screening: trials "
        "| reached | best |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="ciq-warm-") as tmp:
        work = Path(tmp)
        for name, metric in KERNELS.items():
            src_kernel = ROOT / "examples" / name / f"{name}.sm_80.ptx"
            run(src_kernel, "sm_80", metric, p130, args.trials, 0, work, f"{name}-source")
            source_acf = work / f"{name}-source.acf"
            transitions = [
                ("ptxas 13.0 -> 13.5 (sm_80)", src_kernel, "sm_80", p135),
                (
                    "sm_80 -> sm_90a (ptxas 13.0)",
                    ROOT / "examples" / name / f"{name}.sm_90a.ptx",
                    "sm_90a",
                    p130,
                ),
            ]
            for label, kernel, arch, ptxas in transitions:
                cold_n, warm_n, cold_best, warm_best, reached = [], [], [], [], 0
                plain_n, plain_best, plain_reached = [], [], 0
                for seed in range(1, args.seeds + 1):
                    tag = f"{name}-{arch}-{ptxas.release}-{seed}"
                    cold = run(kernel, arch, metric, ptxas, args.trials, seed, work, tag + "-cold")
                    warm = run(
                        kernel, arch, metric, ptxas, args.trials, seed, work, tag + "-warm", [source_acf]
                    )
                    plain = run(
                        kernel, arch, metric, ptxas, args.trials, seed, work, tag + "-plain", [source_acf], False
                    )
                    target = cold.best_value
                    cold_n.append(trials_to_reach(cold, target))
                    w = trials_to_reach(warm, target)
                    reached += w is not None
                    warm_n.append(w if w is not None else args.trials + 1)
                    cold_best.append(target)
                    warm_best.append(warm.best_value)
                    p = trials_to_reach(plain, target)
                    plain_reached += p is not None
                    plain_n.append(p if p is not None else args.trials + 1)
                    plain_best.append(plain.best_value)
                    print(
                        f"  {label} {name} seed {seed}: cold {cold_n[-1]} ({target:g}) warm {w} "
                        f"({warm.best_value:g}) warm-no-screening {p} ({plain.best_value:g})",
                        file=sys.stderr,
                        flush=True,
                    )
                print(
                    f"| {name} | {metric} | {label} | {statistics.median(cold_n):g} | "
                    f"{statistics.median(warm_n):g} | {reached}/{args.seeds} | "
                    f"{statistics.median(cold_best):g} | {statistics.median(warm_best):g} | "
                    f"{statistics.median(plain_n):g} | {plain_reached}/{args.seeds} | "
                    f"{statistics.median(plain_best):g} |",
                    flush=True,
                )
    print(f"\n(a warm run that never reached the cold best counts as {args.trials + 1} trials)")
    return 0


if __name__ == "__main__":
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    sys.exit(main())
