"""Tune every example kernel with the real ptxas (64 trials each) and print a Markdown table.

    python benchmarks/tune_examples.py [--trials 64] [--seed 0] > /tmp/tune_examples.md
    python benchmarks/tune_examples.py --work   # compiles skipped, binary-aware vs not

Each run uses a fresh SQLite study in a temporary directory and the default GeneticSampler.
``--work`` runs every case twice, with the default (binary-aware) sampler and with
``GeneticSampler(binary_attr=None)``, and prints the work-saved table instead.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import ciq_optuna.tune as tune_module
from ciq_optuna.samplers import GeneticSampler, make_sampler
from ciq_optuna.tune import TuneConfig, tune

ROOT = Path(__file__).resolve().parents[1]
CASES = [
    ("attention", "sm_90a", ["spill-bytes"]),
    ("attention", "sm_80", ["spill-bytes"]),
    ("sgemm", "sm_90a", ["registers"]),
    ("sgemm", "sm_80", ["registers"]),
    ("stencil", "sm_90a", ["registers"]),
    ("stencil", "sm_80", ["registers"]),
    ("attention", "sm_90a", ["spill-bytes", "compile-time"]),
    ("sgemm", "sm_90a", ["registers", "spill-bytes"]),
    ("stencil", "sm_80", ["registers", "spill-bytes"]),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", action="store_true", help="work-saved table, binary-aware vs not")
    parser.add_argument("--cases", default=",".join(map(str, range(len(CASES)))), help="--work: case indices")
    args = parser.parse_args()
    if args.work:
        work_table(args)
        return
    print(
        "| kernel | arch | objective | trials (failed) | distinct binaries | de-duplicated | baseline | best "
        "| best flags | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for kernel, arch, metrics in CASES:
        res, wall = _timed_tune(kernel, arch, metrics, args)
        s = res.stats
        best = res.best[0]
        base = res.baseline.values if res.baseline else None
        fmt = ", ".join
        if len(metrics) > 1:
            front = sorted(res.best, key=lambda t: t.values)
            found = "Pareto front: " + "; ".join(f"({fmt(f'{v:g}' for v in t.values)})" for t in front)
        else:
            found = fmt(f"{v:g}" for v in best.values)
        flags = " ".join(best.user_attrs.get("flags", [])) or "(none)"
        print(
            f"| {kernel} | {arch} | {fmt(metrics)} | {s['trials']} ({s['failed']}) | {s['distinct_binaries']} | "
            f"{s['reused_measurements']} | {fmt(f'{v:g}' for v in base) if base else '-'} | {found} | "
            f"`{flags}` | {wall:.0f} |",
            flush=True,
        )


def _timed_tune(kernel: str, arch: str, metrics: list[str], args: argparse.Namespace) -> tuple[Any, float]:
    """Tune one example kernel in a throw-away study; (the result, wall seconds)."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = TuneConfig(
            kernel=ROOT / "examples" / kernel / f"{kernel}.{arch}.ptx",
            arch=arch,
            minimize=metrics,
            trials=args.trials,
            seed=args.seed,
            storage=f"sqlite:///{tmp}/s.db",
            acf=Path(tmp) / "best.acf",
            workdir=Path(tmp) / "work",
            progress=False,
        )
        start = time.monotonic()
        res = tune(cfg)
        return res, time.monotonic() - start


def work_table(args: argparse.Namespace) -> None:
    print(
        "| kernel | arch | objective | sampler | trials | compiles run | compiles skipped | predictions "
        "checked (wrong) | distinct binaries | best | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for kernel, arch, metrics in [CASES[int(i)] for i in args.cases.split(",")]:
        for variant in ("binary-aware", "unaware"):
            if variant == "unaware":  # make_sampler drops None-valued knobs: build it directly
                tune_module.make_sampler = lambda n, **kw: GeneticSampler(binary_attr=None, **kw)
            else:
                tune_module.make_sampler = make_sampler
            res, wall = _timed_tune(kernel, arch, metrics, args)
            w = res.stats["work_saved"]
            if len(metrics) > 1:
                best = f"{len(res.best)} Pareto points, first " + ", ".join(
                    f"{v:g}" for v in sorted(t.values for t in res.best)[0]
                )
            else:
                best = ", ".join(f"{v:g}" for v in res.best[0].values)
            print(
                f"| {kernel} | {arch} | {', '.join(metrics)} | {variant} | {w['trials']} | {w['compiles_run']} | "
                f"{w['compiles_skipped']} ({100 * w['compiles_skipped'] / w['trials']:.0f}%) | "
                f"{w['predictions_checked']} ({w['predictions_wrong']}) | {w['distinct_binaries']} | {best} | "
                f"{wall:.0f} |",
                flush=True,
            )
    tune_module.make_sampler = make_sampler


if __name__ == "__main__":
    main()
