"""Tune every example kernel with the real ptxas (64 trials each) and print a Markdown table.

    python benchmarks/tune_examples.py [--trials 64] [--seed 0] > /tmp/tune_examples.md

Each run uses a fresh SQLite study in a temporary directory and the default GeneticSampler.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

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
    args = parser.parse_args()
    print(
        "| kernel | arch | objective | trials (failed) | distinct binaries | de-duplicated | baseline | best "
        "| best flags | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for kernel, arch, metrics in CASES:
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
            wall = time.monotonic() - start
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


if __name__ == "__main__":
    main()
